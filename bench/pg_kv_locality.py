"""Why does kv.get_many of 100 keys cost 2.2x more at 1e6 rows than at 1e3 on PostgreSQL?

    .venv/bin/python bench/pg_kv_locality.py [--sizes 1000,1000000] [--calls 40] [--rounds 5] [--blocks 200]
        [--phases analysed,vacuumed,covering] [--url URL]

Issue 10's hypothesis: 100 random keys of a 1e6-row table touch about 100
distinct heap pages and 100 index leaves; at 1e3 the whole table is 20
pages. This script separates what that costs into its parts, with the
end-to-end figure the target is about (``kv.get_many`` through the public
API, CPU time of this thread plus the store's server process, as
``bench/scale.py``), for several ways of choosing the 100 keys:

* ``random``: 100 keys drawn from the whole namespace (``bench/scale.py``'s
  workload): ~100 heap pages and ~100 index leaves per call;
* ``random, sorted``: the same keys sorted client-side (index probes in key
  order: does the walk order matter?);
* ``pool of 1,000``: 100 keys drawn from a fixed set of 1,000 random keys:
  still ~100 distinct pages per call, but the set's pages (<= 2,000, 16 MB)
  stay in ``shared_buffers`` (no reads from the OS page cache);
* ``same 100``: the same 100 random keys every call: the same ~200 pages,
  in ``shared_buffers`` and warm in the CPU caches (about 1.6 MB);
* ``consecutive``: 100 consecutive keys from a random start: 2-3 heap pages
  and 1-2 leaves (the table is loaded in key order).

Phases, each on the same two loaded tables: ``analysed`` (the state
``bench/scale.py`` measures), ``vacuumed`` (``VACUUM ANALYZE``: hint bits and
the visibility map set, the control for the next phase) and ``covering``
(a ``UNIQUE (scope, ns, key) INCLUDE (value, expires_at)`` index, so each
probe can be an index-only scan that skips the heap page).

Evidence printed first for each phase: the table's and its indexes' sizes,
``shared_buffers``, how many of the table's and primary key's pages are in
``shared_buffers`` now (``pg_buffercache``), then per condition and size
``EXPLAIN (ANALYZE, BUFFERS)`` of durastate's statement as the generic plan
(the one a prepared statement settles on): median server ms, mean shared
buffers hit / read (read: not in ``shared_buffers``, from the OS cache),
the plan's node types and heap fetches. ``pg_buffercache`` / ``pg_prewarm``
are used if the database of ``--url`` has them (this script creates
nothing there but its schemas and never changes the server's configuration;
give it a database of its own with ``CREATE EXTENSION pg_buffercache``
for the in-``shared_buffers`` counts).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

import durastate
from _postgres import postgres_url
from durastate.testing.postgres_server import create_schema, drop_schema
from pg_cpu import ServerCPU, process_ns, with_application_name
from pg_kv_plans import explain
from scale_load import Bulk
from scale_workloads import NS, SCOPE, Context, Raw, kv_key, load_kv

CONDITIONS = ("random", "random, sorted", "pool of 1,000", "same 100", "consecutive")


def key_sources(size: int) -> dict[str, Callable[[], list[bytes]]]:
    """Each condition's source of 100-key lists (seeded per size: reruns draw the same keys)."""
    rng = random.Random(size)
    pool = rng.sample(range(size), min(1000, size))
    same = [kv_key(i) for i in rng.sample(range(size), 100)]

    def drawn() -> list[bytes]:
        return [kv_key(i) for i in rng.sample(range(size), 100)]

    def consecutive() -> list[bytes]:
        first = rng.randrange(size - 100)
        keys = [kv_key(i) for i in range(first, first + 100)]
        rng.shuffle(keys)  # the walk order is not what this condition is about
        return keys

    return {
        "random": drawn,
        "random, sorted": lambda: sorted(drawn()),
        "pool of 1,000": lambda: [kv_key(i) for i in rng.sample(pool, 100)],
        "same 100": lambda: same,
        "consecutive": consecutive,
    }


class Loaded:
    """One size's kv table, loaded once, with its store and the server process to clock."""

    def __init__(self, url: str, size: int, label: str = "") -> None:
        self.size = size
        self.base_url = url
        self.url, self.schema = create_schema(url)
        self.app = f"locality-{size}{label}"
        self.store = durastate.open(with_application_name(self.url, self.app), max_connections=1)
        bulk = Bulk(self.store, "postgresql", self.url, f"postgresql {size:,}")
        self.ctx = Context(self.store, "postgresql", size, bulk, Raw(self.store, "postgresql", self.url))
        load_kv(self.ctx)
        bulk.analyze(["kv"])
        self.table = f"{self.store.engine.prefix}kv"
        self.qualified = f"{self.schema}.{self.table}"

    def close(self) -> None:
        self.ctx.raw.close()
        self.store.close()
        drop_schema(self.base_url, self.schema)


