"""Why do kv.get_many and kv.scan cost more at 1e6 rows on PostgreSQL? Plans and buffers.

    .venv/bin/python bench/pg_kv_plans.py [--sizes 1000,1000000] [--samples 30] [--url URL]

For each size, a fresh schema is loaded like ``bench/scale.py``'s kv
workload (``size`` values in one namespace, copies by ``COPY``), first
kept without statistics (autovacuum off), then analysed. For every
statement variant of the two reads, each run as a server-side prepared
statement under ``plan_cache_mode`` ``force_custom_plan`` and
``force_generic_plan`` (durastate's statements are prepared by psycopg
after two uses, and the server may switch to the generic plan after
five), ``EXPLAIN (ANALYZE, BUFFERS)`` on ``--samples`` random key sets
gives: the plan's top nodes, the median execution time, and the mean
shared buffers hit and read (read = not in ``shared_buffers``, fetched
from the OS). Variants of ``get_many`` of 100 keys:

* ``ours``: durastate's text (``kv._get_many[100]``: a LIMIT 1 LATERAL
  probe per key over ``unnest(ARRAY[...])``);
* ``any``: ``key = ANY(%s)`` with one array parameter;
* ``in``: ``key IN (%s, ... 100 times)``;
* ``unnest join``: a join of ``unnest(%s::bytea[])`` with the table;
* ``values join``: a join of ``(VALUES (%s), ... 100 times)`` with the table.

and of ``scan`` 100: ``ours`` (``kv._scan``: key range, expiry filter,
``ORDER BY key LIMIT``), ``no expiry filter`` (the same without the
``expires_at`` condition: what the filter costs), and two spellings of
the same live-rows condition as one expression (``coalesce expiry``,
``is not true expiry``).

The table's and index's sizes are printed next to ``shared_buffers``.

Then, on the fresh table only (before the ANALYZE), the wall time in ms of
each of the first ``--first`` calls of ``kv.scan`` / ``kv.get_many`` made
through a new store (one pooled connection) and through a new psycopg
connection running durastate's text: the statement is sent unprepared
twice (psycopg's prepare threshold), then the server plans it with the
values five more times (custom plans) before it may settle on the generic
plan; a plan that is only bad as a custom plan shows as slow first calls.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from typing import Any

import psycopg

import durastate
from _postgres import postgres_url
from durastate.testing.postgres_server import create_schema, drop_schema
from scale_load import Bulk
from scale_workloads import NS, SCOPE, Context, Raw, kv_key, load_kv

EXPIRY = " AND (expires_at IS NULL OR expires_at > %s)"  # kv.scan's live-rows condition


def variants(store: durastate.Store) -> dict[str, dict[str, str]]:
    kv, p = store.kv, store.engine.prefix
    scan = kv._scan[(True, False, False)]
    assert EXPIRY in scan, scan
    return {
        "get_many 100": {
            "ours": kv._get_many[100],
            "any": f"SELECT key, value, expires_at FROM {p}kv WHERE scope = %s AND ns = %s AND key = ANY(%s)",
            "in": f"SELECT key, value, expires_at FROM {p}kv WHERE scope = %s AND ns = %s AND key IN ("
            + ", ".join(["%s"] * 100)
            + ")",
            "unnest join": f"SELECT t.key, t.value, t.expires_at FROM unnest(%s::bytea[]) AS k (key)"
            f" JOIN {p}kv t ON t.scope = %s AND t.ns = %s AND t.key = k.key",
            "values join": "SELECT t.key, t.value, t.expires_at FROM (VALUES "
            + ", ".join(["(%s::bytea)"] * 100)
            + f") AS k (key) JOIN {p}kv t ON t.scope = %s AND t.ns = %s AND t.key = k.key",
        },
        "scan 100": {
            "ours": scan,
            "no expiry filter": scan.replace(EXPIRY, ""),
            # The same rows, the expiry test spelled so that it is one opaque condition.
            "coalesce expiry": scan.replace(EXPIRY, " AND COALESCE(expires_at, 9223372036854775807) > %s"),
            "is not true expiry": scan.replace(EXPIRY, " AND (expires_at <= %s) IS NOT TRUE"),
        },
    }


def params(op: str, variant: str, size: int, rng: random.Random, now: int) -> tuple[Any, ...]:
    if op == "get_many 100":
        keys = [kv_key(i) for i in rng.sample(range(size), 100)]
        if variant == "any":
            return (SCOPE, NS, keys)
        if variant == "unnest join":
            return (keys, SCOPE, NS)
        if variant == "values join":
            return (*keys, SCOPE, NS)
        return (SCOPE, NS, *keys)
    start = kv_key(rng.randrange(max(1, size - 100)))
    return (SCOPE, NS, start, 100) if variant == "no expiry filter" else (SCOPE, NS, start, now, 100)


def dollar(sql: str) -> str:
    """``%s`` placeholders as ``$1..$n`` (a server-side PREPARE)."""
    counter = iter(range(1, 10_000))
    return re.sub(r"%s", lambda _: f"${next(counter)}", sql)


def shape(plan: dict[str, Any], depth: int = 0) -> str:
    """The plan's node types, outermost first, with the index used."""
    name = plan["Node Type"] + (f" on {plan['Index Name']}" if "Index Name" in plan else "")
    if "Index Cond" in plan:
        name += f" [cond {_short(plan['Index Cond'])}"
        name += f"; filter {_short(plan['Filter'])}]" if "Filter" in plan else "]"
    if "Heap Fetches" in plan:  # an index-only scan: the rows it still read from the heap
        name += f" (heap fetches {plan['Heap Fetches']})"
    kids = plan.get("Plans", [])
    return name + (" > " + " + ".join(shape(k, depth + 1) for k in kids) if kids and depth < 3 else "")


