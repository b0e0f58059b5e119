"""The SQLite engine's shared per-thread cursor never holds a statement open.

``SqliteEngine.one/all/execute/executemany`` reuse one cursor per thread (a
hot-path saving). A statement left active on it would keep its read snapshot
or, for an autocommit write with ``RETURNING``, its write lock until the
thread's next call. These tests pin the invariant: when the call returns or
raises, the statement is finished, whatever happened in between.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines.base import DDL, READ, WRITE, WRITE_ROWS
from durastate.engines.sqlite import _FORK_GATE, SqliteEngine
from durastate.engines.sqlite_fork import ForkGate


def _engine(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    return engine


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[durastate.Store, durastate.Store]]:
    """Two stores on one file; the second never waits for a lock."""
    path = tmp_path / "shared.db"
    first = durastate.open(path)
    second = durastate.open(path, busy_timeout=0)
    engine = _engine(first)
    engine.execute(engine.sql(DDL("CREATE TABLE {p}cursor_probe (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")))
    engine.executemany(engine.sql(WRITE("INSERT INTO {p}cursor_probe (n) VALUES (?)")), [(i,) for i in range(50)])
    yield first, second
    second.close()
    first.close()


def _other_store_can_write(store: durastate.Store) -> bool:
    try:
        store.kv.put(b"s", b"n", b"probe", b"written")
    except durastate.StoreUnavailable:
        return False
    return True


def test_execute_of_a_multi_row_returning_write_commits_before_returning(
    pair: tuple[durastate.Store, durastate.Store],
) -> None:
    first, second = pair
    engine = _engine(first)
    changed = engine.execute(engine.sql(WRITE_ROWS("UPDATE {p}cursor_probe SET n = n + 1000 RETURNING id")))
    assert changed == 50
    assert _other_store_can_write(second), "the RETURNING statement kept the write lock after execute() returned"
    assert _engine(second).one(_engine(second).sql(READ("SELECT MIN(n) FROM {p}cursor_probe"))) == (1000,)


def test_one_of_a_multi_row_returning_write_commits_before_returning(
    pair: tuple[durastate.Store, durastate.Store],
) -> None:
    first, second = pair
    engine = _engine(first)
    row = engine.one(engine.sql(WRITE_ROWS("UPDATE {p}cursor_probe SET n = n + 1000 RETURNING n")))
    assert row is not None and row[0] >= 1000
    assert _other_store_can_write(second), "the RETURNING statement kept the write lock after one() returned"
    assert engine.one(engine.sql(READ("SELECT COUNT(*) FROM {p}cursor_probe WHERE n >= 1000"))) == (50,)
    # The next call still works (the cursor that held the statement was replaced).
    assert engine.one(engine.sql(READ("SELECT n FROM {p}cursor_probe WHERE id = 1"))) == (1000,)


def _no_reader_pins_the_wal(store: durastate.Store) -> bool:
    """A full checkpoint succeeds: no connection holds an old read snapshot.

    A statement left active on another connection keeps its snapshot, and a
    TRUNCATE checkpoint then reports busy (the store has busy_timeout=0).
    """
    store.kv.put(b"s", b"n", b"k", b"after")  # something in the WAL past any old snapshot
    engine = _engine(store)
    busy = engine.one("PRAGMA wal_checkpoint(TRUNCATE)")
    assert busy is not None
    return bool(busy[0] == 0)


def test_one_of_a_multi_row_select_leaves_no_snapshot_behind(pair: tuple[durastate.Store, durastate.Store]) -> None:
    first, second = pair
    engine = _engine(first)
    assert engine.one(engine.sql(READ("SELECT id FROM {p}cursor_probe ORDER BY id"))) == (1,)
    assert _no_reader_pins_the_wal(second)


def test_all_leaves_no_snapshot_behind(pair: tuple[durastate.Store, durastate.Store]) -> None:
    first, second = pair
    engine = _engine(first)
    rows = engine.all(engine.sql(READ("SELECT id, n FROM {p}cursor_probe ORDER BY id")))
    assert len(rows) == 50
    assert _no_reader_pins_the_wal(second)


class _InterruptedCursor:
    """Forwards to a real cursor but raises KeyboardInterrupt when rows are read."""

    def __init__(self, real: sqlite3.Cursor) -> None:
        self.real = real
        self.closed = False

    def execute(self, sql: str, params: Any = ()) -> _InterruptedCursor:
        self.real.execute(sql, params)
        return self

    @property
    def description(self) -> Any:
        return self.real.description

    @property
    def connection(self) -> sqlite3.Connection:
        return self.real.connection

    def fetchall(self) -> list[Any]:
        raise KeyboardInterrupt

    def fetchone(self) -> Any:
        raise KeyboardInterrupt

    def close(self) -> None:
        self.closed = True
        self.real.close()


@pytest.mark.parametrize("method", ["one", "execute", "all"])
def test_an_interruption_between_statement_and_rows_releases_the_lock(
    pair: tuple[durastate.Store, durastate.Store], method: str
) -> None:
    first, second = pair
    engine = _engine(first)
    engine.execute(engine.sql(READ("SELECT 1")))  # the thread's cursor exists
    probe = engine.sql(WRITE_ROWS("UPDATE {p}cursor_probe SET n = n + 1 RETURNING id"))
    # A write outside a transaction runs on the shared writer connection (sqlite_connections.SharedWriter),
    # whichever of the three methods runs it.
    engine.execute(engine.sql(WRITE("UPDATE {p}cursor_probe SET n = n WHERE id = 0")))
    holder: Any = engine._connections.shared
    real = holder.cursor
    assert real is not None
    interrupted = _InterruptedCursor(real)
    holder.cursor = interrupted
    with pytest.raises(KeyboardInterrupt):
        getattr(engine, method)(probe)
    assert interrupted.closed
    assert holder.cursor is None  # the next call takes a fresh cursor
    assert _other_store_can_write(second), "the interrupted statement kept the write lock"
    assert engine.one(engine.sql(READ("SELECT MIN(n) FROM {p}cursor_probe"))) == (1,)
    getattr(engine, method)(probe)  # and runs on it
    assert engine.one(engine.sql(READ("SELECT MIN(n) FROM {p}cursor_probe"))) == (2,)


def test_release_connection_forgets_the_cursor(tmp_path: Path) -> None:
    with durastate.open(tmp_path / "x.db") as store:
        engine = _engine(store)
        store.kv.put(b"s", b"n", b"k", b"v")
        old = engine._local.cursor
        assert old is not None
        engine.release_connection()
        store.kv.put(b"s", b"n", b"k", b"w")  # would raise on the closed connection's cursor
        assert engine._local.cursor is not old
        assert store.kv.get(b"s", b"n", b"k") == b"w"


def test_a_closed_store_refuses_through_the_cursor_path(tmp_path: Path) -> None:
    store = durastate.open(tmp_path / "x.db")
    store.kv.put(b"s", b"n", b"k", b"v")  # cursor cached on this thread
    store.close()
    with pytest.raises(durastate.StoreClosed):
        store.kv.put(b"s", b"n", b"k", b"w")
    with pytest.raises(durastate.StoreClosed):
        list(store.kv.scan(b"s", b"n"))


class _InterruptedCommit:
    """Forwards to a real cursor; KeyboardInterrupt on COMMIT, before or after running it."""

    def __init__(self, real: sqlite3.Cursor, *, after: bool) -> None:
        self.real = real
        self.after = after

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        if sql == "COMMIT":
            if self.after:
                self.real.execute(sql, params)
            raise KeyboardInterrupt
        return self.real.execute(sql, params)


@pytest.mark.parametrize("after", [False, True], ids=["before-commit", "after-commit"])
def test_an_interruption_at_commit_ends_the_transaction(
    pair: tuple[durastate.Store, durastate.Store], after: bool
) -> None:
    """COMMIT runs on the thread's cursor; an interruption around it still ends the transaction."""
    first, second = pair
    engine = _engine(first)
    open_before = len(_FORK_GATE.entries)
    with pytest.raises(KeyboardInterrupt), first.transaction():
        first.kv.put(b"s", b"n", b"k", b"v")
        real = engine._local.cursor
        assert real is not None
        engine._local.cursor = _InterruptedCommit(real, after=after)  # type: ignore[assignment]
    engine._local.cursor = real  # the stand-in has served
    conn = engine._local.conn
    assert conn is not None and not conn.in_transaction
    assert len(_FORK_GATE.entries) == open_before  # the fork gate no longer counts it
    assert _other_store_can_write(second), "the interrupted commit kept the write lock"
    assert first.kv.get(b"s", b"n", b"k") == (b"v" if after else None)


def test_a_transaction_beginning_during_a_fork_waits_for_it_outside_the_count() -> None:
    """The fork gate's lock-free enter: a thread that sees a fork under way steps back and waits."""
    gate = ForkGate()
    gate.enter()  # this thread's transaction is open when the fork starts
    forker = threading.Thread(target=gate.before_fork)
    forker.start()
    deadline = time.monotonic() + 10
    while not gate.forking and time.monotonic() < deadline:
        time.sleep(0.001)  # polling for the forker to start, not timing anything
    assert gate.forking
    entered = threading.Event()

    def begin() -> None:
        gate.enter()
        entered.set()

    late = threading.Thread(target=begin)
    late.start()
    gate.leave()  # the fork may proceed once the late thread is out of the count too
    forker.join(timeout=10)
    assert not forker.is_alive()
    assert not entered.is_set()  # no transaction began while the fork ran
    gate.after_fork_in_parent()
    late.join(timeout=10)
    assert entered.is_set() and gate.entries == [None]
    gate.leave()
    assert gate.entries == []
