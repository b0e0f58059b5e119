"""A SQLite file store's single writes share one connection, whose page cache no other thread's write drops.

A write statement outside a transaction runs, holding the writer gate, on the
engine's shared writer connection (``sqlite_connections.SharedWriter``), not
on its thread's: SQLite drops a connection's page cache whenever another
connection of the file committed, and LangGraph's sync loop writes from
several threads in turn. A write transaction runs there too (its thread
holds the gate from BEGIN to its end), so a thread's single writes and
transactions share one page cache. These tests pin what that must keep: the writes of
several threads land on one connection; a write that meets another process's
lock waits (or, on a loop's thread, is refused with its changes counted) as
before; the WAL stays bounded for threads that only ever wrote there;
``close()`` and ``fork`` leave no shared connection behind.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate._aio import AsyncRunner
from durastate.engines import sqlite_busy, sqlite_wal
from durastate.engines.base import DDL, READ, WRITE, WRITE_ROWS
from durastate.engines.sqlite import LockBusy, SqliteEngine
from durastate.testing.locking import WriteLockHolder, lock_released_later


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(tmp_path / "shared.db", busy_timeout=20) as opened:
        yield opened


def _engine(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine) and engine.file is not None
    return engine


def _shared(store: durastate.Store) -> sqlite3.Connection:
    conn = _engine(store)._connections.shared.conn
    assert conn is not None
    return conn


def _data_version(conn: sqlite3.Connection) -> int:
    """``PRAGMA data_version`` of ``conn``: it changes when another connection commits (the page cache is dropped)."""
    row = conn.execute("PRAGMA data_version").fetchone()
    return int(row[0])


class _Worker:
    """A long-lived thread that runs the jobs handed to it, one at a time (an executor's thread)."""

    def __init__(self) -> None:
        self._jobs: list[Callable[[], Any]] = []
        self._ready = threading.Condition()
        self._results: list[Any] = []
        self._thread = threading.Thread(target=self._serve)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._jobs))
                job = self._jobs.pop(0)
            if job is None:
                return
            result = job()
            with self._ready:
                self._results.append(result)
                self._ready.notify_all()

    def run(self, job: Callable[[], Any]) -> Any:
        with self._ready:
            self._jobs.append(job)
            self._ready.notify_all()
            assert self._ready.wait_for(lambda: bool(self._results), timeout=30)
            return self._results.pop()

    def stop(self) -> None:
        with self._ready:
            self._jobs.append(None)  # type: ignore[arg-type]
            self._ready.notify_all()
        self._thread.join(timeout=30)


def test_single_writes_of_threads_alive_together_commit_on_one_connection(store: durastate.Store) -> None:
    workers = [_Worker(), _Worker()]
    try:
        workers[0].run(lambda: store.kv.put(b"s", b"n", b"first", b"v"))
        shared = _shared(store)
        version = _data_version(shared)
        for i in range(20):
            # Alternating threads, each alive throughout with a connection of its own for reads.
            workers[i % 2].run(lambda: store.kv.get(b"s", b"n", b"first"))
            workers[i % 2].run(lambda i=i: store.kv.put(b"s", b"n", b"k%d" % i, b"v"))
            workers[i % 2].run(lambda i=i: store.kv.put_many(b"s", b"m", [(b"a%d" % i, b"1"), (b"b%d" % i, b"2")]))
        assert _data_version(shared) == version  # no commit of another connection in between: its cache kept
        assert [key for key, _ in store.kv.scan(b"s", b"m")][:4] == [b"a0", b"a1", b"a10", b"a11"]
        assert store.kv.get(b"s", b"n", b"k19") == b"v"
    finally:
        for worker in workers:
            worker.stop()


