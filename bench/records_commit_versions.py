"""``records.commit`` on PostgreSQL, two checkouts of durastate side by side in one run (issue 22 item 1).

    .venv/bin/python bench/records_commit_versions.py --src /work/main/src --src src [--rounds 7] [--ops 200]

Each ``--src`` runs in a worker process of its own (``PYTHONPATH`` = that
folder), with a store of its own (table prefix ``bcv<N>_``, dropped and made anew, one pooled
connection, ``application_name`` ``bcv<N>``). The driver has the workers
run blocks of ``--ops`` commits in turn, the order swapped every round, and
takes per block the wall time, the worker's CPU (``time.process_time``)
and the CPU of its server backend (``pg_cpu.process_ns``: the server must
run on this machine). Workloads: ``entry-1`` and ``entry-10`` (a commit of
1 / 10 new entries), ``entry+task`` (a new entry and an upsert of one task,
the id check letting the task through). Reported per checkout: median
commits/s and CPU per commit (client, server); and for every checkout after
the first, the median and range of the per-round ratios to the first
(> 1: the later checkout is faster / cheaper).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from pg_cpu import process_ns, with_application_name

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
WORKLOADS = ("entry-1", "entry-10", "entry+task")


def worker(url: str, prefix: str) -> None:
    """Serve ``<workload> <ops>`` lines on stdin: run them, answer JSON timings on stdout."""
    import durastate

    store = durastate.open(url, prefix=prefix, min_connections=1, max_connections=1)
    records = store.records
    next_id = 1_000_000
    records.commit([{"type": "conversation", "value": {"id": 1}}])
    task = {"id": 2, "conversationId": 1, "kind": "k", "abortRequested": False, "background": False}

    def entry(id: int) -> dict[str, Any]:
        return {"type": "entry", "value": {"id": id, "conversationId": 1, "role": "user", "text": "x" * 80}}

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        workload, ops = line.split()
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(int(ops)):
            if workload == "entry-1":
                records.commit([entry(next_id)])
                next_id += 1
            elif workload == "entry-10":
                records.commit([entry(next_id + k) for k in range(10)])
                next_id += 10
            else:
                state = {"status": "running" if i % 2 else "idle"}
                records.commit([entry(next_id), {"type": "task", "value": {**task, "state": state}}])
                next_id += 1
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(json.dumps({"wall": wall, "cpu": cpu}), flush=True)
    store.close()


class Worker:
    def __init__(self, src: str, url: str, index: int) -> None:
        self.src = src
        self.name = f"bcv{index}"
        env = {**os.environ, "PYTHONPATH": src}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", with_application_name(url, self.name), f"{self.name}_"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        json.loads(self.proc.stdout.readline())

    def run(self, workload: str, ops: int, backend: int) -> dict[str, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        before = process_ns(backend)
        self.proc.stdin.write(f"{workload} {ops}\n")
        self.proc.stdin.flush()
        out: dict[str, float] = json.loads(self.proc.stdout.readline())
        out["server"] = (process_ns(backend) - before) / 1e9
        return out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", action="append", help="a durastate checkout's src folder (twice or more)")
    parser.add_argument("--url", default=os.environ.get("DURASTATE_BENCH_POSTGRES_URL", PG_DEFAULT))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ops", type=int, default=200, help="commits per block")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if not args.src or len(args.src) < 2:
        parser.error("give --src at least twice")
    import psycopg

    with psycopg.connect(args.url, autocommit=True) as admin:  # fresh tables: the last run's are dropped
        for i in range(len(args.src)):
            pattern = f"bcv{i}\\_%"
            for (table,) in admin.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (pattern,)):
                admin.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
            for (function,) in admin.execute("SELECT proname FROM pg_proc WHERE proname LIKE %s", (pattern,)):
                admin.execute(f'DROP FUNCTION IF EXISTS "{function}" CASCADE')
    workers = [Worker(str(Path(src).resolve()), args.url, i) for i, src in enumerate(args.src)]
    try:
        with psycopg.connect(args.url, autocommit=True) as admin:
            backends = []
            for w in workers:
                rows = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (w.name,)
                ).fetchall()
                assert len(rows) == 1, f"{w.name}: expected one backend, found {len(rows)}"
                backends.append(int(rows[0][0]))
        print(f"rounds {args.rounds}, {args.ops} commits per block; checkouts: " + ", ".join(w.src for w in workers))
        for workload in WORKLOADS:
            for w, b in zip(workers, backends, strict=True):
                w.run(workload, max(args.ops // 4, 1), b)  # warm-up (prepared statements, caches)
            blocks: list[list[dict[str, float]]] = [[] for _ in workers]
            for r in range(args.rounds):
                order = list(range(len(workers)))
                if r % 2:
                    order.reverse()
                for i in order:
                    blocks[i].append(workers[i].run(workload, args.ops, backends[i]))
            report(workload, workers, blocks, args.ops)
    finally:
        for w in workers:
            w.close()


def report(workload: str, workers: list[Worker], blocks: list[list[dict[str, float]]], ops: int) -> None:
    print(f"\n{workload}")
    for w, runs in zip(workers, blocks, strict=True):
        rate = statistics.median(ops / b["wall"] for b in runs)
        cpu = statistics.median(b["cpu"] / ops * 1e6 for b in runs)
        server = statistics.median(b["server"] / ops * 1e6 for b in runs)
        print(f"  {w.src}: {rate:8.0f} commits/s  client {cpu:6.0f} us  server {server:6.0f} us per commit")
    first = blocks[0]
    for w, runs in zip(workers[1:], blocks[1:], strict=True):
        for label, ratio in (
            ("commits/s", [a["wall"] / b["wall"] for a, b in zip(first, runs, strict=True)]),
            ("client CPU (first/this)", [a["cpu"] / b["cpu"] for a, b in zip(first, runs, strict=True)]),
            ("server CPU (first/this)", [a["server"] / b["server"] for a, b in zip(first, runs, strict=True)]),
            (
                "client+server CPU (first/this)",
                [(a["cpu"] + a["server"]) / (b["cpu"] + b["server"]) for a, b in zip(first, runs, strict=True)],
            ),
        ):
            print(
                f"  {w.src} vs first, {label}: median {statistics.median(ratio):.2f}x"
                f" (range {min(ratio):.2f}-{max(ratio):.2f})"
            )


if __name__ == "__main__":
    main()
