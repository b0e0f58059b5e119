"""Waiting for SQLite's write lock: seen at once, then waited for by SQLite's own handler (off loop threads).

File-store connections run with ``busy_timeout = 0``: a statement that
meets a lock another connection holds fails at once with SQLITE_BUSY
(having changed nothing: WAL takes the write lock at the first write or at
``BEGIN IMMEDIATE``, before any change). Off a loop thread the engine then
runs it once more with the connection's busy timeout set to the store's,
so SQLite's own handler waits (``WAIT_IN_SQLITE``), exactly as for any
other program contending for the file, and sets it back to 0.

Why SQLite's handler and not a loop of our own (``Backoff``, kept for
opening and as the alternative the benchmark measures): the handler sleeps
1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 ms, then 100 ms per try, so a
writer that lost a few races sleeps on after the lock came free while
newcomers take it; our loop (pauses 0.5-4 ms, doubling, random) looks more
often. With 16 writer processes (``bench/writers.py --own-loop``) neither
was shown faster in throughput on the shared 2-core machine (rounds swing
0.5-1.8x), but our loop's p99 was several times raw SQLite's and the
handler's is raw's own: a process that waits the way every other SQLite
writer waits competes on equal terms.

The starved writer. The handler's sleeps grow to 100 ms, so a writer that
keeps losing (16 processes taking the lock in turn) looks at the lock ten
times a second while the others take it between its looks: 1.6-2.1 s for
one write was measured, and nothing but the busy timeout bounded it. So
the handler waits ``FIRST_WAIT_MS`` in one go (its whole schedule: every
write that gets the lock within a second waits exactly as with SQLite's
handler alone); a statement still refused then runs again in rounds of
``STARVING_ROUND_MS`` (the handler's sleeps of 1, 2, 5 and 10 ms), each
round a new try, until the store's busy timeout has passed (rounded up to
a round). A starving writer then looks every few milliseconds until it
wins. Earlier rounds (after 100 or 250 ms) bounded the worst case lower
but made so many more looks that the p99 of every writer rose past raw
SQLite's (bench/RESULTS.md, "waitrounds").

On a thread running an event loop the wait is short or nothing
(``loop.lock_wait_here``): a sleep there stalls every coroutine of the
loop, and when the holder is an async transaction of that same loop it
could never finish. A sync call made there waits ``loop.LOOP_LOCK_WAIT``
at most, then is refused with ``LockBusy`` saying why
(``loop_thread_refusal``); an inline call of ``durastate.aio`` is refused
at once, its cue to run the call on a worker thread instead.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from .sqlite_errors import LockBusy

Row = tuple[Any, ...]

__all__ = ["FIRST", "LONGEST", "Backoff", "all_rows_again", "loop_thread_refusal", "one_row_again", "run_to_end_again"]

# Off a loop thread, a statement refused for the lock is tried once more with
# SQLite's own busy handler waiting (True), or in durastate's loop below (False).
WAIT_IN_SQLITE = True
# Milliseconds a connection that waits for locks lets SQLite's handler wait in one go (its busy_timeout): its
# whole schedule, sleeps of 1 up to 100 ms. A statement still refused then is starving (STARVING_ROUND_MS).
FIRST_WAIT_MS = 1000
# Past FIRST_WAIT_MS, the busy_timeout of each further try: the handler's first sleeps only (1, 2, 5, 10 ms,
# then 2), one round after another, until the store's busy timeout has passed.
STARVING_ROUND_MS = 20
FIRST = 0.0005  # seconds: the first pause after BUSY
LONGEST = 0.004  # seconds: the longest pause between two tries


def loop_thread_refusal(url: str, waited: float) -> LockBusy:
    """The error for a lock met on a thread running an event loop, after ``waited`` seconds (0: not at all)."""
    if waited:
        how = f"where it waited {waited:g} s for the lock, as long as a sync call there may: a longer wait"
    else:
        how = "where this call does not wait for the lock: waiting"
    return LockBusy(
        f"{url}: the store is locked by another connection (a transaction, maybe an async one of this"
        f" very event loop), and this call runs on the thread of a running event loop, {how} would stall"
        " the loop (and a transaction the loop has to drive could never finish). Call it through"
        " durastate.aio, or from another thread (asyncio.to_thread)"
    )


class Backoff:
    """Pauses between tries after BUSY, until ``busy_timeout`` seconds have passed since the first."""

    __slots__ = ("_deadline", "_pause")

    def __init__(self, busy_timeout: float) -> None:
        self._deadline = time.monotonic() + busy_timeout
        self._pause = FIRST

    def wait(self) -> bool:
        """Sleep before the next try; ``False`` (no sleep) once the busy timeout has passed."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            return False
        pause = self._pause
        self._pause = min(LONGEST, pause * 2)
        time.sleep(min(left, pause * random.uniform(0.5, 1.0)))
        return True


def one_row_again(cursor: sqlite3.Cursor, sql: str, params: Sequence[Any]) -> Row | None:
    """``one()``'s statement run again after BUSY (its first try is inlined there)."""
    row: Row | None = cursor.execute(sql, params).fetchone()
    if row is not None:
        cursor.fetchall()  # finish it: the shared cursor never keeps a statement active
    return row


def all_rows_again(cursor: sqlite3.Cursor, sql: str, params: Sequence[Any]) -> list[Row]:
    """``all()``'s statement run again after BUSY (its first try is inlined there)."""
    return cursor.execute(sql, params).fetchall()


def run_to_end_again(cursor: sqlite3.Cursor, sql: str, params: Sequence[Any]) -> int:
    """``execute()``'s statement run again after BUSY (its first try is inlined there)."""
    cursor.execute(sql, params)
    if cursor.description is not None:
        cursor.fetchall()
    return cursor.rowcount
