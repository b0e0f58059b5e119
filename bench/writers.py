"""Many writer processes on one SQLite file: durastate against raw ``sqlite3``, side by side (issue 26, pain 10).

    .venv/bin/python bench/writers.py [--processes 4,16] [--ops 2000] [--rounds 3] [--workload put|queue]
        [--raw-bounded] [--wal-limit MIB]
    DURASTATE_BENCH_SRC=/other/checkout/src .venv/bin/python bench/writers.py ...   (that tree's durastate)

Each of N processes (forked, started together on a barrier) does ``--ops``
writes of its own keys: ``put``: ``kv.put`` of a distinct key (raw: the
same upsert into a table of the same shape, on a connection with the same
busy timeout and pragmas: WAL, ``synchronous=NORMAL``); ``queue``: push
one item, claim one, ack it (raw: three statements of the same shape as
durastate's queue runs, each its own short transaction, but whose claim
never redelivers an expired lease; ``raw-leased``, run with ``queue``
only: the cheapest statements we know that do, see ``RAW_LEASED_DDL``,
and a ratio of durastate's throughput to theirs). Reported per contender:
throughput (all processes' writes / wall time), per-write latency p50,
p99 and max, CPU time per write (user + system, all processes: the
load-independent part; with more processes than cores the throughput is
about cores / CPU per write), sleeps per write (voluntary context
switches: a wait in SQLite's busy handler, an fsync of a checkpoint;
steadier than throughput on a shared machine), and durastate's
throughput as a ratio of raw's, and the largest the WAL file grew
(sampled every 5 ms; under durastate's policy the file keeps its largest
size, and the frames it holds stay under the limit). ``--raw-bounded`` adds raw ``sqlite3`` under
durastate's WAL policy (``engines/sqlite_wal``: ``wal_autocheckpoint=0``,
every 16 writes of a process a look at the WAL, past the limit a
``PASSIVE`` checkpoint then a ``RESTART``; not the early checkpoints of a
WAL that rewrites a few pages, ``WalBound``), to tell the policy's effect from durastate's
own; ``--wal-limit`` sets that limit for both. The contenders run
alternately, ``--rounds`` times each, on fresh files; the verdict is the
median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# DURASTATE_BENCH_SRC: another tree's src/ (say, main's, to run before and after a change back to back).
sys.path.insert(0, os.environ.get("DURASTATE_BENCH_SRC") or str(Path(__file__).resolve().parent.parent / "src"))

import durastate
from durastate.engines import sqlite_busy

try:
    from durastate.engines import sqlite_wal
except ImportError:  # a tree from before the WAL policy (DURASTATE_BENCH_SRC): --raw-bounded names it
    sqlite_wal = None  # type: ignore[assignment]

BUSY_TIMEOUT = 30.0
VALUE = b"v" * 100

RAW_DDL = (
    "CREATE TABLE IF NOT EXISTS kv (scope BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL,"
    " value BLOB NOT NULL, expires_at INTEGER, PRIMARY KEY (scope, ns, key)) WITHOUT ROWID"
)
RAW_PUT = (
    "INSERT INTO kv (scope, ns, key, value, expires_at) VALUES (?, ?, ?, ?, NULL)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = NULL"
)
RAW_QUEUE_DDL = (
    "CREATE TABLE IF NOT EXISTS q (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload BLOB NOT NULL,"
    " ready_at INTEGER NOT NULL, lease_until INTEGER, attempts INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS q_ready ON q (queue, ready_at) WHERE lease_until IS NULL",
)
RAW_PUSH = "INSERT INTO q (queue, payload, ready_at) VALUES (?, ?, ?)"
RAW_CLAIM = (
    "UPDATE q SET lease_until = ?, attempts = attempts + 1 WHERE id = (SELECT id FROM q"
    " WHERE queue = ? AND lease_until IS NULL AND ready_at <= ? ORDER BY ready_at, id LIMIT 1) RETURNING id, payload"
)
RAW_ACK = "DELETE FROM q WHERE id = ?"
# raw-leased: the cheapest statements we know for a queue that does redeliver an
# expired lease (raw's never do: its claim index drops a claimed item). One
# index by due time, as durastate's: a claim moves its item to its lease's
# deadline, where the next claim finds it again once that has passed; the ack
# is fenced by the delivery count (a holder whose item was claimed again
# deletes nothing), an integer the claim returns, not a random token.
# Measured against two partial indexes (ready items by due time, leased ones by
# deadline, the claim a UNION ALL of both heads): 181.7k instructions a
# push+claim+ack against 144.4k, and a 16-byte token as the fence: 154.7k
# (bench/RESULTS.md, "queuebind").
RAW_LEASED_DDL = (
    "CREATE TABLE IF NOT EXISTS lq (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload BLOB NOT NULL,"
    " available_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS lq_next ON lq (queue, available_at)",
)
RAW_LEASED_PUSH = "INSERT INTO lq (queue, payload, available_at) VALUES (?, ?, ?)"
RAW_LEASED_CLAIM = (
    "UPDATE lq SET available_at = ?, attempts = attempts + 1 WHERE id = (SELECT id FROM lq"
    " WHERE queue = ? AND available_at <= ? ORDER BY available_at, id LIMIT 1) RETURNING id, payload, attempts"
)
RAW_LEASED_ACK = "DELETE FROM lq WHERE id = ? AND attempts = ?"


def _raw_connection(path: str, bounded: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if bounded:
        conn.execute(sqlite_wal.AUTOCHECKPOINT_OFF)
    return conn


def _raw_bound(conn: sqlite3.Connection, shm: int) -> None:
    """durastate's WAL policy (engines/sqlite_wal) on a raw connection: past the limit, PASSIVE then RESTART."""
    if sqlite_wal.wal_bytes(shm) > sqlite_wal.LIMIT:
        conn.execute("PRAGMA busy_timeout = 0")
        row = conn.execute(sqlite_wal.PASSIVE).fetchone()
        if sqlite_wal.restart_worthwhile(row[1], row[2]):
            conn.execute(f"PRAGMA busy_timeout = {sqlite_wal.RESTART_WAIT_MS}")
            conn.execute(sqlite_wal.RESTART).fetchall()
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")


