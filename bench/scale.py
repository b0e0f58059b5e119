"""Does a hot op cost the same on a big table as on a small one? Both engines.

Run it with ``make bench-scale`` (or ``.venv/bin/python bench/scale.py
--help``). For each size (``--sizes``, rows in one kv namespace and items
in one queue) a fresh store is loaded (no manual ANALYZE), then each op is
timed: the median latency of ``--calls`` calls, with random keys.

Targets (issue 10): on PostgreSQL the latency at the biggest size within
1.5x of the smallest; on SQLite within 1.2x of raw ``sqlite3`` running the
same lookup on the same file at the same size (a B-tree a level deeper
costs everyone the same, so SQLite is judged against the raw driver).

The PostgreSQL server comes from ``--url``, ``DURASTATE_BENCH_POSTGRES_URL``,
``DURASTATE_TEST_POSTGRES_URL`` or ``postgresql://postgres@127.0.0.1:5432/postgres``
(a fresh schema per size, dropped at the end); ``--engines sqlite`` skips it.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import durastate
from durastate.testing.postgres_server import create_schema, drop_schema

SCOPE = b"bench"
NS = b"ns"
VALUE = b"v" * 100
LOAD_BATCH = 5_000
PG_TARGET = 1.5
SQLITE_TARGET = 1.2


def key(i: int) -> bytes:
    return b"key-%09d" % i


def load(store: durastate.Store, size: int) -> None:
    for start in range(0, size, LOAD_BATCH):
        store.kv.put_many(SCOPE, NS, [(key(i), VALUE) for i in range(start, min(size, start + LOAD_BATCH))])
    for start in range(0, size, LOAD_BATCH):
        store.queues.push("deep", [b"item"] * (min(size, start + LOAD_BATCH) - start))


def median_us(run: Callable[[], Any], calls: int) -> float:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


def durastate_ops(store: durastate.Store, size: int, rng: random.Random) -> dict[str, Callable[[], Any]]:
    def delete_1000() -> None:
        first = rng.randrange(0, max(1, size - 1000))
        keys = [key(i) for i in range(first, first + min(1000, size))]
        store.kv.delete(SCOPE, NS, keys)
        store.kv.put_many(SCOPE, NS, [(k, VALUE) for k in keys])  # put back: the table keeps its size

    def claim_ack() -> None:
        claim = store.queues.claim("deep")
        assert claim is not None
        claim.ack()
        store.queues.push("deep", [b"item"])

    return {
        "kv get": lambda: store.kv.get(SCOPE, NS, key(rng.randrange(size))),
        "kv get_many 100": lambda: store.kv.get_many(SCOPE, NS, [key(rng.randrange(size)) for _ in range(100)]),
        "kv scan 100": lambda: list(store.kv.scan(SCOPE, NS, start=key(rng.randrange(size)), limit=100)),
        "kv put": lambda: store.kv.put(SCOPE, NS, key(rng.randrange(size)), VALUE),
        "kv delete 1000 keys (+put back)": delete_1000,
        "queue claim+ack (+push)": claim_ack,
    }


def raw_sqlite_ops(path: str, prefix: str, size: int, rng: random.Random) -> dict[str, Callable[[], Any]]:
    """The same lookups with plain sqlite3 on the same file (reads only: the lookup is what scales)."""
    conn = sqlite3.connect(path, isolation_level=None)
    table = prefix + "kv"
    many = f"SELECT key, value FROM {table} WHERE scope = ? AND ns = ? AND key IN ({', '.join('?' * 100)})"
    return {
        "kv get": lambda: conn.execute(
            f"SELECT value FROM {table} WHERE scope = ? AND ns = ? AND key = ?", (SCOPE, NS, key(rng.randrange(size)))
        ).fetchone(),
        "kv get_many 100": lambda: conn.execute(
            many, (SCOPE, NS, *[key(rng.randrange(size)) for _ in range(100)])
        ).fetchall(),
        "kv scan 100": lambda: conn.execute(
            f"SELECT key, value FROM {table} WHERE scope = ? AND ns = ? AND key >= ? ORDER BY key LIMIT 100",
            (SCOPE, NS, key(rng.randrange(size))),
        ).fetchall(),
    }


def run_engine(engine: str, sizes: list[int], calls: int, url: str) -> dict[int, dict[str, dict[str, float]]]:
    results: dict[int, dict[str, dict[str, float]]] = {}
    for size in sizes:
        rng = random.Random(size)
        schema = None
        folder = tempfile.TemporaryDirectory()
        path = os.path.join(folder.name, "scale.db")
        if engine == "postgresql":
            store_url, schema = create_schema(url)
            store = durastate.open(store_url, max_connections=2)
        else:
            store = durastate.open(path)
        try:
            started = time.perf_counter()
            load(store, size)
            print(f"  {engine} {size:>9,} rows loaded in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            timings: dict[str, dict[str, float]] = {}
            for name, op in durastate_ops(store, size, rng).items():
                timings[name] = {"durastate": median_us(op, calls)}
            if engine == "sqlite":
                for name, op in raw_sqlite_ops(path, store.engine.prefix, size, rng).items():
                    timings[name]["sqlite3"] = median_us(op, calls)
            results[size] = timings
        finally:
            store.close()
            if schema is not None:
                drop_schema(url, schema)
            folder.cleanup()
    return results


def report(engine: str, sizes: list[int], results: dict[int, dict[str, dict[str, float]]]) -> list[str]:
    small, big = sizes[0], sizes[-1]
    header = " | ".join(f"{s:,} rows (us)" for s in sizes)
    lines = [f"### {engine}", "", f"| op | {header} | {big:,} / {small:,} |"]
    extra = " durastate / sqlite3 at each size |" if engine == "sqlite" else ""
    lines[-1] += extra
    lines.append("|---" * (len(sizes) + 2 + (1 if extra else 0)) + "|")
    for op in results[small]:
        row = [f"{results[s][op]['durastate']:.0f}" for s in sizes]
        growth = results[big][op]["durastate"] / results[small][op]["durastate"]
        line = f"| {op} | {' | '.join(row)} | {growth:.2f}x |"
        if extra:
            ratios = [
                f"{results[s][op]['durastate'] / results[s][op]['sqlite3']:.2f}" if "sqlite3" in results[s][op] else "-"
                for s in sizes
            ]
            line += f" {' / '.join(ratios)} |"
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000", help="comma-separated row counts (default 1000,100000)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per op and size (default 200)")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument(
        "--url",
        default=os.environ.get("DURASTATE_BENCH_POSTGRES_URL")
        or os.environ.get("DURASTATE_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if len(sizes) < 2 or sizes[0] < 1000:
        parser.error("give at least two sizes, each >= 1000 (delete takes 1000 keys)")
    out = [f"bench/scale.py --sizes {args.sizes} --calls {args.calls}; Python {platform.python_version()}", ""]
    for engine in args.engines.split(","):
        results = run_engine(engine, sizes, args.calls, args.url)
        out += [*report(engine, sizes, results), ""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
