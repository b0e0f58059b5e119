"""store.events writes on PostgreSQL: microseconds per call, for the round trips each costs.

    DURASTATE_BENCH_POSTGRES_URL=postgresql://... PYTHONPATH=<tree>/src .venv/bin/python bench/events_round_trips.py
        [--calls 300] [--rounds 3]

A fresh store (a random table prefix, its tables dropped at the end) per run, in the database of
DURASTATE_BENCH_POSTGRES_URL (default: the local server); PYTHONPATH picks the tree measured. One pooled
connection, as tests/postgres/test_events_round_trips.py counts them. Each operation runs --calls times per
round after a warm-up (its statements prepared), whatever it needs made first (claims, dead letters) made
untimed before each call; the median call of all rounds is reported, with the lowest round's median beside it.
The operations are those the round-trip tests count (their counts on main, then this tree's, are in
bench/RESULTS-events.md). --sqlite: the same operations on a SQLite file in a temporary folder (whose path
must not slow down).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

import psycopg

import durastate
from _postgres import postgres_url

# An operation: made ready (untimed), then called (timed).
Operation = tuple[Callable[[], object], Callable[[], object]]


def operations(store: durastate.Store) -> dict[str, Operation]:
    events = store.events
    counter = itertools.count()

    def nothing() -> None:
        return None

    def claimed(session: str, count: int) -> list[tuple[int, int]]:
        events.append(session, [{"type": "t"} for _ in range(count)])
        return [(e.index, e.attempt_count) for e in events.claim_available(session, "w", ttl_ms=600_000).events]

    state: dict[str, object] = {}

    def ready_claim() -> None:
        state["claim"] = claimed("claims", 1)[0]

    def complete_with_child() -> object:
        index, attempt = state["claim"]  # type: ignore[misc]
        return events.complete_attempt("claims", index, attempt, [{"type": "c", "id": f"child-{next(counter)}"}])

    def fail() -> object:
        index, attempt = state["claim"]  # type: ignore[misc]
        return events.fail_attempt("claims", index, attempt, "boom", 1)

    def ready_renewals() -> None:
        state["renew"] = [{"index": i, "attempt": a} for i, a in claimed("renewals", 2)]

    def ready_dead_letter() -> None:
        index, attempt = claimed("dead", 1)[0]
        events.fail_attempt("dead", index, attempt, "boom", 1)

    def ready_event() -> None:
        events.append("ready", [{"type": "t"}])

    events.append("snapshots", [{"type": "t"}])
    snapshot_index = itertools.count(1)

    def put_snapshot() -> object:
        index = next(snapshot_index)
        events.append("snapshots", [{"type": "t"}])  # untimed in effect: one more event than snapshots taken
        return index

    def timed_snapshot() -> object:
        return events.put_snapshot("snapshots", "r", state["snapshot"], {"n": 1})  # type: ignore[arg-type]

    def ready_snapshot() -> None:
        state["snapshot"] = put_snapshot()

    return {
        "append 1, new session": (nothing, lambda: events.append(f"new-{next(counter)}", [{"type": "t"}])),
        "append 1, existing": (nothing, lambda: events.append("s", [{"type": "t"}])),
        "append 3, existing": (nothing, lambda: events.append("s", [{"type": "t"}] * 3)),
        "append 1 with an id": (nothing, lambda: events.append("s", [{"type": "t", "id": f"id-{next(counter)}"}])),
        "append 1 in a lane": (nothing, lambda: events.append("s", [{"type": "t", "lane": "l"}])),
        "complete, one child": (ready_claim, complete_with_child),
        "renew 2 claims": (ready_renewals, lambda: events.renew_claims("renewals", "w", state["renew"], ttl_ms=60_000)),  # type: ignore[arg-type]
        "fail": (ready_claim, fail),
        "put_snapshot": (ready_snapshot, timed_snapshot),
        "claim_available": (ready_event, lambda: events.claim_available("ready", "w", ttl_ms=60_000)),
        "redrive(session)": (ready_dead_letter, lambda: events.redrive("dead")),
    }


def measure(store: durastate.Store, calls: int, rounds: int) -> None:
    ops = operations(store)
    for ready, call in ops.values():  # warm-up: every statement prepared on the one connection
        for _ in range(3):
            ready()
            call()
    print(f"{'operation':24} {'median us':>10} {'best round':>11}")
    for name, (ready, call) in ops.items():
        medians = []
        every: list[float] = []
        for _ in range(rounds):
            times = []
            for _ in range(calls):
                ready()
                start = time.perf_counter()
                call()
                times.append((time.perf_counter() - start) * 1e6)
            medians.append(statistics.median(times))
            every += times
        print(f"{name:24} {statistics.median(every):10.0f} {min(medians):11.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true", help="the same operations on a SQLite file instead")
    args = parser.parse_args()
    if args.sqlite:
        with tempfile.TemporaryDirectory() as tmp, durastate.open(os.path.join(tmp, "bench.db")) as store:
            measure(store, args.calls, args.rounds)
        return
    url = postgres_url()
    prefix = "b" + uuid.uuid4().hex[:8] + "_"
    try:
        with durastate.open(url, prefix=prefix, min_connections=1, max_connections=1) as store:
            measure(store, args.calls, args.rounds)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (prefix + "%",))
            ]
            for table in tables:
                conn.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')


if __name__ == "__main__":
    main()