def _short(condition: str) -> str:
    """An index condition without casts and table qualifiers, cut at 60 characters."""
    text = re.sub(r"::\w+(\[\])?|\w+\.", "", condition)
    return text if len(text) <= 60 else text[:57] + "..."


def explain(conn: psycopg.Connection[Any], sql: str, args: tuple[Any, ...], mode: str) -> tuple[float, int, int, str]:
    conn.execute(f"SET plan_cache_mode = {mode}")
    conn.execute("DEALLOCATE ALL")
    conn.execute(f"PREPARE bench_stmt AS {dollar(sql)}")
    placeholders = ", ".join(["%s"] * len(args))
    (row,) = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE bench_stmt({placeholders})", args)
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    top = doc[0]
    plan = top["Plan"]
    return top["Execution Time"], plan.get("Shared Hit Blocks", 0), plan.get("Shared Read Blocks", 0), shape(plan)


def sizes_of(conn: psycopg.Connection[Any], prefix: str) -> str:
    row = conn.execute(
        "SELECT pg_size_pretty(pg_relation_size(%s)), pg_size_pretty(pg_indexes_size(%s)),"
        " current_setting('shared_buffers')",
        (f"{prefix}kv", f"{prefix}kv"),
    ).fetchone()
    assert row is not None
    return f"table {row[0]}, indexes {row[1]}, shared_buffers {row[2]}"


def first_calls(url: str, size: int, calls: int) -> list[str]:
    """Wall ms of the first ``calls`` calls on new connections (see the module docstring)."""
    from durastate.engines.postgres import PREPARE_THRESHOLD

    rng = random.Random(size)
    lines = []
    store = durastate.open(url, max_connections=1)
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=PREPARE_THRESHOLD)
    try:
        kv = store.kv
        scan_sql = kv._scan[(True, False, False)]

        def start() -> bytes:
            return kv_key(rng.randrange(max(1, size - 100)))

        def keys() -> list[bytes]:
            return [kv_key(i) for i in rng.sample(range(size), 100)]

        contenders = {
            "kv.scan 100 (durastate)": lambda: list(kv.scan(SCOPE, NS, start=start(), limit=100)),
            "scan 100, same text (psycopg)": lambda: conn.execute(
                scan_sql, (SCOPE, NS, start(), store.engine.now_ms(), 100)
            ).fetchall(),
            "kv.get_many 100 (durastate)": lambda: kv.get_many(SCOPE, NS, keys()),
            "get_many 100, same text (psycopg)": lambda: conn.execute(
                kv._get_many[100], (SCOPE, NS, *keys())
            ).fetchall(),
        }
        for label, call in contenders.items():
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                call()
                times.append((time.perf_counter() - started) * 1000)
            lines.append(f"{size:,} | fresh | first {calls} calls | {label} | " + " ".join(f"{t:.1f}" for t in times))
    finally:
        conn.close()
        store.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,1000000")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--first", type=int, default=12, help="first calls timed on a fresh table (default 12)")
    parser.add_argument(
        "--url",
        default=postgres_url(),
    )
    args = parser.parse_args()
    print(f"bench/pg_kv_plans.py --sizes {args.sizes} --samples {args.samples}")
    print("size | stats | op | variant | plan mode | median ms | shared hit | shared read | plan")
    for size in (int(s) for s in args.sizes.split(",")):
        url, schema = create_schema(args.url)
        try:
            store = durastate.open(url, max_connections=1)
            bulk = Bulk(store, "postgresql", url, f"postgresql {size:,}")
            ctx = Context(store, "postgresql", size, bulk, Raw(store, "postgresql", url))
            load_kv(ctx)
            bulk.freeze_statistics(["kv"])
            # Client-side binding: EXPLAIN EXECUTE takes its arguments as literals.
            with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
                print(f"# {size:,} rows: {sizes_of(conn, store.engine.prefix)}")
                for line in first_calls(url, size, args.first):
                    print(line, flush=True)
                for stats in ("fresh", "analysed"):
                    if stats == "analysed":
                        conn.execute(f"ANALYZE {store.engine.prefix}kv")
                    for op, texts in variants(store).items():
                        for variant, sql in texts.items():
                            for mode in ("force_custom_plan", "force_generic_plan"):
                                rng = random.Random(
                                    f"{size}/{op}/{variant}/{mode}"
                                )  # fresh keys per mode: no page read twice
                                got = [
                                    explain(conn, sql, params(op, variant, size, rng, store.engine.now_ms()), mode)
                                    for _ in range(args.samples)
                                ]
                                print(
                                    f"{size:,} | {stats} | {op} | {variant} | {mode.split('_')[1]} |"
                                    f" {statistics.median(g[0] for g in got):.3f} |"
                                    f" {statistics.mean(g[1] for g in got):.0f} |"
                                    f" {statistics.mean(g[2] for g in got):.1f} | {got[-1][3]}",
                                    flush=True,
                                )
            ctx.raw.close()
            store.close()
        finally:
            drop_schema(args.url, schema)


if __name__ == "__main__":
    main()
