"""Semantic search side by side: ``DurastateStore(index=)``, LangGraph's ``InMemoryStore`` and ``PostgresStore``.

Run it with ``.venv/bin/python bench/langgraph_search.py`` (``--help`` for the options).

Contenders, each loaded with the same ``--items`` items (default 10,000,
spread over 10 namespaces ``("docs", "n0")`` ... ``("docs", "n9")``, each
value ``{"text": ..., "kind": "a" | "b" | "c" | "d"}``) and the same index
configuration (``dims`` = ``--dims``, ``fields=["text"]``, one deterministic
embedding function: a pseudo-random unit vector per text, seeded by the
text):

* ``InMemoryStore``: LangGraph's reference (NumPy when installed, as here);
* ``durastate sqlite``: ``DurastateStore.from_url(<file>, index=)``;
* ``durastate postgres exact``: ``DurastateStore.from_url(<url>, index=,
  vector_index=False)`` in a fresh schema (exact search: vectors read and
  scored in Python);
* ``durastate postgres pgvector``: ``DurastateStore.from_url(<url>,
  index=)`` in a fresh schema, where the database has pgvector installed
  (its HNSW index proposes candidates, scored exactly in Python; skipped,
  and said so, when the engine does not declare ``vector_index``). At
  10,000 x 256 dims the engine scores the candidates exactly by a scan in
  C instead of walking the index (``engines.postgres_vector``,
  ``SCAN_MAX_VALUES``); ``durastate postgres hnsw walk`` is the same store
  with that limit at 0, so every search walks the index (approximate);
* ``PostgresStore``: langgraph-checkpoint-postgres with pgvector (skipped,
  and said so, when the server has no ``vector`` extension), in a fresh
  schema, one autocommit connection as ``from_conn_string`` makes it
  (``setup()`` creates its HNSW index, pgvector's defaults, as ours).

Before timing, every contender's pages are checked against the exact
search's (``durastate sqlite``): the share of identical pages and the recall
of the top 10 are printed (both approximate contenders use HNSW).

Ops: ``search``: ``search(("docs",), query=..., limit=10)`` over all items;
``search+filter``: the same with ``filter={"kind": "a"}`` (a quarter of the
items); ``search ns``: ``search(("docs", "n3"), query=..., limit=10)``
(a tenth). Queries cycle through 50 texts (embedding one query costs the
same on every side).

``--index-after-load`` drops the pgvector contenders' HNSW indexes after
their first item and builds them again after the load (``CREATE INDEX``:
minutes instead of the half hour that 100,000 inserts into the index take
here; the graph differs from an incrementally built one). ``--states``
measures the pgvector contenders' tables ``fresh`` (as a load leaves them
before autovacuum: no column statistics, ``reltuples`` -1, autovacuum off
on their tables while measured; the bench forgets what ``CREATE INDEX``
recorded, so it needs a superuser) and/or ``analyzed`` (after ``ANALYZE``,
what autovacuum leaves minutes after a load), each with its plans
(``--explain``), page check and timed table, one load.

``--contenders`` picks some (the exact ones take minutes a round at 100,000
items); the page check's reference is then the first exact contender
picked, else the first. ``--explain`` prints, after loading, the query
plans (EXPLAIN ANALYZE, tables as loaded: no ANALYZE) of the pgvector
store's and PostgresStore's statements for each op
(``bench/langgraph_search_plans.py``).

Method: one untimed warm-up round, then ``--rounds`` rounds of ``--calls``
searches per op and contender, the contender order rotating each round.
The table shows each contender's median searches/s and the median of the
per-round ratios contender / InMemoryStore and contender / PostgresStore
(paired, so drift on a shared machine cancels), with their range.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, and bench/langgraph.py
# would shadow the langgraph package measured here.
_here = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from langgraph.store.base import BaseStore, PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from durastate.integrations.langgraph import DurastateStore  # noqa: E402

NAMESPACES = [("docs", f"n{i}") for i in range(10)]
KINDS = ["a", "b", "c", "d"]
OPS = ["search", "search+filter", "search ns"]
CONTENDERS = [
    "InMemoryStore",
    "durastate sqlite",
    "durastate postgres exact",
    "durastate postgres pgvector",
    "PostgresStore (pgvector)",
    "durastate postgres hnsw walk",
]
SHAPES = {"search": (("docs",), None), "search+filter": (("docs",), {"kind": "a"}), "search ns": (("docs", "n3"), None)}


def embedder(dims: int) -> Callable[[list[str]], list[list[float]]]:
    def embed(texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            rng = random.Random(text)
            v = [rng.gauss(0.0, 1.0) for _ in range(dims)]
            norm = sum(x * x for x in v) ** 0.5
            vectors.append([x / norm for x in v])
        return vectors

    return embed


def load(store: BaseStore, items: int) -> None:
    ops = [
        PutOp(NAMESPACES[i % len(NAMESPACES)], f"item-{i:06d}", {"text": f"document {i}", "kind": KINDS[i % 4]})
        for i in range(items)
    ]
    for start in range(0, len(ops), 500):
        store.batch(ops[start : start + 500])


def searches(store: Any, calls: int, short: list[int]) -> dict[str, Callable[[], None]]:
    """The timed ops; ``short[0]`` counts pages of fewer than 10 items (every op has more matches)."""
    queries = [f"query {i}" for i in range(50)]

    def run(prefix: tuple[str, ...], filter: dict[str, Any] | None) -> Callable[[], None]:
        def go() -> None:
            for i in range(calls):
                found = store.search(prefix, query=queries[i % len(queries)], filter=filter, limit=10)
                assert found and found[0].score is not None
                if len(found) < 10:  # PostgresStore's HNSW walk can stop short (see agreement's "short pages")
                    short[0] += 1

        return go

    return {op: run(prefix, filter) for op, (prefix, filter) in SHAPES.items()}


class Walking:
    """A DurastateStore whose searches walk the engine's HNSW index whatever the size (no exact scan)."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    def search(self, *args: Any, **kwargs: Any) -> Any:
        from durastate.engines import postgres_vector

        saved = postgres_vector.SCAN_MAX_VALUES
        postgres_vector.SCAN_MAX_VALUES = 0
        try:
            return self.store.search(*args, **kwargs)
        finally:
            postgres_vector.SCAN_MAX_VALUES = saved


