"""The SQLite engine's transactions, its writer gate, and waiting for the write lock.

Split from ``sqlite.py``, whose ``SqliteEngine`` mixes ``SqliteTransactions``
in; the connections and statements are the engine's (``_thread_cursor``,
``_refuse_closed``, ``_close_own_connection``, ``notify``).

* The transaction primitives (the state machine is ``base.Transaction``):
  ``BEGIN IMMEDIATE`` for a write transaction, so it takes the write lock
  up front; savepoints for nested blocks; a doomed transaction's cursor is
  a ``RefusingCursor``, so SQLite refuses its statements as PostgreSQL
  would.
* The writer gate (``sqlite_connections.WriterGate``): a write transaction
  holds it from its ``BEGIN`` to its end (``_enter_writers``,
  ``_tx_end``); a write statement outside one holds it for that statement
  (``_gated``; the engine's ``execute`` takes it inline).
* Where a write transaction runs: on a file store, on the shared writer
  connection the single writes use (``_begin_shared``), the gate making
  its holder that connection's only user; on the thread's own connection
  when another process holds the lock (that one waits for it) and on a
  thread whose connection waits for locks (``ThreadState.lock_wait``).
  Read transactions always run on the thread's own connection.
* Waiting for the lock (``sqlite_busy``): ``_after_busy`` for a statement
  SQLite refused with BUSY, the loop in ``_tx_begin`` for a ``BEGIN``.
* The fork gate (``sqlite_fork``): every outermost transaction enters it
  at its ``BEGIN`` and leaves it at its end; ``sqlite.py`` registers its
  fork hooks with ``ENGINES``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from functools import partial
from threading import current_thread
from types import TracebackType
from typing import Any, TypeVar, cast

from ..errors import DurastateError
from . import sqlite_busy, sqlite_wal
from .base import EngineBase, PerThread, Transaction, TransactionFields, aborted_error
from .loop import lock_wait_here, running_loop
from .sqlite_busy import Backoff, loop_thread_refusal
from .sqlite_connections import Connections, SharedWriter
from .sqlite_errors import LockBusy, is_busy, translate_sqlite_error
from .sqlite_fork import ForkGate

__all__ = [
    "BEGIN_WRITE",
    "COMMIT",
    "ENGINES",
    "FORK_GATE",
    "LOCK_WAIT",
    "NO_LOCK_WAIT",
    "Refused",
    "ROLLBACK",
    "RefusingCursor",
    "SqliteTransaction",
    "SqliteTransactions",
    "ThreadState",
]

# Transaction control, run on the thread's cached cursor (see _tx_begin).
_BEGIN_READ = "BEGIN"
BEGIN_WRITE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
_SQLITE_BUSY_SNAPSHOT = 517
# A connection's lock wait off (refused at once) and on (SQLite's handler waits; sqlite_busy).
NO_LOCK_WAIT = "PRAGMA busy_timeout = 0"
LOCK_WAIT = "PRAGMA busy_timeout = {ms}"


class ThreadState(TransactionFields):
    """One thread's state on a SQLite engine: ``TransactionFields`` plus its connection, cursor and guard."""

    conn: sqlite3.Connection | None = None
    # A cursor of ``conn`` reused by one()/all()/execute()/executemany():
    # saves creating one per statement (a measurable share of a point read
    # or write). Those methods always finish its statement (run it to
    # completion, or close the cursor), so it never holds a statement (or
    # an autocommit write's lock) open between calls. While the open
    # transaction is doomed it is a ``RefusingCursor`` instead (typed as
    # a cursor: the statement methods only ever call its execute methods).
    cursor: sqlite3.Cursor | None = None
    # Held by this thread for every use of ``conn`` (each statement, BEGIN,
    # COMMIT, ...) and by ``close()`` while it closes ``conn``: a connection
    # is never closed under a statement another thread is running on it
    # (that freed it under SQLite and crashed the process). Reentrant, so a
    # callback that runs inside a statement (a generator feeding
    # executemany) cannot deadlock its own thread. Set with ``conn``.
    guard: threading.RLock
    # Channels notify() was asked to wake inside the open transaction: woken
    # at its commit, dropped at its rollback.
    pending_notify: set[str] | None = None
    # This thread holds its engine's writer gate (sqlite_connections): for its
    # write transaction, or the one write statement it runs outside one.
    writing: bool = False
    # ``conn`` has the store's busy timeout set, so SQLite's handler waits for
    # a lock without refusing first: from the thread's first refusal off a
    # loop thread on, until a loop runs on it (sqlite_busy). Reset with ``conn``.
    lock_wait: bool = False
    # Rows this thread's writes changed on the engine's shared writer connection
    # (sqlite_connections.SharedWriter): ``no_wait_changes`` adds them to its own connection's.
    shared_changes: int = 0
    # ``shared_changes`` is kept: set by this thread's first ``no_wait_changes`` (before it, nothing compares them).
    counts_changes: bool = False
    # While this thread's write transaction runs on the shared writer connection (``_begin_shared``): its own
    # ``(conn, cursor, guard)``, which ``conn``, ``cursor`` and ``guard`` stand in for until ``_ended`` puts them
    # back; ``None`` otherwise.
    own: tuple[sqlite3.Connection | None, sqlite3.Cursor | None, threading.RLock] | None = None
    # The shared writer connection's ``total_changes`` at that ``BEGIN`` (kept when ``counts_changes``).
    shared_before: int = 0


