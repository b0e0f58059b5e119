"""durastate bounds a SQLite file's WAL itself (``engines/sqlite_wal``), however many processes write to it.

SQLite's automatic checkpoint is off on durastate's file connections; every
``CHECK_EVERY`` writes the engine reads how many bytes of frames the WAL
holds and, past ``LIMIT``, checkpoints (``PASSIVE`` then ``RESTART``) without
waiting for any lock. With many writer processes SQLite's own policy never
starts the WAL over (the next writer always begins before the last
checkpoint finished), and the WAL grows by hundreds of MB.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sqlite3
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines import sqlite_busy, sqlite_wal
from durastate.engines.base import READ
from durastate.engines.sqlite import SqliteEngine
from durastate.testing.locking import lock_released_later

VALUE = b"v" * 100
LIMIT = 64 * 1024  # bytes of frames, for these tests (a few dozen puts)
PUTS = 3000  # per writer process in the many-writers test


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sqlite_wal, "LIMIT", LIMIT)
    return LIMIT


@pytest.fixture
def store(tmp_path: Path, small_limit: int) -> Iterator[durastate.Store]:
    store = durastate.open(tmp_path / "wal.db", busy_timeout=20)
    yield store
    store.close()


def _engine(store: durastate.Store) -> SqliteEngine:
    engine = store.engine
    assert isinstance(engine, SqliteEngine) and engine.file is not None
    return engine


def _pragma(store: durastate.Store, name: str) -> int:
    engine = store.engine
    row = engine.one(engine.sql(READ(f"PRAGMA {name}")))
    assert row is not None
    return int(row[0])


def _wal_bytes(path: Path) -> int:
    """Bytes of frames in the WAL of the file at ``path`` (its -shm header), 0 without one."""
    try:
        shm = os.open(f"{path}-shm", os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        return sqlite_wal.wal_bytes(shm)
    finally:
        os.close(shm)


def _put_many(store: durastate.Store, count: int, prefix: bytes = b"k") -> int:
    """``count`` puts; the most bytes of frames the WAL held after any of them."""
    file = _engine(store).file
    assert file is not None
    most = 0
    for i in range(count):
        store.kv.put(b"s", b"n", b"%s%d" % (prefix, i), VALUE)
        most = max(most, _wal_bytes(file))
    return most


def test_sqlites_automatic_checkpoint_is_off_on_file_connections(store: durastate.Store) -> None:
    store.kv.put(b"s", b"n", b"k", VALUE)
    assert _pragma(store, "wal_autocheckpoint") == 0
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(_pragma(store, "wal_autocheckpoint")))
    thread.start()
    thread.join()
    assert seen == [0]  # every thread's connection


def test_a_memory_store_has_no_wal_to_bound(small_limit: int) -> None:
    store = durastate.open("memory:")
    try:
        for i in range(100):
            store.kv.put(b"s", b"n", b"k%d" % i, VALUE)
        assert store.kv.get(b"s", b"n", b"k99") == VALUE
        assert _engine_shm(store) is None
    finally:
        store.close()


def _engine_shm(store: durastate.Store) -> int | None:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    return engine._shm.fd


def test_the_wal_starts_over_once_past_the_limit(store: durastate.Store) -> None:
    # Each put adds ~2 frames of 4 KiB: SQLite's own threshold (1,000 pages) would let the WAL reach ~4 MiB.
    most = _put_many(store, 600)
    frame = _pragma(store, "page_size") + 24
    assert LIMIT < most <= LIMIT + (sqlite_wal.CHECK_EVERY + 1) * 3 * frame
    assert _wal_bytes(_engine(store).file or Path()) <= LIMIT + (sqlite_wal.CHECK_EVERY + 1) * 3 * frame
    assert store.kv.get(b"s", b"n", b"k599") == VALUE


def test_writes_inside_transactions_count_too(store: durastate.Store) -> None:
    file = _engine(store).file
    assert file is not None
    most = 0
    for i in range(300):
        with store.transaction():
            store.kv.put(b"s", b"n", b"t%d" % i, VALUE)
            store.kv.put(b"s", b"n", b"u%d" % i, VALUE)
        most = max(most, _wal_bytes(file))
    frame = _pragma(store, "page_size") + 24
    assert most <= LIMIT + (sqlite_wal.CHECK_EVERY + 1) * 4 * frame


def test_a_reader_holding_its_snapshot_keeps_the_wal_until_it_ends_then_the_next_look_starts_it_over(
    store: durastate.Store,
) -> None:
    file = _engine(store).file
    assert file is not None
    store.kv.put(b"s", b"n", b"first", VALUE)
    reader = sqlite3.connect(file, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0  # holds its snapshot
        # The checkpoints past the limit copy nothing the reader may still read, and wait for it
        # RESTART_WAIT_MS at each look (not the store's busy timeout, 20 s).
        grown = _put_many(store, 200, b"a")
        assert grown > 2 * LIMIT
        reader.execute("COMMIT")
    finally:
        reader.close()
    for i in range(sqlite_wal.CHECK_EVERY * 2):
        store.kv.put(b"s", b"n", b"b%d" % i, VALUE)
    assert _wal_bytes(file) < LIMIT  # started over once the reader was gone


def test_a_connection_that_waits_for_locks_still_checkpoints_without_waiting(store: durastate.Store) -> None:
    file = _engine(store).file
    assert file is not None
    with lock_released_later(file) as released:
        store.kv.put(b"s", b"n", b"waited", VALUE)
        assert released.is_set()
    assert _pragma(store, "busy_timeout") == sqlite_busy.FIRST_WAIT_MS  # it now waits in SQLite's handler (lock_wait)
    reader = sqlite3.connect(file, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        assert _put_many(store, 100) > LIMIT  # each look past the limit met the reader: waited 10 ms, not 1 s
        reader.execute("COMMIT")
    finally:
        reader.close()
    assert _pragma(store, "busy_timeout") == sqlite_busy.FIRST_WAIT_MS  # put back after each checkpoint


def _writer(path: str, limit: int, index: int, puts: int, start: Any) -> None:
    sqlite_wal.LIMIT = limit
    store = durastate.open(path, busy_timeout=30)
    try:
        start.wait()
        for i in range(puts):
            store.kv.put(b"w%d" % index, b"n", b"k%d" % i, VALUE)
    finally:
        store.close()


def _reader(path: str, start: Any, stop: Any) -> None:
    store = durastate.open(path, busy_timeout=30, read_only=True)
    try:
        start.wait()
        while not stop.is_set():
            with store.transaction():  # a read-only store's: a snapshot, held for a few reads
                for index in range(4):
                    store.kv.get(b"w%d" % index, b"n", b"k0")
    finally:
        store.close()


def _wal_header(path: str) -> tuple[int, int]:
    """Bytes of frames in the WAL of the file at ``path`` and its salts (new at each start-over); (0, 0) unread."""
    try:
        with open(f"{path}-shm", "rb") as shm:
            page, frames, salts = sqlite_wal._HEADER.unpack(shm.read(sqlite_wal._HEADER.size))
    except (OSError, struct.error):
        return 0, 0
    return frames * ((page if page != 1 else 65536) + 24), salts


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_many_writer_processes_and_a_reader_keep_the_wal_bounded(tmp_path: Path) -> None:
    path = str(tmp_path / "many.db")
    durastate.open(path).close()
    limit = 1024 * 1024
    ctx = multiprocessing.get_context("fork")
    start, stop = ctx.Event(), ctx.Event()
    writers = [ctx.Process(target=_writer, args=(path, limit, index, PUTS, start)) for index in range(4)]
    reader = ctx.Process(target=_reader, args=(path, start, stop))
    for proc in [*writers, reader]:
        proc.start()
    most = 0
    generations: set[int] = set()
    start.set()
    while any(proc.is_alive() for proc in writers):
        held, salts = _wal_header(path)
        most = max(most, held)
        generations.add(salts)
        for proc in writers:
            proc.join(0.005)
    stop.set()
    reader.join(30)
    assert [proc.exitcode for proc in [*writers, reader]] == [0] * 5
    # 12,000 puts of ~2 frames each: ~96 MiB of frames if the WAL never started over. SQLite's own policy (this
    # test without the bound) started it over 0-2 times and let it reach 85-93 MiB; the bound started it over
    # 23-26 times on the quiet 2-core machine (largest WAL 8-10 MiB for a limit of 1 MiB) and 8-21 times beside
    # CPU and fsync load (14-53 MiB). The start-overs are what the bound does; the largest WAL is what the
    # writers add while one checkpoint's fsyncs run, so it follows the disk's latency: 62 MiB once in CI, whose
    # other tests load the disk. Hence no assertion on it here beyond "started over" (test_the_wal_starts_over_
    # once_past_the_limit bounds it for one writer).
    assert len(generations - {0}) >= 6, f"the WAL started over {len(generations) - 1} times, largest {most} bytes"
    store = durastate.open(path)
    try:
        assert [store.kv.get(b"w%d" % index, b"n", b"k%d" % (PUTS - 1)) for index in range(4)] == [VALUE] * 4
    finally:
        store.close()


def test_a_restart_is_tried_only_when_no_reader_holds_the_checkpoint_far_back() -> None:
    assert sqlite_wal.restart_worthwhile(4000, 4000)
    assert sqlite_wal.restart_worthwhile(4000, 3500)  # a reader a few commits behind: waited for (10 ms at most)
    assert not sqlite_wal.restart_worthwhile(4000, 3000)  # an old snapshot: every writer would wait for nothing
    assert not sqlite_wal.restart_worthwhile(-1, -1)  # another connection is checkpointing


def test_a_new_shm_file_is_read_once_the_last_connection_deleted_the_old_one(store: durastate.Store) -> None:
    _put_many(store, 50, b"a")
    engine = _engine(store)
    old = engine._shm.fd
    assert old is not None
    store.engine.release_connection()
    shared = engine._connections.shared  # the file's last connection: SQLite deletes the WAL and the -shm
    with shared.guard:
        assert shared.conn is not None
        shared.conn.close()
        shared.conn = shared.cursor = None
    file = engine.file
    assert file is not None and not Path(f"{file}-shm").exists()
    most = _put_many(store, 300, b"b")
    frame = _pragma(store, "page_size") + 24
    assert most <= LIMIT + (sqlite_wal.CHECK_EVERY + 1) * 3 * frame
    shm = engine._shm.fd
    assert shm is not None and os.fstat(shm).st_ino == os.stat(f"{file}-shm").st_ino


def test_on_an_event_loops_thread_the_restart_waits_for_nothing(store: durastate.Store) -> None:
    store.kv.put(b"s", b"n", b"first", VALUE)
    conn = _engine(store)._tls.state.conn
    assert conn is not None
    waits = f"PRAGMA busy_timeout = {sqlite_wal.RESTART_WAIT_MS}"
    statements: list[str] = []

    async def puts() -> None:  # inline on the loop's thread, as durastate.aio runs a SQLite call
        _put_many(store, 200, b"loop")

    conn.set_trace_callback(statements.append)
    try:
        asyncio.run(puts())
    finally:
        conn.set_trace_callback(None)
    assert sqlite_wal.RESTART in statements  # the WAL passed the limit and was started over
    assert waits not in statements
    statements.clear()
    conn.set_trace_callback(statements.append)
    try:
        _put_many(store, 200, b"off")  # off the loop the RESTART waits up to RESTART_WAIT_MS
    finally:
        conn.set_trace_callback(None)
    assert sqlite_wal.RESTART in statements and waits in statements


# -- early checkpoints of a WAL that rewrites a few pages (sqlite_wal.WalBound, hot_chain) --


def _wal_frames(path: Path) -> int:
    with open(f"{path}-shm", "rb") as shm:
        return int.from_bytes(shm.read(20)[16:20], sys.byteorder)


def _push_claim_ack(store: durastate.Store, count: int) -> int:
    """``count`` push+claim+ack on one queue; the most frames the WAL held after any of them."""
    file = _engine(store).file
    assert file is not None
    most = 0
    for _ in range(count):
        store.queues.push("jobs", [VALUE])
        claim = store.queues.claim("jobs", lease=30)
        assert claim is not None
        claim.ack()
        most = max(most, _wal_frames(file))
    return most


def test_a_queue_that_rewrites_the_same_pages_starts_its_wal_over_long_before_the_limit(tmp_path: Path) -> None:
    store = durastate.open(tmp_path / "queue.db")
    try:
        # ~6 frames a push+claim+ack, nearly all of two pages: 9,000 frames, past LIMIT (~4,070 frames) twice
        # without the early checkpoints; with them the WAL starts over once the walk passes HOT_CHAIN
        # (two hot pages: ~2 x 512 frames, and a look or two: measured 1,100-1,200), whose RESTART finds
        # nothing in its way here.
        most = _push_claim_ack(store, 1500)
        frame = _pragma(store, "page_size") + 24
        assert sqlite_wal.LIMIT // frame > 4000
        assert 2 * sqlite_wal.HOT_CHAIN <= most < 3 * sqlite_wal.HOT_CHAIN
    finally:
        store.close()


def test_a_writer_that_met_another_process_lock_leaves_a_queues_wal_to_its_limit(tmp_path: Path) -> None:
    # With other writing processes an early checkpoint holds them up (their p99: bench/RESULTS.md, stop 18):
    # a thread that has waited for another process's lock checkpoints at LIMIT only.
    store = durastate.open(tmp_path / "queue.db", busy_timeout=20)
    try:
        file = _engine(store).file
        assert file is not None
        with lock_released_later(file) as released:
            store.queues.push("jobs", [VALUE])
            assert released.is_set()  # it waited for the other connection's lock
        assert _engine(store)._tls.state.lock_wait
        most = _push_claim_ack(store, 1000)  # ~6,000 frames: the first test's early restart came at ~1,200
        frame = _pragma(store, "page_size") + 24
        assert 3 * sqlite_wal.HOT_CHAIN < most <= sqlite_wal.LIMIT // frame + (sqlite_wal.CHECK_EVERY + 1) * 6
    finally:
        store.close()


def test_writes_spread_over_new_pages_leave_the_wal_to_its_limit(tmp_path: Path) -> None:
    store = durastate.open(tmp_path / "kv.db")
    try:
        file = _engine(store).file
        assert file is not None
        most = 0
        for i in range(3000):  # new keys: each leaf takes a few dozen frames, then the next one
            store.kv.put(b"s", b"n", b"k%06d" % i, VALUE)
            most = max(most, _wal_frames(file))
        frame = _pragma(store, "page_size") + 24
        assert most > 4 * sqlite_wal.HOT_CHAIN
        assert most * frame <= sqlite_wal.LIMIT + (sqlite_wal.CHECK_EVERY + 1) * 3 * frame
    finally:
        store.close()


def test_an_early_checkpoint_that_a_reader_stops_is_not_tried_again_in_that_wal(tmp_path: Path) -> None:
    store = durastate.open(tmp_path / "reader.db")
    try:
        file = _engine(store).file
        assert file is not None
        _push_claim_ack(store, 10)
        reader = sqlite3.connect(file, isolation_level=None)
        statements: list[str] = []
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # holds its snapshot
            conn = _engine(store)._tls.state.conn
            assert conn is not None
            conn.set_trace_callback(statements.append)
            most = _push_claim_ack(store, 400)  # ~2,400 frames: the walk passes HOT_CHAIN at ~1,000
            conn.set_trace_callback(None)
        finally:
            reader.close()
        assert 4 * sqlite_wal.HOT_CHAIN < most < sqlite_wal.LIMIT // (_pragma(store, "page_size") + 24)
        # The first early look's PASSIVE copied nothing the reader may read: no RESTART, none tried again.
        assert statements.count(sqlite_wal.PASSIVE) == 1
        assert sqlite_wal.RESTART not in statements
    finally:
        store.close()


def _fake_shm(path: Path, pages: list[int]) -> int:
    """A ``-shm`` file whose header says ``len(pages)`` frames of 4 KiB, with those page numbers in its segments."""
    data = bytearray(32768 * (2 + len(pages) // 4096))
    data[14:16] = (4096).to_bytes(2, sys.byteorder)
    data[16:20] = len(pages).to_bytes(4, sys.byteorder)
    for frame, page in enumerate(pages, start=1):
        if frame <= 4062:
            at = 136 + 4 * (frame - 1)
        else:
            segment, index = divmod(frame - 4063, 4096)
            at = 32768 * (segment + 1) + 4 * index
        data[at : at + 4] = page.to_bytes(4, sys.byteorder)
    path.write_bytes(bytes(data))
    return os.open(path, os.O_RDONLY)


def test_hot_chain_counts_the_frames_of_the_latest_pages_in_the_newest_hash_segment(tmp_path: Path) -> None:
    # 1,000 frames alternating two pages: a new frame of either walks past ~500 of its own.
    shm = _fake_shm(tmp_path / "a-shm", [14, 15] * 500)
    try:
        assert sqlite_wal.hot_chain(shm, 1000) == 500
    finally:
        os.close(shm)
    # The first segment (4,062 frames) all one page, then 938 frames of three pages in turn: only the
    # second segment's frames are walked (its own hash table).
    shm = _fake_shm(tmp_path / "b-shm", [14] * 4062 + [14, 15, 16] * 312 + [14, 15])
    try:
        assert sqlite_wal.hot_chain(shm, 5000) == 312
    finally:
        os.close(shm)
    # 3,000 frames of two pages in turn: counted in the latest COUNTED_FRAMES, scaled to the segment's frames.
    shm = _fake_shm(tmp_path / "d-shm", [14, 15] * 1500)
    try:
        assert sqlite_wal.COUNTED_FRAMES < 3000
        assert sqlite_wal.hot_chain(shm, 3000) == 1500
    finally:
        os.close(shm)
    # New pages, each written a few times: short walks.
    shm = _fake_shm(tmp_path / "c-shm", [page for page in range(100, 400) for _ in range(3)])
    try:
        assert sqlite_wal.hot_chain(shm, 900) == 3
    finally:
        os.close(shm)


def test_at_full_durability_the_wal_starts_over_at_its_own_smaller_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scaled down: LIMIT 256 KiB, LIMIT_FULL 64 KiB. A "full" store starts its WAL over past the smaller one,
    # a "normal" store on the same writes lets it grow to the larger one.
    monkeypatch.setattr(sqlite_wal, "LIMIT", 4 * LIMIT)
    monkeypatch.setattr(sqlite_wal, "LIMIT_FULL", LIMIT)
    most = {}
    for durability in ("full", "normal"):
        store = durastate.open(tmp_path / f"{durability}.db", durability=durability)
        try:
            most[durability] = _put_many(store, 600)
            frame = _pragma(store, "page_size") + 24
            assert store.kv.get(b"s", b"n", b"k599") == VALUE
        finally:
            store.close()
    slack = (sqlite_wal.CHECK_EVERY + 1) * 3 * frame
    assert LIMIT < most["full"] <= LIMIT + slack
    assert 4 * LIMIT < most["normal"] <= 4 * LIMIT + slack


def test_the_full_limit_never_lets_a_wal_past_the_general_one(tmp_path: Path, small_limit: int) -> None:
    # A LIMIT set below LIMIT_FULL (these tests' 64 KiB) bounds a "full" store's WAL as well.
    assert small_limit < sqlite_wal.LIMIT_FULL
    store = durastate.open(tmp_path / "full.db", durability="full")
    try:
        most = _put_many(store, 300)
        frame = _pragma(store, "page_size") + 24
    finally:
        store.close()
    assert small_limit < most <= small_limit + (sqlite_wal.CHECK_EVERY + 1) * 3 * frame


def test_sqlites_own_checkpoints_are_set_on_every_connection_of_the_store(tmp_path: Path) -> None:
    # pi-durable's wal_auto_checkpoint_pages: on the connection a write transaction commits on (the shared
    # writer's) as on the threads' own, the idle spares and those opened later.
    def pages(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    with durastate.open(tmp_path / "auto.db") as store:
        engine = store.engine
        assert isinstance(engine, SqliteEngine)
        store.kv.put(b"s", b"n", b"k", b"v")  # the shared writer connection opened
        assert store.kv.get(b"s", b"n", b"k") == b"v"  # this thread's own
        spare: list[sqlite3.Connection] = []
        thread = threading.Thread(target=lambda: (store.kv.get(b"s", b"n", b"k"), spare.append(engine._tls.state.conn)))
        thread.start()
        thread.join(timeout=30)
        connections = [engine._connections.shared.conn, engine._tls.state.conn, spare[0]]
        assert all(conn is not None and pages(conn) == 0 for conn in connections)  # off: the engine bounds the WAL
        for wrong in (-1, True, 2.5, "7"):
            with pytest.raises(durastate.InvalidRequest, match="pages must be an int >= 0"):
                store.engine.tools.set_wal_autocheckpoint(wrong)  # type: ignore[attr-defined]
        assert all(pages(conn) == 0 for conn in connections if conn is not None)  # refused: nothing changed
        store.engine.tools.set_wal_autocheckpoint(7)  # type: ignore[attr-defined]
        assert all(pages(conn) == 7 for conn in connections if conn is not None)
        later = engine._new_connection()
        try:
            assert pages(later) == 7  # and on those opened later
        finally:
            later.close()
        with store.transaction():
            store.kv.put(b"s", b"n", b"k", b"w")
            assert engine.one(engine.sql(READ("PRAGMA wal_autocheckpoint"))) == (7,)  # where it commits
