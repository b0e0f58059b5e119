"""Does a hot op cost the same on a big table as on a small one? Both engines.

Run it with ``make bench-scale`` (``SIZES=1000,100000,1000000`` for the big
run) or ``.venv/bin/python bench/scale.py --help``.

Workloads (``bench/scale_workloads.py``; ``--workloads`` picks some), each
loaded with ``size`` rows into every store:

* kv: values in one namespace (get, get_many 100, scan 100, put, delete
  1000 keys); queue: ready items in one queue (claim+ack);
* documents: documents, 100 per key prefix (read, CAS, list 100 by prefix);
* events-one: one session of ``size`` processed events (append, then
  claim+complete); events-many: ``size`` events in ``size/100`` sessions
  (append to a random one, claim_any+complete);
* records: ``size`` entries and ``size`` document revisions (commit 1
  entry, newest 50 entries through a 10-deep fork chain, current read of a
  document with 1,000 revisions);
* presence: fields of namespaces of 10 participants x 2 fields (read one).

Loading: a few rows through the facet, then altered copies of them by
``COPY`` (PostgreSQL) or ``executemany`` (SQLite), with progress on stderr
(``bench/scale_load.py``). PostgreSQL tables are then analysed
(``--pg-stats analyze``, the state autovacuum brings a live table to), or
kept without statistics with autovacuum off (``--pg-stats none``).

Contenders (see ``scale_workloads``): ``durastate``; ``raw``, the bare
driver running the facet's own statements; ``best``, the bare driver
running a statement better than ours where one is known.

Method: every size's store is loaded first and stays open; then
``--rounds`` rounds, each running every op ``--calls`` times for every
(size, contender) pair, taking turns call by call (the order reversed each
call, rotated each round), so load from elsewhere on the machine hits all
of them alike. Each call is timed on its own; the median is reported. On
SQLite the clock is this thread's CPU time (all of SQLite's work runs in
it); on PostgreSQL two tables: wall time, and CPU time (this thread's
plus that of the contender's own server process, found by its
``application_name`` and read from ``/proc/<pid>/schedstat``, see
``bench/pg_cpu.py``), which a loaded machine disturbs far less. The cost
of reading the clocks is measured and subtracted. Noise: the spread over
rounds of each round's median ratio.

Targets (issue 10): on PostgreSQL the latency at the biggest size within
1.5x of the smallest (the raw contenders' growth shows what the table
itself costs); on SQLite within 1.2x of raw ``sqlite3`` at the same size.

The PostgreSQL server comes from ``--url``, ``DURASTATE_BENCH_POSTGRES_URL``,
``DURASTATE_TEST_POSTGRES_URL`` or ``postgresql://postgres@127.0.0.1:5432/postgres``
(a fresh schema per size, dropped at the end); ``--engines sqlite`` skips it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import durastate
from _postgres import postgres_url
from durastate.testing.postgres_server import create_schema, drop_schema
from pg_cpu import ServerCPU, with_application_name
from scale_load import Bulk
from scale_workloads import WORKLOADS, Context, Ops, Raw

PG_TARGET = 1.5
SQLITE_TARGET = 1.2
CONTENDERS = ("durastate", "raw", "best")


@dataclass
class Target:
    """One size's loaded store and the ops bound to it."""

    size: int
    store: durastate.Store
    raw: Raw
    ops: Ops = field(default_factory=dict)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    # PostgreSQL: each contender's application_name (its server processes).
    apps: dict[str, str] = field(default_factory=dict)

    def close(self) -> None:
        self.raw.close()
        self.store.close()
        for step in self.cleanup:
            step()


