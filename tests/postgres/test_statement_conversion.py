"""The engine's cursors convert a statement's placeholders once (``engines.postgres_queries``).

psycopg converts a query of more than 50 parameters at every execution (its
cache skips them); an upsert of 20 rows took 111 us of client CPU for that
alone, each time.
"""

from __future__ import annotations

import psycopg
import pytest

import durastate
from durastate.engines import postgres_queries
from durastate.engines.postgres import PostgresEngine

pytestmark = pytest.mark.timeout(120)


def test_the_conversion_cache_is_on_for_the_installed_psycopg() -> None:
    # A psycopg release outside QUERY_VERSIONS gets its own cursor: correct, slower for long statements. This
    # test says so when the pin moves, so the private names it relies on are read again for the new release.
    assert psycopg.__version__.startswith(postgres_queries.QUERY_VERSIONS), psycopg.__version__
    assert postgres_queries.converted is not None
    assert postgres_queries.STATEMENT_CURSOR is not psycopg.Cursor


def test_a_statement_of_many_parameters_is_converted_once_however_often_it_runs(pg_url: str) -> None:
    converted = postgres_queries.converted
    if converted is None:
        pytest.skip(f"psycopg {psycopg.__version__} keeps its own cursor (postgres_queries.QUERY_VERSIONS)")
    with durastate.open(pg_url) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)

        def put_twenty(batch: int) -> None:  # 20 pairs: 80 parameters, past psycopg's own cache
            store.kv.put_many(b"s", b"n", [(b"%d-%02d" % (batch, i), b"v%d" % batch) for i in range(20)])

        put_twenty(0)
        before = converted.cache_info()
        for batch in (1, 2, 3):
            put_twenty(batch)
        after = converted.cache_info()
        assert after.misses == before.misses  # no statement converted again
        assert after.hits >= before.hits + 3
        assert store.kv.get_many(b"s", b"n", [b"1-00", b"3-19"]) == [b"v1", b"v3"]
        conn = engine._borrow()
        try:
            assert type(conn.run("SELECT %s::int", (1,))) is postgres_queries.STATEMENT_CURSOR
        finally:
            engine._give_back(conn)