def test_a_queues_push_claim_and_ack_commit_on_the_shared_connection(store: durastate.Store) -> None:
    # A claim is a write read back with one() (its RETURNING row), a claim of several with all(); with the
    # push and the ack on the shared connection and a claim on the thread's, each commit dropped the other
    # connection's page cache (bench/queue_cpu.py: ~10 % of a push+claim+ack's CPU).
    store.queues.push("q", [b"warm"])
    store.queues.claim("q", lease=30).ack()
    shared = _shared(store)
    version = _data_version(shared)
    own = _engine(store)._local.conn
    assert own is not None
    own_version = _data_version(own)
    for i in range(5):
        store.queues.push("q", [b"%d" % i])
        store.queues.push("q", [b"again %d" % i])
        claim = store.queues.claim("q", lease=30)
        assert claim is not None
        claim.ack()
        assert store.queues.pop("q") == b"again %d" % i
    assert _data_version(shared) == version  # every commit was its own: its cache kept
    assert _data_version(own) != own_version  # the thread's own connection saw them as another's
    assert store.queues.claim("q", lease=30) is None


def test_a_write_read_back_with_all_commits_on_the_shared_connection(store: durastate.Store) -> None:
    engine = _engine(store)
    engine.execute(engine.sql(DDL("CREATE TABLE {p}counted (n INTEGER NOT NULL)")))
    engine.execute(engine.sql(WRITE("INSERT INTO {p}counted (n) VALUES (1), (2)")))
    shared = _shared(store)
    version = _data_version(shared)
    bump = engine.sql(WRITE_ROWS("UPDATE {p}counted SET n = n + 10 RETURNING n"))
    assert sorted(row[0] for row in engine.all(bump)) == [11, 12]
    assert engine.one(engine.sql(WRITE_ROWS("UPDATE {p}counted SET n = n + 1 WHERE n = 11 RETURNING n"))) == (12,)
    assert _data_version(shared) == version  # both committed on it
    assert sorted(row[0] for row in engine.all(engine.sql(READ("SELECT n FROM {p}counted")))) == [12, 12]


def test_single_writes_and_write_transactions_of_a_thread_commit_on_one_connection(store: durastate.Store) -> None:
    # huey's worker: an enqueue (a single write), then a leased dequeue that acks the task before (a transaction).
    # With transactions on the thread's own connection, each commit dropped the other connection's page cache and
    # every cycle read its pages from the file again (bench/RESULTS.md "sharedtx").
    store.queues.push("q", [b"warm"])
    with store.transaction():
        store.kv.put(b"s", b"n", b"warm", b"v")
    shared = _shared(store)
    version = _data_version(shared)
    for i in range(5):
        store.queues.push("q", [b"%d" % i])
        with store.transaction():
            store.kv.put(b"s", b"n", b"in %d" % i, b"v")
            assert store.kv.get(b"s", b"n", b"in %d" % i) == b"v"  # read back inside, on the same connection
        store.kv.put(b"s", b"n", b"after %d" % i, b"v")
    assert _data_version(shared) == version  # no other connection committed in between: its cache kept
    assert _engine(store)._tls.state.own is None  # the thread's own connection is its own again
    assert store.kv.get(b"s", b"n", b"in 4") == store.kv.get(b"s", b"n", b"after 4") == b"v"


def test_a_write_transaction_locked_by_another_process_waits_on_the_threads_own_connection(
    store: durastate.Store,
) -> None:
    store.kv.put(b"s", b"n", b"warm", b"v")
    file = _engine(store).file
    assert file is not None
    with lock_released_later(file) as released:
        with store.transaction():
            store.kv.put(b"s", b"n", b"k", b"v")
        assert released.is_set()  # it waited for the lock
    assert store.kv.get(b"s", b"n", b"k") == b"v"
    assert _shared(store).execute("PRAGMA busy_timeout").fetchone() == (0,)  # the shared one never waits
    engine = _engine(store)
    # The thread's own waited (its first wait: sqlite_busy.FIRST_WAIT_MS, below the store's 20 s).
    assert engine.one(engine.sql(READ("PRAGMA busy_timeout"))) == (sqlite_busy.FIRST_WAIT_MS,)


