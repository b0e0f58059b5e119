"""Run the synchronous core from ``async`` code, without a second copy of it.

The facets are synchronous; the async front ends (``durastate.aio``, the a2
and pi-durable adapters) call them through one ``AsyncRunner`` per store.

Where a call runs:

* **SQLite file stores: inline, on the event loop's thread**, on that
  thread's own connection set to busy timeout 0 (``no_wait_changes``). An
  uncontended call costs what the sync call costs. Two coroutines share the
  loop thread's connection safely: a facet call never awaits, so calls on
  one loop never interleave inside one, and no transaction is ever left
  open on the loop thread between calls. When the database is locked by
  another connection SQLite answers BUSY at once instead of sleeping; if
  the call had changed nothing yet (its change count is unchanged: WAL
  takes the write lock at the first write or ``BEGIN IMMEDIATE``, before
  any change) it is handed to a worker thread, whose connection waits for
  the lock as a sync call would. The loop never sleeps on a lock. The
  timeout stays 0 while a loop runs on the thread (a sync call made there
  then refuses a held lock too); once none runs (a sync call after
  ``asyncio.run`` returned), the thread's first statement refused for a
  lock puts the store's busy timeout back and runs again, waiting as sync
  calls do. Nothing is checked on statements that are not refused.
* **PostgreSQL and ``memory:`` stores: on a worker thread** (one per pool
  connection on PostgreSQL): a network round trip must not block the loop,
  and a ``memory:`` database has no WAL (its ``COMMIT`` can be refused after
  changes were made, so the inline rule above would not be safe).

Cancellation: an inline call cannot be interrupted (it never awaits), so it
completes. A call on a worker thread keeps running when its awaiting
coroutine is cancelled; if the caller gave an ``undo``, it is applied to
the result the caller never received (a cancelled claim is released), on
the worker, before the worker counts as idle. ``close()`` refuses new calls
and waits until no worker is inside a call (undo included) before the
store's connections are closed, so no connection is ever freed under a
thread still using it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .engines.sqlite import LockBusy
from .errors import StoreClosed

if TYPE_CHECKING:
    from .engines.base import Engine

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_WORKERS = 8
PARKING_THREADS = 256  # at most this many streams wait at once per store

Undo = Callable[[Any], object]


class _Job:
    """One call handed to a worker; settles who undoes a result nobody received."""

    __slots__ = ("args", "cancelled", "delivered", "fn", "kwargs", "lock", "undo")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], undo: Undo | None):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.undo = undo
        self.lock = threading.Lock()
        self.cancelled = False  # the awaiting coroutine was cancelled first
        self.delivered = False  # the result was handed to the loop first


def _wake(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None], _done: object) -> None:
    """A worker's call is done (or was cancelled before it started): wake its awaiting coroutine."""
    if not loop.is_closed():
        try:
            loop.call_soon_threadsafe(_settle, waiter)
        except RuntimeError:  # closed since: nobody is waiting any more
            pass


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # cancelled meanwhile: the coroutine is gone already
        waiter.set_result(None)


def _undo_quietly(undo: Undo, result: Any) -> None:
    try:
        undo(result)
    except Exception:  # best effort: the lease runs out anyway
        pass