def open_target(engine: str, size: int, url: str, folder: str, workloads: list[str], pg_stats: str) -> Target:
    cleanup: list[Callable[[], None]] = []
    apps: dict[str, str] = {}
    if engine == "postgresql":
        store_url, schema = create_schema(url)
        cleanup.append(lambda: drop_schema(url, schema))
        apps = {"durastate": f"scale-ds-{size}", "raw": f"scale-raw-{size}", "best": f"scale-raw-{size}"}
        store = durastate.open(with_application_name(store_url, apps["durastate"]), max_connections=2)
        raw = Raw(store, engine, with_application_name(store_url, apps["raw"]))
    else:
        store_url = os.path.join(folder, f"scale-{size}.db")
        store = durastate.open(store_url)
        raw = Raw(store, engine, store_url)
    target = Target(size, store, raw, cleanup=cleanup, apps=apps)
    bulk = Bulk(store, engine, store_url, f"{engine} {size:,}")
    started = time.perf_counter()
    try:
        for workload in WORKLOADS:
            if workload.name not in workloads:
                continue
            ctx = Context(store, engine, size, bulk, target.raw)
            workload.load(ctx)
            if pg_stats == "analyze":
                bulk.analyze(ctx.tables)
            else:
                bulk.freeze_statistics(ctx.tables)
            target.ops.update(workload.ops(ctx))
    except BaseException:
        target.close()
        raise
    print(f"  {engine} {size:>9,}: loaded in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return target


Samples = dict[tuple[str, int, str], list[list[float]]]  # (op, size, contender) -> per round, per call


class CPUClock:
    """This thread's CPU time plus, on PostgreSQL, that of the contenders' server processes (seconds)."""

    def __init__(self, server: ServerCPU | None) -> None:
        self.server = server
        self.pids: dict[str, list[int]] = {}

    def refresh(self, targets: list[Target]) -> None:
        """Look the contenders' server processes up again (a pool may have opened a connection)."""
        if self.server is not None:
            self.pids = {app: self.server.pids(app) for t in targets for app in t.apps.values()}

    def reader(self, target: Target, who: str) -> Callable[[], float]:
        if self.server is None or who not in target.apps:
            return time.thread_time
        server, app = self.server, target.apps[who]

        def read() -> float:
            return time.thread_time() + sum(server.ns_of(self.pids.get(app, [])).values()) / 1e9

        return read


def overhead(read: Callable[[], float]) -> float:
    """What one reading of ``read`` adds to a measured span (median of back-to-back pairs)."""
    spans = []
    for _ in range(50):
        start = read()
        spans.append(read() - start)
    return statistics.median(spans)


def measure(targets: list[Target], rounds: int, calls: int, cpu: CPUClock) -> tuple[Samples, Samples]:
    """(wall samples, CPU samples); see the module docstring for the order of calls."""
    wall_samples: Samples = {}
    cpu_samples: Samples = {}
    ops = list(targets[0].ops)
    clock = time.perf_counter
    for r in range(-1, rounds):  # round -1: warm-up, not recorded
        cpu.refresh(targets)
        readers = {(t.size, who): cpu.reader(t, who) for t in targets for who in CONTENDERS}
        offsets = {key: overhead(read) for key, read in readers.items()}
        for op in ops:
            pairs = [(t.size, who, fn) for t in targets for who, fn in t.ops[op].items()]
            shift = max(r, 0) % len(pairs)
            pairs = pairs[shift:] + pairs[:shift]
            walls: dict[tuple[int, str], list[float]] = {(s, w): [] for s, w, _ in pairs}
            cpus: dict[tuple[int, str], list[float]] = {(s, w): [] for s, w, _ in pairs}
            for j in range(calls if r >= 0 else max(3, calls // 10)):
                for size, who, fn in pairs if j % 2 == 0 else pairs[::-1]:
                    read = readers[(size, who)]
                    cpu_start = read()
                    start = clock()
                    fn()
                    walls[(size, who)].append(clock() - start)
                    cpus[(size, who)].append(read() - cpu_start - offsets[(size, who)])
            if r >= 0:
                for key in walls:
                    wall_samples.setdefault((op, *key), []).append(walls[key])
                    cpu_samples.setdefault((op, *key), []).append(cpus[key])
        if r >= 0:
            print(f"  round {r + 1}/{rounds} done", file=sys.stderr)
    return wall_samples, cpu_samples


def us(times: list[list[float]]) -> float:
    return statistics.median(t for rnd in times for t in rnd) * 1e6


def ratio_spread(a: list[list[float]], b: list[list[float]]) -> tuple[float, float, float]:
    """Median and range over rounds of median(a) / median(b)."""
    per_round = [statistics.median(x) / statistics.median(y) for x, y in zip(a, b, strict=True)]
    return statistics.median(per_round), min(per_round), max(per_round)


def report(engine: str, sizes: list[int], samples: Samples, ops: list[str], unit: str) -> list[str]:
    small, big = sizes[0], sizes[-1]
    cols = " | ".join(f"{s:,}" for s in sizes)
    lines = [
        f"### {engine} (median {unit} per call)",
        "",
        f"| op | contender | {cols} | {big:,} / {small:,} (range) | vs raw at each size (range at {big:,}) |",
        "|---" * (len(sizes) + 4) + "|",
    ]
    for op in ops:
        for who in CONTENDERS:
            if (op, small, who) not in samples:
                continue
            row = [f"{us(samples[(op, s, who)]):.0f}" for s in sizes]
            growth, lo, hi = ratio_spread(samples[(op, big, who)], samples[(op, small, who)])
            target = ""
            if who == "durastate" and engine == "postgresql":
                target = " PASS" if growth <= PG_TARGET else " MISS"
            vs = "-"
            if who != "raw" and (op, small, "raw") in samples:
                per = [ratio_spread(samples[(op, s, who)], samples[(op, s, "raw")]) for s in sizes]
                vs = " / ".join(f"{m:.2f}" for m, _, _ in per) + f" ({per[-1][1]:.2f}-{per[-1][2]:.2f})"
                if who == "durastate" and engine == "sqlite":
                    vs += " PASS" if max(m for m, _, _ in per) <= SQLITE_TARGET else " MISS"
            lines.append(f"| {op} | {who} | {' | '.join(row)} | {growth:.2f}x ({lo:.2f}-{hi:.2f}){target} | {vs} |")
    return lines


def run_engine(engine: str, sizes: list[int], args: argparse.Namespace) -> list[str]:
    targets: list[Target] = []
    cleanup: list[Callable[[], None]] = []
    with tempfile.TemporaryDirectory() as folder:
        try:
            for size in sizes:
                targets.append(open_target(engine, size, args.url, folder, args.workloads, args.pg_stats))
            server = ServerCPU(args.url) if engine == "postgresql" else None
            cleanup.append(lambda: server.close() if server is not None else None)
            walls, cpus = measure(targets, args.rounds, args.calls, CPUClock(server))
            ops = list(targets[0].ops)
            if server is None:
                return report(engine, sizes, cpus, ops, "thread CPU us")
            unit = "CPU us: client thread + the contender's server process"
            if not server.available:
                unit = "client thread CPU us (server processes not readable here)"
            return [
                *report(engine, sizes, walls, ops, "wall us"),
                "",
                *report(engine, sizes, cpus, ops, unit),
            ]
        finally:
            for target in targets:
                target.close()
            for step in cleanup:
                step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000", help="comma-separated row counts (default 1000,100000)")
    parser.add_argument("--calls", type=int, default=40, help="calls per op, size and contender in a round (40)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument(
        "--workloads", default=",".join(w.name for w in WORKLOADS), help="comma-separated (default: all)"
    )
    parser.add_argument("--pg-stats", choices=("analyze", "none"), default="analyze")
    parser.add_argument(
        "--url",
        default=postgres_url(),
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    args.workloads = args.workloads.split(",")
    unknown = set(args.workloads) - {w.name for w in WORKLOADS}
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}")
    if len(sizes) < 2 or sizes[0] < 1000:
        parser.error("give at least two sizes, each >= 1000 (delete takes 1000 keys)")
    out = [
        f"bench/scale.py --sizes {args.sizes} --calls {args.calls} --rounds {args.rounds}"
        f" --pg-stats {args.pg_stats} --workloads {','.join(args.workloads)}; Python {platform.python_version()},"
        f" {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start",
        "",
    ]
    for engine in args.engines.split(","):
        out += [*run_engine(engine, sizes, args), ""]
        print("\n".join(out), flush=True)
        out = []


if __name__ == "__main__":
    main()
