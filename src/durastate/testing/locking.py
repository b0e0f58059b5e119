"""A SQLite file's write lock held by another connection, for tests of waiting and handoff."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

__all__ = ["WriteLockHolder"]


class WriteLockHolder:
    """Holds ``BEGIN IMMEDIATE`` on ``path`` from a thread of its own until ``release()``.

    ``start()`` returns once the lock is held (a call needing the write lock
    then waits, or is refused at once with busy timeout 0); ``release()``
    rolls back and waits for the thread.
    """

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        self._held = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold, name="write-lock-holder")

    def _hold(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._held.set()
            self._release.wait()
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    def start(self) -> WriteLockHolder:
        self._thread.start()
        if not self._held.wait(30):
            raise TimeoutError(f"could not take the write lock of {self._path}")
        return self

    def release(self) -> None:
        self._release.set()
        self._thread.join()
