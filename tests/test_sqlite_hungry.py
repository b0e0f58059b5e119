"""A writer that has waited long for SQLite's write lock goes first (``engines.sqlite_hungry``).

Two stores on one file stand for two processes: each has its own SQLite
connections and its own open file of ``<file>-hungry``, whose ``flock``s
conflict as another process's would. A test takes that lock itself where it
plays "a hungry writer of another process".
"""

from __future__ import annotations

import asyncio
import fcntl
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines import sqlite_hungry
from durastate.engines.sqlite import LockBusy, SqliteEngine
from durastate.engines.sqlite_hungry import HungryLock
from durastate.testing.locking import WriteLockHolder, lock_released_later

FORK = multiprocessing.get_context("fork")


@pytest.fixture
def file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sqlite_hungry, "HUNGRY_AFTER", 0.01)  # read when a store opens
    path = tmp_path / "hungry.db"
    durastate.open(path).close()
    return path


@pytest.fixture
def opened() -> Iterator[Callable[..., durastate.Store]]:
    stores: list[durastate.Store] = []

    def open_store(path: Path, busy_timeout: float = 30.0) -> durastate.Store:
        store = durastate.open(path, busy_timeout=busy_timeout)
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close()


def _engine(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    return engine


def _meet_contention(store: durastate.Store) -> None:
    """One write that waits for another connection's write lock: the store looks at the hungry lock from now on."""
    file = _engine(store).file
    assert file is not None
    with lock_released_later(file, after=0.05) as released:
        store.kv.put(b"s", b"n", b"contended", b"v")
        assert released.is_set()
    assert _engine(store)._hungry is not None


class SideLock:
    """The test's own open file of ``<file>-hungry``: its ``flock`` conflicts with every store's."""

    def __init__(self, file: Path) -> None:
        self.fd = os.open(f"{file}-hungry", os.O_RDWR | os.O_CREAT, 0o600)

    def held_by_another(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False

    def take(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def side(file: Path) -> Iterator[SideLock]:
    lock = SideLock(file)
    yield lock
    lock.close()


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Whether ``condition()`` became true within ``timeout`` seconds (looked at every millisecond)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """``call()`` on a thread of its own; the list gets its result or its exception."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_write_that_waited_long_holds_the_hungry_lock_until_it_has_written(
    file: Path, side: SideLock, opened: Callable[..., durastate.Store]
) -> None:
    store = opened(file)
    holder = WriteLockHolder(file).start()
    try:
        thread, outcome = _in_thread(lambda: store.kv.put(b"s", b"n", b"hungry", b"v"))
        # Past HUNGRY_AFTER in SQLite's handler, the write turns hungry: it holds <file>-hungry while it tries.
        assert _until(side.held_by_another)
    finally:
        holder.release()
    thread.join()
    assert outcome == [None]
    assert store.kv.get(b"s", b"n", b"hungry") == b"v"
    assert not side.held_by_another()  # given back once written


def test_a_store_that_met_contention_lets_a_hungry_writer_write_first(
    file: Path, side: SideLock, opened: Callable[..., durastate.Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    newcomer, hungry = opened(file), opened(file)
    _meet_contention(newcomer)
    waiting = threading.Event()
    wait_released = HungryLock.wait_released

    def seen_waiting(self: HungryLock, deadline: float) -> bool:
        waiting.set()
        return wait_released(self, deadline)

    monkeypatch.setattr(HungryLock, "wait_released", seen_waiting)
    side.take()  # a hungry writer of another process (SQLite's lock is free: only the hungry lock holds it back)
    try:
        thread, outcome = _in_thread(lambda: newcomer.kv.incr(b"s", b"n", b"order"))
        assert _until(waiting.is_set)
        assert hungry.kv.incr(b"s", b"n", b"order") == 1  # the hungry writer's write, the newcomer still waiting
    finally:
        side.release()
    thread.join()
    assert outcome == [2]


def test_the_busy_timeout_holds_while_a_hungry_writer_goes_first(
    file: Path, side: SideLock, opened: Callable[..., durastate.Store]
) -> None:
    store = opened(file, busy_timeout=0.3)
    _meet_contention(store)
    side.take()  # a hungry writer that never finishes
    try:
        with pytest.raises(LockBusy, match="goes first"):
            store.kv.put(b"s", b"n", b"late", b"v")
        with pytest.raises(LockBusy, match="goes first"), store.transaction():
            store.kv.put(b"s", b"n", b"late-tx", b"v")
    finally:
        side.release()
    assert store.kv.get(b"s", b"n", b"late") is None
    assert store.kv.get(b"s", b"n", b"late-tx") is None
    store.kv.put(b"s", b"n", b"after", b"v")  # nothing left held
    assert store.kv.get(b"s", b"n", b"after") == b"v"


def test_a_write_on_an_event_loops_thread_never_waits_for_a_hungry_writer(
    file: Path, side: SideLock, opened: Callable[..., durastate.Store]
) -> None:
    store = opened(file, busy_timeout=0.3)
    _meet_contention(store)

    async def on_the_loop() -> None:
        store.kv.put(b"s", b"n", b"on-loop", b"v")

    side.take()
    try:
        # Refused at once for the loop (durastate.aio then runs it on a worker thread), not after the busy timeout.
        with pytest.raises(LockBusy, match="event loop"):
            asyncio.run(on_the_loop())
    finally:
        side.release()
    assert store.kv.get(b"s", b"n", b"on-loop") is None


def test_without_contention_there_is_no_side_file_and_no_flock(
    file: Path, opened: Callable[..., durastate.Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    flock = fcntl.flock

    def counted(fd: int, operation: int) -> None:
        calls.append(operation)
        flock(fd, operation)

    monkeypatch.setattr(sqlite_hungry.fcntl, "flock", counted)
    store = opened(file)
    for i in range(20):
        store.kv.put(b"s", b"n", b"k%d" % i, b"v")
        store.kv.incr(b"s", b"n", b"count")
        with store.transaction():
            store.kv.put(b"s", b"n", b"t%d" % i, b"v")
    assert calls == []
    assert not os.path.exists(f"{file}-hungry")
    _meet_contention(store)
    store.kv.put(b"s", b"n", b"after", b"v")
    assert calls  # the counting sees the looks once the store has met contention
    assert os.path.exists(f"{file}-hungry")


def _hungry_child(file: Path, store: durastate.Store, ready: Any) -> None:
    """In a forked child, with the inherited store: a write that turns hungry (the parent holds SQLite's lock)."""
    ready.set()
    store.kv.put(b"s", b"n", b"child", b"v")


def test_a_killed_hungry_child_holds_nobody_up(
    file: Path, side: SideLock, opened: Callable[..., durastate.Store]
) -> None:
    parent, other = opened(file), opened(file, busy_timeout=1.0)
    _meet_contention(parent)  # the parent's store has its own hungry lock file open: the child inherits it
    _meet_contention(other)
    holder = WriteLockHolder(file).start()
    try:
        ready = FORK.Event()
        child = FORK.Process(target=_hungry_child, args=(file, parent, ready))
        child.start()
        assert ready.wait(30)
        assert _until(side.held_by_another)  # the child is hungry
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join()
    finally:
        holder.release()
    # The child's lock went with its last descriptor: its own, not a copy of the parent's.
    other.kv.put(b"s", b"n", b"other", b"v")
    parent.kv.put(b"s", b"n", b"parent", b"v")
    assert other.kv.get(b"s", b"n", b"child") is None
    assert (other.kv.get(b"s", b"n", b"other"), other.kv.get(b"s", b"n", b"parent")) == (b"v", b"v")


def _write_in_child(store: durastate.Store, result: Any) -> None:
    try:
        store.kv.put(b"s", b"n", b"child", b"v")
        result.put("written")
    except LockBusy:
        result.put("refused")


def test_a_forked_child_sees_its_parents_hungry_lock_as_another_writers(
    file: Path, side: SideLock, opened: Callable[..., durastate.Store]
) -> None:
    store = opened(file, busy_timeout=0.3)
    _meet_contention(store)
    hungry = _engine(store)._hungry
    assert hungry is not None
    assert hungry.take(time.monotonic() + 30)  # this process is hungry (as its writer would be, mid-write)
    try:
        result = FORK.SimpleQueue()
        child = FORK.Process(target=_write_in_child, args=(store, result))
        child.start()
        child.join()
        # The child waited for the parent's lock (its own descriptor), and left the parent holding it.
        assert result.get() == "refused"
        assert side.held_by_another()
    finally:
        hungry.release()
    assert store.kv.get(b"s", b"n", b"child") is None
