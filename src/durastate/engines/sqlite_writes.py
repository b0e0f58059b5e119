"""Writes outside a transaction: run on the engine's shared writer connection, the writer gate held.

Split from ``sqlite.py``, whose ``SqliteEngine`` mixes ``SharedWrites`` in.
Its statement methods (``execute``, ``one``, ``all``) take the writer gate
for a write outside a transaction (``sqlite_transaction``: inline when it
is free, else ``_gated``) and, holding it, run the statement here, on the
one connection single writes share (``sqlite_connections.SharedWriter``:
why one connection). That connection never waits for a lock: a write it
finds locked by another process is ``REFUSED`` here, unchanged, and the
caller runs it on its thread's own connection, which waits for the lock
(``sqlite_busy``) or, on a loop's thread, is refused at once.

``batch`` (``Engine.batch``) runs a few statements there the same way, as
one transaction begun and committed inside the one call: none of the
general transaction's bookkeeping (``SqliteTransaction``: the thread's
connection swapped for the shared one and back, the gate's holder, the
deferred notifications), which was a third of a leased huey cycle's
bytecodes (bench/RESULTS.md "batch").
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from ..errors import StoreClosed
from .base import EngineBase, Kind, Params
from .sqlite_connections import SharedWriter
from .sqlite_dialect import bindable
from .sqlite_errors import is_busy
from .sqlite_transaction import BEGIN_WRITE, COMMIT, FORK_GATE, ROLLBACK, SqliteTransactions, ThreadState

__all__ = ["ALL_ROWS", "ONE_ROW", "REFUSED", "ROW_COUNT", "STEPS", "SharedWrites"]

# What ``SharedWrites._write_shared`` returns for its caller: the row count (execute), the first row (one), the
# rows (all), a batch's answers (``STEPS``: its ``params`` are the batch's steps, ``batch``); ``REFUSED``: another
# process holds the write lock (nothing was written).
ROW_COUNT, ONE_ROW, ALL_ROWS, STEPS = 0, 1, 2, 3
REFUSED: Any = object()


class SharedWrites(SqliteTransactions):
    """The shared writer connection's write path (see the module docstring)."""

    # The engine's own (SqliteEngine).
    _lock: threading.Lock
    _writer_lock: threading.Lock  # the writer gate's lock (sqlite_connections.WriterGate.lock)

    def _new_connection(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _write_shared(self, state: ThreadState, sql: str, params: Params, result: int) -> Any:
        """A write outside a transaction on the shared writer connection, the writer gate held: its row count
        (``ROW_COUNT``: execute), first row (``ONE_ROW``: one), rows (``ALL_ROWS``: all) or, for ``STEPS``, the
        answers of the batch ``params`` is, ``sql`` unused (``batch``, ``_run_steps``); ``REFUSED`` if it
        was refused for a lock another process holds (unchanged: the caller runs it on the thread's own
        connection, which waits for the lock as every write did before, or is refused at once on a loop's
        thread). Nothing was written then: SQLite refuses a write's first step before it changes anything."""
        shared = self._connections.shared
        guard = shared.guard
        # acquire/release, not ``with``: a third of the guard's cost; each is a share of a single write's CPU.
        guard.acquire()
        try:
            if self._closed:
                raise self._refuse_closed()
            cursor = shared.cursor or self._shared_cursor(shared)
            # This thread's changes, wherever made, once no_wait_changes has asked for them (counts_changes).
            counting = state.counts_changes
            if counting:
                conn = cursor.connection
                before = conn.total_changes
            try:
                if result == STEPS:
                    return self._run_steps(shared, cursor, params)
                # An engine_blobs statement's blobs come as bind_blob made them: bound as they come.
                cursor.execute(sql, params if getattr(sql, "engine_blobs", False) else bindable(params))
                if result == ONE_ROW:
                    row = cursor.fetchone()
                    if row is not None and cursor.fetchone() is not None:
                        # More rows: the statement is still active (see one()); closing the cursor ends it.
                        shared.cursor = None
                        cursor.close()
                    return row
                if result == ALL_ROWS:
                    return cursor.fetchall()
                if cursor.description is not None:
                    cursor.fetchall()  # RETURNING: run to completion (see execute)
                return cursor.rowcount
            except sqlite3.Error as exc:
                if is_busy(exc):
                    return REFUSED
                raise self._failed(exc) from None
            except BaseException:
                shared.cursor = None  # closing it resets a statement the interruption left active
                cursor.close()
                raise
            finally:
                if counting:
                    state.shared_changes += conn.total_changes - before
        finally:
            guard.release()

    def batch(self, steps: Sequence[tuple[str, Params]]) -> list[Any]:
        """``Engine.batch``: outside a transaction, on a thread that does not wait for locks, the writer gate
        free, as one transaction on the shared writer connection in this one call (``_run_steps``); anywhere
        else, and when another process holds the write lock, the general transaction (``EngineBase.batch``)."""
        state = self._tls.state
        # The gate taken inline when free, as execute() takes it.
        if (
            steps
            and not (state.depth or state.writing or state.lock_wait)
            and self._shares_writes
            and self._writer_lock.acquire(False)
        ):
            state.writing = True
            try:
                answers = self._write_shared(state, "", steps, STEPS)
            finally:
                self._leave_writers(state)
            if answers is not REFUSED:
                return answers  # type: ignore[no-any-return]
        return EngineBase.batch(self, steps)

    def _run_steps(self, shared: SharedWriter, cursor: sqlite3.Cursor, steps: Sequence[tuple[str, Params]]) -> Any:
        """``_write_shared``'s ``STEPS``: a batch's statements between ``BEGIN IMMEDIATE`` and ``COMMIT`` on the shared
        writer connection (its guard held); their answers (``Engine.batch``). A ``BEGIN`` refused for the lock
        raises before anything began (``_write_shared`` answers ``REFUSED``); a failing step rolls the whole batch
        back and raises its error."""
        FORK_GATE.enter()  # a transaction is open until this returns (sqlite_fork)
        try:
            cursor.execute(BEGIN_WRITE)
            try:
                answers: list[Any] = []
                for sql, params in steps:
                    cursor.execute(sql, params if getattr(sql, "engine_blobs", False) else bindable(params))
                    if getattr(sql, "kind", None) is Kind.WRITE:
                        if cursor.description is not None:
                            cursor.fetchall()  # RETURNING: run to completion (see execute)
                        answers.append(cursor.rowcount)
                    else:
                        row = cursor.fetchone()
                        if row is not None and cursor.fetchone() is not None:
                            cursor.fetchall()  # more rows: run it to completion, the first one answers
                        answers.append(row)
                cursor.execute(COMMIT)
                return answers
            except BaseException:
                # Closing the cursor resets a statement left active; the connection's ROLLBACK ends the batch.
                shared.cursor = None
                cursor.close()
                try:
                    cursor.connection.execute(ROLLBACK)
                except sqlite3.Error:
                    pass  # nothing open: SQLite rolled a failed COMMIT back itself
                raise
        finally:
            FORK_GATE.leave()

    def _shared_cursor(self, shared: SharedWriter) -> sqlite3.Cursor:
        """A cursor of the shared writer connection, opening it first if needed (the caller holds its guard)."""
        conn = shared.conn
        if conn is None:
            conn = self._new_connection()
            with self._lock:
                if self._closed:
                    conn.close()
                    raise StoreClosed(f"{self.url}: store is closed")
                shared.conn = conn
        shared.cursor = cursor = conn.cursor()
        return cursor
