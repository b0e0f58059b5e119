"""The SQLite engine's writer gate: this process's writing threads queue on a lock, not in SQLite's busy handler.

What is pinned: which calls hold the gate and that every way out of them
(commit, rollback, a refused BEGIN, a thread ending inside its transaction)
leaves it; on an event loop's thread a held gate refuses at once, as a
held SQLite lock does there, so ``durastate.aio`` hands the call to a worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from durastate.engines.sqlite import LockBusy, SqliteEngine


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(tmp_path / "gate.db", busy_timeout=5) as opened:
        yield opened


def _engine(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    return engine


def test_a_write_transaction_holds_the_gate_until_it_ends(store: durastate.Store) -> None:
    gate = _engine(store)._connections.writers
    with store.transaction():
        store.kv.put(b"s", b"n", b"k", b"v")
        assert gate.holder is threading.current_thread()
    assert gate.holder is None
    with pytest.raises(RuntimeError), store.transaction():
        assert gate.holder is threading.current_thread()
        raise RuntimeError("roll back")
    assert gate.holder is None
    with _engine(store).read_transaction():
        assert gate.holder is None  # readers never queue


def test_another_threads_write_waits_for_the_commit(store: durastate.Store) -> None:
    inside, done = threading.Event(), threading.Event()
    seen: list[bytes | None] = []

    def writer() -> None:
        inside.wait(timeout=30)
        store.kv.put(b"s", b"n", b"second", b"v")  # queues behind the open transaction
        seen.append(store.kv.get(b"s", b"n", b"first"))
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    with store.transaction():
        store.kv.put(b"s", b"n", b"first", b"v")
        inside.set()
        assert not done.wait(timeout=0.2)  # it cannot have written: we hold the gate
    thread.join(timeout=30)
    assert seen == [b"v"]  # it ran after our commit


def test_a_refused_begin_leaves_the_gate(store: durastate.Store, tmp_path: Path) -> None:
    with durastate.open(tmp_path / "gate.db", busy_timeout=0) as impatient:
        gate = _engine(impatient)._connections.writers
        with store.transaction():
            store.kv.put(b"s", b"n", b"k", b"v")  # SQLite's write lock, held by the other store
            with pytest.raises(durastate.StoreUnavailable), impatient.transaction():
                pass
            assert gate.holder is None
        with impatient.transaction():
            impatient.kv.put(b"s", b"n", b"k", b"w")
        assert impatient.kv.get(b"s", b"n", b"k") == b"w"


def test_a_thread_that_ends_inside_its_transaction_frees_the_gate_once_reaped(store: durastate.Store) -> None:
    engine = _engine(store)

    def abandon() -> None:
        engine.transaction().__enter__()  # never left
        store.kv.put(b"s", b"n", b"abandoned", b"v")

    thread = threading.Thread(target=abandon)
    thread.start()
    thread.join(timeout=30)
    assert engine._connections.writers.holder is thread
    reaper = threading.Thread(target=engine._thread_connection)  # a new thread's first call reaps
    reaper.start()
    reaper.join(timeout=30)
    assert engine._connections.writers.holder is None
    store.kv.put(b"s", b"n", b"after", b"v")
    assert store.kv.get_many(b"s", b"n", [b"abandoned", b"after"]) == [None, b"v"]


def test_on_an_event_loop_a_held_gate_refuses_at_once_and_changes_nothing(store: durastate.Store) -> None:
    engine = _engine(store)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction():
            store.kv.put(b"s", b"n", b"held", b"v")
            held.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(timeout=30)

    async def inline() -> None:
        before = engine.no_wait_changes()
        with pytest.raises(LockBusy, match="running event loop"):
            store.kv.put(b"s", b"n", b"inline", b"v")
        with pytest.raises(LockBusy), store.transaction():
            pass
        assert engine.no_wait_changes() == before
        assert engine._connections.writers.holder is thread

    try:
        asyncio.run(inline())
    finally:
        release.set()
        thread.join(timeout=30)
    assert store.kv.get(b"s", b"n", b"inline") is None
    store.kv.put(b"s", b"n", b"inline", b"v")  # after the loop: waits as any sync call
    assert store.kv.get(b"s", b"n", b"inline") == b"v"