class Refused(sqlite3.Error):
    """Raised by ``RefusingCursor``: the transaction is doomed."""

    def __init__(self, doomed: DurastateError) -> None:
        super().__init__(str(doomed))
        self.doomed = doomed


class RefusingCursor:
    """Stands in for the thread's cursor while its transaction is doomed.

    PostgreSQL refuses every statement of an aborted transaction; SQLite
    would run them. Swapping the cursor makes SQLite refuse them too at no
    cost to the statement path (which reads the cursor anyway).
    """

    __slots__ = ("doomed",)

    def __init__(self, doomed: DurastateError) -> None:
        self.doomed = doomed

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        raise Refused(self.doomed)

    executemany = execute


_T = TypeVar("_T")
# Engines alive in this process: the fork gate counts their open
# transactions, and sqlite.py's fork hook resets them in the child.
ENGINES: weakref.WeakSet[SqliteTransactions] = weakref.WeakSet()


def _own_transactions() -> int:
    """Outermost transactions the calling thread has open (a fork from inside them cannot wait for them)."""
    return sum(1 for engine in list(ENGINES) if engine._local.depth > 0)


FORK_GATE = ForkGate(_own_transactions)


class SqliteTransaction(Transaction):
    """``Transaction`` with the common case of a write transaction on SQLite inline.

    The common case: an outermost write block (depth 0) on a thread whose
    connection and cursor are open and do not wait for locks
    (``ThreadState.lock_wait``), the writer gate free; ended by a normal
    exit, not doomed. It runs the same steps as the general path (gate,
    ``BEGIN IMMEDIATE`` on the shared writer connection, or on the thread's
    own when another process holds the lock; ``COMMIT``, ``_ended``, the
    deferred notifications) without its calls through ``_tx_begin``/
    ``_enter_writers``/``WriterGate.enter`` (a short transaction's share: a
    leased dequeue's, bench/RESULTS.md "hueycpu"). Anything else (nesting,
    a read block, a held gate, an exception, a doomed or closed
    transaction) takes ``Transaction``'s own path, which the fast one hands
    over to before it has changed anything (on a store without a shared
    writer connection, a refused ``BEGIN`` has left the gate and the fork
    gate again).
    """

    __slots__ = ()
    # Annotated, not cast(): typing.cast is a Python call.
    _engine: SqliteTransactions
    _state: ThreadState

    def __enter__(self) -> None:
        engine = self._engine
        state = engine._tls.state
        cursor = state.cursor
        if state.depth or self._read or state.writing or state.lock_wait or cursor is None or engine._closed:
            return Transaction.__enter__(self)
        gate = engine._connections.writers
        if not gate.lock.acquire(False):
            # Waits for the gate (or refuses on a loop's thread); an object open on another thread holds the
            # gate, so its second entry is refused there (``_level``), never taken here.
            return Transaction.__enter__(self)
        gate.holder = current_thread()
        state.writing = True
        if engine._shares_writes:
            try:
                if not engine._begin_shared(state):
                    engine._begin_own(state, False)  # another process holds the lock: waited for there
            except BaseException:
                engine._leave_writers(state)
                raise
            self._state = state
            state.depth = self._level = 1
            return None
        FORK_GATE.enter()
        guard = state.guard
        try:
            guard.acquire()
            try:
                if engine._closed:
                    raise engine._refuse_closed()
                cursor.execute(BEGIN_WRITE)
            finally:
                guard.release()
        except sqlite3.Error:
            # Refused (the lock held by another process): nothing began; the general path waits for it.
            FORK_GATE.leave()
            engine._leave_writers(state)
            return Transaction.__enter__(self)
        except BaseException:
            FORK_GATE.leave()
            engine._leave_writers(state)
            raise
        self._state = state
        state.depth = self._level = 1
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        engine = self._engine
        if self._level != 1 or exc_type is not None:
            return Transaction.__exit__(self, exc_type, exc, tb)  # (``_level`` 0: not open, refused there)
        state = self._state
        if state.doomed is not None or state.depth != 1 or engine._closed or engine._tls.state is not state:
            # (Another thread's, or a block opened inside this one still open: refused there.)
            return Transaction.__exit__(self, exc_type, exc, tb)
        self._level = 0
        state.depth = 0
        engine._commit(state)
        return None


