"""The embedded engine: one SQLite file (or a private in-memory database).

Connections: one per thread, opened lazily, in autocommit mode
(``isolation_level=None``): a single statement commits on its own, and
``transaction()`` issues ``BEGIN IMMEDIATE`` so a multi-statement write takes
the write lock up front instead of failing to upgrade a read lock halfway
(the classic SQLITE_BUSY-on-upgrade deadlock). Nested ``transaction()``
blocks on the same thread become savepoints. A transaction rolls back on
*any* exception, ``BaseException`` included, and commits only when the block
finished normally: never in a ``finally``. A file store's single write
statements outside a transaction share one more connection instead, under
the writer gate (``sqlite_connections.SharedWriter``).

Durability (``durability=``):

* ``"normal"`` (default): WAL with ``synchronous=NORMAL``. A commit is safe
  against a process crash the moment the call returns; a power loss or OS
  crash can lose the commits made since the last WAL checkpoint's fsync
  (the database itself never corrupts): up to ``sqlite_wal.LIMIT`` (16 MiB)
  of WAL, since the engine checkpoints itself (``sqlite_wal``).
* ``"full"``: ``synchronous=FULL``: every commit fsyncs the WAL before the
  call returns; nothing acknowledged is lost even on power loss. The WAL
  starts over past ``sqlite_wal.LIMIT_FULL`` (4 MiB): a young WAL's
  growth costs each of those fsyncs a filesystem journal commit.

Fork safety: after ``os.fork()`` the child must not touch connections opened
by the parent (SQLite forbids it). A fork hook gives every engine a fresh
set of per-thread connections in the child and keeps the inherited ones
referenced, unclosed, so their finalisers never run against the parent's
locks.

In-memory databases (``memory:``) use SQLite's ``memdb`` VFS under a unique
name: every thread of this Store sees the same database, other Stores and
processes never do, and it disappears with the Store.

Closing (``close()``) never closes a connection under a statement another
thread is running on it: each thread holds its connection's guard for every
use of it, and ``close()`` waits for it (bounded, ``CLOSE_WAIT``).

Waiting for the write lock (``busy_timeout``): a lock is seen at once,
then waited for by SQLite's own handler (a writer still locked out after
``sqlite_busy.FIRST_WAIT_MS`` in short rounds of it), never on a thread
running an event loop (``sqlite_busy``).

Beside this module: ``sqlite_transaction`` (the transaction primitives,
the writer gate, the lock wait, the per-thread state; ``SqliteEngine``
mixes it in), ``sqlite_writes`` (a write outside a transaction on the
shared writer connection; mixed in too), ``sqlite_busy`` (the lock wait's
pieces), ``sqlite_connections`` (each thread's connection, the spares,
the writer gate), ``sqlite_wal`` (bounding the WAL: the engine's own
checkpoints), ``sqlite_fork`` (the fork gate), ``sqlite_notify`` (change
notification: in-process wake-ups, other processes polled),
``sqlite_space`` (``reclaim_space``), ``sqlite_dialect`` (tokens, the
catalog query, plan reading, ``bindable``) and ``sqlite_errors`` (result
codes to durastate's errors, ``LockBusy``); their public names are
re-exported here.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, cast

from .._validate import as_busy_timeout, as_durability
from ..errors import ConfigurationError, DurastateError, InvalidRequest, StoreClosed, StoreCorrupt, StoreUnavailable
from .base import SQL, Clock, Kind, Params, PerThread, Plan, Row
from .capabilities import Capabilities
from .loop import running_loop
from .schema import READ_VERSIONS
from .space import SpaceReport
from .sqlite_busy import Backoff, all_rows_again, one_row_again, run_to_end_again
from .sqlite_connections import SPARE_CONNECTIONS as SPARE_CONNECTIONS
from .sqlite_connections import Connections
from .sqlite_dialect import CATALOG, bind_blob, plan_of
from .sqlite_dialect import SQLITE_DIALECT as SQLITE_DIALECT
from .sqlite_dialect import bindable as bindable
from .sqlite_errors import CORRUPT_HINT, damaged_header, damaged_pages, is_busy
from .sqlite_errors import LockBusy as LockBusy
from .sqlite_errors import translate_sqlite_error as translate_sqlite_error
from .sqlite_notify import ChangeNotifications
from .sqlite_space import AUTO_VACUUM_INCREMENTAL, reclaim
from .sqlite_tools import SqliteTools
from .sqlite_transaction import ENGINES, NO_LOCK_WAIT, RefusingCursor, ThreadState
from .sqlite_transaction import FORK_GATE as _FORK_GATE
from .sqlite_wal import AUTOCHECKPOINT_OFF, ShmFile, WalBound
from .sqlite_writes import ALL_ROWS, ONE_ROW, REFUSED, ROW_COUNT, SharedWrites
from .watch import LocalChannels

# Seconds close() waits, in all, for statements other threads are running
# (milliseconds, normally). One that is still running after it (waiting for
# a lock another process holds) keeps its connection: its thread closes it
# at its next call, which is refused, or when its transaction ends.
CLOSE_WAIT = 5.0

# Statements that take SQLite's write lock outside a transaction: through the writer gate.
_WRITES = (Kind.WRITE, Kind.WRITE_ROWS)

# Connections inherited across fork: kept referenced forever, never closed.
_FORK_ORPHANS: list[Any] = []


def _after_fork_in_child() -> None:
    _FORK_GATE.after_fork_in_child()
    for engine in list(ENGINES):
        if isinstance(engine, SqliteEngine):
            engine._forget_parent_connections()


os.register_at_fork(
    before=_FORK_GATE.before_fork,
    after_in_parent=_FORK_GATE.after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


# What a SQLite file engine offers (``memory:`` differs, see SqliteEngine).
# Triggers: SQLite runs them, but has no server to announce a write to
# other processes, so ``Migration(announce=...)`` installs none.
CAPABILITIES = Capabilities(
    returning=True,
    upsert=True,
    transactional_ddl=True,
    triggers=False,
    listen_notify=False,
    advisory_locks=False,  # lock(name) is the database's one write lock
    reads_during_writes=True,  # WAL
    in_memory=False,
    local=True,
    inline_async_calls=True,
    inline_async_reads=True,
    write_attempts=False,
    dead_index_entries=False,  # a B-tree delete removes the entry: no MVCC row versions
)
# memory: has no WAL: readers wait for an open write transaction, and its
# rollback journal can refuse a COMMIT after changes were made, so calls
# never run inline (see no_wait_changes).
MEMORY_CAPABILITIES = CAPABILITIES.replace(
    in_memory=True, reads_during_writes=False, inline_async_calls=False, inline_async_reads=False
)


def create_private_file(path: Path) -> None:
    """Create ``path`` (and its folder) readable by the owner only, if absent."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return  # another process created it first: fine
    os.close(fd)


