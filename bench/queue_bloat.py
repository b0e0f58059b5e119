"""PostgreSQL queue claims under an old snapshot, and under a backlog (issue 26, pains 5 and 8).

    DURASTATE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/queue_bloat.py [--settled 200000] [--ready 0]
        [--idle-in-transaction] [--engine postgres|sqlite] [--claims 300]

Two queues side by side in one store: ``fresh`` (nothing ever passed
through it) and ``used``, through which ``--settled`` items have passed
(pushed, then settled: deleted, as ack does; in bulk, the same rows and
index entries claim/ack leave). With ``--idle-in-transaction`` another
session opens a transaction and reads before the items are settled, and
stays idle in it for the whole run: PostgreSQL can then remove none of the
dead rows (the xmin horizon), the peers' "queue slows 5x" case. ``--ready``
items wait in ``used`` (the backlog of pain 8; ``fresh`` stays empty:
each timed claim takes the item pushed just before it there, and the
backlog's head in ``used``). Reported: claim+ack
latency p50/p99 on each queue (alternating, ``--claims`` each) and their
ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import durastate
from durastate.engines.base import READ, WRITE


def settle_in_bulk(store: durastate.Store, queue: bytes, count: int) -> None:
    """``count`` items through ``queue``: inserted and deleted in batches, as push then ack leave them."""
    engine = store.engine
    insert = engine.sql(WRITE("INSERT INTO {p}queue (queue, payload, available_at, created_at) VALUES (?, ?, ?, ?)"))
    delete = engine.sql(WRITE("DELETE FROM {p}queue WHERE queue = ? AND id <= ?"))
    last = engine.sql(READ("SELECT max(id) FROM {p}queue WHERE queue = ?"))
    now = engine.now_ms()
    batch = 10_000
    for start in range(0, count, batch):
        with store.transaction():
            engine.executemany(insert, [(queue, b"x" * 64, now - count + start + i, now) for i in range(batch)])
        row = engine.one(last, (queue,))
        engine.execute(delete, (queue, row[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settled", type=int, default=200_000)
    parser.add_argument("--ready", type=int, default=0)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--idle-in-transaction", action="store_true")
    parser.add_argument("--engine", choices=("postgres", "sqlite"), default="postgres")
    args = parser.parse_args()
    if args.engine == "postgres":
        base = os.environ["DURASTATE_BENCH_POSTGRES_URL"]
        import psycopg

        schema = f"bloat_{os.getpid()}"
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        url = f"{base}?options=-csearch_path%3D{schema}"
    else:
        folder = tempfile.mkdtemp()
        url = os.path.join(folder, "bloat.db")
    store = durastate.open(url)
    holder = None
    try:
        store.queues.push("fresh", [b"warm"])
        store.queues.push("used", [b"warm"])
        if args.idle_in_transaction and args.engine == "postgres":
            import psycopg

            holder = psycopg.connect(url)
            holder.execute("SELECT txid_current()").fetchone()  # an xid, kept: idle in transaction
        settle_in_bulk(store, b"used", args.settled)
        for start in range(0, args.ready, 10_000):  # the backlog waits in `used` only: `fresh` stays empty
            store.queues.push("used", [b"r"] * min(10_000, args.ready - start))
        timings: dict[str, list[float]] = {"fresh": [], "used": []}
        for i in range(args.claims * 2):
            name = ("fresh", "used")[i % 2]
            store.queues.push(name, [b"item"])
            start = time.perf_counter()
            claim = store.queues.claim(name, lease=30)
            assert claim is not None
            claim.ack()
            timings[name].append(time.perf_counter() - start)
        for name, values in timings.items():
            values.sort()
            print(
                f"{args.engine} {name:5s}: claim+ack p50 {statistics.median(values) * 1000:7.2f} ms"
                f"  p99 {values[int(len(values) * 0.99)] * 1000:7.2f} ms"
            )
        ratio = statistics.median(timings["used"]) / statistics.median(timings["fresh"])
        print(
            f"settled {args.settled}, ready {args.ready}, idle in transaction {args.idle_in_transaction}:"
            f" used/fresh p50 {ratio:.2f}x"
        )
    finally:
        if holder is not None:
            holder.close()
        store.close()
        if args.engine == "postgres":
            with psycopg.connect(base, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
