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
    for bad in (0, 0.5, float("nan"), float("inf"), 1e300, "300", True):
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


@pytest.mark.parametrize("statistics", ["fresh", "analyzed"])
def test_the_prune_reads_no_whole_table_on_a_fresh_or_an_analysed_table(pg_url: str, statistics: str) -> None:
    """The prune in passing runs every few hundred writes: its earlier shape read the whole table.

    Planned as the engine's connections plan it (generic plan, sequential
    scans allowed, unlike ``engine.explain``): on a fresh table of 1e5
    rows it scanned the table for the ids, and once analysed it joined
    them against a scan of the table (6-19 ms a call). The rows found are
    deleted by tuple id, not by 1024 probes of the random primary key.
    """
    with durastate.open(pg_url) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO ds_attempt (id, created_at, result) SELECT decode(md5(i::text), 'hex'), i, '1'"
                " FROM generate_series(1, 100000) AS i"
            )
            if statistics == "analyzed":
                conn.execute("ANALYZE ds_attempt")
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE prune (bigint, bigint) AS {numbered(engine._attempt_prune)}")
            plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN EXECUTE prune (50000, 1024)"))
        assert "Seq Scan" not in plan, plan
        assert "Tid Scan on ds_attempt" in plan, f"the rows are deleted by tuple id:\n{plan}"
        assert engine._prune_attempts() == postgres.ATTEMPT_PRUNE_BATCH
        with psycopg.connect(pg_url) as conn:
            oldest = conn.execute("SELECT min(created_at) FROM ds_attempt WHERE created_at <= 100000").fetchone()
        assert oldest == (postgres.ATTEMPT_PRUNE_BATCH + 1,), "the oldest rows go first"


def test_claims_and_acks_record_no_payloads(pg_url: str) -> None:
    """A claim's retry re-reads the row it leased: 1,000 claims and acks of 4 KB leave ids and counts only."""
    payload = bytes(range(256)) * 16  # 4 KB that compress poorly
    with durastate.open(pg_url) as store:
        for _ in range(10):
            store.queues.push("jobs", [payload] * 100)  # one transaction: one attempt row per push
        with psycopg.connect(pg_url) as conn:
            conn.execute("TRUNCATE ds_attempt")
        for _ in range(1000):
            claim = store.queues.claim("jobs", lease=60)
            assert claim is not None and claim.payload == payload
            claim.ack()
        assert store.queues.stats("jobs").ready == 0
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*), pg_total_relation_size('ds_attempt'), count(*) FILTER (WHERE rows IS NOT NULL)"
            " FROM ds_attempt"
        ).fetchone()
    assert row is not None
    count, size, with_rows = row
    assert with_rows == 0 and count <= 1000, row  # the acks' counts; the claims record nothing
    assert size <= 256 * 1024, row  # table, TOAST and indexes


def test_a_marked_appends_retry_finds_its_entry_by_the_attempt_index(pg_url: str) -> None:
    """The retry of an append reads the log by attempt id: an index search under the generic plan, never a scan
    of the log (a NULL-excluding partial index, which the ``attempt = $1`` condition must be proved to match)."""
    with durastate.open(pg_url) as store:
        marked = store.kv._append.companion
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO ds_kv_log (id, scope, ns, key, value, attempt)"
                " SELECT i, 's', 'n', 'k', 'v', CASE WHEN i % 2 = 0 THEN decode(md5(i::text), 'hex') END"
                " FROM generate_series(1, 20000) AS i"
            )
            conn.execute("ANALYZE ds_kv_log")
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE reread (bytea) AS {numbered(marked.reread)}")
            plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN EXECUTE reread ('\\x00')"))
        assert "Seq Scan" not in plan, plan
        assert "ds_kv_log_attempt" in plan, plan
