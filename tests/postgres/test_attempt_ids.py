"""Attempt ids start with their time: the primary key orders the attempt rows by age, and pruning walks it.

An id is the store's time in milliseconds (8 bytes, big-endian), then 8
random bytes (``postgres_attempts.attempt_id``). Its uniqueness is the
random half's, never the clock's; rows written by older durastate (16
random bytes) stay answerable and are pruned by ``maintain()``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import psycopg

import durastate
from durastate.engines import postgres, postgres_writes
from durastate.engines.base import WRITE
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_attempts import attempt_id, attempt_id_floor, replay
from durastate.engines.schema import CORE_SCHEMA
from durastate.testing.clock import FakeClock
from durastate.testing.conformance._schema_edits import rewind

RETENTION_MS = int(postgres.ATTEMPT_RETENTION * 1000)
LOG_ATTEMPTS = "SELECT attempt FROM ds_kv_log WHERE attempt IS NOT NULL"


class SteppingClock:
    """A clock set by hand, backwards too (``FakeClock`` never goes back)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


def _rows(pg_url: str) -> list[tuple[bytes, int]]:
    with psycopg.connect(pg_url) as conn:
        return [(bytes(i), int(c)) for i, c in conn.execute("SELECT id, created_at FROM ds_attempt")]


def _stamp(attempt: bytes) -> int:
    (ms,) = struct.unpack(">Q", attempt[:8])
    return int(ms)


def test_every_attempt_id_starts_with_its_time_and_none_repeats_under_a_frozen_clock(pg_url: str) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        engine.execute(engine.sql(WRITE("INSERT INTO {p}sequence (name, value) VALUES ('seq', 0)")))
        frozen = engine.now_ms()
        for i in range(100):  # one millisecond for all of them
            store.kv.incr(b"s", b"n", b"c", 1)  # a write returning its rows
            store.queues.push("q", [b"%d" % i])  # an insert of one row, its attempt row first
            store.kv.append(b"s", b"n", b"log", b"e")  # its id in the log entry, no attempt row
        assert store.queues.pop("q") is not None
        with store.transaction():  # one attempt row for the transaction
            store.kv.incr(b"s", b"n", b"c", 1)
        with engine.transaction():  # a transaction whose first write takes a sequence value
            engine.next_value_later("seq")
        rows = _rows(pg_url)
        with psycopg.connect(pg_url) as conn:
            marks = [bytes(a) for (a,) in conn.execute(LOG_ATTEMPTS)]
        assert len(rows) == 1 + 100 + 100 + 1 + 1 + 1, "the insert, counter adds, pushes, the pop, two transactions"
        assert len(marks) == 100
        ids = [i for i, _ in rows] + marks
        assert all(len(i) == 16 for i in ids)
        assert len(set(ids)) == len(ids), "the random half keeps ids apart under a frozen clock"
        assert {_stamp(i) for i in ids} == {frozen}
        assert {c for _, c in rows} == {frozen}


def test_ids_sort_by_their_time_and_pruning_keeps_what_is_younger_than_the_window_by_it(pg_url: str) -> None:
    """A clock stepped back stamps its rows with the earlier time; the prune deletes by each row's own time."""
    t = 1_800_000_000.0
    clock = SteppingClock(t)
    with durastate.open(pg_url, clock=clock) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        store.kv.incr(b"s", b"n", b"a", 1)
        clock.seconds = t + 200
        store.kv.incr(b"s", b"n", b"b", 1)
        clock.seconds = t + 100  # stepped back
        store.kv.incr(b"s", b"n", b"c", 1)
        by_id = [c for _, c in sorted(_rows(pg_url))]
        ms = int(t * 1000)
        assert by_id == [ms, ms + 100_000, ms + 200_000], "ids sort by the time they were made, not by write order"

        clock.seconds = t + 99 + postgres.ATTEMPT_RETENTION  # the window's edge just before the stepped-back row
        assert engine.prune_bookkeeping() == 1
        assert sorted(c for _, c in _rows(pg_url)) == [ms + 100_000, ms + 200_000]
        clock.seconds = t + 101 + postgres.ATTEMPT_RETENTION
        assert engine._prune_attempts() == 1, "the prune in passing reaches it too"
        assert [c for _, c in _rows(pg_url)] == [ms + 200_000]
        clock.seconds = t + 150  # the pruner's clock stepped back: it only prunes later
        assert engine.prune_bookkeeping() == 0
        assert [c for _, c in _rows(pg_url)] == [ms + 200_000]


