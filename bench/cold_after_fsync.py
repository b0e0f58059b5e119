"""The same Python work timed right after an fdatasync and without one: what a commit's fsync does to the code after it.

    .venv/bin/python bench/cold_after_fsync.py [--rounds 3] [--samples 3000]

The work is five ``store.kv.get`` calls of one key on a warm durastate
store (no I/O: every page is in SQLite's cache), and, as a second
contender, the same five reads as plain ``sqlite3`` runs them (kv's GET
statement on its own connection to the same file). Each sample first
overwrites 4 KiB of a scratch file, then either ``fdatasync``s it (the
thread sleeps in the kernel until the disk answers, as at every commit at
``durability="full"``) or not, then times the work alone
(``time.perf_counter_ns``). Printed per round and contender: the median
microseconds of the work in each case and what the fsync added. A probe of why a gap in Python CPU
between two contenders measured at ``synchronous=NORMAL`` grows at ``FULL``
(bench/RESULTS.md, "huey's leased cycle on SQLite: durastate's own
statements without its Python").
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import durastate
from durastate.kv.statements import GET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=3000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cold_after_fsync_"))
    store = durastate.open(folder / "store.db")
    store.kv.put(b"s", b"n", b"k", b"v")

    def through_durastate() -> None:
        for _ in range(5):
            store.kv.get(b"s", b"n", b"k")

    raw = sqlite3.connect(folder / "store.db", isolation_level=None)
    get = str(GET.template).format(p="ds_")

    def through_sqlite3() -> None:
        for _ in range(5):
            raw.execute(get, (b"s", b"n", b"k")).fetchone()

    fd = os.open(folder / "scratch", os.O_RDWR | os.O_CREAT)
    block = b"x" * 4096

    def median_us(work: Callable[[], None], sync: bool) -> float:
        spent = []
        for _ in range(args.samples):
            os.pwrite(fd, block, 0)
            if sync:
                os.fdatasync(fd)
            start = time.perf_counter_ns()
            work()
            spent.append(time.perf_counter_ns() - start)
        return statistics.median(spent) / 1000

    try:
        for _ in range(args.rounds):
            for name, work in (("durastate", through_durastate), ("sqlite3", through_sqlite3)):
                after, without = median_us(work, True), median_us(work, False)
                print(
                    f"{name:9s} after fdatasync {after:6.1f} us   without {without:6.1f} us"
                    f"   added {after - without:5.1f} us ({after / without:.2f}x)"
                )
    finally:
        os.close(fd)
        raw.close()
        store.close()


if __name__ == "__main__":
    main()