def _setup(contender: str, path: str) -> None:
    if contender.startswith("durastate"):
        durastate.open(path, busy_timeout=BUSY_TIMEOUT).close()
        return
    conn = _raw_connection(path)
    conn.execute(RAW_DDL)
    for ddl in (*RAW_QUEUE_DDL, *RAW_LEASED_DDL):
        conn.execute(ddl)
    conn.close()


def _worker(contender: str, workload: str, path: str, ops: int, index: int, barrier: Any, out: Any) -> None:
    latencies: list[float] = []
    clock = time.perf_counter
    cpu_start = 0.0
    if contender.startswith("durastate"):
        # "durastate-own-loop": waits in durastate's retry loop instead of SQLite's busy handler.
        sqlite_busy.WAIT_IN_SQLITE = contender == "durastate"
        store = durastate.open(path, busy_timeout=BUSY_TIMEOUT)
        put, queues = store.kv.put, store.queues
        scope = b"s%d" % index
        store.kv.get(scope, b"ns", b"warm")
        barrier.wait()
        sleeps_start = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        cpu_start = time.process_time()
        for i in range(ops):
            start = clock()
            if workload == "put":
                put(scope, b"ns", b"k%d" % i, VALUE)
            else:
                queues.push("jobs", [VALUE])
                claim = queues.claim("jobs", lease=30)
                if claim is not None:
                    claim.ack()
            latencies.append(clock() - start)
        cpu = time.process_time() - cpu_start
        sleeps = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - sleeps_start
        store.close()
    else:
        bounded = contender == "raw-bounded"
        leased = contender == "raw-leased"
        conn = _raw_connection(path, bounded)
        every = sqlite_wal.CHECK_EVERY if bounded else 0
        shm = os.open(f"{path}-shm", os.O_RDONLY)
        scope = b"s%d" % index
        conn.execute("SELECT 1 FROM kv LIMIT 1").fetchall()
        barrier.wait()
        sleeps_start = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        cpu_start = time.process_time()
        for i in range(ops):
            start = clock()
            if workload == "put":
                conn.execute(RAW_PUT, (scope, b"ns", b"k%d" % i, VALUE))
            elif leased:
                now = int(time.time() * 1000)
                conn.execute(RAW_LEASED_PUSH, ("jobs", VALUE, now))
                row = conn.execute(RAW_LEASED_CLAIM, (now + 30_000, "jobs", now)).fetchone()
                if row is not None and conn.execute(RAW_LEASED_ACK, (row[0], row[2])).rowcount != 1:
                    raise AssertionError("raw-leased: an ack of a live lease deleted nothing")
            else:
                now = int(time.time() * 1000)
                conn.execute(RAW_PUSH, ("jobs", VALUE, now))
                row = conn.execute(RAW_CLAIM, (now + 30_000, "jobs", now)).fetchone()
                if row is not None:
                    conn.execute(RAW_ACK, (row[0],))
            if every and i % every == 0:
                _raw_bound(conn, shm)
            latencies.append(clock() - start)
        cpu = time.process_time() - cpu_start
        sleeps = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - sleeps_start
        conn.close()
        os.close(shm)
    out.send((latencies, cpu, sleeps))
    out.close()


def _largest_wal(wal: str, stop: threading.Event, largest: list[int]) -> None:
    while not stop.wait(0.005):
        try:
            largest[0] = max(largest[0], os.stat(wal).st_size)
        except OSError:
            pass


