"""The SQLite engine's connections: one per thread, spares of ended threads, and the writer gate.

Split from ``sqlite.py``, which owns one ``Connections`` per engine (under
the engine's lock) and passes every write transaction, and every write
statement outside one, through its ``WriterGate``.

Spares: a thread pool that starts new threads for each job (LangGraph's
executor, one per ``invoke``) would otherwise open a connection, set it up
and prepare every statement again per thread: 9 per LangGraph graph run,
about a third of its saver time. An ended thread's connection is kept (up
to ``SPARE_CONNECTIONS``) for the next new thread; one its thread left
inside a transaction is closed, rolling it back.

The writer gate: SQLite has one write lock per file, and a connection that
finds it taken waits in SQLite's busy handler, which sleeps 1, 2, 5, 10,
15, 20, 25 ms ... between tries, however soon the lock is released. With a
connection per thread, two threads of a process writing at once (a
LangGraph graph run: checkpoints put on a background thread while the main
thread puts the tasks' writes) slept milliseconds per collision: under
``durability="full"``, each commit holding the lock for its fsync, half of
a graph run's time. The threads of one engine now queue on a lock and the
next starts the moment the previous one commits; SQLite's own lock (and its
busy handler) still orders other processes, and other stores open on the
same file.

The shared writer connection: a write statement outside a transaction runs,
holding the gate, on one connection of the engine's (``SharedWriter``) rather
than on its thread's. SQLite drops a connection's whole page cache when it
finds the file changed by another connection's commit, and reads every page
again (from the WAL: a ``pread`` each). A LangGraph graph run puts
checkpoints from one thread and the tasks' writes from others, so with a
connection per thread every write found its cache dropped by the previous
one: ~370 page reads a graph run against SqliteSaver's ~30 (one connection).
The gate already orders these writes, so one connection serves them all and
keeps its cache. Transactions and reads stay on the thread's own connection
(a transaction is its connection's; readers never queue behind a writer).
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Protocol

__all__ = ["SPARE_CONNECTIONS", "Connections", "SharedWriter", "WriterGate"]

SPARE_CONNECTIONS = 8


class WriterGate:
    """A lock for an engine's writing threads that remembers which thread holds it.

    ``holder`` is set by ``enter`` (a write transaction, which a thread can
    end inside of). A single write statement takes ``lock`` itself, without
    a holder: its thread cannot end before it releases it, and recording
    the holder (``threading.current_thread()``) is a measurable share of a
    one-statement write.
    """

    __slots__ = ("holder", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: threading.Thread | None = None

    def enter(self, wait: float | None) -> bool:
        """Take the gate, waiting at most ``wait`` seconds (``None`` or 0: not at all); whether taken."""
        # Positional: a keyword costs the call its argument parsing (~850 instructions, "docwrite").
        taken = self.lock.acquire(True, wait) if wait else self.lock.acquire(False)
        if taken:
            self.holder = threading.current_thread()
        return taken

    def leave(self) -> None:
        self.holder = None
        self.lock.release()


class SharedWriter:
    """The connection single write statements share, used only by the writer gate's holder (see the docstring).

    ``guard`` is held for every use of ``conn`` and by ``close()`` while it
    closes it, as a thread's guard is for its own connection. ``cursor`` is
    ``None`` until the first write, and again after an interruption dropped
    it. ``conn`` never waits for a lock (busy timeout 0): a write it finds
    locked by another process runs again on its thread's own connection,
    which waits as before (``sqlite_busy``).
    """

    __slots__ = ("conn", "cursor", "guard")

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.cursor: sqlite3.Cursor | None = None
        self.guard = threading.RLock()


class LockWaiting(Protocol):
    """What ``adopt`` reads of a thread's state (``sqlite_transaction.ThreadState``)."""

    lock_wait: bool


class Connections:
    """Each thread's connection with its guard, the spares, the writer gate (callers hold the engine's lock)."""

    __slots__ = ("by_thread", "shared", "spare", "writers")

    def __init__(self) -> None:
        # The thread's state is kept to tell, once the thread has ended, whether its connection waits for locks.
        self.by_thread: dict[int, tuple[threading.Thread, sqlite3.Connection, threading.RLock, LockWaiting]] = {}
        # (connection, whether it has a busy timeout set: the next thread's starts without one)
        self.spare: list[tuple[sqlite3.Connection, bool]] = []
        self.writers = WriterGate()
        self.shared = SharedWriter()

    def adopt(self) -> tuple[sqlite3.Connection, bool] | None:
        """Move the connections of ended threads to the spares; one spare for a new thread, with whether its busy
        timeout must be reset first (its thread had set one, ``ThreadState.lock_wait``), or ``None``."""
        for key, (thread, conn, _guard, state) in list(self.by_thread.items()):
            if not thread.is_alive():
                del self.by_thread[key]
                if len(self.spare) < SPARE_CONNECTIONS and not conn.in_transaction:
                    self.spare.append((conn, state.lock_wait))
                else:
                    conn.close()
                    if self.writers.holder is thread:  # it ended inside its write transaction
                        self.writers.leave()
        return self.spare.pop() if self.spare else None

    def add(self, conn: sqlite3.Connection, guard: threading.RLock, state: LockWaiting) -> None:
        current = threading.current_thread()
        self.by_thread[id(current)] = (current, conn, guard, state)

    def forget_current(self) -> None:
        self.by_thread.pop(id(threading.current_thread()), None)

    def take_all(self) -> list[tuple[threading.Thread, sqlite3.Connection, threading.RLock]]:
        """Every thread's connection and the shared writer's (the caller closes them), the spares closed here."""
        taken = [(thread, conn, guard) for thread, conn, guard, _state in self.by_thread.values()]
        self.by_thread.clear()
        shared = self.shared
        if shared.conn is not None:
            taken.append((threading.current_thread(), shared.conn, shared.guard))
            shared.conn = shared.cursor = None
        spare, self.spare = self.spare, []
        for conn, _waits in spare:
            conn.close()
        return taken
