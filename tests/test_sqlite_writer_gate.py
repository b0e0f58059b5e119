"""The SQLite engine's writer gate: this process's writing threads queue on a lock, not in SQLite's busy handler.

What is pinned: which calls hold the gate and that every way out of them
(commit, rollback, a refused BEGIN, a thread ending inside its transaction)
leaves it; on an event loop's thread a held gate refuses an inline call of
``durastate.aio`` at once, as a held SQLite lock does there, so it hands the
call to a worker; a sync call made there waits for it ``LOOP_LOCK_WAIT`` at most.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durastate
from durastate.engines import loop, sqlite_connections
from durastate.engines.sqlite import LockBusy, SqliteEngine
from durastate.engines.sqlite_connections import WriterGate


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


def _gate_held_in_a_thread(store: durastate.Store) -> tuple[threading.Thread, threading.Event]:
    """A thread holding ``store``'s writer gate (a transaction) until the returned event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction():
            store.kv.put(b"s", b"n", b"held", b"v")
            held.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(timeout=30)
    return thread, release


def _inline(call: Callable[..., object], *args: object) -> object:
    """``call(*args)`` as an async front end's inline branch runs it (``durastate._aio``): an inline site."""
    return call(*args)


loop.inline_site(_inline)


def test_on_an_event_loop_an_inline_call_meeting_a_held_gate_is_refused_at_once_and_changes_nothing(
    store: durastate.Store,
) -> None:
    engine = _engine(store)
    thread, release = _gate_held_in_a_thread(store)

    async def inline() -> None:
        before = engine.no_wait_changes()
        with pytest.raises(LockBusy, match="running event loop, where this call does not wait"):
            _inline(store.kv.put, b"s", b"n", b"inline", b"v")
        with pytest.raises(LockBusy):
            _inline(store.transaction().__enter__)
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


def test_on_an_event_loop_a_sync_call_waits_for_the_gate_briefly(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(store)
    thread, release = _gate_held_in_a_thread(store)

    async def sync_calls() -> None:
        # Another thread's transaction for a moment: waited for.
        releaser = threading.Timer(0.2, release.set)
        releaser.start()
        store.kv.put(b"s", b"n", b"waited", b"v")
        assert release.is_set()
        releaser.join()
        thread.join(timeout=30)
        # Held past LOOP_LOCK_WAIT (a transaction this very loop would have to drive): refused, saying why.
        monkeypatch.setattr(loop, "LOOP_LOCK_WAIT", 0.2)
        holder, let_go = _gate_held_in_a_thread(store)
        try:
            with pytest.raises(LockBusy, match=r"where it waited 0\.2 s for the lock"):
                store.kv.put(b"s", b"n", b"refused", b"v")
            assert engine._connections.writers.holder is holder
        finally:
            let_go.set()
            holder.join(timeout=30)

    asyncio.run(sync_calls())
    assert store.kv.get_many(b"s", b"n", [b"waited", b"refused"]) == [b"v", None]


# -- fairness: a thread that waited HUNGRY_AFTER gets the gate handed to it (sqlite_connections.WriterGate) --------


def _queued(gate: WriterGate, count: int) -> None:
    """Until ``count`` threads are queued for a turn (a condition looked at, with a deadline)."""
    deadline = time.monotonic() + 30
    while len(gate.turns) < count:
        assert time.monotonic() < deadline, "no waiter queued for its turn"
        time.sleep(0.001)


@pytest.fixture
def hungry_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_connections, "HUNGRY_AFTER", 0.01)


@pytest.mark.usefixtures("hungry_soon")
def test_a_thread_that_waited_long_gets_the_gate_before_a_thread_that_asks_later() -> None:
    gate = WriterGate()
    assert gate.enter(None)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(gate.enter(30.0)))
    waiter.start()
    _queued(gate, 1)
    gate.leave()
    # A thread asking now (a writer looping on the gate, this one) does not take it past the queued waiter:
    # the gate went straight from the holder to the waiter.
    assert not gate.lock.acquire(False)
    waiter.join()
    assert got == [True] and gate.holder is waiter
    gate.leave()
    assert gate.lock.acquire(False)  # nobody queued: a free lock again
    gate.lock.release()


@pytest.mark.usefixtures("hungry_soon")
def test_queued_waiters_get_the_gate_in_the_order_they_queued() -> None:
    gate = WriterGate()
    assert gate.enter(None)
    order: list[int] = []

    def write(n: int) -> None:
        assert gate.enter(30.0)
        order.append(n)
        gate.leave()

    threads = []
    for n in range(4):
        threads.append(threading.Thread(target=write, args=(n,)))
        threads[-1].start()
        _queued(gate, n + 1)
    gate.leave()
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2, 3]
    assert not gate.turns and gate.lock.acquire(False)


@pytest.mark.usefixtures("hungry_soon")
def test_a_queued_waiter_that_times_out_leaves_the_queue_and_holds_nothing() -> None:
    gate = WriterGate()
    assert gate.enter(None)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(gate.enter(0.1)))
    waiter.start()
    waiter.join()
    assert got == [False] and not gate.turns
    gate.leave()
    assert gate.lock.acquire(False)  # released, not handed to the waiter that gave up
    gate.lock.release()


@pytest.mark.usefixtures("hungry_soon")
def test_a_single_write_hands_the_gate_to_a_thread_queued_for_its_turn(tmp_path: Path) -> None:
    # A single write (kv.put: SqliteEngine.execute) takes the gate's lock itself; held past HUNGRY_AFTER
    # (here: waiting in SQLite's handler for another program's lock), a second thread queues for its turn.
    # The put's release must hand the gate over: a bare release left the queued thread on its baton with the
    # lock free until its deadline (LockBusy after the busy timeout; seen at close in test_sqlite_close).
    path = tmp_path / "handover.db"
    with durastate.open(path, busy_timeout=5) as opened:
        opened.kv.put(b"s", b"n", b"warm", b"v")
        gate = _engine(opened)._connections.writers
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another program's write lock
        outcomes: list[str] = []

        def put(key: bytes) -> None:
            try:
                opened.kv.put(b"s", b"n", key, b"v")
                outcomes.append("written")
            except LockBusy as exc:
                outcomes.append(f"LockBusy: {exc}")

        first = threading.Thread(target=put, args=(b"first",))
        first.start()
        deadline = time.monotonic() + 30
        while not gate.lock.locked():  # the first put holds the gate, waiting for the other program
            assert time.monotonic() < deadline, "the first put never took the gate"
            time.sleep(0.001)
        second = threading.Thread(target=put, args=(b"second",))
        second.start()
        _queued(gate, 1)
        other.execute("COMMIT")
        other.close()
        first.join()
        second.join()
        assert outcomes == ["written", "written"]
        assert opened.kv.get(b"s", b"n", b"second") == b"v"
        assert not gate.turns and not gate.lock.locked()
