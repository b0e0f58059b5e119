"""Listing the distinct names of a table column (scopes, namespaces, queues).

The read-only listing methods (``kv.scopes()``, ``queues.names()``, ...)
answer "which names exist" without reading every row under them: a *loose
index scan*, one index seek per distinct value (the first value greater
than the last one found, by ``ORDER BY ... LIMIT 1`` since PostgreSQL has
no ``MIN`` of bytea), written as one recursive statement so a page of names
costs one round trip on a network engine. ``column`` must lead an index of
``table`` after the ``fixed`` equality columns, which is true of every
caller (each lists a prefix of a primary key or index).

The walk is not a snapshot and sees rows that are stored but no longer live
(an expired kv value or presence field not yet pruned): a listed name may
have nothing live under it. Names come back in the column's order (bytes
order for BLOB/BYTEA, code point order for the COLLATE "C"/BINARY text
columns), at most ``limit`` of them, all greater than ``after`` if given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ._validate import bounded_int
from .engines.base import READ, Statement


def distinct_sql(table: str, column: str, fixed: Sequence[str] = (), *, after: bool) -> Statement:
    """A read listing distinct ``column`` values of ``{p}table``.

    Bound parameters, in order: one per ``fixed`` column, then the ``after``
    bound (only when ``after``), then the ``fixed`` values again (for the
    recursive step), then the limit (>= 1).
    """
    conditions = [f"{c} = ?" for c in fixed]
    first = conditions + ([f"{column} > ?"] if after else [])
    step = [*conditions, f"{column} > walk.name"]
    first_where = f" WHERE {' AND '.join(first)}" if first else ""
    return READ(
        "WITH RECURSIVE walk(name, n) AS ("
        f" SELECT (SELECT {column} FROM {{p}}{table}{first_where} ORDER BY {column} LIMIT 1), 1"
        " UNION ALL"
        f" SELECT (SELECT {column} FROM {{p}}{table} WHERE {' AND '.join(step)} ORDER BY {column} LIMIT 1), n + 1"
        " FROM walk WHERE walk.name IS NOT NULL AND n < ?"
        ") SELECT name FROM walk WHERE name IS NOT NULL"
    )


def distinct_params(fixed: Sequence[Any], after: Any | None, limit: int) -> list[Any]:
    """The parameters of a ``distinct_sql`` statement, in its order."""
    return [*fixed, *(() if after is None else (after,)), *fixed, limit]


def check_limit(limit: Any) -> int:
    """A listing page size: an int from 1 to 10,000."""
    return bounded_int("limit", limit, 1, 10_000)


def merge_distinct(pages: Iterable[Iterable[Any]], limit: int) -> list[Any]:
    """The first ``limit`` distinct names of several sorted lists, sorted."""
    return sorted({name for page in pages for name in page})[:limit]
