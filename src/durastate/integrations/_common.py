"""What the framework integrations share: whose store it is, and the one async path.

Whose store: an integration object either opens its store (``url``, or
LangGraph's ``from_url``) and closes it on ``close()``, or borrows one
(``store=``, a ``durastate.Store``) and leaves it open. ``StoreHolder`` is
the ``url``/``store=`` form; ``Holder`` is what both forms share.

The async path: an integration's coroutines run its synchronous
implementation (the one copy of the logic) through ``AsyncCalls``, which
each integration object makes when it is built: a ``durastate.aio.AsyncStore``
wrapping the sync store, with a ``durastate._aio.AsyncRunner`` of its own on
the store's engine. Owned or borrowed, the store is wrapped the same way; the
runner belongs to the integration object and ``close()``/``aclose()`` end it
(waiting for calls still on its worker threads) before an owned store is
closed. A borrowed store must outlive the integration objects on it: close
them first (closing the store does not reach them: their worker threads stay
until they are closed or garbage-collected). An object dropped without
``close()`` has its runner's workers ended when it is collected (``_Reaper``),
without waiting for calls still running. So calls run exactly as ``durastate.aio`` runs a facet's
(``durastate._aio`` says where): on a SQLite file inline on the event loop's
thread, no thread hop, handed to a worker only when another connection holds
the write lock (the loop never waits on it); on PostgreSQL and ``memory:`` on
worker threads. Four ways in, chosen per method by what the sync method
does:

* ``call(fn, *args)``: for a method that changes nothing, or whose changes
  are one statement or one transaction of its own with nothing changed
  before it (SQLite then refuses it with BUSY before it changed anything,
  so it can be run again on a worker). Never for a method making two
  changes outside one transaction: a BUSY on the second, after the first
  committed, cannot be handed off and would reach the caller.
* ``read(fn, *args)``: for a method that never writes. As ``call``, and
  inline on a SQLite file at ``durability="full"`` too, where ``call``
  runs on a worker (a commit's fsync must not stall the loop; a read
  commits nothing). A method that may write, even rarely (an upkeep in
  passing), goes through ``call``.
* ``transact(fn, *args)``: ``fn(*args)`` inside one transaction
  (``AsyncStore.transact``): always safe inline (``BEGIN IMMEDIATE`` is
  refused before ``fn`` runs), and a caller cancelled before the commit
  rolls it back. The LangGraph saver's writes, the LangGraph store's
  batches that put or delete, and the LangChain classes' writes go this
  way (each is one transaction or statement already, so the cost is the
  outer ``BEGIN``/``COMMIT`` and a savepoint for the inner one).
* ``iterate(make)``: ``make()`` returns a sync paging iterator; the result
  is an async generator over it (``durastate.aio``'s ``PagedIterator``: each
  step a read, inline on SQLite, batches of items per worker hop elsewhere).

``to_the_end(awaitable)`` is for frameworks whose contract says a mutation
is carried to its end even if its caller is cancelled (the OpenAI Agents
SDK's sessions): the cancellation is raised once the outcome is settled.

eventsourcing and huey are synchronous frameworks: their integrations have
no coroutines and hold their stores their own way (not through this module).

Cancellation, as in ``durastate.aio``: a call either completes or leaves
nothing behind. An inline call cannot be interrupted (it never awaits); a
``transact`` cancelled before its commit rolls back (on the worker, before
the worker counts as idle); ``close()`` waits for the workers, so no call is
still running once it returns.

Sync calls after async ones on the same thread: a thread that ran a call
inline keeps its connection at busy timeout 0 while its event loop runs; a
*sync* call made there once no loop runs (after ``asyncio.run`` returned)
waits for a held write lock as any sync call does (the engine puts the busy
timeout back on the first refusal: ``SqliteEngine.no_wait_changes``;
``tests/integrations/test_async_path.py`` checks it).
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from .. import store as _store
from .._aio import AsyncRunner, to_the_end
from .._validate import fail
from ..aio import AsyncStore
from ..aio._build import PagedIterator
from ..errors import StoreClosed

__all__ = ["AsyncCalls", "Holder", "StoreHolder", "borrowed", "check_source", "to_the_end"]

T = TypeVar("T")
Self = TypeVar("Self", bound="Holder")


def _without_store(_store: _store.Store, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    return fn(*args, **kwargs)


class AsyncCalls:
    """An integration object's way from coroutines to its sync methods (see the module docstring).

    ``store``: the sync store (owned or borrowed); ``name``: the worker
    threads' name prefix.
    """

    def __init__(self, store: _store.Store, name: str) -> None:
        self.name = name
        self.runner = AsyncRunner(store.engine, name=name)
        self.astore = AsyncStore(store, self.runner)

    def _check_open(self) -> None:
        # The runner refuses too, but would blame the store (a borrowed one is still open).
        if self.runner.closed:
            raise StoreClosed(f"{self.name} is closed")

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``: no changes, or one statement or one transaction of changes (see above)."""
        self._check_open()
        return await self.runner.call(fn, args, kwargs)

    async def read(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, which changes nothing: inline wherever the engine runs reads inline (see above)."""
        self._check_open()
        return await self.runner.call(fn, args, kwargs, reads=True)

    async def transact(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in one transaction; rolled back if the caller is cancelled before it commits."""
        self._check_open()
        return await self.astore.transact(_without_store, fn, args, kwargs)

    async def transact_repeatable(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``transact`` of a ``fn`` that may run twice: a pure write transaction whose answers nobody reads.

        On PostgreSQL it is sent from the event loop's thread and only its
        COMMIT's answer awaited (``AsyncRunner.call_repeatable``); an
        attempt that would wait is abandoned before its COMMIT and ``fn``
        runs again on a worker, so ``fn`` must change nothing outside the
        store before it returns.
        """
        self._check_open()
        return await self.astore._transact(_without_store, (fn, args, kwargs), {}, repeatable=True)

    async def iterate(self, make: Callable[[], Iterator[T]]) -> AsyncGenerator[T, None]:
        """An async generator over ``make()`` (called at the first step, so its errors surface there).

        A generator, not just an iterator: LangChain's suite requires one.
        """
        items: PagedIterator = PagedIterator(self.runner, make)
        try:
            async for item in items:
                yield item
        finally:
            await items.aclose()

    def close(self) -> None:
        """Refuse new calls; block until no worker is inside one."""
        self.runner.close(wait=True)

    async def aclose(self) -> None:
        """``close()`` without blocking the event loop."""
        await self.runner.aclose()


class _Reaper:
    """One daemon thread per process ending the runners of integration objects collected unclosed.

    A ``Holder`` dropped without ``close()`` would leave its runner's worker
    threads blocked on their queue forever (they keep the runner alive; the
    runner does not keep the ``Holder``). Its ``weakref.finalize`` hands the
    runner here instead of closing it itself: a finalizer runs on whatever
    thread collected the object (an event loop's included), possibly inside
    the runner's own locked code, so it must neither block nor take a lock.
    ``SimpleQueue.put`` is safe there (reentrant, never blocks); this thread
    then calls ``close(wait=False)``: no new calls, the workers end once the
    calls queued before are done.

    Started by the first ``Holder`` built (never from a finalizer: starting
    a thread takes locks); a forked child starts its own.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._queue: queue.SimpleQueue[AsyncRunner] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    thread = threading.Thread(target=self._run, name="durastate-integration-reaper", daemon=True)
                    thread.start()
                    self._thread = thread

    def reap(self, runner: AsyncRunner) -> None:
        """From a finalizer: have ``runner`` closed on the reaper's thread."""
        self._queue.put(runner)

    def _run(self) -> None:
        get = self._queue.get
        while True:
            runner = get()
            try:
                runner.close(wait=False)
            except Exception:  # never end the thread: later runners would never be closed
                pass
            del runner  # not kept alive while the thread waits for the next


_REAPER = _Reaper()
os.register_at_fork(after_in_child=_REAPER._reset)


class Holder:
    """``self.store`` (owned or borrowed) and ``self._aio``, its ``AsyncCalls``; closing both.

    Subclasses call ``_hold`` once, from their constructor.
    """

    store: _store.Store
    _aio: AsyncCalls
    _owns_store: bool
    _reaped: weakref.finalize[[AsyncRunner], Holder]  # closes the runner if this object is collected unclosed
    # Set by close()/aclose(): the subclass's calls refuse from then on (its
    # own check, with its own name in the message), even on a borrowed store.
    _closed: bool = False

    def _hold(self, store: _store.Store, *, owned: bool, name: str) -> None:
        self.store = store
        self._owns_store = owned
        self._aio = AsyncCalls(store, name)
        _REAPER.start()
        # atexit=False: at exit durastate._aio waits for the calls still running instead.
        self._reaped = weakref.finalize(self, _REAPER.reap, self._aio.runner)
        self._reaped.atexit = False

    def close(self) -> None:
        """Refuse further calls, wait for those on worker threads; close the store if this object opened it.

        Idempotent; a borrowed store stays open. From an event loop's thread
        prefer ``await aclose()``, which waits for the workers without
        blocking the loop.
        """
        self._closed = True
        self._reaped.detach()
        self._aio.close()
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        """``close()`` for async code: the wait for worker threads does not block the loop."""
        self._closed = True
        self._reaped.detach()
        await self._aio.aclose()
        if self._owns_store:
            self.store.close()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def borrowed(store: object) -> _store.Store:
    """``store``, checked as a borrowed store (``store=``): a ``durastate.Store``, still open.

    A closed one is refused here, when the integration object is built, not
    at its first call. Shared by every integration taking ``store=``.
    """
    if not isinstance(store, _store.Store):
        fail(f"store must be a durastate.Store, got {type(store).__name__}")
    if store.closed:
        raise StoreClosed(f"store= is closed ({store.url}): pass an open durastate.Store")
    return store


def check_source(url: object, store: object, **open_options: object) -> None:
    """The rules of ``url`` (open a store) and ``store=`` (borrow one), checked before anything is opened.

    Not both; a borrowed store is ``borrowed``'s; ``open_options`` (given as
    ``None`` when the caller left them out) apply only to a store opened
    here: with ``store=`` they are refused, not dropped (the borrowed store
    keeps the options it was opened with).
    """
    if url is not None and store is not None:
        fail("pass url or store=, not both")
    if store is not None:
        given = sorted(name for name, value in open_options.items() if value is not None)
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            fail(f"{', '.join(given)} only {verb} when a store is opened here (url=); store= keeps its own options")
        borrowed(store)


class StoreHolder(Holder):
    """A ``Holder`` made from ``url`` (opened here, closed here) or ``store=`` (borrowed), never both.

    ``url=None`` without ``store=`` opens durastate's default store. Arguments
    are checked before anything is opened. ``name``: the async worker
    threads' name prefix.
    """

    def __init__(self, url: str | None, store: _store.Store | None, *, name: str = "durastate-integration") -> None:
        check_source(url, store)
        opened = _store.open(url) if store is None else store
        self._hold(opened, owned=store is None, name=name)