def test_a_write_transactions_changes_on_the_shared_connection_count_for_the_thread(store: durastate.Store) -> None:
    engine = _engine(store)
    before = engine.no_wait_changes()
    with store.transaction():
        store.kv.put(b"s", b"n", b"a", b"1")
        store.kv.put(b"s", b"n", b"b", b"2")
    assert engine.no_wait_changes() == before + 2
    with pytest.raises(KeyError), store.transaction():
        store.kv.put(b"s", b"n", b"c", b"3")
        raise KeyError("rolled back")
    # Rolled back, yet counted: the count only ever says a call changed nothing when it did not.
    assert engine.no_wait_changes() == before + 3
    assert store.kv.get(b"s", b"n", b"c") is None


def test_a_cursor_dropped_inside_a_write_transaction_leaves_the_shared_connection_usable(
    store: durastate.Store,
) -> None:
    # An interruption between a statement and its rows drops the cursor (SqliteEngine._drop_cursor); inside a
    # transaction on the shared writer connection that cursor is the single writes' one too.
    store.kv.put(b"s", b"n", b"warm", b"v")
    engine = _engine(store)
    with store.transaction():
        store.kv.put(b"s", b"n", b"a", b"1")
        cursor = engine._tls.state.cursor
        assert cursor is not None
        engine._drop_cursor(cursor)
        store.kv.put(b"s", b"n", b"b", b"2")  # on a new cursor of the same connection, in the same transaction
    store.kv.put(b"s", b"n", b"c", b"3")  # a single write after it: the shared connection's cursor is a live one
    assert [store.kv.get(b"s", b"n", key) for key in (b"a", b"b", b"c")] == [b"1", b"2", b"3"]


def test_a_write_locked_by_another_process_waits_on_the_threads_own_connection(store: durastate.Store) -> None:
    file = _engine(store).file
    assert file is not None
    with lock_released_later(file) as released:
        store.kv.put(b"s", b"n", b"k", b"v")
        assert released.is_set()  # it waited for the lock
    assert store.kv.get(b"s", b"n", b"k") == b"v"
    assert _shared(store).execute("PRAGMA busy_timeout").fetchone() == (0,)  # the shared one never waits
    engine = _engine(store)
    assert engine.one(engine.sql(READ("PRAGMA busy_timeout"))) == (
        sqlite_busy.FIRST_WAIT_MS,
    )  # the thread's own does now (its first wait)


def _batch_probe(store: durastate.Store) -> tuple[SqliteEngine, Any]:
    """The store's engine with a table of the batch tests' own, and its insert compiled."""
    engine = _engine(store)
    engine.execute(engine.sql(DDL("CREATE TABLE {p}batched (k TEXT PRIMARY KEY)")))
    return engine, engine.sql(WRITE("INSERT INTO {p}batched (k) VALUES (?)"))


def _batched_keys(engine: SqliteEngine) -> list[str]:
    return [row[0] for row in engine.all(engine.sql(READ("SELECT k FROM {p}batched ORDER BY k")))]


def test_a_batch_commits_on_the_shared_connection_in_one_transaction(store: durastate.Store) -> None:
    # Engine.batch (a leased huey dequeue's ack and claim): one BEGIN ... COMMIT on the shared writer connection,
    # without the general transaction's swap of the thread's connection; its changes count for the thread.
    engine, insert = _batch_probe(store)
    shared = _shared(store)
    version = _data_version(shared)
    before = engine.no_wait_changes()
    commits: list[str] = []
    shared.set_trace_callback(commits.append)
    try:
        assert engine.batch([(insert, ("a",)), (insert, ("b",))]) == [1, 1]
    finally:
        shared.set_trace_callback(None)
    assert [s for s in commits if s in ("BEGIN IMMEDIATE", "COMMIT")] == ["BEGIN IMMEDIATE", "COMMIT"]
    assert _data_version(shared) == version  # committed on it: its cache kept
    assert engine.no_wait_changes() == before + 2
    assert engine._tls.state.own is None and not engine._tls.state.writing  # the gate left, nothing swapped
    assert _batched_keys(engine) == ["a", "b"]


