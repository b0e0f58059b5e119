"""The one transaction state machine every engine runs (``Transaction``).

``transaction()`` / ``read_transaction()`` return a ``Transaction``: the
one state machine of every engine (see its docstring for the rules: a
failed statement dooms the transaction unless a savepoint containing it
rolls back; refusals never doom; ``close()`` makes the block roll back).
Engines supply only its primitives (``_tx_begin``, ``_tx_commit``, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from ..errors import DurastateError, InvalidRequest, StoreClosed

if TYPE_CHECKING:
    from .base import EngineBase


class TransactionFields:
    """One thread's view of its open transaction on one engine (a plain object: ``PerThread`` holds one per thread).

    ``depth`` counts open blocks (0: none; 1: the transaction; 2+: nested
    savepoints). ``doomed`` is the first statement error not yet undone and
    ``doomed_level`` the depth it happened at: rolling back the savepoint of
    level L undoes it only when ``doomed_level >= L`` (the failure happened
    inside that savepoint). Engines subclass this for their own per-thread
    fields (connection, cursor, ...).
    """

    depth: int = 0
    doomed: DurastateError | None = None
    doomed_level: int = 0
    # The level of each block that ended while blocks opened inside it were still open (``Transaction``'s
    # unwinding), in order: a block opened before the i-th of them (``Transaction._unwinds`` <= i) at a deeper
    # level ended with it. Read only by a block whose count differs from ``len(unwound)``.
    unwound: tuple[int, ...] = ()


class TransactionState(TransactionFields, threading.local):
    """``TransactionFields`` as a ``threading.local``: for an engine that sets ``_local`` itself.

    The documented way for an engine outside this package
    (docs/third-party-engine.md). The built-in engines set ``_tls`` to a
    ``PerThread`` of plain fields instead (see there: why).
    """


_S = TypeVar("_S")


class PerThread(threading.local, Generic[_S]):
    """Each thread's own ``state``, made by ``factory()`` the first time the thread asks.

    The state is a plain object in a ``threading.local``, not the local
    itself: every attribute read on a ``threading.local`` looks up the
    thread's dictionary first (about 4x a plain attribute's cost), and a
    single write statement reads and writes its thread's state about
    seven times (bench/RESULTS.md, "writers2"). One lookup of ``state``,
    then plain attributes.
    """

    def __init__(self, factory: Callable[[], _S]) -> None:
        self.state = factory()


class SharedState:
    """Holds a ``TransactionState`` (a ``threading.local`` already) where a ``PerThread`` would be."""

    __slots__ = ("state",)

    def __init__(self, state: TransactionFields) -> None:
        self.state = state


class BlockRefused(InvalidRequest):
    """A block used against its protocol, refused before anything changed: every open block is as it was.

    Raised by ``Transaction`` when it is entered while open, or ended when it
    is not open or from a thread that did not enter it (not when it ends
    before a block opened inside it: that ends both, ``Transaction._unwind``,
    with a plain ``InvalidRequest``). An ``InvalidRequest`` to callers; code that
    wraps a block (``documents.lock``, ``aio``'s ``async with`` blocks) tells
    by it that the block it holds is still open.
    """


def aborted_error(doomed: DurastateError) -> DurastateError:
    """The error a statement gets in a transaction an earlier failure doomed."""
    return type(doomed)(f"transaction aborted by an earlier failed statement: {doomed}")


class Transaction:
    """The one transaction state machine; engines supply its primitives.

    Outermost block: ``_tx_begin(read, lock)`` ... ``_tx_commit()`` or
    ``_tx_rollback()``. Nested blocks: ``_tx_savepoint(name)`` ...
    ``_tx_release(name)`` or ``_tx_rollback_to(name)`` (which also releases).

    The rule, on every engine:

    * any exception leaving a block (``BaseException`` included) rolls that
      block back: the whole transaction, or the nested block's savepoint;
    * a statement that fails in the database (the engine calls
      ``EngineBase._doom``) dooms the transaction: later statements and
      nested blocks are refused with the same error type, and the block
      raises on exit and commits nothing, even when the caller caught the
      error. Only rolling back a savepoint opened *before* the failure
      (one that contains it) undoes the doom;
    * refusals raised in Python (argument errors, a lost compare-and-swap,
      a superseded attempt) never reach the engine and never doom;
    * after ``close()`` the next statement, nested block or commit raises
      ``StoreClosed`` and the transaction rolls back.

    One object is one block at a time: entering it again while it is open
    (``with tx:`` inside ``with tx:``, or from another thread) raises
    ``InvalidRequest`` and leaves the open block as it was (a nested block
    is a new ``transaction()``). Once it has ended it may be entered again,
    a new block. It ends on the thread that entered it, innermost block
    first: ``__exit__`` on another thread or on an object that is not open
    (never entered, or ended already) raises ``InvalidRequest``
    (``BlockRefused``) and commits or rolls back nothing. Ended while a block
    opened inside it is still open (out of order), it ends with those
    blocks, all rolled back (``_unwind``). ``_level`` is the open block's
    depth, 0 when not open.
    """

    __slots__ = ("_engine", "_level", "_lock", "_read", "_state", "_unwinds")

    def __init__(self, engine: EngineBase, *, read: bool = False, lock: str | None = None) -> None:
        self._engine = engine
        self._read = read
        self._lock = lock
        self._level = 0

    def __enter__(self) -> None:
        if self._level:
            raise self._already_open()
        engine = self._engine
        state = engine._tls.state
        self._state = state
        if engine._closed:
            raise StoreClosed(f"{engine.url}: store is closed")
        if state.depth == 0:
            engine._tx_begin(self._read, self._lock)
        else:
            if state.doomed is not None:
                raise aborted_error(state.doomed)
            engine._tx_savepoint(f"ds_sp{state.depth}")
            self._unwinds = len(state.unwound)  # (an outermost block is never ended by another: not needed)
        state.depth += 1
        self._level = state.depth

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        engine = self._engine
        level = self._level
        if not level:
            raise self._not_open()
        state = self._state
        if engine._tls.state is not state:
            raise self._other_thread()
        if level != state.depth or (level > 1 and self._unwinds != len(state.unwound)):
            if level > state.depth or (level > 1 and any(at < level for at in state.unwound[self._unwinds :])):
                self._level = 0
                raise InvalidRequest(
                    "this block ended already: the block it was opened in ended first, while this one was open, "
                    "and rolled both back; nothing of this block was committed"
                )
            if level != state.depth:
                return self._unwind(level, state, exc_type is None)
        self._level = 0
        state.depth = level - 1
        doomed = state.doomed
        if level > 1:
            savepoint = f"ds_sp{level - 1}"
            contained = doomed is not None and state.doomed_level >= level
            if exc_type is None and not contained and not engine._closed:
                engine._tx_release(savepoint)
                return
            # Roll back on anything; a failing rollback (connection gone)
            # must not mask the block's own exception.
            engine._tx_rollback_to(savepoint)
            if contained:
                state.doomed = None
            if exc_type is None:
                if engine._closed:
                    raise StoreClosed(f"{engine.url}: store closed inside the transaction; it rolled back")
                assert doomed is not None
                raise type(doomed)(f"block rolled back: a statement inside it failed: {doomed}")
            return
        state.doomed = None
        if exc_type is not None:
            engine._tx_rollback()
            return
        if doomed is not None:
            engine._tx_rollback()
            raise type(doomed)(f"transaction rolled back: a statement inside it failed: {doomed}")
        if engine._closed:
            engine._tx_rollback()
            raise StoreClosed(f"{engine.url}: store closed inside the transaction; it rolled back")
        engine._tx_commit()

    def _unwind(self, level: int, state: TransactionFields, raising: bool) -> None:
        """``__exit__`` out of order, at ``level`` while the thread is at ``state.depth``.

        A block that ends while blocks opened inside it are still open (a
        generator holding a block abandoned inside another, ``__exit__``
        called by hand) ends with them: all of them are rolled back, nothing
        of them committed, and the thread is left as it was before this
        block began, so nothing the thread does afterwards is kept in an
        open transaction nobody will end (with the blocks left open, every
        later write of the thread was lost at close). Without an exception
        passing through, ``InvalidRequest`` says so; with one, that one goes
        on (a rollback is what it asked for). A block that an enclosing
        block ended this way, ending later, is refused as not open
        (``__exit__``: told by ``unwound``, even when new blocks have been
        opened to its depth since).
        """
        inside = state.depth - level
        engine = self._engine
        self._level = 0
        state.depth = level - 1
        state.unwound += (level,)
        if level > 1:
            engine._tx_rollback_to(f"ds_sp{level - 1}")  # the savepoints opened inside it go with it
            if state.doomed is not None and state.doomed_level >= level:
                state.doomed = None
        else:
            state.doomed = None
            engine._tx_rollback()
        if raising:
            blocks = "a block opened inside it was" if inside == 1 else f"{inside} blocks opened inside it were"
            raise InvalidRequest(
                f"a transaction block ended while {blocks} still open (__exit__ out of order, or a generator "
                "holding a block left unfinished inside it): this block and those were rolled back, nothing of "
                "them committed; end the blocks opened inside a block first, innermost first"
            )

    # The refusals of misuse, off the common path (``__enter__``/``__exit__`` only test ``_level`` and the state).

    def _already_open(self) -> BlockRefused:
        kind = "read transaction" if self._read else "transaction"
        again = "read_transaction()" if self._read else "transaction()"
        return BlockRefused(
            f"this {kind} is already open (one object is one block at a time); "
            f"call store.{again} again for a nested block"
        )

    def _not_open(self) -> BlockRefused:
        if not hasattr(self, "_state"):  # set by the first __enter__
            return BlockRefused("the transaction was never entered: __exit__ without __enter__")
        return BlockRefused("the transaction is not open: it ended already (__exit__ called twice?)")

    def _other_thread(self) -> BlockRefused:
        return BlockRefused(
            "a transaction ends on the thread that entered it: __exit__ called from another thread; "
            "nothing was committed or rolled back"
        )
