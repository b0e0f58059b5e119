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
keeps its cache. A write transaction runs there too (its thread holds the
gate from its BEGIN to its end; ``sqlite_transaction._begin_shared``), so a
thread's single writes and transactions share one cache; a thread that ends
inside one has it rolled back when its connection is reaped (``adopt``).
Reads and read transactions stay on the thread's own connection (readers
never queue behind a writer).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from typing import Protocol

__all__ = ["HUNGRY_AFTER", "SPARE_CONNECTIONS", "Connections", "SharedWriter", "WriterGate"]

SPARE_CONNECTIONS = 8
# Seconds a thread waits for the writer gate as anyone may (the gate goes to whichever thread asks first
# once it is free) before it queues for a turn handed to it (WriterGate).
HUNGRY_AFTER = 0.05


class WriterGate:
    """A lock for an engine's writing threads that remembers which thread holds it, and starves nobody.

    ``holder`` is set by ``enter`` (a write transaction, which a thread can
    end inside of). A single write statement takes ``lock`` itself, without
    a holder: its thread cannot end before it releases it, and recording
    the holder (``threading.current_thread()``) is a measurable share of a
    one-statement write.

    Fairness: a ``threading.Lock`` promises no order; natively a waiter
    woken by a release usually gets it (CPython's lock is a semaphore), but
    where threads are scheduled otherwise a thread writing in a loop
    re-takes it first: under valgrind a waiter was starved for 30 s and
    refused with ``LockBusy`` (stop 18). A thread that has waited
    ``HUNGRY_AFTER`` queues for its turn instead (``turns``, first come
    first served): while one is queued, ``leave`` hands the held lock
    straight to the first (it is never free in between, so nobody takes it
    past them). Short waits keep the first-come race, which lets a graph
    run's threads write back to back without a hand-over each; a long one
    ends after the writers queued before it. The same scheme as Go's
    ``sync.Mutex`` starvation mode.

    Every release goes through ``leave`` or, where a single write takes
    ``lock`` itself (``SqliteEngine.execute``: no holder, no call), does
    what ``leave`` does with the lock: hands it to the first of ``turns``
    when one is queued, else releases it and then hands it over to a waiter
    that queued meanwhile (``hand_over``). A bare ``lock.release()`` would
    leave a queued waiter blocked on its baton with the lock free, until
    its deadline (``LockBusy``).
    """

    __slots__ = ("_queue", "holder", "lock", "turns")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: threading.Thread | None = None
        # The queued waiters' batons, each a held lock its waiter blocks on; released by whoever hands the gate
        # over. Changed only under _queue.
        self.turns: deque[threading.Lock] = deque()
        self._queue = threading.Lock()

    def enter(self, wait: float | None) -> bool:
        """Take the gate, waiting at most ``wait`` seconds (``None`` or 0: not at all); whether taken."""
        # Positional: a keyword costs the call its argument parsing (~850 instructions, "docwrite").
        if not wait:
            taken = self.lock.acquire(False)
        else:
            taken = self.lock.acquire(True, min(wait, HUNGRY_AFTER))
            if not taken and wait > HUNGRY_AFTER:
                taken = self._wait_turn(wait - HUNGRY_AFTER)
        if taken:
            self.holder = threading.current_thread()
        return taken

    def leave(self) -> None:
        self.holder = None
        if self.turns:  # read without _queue: a waiter queued after this look is served below
            with self._queue:
                if self.turns:
                    self.turns.popleft().release()  # handed over: the lock stays held, now by that waiter
                    return
        self.lock.release()
        if self.turns:
            # A waiter queued between the look above and the release: it queued after its own try had
            # failed, so the release came after its queuing, and this look sees it.
            self.hand_over()

    def hand_over(self) -> None:
        """The lock, if free, taken and handed to the first queued waiter."""
        with self._queue:
            if self.turns and self.lock.acquire(False):
                self.turns.popleft().release()

    def _wait_turn(self, wait: float) -> bool:
        """Queue for the gate and wait at most ``wait`` seconds for it to be handed over; whether it was."""
        baton = threading.Lock()
        baton.acquire()
        with self._queue:
            self.turns.append(baton)
        # Freed before we queued (no leave looked at the queue since): take it for the first in line.
        self.hand_over()
        if baton.acquire(True, wait):
            return True
        with self._queue:
            if baton in self.turns:  # still queued: given up, nothing held
                self.turns.remove(baton)
                return False
        # Handed over between the timeout and the look (under _queue: its baton was released already).
        return True


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
        holder = self.writers.holder
        if holder is not None and not holder.is_alive():
            # It ended inside its write transaction on the shared writer connection (_begin_shared): rolled
            # back here, as closing its own connection rolls back one there.
            shared = self.shared
            if shared.conn is not None:
                with shared.guard:
                    try:
                        shared.conn.rollback()
                    except sqlite3.Error:
                        pass  # closed by close()
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
