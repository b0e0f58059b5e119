"""The integrations against the frameworks' own first-party backends, side by side.

    .venv/bin/python bench/integrations.py [--rounds 7] [--ops 200] [--postgres-url URL]

Contenders, per engine, on fresh databases of their own:

* eventsourcing: ``DurastateApplicationRecorder`` against eventsourcing's
  own ``SQLiteApplicationRecorder`` (``eventsourcing.sqlite``) and
  ``PostgresApplicationRecorder`` (``eventsourcing.postgres``), both built
  by their factories with default settings;
* huey: ``DurastateStorage`` (leasing dequeue, settled like
  ``DurastateHuey.execute`` does: ``ack_later``, so each dequeue commits the
  previous task's ack with its claim; and with ``lease=None``, huey's own
  destructive dequeue) against huey's ``SqliteStorage`` and
  ``PostgresStorage`` (``blocking=False``, destructive dequeue). Every huey
  op runs on one queue on each side (the peer's ``bench``; durastate's
  leased and ``lease=None`` storages both name it): each cycle's dequeue
  takes the head of a queue the enqueue op left ``--ops`` x ``--rounds``
  items deep. (Until 2026-12-06 durastate's ``lease=None`` cycles ran on a
  queue of their own, empty between cycles, so each popped the row it had
  just appended while the peer's popped the oldest: a different workload,
  which at exactly 1,400 items split and merged a b-tree leaf every cycle.)

On SQLite durastate runs with ``durability="full"`` by default, the
peers' default (``synchronous=FULL``); ``--durability normal`` shows
durastate's own default.

Each round times every operation for every contender (the order of the
contenders alternates by round; ``--block N`` alternates them every N
calls within the round instead, so both see the same load on a busy
machine); the figure is the median over rounds of
the per-round ratio durastate / peer (> 1: durastate faster). PostgreSQL
runs when ``--postgres-url`` or ``DURASTATE_TEST_POSTGRES_URL`` names a
server; each contender gets a fresh schema there, dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eventsourcing.persistence import InfrastructureFactory, StoredEvent
from huey.storage import PostgresStorage, SqliteStorage

import durastate
from _race import postgres_schema
from durastate.integrations.eventsourcing import DurastateApplicationRecorder
from durastate.integrations.huey import DurastateStorage

Op = Callable[[int], None]
PAYLOAD = b"x" * 200


def eventsourcing_ops(recorder: Any) -> dict[str, Op]:
    originators = [uuid.uuid4() for _ in range(20)]
    for originator in originators:  # something to read
        recorder.insert_events([StoredEvent(originator, v, "topic", PAYLOAD) for v in range(10)])

    def insert1(i: int) -> None:
        recorder.insert_events([StoredEvent(uuid.uuid4(), 1, "topic", PAYLOAD)])

    def insert10(i: int) -> None:
        originator = uuid.uuid4()
        recorder.insert_events([StoredEvent(originator, v, "topic", PAYLOAD) for v in range(10)])

    def select_events(i: int) -> None:
        assert len(recorder.select_events(originators[i % 20])) == 10

    def notifications(i: int) -> None:
        assert len(recorder.select_notifications(start=1 + (i % 100), limit=100)) == 100

    return {
        "es insert 1 event": insert1,
        "es insert 10 events": insert10,
        "es select_events (10)": select_events,
        "es notifications page (100)": notifications,
    }


def huey_ops(storage: Any, destructive: Any) -> dict[str, Op]:
    """``destructive``: the same storage with huey's delete-on-dequeue (``lease=None``; the peer itself)."""

    def enqueue(i: int) -> None:
        storage.enqueue(PAYLOAD)

    def cycle(i: int) -> None:
        storage.enqueue(PAYLOAD)
        assert storage.dequeue() == PAYLOAD
        claim = storage.take_claim() if isinstance(storage, DurastateStorage) else None
        if claim is not None:
            # What DurastateHuey.execute does when the task ran: the ack is
            # committed by the next dequeue, in one transaction with its claim.
            # (Code from before ack_later acked at once: kept so this script
            # measures it side by side.)
            settle = getattr(storage, "ack_later", None)
            if settle is not None:
                settle(claim)
            else:
                claim.ack()

    def cycle_destructive(i: int) -> None:
        destructive.enqueue(PAYLOAD)
        assert destructive.dequeue() == PAYLOAD

    def result(i: int) -> None:
        key = f"result-{i}"
        storage.put_data(key, PAYLOAD)
        assert storage.pop_data(key) == PAYLOAD

    return {
        "huey enqueue": enqueue,
        "huey enqueue+dequeue+ack (lease)": cycle,
        "huey enqueue+dequeue, lease=None": cycle_destructive,
        "huey put+pop result": result,
    }