def agreement(contenders: dict[str, Any], reference: str, queries: int = 20) -> None:
    """Each contender's pages against the reference's: identical pages and recall of the top 10."""
    cases = [(prefix, f"query {i}", filter) for i in range(queries) for prefix, filter in SHAPES.values()]
    want = [[i.key for i in contenders[reference].search(p, query=q, filter=f, limit=10)] for p, q, f in cases]
    for name, store in contenders.items():
        got = [[i.key for i in store.search(p, query=q, filter=f, limit=10)] for p, q, f in cases]
        same = sum(g == w for g, w in zip(got, want, strict=True))
        short = sum(len(g) < 10 for g in got)
        found = sum(len(set(g) & set(w)) for g, w in zip(got, want, strict=True))
        total = sum(len(w) for w in want)
        print(
            f"{name}: {same}/{len(cases)} pages identical to {reference}'s, recall@10 {found / total:.3f},"
            f" {short} short pages"
        )


def explain(contenders: dict[str, Any], ours_url: str, ops: list[str]) -> None:
    """Print the query plans of the pgvector contenders for each op (bench/langgraph_search_plans.py)."""
    import importlib.util

    # This folder is off sys.path (see above): load the helper by its path.
    spec = importlib.util.spec_from_file_location("langgraph_search_plans", _here / "langgraph_search_plans.py")
    assert spec is not None and spec.loader is not None
    plans = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plans)
    durastate_plans, postgres_store_plan = plans.durastate_plans, plans.postgres_store_plan
    for op in ops:
        prefix, filter = SHAPES[op]
        if "durastate postgres pgvector" in contenders:
            print(f"plan, {op}, durastate postgres pgvector (generic plans):")
            for line in durastate_plans(contenders["durastate postgres pgvector"], ours_url, prefix, "query 7", filter):
                print("   ", line)
        if "PostgresStore (pgvector)" in contenders:
            print(f"plan, {op}, PostgresStore (pgvector):")
            for line in postgres_store_plan(contenders["PostgresStore (pgvector)"], prefix, "query 7", filter):
                print("   ", line)
        print()