class SqliteEngine(ChangeNotifications, SharedWrites):
    """SQLite behind the ``Engine`` contract (see the module docstring)."""

    dialect = SQLITE_DIALECT
    no_limit = SQLITE_DIALECT.no_limit
    _tls: PerThread[ThreadState]

    def blob_binding(self) -> Callable[[bytes], object]:
        """``Engine.blob_binding``: a ``bytearray`` copy, which sqlite3 binds without its adapter probe
        (``bindable``); the shared write path binds an ``engine_blobs`` statement's parameters as they come."""
        return bind_blob

    def __init__(
        self,
        path: str | None,
        *,
        prefix: str = "ds_",
        durability: str = "normal",
        busy_timeout: float = 30.0,
        clock: Clock | None = None,
        read_only: bool = False,
    ) -> None:
        super().__init__(prefix=prefix, clock=clock, read_only=read_only)
        durability = as_durability(durability)
        self._busy_timeout = as_busy_timeout(busy_timeout)
        self._synchronous = "FULL" if durability == "full" else "NORMAL"
        self._anchor: sqlite3.Connection | None = None
        if path is None:
            if read_only:
                raise InvalidRequest("read_only=True needs a file: a new memory: store would be empty forever")
            # Private in-memory database, shared by this engine's threads.
            self.path = f"file:/durastate-{uuid.uuid4().hex}?vfs=memdb"
            self.url = "memory:"
            self._uri = True
            self.is_memory = True
            self.file: Path | None = None  # the store's file (None in memory)
        else:
            file_path = Path(path).expanduser().absolute()
            self.file = file_path
            self.url = f"sqlite://{file_path}"  # sqlite:///abs/path.db
            try:
                # A name no file can have fails here, before anything is created:
                # a lone surrogate (fsencode), NUL, a component too long (stat).
                os.fsencode(file_path)
                if "\x00" in str(file_path):
                    raise ValueError("NUL in the path")
                is_dir = file_path.is_dir()
            except (OSError, ValueError) as exc:
                raise ConfigurationError(f"{self.url!r}: not a usable file name: {exc}") from None
            if is_dir:
                raise ConfigurationError(f"{self.url}: is a folder, not a store file (name a file in it)")
            if read_only:
                if not file_path.is_file():
                    raise ConfigurationError(f"{self.url}: no store file there to open read-only")
                damage = damaged_header(file_path)
                if damage is None and not os.path.exists(f"{file_path}-wal"):
                    damage = damaged_pages(file_path, self.sql(READ_VERSIONS))
                if damage is not None:  # refused before SQLite could create -wal and -shm files beside it
                    raise StoreCorrupt(f"opening {self.url}: {damage}{CORRUPT_HINT}")
                # mode=ro: SQLite itself refuses every write on these connections.
                self.path = f"{file_path.as_uri()}?mode=ro"
                if not os.access(file_path.parent, os.W_OK) and not os.path.exists(f"{file_path}-wal"):
                    # A WAL file is read through a -shm file SQLite must be able
                    # to create; in a folder this process may not write, with
                    # no WAL left (the last writer closed cleanly), SQLite
                    # reads the file as it is: immutable, no locks, no -shm.
                    self.path += "&immutable=1"
                self._uri = True
            else:
                try:
                    create_private_file(file_path)
                except OSError as exc:
                    raise ConfigurationError(
                        f"{self.url}: cannot create the store file or its folder: {exc.strerror or exc}"
                    ) from None
                self.path = str(file_path)
                self._uri = False
            self.is_memory = False
        self.capabilities = MEMORY_CAPABILITIES if self.is_memory else CAPABILITIES
        if durability == "full":
            # Each commit waits for an fsync (milliseconds): never on an event
            # loop's thread, where it would stall every coroutine (durastate._aio).
            # Reads commit nothing: they still run there (inline_async_reads).
            self.capabilities = self.capabilities.replace(inline_async_calls=False)
        self._tls = PerThread(ThreadState)
        self._lock = threading.Lock()
        self._connections = Connections()
        self._writer_lock = self._connections.writers.lock
        self._writer_turns = self._connections.writers.turns
        self._closed = False
        # The WAL this engine's writes bound (sqlite_wal): looked at after the first write.
        self._wal_left = -1 if self.is_memory or read_only else 1
        # Single writes share one connection (sqlite_connections.SharedWriter): a file's, written to.
        self._shares_writes = not self.is_memory and not read_only
        self._shm = ShmFile()
        self._wal_bound = WalBound(full=durability == "full")
        # SQLite's own automatic checkpoint, set on every connection (set_wal_autocheckpoint): off by default.
        self._autocheckpoint = AUTOCHECKPOINT_OFF
        self.close_wait = CLOSE_WAIT
        self._channels = LocalChannels()
        ENGINES.add(self)
        if self.is_memory:
            # The memdb database lives as long as one connection to it does.
            self._anchor = self._new_connection()
        elif not read_only:  # a read-only store reads whatever journal mode the file has
            self._switch_to_wal()

    def _statement_cache_key(self) -> Hashable:
        """Shared compiled statements: by class and prefix (this engine attaches nothing to them)."""
        return (type(self), self.prefix)

    # -- connections ---------------------------------------------------------

    def _new_connection(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                # A file's connections refuse a held lock at once: the engine
                # waits for it itself (sqlite_busy). A memory: store's
                # rollback journal can refuse a COMMIT after changes were
                # made, which only SQLite's own handler waits out.
                timeout=self._busy_timeout if self.is_memory else 0,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=512,
                uri=self._uri,
            )
            self._at_open(lambda: conn.execute(f"PRAGMA synchronous={self._synchronous}"))
            if self._wal_left >= 0:  # the engine bounds the WAL itself (sqlite_wal), SQLite's too if asked
                autocheckpoint = self._autocheckpoint
                self._at_open(lambda: conn.execute(autocheckpoint))
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc, f"opening {self.url}") from None
        return conn

    def set_wal_autocheckpoint(self, pages: int) -> None:
        """SQLite's own automatic checkpoint every ``pages`` WAL pages (0: off, the default) on every connection.

        Besides the engine's own WAL bound (``sqlite_wal``), which stays. Set
        on the connections open now (each under its guard: a statement
        running on one finishes first) and on every connection opened
        later: threads' own, the spares and the shared writer connection,
        where single writes and write transactions commit (pi-durable's
        ``wal_auto_checkpoint_pages``). Nothing for a ``memory:`` or
        read-only store (no WAL of its own to bound).
        """
        if type(pages) is not int or pages < 0:
            raise InvalidRequest(f"pages must be an int >= 0, got {pages!r}")
        if self._wal_left < 0:
            return
        statement = f"PRAGMA wal_autocheckpoint = {pages}"
        with self._lock:
            if self._closed:
                raise StoreClosed(f"{self.url}: store is closed")
            self._autocheckpoint = statement
            connections = self._connections
            guarded = [(conn, guard) for _thread, conn, guard, _state in connections.by_thread.values()]
            if connections.shared.conn is not None:
                guarded.append((connections.shared.conn, connections.shared.guard))
            for conn, _waits in connections.spare:  # idle: a spare is only taken under the lock (adopt)
                conn.execute(statement)
        for conn, guard in guarded:
            with guard:
                try:
                    conn.execute(statement)
                except sqlite3.ProgrammingError:
                    pass  # closed meanwhile (its thread released it, or close())

    def _open_shm(self) -> int | None:
        """The ``-shm`` file, open for reading (``sqlite_wal.wal_bytes``); ``None`` while it cannot be.

        Kept open between looks (``sqlite_wal.ShmFile``: closed with the
        engine, or when an engine dropped unclosed is collected), and opened
        again once unlinked: the last connection to the file, of any
        process, deletes it on closing (and the WAL), and the next one
        creates a new one. Read from the old one, the WAL would look as it
        was then.
        """
        held = self._shm
        shm = held.fd
        if shm is not None:
            try:
                if os.fstat(shm).st_nlink:
                    return shm
            except OSError:
                pass  # close() closed it this moment
        with self._lock:
            if held.fd is not None and held.fd != shm:
                return held.fd  # another thread opened the new one meanwhile
            held.close()
            if self._closed:
                return None
            try:
                held.fd = os.open(f"{self.file}-shm", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            return held.fd

    def _at_open(self, statement: Callable[[], object]) -> object:
        """Run an opening statement, tried again while SQLite refuses it for a lock (``sqlite_busy``).

        Another process cold-opening the file holds it exclusively while it
        switches it to WAL; even reading the schema waits for that.
        """
        backoff = Backoff(self._busy_timeout)
        while True:
            try:
                return statement()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or not backoff.wait():
                    raise

    def _switch_to_wal(self) -> None:
        """Put the file in WAL mode, retrying while other processes cold-open it.

        The mode switch needs an exclusive lock, so several processes
        opening a fresh file at once see SQLITE_BUSY (SQLite does not run a
        busy handler for it anyway): tried again after pauses
        (``sqlite_busy``), up to the busy timeout.
        """
        conn = self._thread_connection()

        def switch() -> object:
            # Before the first table or never (sqlite_space). Only on an empty
            # file: on one that has pages it changes nothing, yet writes and
            # syncs the header (15 ms of every open; bench/open.py).
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                conn.execute(AUTO_VACUUM_INCREMENTAL)
            return conn.execute("PRAGMA journal_mode=WAL").fetchone()

        try:
            mode = self._at_open(switch)
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc, f"enabling WAL on {self.url}") from None
        if not isinstance(mode, tuple) or str(mode[0]).lower() != "wal":
            raise StoreUnavailable(f"{self.url}: could not enable WAL (journal_mode stayed {mode!r})")

    def _thread_connection(self) -> sqlite3.Connection:
        state = self._tls.state
        conn = state.conn
        if conn is not None:
            return conn
        if self._closed:
            raise StoreClosed(f"{self.url}: store is closed")
        with self._lock:
            spare = self._connections.adopt()  # an ended thread's, if any (sqlite_connections)
        if spare is None:
            conn = self._new_connection()
        else:
            conn, waits = spare
            if waits:  # its thread had it wait for locks (ThreadState.lock_wait): this one starts refusing
                conn.execute(NO_LOCK_WAIT)
        guard = threading.RLock()
        with self._lock:
            if self._closed:
                conn.close()
                raise StoreClosed(f"{self.url}: store is closed")
            self._connections.add(conn, guard, state)
        state.cursor = None  # a cursor of an earlier connection is no use
        state.lock_wait = False
        state.guard = guard
        state.conn = conn
        return conn

    def _thread_cursor(self) -> sqlite3.Cursor:
        state = self._tls.state
        cursor = state.cursor
        if cursor is None:
            # In a write transaction on the shared writer connection (_begin_shared) ``state.conn`` is that one:
            # the new cursor is its cursor too (the one before was dropped: _drop_cursor).
            cursor = self._thread_connection().cursor()
            state.cursor = cursor
            if state.own is not None:
                self._connections.shared.cursor = cursor
        return cursor

    def _drop_cursor(self, cursor: sqlite3.Cursor) -> None:
        """Close ``cursor``, resetting a statement an interruption left active.

        A KeyboardInterrupt (or any non-driver exception) landing between a
        statement's execution and the end of its rows would otherwise leave
        it active on the shared cursor, holding its snapshot or write lock
        until this thread's next call.
        """
        state = self._tls.state
        if state.cursor is cursor:
            state.cursor = None
        shared = self._connections.shared
        if shared.cursor is cursor:  # a write transaction's on the shared writer connection (_begin_shared)
            shared.cursor = None
        if not isinstance(cursor, RefusingCursor):
            try:
                cursor.close()
            except sqlite3.Error:
                pass

    def _forget_parent_connections(self) -> None:
        _FORK_ORPHANS.append((self._tls, self._connections, self._anchor))
        self._tls = PerThread(ThreadState)
        self._lock = threading.Lock()
        self._connections = Connections()
        self._writer_lock = self._connections.writers.lock
        self._writer_turns = self._connections.writers.turns
        self._channels = LocalChannels()
        if self.is_memory and not self._closed:
            self._anchor = self._new_connection()

    # -- statements ------------------------------------------------------------

    # The thread's connection or cursor is read inline (``... or
    # self._thread_...()``) rather than through a helper: these four methods
    # are every facet call's path to the driver. Each runs its statement
    # holding the thread's guard (see ThreadState), and refuses it once the
    # store is closed: close() may have left this thread's connection open
    # (a statement still running when its wait ran out), never usable.

    def one(self, sql: str, params: Params = ()) -> Row | None:
        state = self._tls.state
        if state.lock_wait and running_loop() is not None:
            self._loop_started()
        gate = None
        if not (state.depth or state.writing) and getattr(sql, "kind", None) in _WRITES:
            # A write outside a transaction (a queue's claim): the writer
            # gate's lock taken here when free, as in execute (one frame
            # for the call, not a second one() inside the gate), else
            # _gated waits for it.
            gate = self._writer_lock
            if not gate.acquire(False):
                return self._gated(self.one, sql, params)
            state.writing = True
        try:
            if state.writing and not state.depth and not state.lock_wait and self._shares_writes:
                # A write outside a transaction, holding the gate: on the shared writer connection, as
                # execute's (a queue's claim between its push and its ack: one connection, one page cache).
                # Annotated, not cast(): typing.cast is a Python call, a frame on every shared write.
                shared_row: Row | None = self._write_shared(state, sql, params, ONE_ROW)
                if shared_row is not REFUSED:
                    return shared_row
            cursor = state.cursor or self._thread_cursor()
            guard = state.guard
            guard.acquire()
            try:
                if self._closed:
                    raise self._refuse_closed()
                try:
                    # An engine_blobs statement's blobs come as bind_blob made them: bound as they come (as on
                    # the shared writer connection, sqlite_writes).
                    if not getattr(sql, "engine_blobs", False):
                        params = bindable(params)
                    row: Row | None = cursor.execute(sql, params).fetchone()
                    if row is not None and cursor.fetchone() is not None:
                        # More than one row: the statement (say, a multi-row
                        # RETURNING write) is still active. Closing the cursor ends
                        # it now. A one-row result is finished by the second
                        # fetchone(), which costs nothing then.
                        self._drop_cursor(cursor)
                    return row
                except sqlite3.Error as exc:
                    return cast(Row | None, self._after_busy(exc, partial(one_row_again, cursor, sql, params)))
                except BaseException:
                    self._drop_cursor(cursor)
                    raise
            finally:
                guard.release()
        finally:
            if gate is not None:
                self._leave_writers(state)

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        state = self._tls.state
        if state.lock_wait and running_loop() is not None:
            self._loop_started()
        if not state.depth and not state.writing and getattr(sql, "kind", None) in _WRITES:
            return self._gated(self.all, sql, params)
        if state.writing and not state.depth and not state.lock_wait and self._shares_writes:
            shared_rows: list[Row] = self._write_shared(state, sql, params, ALL_ROWS)  # as one()'s
            if shared_rows is not REFUSED:
                return shared_rows
        cursor = state.cursor or self._thread_cursor()
        guard = state.guard
        guard.acquire()
        try:
            if self._closed:
                raise self._refuse_closed()
            try:
                params = bindable(params)
                return cursor.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                return cast(list[Row], self._after_busy(exc, partial(all_rows_again, cursor, sql, params)))
            except BaseException:
                self._drop_cursor(cursor)
                raise
        finally:
            guard.release()

    def execute(self, sql: str, params: Params = ()) -> int:
        state = self._tls.state
        if state.lock_wait and running_loop() is not None:
            self._loop_started()
        gate = None
        if not (state.depth or state.writing) and getattr(sql, "kind", None) in _WRITES:
            # A write outside a transaction holds the writer gate for its one
            # statement: taken here when free (the hot path of single writes:
            # the gate's lock itself, no holder recorded, since a thread
            # cannot end inside this call), else waited for in _gated. One
            # frame for both cases: a call level is a measurable share of a
            # single write's CPU (bench/put_cpu.py).
            gate = self._writer_lock
            if not gate.acquire(False):
                return self._gated(self.execute, sql, params)
            state.writing = True
        try:
            if state.writing and not state.depth and not state.lock_wait and self._shares_writes:
                # A write outside a transaction, holding the gate (here or in _gated): on the shared
                # writer connection, whose page cache no other thread's write drops (SharedWriter).
                count: int = self._write_shared(state, sql, params, ROW_COUNT)  # annotated: see one()
                if count is not REFUSED:
                    return count
            cursor = state.cursor or self._thread_cursor()
            with state.guard:
                if self._closed:
                    raise self._refuse_closed()
                try:
                    if not getattr(sql, "engine_blobs", False):  # see one()
                        params = bindable(params)
                    cursor.execute(sql, params)
                    if cursor.description is not None:
                        # It returns rows (RETURNING, SELECT): run it to completion,
                        # or it would stay active on the shared cursor.
                        cursor.fetchall()
                    return cursor.rowcount
                except sqlite3.Error as exc:
                    # partial, not a lambda: a closure would make cells of the
                    # arguments on every call, refused or not.
                    return cast(int, self._after_busy(exc, partial(run_to_end_again, cursor, sql, params)))
                except BaseException:
                    self._drop_cursor(cursor)
                    raise
        finally:
            if gate is not None:
                self._wal_left -= 1
                if not self._wal_left:
                    self._bound_wal(state)
                state.writing = False
                # WriterGate.leave's hand-over, inline (a call a single write): a thread queued for its turn
                # gets the lock straight from this one, never left on its baton with the lock free.
                if self._writer_turns:
                    self._connections.writers.leave()
                else:
                    gate.release()
                    if self._writer_turns:  # queued between the look and the release
                        self._connections.writers.hand_over()

    # ``Engine.send`` is ``execute`` here (nothing to defer): bound to it, not a method calling it,
    # one Python frame less on every single write (its count is returned and ignored).
    send = execute  # type: ignore[assignment]

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        state = self._tls.state
        if state.lock_wait and running_loop() is not None:
            self._loop_started()
        if not state.depth and not state.writing and getattr(sql, "kind", None) in _WRITES:
            return self._gated(self.executemany, sql, rows)
        outside = state.depth == 0
        if outside and not isinstance(rows, (list, tuple)):
            # Outside a transaction each row commits on its own, and a
            # refused try may have consumed rows of an iterator: a list can
            # be run again (_after_busy).
            rows = list(rows)
        cursor = state.cursor or self._thread_cursor()
        guard = state.guard
        guard.acquire()
        try:
            if self._closed:
                raise self._refuse_closed()
            changes = cursor.connection.total_changes if outside else -1
            try:
                cursor.executemany(sql, rows)
            except sqlite3.Error as exc:
                if changes != cursor.connection.total_changes:
                    raise self._failed(exc) from None  # rows committed before the refusal: not again
                self._after_busy(exc, partial(cursor.executemany, sql, rows))
            except BaseException:
                self._drop_cursor(cursor)
                raise
        finally:
            guard.release()

    def _close_own_connection(self) -> None:
        """Close the calling thread's connection and forget it (the thread holds its guard)."""
        state = self._tls.state
        conn = state.conn
        if conn is None:
            return
        state.conn = None
        state.cursor = None
        state.lock_wait = False
        conn.close()  # a no-op when close() closed it already

    def _refuse_closed(self) -> DurastateError:
        """A call after ``close()``: ``StoreClosed``, closing the thread's connection if close() could not."""
        self._close_own_connection()
        return self._doom(StoreClosed(f"{self.url}: store is closed"))

    @property
    def tools(self) -> SqliteTools:
        return SqliteTools(self)

    def catalog(self) -> list[tuple[str, ...]]:
        """This prefix's schema objects as sorted rows (see ``Engine.catalog``)."""
        rows = self.all(self.sql(CATALOG), (self.prefix.replace("_", "\\_") + "%",))
        return sorted(tuple(str(v) for v in row) for row in rows)

    def integrity_errors(self) -> list[str]:
        """``PRAGMA integrity_check``'s findings (``[]`` when the file is sound)."""
        rows = self.all(SQL("PRAGMA integrity_check", Kind.READ))
        return [str(row[0]) for row in rows if row[0] != "ok"]

    def explain(self, sql: str, params: Params = ()) -> Plan:
        rows = self.all(SQL("EXPLAIN QUERY PLAN " + sql, Kind.READ), params)
        return plan_of([str(row[3]) for row in rows])

    def release_connection(self) -> None:
        """Close the calling thread's connection; its next call opens a new one.

        For long-lived threads that go idle. Refused inside a transaction.
        """
        if self._tls.state.depth > 0:
            raise InvalidRequest("release_connection() inside a transaction would abandon it")
        state = self._tls.state
        if state.conn is None:
            return
        with self._lock:
            self._connections.forget_current()
        with state.guard:  # close() may be closing it this moment
            self._close_own_connection()

    def no_wait_changes(self) -> int:
        """The rows this thread has modified so far: its connection's ``total_changes``, and its writes on the
        shared writer connection since its first call of this (only ever compared with an earlier count).

        For async front ends calling inline on an event loop's thread
        (``durastate._aio``): a call there that meets a held lock is
        refused at once with ``LockBusy`` (``sqlite_busy``), and if this
        count is unchanged it changed nothing, so it can be run again on
        another thread. Not for ``memory:`` stores (their rollback journal
        can refuse a ``COMMIT`` after changes were made): ``NotSupported``.
        """
        if not self.capabilities.inline_async_reads:
            super().no_wait_changes()  # NotSupported (memory:, see MEMORY_CAPABILITIES)
        state = self._tls.state
        # From now on this thread's writes on the shared writer connection are counted (_write_shared): the
        # count is only ever compared with an earlier one of the same thread, so a thread that never asks
        # (no async call inline on it) pays nothing for it.
        state.counts_changes = True
        conn = state.conn or self._thread_connection()
        # Without the guard: reading the count is no statement, and on a
        # connection close() closed this moment it raises ProgrammingError
        # (the driver marks the connection closed before it releases the
        # GIL to close it), never touching freed memory.
        try:
            return conn.total_changes + state.shared_changes
        except sqlite3.ProgrammingError:
            raise self._refuse_closed() from None

    # -- space -----------------------------------------------------------------

    def reclaim_space(self, *, full: bool = False) -> SpaceReport:
        """Give the pages deletes freed back to the filesystem; truncate the WAL (``sqlite_space``).

        ``full``: a whole-file ``VACUUM`` (holds the write lock throughout).
        Nothing to do for ``memory:`` and read-only stores. Refused inside
        a transaction.
        """
        if self._tls.state.depth > 0:
            raise InvalidRequest("reclaim_space() inside a transaction would hold its every step in it")
        if self.is_memory or self.read_only:
            return SpaceReport()
        return reclaim(
            str(Path(self.path)), lambda pragma: (self.one(SQL(pragma, Kind.READ)) or (0,))[0], self._script, full=full
        )

    def _script(self, statement: str) -> None:
        """Run ``statement`` to its end (``executescript``: every step of it, not only the first)."""
        state = self._tls.state
        conn = self._thread_connection()
        with state.guard:
            if self._closed:
                raise self._refuse_closed()
            try:
                conn.executescript(statement)
            except sqlite3.Error as exc:
                raise self._failed(exc) from None

    # -- lifecycle -------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close every connection of this engine. Idempotent.

        Calls made afterwards, from any thread, raise ``StoreClosed``; an
        open transaction of another thread is doomed and rolls back
        (``base.Transaction``). A statement another thread is running when
        ``close()`` is called finishes first: ``close()`` waits for it, at
        most ``close_wait`` seconds in all (``CLOSE_WAIT``). A connection
        whose statement outlasts that stays open, refused, until its thread
        closes it: at that thread's next call (which raises ``StoreClosed``)
        or when its transaction ends.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = self._connections.take_all()
        deadline = time.monotonic() + self.close_wait
        for _thread, conn, guard in connections:
            if guard.acquire(timeout=max(0.0, deadline - time.monotonic())):
                try:
                    conn.close()
                finally:
                    guard.release()
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None
        with self._lock:
            self._shm.close()
        self._channels.close()  # wakes every watch, wait_for_change's too
