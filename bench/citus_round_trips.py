"""Round trips of writes in the Citus statement mode, counted on the wire (the tests' relay), on any server.

    .venv/bin/python bench/citus_round_trips.py [--url postgresql://postgres@127.0.0.1:9700/postgres] [--plain]

Opens a store in a fresh schema (distributed when the server is a Citus
coordinator with ``citus.enable_schema_based_sharding`` on) through
``tests/postgres/proxy.py``'s relay with one pooled connection, and counts
the round trips of a transaction that pushes and puts, a push alone and a
claim with its nack (each run twice first: prepared statements).
``--time N``: also the wall time of N calls, one after another, of a push
of one item, a claim with its ack, a ``kv.put``, a counter add and an event appended (median
microseconds a call over ``--rounds``, the four taking turns), without the
relay; then raw psycopg's upsert on the same table alone in autocommit and
with an attempt row in one pipelined transaction (the raw client's best,
without and with durastate's guarantee).
``--plain`` opens it in the plain mode (``postgresql://``, triggers: not on
a Citus coordinator, whose distributed tables refuse them) for comparison. Counts, not times:
they do not depend on load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

import durastate
from durastate.testing import postgres_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))
from proxy import CuttingProxy  # the tests' relay (tests/ is not a package)

RAW_PUT = (
    "INSERT INTO ds_kv (scope, ns, key, value, expires_at) VALUES (%s, %s, %s, %s, NULL)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = NULL"
)
RAW_ATTEMPT = "INSERT INTO ds_attempt (id, created_at) VALUES (%s, %s)"


def time_calls(timed: dict[str, Callable[[], object]], rounds: int, calls: int) -> dict[str, list[float]]:
    """Microseconds a call of each of ``timed``, a value a round; the operations take turns within a round."""
    taken: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(rounds):
        for name, operation in timed.items():
            started = time.perf_counter()
            for _ in range(calls):
                operation()
            taken[name].append((time.perf_counter() - started) / calls * 1e6)
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:9700/postgres")
    parser.add_argument("--plain", action="store_true", help="the plain mode (postgresql://) instead")
    parser.add_argument("--time", type=int, default=0, metavar="N", help="also time N calls of each write")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    direct, schema = postgres_server.create_schema(args.url)
    parts = urlsplit(direct)
    relay = CuttingProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    query = parts.query + ("&" if parts.query else "") + "sslmode=disable&gssencmode=disable"  # the relay reads it
    relayed = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{relay.port}", query=query))
    mode = (lambda url: url) if args.plain else postgres_server.as_citus
    try:
        durastate.open(mode(direct)).close()
        with durastate.open(mode(relayed), min_connections=1, max_connections=1) as store:

            def round_trips(operation: Callable[[], object]) -> int:
                for _ in range(2):
                    operation()
                before = relay.flights
                operation()
                return relay.flights - before

            def push_and_put() -> None:
                with store.transaction():
                    store.queues.push("jobs", [b"a"])
                    store.kv.put(b"s", b"n", b"k", b"v")

            def nack() -> None:
                claim = store.queues.claim("jobs")
                assert claim is not None
                claim.nack()

            print(f"# {'plain' if args.plain else 'Citus'} mode on {args.url}, round trips an operation")
            print("transaction (push + put):", round_trips(push_and_put))
            print("push alone:              ", round_trips(lambda: store.queues.push("jobs", [b"x"])))
            print("claim + nack:            ", round_trips(nack))
        if args.time:
            with durastate.open(mode(direct)) as store:
                queues, kv = store.queues, store.kv

                def claim_ack() -> None:
                    claim = queues.claim("timed")
                    assert claim is not None
                    claim.ack()

                timed: dict[str, Callable[[], object]] = {
                    "push of one item": lambda: queues.push("timed", [b"x"]),
                    "claim + ack": claim_ack,
                    "kv.put": lambda: kv.put(b"s", b"n", b"k", b"v"),
                    "counter add (kv.incr)": lambda: kv.incr(b"s", b"n", b"c"),
                    "events.append of one event": lambda: store.events.append("timed", [{"type": "t"}]),
                }
                medians = time_calls(timed, args.rounds, args.time)
                # The raw client's best on the same table: the upsert alone (no record of the attempt), and at
                # durastate's guarantee (an attempt row in the same transaction, all in one pipelined flight).
                with psycopg.connect(direct, autocommit=True) as raw:

                    def raw_put() -> None:
                        raw.execute(RAW_PUT, (b"s", b"n", b"k", b"v"))

                    def raw_recorded_put() -> None:
                        with raw.pipeline():
                            raw.execute("BEGIN")
                            raw.execute(RAW_ATTEMPT, (os.urandom(16), int(time.time() * 1000)))
                            raw.execute(RAW_PUT, (b"s", b"n", b"k", b"v"))
                            raw.execute("COMMIT")

                    raw_timed = {
                        "raw psycopg upsert alone": raw_put,
                        "raw psycopg attempt row + upsert": raw_recorded_put,
                    }
                    medians.update(time_calls(raw_timed, args.rounds, args.time))
            for name, rounds in medians.items():
                print(f"{name}: {statistics.median(rounds):.0f} us (rounds {min(rounds):.0f}-{max(rounds):.0f})")
    finally:
        relay.close()
        postgres_server.drop_schema(args.url, schema)


if __name__ == "__main__":
    main()