def test_a_batch_locked_by_another_process_waits_on_the_threads_own_connection(store: durastate.Store) -> None:
    engine, insert = _batch_probe(store)
    file = engine.file
    assert file is not None
    with lock_released_later(file) as released:
        assert engine.batch([(insert, ("a",)), (insert, ("b",))]) == [1, 1]
        assert released.is_set()  # it waited for the lock
    assert _batched_keys(engine) == ["a", "b"]
    assert _shared(store).execute("PRAGMA busy_timeout").fetchone() == (0,)  # the shared one never waits


def test_a_failed_batch_leaves_the_shared_connection_out_of_any_transaction(store: durastate.Store) -> None:
    engine, insert = _batch_probe(store)
    with pytest.raises(durastate.Conflict):
        engine.batch([(insert, ("a",)), (insert, ("a",))])
    shared = _shared(store)
    assert not shared.in_transaction
    assert not engine._tls.state.writing
    store.kv.put(b"s", b"n", b"k", b"v")  # a single write after it, on the same connection
    assert engine.batch([(insert, ("b",))]) == [1]
    assert _batched_keys(engine) == ["b"] and store.kv.get(b"s", b"n", b"k") == b"v"


def test_a_batch_waits_for_a_write_transaction_of_another_thread(store: durastate.Store) -> None:
    engine, insert = _batch_probe(store)
    inside, finish = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction():
            engine.execute(insert, ("first",))
            inside.set()
            finish.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(30)
    # The transaction runs on the shared writer connection: a batch that did not wait for the writer gate would
    # BEGIN inside it there (refused) or commit it half done.
    count = engine.sql(READ("SELECT COUNT(*) FROM {p}batched"))
    answers: list[Any] = []
    batch = threading.Thread(target=lambda: answers.append(engine.batch([(insert, ("second",)), (count, ())])))
    batch.start()
    writers = engine._connections.writers
    deadline = time.monotonic() + 30
    while not writers.turns and batch.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)  # until the batch has queued for the gate (its wait: WriterGate's turns)
    assert writers.turns and answers == []  # waiting, not refused
    finish.set()
    holder.join(30)
    batch.join(30)
    assert answers == [[1, (2,)]]  # it ran after the transaction committed, and saw its row
    assert _batched_keys(engine) == ["first", "second"]


def test_changes_made_on_the_shared_connection_count_for_the_thread(store: durastate.Store) -> None:
    engine = _engine(store)
    before = engine.no_wait_changes()
    store.kv.put(b"s", b"n", b"k", b"v")
    assert engine.no_wait_changes() == before + 1
    store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
    assert engine.no_wait_changes() == before + 3
    store.kv.put_if_absent(b"s", b"n", b"k", b"w")  # changes nothing
    assert engine.no_wait_changes() == before + 3
    other = threading.Thread(target=lambda: store.kv.put(b"s", b"n", b"other", b"v"))
    other.start()
    other.join()
    assert engine.no_wait_changes() == before + 3  # another thread's write on the same connection is not ours


