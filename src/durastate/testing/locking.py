"""A SQLite file's write lock held by another connection, for tests of waiting and handoff."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["WriteLockHolder", "lock_released_later"]


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


@contextmanager
def lock_released_later(path: str | Path, after: float = 0.2) -> Iterator[threading.Event]:
    """Hold ``path``'s write lock, released ``after`` seconds later; yields an event set just before the release.

    A call made inside the block that waited for the lock ends after the
    event was set (``assert released.is_set()`` proves it waited); one that
    was refused at once ends before. The block's exit waits for the release.
    """
    holder = WriteLockHolder(path).start()
    releasing = threading.Event()

    def release() -> None:
        releasing.set()  # before the lock goes: a call that waited for it ends after this
        holder.release()

    releaser = threading.Timer(after, release)
    releaser.start()
    try:
        yield releasing
    finally:
        releaser.join()