def _first(row: Any) -> Any:
    """The first column of a row, a tuple or a dict (PostgresStore's connection returns dicts)."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def pg_schema(store: Any) -> str:
    """The schema a pgvector contender's tables are in (its connection's current_schema)."""
    if isinstance(store, DurastateStore):
        from durastate.engines.statements import READ

        engine = store.store.engine
        row = engine.one(engine.sql(READ("SELECT current_schema()")))
    else:
        row = store.conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return str(_first(row))


def hnsw_indexes(base_url: str, schema: str) -> list[tuple[str, str]]:
    """(name, CREATE INDEX statement) of the schema's HNSW indexes (pg_indexes' definitions are schema-qualified)."""
    import psycopg

    with psycopg.connect(base_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE '%%USING hnsw%%'",
            (schema,),
        ).fetchall()
    return [(str(name), str(definition)) for name, definition in rows]


# What a state does to the pgvector contenders' tables before it is measured (see the docstring).
FORGET = (
    "DELETE FROM pg_statistic WHERE starelid IN (SELECT c.oid FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s AND c.relkind = 'r')",
    "UPDATE pg_class SET reltuples = -1 WHERE relnamespace = CAST(%(schema)s AS regnamespace) AND relkind = 'r'",
)


@contextmanager
def psycopg_autocommit(url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def set_state(base_url: str, schema: str, state: str) -> None:
    """The schema's tables ``fresh`` (statistics forgotten, autovacuum off) or ``analyzed``."""
    import psycopg
    from psycopg import sql as psql

    with psycopg.connect(base_url, autocommit=True) as conn:
        tables = [
            str(_first(row))
            for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
        ]
        for table in tables:
            name = psql.Identifier(schema, table)
            conn.execute(psql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(name))
            if state == "analyzed":
                conn.execute(psql.SQL("ANALYZE {}").format(name))
        if state == "fresh":
            for statement in FORGET:
                conn.execute(statement, {"schema": schema})  # type: ignore[call-overload]


