"""Benchmark of store.events against the raw driver running the same statements.

    .venv/bin/python bench/events.py [--postgres URL] [--rounds 5] [--ops 300]

Operations, each timed per call, medians of interleaved rounds:

* append: one event (no id) to a session: durastate vs raw sqlite3 /
  psycopg executing the very statement texts the facet compiled (read from
  the facet object), in the same transaction shape.
* claim+complete: claim one ready event (``claim_available(limit=1)``) and
  complete it without children.
* claim latency flatness: the claim+complete cycle in a session that also
  holds 1e3 versus 1e5 processed events (target: at most 1.5x).

SQLite runs on a file in a temporary folder; PostgreSQL on --postgres (or
DURASTATE_BENCH_POSTGRES_URL / postgresql://postgres@127.0.0.1:5432/postgres
when reachable) in a throwaway schema.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import durastate

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


def timed(fn: Callable[[], None], ops: int) -> float:
    start = time.perf_counter()
    for _ in range(ops):
        fn()
    return (time.perf_counter() - start) / ops


class Raw:
    """The facet's compiled statements, executed by the bare driver."""

    def __init__(self, store: durastate.Store, conn: Any, begin: str) -> None:
        self.ev = store.events
        self.conn = conn
        self.begin = begin
        self.clock = store.engine.now_ms
        self.no_limit = store.engine.dialect.no_limit

    def _tx(self, body: Callable[[Any], None]) -> None:
        cur = self.conn.cursor()
        cur.execute(self.begin)
        try:
            body(cur)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def append(self, session: str) -> None:
        ev = self.ev
        now = self.clock()

        def body(cur: Any) -> None:
            cur.execute(ev._lock_session, (session,))
            row = cur.fetchone()
            last = row[0]
            event_id = str(uuid.uuid4())
            cur.execute(
                ev._insert_event,
                (
                    session,
                    last + 1,
                    event_id,
                    "t",
                    b'{"n":1}',
                    now,
                    None,
                    None,
                    None,
                    None,
                    None,
                    session,
                    None,
                    now,
                    None,
                ),
            )
            cur.fetchall()
            cur.execute(ev._set_last_index, (last + 1, session))

        self._tx(body)

    def claim_complete(self, session: str) -> None:
        ev = self.ev
        now = self.clock()
        found: list[Any] = []

        def claim(cur: Any) -> None:
            cur.execute(ev._claim_session, (now, now, "raw", now + 60_000, now + 60_000, session, now, session, now, 1))
            found.extend(cur.fetchall())

        self._tx(claim)
        row = found[0]

        def complete(cur: Any) -> None:
            cur.execute(ev._lock_session, (session,))
            cur.fetchall()
            cur.execute(ev._get_event_locked, (session, row[1]))
            cur.fetchall()
            cur.execute(ev._mark_processed, (now, row[15], "[]", session, row[1]))

        self._tx(complete)


def ds_append(store: durastate.Store, session: str) -> None:
    store.events.append(session, [{"type": "t", "payload": {"n": 1}}])


def ds_claim_complete(store: durastate.Store, session: str) -> None:
    (e,) = store.events.claim_available(session, "ds", ttl_ms=60_000, limit=1).events
    store.events.complete_attempt(session, e.index, e.attempt_count)


def fill(store: durastate.Store, session: str, processed: int, pending: int) -> None:
    for start in range(0, processed, 1000):
        store.events.append(
            session, [{"type": "old", "payload": i, "settled": True} for i in range(min(1000, processed - start))]
        )
    for start in range(0, pending, 1000):
        store.events.append(session, [{"type": "t", "payload": i} for i in range(min(1000, pending - start))])


def run_engine(
    name: str, url: str, raw_conn: Callable[[durastate.Store], Any], begin: str, rounds: int, ops: int
) -> list[str]:
    store = durastate.open(url)
    raw = Raw(store, raw_conn(store), begin)
    results: dict[str, list[float]] = {}
    for session in ("a-ds", "a-raw"):
        store.events.append(session, [{"type": "seed", "payload": 0}])
    # Claim sessions: enough pending events for every round.
    need = rounds * ops + 10
    fill(store, "c-ds", 0, need)
    fill(store, "c-raw", 0, need)
    fill(store, "small", 1_000, need)
    fill(store, "large", 100_000, need)
    for _ in range(rounds):
        for key, fn in (
            ("append ds", lambda: ds_append(store, "a-ds")),
            ("append raw", lambda: raw.append("a-raw")),
            ("cycle ds", lambda: ds_claim_complete(store, "c-ds")),
            ("cycle raw", lambda: raw.claim_complete("c-raw")),
            ("cycle 1e3", lambda: ds_claim_complete(store, "small")),
            ("cycle 1e5", lambda: ds_claim_complete(store, "large")),
        ):
            results.setdefault(key, []).append(timed(fn, ops))
    store.close()
    med = {k: statistics.median(v) for k, v in results.items()}
    lines = [
        f"| {name} | append | {med['append ds'] * 1e6:.0f} us | {med['append raw'] * 1e6:.0f} us |"
        f" {med['append raw'] / med['append ds']:.2f}x |",
        f"| {name} | claim+complete | {med['cycle ds'] * 1e6:.0f} us | {med['cycle raw'] * 1e6:.0f} us |"
        f" {med['cycle raw'] / med['cycle ds']:.2f}x |",
        f"| {name} | claim+complete, 1e5 vs 1e3 events in the session | {med['cycle 1e5'] * 1e6:.0f} us |"
        f" {med['cycle 1e3'] * 1e6:.0f} us | {med['cycle 1e5'] / med['cycle 1e3']:.2f}x (1e5/1e3) |",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", default=os.environ.get("DURASTATE_BENCH_POSTGRES_URL", PG_DEFAULT))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print("| engine | operation | durastate | raw driver | ratio (raw time / durastate time) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.db")

        def sqlite_conn(store: durastate.Store) -> Any:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            return conn

        for line in run_engine("sqlite", path, sqlite_conn, "BEGIN IMMEDIATE", args.rounds, args.ops):
            print(line, flush=True)
    if args.no_postgres:
        return
    try:
        import psycopg

        from durastate.testing import postgres_server

        schema_url, schema = postgres_server.create_schema(args.postgres)
    except Exception as exc:
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        return
    try:

        def pg_conn(store: durastate.Store) -> Any:
            return psycopg.connect(schema_url, autocommit=True, prepare_threshold=2)

        for line in run_engine("postgresql", schema_url, pg_conn, "BEGIN", args.rounds, max(50, args.ops // 3)):
            print(line, flush=True)
    finally:
        postgres_server.drop_schema(args.postgres, schema)


if __name__ == "__main__":
    main()
