"""Opening a PostgreSQL store connects once: the probe connection becomes the pool's first (``LifoPool.give_first``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines import postgres_pool
from durastate.engines.base import READ
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_pool import LifoPool, PooledConnection

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[type]]:
    """Every psycopg connect (the probe's and psycopg_pool's), by the class connected.

    ``psycopg.connect`` is bound to ``Connection.connect`` at import: both are counted.
    """
    made: list[type] = []
    real = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def counting(cls: type, *args: Any, **kwargs: Any) -> Any:
        made.append(cls)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(counting))
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)
    yield made


def _session(store: durastate.Store) -> tuple[int, str, str]:
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    row = engine.one(
        engine.sql(READ("SELECT pg_backend_pid(), current_setting('lock_timeout'), current_setting('plan_cache_mode')"))
    )
    assert row is not None
    return int(row[0]), str(row[1]), str(row[2])


@pytest.mark.parametrize("min_connections", [1, 0])
def test_opening_a_store_connects_once(pg_url: str, connects: list[type], min_connections: int) -> None:
    """The probe, configured as the pool configures its own, is the pool's first connection: no second session."""
    with durastate.open(pg_url, min_connections=min_connections, busy_timeout=7) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        pid, lock_timeout, plan_cache_mode = _session(store)
        assert connects == [PooledConnection], f"opening and two calls connected {len(connects)} times"
        # The one session is the configured one the pool would have made.
        assert (lock_timeout, plan_cache_mode) == ("7s", "force_generic_plan")
        engine = store.engine
        assert isinstance(engine, PostgresEngine) and engine._pool is not None
        assert engine._pool.get_stats()["connections_num"] == 1
    with psycopg.connect(pg_url, autocommit=True) as admin:
        left = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    assert left == (0,), "closing the store closed the handed-over session"


def test_a_probe_past_its_freshness_is_closed_and_the_pool_connects(
    pg_url: str, connects: list[type], monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[PooledConnection] = []
    real_give_first = LifoPool.give_first

    def recording(self: LifoPool, conn: PooledConnection) -> None:
        given.append(conn)
        real_give_first(self, conn)

    monkeypatch.setattr(LifoPool, "give_first", recording)
    monkeypatch.setattr(postgres_pool, "FIRST_FRESH", -1.0)  # stale as soon as given
    with durastate.open(pg_url) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert len(given) == 1 and given[0].closed, "the stale probe is closed, not handed out"
        assert connects == [PooledConnection, PooledConnection]


def _probe_like(pg_url: str) -> PooledConnection:
    return PooledConnection.connect(pg_url, autocommit=True)


@pytest.fixture
def pool_and_probe(pg_url: str) -> Iterator[tuple[LifoPool, PooledConnection]]:
    """An open pool of up to two lazily made connections, and a connection made as the probe is; both closed after."""
    pool = LifoPool(pg_url, min_size=0, max_size=2, kwargs={"autocommit": True}, open=False)
    pool.open()
    probe = _probe_like(pg_url)
    try:
        yield pool, probe
    finally:
        pool.close()
        probe.close()


@pytest.mark.parametrize("how", ["close", "discard"])
def test_a_probe_the_pool_never_took_is_closed_with_it(
    pg_url: str, pool_and_probe: tuple[LifoPool, PooledConnection], how: str
) -> None:
    pool, probe = pool_and_probe
    assert pool.handoff, "psycopg_pool changed: the probe is no longer handed to the pool"
    pool.give_first(probe)
    assert not probe.closed
    if how == "close":
        pool.close()
    else:  # a node failure: the probe reached the same node
        other = _probe_like(pg_url)
        pool.discard(other)
        assert other.closed
    assert probe.closed


def test_a_probe_left_inside_a_transaction_is_not_taken(pool_and_probe: tuple[LifoPool, PooledConnection]) -> None:
    pool, probe = pool_and_probe
    probe.execute("BEGIN")
    pool.give_first(probe)
    with pool.connection() as conn:
        assert conn is not probe
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert probe.closed


def test_only_one_taker_gets_the_probe(pool_and_probe: tuple[LifoPool, PooledConnection]) -> None:
    pool, probe = pool_and_probe
    pool.give_first(probe)
    first, second = pool.getconn(), pool.getconn()
    assert first is probe and second is not probe
    pool.putconn(first)
    pool.putconn(second)


def test_pgvectors_schema_as_the_probe_reads_it() -> None:
    """``vector_schema`` of the probe's answer: None when the extension is absent or its schema cannot be quoted."""
    from durastate.engines.postgres_vector import vector_schema

    assert vector_schema(None) is None
    assert vector_schema("public") == "public"
    assert vector_schema('with "quotes"') == 'with "quotes"'
    for unquotable in ("a?b", "a{b", "a}b"):
        assert vector_schema(unquotable) is None


def test_a_pooler_is_told_by_the_pid_the_session_reports(pg_url: str) -> None:
    from durastate.engines.postgres_connect import behind_pooler

    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        assert not behind_pooler(conn, row[0]), "a direct connection reports the pid it was given"
        assert behind_pooler(conn, row[0] + 1), "another pid: a pooler's session"