def timed(run: Callable[[], None]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        run()
        return max(time.perf_counter() - start, 1e-9)
    finally:
        gc.enable()


@contextmanager
def postgres_store(base_url: str, index: dict[str, Any], keep: bool = False) -> Iterator[BaseStore | str]:
    """LangGraph's PostgresStore in a fresh schema (dropped after, unless ``keep``: its URL printed), or why not."""
    try:
        from langgraph.store.postgres import PostgresStore
    except ImportError as exc:
        yield f"langgraph-checkpoint-postgres not installed ({exc})"
        return
    import psycopg

    from durastate.testing import postgres_server

    with psycopg.connect(base_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is None:
            yield "the server has no pgvector extension"
            return
        installed = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector'"
        ).fetchone()
    url, schema = postgres_server.create_schema(base_url)
    if installed is not None:  # PostgresStore names the type unqualified: its schema goes on the search_path
        url = postgres_server.with_search_path(base_url, f"{schema},{installed[0]}")
    try:
        with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
            store.setup()
            yield store
    finally:
        if keep:
            print(f"kept PostgresStore's schema: {url}")
        else:
            postgres_server.drop_schema(base_url, schema)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="searches per op, contender and round")
    parser.add_argument("--ops", nargs="*", default=OPS, choices=OPS)
    parser.add_argument("--contenders", nargs="*", default=CONTENDERS, choices=CONTENDERS)
    parser.add_argument("--explain", action="store_true", help="print the pgvector contenders' query plans")
    parser.add_argument(
        "--index-after-load",
        action="store_true",
        help="build the pgvector contenders' HNSW indexes after loading them, not item by item",
    )
    parser.add_argument(
        "--keep-schemas",
        action="store_true",
        help="keep the pgvector contenders' schemas (their URLs are printed, for --loaded) instead of dropping them",
    )
    parser.add_argument(
        "--states",
        nargs="*",
        choices=["as loaded", "fresh", "analyzed"],
        default=["as loaded"],
        help="measure the pgvector contenders' tables as the load left them, fresh (no statistics) and/or analyzed",
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("DURASTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--loaded",
        nargs=2,
        metavar=("OURS_URL", "THEIRS_URL"),
        help="reuse stores this bench loaded before (their schemas restored from a dump, say): the durastate"
        " pgvector store's URL and PostgresStore's (with search_path); they are not loaded again",
    )
    args = parser.parse_args()
    from durastate.testing import postgres_server

    index = {"dims": args.dims, "embed": embedder(args.dims), "fields": ["text"]}
    print(f"# bench/langgraph_search.py {' '.join(sys.argv[1:])}")
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.platform()}")
    print(
        f"items={args.items} dims={args.dims} rounds={args.rounds} calls={args.calls}; load average {os.getloadavg()}"
    )
    wanted = set(args.contenders)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="durastate-bench-search-")))
        contenders: dict[str, Any] = {}
        if "InMemoryStore" in wanted:
            contenders["InMemoryStore"] = InMemoryStore(index=index)  # type: ignore[arg-type]
        if "durastate sqlite" in wanted:
            contenders["durastate sqlite"] = stack.enter_context(
                DurastateStore.from_url(folder / "search.db", index=index)  # type: ignore[arg-type]
            )
        if "durastate postgres exact" in wanted:
            url, schema = postgres_server.create_schema(args.postgres_url)
            stack.callback(postgres_server.drop_schema, args.postgres_url, schema)
            contenders["durastate postgres exact"] = stack.enter_context(
                DurastateStore.from_url(url, index=index, vector_index=False)  # type: ignore[arg-type]
            )
        ours_url = ""
        if wanted & {"durastate postgres pgvector", "durastate postgres hnsw walk"}:
            if args.loaded:
                ours_url = args.loaded[0]
            else:
                ours_url, schema = postgres_server.create_schema(args.postgres_url)
                if args.keep_schemas:
                    stack.callback(print, f"kept durastate pgvector's schema: {ours_url}")
                else:
                    stack.callback(postgres_server.drop_schema, args.postgres_url, schema)
            ours = stack.enter_context(DurastateStore.from_url(ours_url, index=index))  # type: ignore[arg-type]
            if ours.store.engine.capabilities.vector_index:
                contenders["durastate postgres pgvector"] = ours
            else:
                print("durastate postgres pgvector skipped: the database has no vector extension")
        if "PostgresStore (pgvector)" in wanted and args.loaded:
            from langgraph.store.postgres import PostgresStore

            contenders["PostgresStore (pgvector)"] = stack.enter_context(
                PostgresStore.from_conn_string(args.loaded[1], index=index)  # type: ignore[arg-type]
            )
        elif "PostgresStore (pgvector)" in wanted:
            theirs = stack.enter_context(postgres_store(args.postgres_url, index, args.keep_schemas))
            if isinstance(theirs, str):
                print(f"PostgresStore skipped: {theirs}")
            else:
                contenders["PostgresStore (pgvector)"] = theirs
        pgvector = [n for n in ("durastate postgres pgvector", "PostgresStore (pgvector)") if n in contenders]
        schemas = {name: pg_schema(contenders[name]) for name in pgvector}
        for name, store in contenders.items():
            if args.loaded and name in pgvector:
                continue
            start = time.perf_counter()
            rebuild: list[tuple[str, str]] = []
            if args.index_after_load and name in pgvector:
                load(store, 1)  # the first item: the tables and indexes exist (ours: at first use)
                schema = schemas[name]
                rebuild = hnsw_indexes(args.postgres_url, schema)
                with psycopg_autocommit(args.postgres_url) as conn:
                    for index_name, _ in rebuild:
                        conn.execute(f'DROP INDEX "{schema}"."{index_name}"')
            load(store, args.items)
            with psycopg_autocommit(args.postgres_url) as conn:
                for _, definition in rebuild:
                    conn.execute(definition)
            built = f", HNSW indexes built after it ({len(rebuild)})" if rebuild else ""
            print(f"loaded {name} in {time.perf_counter() - start:.1f} s{built}")
        if "durastate postgres pgvector" in contenders and "durastate postgres hnsw walk" in wanted:
            contenders["durastate postgres hnsw walk"] = Walking(contenders["durastate postgres pgvector"])
        if "durastate postgres pgvector" in contenders and "durastate postgres pgvector" not in wanted:
            del contenders["durastate postgres pgvector"]  # loaded for the walk only
        print()
        for state in args.states:
            if state != "as loaded":
                for schema in schemas.values():
                    set_state(args.postgres_url, schema, state)
                print(f"## pgvector tables {state} ({', '.join(pgvector) or 'none'})")
                print()
            if args.explain:
                explain(contenders, ours_url, args.ops)
            exact = [n for n in contenders if n in ("durastate sqlite", "durastate postgres exact", "InMemoryStore")]
            agreement(contenders, (exact or list(contenders))[0])
            print()
            shorts = {name: [0] for name in contenders}
            runs = {name: searches(store, args.calls, shorts[name]) for name, store in contenders.items()}
            names = list(contenders)
            rates: dict[str, dict[str, list[float]]] = {op: {name: [] for name in names} for op in args.ops}
            for round_no in range(args.rounds + 1):
                order = names[round_no % len(names) :] + names[: round_no % len(names)]
                for op in args.ops:
                    for name in order:
                        seconds = timed(runs[name][op])
                        if round_no:  # round 0 warms up
                            rates[op][name].append(args.calls / seconds)
            anchors = [a for a in ("InMemoryStore", "PostgresStore (pgvector)") if a in names]
            print("| op | contender | searches/s | " + " | ".join(f"ratio to {a} (range)" for a in anchors) + " |")
            print("|---|---|---|" + "---|" * len(anchors))
            for op in args.ops:
                for name in names:
                    cells = []
                    for anchor in anchors:
                        ratios = [o / t for o, t in zip(rates[op][name], rates[op][anchor], strict=True)]
                        cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
                    print(f"| {op} | {name} | {statistics.median(rates[op][name]):,.1f} | " + " | ".join(cells) + " |")
            print("short pages (fewer than 10 items) in the timed searches:", {n: c[0] for n, c in shorts.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
