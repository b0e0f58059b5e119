"""Where the slow writes of many kv.put processes come from: latency buckets, hungry writes and their waiters.

    .venv/bin/python bench/hungry_latency.py [--processes 16] [--ops 2000] [--hungry-after SECONDS] [--no-look]
    DURASTATE_BENCH_SRC=/other/checkout/src .venv/bin/python bench/hungry_latency.py ...   (that tree's durastate)

N forked processes each put ``--ops`` distinct keys (as ``bench/writers.py``
does); each put's latency is counted in a bucket (1-3, 3-10, 10-50, 50-200,
200+ ms), with how many of the bucket's puts turned hungry (took the hungry
lock, ``engines/sqlite_hungry``) and how many waited for another's. A tree
without ``sqlite_hungry`` (main before it) reports the buckets only.
``--hungry-after`` sets ``sqlite_hungry.HUNGRY_AFTER``; ``--no-look`` makes
every look at the hungry lock find it free (hungry writers, no waiting for
them), to tell the two halves' effects apart.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("DURASTATE_BENCH_SRC") or str(Path(__file__).resolve().parent.parent / "src"))

import durastate

try:
    from durastate.engines import sqlite_hungry
except ImportError:  # a tree from before the hungry lock
    sqlite_hungry = None  # type: ignore[assignment]

BUCKETS = ((0.001, 0.003), (0.003, 0.010), (0.010, 0.050), (0.050, 0.200), (0.200, float("inf")))
# Per process: hungry-lock calls so far (counted by the wrappers installed in main()).
EVENTS = {"waited": 0, "hungry": 0}


def _count_calls(no_look: bool) -> None:
    lock = sqlite_hungry.HungryLock
    wait_released, take = lock.wait_released, lock.take

    def counted_wait(self: Any, deadline: float) -> bool:
        EVENTS["waited"] += 1
        return wait_released(self, deadline)

    def counted_take(self: Any, deadline: float) -> bool:
        EVENTS["hungry"] += 1
        return take(self, deadline)

    lock.wait_released, lock.take = counted_wait, counted_take  # type: ignore[method-assign]
    if no_look:
        lock.held = lambda self: False  # type: ignore[method-assign]


def _worker(path: str, index: int, ops: int, barrier: Any, out: Any) -> None:
    store = durastate.open(path, busy_timeout=30)
    store.kv.get(b"s", b"n", b"warm")
    barrier.wait()
    rows = []
    for i in range(ops):
        waited, hungry = EVENTS["waited"], EVENTS["hungry"]
        start = time.perf_counter()
        store.kv.put(b"s%d" % index, b"n", b"k%d" % i, b"v" * 100)
        rows.append((time.perf_counter() - start, EVENTS["waited"] > waited, EVENTS["hungry"] > hungry))
    out.send(rows)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--hungry-after", type=float)
    parser.add_argument("--no-look", action="store_true")
    args = parser.parse_args()
    if sqlite_hungry is not None:
        if args.hungry_after is not None:
            sqlite_hungry.HUNGRY_AFTER = args.hungry_after  # read when a store opens: the forked workers' too
        _count_calls(args.no_look)
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bench.db")
        durastate.open(path).close()
        barrier = ctx.Barrier(args.processes + 1)
        pipes = []
        for index in range(args.processes):
            receiver, sender = ctx.Pipe(duplex=False)
            ctx.Process(target=_worker, args=(path, index, args.ops, barrier, sender)).start()
            sender.close()
            pipes.append(receiver)
        barrier.wait()
        rows = sorted(row for receiver in pipes for row in receiver.recv())
    print(
        f"durastate from {Path(durastate.__file__).parent.parent}, {args.processes} processes x {args.ops} puts,"
        f" HUNGRY_AFTER {sqlite_hungry.HUNGRY_AFTER if sqlite_hungry else '-'}, looks {not args.no_look},"
        f" load average {' '.join(f'{load:.1f}' for load in os.getloadavg())}"
    )
    print(f"p99 {rows[int(len(rows) * 0.99)][0] * 1000:.2f} ms, longest {rows[-1][0] * 1000:.0f} ms")
    for low, high in BUCKETS:
        inside = [row for row in rows if low <= row[0] < high]
        print(
            f"{low * 1000:5.0f}-{high * 1000:<5.0f} ms: {len(inside):5d} puts, {sum(r[1] for r in inside):4d} waited"
            f" for a hungry writer, {sum(r[2] for r in inside):4d} hungry"
        )


if __name__ == "__main__":
    main()
