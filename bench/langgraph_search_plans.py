"""The query plans behind ``bench/langgraph_search.py``'s searches (its ``--explain``), on its tables.

``durastate_plans``: the statements a ``DurastateStore`` search runs through
the engine's vector index, each prepared as the engine runs it (a generic
plan, ``plan_cache_mode = force_generic_plan``) and run under ``EXPLAIN
ANALYZE``. ``postgres_store_plan``: the statement LangGraph's PostgresStore
builds for the same search, run under ``EXPLAIN ANALYZE`` on its own
connection (as it runs it). The tables are in the state the bench's
``--states`` put them in (as loaded, fresh or analyzed); the settings a
search makes in its transaction (``set_config``) are made again, in order,
before the statements after them are explained.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SHOWN = ("Limit", "Sort", "Scan", "Nested Loop", "Hash", "Append", "CTE", "Execution Time", "Rows Removed")


def _keep(line: str) -> bool:
    return any(word in line for word in SHOWN)


@contextmanager
def _captured(engine: Any) -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """The (SQL, parameters) of the engine's reads (``all`` and ``one``) while the block runs, in order."""
    seen: list[tuple[str, tuple[Any, ...]]] = []

    def recording(saved: Any) -> Any:
        def record(sql: Any, params: Any = ()) -> Any:
            seen.append((str(sql), tuple(params)))
            return saved(sql, params)

        return record

    engine.all, engine.one = recording(engine.all), recording(engine.one)
    try:
        yield seen
    finally:
        del engine.all, engine.one


def durastate_plans(store: Any, url: str, prefix: tuple[str, ...], query: str, filter: Any) -> list[str]:
    """EXPLAIN ANALYZE lines of the vector statements one ``store.search`` runs (generic plans)."""
    import psycopg
    from psycopg import sql as psql

    with _captured(store.store.engine) as seen:
        store.search(prefix, query=query, filter=filter, limit=10)
    lines: list[str] = []
    # One transaction, as the search's: the walk's settings (set_config, transaction-local) hold for its plan.
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        for text, params in seen:
            numbers = iter(range(1, 10_000))
            numbered = re.sub(r"%s", lambda _, n=numbers: f"${next(n)}", text)
            if "set_config" in text:
                conn.execute(text, params)  # type: ignore[call-overload]
                continue
            if "_vec_" not in text or "distance" not in text:  # the searches, not the first use's ensure()
                continue
            conn.execute("DEALLOCATE ALL")
            conn.execute(psql.SQL("PREPARE bench_plan AS {}").format(psql.SQL(numbered)))  # type: ignore[arg-type]
            literals = psql.SQL(", ").join(psql.Literal(p) for p in params)
            explain = psql.SQL("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE bench_plan({})").format(literals)
            lines += [str(row[0]) for row in conn.execute(explain) if _keep(str(row[0]))]
    return lines


def postgres_store_plan(store: Any, prefix: tuple[str, ...], query: str, filter: Any) -> list[str]:
    """EXPLAIN ANALYZE lines of PostgresStore's statement for the same search, on its connection."""
    from langgraph.store.base import SearchOp
    from langgraph.store.postgres import base

    op = SearchOp(namespace_prefix=prefix, filter=filter, limit=10, offset=0, query=query, refresh_ttl=False)
    [(text, params)], _ = store._prepare_batch_search_queries([(0, op)])
    [vector] = store.embeddings.embed_documents([query])
    params = [vector if p is base.PLACEHOLDER else p for p in params]
    with store._cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, COSTS OFF) " + text, params)
        return [str(next(iter(row.values()))) for row in cur.fetchall() if _keep(str(next(iter(row.values()))))]
