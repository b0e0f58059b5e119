"""The engine's cursors convert a statement's placeholders once, not at every execution.

psycopg turns a query's ``%s`` placeholders into the server's ``$n`` at every
``execute``, through a cache (an ``lru_cache`` of 128 entries) that it skips
for a query longer than 4 KiB or with more than 50 parameters
(``psycopg._queries.MAX_CACHED_STATEMENT_PARAMS``): an ORM's ``INSERT ...
VALUES (...), (...)`` varies with every batch and would only churn it
(psycopg discussion #628). The engine's statements are a bounded set, each
compiled once (a multi-row upsert per row count up to
``kv.statements.PUT_CHUNK``, the same texts again and again), and
converting one of them uncached is expensive: an upsert of 20 rows (81
parameters) took 111 us of client CPU at each execution, more than the rest
of its call (bench/RESULTS.md "esrows").

``StatementCursor`` (the cursor of every pooled connection,
``PostgresEngine._configure``) converts through a cache of its own
(``STATEMENTS_KEPT`` texts, never psycopg's, which the application's own
queries keep using). It relies on psycopg's private ``PostgresQuery``
conversion (``_query2pg_nocache``, ``_ensure_bytes`` and the four attributes
it sets), read against the releases in ``QUERY_VERSIONS``; another release,
or one missing a name, gets psycopg's own cursor (``STATEMENT_CURSOR`` is
``psycopg.Cursor``): correct, and slower for long statements only
(``tests/postgres/test_statement_conversion.py`` checks that the cache is on
for the installed release).
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg

__all__ = ["QUERY_VERSIONS", "STATEMENTS_KEPT", "STATEMENT_CURSOR", "converted"]

QUERY_VERSIONS = ("3.3.",)  # 3.3.9 read
STATEMENTS_KEPT = 1024

converted: Any = None  # the cache (``functools.lru_cache``) when on; ``None`` when psycopg's cursor is used
STATEMENT_CURSOR: type[psycopg.Cursor[Any]] = psycopg.Cursor

try:
    from psycopg import _queries
except ImportError:  # pragma: no cover - a psycopg without the module: its own cursor
    _queries = None  # type: ignore[assignment]

if (
    _queries is not None
    and psycopg.__version__.startswith(QUERY_VERSIONS)
    and hasattr(_queries, "_query2pg_nocache")
    and hasattr(_queries.PostgresQuery, "_ensure_bytes")
):
    converted = functools.lru_cache(maxsize=STATEMENTS_KEPT)(_queries._query2pg_nocache)

    class StatementQuery(_queries.PostgresQuery):
        """``PostgresQuery`` converting a ``str`` query with parameters through ``converted``."""

        def convert(self, query: Any, vars: Any) -> None:
            if vars is None or not isinstance(query, str):
                super().convert(query, vars)
                return
            self.query, self._want_formats, self._order, self._parts = converted(
                self._ensure_bytes(query), self._tx.encoding
            )
            self.dump(vars)

    class StatementCursor(psycopg.Cursor[Any]):
        """``psycopg.Cursor`` whose queries convert through ``converted`` (see the module docstring)."""

        _query_cls = StatementQuery

    STATEMENT_CURSOR = StatementCursor
