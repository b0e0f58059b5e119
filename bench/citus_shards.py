"""128 logical shards on one machine: key spread, per-operation cost, client memory and connections per shard.

Run: ``.venv/bin/python bench/citus_shards.py --url postgresql://postgres@127.0.0.1:5432/postgres``
(``--citus-url`` adds a run of ``durastate.citus.open`` on a Citus coordinator).

Layouts, side by side in one run (each a fresh set of schemas, dropped afterwards):

* ``schemas-1``: ``durastate.citus.open(url, shards=N)``: N logical shards
  as N schemas behind ONE engine (one pool): the Citus client model, here on
  plain PostgreSQL (``--citus-url``: on the Citus coordinator);
* ``schemas-4db``: the same N logical shards spread over four databases,
  N/4 schemas in each behind one engine per database (four
  ``durastate.citus.open(db, shards=N/4)`` on plain PostgreSQL, their
  schema stores named by the N logical shard names in one
  ``ShardedStore``): the router over several servers with one pool per
  server (no cross-database atomicity);
* ``map-4db``: ``durastate.shard_map``: N logical shards as N schemas
  spread over four databases, one store (one pool) per shard: the router
  without Citus (``--map-url``: on another server, e.g. one whose
  ``max_connections`` is above N);
* ``plain``: one ``durastate.open`` store (one shard), the baseline.

Figures:

1. key spread: 20,000 keys over N rendezvous names, max/mean and
   min/mean shard load, and the cost of one routing decision (rendezvous
   hashes the key once per shard: linear in N);
2. per-operation cost against one shard: kv put+get of one key (wall time,
   median of ``--calls`` calls, the layouts taking turns call by call);
3. client memory (tracemalloc, Python allocations kept after opening) and
   server connections (``pg_stat_activity`` by ``application_name``) per
   layout, divided by N.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

import durastate
import durastate.citus
from durastate.shard_map import ShardMap, open_map, shard_names
from durastate.sharding import ShardedStore, rendezvous_owner


def with_app(url: str, app: str, schema: str | None = None) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("application_name", "options")]
    query.append(("application_name", app))
    if schema is not None:
        query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def spread(n: int, keys: int = 20_000) -> tuple[float, float, float]:
    names = [name.encode() for name in shard_names("ds_", n)]
    counts = [0] * n
    started = time.perf_counter()
    for i in range(keys):
        counts[rendezvous_owner(names, f"tenant-{i}".encode())] += 1
    per_key_us = (time.perf_counter() - started) / keys * 1e6
    mean = keys / n
    return max(counts) / mean, min(counts) / mean, per_key_us


def connections(admin: psycopg.Connection[Any], app: str) -> int:
    row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchone()
    return int(row[0]) if row else 0


def opened(label: str, make: Any) -> tuple[Any, float, float]:
    """(store, seconds to open, Python bytes kept)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    store = make()
    seconds = time.perf_counter() - started
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return store, seconds, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="a PostgreSQL server (databases are created on it)")
    parser.add_argument("--citus-url", help="also run durastate.citus.open on this Citus coordinator")
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--no-map", action="store_true", help="skip the shard-map layout (a pool per shard)")
    parser.add_argument("--map-url", help="the server of the shard-map layout's four databases (default: --url)")
    parser.add_argument(
        "--reuse-prefix", help="open the logical shards an earlier run left under this prefix (kept afterwards)"
    )
    args = parser.parse_args()
    n = args.shards
    tag = uuid.uuid4().hex[:8]

    print("## key spread over N logical shards (20,000 keys, rendezvous)\n")
    print("| N | max/mean | min/mean | uncached routing us/key |")
    print("|---:|---:|---:|---:|")
    for count in (4, 16, 64, 128, 256):
        high, low, us = spread(count)
        print(f"| {count} | {high:.3f} | {low:.3f} | {us:.1f} |")

    admin = psycopg.connect(args.url, autocommit=True)
    map_url = args.map_url or args.url
    map_admin = psycopg.connect(map_url, autocommit=True)
    databases = [f"bench_shards_{tag}_{i}" for i in range(4)]
    for db in databases:
        admin.execute(f"CREATE DATABASE {db}")
        if not args.no_map and map_url != args.url:
            map_admin.execute(f"CREATE DATABASE {db}")
    layouts: dict[str, tuple[Any, float, float, str]] = {}
    dropped: list[tuple[str, str]] = []
    try:
        prefix = args.reuse_prefix or f"b{tag}_"
        app = f"bench-schemas-{tag}"
        store, secs, kept = opened(
            "schemas-1", lambda: durastate.citus.open(with_app(args.url, app), shards=n, prefix=prefix)
        )
        layouts["schemas-1"] = (store, secs, kept, app)
        if not args.reuse_prefix:
            dropped.append((args.url, prefix))
        if args.citus_url:
            capp = f"bench-citus-{tag}"
            cprefix = args.reuse_prefix or f"c{tag}_"
            store, secs, kept = opened(
                "citus", lambda: durastate.citus.open(with_app(args.citus_url, capp), shards=n, prefix=cprefix)
            )
            layouts["citus"] = (store, secs, kept, capp)
            if not args.reuse_prefix:
                dropped.append((args.citus_url, cprefix))
        # Logical shard i lives in database i % 4 (in both four-database layouts).
        names = shard_names("ds_", n)
        fapp = f"bench-schemas4-{tag}"
        db_urls = [urlunsplit(urlsplit(args.url)._replace(path=f"/{db}")) for db in databases]

        def four_engines() -> ShardedStore:
            engines = [durastate.citus.open(with_app(url, fapp), shards=n // 4, prefix=f"f{tag}_") for url in db_urls]
            return ShardedStore({name: engines[i % 4].stores[i // 4] for i, name in enumerate(names)})

        store, secs, kept = opened("schemas-4db", four_engines)
        layouts["schemas-4db"] = (store, secs, kept, fapp)
        if not args.no_map:
            mapp = f"bench-map-{tag}"
            urls = {}
            for i, name in enumerate(names):
                db_url = urlunsplit(urlsplit(map_url)._replace(path=f"/{databases[i % 4]}"))
                with psycopg.connect(db_url, autocommit=True) as conn:
                    conn.execute(f"CREATE SCHEMA {name}")
                urls[name] = with_app(db_url, mapp, name)
            # No idle connection per shard (min_connections=0): with the default of 1, 128 shards take
            # 128 server connections at open, more than a default server's max_connections (100).
            store, secs, kept = opened(
                "map-4db", lambda: open_map(ShardMap("ds_", urls), min_connections=0, max_connections=2)
            )
            layouts["map-4db"] = (store, secs, kept, mapp)
        papp = f"bench-plain-{tag}"
        pschema = f"bench_plain_{tag}"
        admin.execute(f"CREATE SCHEMA {pschema}")
        store, secs, kept = opened("plain", lambda: durastate.open(with_app(args.url, papp, pschema)))
        layouts["plain"] = (store, secs, kept, papp)
        if "map-4db" in layouts and map_url != args.url:
            # The map's own baseline: one store on its server, in its first database (another database
            # of that server may be a Citus coordinator's, where a new schema becomes a distributed one).
            first = urlunsplit(urlsplit(map_url)._replace(path=f"/{databases[0]}"))
            with psycopg.connect(first, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {pschema}")
            store, secs, kept = opened("plain-map", lambda: durastate.open(with_app(first, papp + "m", pschema)))
            layouts["plain-map"] = (store, secs, kept, papp + "m")

        # per-operation cost against one shard, the layouts taking turns call by call
        key = b"tenant-7"
        times: dict[str, list[float]] = {label: [] for label in layouts}
        for i in range(args.calls):
            order = list(layouts.items())
            if i % 2:
                order.reverse()
            for label, (store, *_rest) in order:
                started = time.perf_counter()
                store.kv.put(key, b"ns", b"k", b"v%d" % i)
                store.kv.get(key, b"ns", b"k")
                times[label].append(time.perf_counter() - started)
        print(f"\n## {n} logical shards: cost per kv put+get on one shard, client memory and connections\n")
        print(
            "| layout | shards | put+get ms (median) | vs plain (same server) | open s | Python KiB kept | KiB/shard"
            " | server connections | connections/shard |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        bases = {label: statistics.median(times[label]) for label in ("plain", "plain-map") if label in times}
        for label, (_store, secs, kept, app) in layouts.items():
            shards = 1 if label.startswith("plain") else n
            median = statistics.median(times[label])
            conns = connections(admin, app)
            if label == "citus" and args.citus_url:
                with psycopg.connect(args.citus_url, autocommit=True) as cadmin:
                    conns = connections(cadmin, app)
            on_map_server = label in ("map-4db", "plain-map")
            if on_map_server:
                conns = connections(map_admin, app)
            base = bases["plain-map"] if on_map_server and "plain-map" in bases else bases["plain"]
            print(
                f"| {label} | {shards} | {median * 1e3:.2f} | {median / base:.2f} | {secs:.1f} | {kept / 1024:,.0f}"
                f" | {kept / 1024 / shards:,.0f} | {conns} | {conns / shards:.2f} |"
            )
    finally:
        for label, (store, *_rest) in layouts.items():
            store.close()
            if label == "schemas-4db":  # the router closes the schema stores, not their four engines
                for engine in {id(s.engine._coordinator): s.engine._coordinator for s in store.stores}.values():
                    engine.close()
        for url, prefix in dropped:
            with psycopg.connect(url, autocommit=True) as conn:
                for (schema,) in conn.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "shard\\_%",)
                ).fetchall():
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
                conn.execute(f"DROP TABLE IF EXISTS {prefix}logical_shards")
        admin.execute(f"DROP SCHEMA IF EXISTS bench_plain_{tag} CASCADE")
        for db in databases:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            if map_url != args.url:
                map_admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.close()
        map_admin.close()


if __name__ == "__main__":
    main()
