"""A thread's SQLite connection keeps waiting in SQLite's busy handler once it met a lock off a loop thread.

File connections start at busy timeout 0: a held lock is refused at once,
and off a loop thread the engine sets a busy timeout (``FIRST_WAIT_MS``, or
the store's if shorter) and runs the statement again (``sqlite_busy``); a
statement still refused after it runs again in short rounds until the
store's busy timeout has passed. The timeout then stays on the connection
(``ThreadState.lock_wait``), so the thread's later statements wait in
SQLite without a refusal first; it comes off when a loop runs on the
thread (a wait there would stall the loop) and when an ended thread's
connection goes to a new thread. On a loop's thread a sync call waits
``LOOP_LOCK_WAIT`` at most, and an inline call of ``durastate.aio`` not at
all (``engines.loop``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durastate
from durastate.engines import loop, sqlite_busy
from durastate.engines.base import READ
from durastate.engines.sqlite import LockBusy, SqliteEngine
from durastate.testing.locking import WriteLockHolder, lock_released_later

BUSY_TIMEOUT_MS = 20_000
# What a connection that met a lock waits in SQLite's handler in one go (the store's busy timeout is longer).
WAITS_MS = min(sqlite_busy.FIRST_WAIT_MS, BUSY_TIMEOUT_MS)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    store = durastate.open(tmp_path / "wait.db", busy_timeout=BUSY_TIMEOUT_MS / 1000)
    yield store
    store.close()


def _file(store: durastate.Store) -> Path:
    engine = store.engine
    assert isinstance(engine, SqliteEngine) and engine.file is not None
    return engine.file


def _busy_timeout_ms(store: durastate.Store) -> int:
    engine = store.engine
    row = engine.one(engine.sql(READ("PRAGMA busy_timeout")))
    assert row is not None
    return int(row[0])


def _put_past_a_held_lock(store: durastate.Store, key: bytes) -> None:
    """``kv.put`` while another connection holds the write lock, released once the put is under way."""
    with lock_released_later(_file(store)) as released:
        store.kv.put(b"s", b"n", key, b"v")
        assert released.is_set()


def test_after_its_first_wait_the_connection_waits_without_a_refusal(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _busy_timeout_ms(store) == 0  # a held lock is seen at once
    _put_past_a_held_lock(store, b"first")
    assert _busy_timeout_ms(store) == WAITS_MS

    refusals: list[BaseException] = []
    after_busy = SqliteEngine._after_busy

    def counted(self: SqliteEngine, exc: Exception, attempt: object) -> object:
        refusals.append(exc)
        return after_busy(self, exc, attempt)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteEngine, "_after_busy", counted)
    _put_past_a_held_lock(store, b"second")  # waited in SQLite's handler, never refused
    assert refusals == []
    assert store.kv.get(b"s", b"n", b"second") == b"v"


def test_on_a_loop_a_sync_call_waits_briefly_for_a_lock_held_elsewhere(store: durastate.Store) -> None:
    _put_past_a_held_lock(store, b"first")  # this thread's connection now waits in SQLite

    async def main() -> None:
        # A notebook cell or an async handler calling the sync API while another process writes for a
        # moment: the call waits for the lock (stalling the loop, as any sync call does), then writes.
        _put_past_a_held_lock(store, b"on-loop")
        with lock_released_later(_file(store)) as released, store.transaction():
            store.kv.put(b"s", b"n", b"in-tx", b"v")
            assert released.is_set()

    asyncio.run(main())
    assert store.kv.get_many(b"s", b"n", [b"on-loop", b"in-tx"]) == [b"v", b"v"]
    _put_past_a_held_lock(store, b"after")  # off the loop again: waits as before
    assert store.kv.get(b"s", b"n", b"after") == b"v"


def test_on_a_loop_a_sync_call_is_refused_after_the_loops_lock_wait_saying_why(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop, "LOOP_LOCK_WAIT", 0.2)
    holder = WriteLockHolder(_file(store)).start()  # held until the calls are over: a transaction of the loop, say

    async def main() -> None:
        with pytest.raises(LockBusy, match=r"running event loop, where it waited 0\.2 s .* durastate\.aio"):
            store.kv.put(b"s", b"n", b"on-loop", b"v")
        with pytest.raises(LockBusy, match=r"waited 0\.2 s"), store.transaction():
            store.kv.put(b"s", b"n", b"in-tx", b"v")

    try:
        asyncio.run(main())
    finally:
        holder.release()
    assert store.kv.get_many(b"s", b"n", [b"on-loop", b"in-tx"]) == [None, None]


def _inline(call: Callable[..., object], *args: object) -> object:
    """``call(*args)`` as an async front end's inline branch runs it (``durastate._aio``): an inline site."""
    return call(*args)


loop.inline_site(_inline)


def test_an_inline_call_of_an_async_front_end_is_refused_at_once(store: durastate.Store) -> None:
    _put_past_a_held_lock(store, b"first")  # this thread's connection now waits in SQLite
    holder = WriteLockHolder(_file(store)).start()

    def put_in_transaction() -> None:
        with store.transaction():
            store.kv.put(b"s", b"n", b"in-tx", b"v")

    async def main() -> None:
        with pytest.raises(LockBusy, match="where this call does not wait for the lock"):
            _inline(store.kv.put, b"s", b"n", b"on-loop", b"v")
        with pytest.raises(LockBusy, match="does not wait"):
            _inline(put_in_transaction)

    try:
        asyncio.run(main())
    finally:
        holder.release()
    assert store.kv.get_many(b"s", b"n", [b"on-loop", b"in-tx"]) == [None, None]
    assert _busy_timeout_ms(store) == 0  # the loop set the connection back to refusing at once