class SqliteTransactions(EngineBase):
    """Transaction primitives, the writer gate and the lock wait (see the module docstring)."""

    _tls: PerThread[ThreadState]

    _connections: Connections
    _busy_timeout: float
    _closed: bool
    # Single writes (and write transactions) share one connection: a file store's, written to (sqlite.py).
    _shares_writes: bool
    # Writes left before the next look at the WAL's size (sqlite_wal); negative
    # (never reaching 0) on stores without a WAL of their own to bound.
    _wal_left: int
    _shm: sqlite_wal.ShmFile  # the -shm file, open for reading (sqlite_wal.wal_bytes) once a look opened it
    _wal_bound: sqlite_wal.WalBound  # when the WAL is due a checkpoint (its state between looks)
    url: str
    is_memory: bool

    # The engine's own (SqliteEngine).
    def _thread_cursor(self) -> sqlite3.Cursor:
        raise NotImplementedError

    def _refuse_closed(self) -> DurastateError:
        raise NotImplementedError

    def _close_own_connection(self) -> None:
        raise NotImplementedError

    def _shared_cursor(self, shared: SharedWriter) -> sqlite3.Cursor:
        raise NotImplementedError

    def _open_shm(self) -> int | None:
        raise NotImplementedError

    # -- a failed statement dooms its transaction ------------------------------

    def _failed(self, exc: sqlite3.Error) -> DurastateError:
        """Translate ``exc``; inside a transaction, also doom it (see ``base.Transaction``)."""
        if isinstance(exc, Refused):
            return aborted_error(exc.doomed)
        return self._doom(translate_sqlite_error(exc, self.url))

    def _doom(self, error: DurastateError) -> DurastateError:
        state = self._tls.state
        if state.depth and state.doomed is None:
            state.doomed = error
            state.doomed_level = state.depth
            state.cursor = cast(sqlite3.Cursor, RefusingCursor(error))
        return error

    # -- transaction primitives (the state machine is base.Transaction) -------

    def _tx_begin(self, read: bool, lock: str | None) -> None:
        # ``lock`` (the migration lock) needs nothing more: BEGIN IMMEDIATE
        # takes the database's one write lock, which excludes every writer.
        # BEGIN, COMMIT, ROLLBACK and savepoints run on the thread's cached
        # cursor, as statements do: ``Connection.execute`` would create (and
        # register with the connection) a new cursor for each of them, a
        # measurable share of a short transaction. At depth 0 the cursor is
        # never a ``RefusingCursor`` (``_tx_end`` puts the real one back).
        # A BEGIN refused for the lock is tried again (sqlite_busy), outside
        # the thread's guard and the fork gate.
        state = self._tls.state
        if state.lock_wait and running_loop() is not None:
            self._loop_started()
        gated = not read and not state.writing
        if gated:  # left at the transaction's end (_tx_end)
            self._enter_writers(state)
        try:
            if gated and self._shares_writes and not state.lock_wait:
                if state.cursor is None:
                    self._thread_cursor()  # the thread's own connection open, to be put back at the end (_ended)
                if self._begin_shared(state):
                    return
            self._begin_own(state, read)
        except BaseException:
            if gated:
                self._leave_writers(state)
            raise

    def _begin_shared(self, state: ThreadState) -> bool:
        """``BEGIN IMMEDIATE`` on the shared writer connection, the writer gate held; True once begun.

        The thread's statements then run on that connection (its ``conn``,
        ``cursor`` and ``guard`` stand in for the thread's own, kept in
        ``ThreadState.own``) until ``_ended`` puts its own back. False when
        another process holds the write lock (the connection never waits
        for one, as for a single write): nothing began, and the caller
        begins on the thread's own connection, which waits (``_begin_own``).

        Why one connection for every write: SQLite drops a connection's
        page cache whenever the WAL changed under it, so a thread whose
        single writes ran on the shared connection and whose transactions
        on its own made each re-read from the file every page the other
        changed (huey's enqueue then leased dequeue: 12 page reads a
        cycle, none now; bench/RESULTS.md "sharedtx").
        """
        shared = self._connections.shared
        guard = shared.guard
        FORK_GATE.enter()
        try:
            guard.acquire()
            try:
                if self._closed:
                    raise self._refuse_closed()
                cursor = shared.cursor or self._shared_cursor(shared)
                cursor.execute(BEGIN_WRITE)
            finally:
                guard.release()
        except sqlite3.Error as exc:
            FORK_GATE.leave()
            if is_busy(exc):
                return False
            raise translate_sqlite_error(exc, f"{self.url}: begin") from None
        except BaseException:
            FORK_GATE.leave()
            raise
        state.own = (state.conn, state.cursor, state.guard)
        conn = cursor.connection
        state.conn, state.cursor, state.guard = conn, cursor, guard
        if state.counts_changes:
            state.shared_before = conn.total_changes
        return True

    def _off_shared(self, state: ThreadState, own: tuple[Any, Any, threading.RLock]) -> None:
        """The transaction ``_begin_shared`` began is over: the thread's own connection back, its changes counted."""
        if state.counts_changes and state.conn is not None:
            try:
                state.shared_changes += state.conn.total_changes - state.shared_before
            except sqlite3.ProgrammingError:
                pass  # closed by close(): the call is refused, never run again
        state.own = None
        state.conn, state.cursor, state.guard = own

    def _begin_own(self, state: ThreadState, read: bool) -> None:
        """``BEGIN`` (``read``) or ``BEGIN IMMEDIATE`` on the thread's own connection, waiting for the lock."""
        backoff: Backoff | None = None
        while True:
            cursor = state.cursor or self._thread_cursor()
            FORK_GATE.enter()
            try:
                with state.guard:
                    if self._closed:
                        raise self._refuse_closed()
                    cursor.execute(_BEGIN_READ if read else BEGIN_WRITE)
                return
            except sqlite3.Error as exc:
                FORK_GATE.leave()
                if not self._waits_for(exc):
                    raise translate_sqlite_error(exc, f"{self.url}: begin") from None
                wait = self._lock_wait()
                if sqlite_busy.WAIT_IN_SQLITE:
                    FORK_GATE.enter()
                    try:
                        with state.guard:
                            self._in_sqlites_handler(
                                partial(cursor.execute, _BEGIN_READ if read else BEGIN_WRITE), wait
                            )
                        return
                    except sqlite3.Error as again:
                        FORK_GATE.leave()
                        raise self._still_locked(again, wait, "begin") from None
                    except BaseException:
                        FORK_GATE.leave()
                        raise
                if backoff is None:
                    backoff = Backoff(wait)
                if not backoff.wait():
                    raise self._still_locked(exc, wait, "begin") from None
            except BaseException:
                FORK_GATE.leave()
                raise

    def _enter_writers(self, state: ThreadState) -> None:
        """Take the writer gate (``sqlite_connections``), waiting as long as this thread waits for a lock
        (``loop.lock_wait_here``: the busy timeout; briefly or not at all on an event loop's thread)."""
        gate = self._connections.writers
        if not gate.enter(None):
            wait = lock_wait_here(self._busy_timeout)
            if wait is None:
                raise loop_thread_refusal(self.url, 0)
            if not gate.enter(wait):
                if running_loop() is not None:
                    raise loop_thread_refusal(self.url, wait)
                raise LockBusy(f"{self.url}: database is locked (another thread of this process is writing)")
        state.writing = True

    def _leave_writers(self, state: ThreadState) -> None:
        self._wal_left -= 1
        if not self._wal_left:
            self._bound_wal(state)
        state.writing = False
        self._connections.writers.leave()

    def _bound_wal(self, state: ThreadState) -> None:
        """Every ``CHECK_EVERY`` writes, holding the writer gate: past its limit, checkpoint the WAL (``sqlite_wal``).

        Opportunistic: whatever stands in the checkpoint's way (another
        process's writer, reader or checkpoint, a closed store) makes it
        copy less or nothing, never raises; a later look tries again.
        """
        self._wal_left = sqlite_wal.CHECK_EVERY
        conn = state.conn
        if conn is not None:
            guard, waits = state.guard, state.lock_wait
        else:  # a thread that only wrote on the shared writer connection (which never waits for locks)
            shared = self._connections.shared
            conn, guard, waits = shared.conn, shared.guard, False
        shm = self._open_shm()
        if conn is None or shm is None or state.depth:
            return
        bound = self._wal_bound
        # No early checkpoint from a thread that has met another process's write lock (sqlite_wal.WalBound.due).
        restart_wait_ms = bound.due(shm, not state.lock_wait)
        if restart_wait_ms is None:
            return
        with guard:
            if self._closed:
                return
            try:
                if waits:  # the PASSIVE step waits for nothing (SQLite runs no handler for it anyway)
                    conn.execute(NO_LOCK_WAIT)
                try:
                    row = conn.execute(sqlite_wal.PASSIVE).fetchone()
                    restarted = None
                    if row is not None and sqlite_wal.restart_worthwhile(row[1], row[2]):
                        # None for an early checkpoint (sqlite_wal), never a wait on a loop's thread (sqlite_busy).
                        if restart_wait_ms and running_loop() is None:
                            conn.execute(LOCK_WAIT.format(ms=restart_wait_ms))
                        restarted = conn.execute(sqlite_wal.RESTART).fetchone()
                    bound.checkpointed(restarted is not None and not restarted[0])
                finally:
                    conn.execute(LOCK_WAIT.format(ms=self._first_wait_ms()) if waits else NO_LOCK_WAIT)
            except sqlite3.Error:
                pass

    def _gated(self, run: Callable[..., _T], *args: Any) -> _T:
        """``run(*args)``, a write statement outside a transaction, holding the writer gate."""
        state = self._tls.state
        self._enter_writers(state)
        try:
            return run(*args)
        finally:
            self._leave_writers(state)

    def _take_lock(self, name: str) -> None:
        """Nothing to take: the transaction's BEGIN IMMEDIATE holds the one write lock."""

    def _tx_end(self) -> None:
        self._ended(self._tls.state)

    def _ended(self, state: ThreadState) -> None:
        """``_tx_end`` with the thread's state in hand (``_tx_commit`` has it: one thread-local lookup fewer)."""
        own = state.own
        if own is not None:
            self._off_shared(state, own)
        elif isinstance(state.cursor, RefusingCursor):
            state.cursor = None
        if state.writing:
            self._leave_writers(state)
        # Not a commit in a finally: the transaction is over either way by
        # now; this only tells the fork gate so.
        FORK_GATE.leave()

    def transaction(self) -> SqliteTransaction:
        """A write transaction (re-entrant per thread: nested blocks are savepoints); ``SqliteTransaction``."""
        return SqliteTransaction(self)

    def _tx_commit(self) -> None:
        self._commit(self._tls.state)

    def _commit(self, state: ThreadState) -> None:
        """``_tx_commit`` with the thread's state in hand (``SqliteTransaction.__exit__`` has it)."""
        # Only called when the transaction is not doomed, so the cursor is
        # the real one (a stray ``RefusingCursor`` would refuse the COMMIT:
        # the transaction then rolls back, which is safe).
        try:
            with state.guard:
                (state.cursor or self._thread_cursor()).execute(COMMIT)
        except sqlite3.Error as commit_error:
            self._tx_rollback()
            raise translate_sqlite_error(commit_error, f"{self.url}: commit") from None
        except BaseException:
            # An interruption (or StoreClosed from a connection close() took)
            # around the COMMIT: roll back whatever is still open (nothing,
            # when the COMMIT ran) so the fork gate and the connection are
            # left as after any other end of the transaction.
            self._tx_rollback()
            raise
        self._ended(state)
        pending = state.pending_notify
        if pending is not None:
            state.pending_notify = None
            for channel in pending:
                self.notify(channel)

    def _tx_rollback(self) -> None:
        state = self._tls.state
        state.pending_notify = None
        conn = state.conn
        if conn is not None:
            with state.guard:
                cursor = state.cursor
                try:
                    if cursor is None or isinstance(cursor, RefusingCursor):
                        conn.execute(ROLLBACK)
                    else:
                        cursor.execute(ROLLBACK)
                except sqlite3.Error:
                    pass  # connection closed: SQLite rolled back already
                if self._closed:
                    self._close_own_connection()  # in case close() left it open
        self._tx_end()

    def _tx_savepoint(self, name: str) -> None:
        self._savepoint_statement(f"SAVEPOINT {name}")

    def _tx_release(self, name: str) -> None:
        self._savepoint_statement(f"RELEASE {name}")

    def _savepoint_statement(self, statement: str) -> None:
        # A doomed transaction's cursor refuses the statement: the block is
        # refused with the doom's error, as a statement would be.
        state = self._tls.state
        cursor = state.cursor or self._thread_cursor()
        with state.guard:
            if self._closed:
                raise self._refuse_closed()
            try:
                cursor.execute(statement)
            except sqlite3.Error as exc:
                raise self._failed(exc) from None

    def _tx_rollback_to(self, name: str) -> None:
        state = self._tls.state
        conn = state.conn
        if conn is not None:
            with state.guard:
                # conn.execute, not the cursor: it is a RefusingCursor when
                # the rollback undoes a failure (the usual reason to get here).
                try:
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
                except sqlite3.Error:
                    pass
        if isinstance(state.cursor, RefusingCursor) and state.doomed_level > state.depth:
            state.cursor = None

    # -- waiting for the lock (sqlite_busy) --------------------------------------

    def _in_sqlites_handler(self, attempt: Callable[[], _T], wait: float) -> _T:
        """``attempt()`` again, SQLite's own busy handler waiting, until ``wait`` seconds have passed (``sqlite_busy``).

        A connection starts with ``busy_timeout = 0`` so that a held lock
        is seen at once (a loop thread is refused, not stalled); off a loop
        thread, once seen, the wait is SQLite's, as it is for every other
        SQLite program contending for the file. The timeout then stays on
        the connection (``ThreadState.lock_wait``): a thread that met the
        lock once meets it again, and every refusal costs a failed try, an
        exception and two statements more than waiting in SQLite does
        (bench/RESULTS.md, "writers2"). ``_loop_started`` takes it off
        again when a loop comes to run on the thread.

        The timeout set is ``FIRST_WAIT_MS`` (or the store's, if shorter):
        a statement still refused after it is starving and runs again in
        rounds of ``STARVING_ROUND_MS`` until ``wait`` (``_lock_wait``: the
        store's busy timeout off event loop threads) has passed since the
        first refusal; the connection is set back to
        ``FIRST_WAIT_MS`` after. Raises the last refusal (or anything else
        ``attempt`` raises) as it came.
        """
        state = self._tls.state
        first_ms = min(self._first_wait_ms(), int(wait * 1000))  # shorter only for a brief wait (loop.LOOP_LOCK_WAIT)
        deadline = time.monotonic() + wait
        conn = (state.cursor or self._thread_cursor()).connection
        if state.lock_wait:
            deadline -= first_ms / 1000  # the refused statement waited its first round already
        else:
            conn.execute(LOCK_WAIT.format(ms=first_ms))
            state.lock_wait = True
            try:
                return attempt()
            except sqlite3.Error as exc:
                if not self._busy_again(exc, deadline):
                    raise
        # Starving: rounds of SQLite's shortest sleeps until the lock is ours or the busy timeout has passed.
        conn.execute(LOCK_WAIT.format(ms=sqlite_busy.STARVING_ROUND_MS))
        try:
            while True:
                try:
                    return attempt()
                except sqlite3.Error as exc:
                    if not self._busy_again(exc, deadline):
                        raise
        finally:
            if not self._closed:
                conn.execute(LOCK_WAIT.format(ms=first_ms))

    def _busy_again(self, exc: sqlite3.Error, deadline: float) -> bool:
        """Whether a statement refused with ``exc`` in ``_in_sqlites_handler`` is tried again: a refusal
        ``_waits_for`` waits for, the store open, time left."""
        return self._waits_for(exc) and not self._closed and time.monotonic() < deadline

    def _first_wait_ms(self) -> int:
        """The busy timeout a connection that waits for locks runs with: SQLite's handler's first round."""
        return min(sqlite_busy.FIRST_WAIT_MS, int(self._busy_timeout * 1000))

    def _loop_started(self) -> None:
        """A loop runs on this thread, whose connection waits for locks: make it refuse them at once again.

        Called by the statement methods (and ``_tx_begin``) when
        ``lock_wait`` is set and a loop is running (``sqlite_busy``): a
        wait there would stall the loop. Only threads whose connection met
        a lock off a loop ask, so the question (a system call in CPython
        while a loop runs) is not asked on a loop thread's every statement.
        """
        state = self._tls.state
        conn = state.conn
        state.lock_wait = False
        if conn is None:
            return
        with state.guard:
            if self._closed:
                return  # the statement is refused next (StoreClosed)
            try:
                conn.execute(NO_LOCK_WAIT)
            except sqlite3.Error as exc:
                raise self._failed(exc) from None

    def _waits_for(self, exc: sqlite3.Error) -> bool:
        """Whether a statement refused with ``exc`` is tried again after a pause (for ``_lock_wait`` seconds).

        True for BUSY on a file store (never BUSY_SNAPSHOT: a read
        transaction's snapshot stays stale however long it waits).
        """
        return not (self.is_memory or not is_busy(exc) or exc.sqlite_errorcode == _SQLITE_BUSY_SNAPSHOT)

    def _lock_wait(self) -> float:
        """Seconds this thread waits for a lock held elsewhere (``loop.lock_wait_here``); inside an async front
        end's inline call, raises the ``LockBusy`` that refuses it at once (dooming the open transaction)."""
        wait = lock_wait_here(self._busy_timeout)
        if wait is None:
            raise self._doom(loop_thread_refusal(self.url, 0))
        return wait

    def _still_locked(self, exc: sqlite3.Error, wait: float, doing: str | None = None) -> DurastateError:
        """The error for a statement (``doing``: a ``BEGIN``) still refused with ``exc`` after waiting ``wait`` s.

        On an event loop's thread a refusal for the lock says why the wait
        was short (``sqlite_busy.loop_thread_refusal``).
        """
        if is_busy(exc) and running_loop() is not None:
            return self._doom(loop_thread_refusal(self.url, wait))
        if doing is not None:
            return translate_sqlite_error(exc, f"{self.url}: {doing} (past the busy timeout)")
        return self._failed(exc)

    def _after_busy(self, exc: sqlite3.Error, attempt: Callable[[], object]) -> object:
        """Run ``attempt`` (the refused statement) again after pauses until it is not refused for the lock.

        Called holding the thread's guard, from the statement method whose
        statement SQLite refused with ``exc``; anything but BUSY is raised
        translated, as is BUSY once ``_lock_wait`` has passed.
        """
        if not self._waits_for(exc):
            raise self._failed(exc) from None
        wait = self._lock_wait()
        # Not on the shared writer connection (a transaction's, _begin_shared): it never waits in SQLite's handler.
        if sqlite_busy.WAIT_IN_SQLITE and self._tls.state.own is None:
            try:
                return self._in_sqlites_handler(attempt, wait)
            except sqlite3.Error as again:
                raise self._still_locked(again, wait) from None
        backoff = Backoff(wait)
        while backoff.wait():
            if self._closed:
                raise self._refuse_closed()
            try:
                return attempt()
            except sqlite3.Error as again:
                if not is_busy(again):
                    raise self._failed(again) from None
                exc = again
        raise self._still_locked(exc, wait) from None
