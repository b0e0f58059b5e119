"""Raw psycopg: its native async against threads, the same work (why ``durastate.aio`` uses threads on PostgreSQL).

    .venv/bin/python bench/pg_async_raw.py [--url URL] [--rounds 8] [--ops 20]

Issue 11 asks for 200 coroutines over a pool of 10 at no less throughput
than 10 threads on the sync API, and names psycopg's native async as an
option. Before building a second (async) engine front end on
``psycopg.AsyncConnection``, this measures what that front end could at best
reach: no durastate at all, only psycopg running the kv facet's two
statements (an upsert and a point read, autocommit, prepared), per pair of
calls:

* ``threads``: 10 threads, each on its own sync ``psycopg.Connection``
  (one cursor reused), ``--ops * 20`` pairs each;
* ``async queue``: 200 coroutines, each taking one of 10
  ``psycopg.AsyncConnection`` from an ``asyncio.Queue`` per statement
  (one cursor per connection reused), ``--ops`` pairs each;
* ``async pool``: the same coroutines on ``psycopg_pool.AsyncConnectionPool``
  (min = max = 10), what a user would reach for.

The contenders take turns, order rotated every round; throughput is pairs
per second, the verdict per contender the geometric mean of its per-round
ratio to ``threads``. Process CPU time per pair is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
import uuid
from typing import Any

import psycopg
import psycopg_pool

PUT = "INSERT INTO {t} (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
GET = "SELECT v FROM {t} WHERE k = %s"
POOL = 10
COROUTINES = 200


def threads(url: str, table: str, pairs: int) -> None:
    put, get = PUT.format(t=table), GET.format(t=table)
    conns = [psycopg.connect(url, autocommit=True, prepare_threshold=0) for _ in range(POOL)]

    def work(n: int) -> None:
        cur = conns[n].cursor()
        for i in range(pairs // POOL):
            key = b"t%d-%d" % (n, i)
            cur.execute(put, (key, b"v"))
            cur.execute(get, (key,))
            assert cur.fetchone() == (b"v",)

    try:
        running = [threading.Thread(target=work, args=(n,)) for n in range(POOL)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    finally:
        for conn in conns:
            conn.close()


async def async_queue(url: str, table: str, pairs: int) -> None:
    put, get = PUT.format(t=table), GET.format(t=table)
    conns = [await psycopg.AsyncConnection.connect(url, autocommit=True, prepare_threshold=0) for _ in range(POOL)]
    idle: asyncio.Queue[psycopg.AsyncCursor[Any]] = asyncio.Queue()
    for conn in conns:
        idle.put_nowait(conn.cursor())

    async def work(n: int) -> None:
        for i in range(pairs // COROUTINES):
            key = b"a%d-%d" % (n, i)
            cur = await idle.get()
            try:
                await cur.execute(put, (key, b"v"))
            finally:
                idle.put_nowait(cur)
            cur = await idle.get()
            try:
                await cur.execute(get, (key,))
                assert await cur.fetchone() == (b"v",)
            finally:
                idle.put_nowait(cur)

    try:
        await asyncio.gather(*(work(n) for n in range(COROUTINES)))
    finally:
        for conn in conns:
            await conn.close()


async def async_pool(url: str, table: str, pairs: int) -> None:
    put, get = PUT.format(t=table), GET.format(t=table)
    async with psycopg_pool.AsyncConnectionPool(
        url, min_size=POOL, max_size=POOL, kwargs={"autocommit": True, "prepare_threshold": 0}, open=False
    ) as pool:
        await pool.wait()

        async def work(n: int) -> None:
            for i in range(pairs // COROUTINES):
                key = b"p%d-%d" % (n, i)
                async with pool.connection() as conn:
                    await conn.execute(put, (key, b"v"))
                async with pool.connection() as conn:
                    cur = await conn.execute(get, (key,))
                    assert await cur.fetchone() == (b"v",)

        await asyncio.gather(*(work(n) for n in range(COROUTINES)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url", default=os.environ.get("DURASTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--ops", type=int, default=20, help="pairs per coroutine")
    args = parser.parse_args()
    pairs = COROUTINES * args.ops
    table = f"bench_raw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (k bytea PRIMARY KEY, v bytea NOT NULL)")
    contenders = {
        "threads": lambda: threads(args.url, table, pairs),
        "async queue": lambda: asyncio.run(async_queue(args.url, table, pairs)),
        "async pool": lambda: asyncio.run(async_pool(args.url, table, pairs)),
    }
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    names = list(contenders)
    try:
        for contender in names:  # warm-up: connections, plans, the table's first pages
            contenders[contender]()
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for contender in order:
                cpu, start = time.process_time(), time.perf_counter()
                contenders[contender]()
                measured[contender].append((pairs / (time.perf_counter() - start), (time.process_time() - cpu) / pairs))
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {table}")
    print(
        f"raw psycopg {psycopg.__version__}, {COROUTINES} coroutines or {POOL} threads, pool of {POOL},"
        f" {pairs} upsert+read pairs per side, {args.rounds} rounds (order rotated)"
    )
    base = measured["threads"]
    for contender, rounds in measured.items():
        ratios = [m[0] / b[0] for m, b in zip(rounds, base, strict=True)]
        print(
            f"{contender:12s} {statistics.median(m[0] for m in rounds):7.0f} pairs/s"
            f"  CPU per pair {statistics.median(m[1] for m in rounds) * 1e6:5.0f} us"
            f"  vs threads {statistics.geometric_mean(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
