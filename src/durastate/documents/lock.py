"""The documents facet's one lock as a block: ``Documents.lock(*keys)`` returns a ``DocumentLock``.

See "The lock" in the package docstring: one transaction (``engine.transaction()``)
with the facet lock (``engine.lock(LOCK_NAME)``) taken once per transaction,
by the outermost ``lock`` block of the thread (``LockHolder.taker``).
"""

from __future__ import annotations

import threading
from types import TracebackType

from ..engines.base import BlockRefused, Engine

__all__ = ["LOCK_NAME", "DocumentLock", "LockHolder"]

# The facet's one lock (see "The lock"): ``engine.lock(LOCK_NAME)``.
LOCK_NAME = "documents"


class LockHolder(threading.local):
    """Per thread: the open ``lock`` block that took the facet lock in the thread's transaction, or ``None``.

    A nested ``lock`` block, and a document write inside one, do not take
    it again (the facet's writes read ``taker``).
    """

    taker: DocumentLock | None = None


class DocumentLock:
    """``Documents.lock(...)``: ONE transaction holding the facet lock, for as long as the block is open.

    Everything the thread does inside the block (on any facet) commits when
    the outermost block ends normally and rolls back on any exception;
    nested blocks (a new ``lock(...)`` or ``store.transaction()``) are
    savepoints of the same transaction. One object is one block at a time,
    as a ``store.transaction()`` object is: entering it again while it is
    open (nested in itself, or from another thread) raises ``InvalidRequest``
    and the open block goes on as if the call never happened; ending it when
    it is not open or from a thread that did not enter it raises
    ``InvalidRequest`` and ends nothing; ending it while a block opened
    inside it is still open rolls both back (``Transaction._unwind``). Once
    ended it may be entered again, a new block.
    """

    __slots__ = ("_engine", "_holder", "_thread", "_tx")

    def __init__(self, engine: Engine, holder: LockHolder) -> None:
        self._engine = engine
        self._holder = holder
        self._tx = engine.transaction()  # one block for the object's life: its refusals are the transaction's
        self._thread: int | None = None  # the thread that holds it open, None when not open

    def __enter__(self) -> None:
        if self._thread is not None:
            raise BlockRefused(
                "this documents.lock(...) block is already open (one object is one block at a time); "
                "call store.documents.lock(...) again for a nested block"
            )
        tx = self._tx
        tx.__enter__()
        holder = self._holder
        if holder.taker is None:
            try:
                self._engine.lock(LOCK_NAME)
            except BaseException as exc:
                tx.__exit__(type(exc), exc, exc.__traceback__)
                raise
            holder.taker = self
        self._thread = threading.get_ident()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        thread = self._thread
        if thread is None:
            raise BlockRefused("this documents.lock(...) block is not open: never entered, or ended already")
        if thread != threading.get_ident():
            raise BlockRefused(
                "a documents.lock(...) block ends on the thread that entered it: __exit__ called from another "
                "thread; nothing was committed or rolled back"
            )
        try:
            self._tx.__exit__(exc_type, exc, tb)
        except BlockRefused:
            raise  # refused before anything changed: the block stays open
        except BaseException:
            self._ended()  # committed or rolled back, and raising for it (a doomed transaction, say)
            raise
        self._ended()

    def _ended(self) -> None:
        self._thread = None
        holder = self._holder
        if holder.taker is self:
            holder.taker = None
