"""Round trips of writes in the Citus statement mode, counted on the wire (the tests' relay), on any server.

    .venv/bin/python bench/citus_round_trips.py [--url postgresql://postgres@127.0.0.1:9700/postgres] [--plain]

Opens a store in a fresh schema (distributed when the server is a Citus
coordinator with ``citus.enable_schema_based_sharding`` on) through
``tests/postgres/proxy.py``'s relay with one pooled connection, and counts
the round trips of a transaction that pushes and puts, a push alone and a
claim with its nack (each run twice first: prepared statements).
``--time N``: also the wall time of N pushes of one item, one after
another (median microseconds over ``--rounds``), without the relay.
``--plain`` opens it in the plain mode (``postgresql://``, triggers: not on
a Citus coordinator, whose distributed tables refuse them) for comparison. Counts, not times:
they do not depend on load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import durastate
from durastate.testing import postgres_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))
from proxy import CuttingProxy  # the tests' relay (tests/ is not a package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:9700/postgres")
    parser.add_argument("--plain", action="store_true", help="the plain mode (postgresql://) instead")
    parser.add_argument("--time", type=int, default=0, metavar="N", help="also time N pushes of one item")
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
                rounds = []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    for _ in range(args.time):
                        store.queues.push("timed", [b"x"])
                    rounds.append((time.perf_counter() - started) / args.time * 1e6)
            print(f"push of one item: {statistics.median(rounds):.0f} us (rounds {min(rounds):.0f}-{max(rounds):.0f})")
    finally:
        relay.close()
        postgres_server.drop_schema(args.url, schema)


if __name__ == "__main__":
    main()