def _as_older_durastate(monkeypatch: Any) -> None:
    """Attempt ids as durastate made them before core schema step 3: 16 random bytes."""
    monkeypatch.setattr(postgres_writes, "attempt_id", lambda now: os.urandom(16))


def test_rows_of_older_durastate_are_removed_by_maintain_once_their_window_has_passed(
    pg_url: str, monkeypatch: Any
) -> None:
    clock = FakeClock()
    with durastate.open(pg_url, clock=clock) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        now = engine.now_ms()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            insert = "INSERT INTO ds_attempt (id, created_at) VALUES (%s, %s)"
            high = b"\xff" * 8 + os.urandom(8)  # a random id above every time: only maintain()'s second pass
            low = attempt_id_floor(now - 2 * RETENTION_MS) + os.urandom(8)  # a random id below the cutoff to come
            conn.execute(insert, (high, now))
            conn.execute(insert, (low, now + RETENTION_MS))  # written later, by its created_at
        with monkeypatch.context() as patch:
            _as_older_durastate(patch)
            store.kv.incr(b"s", b"n", b"c", 1)
        older = {i for i, _ in _rows(pg_url)} - {high, low}
        assert len(older) == 1 and _stamp(next(iter(older))) > now + 10 * RETENTION_MS  # a random id
        clock.advance(postgres.ATTEMPT_RETENTION + 1)
        assert engine._prune_attempts() == 0, "ids that do not start with an expired time: not the prune's"
        assert store.maintain().engine_bookkeeping == 2
        before = engine.now_ms()  # maintain()'s own writes are stamped now
        left = {i for i, c in _rows(pg_url) if c < before}
        assert left == {low}, "deleted once both its id and its time say it expired"
        clock.advance(postgres.ATTEMPT_RETENTION)
        engine._prune_attempts()
        assert low not in {i for i, _ in _rows(pg_url)}


def _indexes(pg_url: str) -> set[str]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'ds_attempt'").fetchall()
    return {str(r[0]) for r in rows}


def test_the_migration_drops_the_age_index_and_rows_written_before_it_still_answer(
    pg_url: str, monkeypatch: Any
) -> None:
    clock = FakeClock()
    store = durastate.open(pg_url, clock=clock)
    try:
        # The database as core schema step 2 left it, written to by that durastate.
        rewind(store.engine, CORE_SCHEMA, 2, "CREATE INDEX {p}attempt_age ON {p}attempt (created_at)")
        earlier = {i for i, _ in _rows(pg_url)}  # rewind()'s own
        with monkeypatch.context() as patch:
            _as_older_durastate(patch)
            assert store.kv.incr(b"s", b"n", b"c", 41) == 41
            store.queues.push("q", [b"item"])
        assert _indexes(pg_url) == {"ds_attempt_pkey", "ds_attempt_age"}
        written = {i for i, _ in _rows(pg_url)} - earlier
        assert len(written) == 2
    finally:
        store.close()
    with durastate.open(pg_url, clock=clock) as store:  # the next process migrates
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        assert _indexes(pg_url) == {"ds_attempt_pkey"}
        assert all(engine.attempt_committed(i) for i in written)
        conn = engine._borrow()
        try:
            answers = sorted((replay(conn, engine._attempt_result, i, 1) for i in written), key=repr)
        finally:
            engine._give_back(conn)
        assert answers == [(41,), None], "the counter add's recorded sum is its retry's answer"
        clock.advance(postgres.ATTEMPT_RETENTION + 1)
        assert store.maintain().engine_bookkeeping >= 2  # rewind()'s own rows too
        assert not written & {i for i, _ in _rows(pg_url)}


def test_an_injected_clock_outside_the_ids_range_gets_the_nearest_end() -> None:
    """A test clock before 1970 (or past 2^64 ms) still makes ids: they sort first (last) and are never pruned early."""
    before, after = attempt_id(-5), attempt_id(2**70)
    assert before[:8] == bytes(8) and after[:8] == b"\xff" * 8
    assert attempt_id_floor(-5) == bytes(8), "nothing is before it: a cutoff before 1970 prunes nothing"
    assert before < attempt_id_floor(1) <= attempt_id(1) < after, "with the ids made at 0 ms (random after that)"
