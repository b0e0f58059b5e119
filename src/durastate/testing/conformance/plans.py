"""Plan checks: the hot statements of every facet are index searches, on every engine.

Each check compiles a facet's public statement constant (``durastate.kv.GET``,
...) for the store's engine and asks ``engine.explain`` for its plan: on
PostgreSQL the generic plan a prepared statement ends up with. Every check
runs twice (``STATISTICS``): on a freshly filled table with no ANALYZE
(what a new deployment has), and after ANALYZE (what autovacuum gives it
later): a plan that is only good with statistics, or only without, fails
one of them. A check fails when a step reads a table without
searching an index (a full scan), when an index is searched without the
columns the statement binds (a filter over a whole namespace), or when
the order comes from a separate sort.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import durastate
from durastate.engines.base import DDL, KeyLookup, Plan, Statement

# The ``filled`` fixtures of the plan tests are parametrized by these.
STATISTICS = ("fresh", "analyzed")


def with_statistics(store: durastate.Store, statistics: str) -> durastate.Store:
    """``store`` as the plan test's ``statistics`` parameter wants it: untouched, or every table analyzed."""
    if statistics == "analyzed":
        analyze(store)
    return store


def analyze(store: durastate.Store) -> None:
    """``ANALYZE`` every table of the store's prefix (both engines spell it the same)."""
    engine = store.engine
    tables = sorted({row[1] for row in engine.catalog() if row[0] in ("column", "table")})
    for table in tables:
        engine.execute(engine.sql(DDL(f"ANALYZE {table}")))


def plan_of(store: durastate.Store, statement: Statement | KeyLookup, params: Sequence[Any]) -> Plan:
    """The plan of ``statement``; skips the test on a Citus coordinator (see below)."""
    engine = store.engine
    try:
        plan = engine.explain(engine.sql(statement), tuple(params))
    except durastate.errors.DurastateError as exc:
        # Citus cannot EXPLAIN the generic plan of a data-modifying CTE (it plans each execution instead).
        if "could not create distributed plan" in str(exc):
            pytest.skip("a Citus coordinator cannot explain this statement's generic plan")
        raise
    if '"Custom Plan Provider": "Citus' in plan.text:
        # The coordinator's plan only routes the statement; the worker plans it
        # with PostgreSQL's planner, whose plans these tests check on plain
        # PostgreSQL in the same Citus statement mode (the "citus" parameter there).
        pytest.skip("a Citus coordinator's plan routes the statement; the plan checks run on plain PostgreSQL")
    return plan


def assert_index_search(
    plan: Plan, *tables: str, using: Sequence[str] = (), sorts: bool = False, unfiltered: Sequence[str] = ()
) -> None:
    """Every read of ``tables`` searches an index; together they are bounded by ``using``.

    ``tables``: names (or aliases) of the tables the statement reads.
    ``using``: columns that must bound an index search (each column in at
    least one read: a claim reads the queue by due time, then the row by id).
    ``unfiltered``: columns that must not appear in a post-read filter
    (such a filter means the index range holds rows of every value).
    ``sorts``: whether a separate sort step is acceptable.
    """
    reads = plan.reads(*tables)
    assert reads, f"the plan never reads {tables}:\n{plan.text}"
    for column in using:
        assert any(column in step.condition for step in reads), (
            f"no index search of {tables} is bounded by {column}:\n{plan.text}"
        )
    for step in reads:
        assert step.index is not None and step.condition, f"full scan of {step.table}:\n{plan.text}"
        for column in unfiltered:
            assert column not in step.filter, (
                f"{step.table}: {column} filters the rows read instead of bounding the search:\n{plan.text}"
            )
    if not sorts:
        assert not plan.sorts, f"sorts instead of reading in index order:\n{plan.text}"