class AsyncRunner:
    """``await runner.run(fn, *args)``: ``fn`` inline or on a worker (see the module docstring).

    ``engine``: the store's engine (inline calls need a SQLite file engine);
    ``workers``: threads for calls that cannot run inline.
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        workers: int = DEFAULT_WORKERS,
        name: str = "durastate",
        _root: AsyncRunner | None = None,
    ) -> None:
        self._name = name
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._closed = False
        self._busy = 0  # calls inside a worker right now (or queued for one)
        self._idle = threading.Condition()
        # Calls of pinned runners count (and are refused after close) here.
        self._root: AsyncRunner = self if _root is None else _root
        self._pinned_idle: list[AsyncRunner] = []
        self._parking: ThreadPoolExecutor | None = None
        self._stops: weakref.WeakSet[threading.Event] = weakref.WeakSet()
        # Transaction blocks open on this store (durastate.aio): while none
        # is, a call need not look for the block its task is in.
        self.blocks_open = 0
        # The engine's no_wait_changes where calls run inline (SQLite
        # files); None elsewhere and once closed (calls then reach _submit,
        # which refuses them).
        self.no_wait: Callable[[], int] | None = None
        if engine is not None and not getattr(engine, "is_memory", True):
            self.no_wait = getattr(engine, "no_wait_changes", None)
        self._inline = self.no_wait is not None

    @property
    def root(self) -> AsyncRunner:
        """The store's runner (a pinned runner's owner; itself otherwise)."""
        return self._root

    @property
    def inline(self) -> bool:
        """Whether calls run on the loop's thread first (SQLite file stores)."""
        return self._inline

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)``; its result, or its exception."""
        return await self.call(fn, args, kwargs)

    async def call(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], undo: Undo | None = None
    ) -> T:
        """``run`` with the arguments as a tuple and a dict (one coroutine, no repacking).

        Inline first where it can (``no_wait`` is set): a call SQLite refused
        with BUSY before it changed anything goes to a worker; one that had
        changed something raises. ``undo(result)`` is applied if the caller
        is cancelled before it receives a worker's result.
        """
        no_wait = self.no_wait
        if no_wait is not None:
            before = no_wait()
            try:
                return fn(*args, **kwargs)
            except LockBusy:
                if no_wait() != before:
                    raise  # it had changed something: running it again could repeat that
        return await self.on_thread(fn, args, kwargs, undo)

    async def on_thread(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], undo: Undo | None = None
    ) -> T:
        """Run on a worker thread; ``undo`` as in ``run_undoable``."""
        job = _Job(fn, args, kwargs, undo)
        future = self._submit(self._work, job)
        # Not asyncio.wrap_future: its two-way chaining of the futures'
        # states costs the loop's thread about as much as the rest of a
        # PostgreSQL call's hop. The waiter only says "done"; the result is
        # the worker future's.
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        future.add_done_callback(functools.partial(_wake, loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            future.cancel()  # a call still queued never starts
            if undo is not None:
                with job.lock:
                    job.cancelled = True
                    delivered = job.delivered
                if delivered and not future.cancelled() and future.exception() is None:
                    # The worker had already handed the result over: undo it now.
                    try:
                        self._submit(_undo_quietly, undo, future.result())
                    except StoreClosed:
                        pass
            raise
        return cast(T, future.result())

    def _submit(self, fn: Callable[..., T], *args: Any, executor: ThreadPoolExecutor | None = None) -> Future[T]:
        root = self._root
        with root._idle:
            if root._closed:
                raise StoreClosed("the store is closed")
            root._busy += 1
        try:
            future = (executor or self._executor).submit(fn, *args)
        except BaseException:
            root._leave()
            raise
        # Done when it finished, or was cancelled before it started (a
        # cancelled await cancels a call still queued): either way no
        # thread is inside it any more.
        future.add_done_callback(root._leave)
        return future

    def _leave(self, _future: object = None) -> None:
        with self._idle:
            self._busy -= 1
            if self._busy == 0:
                self._idle.notify_all()

    # -- pinned threads (transactions that span awaits) and parked calls ---------

    def pinned(self) -> AsyncRunner:
        """A runner with one thread of its own, for a block of calls on one connection.

        Its calls never run inline; they count toward this runner's
        ``close()``. Give it back with ``unpin``.
        """
        with self._idle:
            if self._closed:
                raise StoreClosed("the store is closed")
            if self._pinned_idle:
                return self._pinned_idle.pop()
        return AsyncRunner(workers=1, name=f"{self._name}-tx", _root=self)

    def unpin(self, pinned: AsyncRunner) -> None:
        with self._idle:
            if not self._closed:
                self._pinned_idle.append(pinned)
                return
        pinned._executor.shutdown(wait=False)

    async def park(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run a call that may block for long (a stream's wait) on a thread of its own."""
        if self._parking is None:
            self._parking = ThreadPoolExecutor(max_workers=PARKING_THREADS, thread_name_prefix=f"{self._name}-park")
        return await asyncio.wrap_future(self._submit(fn, *args, executor=self._parking))

    def track_stop(self, stop: threading.Event) -> None:
        """``close()`` sets ``stop`` (a stream's), so a parked call ends before the store closes."""
        self._stops.add(stop)

    @staticmethod
    def _work(job: _Job) -> Any:
        result = job.fn(*job.args, **job.kwargs)
        if job.undo is not None:
            with job.lock:
                cancelled = job.cancelled
                job.delivered = not cancelled
            if cancelled:
                _undo_quietly(job.undo, result)
        return result

    # -- closing ---------------------------------------------------------------

    def close(self, *, wait: bool = True) -> None:
        """Refuse new calls; with ``wait``, block until no worker is inside one."""
        self._refuse()
        if wait:
            self.wait_idle()
        self._shutdown(wait)

    def _refuse(self) -> int:
        with self._idle:
            self._closed = True
            self.no_wait = None
            busy = self._busy
        for stop in list(self._stops):
            stop.set()
        return busy

    def _shutdown(self, wait: bool) -> None:
        with self._idle:
            pinned, self._pinned_idle = self._pinned_idle, []
        for executor in [self._executor, self._parking, *(p._executor for p in pinned)]:
            if executor is not None:
                executor.shutdown(wait=wait)

    def wait_idle(self) -> None:
        """Block until no call is inside (or queued for) a worker."""
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0)

    async def aclose(self) -> None:
        """``close()`` without blocking the loop: refuse new calls, wait for the workers."""
        if self._refuse():
            await asyncio.to_thread(self.wait_idle)
        self._shutdown(False)

    @property
    def closed(self) -> bool:
        return self._closed
