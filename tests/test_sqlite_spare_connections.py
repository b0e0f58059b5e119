"""The SQLite engine hands an ended thread's connection to the next new thread.

Thread pools that start fresh threads per job (LangGraph's executor, one
per ``invoke``) would otherwise open and set up a connection, and prepare
every statement again, per thread. These tests pin what a reused
connection must not carry over: an open transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines.sqlite import SPARE_CONNECTIONS, SqliteEngine


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(tmp_path / "spare.db", busy_timeout=2.5) as opened:
        yield opened


def _engine(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    return engine


def _in_thread(work: Callable[[], Any]) -> Any:
    """``work()`` on a new thread that has ended when this returns; its result."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(work()))
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and len(results) == 1
    return results[0]


def test_a_new_thread_takes_the_connection_of_an_ended_one(store: durastate.Store) -> None:
    engine = _engine(store)

    def put_and_tell() -> sqlite3.Connection:
        store.kv.put(b"s", b"n", b"k", b"v")
        return engine._thread_connection()

    first = _in_thread(put_and_tell)
    second = _in_thread(lambda: (store.kv.get(b"s", b"n", b"k"), engine._thread_connection()))
    assert second == (b"v", first)


def test_a_spare_whose_thread_never_waited_for_a_lock_is_handed_over_without_a_statement(
    store: durastate.Store,
) -> None:
    """Only a connection whose thread set a busy timeout gets it reset (test_sqlite_lock_wait): the rest are taken
    as they are, so a new thread's first call runs its own statement and nothing else (a thread pool starting a
    thread per job pays no extra statement per thread)."""
    engine = _engine(store)
    statements: list[str] = []

    def put_and_trace() -> sqlite3.Connection:
        store.kv.put(b"s", b"n", b"k", b"v")
        conn: sqlite3.Connection = engine._thread_connection()
        conn.set_trace_callback(statements.append)
        return conn

    first = _in_thread(put_and_trace)
    assert _in_thread(lambda: store.kv.get(b"s", b"n", b"k")) == b"v"
    assert _in_thread(engine._thread_connection) is first
    assert statements and not any("busy_timeout" in sql for sql in statements), statements


def test_a_connection_left_inside_a_transaction_is_closed_not_reused(store: durastate.Store) -> None:
    engine = _engine(store)
    store.kv.put(b"s", b"n", b"k", b"v")

    def abandon() -> sqlite3.Connection:
        engine.read_transaction().__enter__()  # never left: the thread ends inside it, holding a snapshot
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        return engine._thread_connection()

    abandoned = _in_thread(abandon)
    taken = _in_thread(engine._thread_connection)
    assert taken is not abandoned
    with pytest.raises(sqlite3.ProgrammingError):
        abandoned.execute("SELECT 1")  # closed, which ended its snapshot


def test_a_write_transaction_its_thread_ended_inside_is_rolled_back_once_reaped(
    store: durastate.Store, tmp_path: Path
) -> None:
    engine = _engine(store)
    store.kv.put(b"s", b"n", b"warm", b"v")

    def abandon() -> sqlite3.Connection:
        engine.transaction().__enter__()  # never left: the thread ends inside it (on the shared writer connection)
        store.kv.put(b"s", b"n", b"abandoned", b"v")
        return engine._tls.state.own[0]  # type: ignore[index]

    own = _in_thread(abandon)
    taken = _in_thread(engine._thread_connection)  # a new thread's first call reaps the ended one
    assert taken is own  # its own connection was in no transaction: a spare
    assert engine._connections.writers.holder is None
    with durastate.open(tmp_path / "spare.db", busy_timeout=0) as other:
        other.kv.put(b"s", b"n", b"other", b"v")  # the write lock is free
        assert other.kv.get(b"s", b"n", b"abandoned") is None  # rolled back
    store.kv.put(b"s", b"n", b"after", b"v")  # the shared writer connection writes on
    assert store.kv.get_many(b"s", b"n", [b"abandoned", b"after", b"other"]) == [None, b"v", b"v"]


def test_spares_are_bounded_and_closed_with_the_store(tmp_path: Path) -> None:
    store = durastate.open(tmp_path / "bounded.db")
    engine = _engine(store)
    count = SPARE_CONNECTIONS + 4
    all_connected = threading.Barrier(count)  # so no thread ends before the last one connects
    connections: list[sqlite3.Connection] = []

    def hold() -> None:
        connections.append(engine._thread_connection())
        all_connected.wait(timeout=30)

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    taken = _in_thread(engine._thread_connection)
    assert taken in connections
    spares = [conn for conn, _waits in engine._connections.spare]
    assert len(spares) == SPARE_CONNECTIONS - 1
    closed = [conn for conn in connections if conn is not taken and conn not in spares]
    assert len(closed) == 4
    for conn in closed:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    store.close()
    for conn in spares:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
