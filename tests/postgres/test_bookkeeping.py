"""Attempt rows (the commit-ambiguity records of writes) are kept for a window, then pruned.

They hold what a write returned (a drained value among it), so "bounded"
means both: the table stays at about a window's worth of writes, and
deleted data is gone from it once the window has passed.
"""

from __future__ import annotations

import psycopg
import pytest

import durastate
from durastate import ConfigurationError
from durastate.engines import postgres
from durastate.engines.base import WRITE
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_dialect import numbered
from durastate.store import SCHEMAS
from durastate.testing.clock import FakeClock

PAYLOAD = b"drained-secret-payload"


def _attempts(pg_url: str) -> list[tuple[int, str]]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT created_at, COALESCE(result::text, '') || encode(COALESCE(rows, ''), 'hex') FROM ds_attempt"
        ).fetchall()
    return [(int(created), text) for created, text in rows]


def _incr_keys(store: durastate.Store, stem: bytes, count: int) -> None:
    """``count`` writes outside a transaction: one attempt row each (a put, idempotent, records none)."""
    for i in range(count):
        store.kv.incr(b"s", b"n", stem + b"%d" % i, 1)


def test_a_drained_value_is_gone_from_the_bookkeeping_after_the_window(pg_url: str) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock) as store:
        store.kv.put(b"s", b"n", b"k", PAYLOAD)
        assert store.kv.drain(b"s", b"n") == [(b"k", PAYLOAD)]
        recorded = PAYLOAD.hex()
        assert any(recorded in text for _, text in _attempts(pg_url)), "the drain's result is recorded for a retry"
        assert store.maintain().engine_bookkeeping == 0, "inside the window nothing is pruned"
        clock.advance(postgres.ATTEMPT_RETENTION + 1)
        report = store.maintain()
        assert report.engine_bookkeeping >= 2
        assert not any(recorded in text for _, text in _attempts(pg_url))
        now = store.engine.now_ms()
        assert {created for created, _ in _attempts(pg_url)} <= {now}, "only maintain()'s own writes are left"


def test_maintain_prunes_in_batches_within_its_budget(pg_url: str) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock) as store:
        _incr_keys(store, b"k", 2 * postgres.ATTEMPT_PRUNE_BATCH)  # more than a prune in passing removes
        clock.advance(postgres.ATTEMPT_RETENTION + 1)
        store.kv.incr(b"s", b"n", b"fresh", 1)  # inside the window: kept
        first = store.maintain(max_rows=100)
        assert first.engine_bookkeeping <= 100 and not first.finished
        rest = store.maintain()
        assert rest.finished
        assert {created for created, _ in _attempts(pg_url)} == {store.engine.now_ms()}


def test_writes_prune_expired_rows_in_passing(pg_url: str) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock) as store:
        _incr_keys(store, b"old", 500)
        clock.advance(postgres.ATTEMPT_RETENTION + 1)
        cutoff = store.engine.now_ms() - int(postgres.ATTEMPT_RETENTION * 1000)
        _incr_keys(store, b"new", 4 * postgres.ATTEMPT_PRUNE_EVERY)  # 4 batches of ATTEMPT_PRUNE_BATCH >= 500 rows
        assert [created for created, _ in _attempts(pg_url) if created < cutoff] == []


def test_opening_a_store_prunes_an_idle_stores_leftovers(pg_url: str) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock) as store:
        _incr_keys(store, b"k", 10)
    assert len(_attempts(pg_url)) == 10
    clock.advance(postgres.ATTEMPT_RETENTION + 1)
    with durastate.open(pg_url, clock=clock):
        assert _attempts(pg_url) == []


def test_the_window_is_configurable_and_validated(pg_url: str) -> None:
    clock = FakeClock()
    engine = PostgresEngine(pg_url, clock=clock, attempt_retention=10)
    try:
        engine.migrate(SCHEMAS)
        engine.execute(engine.sql(WRITE("INSERT INTO {p}sequence (name, value) VALUES ('x', 1)")))
        clock.advance(5)
        assert engine.prune_bookkeeping() == 0
        clock.advance(6)
        assert engine.prune_bookkeeping() == 1
    finally:
        engine.close()
    for bad in (-1, 0.5, float("nan"), float("inf"), 1e300, "300", True):
        with pytest.raises(ConfigurationError, match="attempt_retention"):
            PostgresEngine(pg_url, attempt_retention=bad)  # type: ignore[arg-type]


def test_open_sets_the_window(pg_url: str) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock, attempt_retention=10) as store:
        store.kv.incr(b"s", b"n", b"k", 1)
        clock.advance(5)
        assert store.engine.prune_bookkeeping() == 0
        clock.advance(6)
        assert store.engine.prune_bookkeeping() == 1


def test_sqlite_keeps_no_bookkeeping() -> None:
    with durastate.open("memory:") as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        assert store.engine.prune_bookkeeping(limit=10) == 0
        assert store.maintain().engine_bookkeeping == 0


@pytest.mark.parametrize(("rows", "statistics"), [(1_000, "fresh"), (1_000_000, "fresh"), (100_000, "analyzed")])
def test_the_prune_walks_the_primary_key_on_a_fresh_or_an_analysed_table(
    pg_url: str, rows: int, statistics: str
) -> None:
    """The prune in passing runs every few hundred writes: its earlier shapes read the whole table.

    Planned as the engine's connections plan it (generic plan, sequential
    scans allowed, unlike ``engine.explain``): the expired rows are found
    by the primary key (attempt ids start with their time), in its order,
    no sort; an ``id IN (SELECT id ...)`` shape once scanned the table
    for the ids (fresh) or joined them against a scan of it (analysed),
    6-19 ms a call at 1e5 rows. They are deleted by tuple id, not by 1024
    probes of the key; at 1e3 rows (a few pages) the planner reads the
    table for the tuple ids instead.
    """
    with durastate.open(pg_url) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        base = engine.now_ms() - 10 * int(postgres.ATTEMPT_RETENTION * 1000)  # every row expired, the oldest first
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE ds_attempt SET (autovacuum_enabled = false)")  # fresh stays fresh
            conn.execute(
                "INSERT INTO ds_attempt (id, created_at, result)"
                " SELECT int8send(%s + i) || decode(md5(i::text), 'hex'), %s + i, '1' FROM generate_series(1, %s) AS i",
                (base, base, rows),
            )
            if statistics == "analyzed":
                conn.execute("ANALYZE ds_attempt")
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE prune (bytea, bigint, bigint) AS {numbered(engine._attempt_prune)}")
            cutoff = base + rows // 2
            plan = "\n".join(
                str(row[0]) for row in conn.execute(f"EXPLAIN EXECUTE prune (int8send({cutoff}), {cutoff}, 1024)")
            )
        assert "Index Scan using ds_attempt_pkey on ds_attempt" in plan, plan
        assert "Sort" not in plan and "Bitmap" not in plan, plan
        if rows > 1_000:
            assert "Seq Scan" not in plan, plan
            assert "Tid Scan on ds_attempt" in plan, f"the rows are deleted by tuple id:\n{plan}"
        assert engine._prune_attempts() == min(rows, postgres.ATTEMPT_PRUNE_BATCH)
        with psycopg.connect(pg_url) as conn:
            oldest = conn.execute("SELECT min(created_at) FROM ds_attempt WHERE created_at <= %s", (base + rows,))
            left = oldest.fetchone()
        first_kept = base + postgres.ATTEMPT_PRUNE_BATCH + 1
        assert left == (first_kept if first_kept <= base + rows else None,), "the oldest rows go first"
