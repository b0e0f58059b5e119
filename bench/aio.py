"""durastate.aio against the sync API, side by side in one run (``make bench-aio``).

    .venv/bin/python bench/aio.py [--rounds 15] [--ops 300] [--postgres URL | --no-postgres]

1. **Uncontended SQLite calls**: each operation through ``durastate.open``
   (sync) and through ``durastate.aio.open`` (awaited inside a running
   loop), each on its own fresh file in one folder. Every round makes
   ``--ops`` calls of each contender, taking turns call by call (order
   swapped every call) and timing each call; a round's figure is its median
   call. The table shows the median over rounds of those and of the
   per-round ratio async/sync, with the ratio's range. Target: at most 1.15.
2. **A locked file never stalls the loop**: another *process* takes the
   write lock (``BEGIN IMMEDIATE``) and holds it 2 s; meanwhile a ticker
   coroutine sleeps 10 ms at a time and records how late each wake-up is,
   while 20 coroutines each try a write (which SQLite refuses at once on
   the loop thread, so they move to workers and wait there). Target: no
   tick later than 50 ms; every write lands once the lock is released.
3. **PostgreSQL, 200 coroutines over a pool of 10** (when a server is
   reachable): 200 coroutines each run ``--pg-ops`` put+get pairs through
   ``aio.open(url, max_connections=10)``, against the sync API driven by 10
   threads (one per pool connection) doing the same total work. Target:
   no error, async throughput at least the threaded sync one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import durastate
from durastate import aio

TARGET_RATIO = 1.15
TICK = 0.010
TICK_LATE_LIMIT = 0.050
LOCK_SECONDS = 2.0


def _ops(
    sync: durastate.Store, asy: aio.AsyncStore
) -> dict[str, tuple[Callable[[int], Any], Callable[[int], Awaitable[Any]]]]:
    """Operation name -> (sync call, async call), each taking the call number."""
    sync.kv.put(b"s", b"n", b"hot", b"v" * 100)
    sync.documents.write("doc", {"n": 0})
    value = b"v" * 100

    async def a_cycle(i: int) -> Any:
        await asy.queues.push("q", [value])
        job = await asy.queues.claim("q", lease=30)
        assert job is not None
        await job.ack()

    def both(s: durastate.Store) -> int:
        s.kv.put(b"s", b"t", b"a", value)
        return s.kv.incr(b"s", b"t", b"n")

    def s_cycle(i: int) -> Any:
        sync.queues.push("q", [value])
        job = sync.queues.claim("q", lease=30)
        assert job is not None
        job.ack()

    def s_transact(i: int) -> Any:
        with sync.transaction():
            return both(sync)

    # The async side's own sync store makes the same setup writes.
    asy._store.kv.put(b"s", b"n", b"hot", value)
    asy._store.documents.write("doc", {"n": 0})
    # Each side is a lambda (the async one returns the awaitable it awaits),
    # so neither pays for a wrapper the other does not.
    return {
        "kv.get": (lambda i: sync.kv.get(b"s", b"n", b"hot"), lambda i: asy.kv.get(b"s", b"n", b"hot")),
        "kv.put": (
            lambda i: sync.kv.put(b"s", b"n", b"k%d" % (i % 1000), value),
            lambda i: asy.kv.put(b"s", b"n", b"k%d" % (i % 1000), value),
        ),
        "kv.incr": (lambda i: sync.kv.incr(b"s", b"c", b"n"), lambda i: asy.kv.incr(b"s", b"c", b"n")),
        "queue push+claim+ack": (s_cycle, a_cycle),
        "documents.write": (
            lambda i: sync.documents.write("doc", {"n": i}),
            lambda i: asy.documents.write("doc", {"n": i}),
        ),
        "documents.read": (lambda i: sync.documents.read("doc"), lambda i: asy.documents.read("doc")),
        "events.append": (
            lambda i: sync.events.append("sess", [{"type": "t", "payload": i}]),
            lambda i: asy.events.append("sess", [{"type": "t", "payload": i}]),
        ),
        "transact (put+incr)": (s_transact, lambda i: asy.transact(both)),
    }


async def uncontended(folder: Path, rounds: int, ops: int) -> bool:
    sync = durastate.open(folder / "sync.db")
    asy = await aio.open(folder / "async.db")
    table = _ops(sync, asy)
    ok = True
    print(f"\n1. uncontended SQLite calls ({rounds} rounds x {ops} calls; target async/sync <= {TARGET_RATIO})")
    print(f"{'operation':<24} {'sync us':>9} {'async us':>9} {'ratio':>7} {'range':>13}  verdict")
    for name, (sync_call, async_call) in table.items():
        for i in range(ops):  # warm-up
            sync_call(i)
            await async_call(i)
        sync_times, async_times, ratios = [], [], []
        clock = time.perf_counter_ns
        for r in range(rounds):
            # Call by call, order swapped every call: a noisy moment hits both.
            sync_round, async_round = [], []
            for i in range(ops):
                if (i + r) % 2:
                    t0 = clock()
                    sync_call(i)
                    t1 = clock()
                    await async_call(i)
                    t2 = clock()
                    sync_round.append(t1 - t0)
                    async_round.append(t2 - t1)
                else:
                    t0 = clock()
                    await async_call(i)
                    t1 = clock()
                    sync_call(i)
                    t2 = clock()
                    async_round.append(t1 - t0)
                    sync_round.append(t2 - t1)
            sync_times.append(statistics.median(sync_round) / 1e9)
            async_times.append(statistics.median(async_round) / 1e9)
            ratios.append(async_times[-1] / sync_times[-1])
        ratio = statistics.median(ratios)
        verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
        ok &= verdict == "PASS"
        print(
            f"{name:<24} {statistics.median(sync_times) * 1e6:9.1f} {statistics.median(async_times) * 1e6:9.1f}"
            f" {ratio:7.3f} {min(ratios):6.2f}-{max(ratios):<6.2f}  {verdict}"
        )
    sync.close()
    await asy.close()
    return ok


_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


async def locked(folder: Path) -> bool:
    path = folder / "locked.db"
    durastate.open(path).close()
    asy = await aio.open(path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), str(LOCK_SECONDS)], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    await asyncio.to_thread(holder.stdout.readline)  # "held"
    late: list[float] = []
    stop = False

    async def ticker() -> None:
        while not stop:
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            late.append(time.perf_counter() - before - TICK)

    ticks = asyncio.create_task(ticker())
    started = time.perf_counter()
    writes = await asyncio.gather(*(asy.kv.put(b"s", b"n", b"w%d" % i, b"v") for i in range(20)))
    waited = time.perf_counter() - started
    stop = True
    await ticks
    await asyncio.to_thread(holder.wait)
    landed = len([k async for k, _ in asy.kv.scan(b"s", b"n")])
    await asy.close()
    worst = max(late)
    ok = worst <= TICK_LATE_LIMIT and landed == len(writes) == 20
    print(f"\n2. another process holds the write lock {LOCK_SECONDS:.0f} s; ticker every {TICK * 1000:.0f} ms")
    print(
        f"ticks {len(late)}, latest {worst * 1000:.1f} ms, median {statistics.median(late) * 1000:.2f} ms"
        f" (limit {TICK_LATE_LIMIT * 1000:.0f} ms); 20 writes waited {waited:.2f} s, {landed} landed"
        f"  {'PASS' if ok else 'FAIL'}"
    )
    return ok


async def postgres(url: str, coroutines: int, pool: int, ops: int) -> bool:
    schema_prefix = f"b{uuid.uuid4().hex[:8]}_"
    asy = await aio.open(url, prefix=schema_prefix, max_connections=pool)
    sync = durastate.open(url, prefix=schema_prefix + "s", max_connections=pool)
    total = coroutines * ops

    async def worker(n: int) -> None:
        for i in range(ops):
            key = b"c%d-%d" % (n, i)
            await asy.kv.put(b"s", b"n", key, b"v")
            assert await asy.kv.get(b"s", b"n", key) == b"v"

    def thread_worker(n: int, count: int) -> None:
        for i in range(count):
            key = b"t%d-%d" % (n, i)
            sync.kv.put(b"s", b"n", key, b"v")
            assert sync.kv.get(b"s", b"n", key) == b"v"

    results = []
    for _round in range(3):
        start = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(coroutines)))
        async_rate = total / (time.perf_counter() - start)
        threads = [threading.Thread(target=thread_worker, args=(n, total // pool)) for n in range(pool)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sync_rate = total / (time.perf_counter() - start)
        results.append((async_rate, sync_rate))
    await asy.close()
    sync.close()
    ratio = statistics.median(a / s for a, s in results)
    ok = ratio >= 1.0
    print(f"\n3. PostgreSQL: {coroutines} coroutines vs {pool} threads, pool of {pool}, {total} put+get pairs each")
    for a, s in results:
        print(f"async {a:8.0f} pairs/s   threaded sync {s:8.0f} pairs/s   ratio {a / s:.2f}")
    print(f"median ratio async/sync {ratio:.2f} (target >= 1.0)  {'PASS' if ok else 'FAIL'}")
    return ok


def _postgres_url(args: argparse.Namespace) -> str | None:
    if args.no_postgres:
        return None
    url = (
        args.postgres or os.environ.get("DURASTATE_BENCH_POSTGRES_URL") or os.environ.get("DURASTATE_TEST_POSTGRES_URL")
    )
    url = url or "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        durastate.open(url, min_connections=0, max_connections=1, busy_timeout=2).close()
    except durastate.DurastateError as exc:
        print(f"\n3. PostgreSQL skipped: {exc}")
        return None
    return url


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ok = await uncontended(folder, args.rounds, args.ops)
        ok &= await locked(folder)
    url = _postgres_url(args)
    if url is not None:
        ok &= await postgres(url, 200, 10, args.pg_ops)
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--pg-ops", type=int, default=10)
    parser.add_argument("--postgres")
    parser.add_argument("--no-postgres", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
