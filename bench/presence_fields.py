"""``presence.set`` of many fields on SQLite and PostgreSQL, this tree beside another, side by side.

    .venv/bin/python bench/presence_fields.py [--sizes 1,10,1000,10000,100000] [--rounds 3]
        [--calls 200] [--field-budget 2000] [--engines sqlite,postgres] [--baseline REV] [--url URL]

A set of ``size`` fields of one participant, three ways: ``insert`` (a new
participant: every field a new row), ``update`` (the same participant
again with a newer ``at``: every field overwritten) and ``delete`` (every
field ``None``: every row deleted). Per size a call is repeated
``min(--calls, --field-budget // size)`` times (at least once), the insert
and delete on as many participants, the update on one; the figure is the
median call.

Each round runs a child process per tree and engine (this tree and, with
``--baseline REV``, the ``src/`` of git revision REV, extracted to a
temporary folder), the trees in alternating order; each child opens a
fresh store: a SQLite file in a temporary folder (``durability`` normal),
or a fresh schema of ``--url``'s database (default: ``bench/_postgres``),
never analysed (a user's new table), dropped at the end. Before timing,
the child writes a set of ``min(size, 1000)`` fields into another
namespace, so the statements of the common counts are compiled and
prepared. Figures are medians over rounds, in ms per call: wall time and
the calling thread's CPU time (the machine is shared: CPU time is the
client's own work, wall time adds the server's and the waits for a core).
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
from pathlib import Path
from typing import Any

from _baseline import extract_src
from _postgres import postgres_url

ROOT = Path(__file__).resolve().parents[1]
NS = "room"
PHASES = ("insert", "update", "delete")


def child(url: str, size: int, calls: int) -> None:
    """One tree, engine and size in this process: the three phases' median (wall ms, CPU ms); JSON on stdout."""
    import durastate

    with durastate.open(url) as store:
        presence = store.presence
        warm = {f"w{i:06d}": i for i in range(min(size, 1000))}
        presence.set("warm-up", "w", warm, at_ms=1, seen=1, ttl_ms=600_000)
        values = {f"f{i:06d}": {"cursor": i, "typing": True} for i in range(size)}
        gone = dict.fromkeys(values)
        calls_of = {
            "insert": [(f"p{n}", values, 1) for n in range(calls)],
            "update": [("p0", values, 2 + n) for n in range(calls)],
            "delete": [(f"p{n}", gone, 10_000) for n in range(calls)],
        }
        out: dict[str, tuple[float, float]] = {}
        for phase in PHASES:
            walls, cpus = [], []
            for participant, fields, at in calls_of[phase]:
                wall, cpu = time.perf_counter(), time.thread_time()
                presence.set(NS, participant, fields, at_ms=at, seen=at, ttl_ms=600_000)
                cpus.append((time.thread_time() - cpu) * 1000)
                walls.append((time.perf_counter() - wall) * 1000)
            out[phase] = (statistics.median(walls), statistics.median(cpus))
        assert presence.peek(NS) == [], "the delete phase left fields behind"
    print(json.dumps(out))


def run_child(src: Path, url: str, size: int, calls: int) -> dict[str, tuple[float, float]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--child", url, "--size", str(size), "--calls", str(calls)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return {phase: (float(v[0]), float(v[1])) for phase, v in json.loads(done.stdout).items()}


def fresh_store(engine: str, server: str, folder: Path, n: int) -> tuple[str, str | None]:
    """A new store's URL (a SQLite file, or a fresh PostgreSQL schema) and the schema to drop (``None``: a file)."""
    if engine == "sqlite":
        return str(folder / f"presence-{n}.db"), None
    from durastate.testing import postgres_server

    url, schema = postgres_server.create_schema(server)
    return url, schema


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,1000,10000,100000", help="fields per set, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200, help="most calls per size and phase")
    parser.add_argument("--field-budget", type=int, default=2000, help="fields per phase: calls = budget // size")
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--baseline", help="git revision to measure beside this tree (its src/)")
    parser.add_argument("--url", help="PostgreSQL server (a fresh schema per child)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.size, args.calls)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    server = postgres_url(args.url)
    sizes = [int(s) for s in args.sizes.split(",")]
    engines = args.engines.split(",")
    # results[tree][engine][size] = one {phase: (wall, cpu)} per round
    results: dict[str, dict[str, dict[int, list[dict[str, tuple[float, float]]]]]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        trees = {"this tree": ROOT / "src"}
        if args.baseline:
            trees = {args.baseline: extract_src(args.baseline, folder), **trees}
        results = {tree: {engine: {size: [] for size in sizes} for engine in engines} for tree in trees}
        n = 0
        for i in range(args.rounds):
            for engine in engines:
                for size in sizes:
                    calls = max(1, min(args.calls, args.field_budget // size))
                    for tree in list(trees) if (i + n) % 2 == 0 else list(reversed(trees)):
                        n += 1
                        url, schema = fresh_store(engine, server, folder, n)
                        try:
                            results[tree][engine][size].append(run_child(trees[tree], url, size, calls))
                        finally:
                            if schema is not None:
                                from durastate.testing import postgres_server

                                postgres_server.drop_schema(server, schema)
    report(args, results, sizes, engines)
    return 0


def median_of(rounds: list[dict[str, tuple[float, float]]], phase: str, which: int) -> float:
    return statistics.median(r[phase][which] for r in rounds)


def report(args: argparse.Namespace, results: dict[str, Any], sizes: list[int], engines: list[str]) -> None:
    print(
        f"# python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} cpus, "
        f"load {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"# {args.rounds} rounds; calls per size and phase min({args.calls}, {args.field_budget} // size); "
        "medians over rounds, ms per call"
    )
    trees = list(results)
    head = f"{'engine':9s} {'fields':>7s} {'phase':7s}"
    for tree in trees:
        head += f" {tree[:12] + ' wall':>17s} {'cpu':>9s}"
    if len(trees) == 2:
        head += f" {'new/old wall':>12s} {'cpu':>6s}"
    print(head)
    for engine in engines:
        for size in sizes:
            for phase in PHASES:
                line = f"{engine:9s} {size:7d} {phase:7s}"
                figures = []
                for tree in trees:
                    rounds = results[tree][engine][size]
                    wall, cpu = median_of(rounds, phase, 0), median_of(rounds, phase, 1)
                    figures.append((wall, cpu))
                    line += f" {wall:17.3f} {cpu:9.3f}"
                if len(trees) == 2:
                    (old_wall, old_cpu), (new_wall, new_cpu) = figures
                    line += f" {new_wall / old_wall:12.2f} {new_cpu / old_cpu:6.2f}"
                print(line)
    if "sqlite" in engines and "postgres" in engines:
        print("# PostgreSQL / SQLite, wall (each tree)")
        for size in sizes:
            for phase in PHASES:
                ratios = []
                for tree in trees:
                    pg = median_of(results[tree]["postgres"][size], phase, 0)
                    lite = median_of(results[tree]["sqlite"][size], phase, 0)
                    ratios.append(f"{tree}: {pg / lite:6.2f}")
                print(f"#   {size:7d} {phase:7s} " + "   ".join(ratios))


if __name__ == "__main__":
    sys.exit(main())
