"""``durastate.aio``: every facet from ``async`` code, one copy of the logic.

::

    from durastate import aio

    async with aio.open("data/app.db") as store:
        await store.kv.put(b"run-1", b"cfg", b"model", b"small")
        async for key, value in store.kv.scan(b"run-1", b"cfg"):
            ...
        job = await store.queues.claim("jobs", lease=30, wait=5)
        await store.transact(lambda s: s.kv.incr(b"run-1", b"stats", b"done"))

``open()`` takes the arguments of ``durastate.open`` and returns an
``AsyncStore`` whose facets (``kv``, ``queues``, ``documents``, ``events``,
``records``, ``presence``) have the sync facets' methods, awaited. They
are generated from the sync classes (``durastate.aio._build``), so the
rules, validation and errors are the sync facets' own. Where a call runs
(inline on the loop thread for SQLite files, handed to a worker when the
file is locked, and at ``durability="full"`` for every call that may
write; on a worker per pool connection for PostgreSQL) is
described in ``durastate._aio``: an uncontended SQLite call costs what the
sync call costs, and the loop never sleeps on a lock.

Transactions, two ways, both one atomic commit on one connection:

* ``await store.transact(fn, *args)`` runs the sync callable
  ``fn(sync_store, *args)`` inside ``sync_store.transaction()`` and returns
  its result. The fastest way (on SQLite it runs inline when the file is
  not locked: ``BEGIN IMMEDIATE`` takes the lock before ``fn`` runs, so a
  refusal happens before ``fn`` did anything). ``fn`` must not block; it
  is sync code, so no other coroutine runs (or sees its writes) until it
  returns.
* ``async with store.transaction() as tx:`` holds a transaction across
  awaits, on a thread pinned to the block: calls on ``tx``, and calls on
  ``store`` made by the same task inside the block, join it; other
  coroutines (tasks started inside the block included) never do and do not
  see its writes before the commit. It commits when the block ends and
  rolls back on any exception, cancellation included. On SQLite it holds
  the write lock for the whole block: other writers wait (on workers, not
  on the loop). Nested blocks are savepoints, each a new
  ``store.transaction()``: one object is one block at a time (entering it
  while it is open raises ``InvalidRequest``; once ended it may be entered
  again).

The sync API's per-thread ambient transaction never leaks into async code:
no transaction is ever left open on the loop thread between two calls.

Cancellation (a cancelled ``await`` on any facet; ``docs/guide/async.md``,
"Cancellation and timeouts"): a call either completes or is undone, never
half done, and is over before the ``CancelledError`` reaches the caller: a
call running on a worker is waited for (it cannot be interrupted; a second
cancel stops the wait), one still queued never starts. Every write is
atomic, so a cancelled write either committed or did nothing. A cancelled
``queues.claim`` or ``events.claim_available``/``claim_any`` whose claim was
taken anyway is released first (due again at once, waiters woken; the
delivery counts as an attempt, as a crashed worker's would).
``queues.pop`` is at-most-once: a pop cancelled after it took its item
loses it, exactly as a consumer dying after ``pop`` would. A cancelled
``transact`` rolls back unless its commit had begun (on PostgreSQL a
transaction's writes travel with its COMMIT in one flight, so a write
waiting for another transaction's row lock waits inside the commit:
cancelling it then does not undo it, it commits once the lock is free, and
the caller waits for that); a cancelled ``async with`` block rolls back, and
its commit or rollback once begun is carried to its end. A wait (``wait=``)
holds nothing while it waits (on PostgreSQL the store's listening
connection wakes it on the loop; elsewhere it polls every 50 ms on the
loop), so cancelling it is always clean. A cancelled ``open`` closes the
store it made. ``await store.close()`` (carried to its end even if
cancelled) waits until no worker thread is inside a call, rolls back the
blocks other tasks left open, then closes the connections.

Iterators: ``kv.scan``/``kv.log``/``documents.iter_keys`` return async
iterators (pages read as they are consumed; argument errors surface at the
first step); ``events.stream`` is an async iterator that waits for new
events on the loop (no thread is held while it waits) and ends at
``aclose()`` or when the store closes.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Callable, Coroutine, Generator
from types import CoroutineType, TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack

from .. import store as _store
from .._aio import LEAVE, AsyncRunner
from ..errors import ConfigurationError, InvalidRequest
from ..retention import MaintenanceReport
from ..store import OpenOptions, Store
from ._build import PinnedBlock, runner_for

# The facades by name, for ``from durastate.aio import AsyncKV`` (a test keeps
# this list equal to the registry's facades).
from ._facades import (
    FACADE_OF,
    FACADES,
    AsyncClaim,
    AsyncDocuments,
    AsyncEvents,
    AsyncFacets,
    AsyncKV,
    AsyncPresence,
    AsyncQueues,
    AsyncRecords,
    AsyncScopedKV,
)

__all__ = [
    "AsyncClaim",
    "AsyncDocuments",
    "AsyncEvents",
    "AsyncKV",
    "AsyncPresence",
    "AsyncQueues",
    "AsyncRecords",
    "AsyncScopedKV",
    "AsyncStore",
    "OpeningStore",
    "open",
]

T = TypeVar("T")
P = ParamSpec("P")


class _RolledBack(Exception):
    """Raised inside ``transact``'s transaction when its caller was cancelled before the commit."""