def test_an_inline_async_call_refused_after_a_write_is_not_run_again(store: durastate.Store) -> None:
    """Its first write landed on the shared connection, its second met a lock: it raises, never repeats the first."""
    engine = _engine(store)
    file = engine.file
    assert file is not None
    store.kv.put(b"s", b"n", b"count", b"0")
    holders: list[WriteLockHolder] = []

    def two_writes() -> None:
        if holders:  # run again (what must not happen): let it through, so the count shows it
            holders.pop().release()
        value = int(store.kv.get(b"s", b"n", b"count") or b"0")
        store.kv.put(b"s", b"n", b"count", b"%d" % (value + 1))
        holders.append(WriteLockHolder(file).start())  # another process takes the lock between the two
        store.kv.put(b"s", b"n", b"second", b"v")

    async def main() -> None:
        runner = AsyncRunner(engine, workers=1, name="shared-writer")
        try:
            with pytest.raises(LockBusy):
                await runner.run(two_writes)  # inline on the loop's thread
        finally:
            runner.close()

    try:
        asyncio.run(main())
    finally:
        for held in holders:
            held.release()
    assert store.kv.get(b"s", b"n", b"count") == b"1"
    assert store.kv.get(b"s", b"n", b"second") is None


def test_a_thread_that_only_wrote_on_the_shared_connection_bounds_the_wal(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_wal, "LIMIT", 64 * 1024)
    engine = _engine(store)
    engine.execute(engine.sql(DDL("CREATE TABLE {p}probe (n INTEGER NOT NULL, v BLOB NOT NULL)")))
    insert = engine.sql(WRITE("INSERT INTO {p}probe (n, v) VALUES (?, ?)"))
    owned: list[object] = []

    def puts() -> None:
        for i in range(600):
            engine.execute(insert, (i, b"v" * 100))
        owned.append(engine._tls.state.conn)

    thread = threading.Thread(target=puts)
    thread.start()
    thread.join()
    assert owned == [None]  # it never opened a connection of its own
    shm = os.open(f"{engine.file}-shm", os.O_RDONLY)
    try:
        frames = sqlite_wal.wal_bytes(shm)
    finally:
        os.close(shm)
    assert frames <= 64 * 1024 + (sqlite_wal.CHECK_EVERY + 1) * 3 * (4096 + 24)


def test_the_shared_connection_is_set_up_as_every_other(store: durastate.Store) -> None:
    store.kv.put(b"s", b"n", b"k", b"v")
    shared = _shared(store)
    assert shared.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    assert shared.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    assert shared.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_close_closes_the_shared_connection(tmp_path: Path) -> None:
    store = durastate.open(tmp_path / "closing.db")
    store.kv.put(b"s", b"n", b"k", b"v")
    shared = _shared(store)
    store.close()
    assert _engine(store)._connections.shared.conn is None
    with pytest.raises(sqlite3.ProgrammingError):
        shared.execute("SELECT 1")
    with pytest.raises(durastate.StoreClosed):
        store.kv.put(b"s", b"n", b"k", b"w")


def test_memory_and_read_only_stores_write_on_their_threads_connections(tmp_path: Path) -> None:
    with durastate.open("memory:") as memory:
        memory.kv.put(b"s", b"n", b"k", b"v")
        assert _engine_of(memory)._connections.shared.conn is None
    with durastate.open(tmp_path / "ro.db") as writable:
        writable.kv.put(b"s", b"n", b"k", b"v")
    with durastate.open(tmp_path / "ro.db", read_only=True) as read_only:
        with pytest.raises(durastate.DurastateError):
            read_only.kv.put(b"s", b"n", b"k", b"w")
        assert _engine_of(read_only)._connections.shared.conn is None


def _engine_of(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    return engine


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_writes_on_a_shared_connection_of_its_own(store: durastate.Store) -> None:
    store.kv.put(b"s", b"n", b"parent", b"v")
    parents = _shared(store)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        ok = 0
        try:
            store.kv.put(b"s", b"n", b"child", b"v")
            ok = int(_engine(store)._connections.shared.conn not in (None, parents))
        finally:
            os.write(write, b"%d" % ok)
            os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 8)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"1"
    assert store.kv.get(b"s", b"n", b"child") == b"v"
    store.kv.put(b"s", b"n", b"after", b"v")  # the parent's shared connection still serves it
    assert _shared(store) is parents
