"""A writer process that has waited long for SQLite's write lock goes first: the hungry lock (``<file>-hungry``).

SQLite's busy handler sleeps 1, 2, 5, 10 ... then 100 ms between tries, so
a writer that lost a few races sleeps on while the lock comes free and
newcomers take it: with 16 writer processes one write waited 1-2 s (issue
26 pain 10; raw ``sqlite3`` alike). Putting every writer in a queue (a
file gate, decisions "sqlgate") bounded that but raised the p99, since
SQLite's handler keeps most writers out of the contest and a queue makes
each wait a little. Here only a starving writer changes anything, the
scheme of Go's ``sync.Mutex`` starvation mode (and of the in-process
``WriterGate``) across processes:

* A write waits in SQLite's handler as before, but at most
  ``HUNGRY_AFTER`` (0.5 s) at a time. One still refused then is *hungry*: it takes
  an exclusive ``flock`` on ``<file>-hungry`` (``take``: several hungry
  writers take turns on it) and, holding it, tries for SQLite's lock every
  1-3 ms (``HUNGRY_TRIES``) until it gets it or its busy timeout passes.
* Every write of an engine that has met contention first looks whether a
  hungry writer holds that lock (``held``: a non-blocking shared ``flock``
  and its release) and, if one does, waits for its release
  (``wait_released``) before competing, its own busy timeout still holding.
  A write on an event loop's thread never waits: it is refused at once
  (``sqlite_busy.loop_thread_refusal``), as for a held SQLite lock.

So a hungry writer competes only with writes already inside SQLite's
handler (at most ``HUNGRY_AFTER`` more each), with other programs, and
with stores that have not met contention: a measured bound, not a
guarantee. An engine that never met contention has no lock object, no
file and makes no system call for it. The kernel drops a ``flock`` with
the last descriptor of its open file: a hungry writer killed (SIGKILL)
holds nobody up. A forked child closes its copy of the descriptor without
unlocking (``close``): the open file is the parent's, so an unlock there
would drop the parent's lock, and a copy would keep it alive after the
parent died; the child opens its own at its next look.
"""

from __future__ import annotations

import fcntl
import os
import time

__all__ = ["HUNGRY_AFTER", "HUNGRY_TRIES", "LOOK_PAUSE", "HungryLock"]

# Seconds a write waits in SQLite's handler (its busy timeout, while shorter than the store's) before it turns
# hungry. Not the in-process gate's 50 ms: across processes every hungry episode holds up the writers that look,
# and at 50 ms (~0.3% of puts at 16 processes) the p99 rose 10x; at 0.5 s it stayed near main's while the longest
# write at 16 processes fell from 1.5-2.3 s to 0.6 s (bench/RESULTS.md "hungrygate").
HUNGRY_AFTER = 0.5
# A hungry writer's connection's busy timeout: each try waits in SQLite's handler, which tries at 0, 1 and 3 ms.
HUNGRY_TRIES = "PRAGMA busy_timeout = 3"
# Seconds between looks at the hungry lock while another writer holds it (no ``flock`` waits with a deadline).
LOOK_PAUSE = 0.001


class HungryLock:
    """One engine's descriptor of ``<file>-hungry`` and its ``flock`` (see the module docstring).

    Used by the writer gate's holder only (one thread of the engine at a
    time). ``path`` is created at the first look, with the store file's
    permission bits; where it cannot be opened, every look finds it free
    and ``take`` succeeds: writes go on as without it.
    """

    __slots__ = ("_fd", "_like", "path")

    def __init__(self, store_file: str) -> None:
        self.path = f"{store_file}-hungry"
        self._like = store_file
        self._fd: int | None = None

    def _descriptor(self) -> int:
        fd = self._fd
        if fd is None:
            try:
                mode = os.stat(self._like).st_mode & 0o666
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
            except OSError:
                fd = -1
            self._fd = fd
        return fd

    def _try(self, operation: int) -> bool:
        """``flock(operation | LOCK_NB)``: whether granted (an unusable descriptor grants everything)."""
        fd = self._descriptor()
        if fd < 0:
            return True
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            return True  # closed under us (close()): nothing to wait for
        return True

    def held(self) -> bool:
        """Whether a hungry writer (another process's, or another engine's) holds the lock now."""
        if not self._try(fcntl.LOCK_SH):
            return True
        self._unlock()
        return False

    def wait_released(self, deadline: float) -> bool:
        """Wait until no hungry writer holds the lock; ``False`` if one still did at ``deadline`` (monotonic)."""
        while self.held():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, LOOK_PAUSE))
        return True

    def take(self, deadline: float) -> bool:
        """Hold the lock exclusively (this writer is hungry); ``False`` if others held it until ``deadline``."""
        while not self._try(fcntl.LOCK_EX):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, LOOK_PAUSE))
        return True

    def release(self) -> None:
        self._unlock()

    def _unlock(self) -> None:
        fd = self._fd
        if fd is not None and fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass  # closed under us (close())

    def close(self) -> None:
        """Close the descriptor, never unlocking first: in a forked child the open file is the parent's (closing a
        copy leaves its lock alone); in the engine's own process, closing the last descriptor drops the lock."""
        fd, self._fd = self._fd, None
        if fd is not None and fd >= 0:
            os.close(fd)