def open(
    url: str | os.PathLike[str] | None = None,
    *,
    workers: int | None = None,
    **options: Unpack[OpenOptions],
) -> OpeningStore:
    """Open an ``AsyncStore``: every keyword option of ``durastate.open``, plus ``workers``.

    Use it either way::

        store = await aio.open(url)          # close it with ``await store.close()``
        async with aio.open(url) as store:   # closed when the block ends
            ...
        async with await aio.open(url) as store:   # the same, spelled with await
            ...

    ``workers``: threads for calls that cannot run inline (default: the
    engine's ``capabilities.max_concurrency``, one per pool connection on
    PostgreSQL; 8 for an engine without a bound, such as SQLite).
    Opening (and migrating) runs on a thread, so it never blocks the loop.
    ``workers`` is checked when ``open`` is called; the store is opened (and
    every other option checked) when the result is awaited or entered.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigurationError(f"workers must be an int >= 1, got {workers!r}")
    return OpeningStore(_open(url, workers, options))


async def _open(url: str | os.PathLike[str] | None, workers: int | None, options: OpenOptions) -> AsyncStore:
    opening = asyncio.ensure_future(asyncio.to_thread(functools.partial(_store.open, url, **options)))
    try:
        store = await asyncio.shield(opening)
    except asyncio.CancelledError:
        # The open goes on on its thread: the store it makes is closed, not leaked (its threads, connections,
        # file handles). Waited for, as a cancelled call is; a second cancel stops the wait, not the closing.
        try:
            await asyncio.wait({opening})
        except asyncio.CancelledError:
            opening.add_done_callback(_close_opened)
            raise
        _close_opened(opening)
        raise
    if workers is None:
        workers = store.engine.capabilities.max_concurrency or 8
    try:
        runner = AsyncRunner(store.engine, workers=workers, name="durastate-aio")
    except BaseException:
        store.close()
        raise
    return AsyncStore(store, runner)


def _close_opened(opening: asyncio.Future[Store]) -> None:
    """Close the store a cancelled ``aio.open`` made (if it made one: a failed open has nothing to close)."""
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


class OpeningStore(Coroutine[Any, Any, "AsyncStore"]):
    """What ``aio.open`` returns: await it for the ``AsyncStore``, or use it as ``async with``.

    It is a coroutine (``asyncio.run``, ``create_task`` and ``gather`` take it
    as they took the coroutine ``open`` used to be), and an async context
    manager that closes the store when the block ends. Awaited or entered
    once; a second await or entry raises ``InvalidRequest`` (it would open a
    second store behind the caller's back). Never awaited nor entered,
    nothing is opened, and no "never awaited" warning is printed.
    """

    __slots__ = ("_opening", "_running", "_store")

    def __init__(self, opening: Coroutine[Any, Any, AsyncStore]) -> None:
        self._opening: Coroutine[Any, Any, AsyncStore] | None = opening
        self._running: Coroutine[Any, Any, AsyncStore] | None = None
        self._store: AsyncStore | None = None

    def _take(self) -> Coroutine[Any, Any, AsyncStore]:
        opening, self._opening = self._opening, None
        if opening is None:
            raise InvalidRequest("this aio.open(...) was already awaited or entered: call aio.open again")
        return opening

    def __await__(self) -> Generator[Any, None, AsyncStore]:
        return self._take().__await__()

    # The coroutine protocol, for callers that drive it as one (asyncio.run, tasks).
    def send(self, value: Any) -> Any:
        if self._running is None:
            self._running = self._take()
        return self._running.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if self._running is None:
            self._running = self._take()
        return self._running.throw(typ, val, tb)

    def close(self) -> None:
        for coroutine in (self._opening, self._running):
            if coroutine is not None:
                coroutine.close()
        self._opening = None

    async def __aenter__(self) -> AsyncStore:
        self._store = await self._take()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.close()

    def __del__(self) -> None:
        if self._opening is not None:
            self._opening.close()


class AsyncStore(AsyncFacets):
    """The async store: facets, transactions, close (see the module docstring).

    One facade per facet the sync store hands out (``durastate.facets``),
    made at its first use, as the sync store makes its facets.
    """

    def __init__(self, store: Store, runner: AsyncRunner, *, owner: AsyncStore | None = None) -> None:
        self._store = store
        self._runner = runner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        # Only reached when ``name`` is not set yet: a facet's first use here.
        facade = FACADE_OF.get(name)
        if facade is None or "_store" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        # The sync store's facet (ConfigurationError if the store was opened without it).
        made = self.__dict__[name] = FACADES[facade](getattr(self._store, name), self._runner)
        return made

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def closed(self) -> bool:
        return self._store.closed or self._runner.closed

    async def transact(self, fn: Callable[Concatenate[Store, P], T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(sync_store, *args, **kwargs)`` in one transaction; its result.

        Commits when ``fn`` returns, rolls back if it raises (the exception
        propagates) or if this call is cancelled before the commit.
        ``sync_store`` is the underlying ``durastate.Store``: its facets are
        the sync ones. Inside an ``async with store.transaction()`` block of
        the same task, ``fn`` runs in that transaction (as a savepoint).
        ``fn`` is sync code: a coroutine function is refused
        (``InvalidRequest``) before anything runs, and a result that is a
        coroutine is closed and refused, the transaction rolled back.
        """
        if not callable(fn):
            raise InvalidRequest(f"transact needs a callable, got {type(fn).__name__}")
        if inspect.iscoroutinefunction(fn):
            raise InvalidRequest(
                "transact runs a sync function in one transaction; got a coroutine function "
                f"{getattr(fn, '__qualname__', fn)!r}: use `async with store.transaction() as tx:` "
                "to await inside a transaction"
            )
        return await self._transact(fn, args, kwargs, repeatable=False)

    async def _transact(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], *, repeatable: bool
    ) -> T:
        """``transact``; ``repeatable``: ``fn`` may run twice (``AsyncRunner.call_repeatable``)."""
        cancelled: list[bool] = []  # appended to when the caller is cancelled
        store = self._store

        def body() -> T:
            with store.transaction():
                result = fn(store, *args, **kwargs)
                if isinstance(result, CoroutineType):
                    result.close()  # never awaited: no warning later
                    raise InvalidRequest(
                        "transact runs a sync function in one transaction; "
                        f"{getattr(fn, '__qualname__', fn)!r} returned a coroutine, which would never run: "
                        "the transaction rolled back"
                    )
                if cancelled:
                    raise _RolledBack
            return result

        runner = runner_for(self._runner)
        # Told at once, before a call in flight is waited for: a body still running then rolls back.
        if repeatable:
            return await runner.call_repeatable(body, (), {}, functools.partial(cancelled.append, True))
        return await runner.call(body, (), {}, on_cancel=functools.partial(cancelled.append, True))

    async def maintain(self, *, max_rows: int | None = None, vacuum: bool = False) -> MaintenanceReport:
        """``Store.maintain()`` on a worker thread (it commits batch by batch; the loop keeps running).

        Cancelling the await does not stop a sweep already running, nor
        wait for it (the one call that does not, ``IfCancelled.LEAVE``: a
        timeout on a long sweep is honoured at once): it finishes its
        batches (each one commits on its own, so nothing is half done) and
        its report is dropped; ``close()`` waits for it.
        """
        return await self._runner.on_thread(
            self._store.maintain, (), {"max_rows": max_rows, "vacuum": vacuum}, if_cancelled=LEAVE
        )

    def transaction(self) -> PinnedBlock[AsyncStore]:
        """``async with store.transaction() as tx:``: one transaction across awaits (see the module docstring)."""
        store, owner = self._store, self._owner or self
        return PinnedBlock(
            self._runner,
            store.transaction,
            lambda pinned: AsyncStore(store, pinned, owner=owner),
            "store.transaction()",
        )

    async def close(self) -> None:
        """Refuse new calls, wait for calls on workers to finish, close the connections. Idempotent.

        Transaction blocks other tasks left open (abandoned, or cancelled
        and not yet resumed) are rolled back first, each on its own thread:
        nothing of them commits. Carried to its end even if cancelled (the
        ``CancelledError`` is raised once the store is closed).
        """
        if self._owner is not None:
            raise TypeError("close the store, not a transaction's view of it")
        try:
            await self._runner.aclose()
        finally:
            # On the loop's thread: no inline call can be running on it now.
            self._store.close()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<durastate.aio.AsyncStore {self.url}{' (closed)' if self.closed else ''}>"