def evidence(admin: psycopg.Connection[Any], loaded: Loaded, has_buffercache: bool) -> str:
    """Sizes of the table and its indexes, shared_buffers, and how much of them is in it now."""
    schema = loaded.schema
    rows = admin.execute(
        "SELECT c.relname, c.relpages, pg_relation_size(c.oid) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND (c.relname = %s OR c.oid IN"
        " (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass))"
        " ORDER BY c.relname",
        (schema, loaded.table, loaded.qualified),
    ).fetchall()
    parts = []
    for name, _, size in rows:
        part = f"{name} {size / 2**20:.1f} MB ({size // 8192:,} pages"
        if has_buffercache:
            (cached,) = admin.execute(
                "SELECT count(*) FROM pg_buffercache b JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid)"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND b.relforknumber = 0 AND n.nspname = %s AND c.relname = %s",
                (schema, name),
            ).fetchone() or (0,)
            part += f", {cached:,} in shared_buffers"
        parts.append(part + ")")
    (shared,) = admin.execute("SELECT current_setting('shared_buffers')").fetchone() or ("?",)
    return f"# {loaded.size:,} rows: " + "; ".join(parts) + f"; shared_buffers {shared}"


def plans(url: str, loaded: Loaded, samples: int) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of durastate's get_many 100 statement, generic plan, per condition."""
    sql = loaded.store.kv._get_many[100]
    lines = []
    with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute(f"SET search_path = {loaded.schema}")
        sources = key_sources(loaded.size)
        for name, keys in sources.items():
            got = [explain(conn, sql, (SCOPE, NS, *keys()), "force_generic_plan") for _ in range(samples)]
            fetches = got[-1][3]
            lines.append(
                f"{loaded.size:,} | {name} | {statistics.median(g[0] for g in got):.3f} ms |"
                f" hit {statistics.mean(g[1] for g in got):.0f} | read {statistics.mean(g[2] for g in got):.1f} |"
                f" {fetches}"
            )
    return lines


def measure(
    loads: list[Loaded], server: ServerCPU, rounds: int, calls: int
) -> tuple[dict[tuple[int, str], list[float]], dict[tuple[int, str], list[float]]]:
    """Per (size, condition), each round's median CPU us and wall us of kv.get_many (interleaved call by call)."""
    pairs = []
    for loaded in loads:
        for name, keys in key_sources(loaded.size).items():
            pairs.append((loaded, name, keys))
    cpu_out: dict[tuple[int, str], list[float]] = {(lo.size, n): [] for lo, n, _ in pairs}
    wall_out: dict[tuple[int, str], list[float]] = {(lo.size, n): [] for lo, n, _ in pairs}
    for r in range(-1, rounds):  # round -1: warm-up
        pids = {lo.size: server.pids(lo.app) for lo in loads}

        def clock(size: int, pids: dict[int, list[int]] = pids) -> float:
            return time.thread_time() + sum(server.ns_of(pids[size]).values()) / 1e9

        offset = {lo.size: statistics.median(-clock(lo.size) + clock(lo.size) for _ in range(50)) for lo in loads}
        shift = max(r, 0) % len(pairs)
        order = pairs[shift:] + pairs[:shift]
        cpus: dict[tuple[int, str], list[float]] = {(lo.size, n): [] for lo, n, _ in pairs}
        walls: dict[tuple[int, str], list[float]] = {(lo.size, n): [] for lo, n, _ in pairs}
        for j in range(calls if r >= 0 else 10):
            for loaded, name, keys in order if j % 2 == 0 else order[::-1]:
                wanted = keys()  # drawn outside the clock: the same cost for every condition
                kv = loaded.store.kv
                start = clock(loaded.size)
                wall = time.perf_counter()
                kv.get_many(SCOPE, NS, wanted)
                walls[(loaded.size, name)].append(time.perf_counter() - wall)
                cpus[(loaded.size, name)].append(clock(loaded.size) - start - offset[loaded.size])
        if r >= 0:
            for key in cpus:
                cpu_out[key].append(statistics.median(cpus[key]) * 1e6)
                wall_out[key].append(statistics.median(walls[key]) * 1e6)
            print(f"  round {r + 1}/{rounds} done", file=sys.stderr)
    return cpu_out, wall_out


