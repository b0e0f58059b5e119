"""Instructions a push+claim+ack costs N writer processes on one SQLite file, under valgrind (issue 26, pain 10).

    .venv/bin/python bench/writers_instructions.py [--processes 1,2,4] [--ops 300,1500]
        [--contenders durastate,raw-leased]

bench/writers.py races the contenders in time, which on a shared 2-core
machine swings 10-20 % from run to run; this counts instructions instead.
For each contender and process count it runs ``valgrind --tool=callgrind``
on a parent that makes a fresh file and forks N workers (callgrind follows
a fork: each worker writes its own profile), each doing the given number
of push+claim+ack cycles (bench/writers.py's queue workload: durastate's
``queues`` at ``durability="normal"``, or raw ``sqlite3`` running its
``raw-leased`` statements), started together. It does so at the two
``--ops`` counts (``--wal-limit MIB``: durastate's WAL bound,
``sqlite_wal.LIMIT``, in its workers), and reports the instructions a cycle in the workers (the
difference of their totals over the difference of the counts: start-up
and the parent cancel out), and the C functions whose share grew most
from the first process count to each other one (``callgrind_annotate``).

The workers contend for SQLite's write lock at valgrind's pace: their
work runs about 50x slower while SQLite's busy handler sleeps real
milliseconds, so they take turns far more often than outside valgrind
(where a writer that holds the lock runs several cycles while the others
sleep), and each cycle meets more of the others' commits (each one drops
the connection's page cache, and every page read again is looked up in
the WAL's index). The figures say what contention can make a cycle do,
an upper bound; bench/writers.py says what it costs in time. Takes a few
minutes.

``--worker CONTENDER N OPS FOLDER`` is the run valgrind is given.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CONTENDERS = ("durastate", "raw-leased")
# The durastate workers' WAL bound (sqlite_wal.LIMIT) in MiB, handed from --wal-limit to the profiled run.
WAL_LIMIT_VARIABLE = "DURASTATE_BENCH_WAL_LIMIT_MIB"


def _cycles(contender: str, path: str, ops: int, start: int) -> None:
    """One worker: its connection opened, then, once ``start`` (a pipe) gives the word, ``ops`` cycles."""
    import durastate
    from durastate.engines import sqlite_wal

    limit = os.environ.get(WAL_LIMIT_VARIABLE)
    if limit:
        sqlite_wal.LIMIT = int(float(limit) * 2**20)
    from writers import BUSY_TIMEOUT, RAW_LEASED_ACK, RAW_LEASED_CLAIM, RAW_LEASED_PUSH, VALUE, _raw_connection

    if contender == "durastate":
        queues = durastate.open(path, busy_timeout=BUSY_TIMEOUT).queues
        os.read(start, 1)
        for _ in range(ops):
            queues.push("jobs", [VALUE])
            claim = queues.claim("jobs", lease=30.0)
            if claim is not None:  # another worker may hold every item this moment
                claim.ack()
        return
    conn = _raw_connection(path)  # bench/writers.py's: its pragmas and busy timeout
    os.read(start, 1)
    for _ in range(ops):
        now = int(time.time() * 1000)
        conn.execute(RAW_LEASED_PUSH, ("jobs", VALUE, now))
        row = conn.execute(RAW_LEASED_CLAIM, (now + 30_000, "jobs", now)).fetchone()
        if row is not None:
            conn.execute(RAW_LEASED_ACK, (row[0], row[2]))


def _worker_run(contender: str, processes: int, ops: int, folder: str) -> None:
    """The parent valgrind profiles: the file made, ``processes`` workers forked, each running ``ops`` cycles."""
    from writers import _setup

    path = os.path.join(folder, "queue.db")
    _setup(contender, path)  # bench/writers.py's: durastate's store migrated, or raw's tables
    start_r, start_w = os.pipe()
    children = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            os.close(start_w)
            status = 1
            try:
                _cycles(contender, path, ops, start_r)
                status = 0
            finally:
                os._exit(status)
        children.append(pid)
    os.close(start_r)
    time.sleep(0.5)  # every worker at the pipe
    os.write(start_w, b"x" * processes)
    failed = [pid for pid in children if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0]
    if failed:
        raise SystemExit(f"{len(failed)} of {processes} workers failed")


def _profile(contender: str, processes: int, ops: int, out: Path, wal_limit: float | None) -> list[Path]:
    """Run one parent under callgrind; the workers' profiles (the parent's, the lowest pid, left out)."""
    out.mkdir(parents=True)
    env = dict(os.environ)
    if wal_limit is not None:
        env[WAL_LIMIT_VARIABLE] = str(wal_limit)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}/cg.%p",
                sys.executable,
                __file__,
                "--worker",
                contender,
                str(processes),
                str(ops),
                folder,
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    files = sorted(out.glob("cg.*"), key=lambda f: int(f.name.split(".")[1]))
    if len(files) != processes + 1:
        raise SystemExit(f"{out}: {len(files)} profiles, expected {processes + 1}")
    return files[1:]


def _functions(profile: Path) -> dict[str, int]:
    """Instructions by function (``callgrind_annotate``), library paths shortened."""
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(profile)], capture_output=True, text=True, check=True
    ).stdout
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)", line)
        if match and "PROGRAM TOTALS" not in line:
            name = re.sub(r"^\S*/(Python|Objects|Modules|Parser)/", r"\1/", match.group(2))
            name = re.sub(r" \[\S*/([^/\]]+)\]$", r" [\1]", name)
            counts[name] = counts.get(name, 0) + int(match.group(1).replace(",", ""))
    return counts


def _per_cycle(profiles: dict[int, list[Path]], ops: tuple[int, int], processes: int) -> dict[str, float]:
    """Instructions a cycle by function: the workers' totals at the two op counts, their difference per cycle."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for total, count in ((low, ops[0]), (high, ops[1])):
        for profile in profiles[count]:
            for name, n in _functions(profile).items():
                total[name] = total.get(name, 0) + n
    cycles = (ops[1] - ops[0]) * processes
    return {name: (high.get(name, 0) - low.get(name, 0)) / cycles for name in set(low) | set(high)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--ops", default="300,1500", help="two cycle counts per worker")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--top", type=int, default=6, help="functions listed per comparison")
    parser.add_argument("--wal-limit", type=float, help="durastate's WAL bound in MiB (sqlite_wal.LIMIT)")
    parser.add_argument("--worker", nargs=4, metavar=("CONTENDER", "N", "OPS", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        contender, n, ops, folder = args.worker
        _worker_run(contender, int(n), int(ops), folder)
        return
    counts = [int(p) for p in args.processes.split(",")]
    low, high = (int(n) for n in args.ops.split(","))
    contenders = args.contenders.split(",")
    for name in contenders:
        if name not in CONTENDERS:
            parser.error(f"unknown contender {name!r}; known: {', '.join(CONTENDERS)}")
    if high <= low or low < 1 or not counts or min(counts) < 1:
        parser.error("--ops LOW,HIGH with 1 <= LOW < HIGH; --processes of positive counts")
    limit = "" if args.wal_limit is None else f", durastate's WAL bound {args.wal_limit:g} MiB"
    print(
        f"# SQLite {sqlite3.sqlite_version}, push+claim+ack, {low} and {high} cycles a worker, under callgrind{limit}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        for contender in contenders:
            by_count: dict[int, dict[str, float]] = {}
            for n in counts:
                profiles = {
                    ops: _profile(contender, n, ops, Path(scratch) / f"{contender}.{n}.{ops}", args.wal_limit)
                    for ops in (low, high)
                }
                by_count[n] = _per_cycle(profiles, (low, high), n)
                print(
                    f"{contender:11} {n:3} processes  {sum(by_count[n].values()):9,.0f} instructions a cycle",
                    flush=True,
                )
            first = counts[0]
            for n in counts[1:]:
                grew = sorted(
                    (
                        (by_count[n].get(f, 0) - by_count[first].get(f, 0), f)
                        for f in set(by_count[n]) | set(by_count[first])
                    ),
                    reverse=True,
                )
                print(f"  {contender}, {first} -> {n} processes, grew most:")
                for delta, function in grew[: args.top]:
                    print(f"    {delta:+9,.0f}  {function[:110]}")


if __name__ == "__main__":
    main()