def test_durastate_aio_marks_its_inline_calls_so_the_loop_never_waits(tmp_path: Path) -> None:
    from durastate import aio
    from durastate.engines import sqlite_transaction

    waits: list[tuple[bool, float | None]] = []  # (on the loop's thread, the wait lock_wait_here gave)
    lock_wait_here = sqlite_transaction.lock_wait_here

    def recorded(busy_timeout: float) -> float | None:
        wait = lock_wait_here(busy_timeout)
        waits.append((loop.running_loop() is not None, wait))
        return wait

    async def main() -> None:
        astore = await aio.open(tmp_path / "inline.db", busy_timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            assert astore._runner.inline  # durability="normal": calls run on the loop's thread first
            await astore.kv.put(b"s", b"n", b"k", b"before")  # the loop thread's connection, made
            with lock_released_later(tmp_path / "inline.db") as released:
                sqlite_transaction.lock_wait_here = recorded
                try:
                    await astore.kv.put(b"s", b"n", b"k", b"v")  # refused inline, waited for on a worker
                finally:
                    sqlite_transaction.lock_wait_here = lock_wait_here
                assert released.is_set()
            assert await astore.kv.get(b"s", b"n", b"k") == b"v"
        finally:
            await astore.close()

    asyncio.run(main())
    assert waits[0] == (True, None)  # on the loop: refused at once
    assert all(wait == BUSY_TIMEOUT_MS / 1000 for on_loop, wait in waits[1:] if not on_loop), waits
    assert (False, BUSY_TIMEOUT_MS / 1000) in waits


def test_an_ended_threads_connection_that_waited_refuses_at_once_for_the_next_thread(store: durastate.Store) -> None:
    timeouts: list[int] = []

    def waited() -> None:
        _put_past_a_held_lock(store, b"first")
        timeouts.append(_busy_timeout_ms(store))

    def adopts() -> None:
        timeouts.append(_busy_timeout_ms(store))

    for target in (waited, adopts):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
    assert timeouts == [WAITS_MS, 0]


def test_a_writer_still_locked_out_after_its_first_wait_tries_again_in_short_rounds(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_busy, "FIRST_WAIT_MS", 50)
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    statements: list[str] = []
    starving = threading.Event()
    done: list[int] = []

    def trace(statement: str) -> None:
        statements.append(statement)
        if statement == f"PRAGMA busy_timeout = {sqlite_busy.STARVING_ROUND_MS}":
            starving.set()

    def writer() -> None:
        assert store.kv.get(b"s", b"n", b"k") is None  # the thread's own connection, made
        conn = engine._tls.state.conn
        assert conn is not None
        conn.set_trace_callback(trace)
        store.kv.put(b"s", b"n", b"k", b"v")
        done.append(_busy_timeout_ms(store))

    holder = WriteLockHolder(_file(store)).start()
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert starving.wait(30), statements  # past its first 50 ms: rounds
        assert thread.is_alive() and not done  # still waiting for the lock
    finally:
        holder.release()
        thread.join()
    assert done == [50]  # back to the first wait's timeout once it had the lock
    assert store.kv.get(b"s", b"n", b"k") == b"v"
    pragmas = [s for s in statements if s.startswith("PRAGMA busy_timeout")]
    assert pragmas[:3] == [
        "PRAGMA busy_timeout = 50",
        f"PRAGMA busy_timeout = {sqlite_busy.STARVING_ROUND_MS}",
        "PRAGMA busy_timeout = 50",
    ]
    # The put ran once refused at once (timeout 0), once for the first wait, then once a round at least.
    puts = [s for s in statements if s.startswith("INSERT")]
    assert len(puts) >= 3, statements


def test_rounds_end_when_the_stores_busy_timeout_has_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_busy, "FIRST_WAIT_MS", 50)
    busy_timeout = 0.4
    with durastate.open(tmp_path / "short.db", busy_timeout=busy_timeout) as store:
        store.kv.put(b"s", b"n", b"warm", b"v")
        holder = WriteLockHolder(_file(store)).start()
        try:
            for key in (b"first", b"second"):  # refused at once first; then waiting from the first try
                began = time.monotonic()
                with pytest.raises(LockBusy):
                    store.kv.put(b"s", b"n", key, b"v")
                assert time.monotonic() - began >= busy_timeout - 0.01  # never gave up before the busy timeout
                assert _busy_timeout_ms(store) == 50  # set back after the rounds
        finally:
            holder.release()
        assert store.kv.get(b"s", b"n", b"first") is None and store.kv.get(b"s", b"n", b"second") is None
        store.kv.put(b"s", b"n", b"after", b"v")
        assert store.kv.get(b"s", b"n", b"after") == b"v"


def test_a_store_busy_timeout_below_the_first_wait_is_the_connections(tmp_path: Path) -> None:
    with durastate.open(tmp_path / "quick.db", busy_timeout=0.3) as store:
        _put_past_a_held_lock(store, b"k")
        assert _busy_timeout_ms(store) == 300