def run_once(contender: str, workload: str, processes: int, ops: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bench.db")
        _setup(contender, path)
        barrier = ctx.Barrier(processes + 1)
        pipes, procs = [], []
        for index in range(processes):
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(contender, workload, path, ops, index, barrier, sender))
            proc.start()
            sender.close()
            pipes.append(receiver)
            procs.append(proc)
        stop, largest = threading.Event(), [0]
        sampler = threading.Thread(target=_largest_wal, args=(f"{path}-wal", stop, largest))
        sampler.start()
        barrier.wait()
        start = time.perf_counter()
        results = [receiver.recv() for receiver in pipes]
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
        latencies = [lat for lats, _cpu, _sleeps in results for lat in lats]
        cpu = sum(cpu for _lats, cpu, _sleeps in results)
        sleeps = sum(sleeps for _lats, _cpu, sleeps in results)
        for proc in procs:
            proc.join()
    latencies.sort()
    return {
        "ops_per_s": len(latencies) / wall,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "max_ms": latencies[-1] * 1000,
        "cpu_us_per_op": cpu / len(latencies) * 1e6,
        "sleeps_per_op": sleeps / len(latencies),
        "wal_mib": largest[0] / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", default="4,16")
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload", choices=("put", "queue"), default="put")
    parser.add_argument("--own-loop", action="store_true", help="also run durastate waiting in its own retry loop")
    parser.add_argument("--raw-bounded", action="store_true", help="also run raw sqlite3 under durastate's WAL policy")
    parser.add_argument("--wal-limit", type=float, help="durastate's WAL limit in MiB (engines/sqlite_wal.LIMIT)")
    args = parser.parse_args()
    if sqlite_wal is None and (args.raw_bounded or args.wal_limit is not None):
        parser.error("this durastate has no engines/sqlite_wal (--raw-bounded and --wal-limit need it)")
    if args.wal_limit is not None:
        sqlite_wal.LIMIT = int(args.wal_limit * 2**20)  # the forked workers inherit it
    print(
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, workload {args.workload}, {args.ops} ops/process,"
        f" durastate from {Path(durastate.__file__).parent.parent}, WAL limit"
        f" {f'{sqlite_wal.LIMIT / 2**20:g} MiB' if sqlite_wal else 'none (SQLite autocheckpoint)'},"
        f" load average {' '.join(f'{load:.1f}' for load in os.getloadavg())}"
    )
    for processes in [int(p) for p in args.processes.split(",")]:
        contenders = [
            "durastate",
            "raw",
            *(["durastate-own-loop"] if args.own_loop else []),
            *(["raw-bounded"] if args.raw_bounded else []),
            *(["raw-leased"] if args.workload == "queue" else []),
        ]
        rows: dict[str, list[dict[str, float]]] = {c: [] for c in contenders}
        ratios: dict[str, list[float]] = {c: [] for c in contenders if c != "raw"}
        cpu_ratios: dict[str, list[float]] = {c: [] for c in ratios}
        p99_ratios: dict[str, list[float]] = {c: [] for c in ratios}
        for round_number in range(args.rounds):
            order = contenders[round_number % len(contenders) :] + contenders[: round_number % len(contenders)]
            measured = {c: run_once(c, args.workload, processes, args.ops) for c in order}
            for contender, row in measured.items():
                rows[contender].append(row)
            for contender in ratios:
                ratios[contender].append(measured[contender]["ops_per_s"] / measured["raw"]["ops_per_s"])
                cpu_ratios[contender].append(measured["raw"]["cpu_us_per_op"] / measured[contender]["cpu_us_per_op"])
                p99_ratios[contender].append(measured[contender]["p99_ms"] / measured["raw"]["p99_ms"])
        for contender, measured_rows in rows.items():
            formats = {key: "6.3f" if key == "sleeps_per_op" else "8.2f" for key in measured_rows[0]}
            cells = "  ".join(
                f"{key} {statistics.median(r[key] for r in measured_rows):{spec}}" for key, spec in formats.items()
            )
            print(f"{processes:3d} processes  {contender:18s}  {cells}")
        for contender, values in ratios.items():
            cpu = cpu_ratios[contender]
            print(
                f"{processes:3d} processes  {contender}/raw throughput: median {statistics.median(values):.2f}x "
                f"(rounds: {', '.join(f'{r:.2f}' for r in values)}); raw/{contender} CPU per write: median"
                f" {statistics.median(cpu):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in cpu)}); {contender}/raw p99:"
                f" median {statistics.median(p99_ratios[contender]):.2f}x"
                f" (rounds: {', '.join(f'{r:.2f}' for r in p99_ratios[contender])})"
            )
        if "raw-leased" in rows:
            pairs = zip(rows["durastate"], rows["raw-leased"], strict=True)
            leased = [ours["ops_per_s"] / theirs["ops_per_s"] for ours, theirs in pairs]
            print(
                f"{processes:3d} processes  durastate/raw-leased throughput: median {statistics.median(leased):.2f}x"
                f" (rounds: {', '.join(f'{r:.2f}' for r in leased)})"
            )


if __name__ == "__main__":
    main()