def contenders(
    engine: str, stack: ExitStack, folder: Path, pg_url: str | None, durability: str, analyze: bool
) -> dict[str, dict[str, dict[str, Op]]]:
    """{group: {contender: {op: fn}}} for one engine."""
    if engine == "sqlite":
        ours_es = stack.enter_context(durastate.open(folder / "es-durastate.db", durability=durability))
        peer_es = InfrastructureFactory.construct(
            {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(folder / "es-peer.db")}
        )
        huey_store = stack.enter_context(durastate.open(folder / "huey-durastate.db", durability=durability))
        peer_huey = SqliteStorage("bench", filename=str(folder / "huey-peer.db"))
    else:
        assert pg_url is not None
        url_a, _ = stack.enter_context(postgres_schema(pg_url))
        _, schema_b = stack.enter_context(postgres_schema(pg_url))
        url_c, _ = stack.enter_context(postgres_schema(pg_url))
        url_d, _ = stack.enter_context(postgres_schema(pg_url))
        parts = urlsplit(pg_url)
        ours_es = stack.enter_context(durastate.open(url_a))
        peer_es = InfrastructureFactory.construct(
            {
                "PERSISTENCE_MODULE": "eventsourcing.postgres",
                "POSTGRES_DBNAME": parts.path.lstrip("/") or "postgres",
                "POSTGRES_HOST": parts.hostname or "127.0.0.1",
                "POSTGRES_PORT": str(parts.port or 5432),
                "POSTGRES_USER": parts.username or "postgres",
                "POSTGRES_PASSWORD": parts.password or "",
                "POSTGRES_SCHEMA": schema_b,
            }
        )
        huey_store = stack.enter_context(durastate.open(url_c))
        peer_huey = PostgresStorage("bench", dsn=url_d, blocking=False)
    stack.callback(peer_es.close)
    stack.callback(peer_huey.close)
    groups = {
        "eventsourcing": {
            "durastate": eventsourcing_ops(DurastateApplicationRecorder(ours_es)),
            "peer": eventsourcing_ops(peer_es.application_recorder()),
        },
        "huey": {
            "durastate": huey_ops(
                DurastateStorage("bench", store=huey_store), DurastateStorage("bench", store=huey_store, lease=None)
            ),
            "peer": huey_ops(peer_huey, peer_huey),
        },
    }
    if engine == "postgres" and analyze:
        _analyze([url_a, url_c, url_d, pg_url], schema_b)
    return groups


def _analyze(urls: list[str], peer_schema: str) -> None:
    """ANALYZE every table of the benchmark's schemas (what autovacuum does on a default server)."""
    import psycopg

    for url in urls:
        with psycopg.connect(url, autocommit=True) as conn:
            schema = peer_schema if url == urls[-1] else conn.execute("SELECT current_schema()").fetchone()[0]
            tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
            for (table,) in tables:
                conn.execute(f'ANALYZE "{schema}"."{table}"')


def rates(fns: dict[str, Op], ops: int, block: int) -> dict[str, float]:
    """Calls per second of each contender over ``ops`` calls, run in alternating blocks of ``block`` calls.

    Short blocks put both contenders under the same load: on a shared
    machine the load moves within a round, and whole-round timings then
    compare different loads.
    """
    spent = dict.fromkeys(fns, 0.0)
    order = list(fns)
    done = 0
    while done < ops:
        n = min(block, ops - done)
        for name in order:
            fn = fns[name]
            start = time.perf_counter()
            for i in range(done, done + n):
                fn(i)
            spent[name] += time.perf_counter() - start
        order.reverse()
        done += n
    return {name: ops / seconds for name, seconds in spent.items()}


def rate(fn: Op, ops: int) -> float:
    start = time.perf_counter()
    for i in range(ops):
        fn(i)
    return ops / (time.perf_counter() - start)


def run(
    engine: str,
    rounds: int,
    ops: int,
    pg_url: str | None,
    durability: str,
    analyze: bool = False,
    block: int | None = None,
) -> None:
    with tempfile.TemporaryDirectory(prefix="durastate-bench-") as folder, ExitStack() as stack:
        groups = contenders(engine, stack, Path(folder), pg_url, durability, analyze)
        rows = []
        for group in groups.values():
            for op in group["durastate"]:
                ratios, ours_rates, peer_rates = [], [], []
                for r in range(rounds):
                    order = ("durastate", "peer") if r % 2 == 0 else ("peer", "durastate")
                    if block is None:
                        got = {name: rate(group[name][op], ops) for name in order}
                    else:
                        got = rates({name: group[name][op] for name in order}, ops, block)
                    ours_rates.append(got["durastate"])
                    peer_rates.append(got["peer"])
                    ratios.append(got["durastate"] / got["peer"])
                rows.append(
                    (op, statistics.median(ours_rates), statistics.median(peer_rates), statistics.median(ratios))
                )
        setting = f", durastate durability={durability!r}" if engine == "sqlite" else ""
        setting += ", tables ANALYZEd after setup" if analyze and engine == "postgres" else ""
        setting += f", alternating blocks of {block} calls" if block is not None else ""
        print(f"\n## {engine}: durastate vs the framework's own backend ({rounds} rounds x {ops} calls{setting})\n")
        print(f"{'op':32} {'durastate/s':>12} {'peer/s':>10} {'ds/peer':>8}")
        for op, ours, peer, ratio in rows:
            print(f"{op:32} {ours:12.0f} {peer:10.0f} {ratio:8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--postgres-url", default=os.environ.get("DURASTATE_TEST_POSTGRES_URL"))
    parser.add_argument(
        "--durability",
        default="full",
        choices=["full", "normal"],
        help="durastate's SQLite durability; 'full' matches the peers' defaults (synchronous=FULL)",
    )
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="PostgreSQL: ANALYZE the tables after setup, as autovacuum would (default: fresh tables, no statistics)",
    )
    parser.add_argument(
        "--block",
        type=int,
        default=None,
        help="alternate the contenders every BLOCK calls within a round (default: each runs its whole round in turn)",
    )
    args = parser.parse_args()
    if args.block is not None and args.block < 1:
        parser.error("--block must be >= 1")
    print(f"# python {sys.version.split()[0]}, {os.cpu_count()} cpus, durastate {durastate.__version__}")
    run("sqlite", args.rounds, args.ops, None, args.durability, block=args.block)
    if args.postgres_url:
        run("postgres", args.rounds, args.ops, args.postgres_url, args.durability, args.analyze, args.block)
    else:
        print("\n(PostgreSQL skipped: no --postgres-url / DURASTATE_TEST_POSTGRES_URL)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
