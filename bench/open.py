"""Opening a migrated store: ``durastate.open(path).close()`` vs the raw driver, side by side.

    .venv/bin/python bench/open.py [--rounds 11] [--opens 200] [--fresh 11] [--baseline REV]
    .venv/bin/python bench/open.py --postgres-url URL [...]     (a fresh schema of URL's database)

Short-lived processes (a CLI call, a worker process per task, a serverless
function) open a store, do a few calls and exit, so what opening costs is
paid on every start. Measured on one store file, migrated first:

* ``raw``: ``sqlite3.connect`` with the engine's connect arguments, the same
  pragmas (``synchronous``, ``journal_mode=WAL``), ``close()``: the floor;
* ``durastate``: ``durastate.open(path).close()``, repeated in one process;
* ``first open``: the first ``durastate.open`` of a fresh interpreter (after
  ``import durastate``): what a process that opens once pays;
* the parts of one open of this tree (engine, migration check, ``Store``,
  close).

Each round runs a child process per tree (this one and, with ``--baseline
REV``, the ``src/`` of git revision REV, extracted to a temporary folder),
in alternating order; a child opens ``--opens`` times per contender and
reports medians. Figures are medians over rounds, in ms, as wall time and
as the thread's CPU time (the machine is shared: CPU time is what opening
itself costs, wall time adds the waits for a core). The target (issue 27
item 5): ``durastate.open(path).close()`` at most 5 ms median.

With ``--postgres-url`` the store is a fresh schema of that server
(dropped at the end) and ``raw`` is ``psycopg.connect`` with the session
settings the engine makes (``lock_timeout``, ``plan_cache_mode``) and
``close()``; no parts (they are SQLite's). Opening connects at least once
on both sides: the ratio is what opening costs beyond one session.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _baseline import extract_src

TARGET_MS = 5.0
ROOT = Path(__file__).resolve().parents[1]

FRESH = """
import sys, time
import durastate
wall, cpu = time.perf_counter(), time.thread_time()
durastate.open(sys.argv[1]).close()
print((time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000)
"""


def raw_open(path: str) -> None:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False, cached_statements=512)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA journal_mode=WAL").fetchone()
    conn.close()


def raw_postgres_open(url: str) -> None:
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SET lock_timeout = 30000")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.close()


def durastate_open(path: str) -> None:
    import durastate

    durastate.open(path).close()


def per_open(fn: Callable[[str], None], path: str, opens: int) -> tuple[float, float]:
    """Median (wall ms, thread CPU ms) of ``opens`` calls of ``fn(path)``."""
    walls, cpus = [], []
    for _ in range(opens):
        wall, cpu = time.perf_counter(), time.thread_time()
        fn(path)
        cpus.append((time.thread_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def child(path: str, opens: int) -> None:
    """One round in this process: raw and durastate, each ``opens`` times; JSON on stdout."""
    durastate_open(path)  # imports, and whatever a first open fills
    out = {}
    raw = raw_postgres_open if "://" in path else raw_open
    for name, fn in (("raw", raw), ("durastate", durastate_open)):
        out[name] = per_open(fn, path, opens)
    print(json.dumps(out))


def parts_ms(path: str, opens: int) -> dict[str, float]:
    """One open of this tree taken apart: engine, migration check, Store(...), close (median wall ms)."""
    from durastate.engines.sqlite import SqliteEngine
    from durastate.store import SCHEMAS, Store

    samples: dict[str, list[float]] = {"engine": [], "migration check": [], "Store(...)": [], "close": []}
    for _ in range(opens):
        t0 = time.perf_counter()
        engine = SqliteEngine(path)
        t1 = time.perf_counter()
        engine.migrate(SCHEMAS)
        t2 = time.perf_counter()
        store = Store(engine, max_value_size=64 * 1024 * 1024, max_key_size=2048)
        t3 = time.perf_counter()
        store.close()
        t4 = time.perf_counter()
        for name, (a, b) in zip(samples, ((t0, t1), (t1, t2), (t2, t3), (t3, t4)), strict=True):
            samples[name].append((b - a) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def run_child(src: Path, path: str, opens: int) -> dict[str, tuple[float, float]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--child", path, "--opens", str(opens)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return {name: (float(v[0]), float(v[1])) for name, v in json.loads(done.stdout).items()}


def fresh(src: Path, path: str) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-c", FRESH, path], env=env, check=True, capture_output=True, text=True)
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--opens", type=int, default=200)
    parser.add_argument("--fresh", type=int, default=11, help="fresh interpreters per tree for the first-open figure")
    parser.add_argument("--baseline", help="git revision to measure beside this tree (its src/)")
    parser.add_argument("--postgres-url", help="open a fresh schema of this server's database instead of a file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.opens)
        return 0
    url: str | None = None
    schema = None
    if args.postgres_url:
        sys.path.insert(0, str(ROOT / "src"))
        from durastate.testing import postgres_server

        url, schema = postgres_server.create_schema(args.postgres_url)
    try:
        return measure(args, url)
    finally:
        if schema is not None:
            postgres_server.drop_schema(args.postgres_url, schema)


def measure(args: argparse.Namespace, url: str | None) -> int:
    """The rounds, the fresh processes and the report; ``url``: a PostgreSQL store instead of a file."""
    with tempfile.TemporaryDirectory() as folder:
        trees = {"this tree": ROOT / "src"}
        if args.baseline:
            trees = {args.baseline: extract_src(args.baseline, Path(folder)), **trees}
        path = url or str(Path(folder) / "open-bench.db")
        subprocess.run(
            [sys.executable, "-c", "import durastate, sys; durastate.open(sys.argv[1]).close()", path],
            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
            check=True,
        )
        results: dict[str, list[dict[str, tuple[float, float]]]] = {tree: [] for tree in trees}
        firsts: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
        for i in range(args.rounds):
            for tree in list(trees) if i % 2 == 0 else list(reversed(trees)):
                results[tree].append(run_child(trees[tree], path, args.opens))
        for i in range(args.fresh):
            for tree in list(trees) if i % 2 == 0 else list(reversed(trees)):
                firsts[tree].append(fresh(trees[tree], path))
        sys.path.insert(0, str(ROOT / "src"))
        parts = {} if url else parts_ms(path, args.opens)
    print(
        f"# python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} cpus, "
        f"load {os.getloadavg()[0]:.1f} at the end; {'PostgreSQL, a fresh schema' if url else 'a SQLite file'}"
    )
    print(f"# {args.rounds} rounds x {args.opens} opens per contender and tree; medians over rounds, ms per open")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("# PYTHONDONTWRITEBYTECODE is set: each fresh process compiles the modules it imports (first open)")
    print(f"{'tree':12} {'contender':32} {'wall ms':>8} {'cpu ms':>8} {'ds/raw wall':>11} {'ds/raw cpu':>10}")
    for tree, rounds in results.items():
        med = {
            name: (statistics.median(r[name][0] for r in rounds), statistics.median(r[name][1] for r in rounds))
            for name in ("raw", "durastate")
        }
        wall_ratio = statistics.median(r["durastate"][0] / r["raw"][0] for r in rounds)
        cpu_ratio = statistics.median(r["durastate"][1] / r["raw"][1] for r in rounds)
        raw_name = "raw psycopg connect + settings" if url else "raw sqlite3 connect + pragmas"
        print(f"{tree:12} {raw_name:32} {med['raw'][0]:8.3f} {med['raw'][1]:8.3f}")
        print(
            f"{tree:12} {'durastate.open(path).close()':32} {med['durastate'][0]:8.3f} {med['durastate'][1]:8.3f}"
            f" {wall_ratio:10.1f}x {cpu_ratio:9.1f}x"
        )
        first = firsts[tree]
        wall = statistics.median(w for w, _ in first)
        cpu = statistics.median(c for _, c in first)
        print(f"{tree:12} {'first open in a fresh process':32} {wall:8.3f} {cpu:8.3f}")
        if not url:  # issue 27's target is the SQLite file's
            verdict = "PASS" if med["durastate"][0] <= TARGET_MS else "MISS"
            print(
                f"# {tree}: durastate.open(path).close() {med['durastate'][0]:.2f} ms wall, target <= {TARGET_MS}: "
                f"{verdict}"
            )
    if parts:
        print("# this tree, one open taken apart (median wall ms):")
    for name, value in parts.items():
        print(f"#   {name:18} {value:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