def blocks(loads: list[Loaded], calls: int) -> list[str]:
    """Each condition's calls back to back (not interleaved), client and server CPU apart.

    On a psycopg connection of its own running durastate's statement (the
    raw contender), so the server process is known exactly. Back to back,
    ``same 100`` finds its pages warm in the CPU caches as well as in
    ``shared_buffers``; interleaved (the tables) other calls evict them.
    """
    from durastate.engines.postgres import PREPARE_THRESHOLD

    lines = ["size | keys | client CPU us | server CPU us | total | / same keys at the smallest size"]
    base: dict[str, float] = {}
    for loaded in loads:
        sql = loaded.store.kv._get_many[100]
        with psycopg.connect(loaded.url, autocommit=True, prepare_threshold=PREPARE_THRESHOLD) as conn:
            pid = conn.info.backend_pid
            for name, keys in key_sources(loaded.size).items():
                client, server = [], []
                for i in range(calls + 20):  # the first 20: warm-up, the statement prepared
                    wanted = keys()
                    t0, s0 = time.thread_time(), process_ns(pid)
                    conn.execute(sql, (SCOPE, NS, *wanted)).fetchall()
                    t1, s1 = time.thread_time(), process_ns(pid)
                    if i >= 20:
                        client.append((t1 - t0) * 1e6)
                        server.append((s1 - s0) / 1e3)
                c, sv = statistics.median(client), statistics.median(server)
                base.setdefault(name, c + sv)
                lines.append(
                    f"{loaded.size:,} | {name} | {c:.0f} | {sv:.0f} | {c + sv:.0f} | {(c + sv) / base[name]:.2f}x"
                )
    return lines


def table(sizes: list[int], got: dict[tuple[int, str], list[float]]) -> list[str]:
    small, big = sizes[0], sizes[-1]
    lines = [
        f"| keys | {' | '.join(f'{s:,}' for s in sizes)} | {big:,} / {small:,} (range) | vs random at {big:,} |",
        "|---" * (len(sizes) + 3) + "|",
    ]
    for name in CONDITIONS:
        cells = [f"{statistics.median(got[(s, name)]):.0f}" for s in sizes]
        per = [b / a for a, b in zip(got[(small, name)], got[(big, name)], strict=True)]
        vs = statistics.median(got[(big, name)]) / statistics.median(got[(big, "random")])
        lines.append(
            f"| {name} | {' | '.join(cells)} | {statistics.median(per):.2f}x ({min(per):.2f}-{max(per):.2f}) |"
            f" {vs:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,1000000")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20, help="EXPLAIN samples per condition (default 20)")
    parser.add_argument("--blocks", type=int, default=200, help="calls per condition back to back (0: skip)")
    parser.add_argument("--phases", default="analysed,vacuumed,covering")
    parser.add_argument(
        "--url",
        default=postgres_url(),
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(
        f"bench/pg_kv_locality.py --sizes {args.sizes} --calls {args.calls} --rounds {args.rounds}"
        f" --phases {args.phases}; Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}"
    )
    loads: list[Loaded] = []
    admin = psycopg.connect(args.url, autocommit=True)
    server = ServerCPU(args.url)
    try:
        names = {r[0] for r in admin.execute("SELECT extname FROM pg_extension").fetchall()}
        has_buffercache = "pg_buffercache" in names
        for size in sizes:
            loads.append(Loaded(args.url, size))
        for phase in args.phases.split(","):
            for loaded in loads:
                if phase == "vacuumed":
                    admin.execute(f"VACUUM ANALYZE {loaded.qualified}")
                elif phase == "covering":
                    admin.execute(
                        f"CREATE UNIQUE INDEX {loaded.table}_cover ON {loaded.qualified}"
                        " (scope, ns, key) INCLUDE (value, expires_at)"
                    )
                    admin.execute(f"VACUUM ANALYZE {loaded.qualified}")
                elif phase == "prewarmed" and "pg_prewarm" in names:
                    for rel in (loaded.table, f"{loaded.table}_pkey"):
                        admin.execute("SELECT pg_prewarm(%s)", (f"{loaded.schema}.{rel}",))
            print(f"\n## phase: {phase}, load average {os.getloadavg()[0]:.1f}", flush=True)
            cpu, wall = measure(loads, server, args.rounds, args.calls)
            for loaded in loads:
                print(evidence(admin, loaded, has_buffercache))
            print("size | keys | generic plan server ms | shared hit | shared read | plan")
            for loaded in loads:
                for line in plans(args.url, loaded, args.samples):
                    print(line, flush=True)
            print("\nkv.get_many 100, median CPU us (client thread + server process):")
            print("\n".join(table(sizes, cpu)))
            print("\nkv.get_many 100, median wall us:")
            print("\n".join(table(sizes, wall)), flush=True)
            if args.blocks:
                print("\nback to back, raw psycopg with durastate's statement, median of", args.blocks, "calls:")
                print("\n".join(blocks(loads, args.blocks)), flush=True)
    finally:
        for loaded in loads:
            loaded.close()
        server.close()
        admin.close()


if __name__ == "__main__":
    main()
