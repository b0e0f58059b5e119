"""Run the synchronous core from ``async`` code, without a second copy of it.

The facets are synchronous; the async front ends (``durastate.aio``, the a2
and pi-durable adapters) call them through one ``AsyncRunner`` per store.

Where a call runs:

* **SQLite file stores at ``durability="normal"``: inline, on the event loop's thread**, on that
  thread's own connection (``no_wait_changes``). An uncontended call costs
  what the sync call costs. Two coroutines share the loop thread's
  connection safely: a facet call never awaits, so calls on one loop never
  interleave inside one, and no transaction is ever left open on the loop
  thread between calls. When the database is locked by another connection
  the engine refuses the call at once with ``LockBusy`` instead of waiting
  (it never waits for the lock on a thread running an event loop:
  ``engines.sqlite_busy``); if the call had changed nothing yet (its change
  count is unchanged: WAL takes the write lock at the first write or
  ``BEGIN IMMEDIATE``, before any change) it is handed to a worker thread,
  which waits for the lock as a sync call would. The loop never sleeps on a
  lock. A sync call made on the loop's thread gets the same refusal, with
  a message saying why (it would stall the loop); once no loop runs on the
  thread (after ``asyncio.run`` returned), its calls wait as sync calls do.
* **PostgreSQL, ``memory:`` and ``durability="full"`` stores: on a worker
  thread** (one per pool connection on PostgreSQL): a network round trip
  must not block the loop; a ``memory:`` database has no WAL (its ``COMMIT``
  can be refused after changes were made, so the inline rule above would
  not be safe); at ``durability="full"`` every commit waits for an fsync,
  milliseconds in which the loop would run nothing else (the engine
  declares ``inline_async_calls=False`` then; aiosqlite, under
  AsyncSqliteSaver, likewise runs every call on its own thread). Except
  its **reads**: a call its caller declares to change nothing
  (``call(..., reads=True)``: the facades' ``READ`` methods, their
  iterators and tails, the integrations' ``AsyncCalls.read``) commits
  nothing, so waits for no fsync, and runs inline as above wherever the
  engine declares ``inline_async_reads`` (SQLite files at either
  durability). A read declared so that writes after all is still correct
  (a write meeting a held lock is refused and handed over as above), it
  only waits for its fsync on the loop's thread.

Cancellation: an inline call cannot be interrupted (it never awaits), so it
completes. Nor can a call on a worker thread (a statement in flight, a wait
for a lock): what its cancelled caller gets is ``on_thread``'s
``if_cancelled`` policy. By default (``WAIT``) a call still queued never
starts, and one already running is waited for before the ``CancelledError``
reaches the caller, so nothing of the call goes on behind its back: a write
has committed or rolled back, a ``transaction`` or ``close`` that follows
does not race with it. If the caller gave an ``undo``, it is applied to the
result the caller never received (a cancelled claim is released), on the
worker, before the worker counts as idle. A second cancel stops the wait
(the call still ends on its worker, its undo still happens). The cost: a
caller cancelled while its call waits for another connection's lock waits
with it, up to the store's ``busy_timeout``. ``FINISH`` carries the call to
its end whatever cancels come (a queued one starts anyway: a transaction
block's commit or rollback); ``LEAVE`` raises at once and lets a running
call go on (``AsyncStore.maintain``'s sweep). ``call_repeatable``, whose
COMMIT went out from the loop's thread, is the exception: a cancelled
caller leaves its answer to be collected, counted as a call in progress
(``close()`` waits for it), since that COMMIT may wait for a lock that
code after the cancel, on the same loop, releases. ``close()`` refuses new calls,
waits until no worker is inside a call (undo included), rolls back the
transaction blocks still open on pinned threads (their tasks abandoned
them), then stops the threads, so no connection is ever freed under a
thread still using it; ``aclose()`` is carried to its end even if
cancelled.
"""

from __future__ import annotations

import asyncio
import atexit
import enum
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Generator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from ._aio_jobs import WAKER, WORKERS, Inbox, Job, Undo, Workers, undo_quietly
from .engines.loop import LoopCommit, Settle, WouldWait, inline_site
from .engines.sqlite import LockBusy
from .errors import StoreClosed

if TYPE_CHECKING:
    from .engines.base import Engine

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_WORKERS = 8

__all__ = ["DEFAULT_WORKERS", "FINISH", "LEAVE", "WAIT", "WAKER", "AsyncRunner", "IfCancelled", "Undo", "to_the_end"]


class IfCancelled(enum.Enum):
    """What a call on a worker does when its awaiting caller is cancelled (``AsyncRunner.on_thread``).

    Whatever the policy, the caller then gets ``CancelledError``, and a call
    that ran is never interrupted: a statement in flight, a wait for a lock
    go on to their end.
    """

    #: A call still queued never starts; a running one is waited for (its undo too) before the
    #: ``CancelledError`` reaches the caller. A second cancel stops the wait (the call still ends on its worker).
    WAIT = "wait"
    #: The call runs to its end, even one still queued, and every cancel is waited through.
    FINISH = "finish"
    #: The ``CancelledError`` reaches the caller at once; a running call goes on (a queued one never starts).
    LEAVE = "leave"


WAIT, FINISH, LEAVE = IfCancelled.WAIT, IfCancelled.FINISH, IfCancelled.LEAVE


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception:  # best effort: an abandoned attempt's rollback (the pool replaces a broken connection)
        pass


def _settled() -> None:
    """A collected COMMIT's job when its answer came: nothing left to run."""


async def _over(job: Job, loop: asyncio.AbstractEventLoop, *, through_cancels: bool) -> bool:
    """Wait until ``job`` is settled on ``loop`` (its call over); False if a cancel stopped the wait first.

    ``through_cancels``: every cancel is waited through. Each wait has a
    waiter of its own (a cancel cancels the one it interrupts).
    """
    while not job.finished:
        job.waiter = waiter = loop.create_future()
        try:
            await waiter
        except asyncio.CancelledError:
            if not through_cancels:
                return False
    return True


def _loop_can_run(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` can still run its callbacks: not closed, running, on another thread than this one."""
    return not loop.is_closed() and loop.is_running() and asyncio._get_running_loop() is not loop


async def to_the_end(awaitable: Coroutine[Any, Any, T]) -> T:
    """``await awaitable``, carried to its end even if the caller is cancelled.

    A cancelled caller keeps waiting until the awaitable has finished (a
    write that began is committed or rolled back before the caller moves
    on, never left running behind its back), then the first
    ``CancelledError`` is raised (and the awaitable's own error, if it
    failed, is dropped). This is how the OpenAI Agents SDK's own sessions
    treat a cancelled mutation.

    The coroutine's first step runs here, in the caller's task: a call that
    completes without suspending (inline on the loop's thread, every
    uncontended SQLite write at ``durability="normal"``) cannot be
    cancelled and needs nothing more. Only one that suspends (a worker's
    call) is carried on in a task of its own, which the caller's
    cancellation does not reach (a task costs a call ~9 us of CPU).
    """
    try:
        yielded = awaitable.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    task = asyncio.ensure_future(_Resumed(awaitable, yielded))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so a failed write is not reported as "never retrieved"
        raise cancelled
    return task.result()


_STARTED = object()  # _Resumed: the yielded value is handed over


class _Resumed(Coroutine[Any, Any, T]):
    """The rest of a coroutine whose first step has run and yielded ``yielded`` (``to_the_end``), for a task to drive.

    The task's first ``send`` gets ``yielded`` (what the step gave up: a
    future to wait on, or ``None`` to yield once); every later ``send`` and
    ``throw`` goes to the coroutine, whose ``StopIteration`` ends the task
    with its value. A coroutine of its own, not an ``async def`` awaiting
    one: no frame between the task and the call on every step.
    """

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, T], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def send(self, value: Any) -> Any:
        yielded = self._yielded
        if yielded is not _STARTED:
            self._yielded = _STARTED
            return yielded
        return self._coro.send(value)

    def throw(self, *exc: Any) -> Any:
        self._yielded = _STARTED
        return self._coro.throw(*exc)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, T]:
        raise TypeError("_Resumed is driven by a task (to_the_end), not awaited")


# Runners alive in this process: at exit, calls still on their workers finish first.
_RUNNERS: weakref.WeakSet[AsyncRunner] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A runner made before the fork works in the child: threads of its own, none of the parent's calls."""
    for workers in list(WORKERS):
        workers.forget_parent()
    for runner in list(_RUNNERS):
        runner._forget_parent_calls()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _at_exit() -> None:
    for runner in list(_RUNNERS):
        runner.wait_idle()


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
        self._root: AsyncRunner = self if _root is None else _root
        self._workers = Workers(workers, name, weakref.ref(self._root))
        # Collected unclosed (nothing holds it any more; its threads hold it weakly): they end once the jobs
        # queued before are done. ``shutdown`` never blocks here, and its lock is never held by whoever drops the
        # last reference (only ``post`` and ``shutdown`` take it, and a thread inside ``post`` holds the runner).
        weakref.finalize(self, self._workers.shutdown, False).atexit = False
        self._closed = False
        self._busy = 0  # calls inside a worker right now (or queued for one)
        # The lock of every runner state change, and the condition wait_idle waits on. The hot paths (a call's
        # _enter and _leave) take the lock itself: ``with`` on a Condition runs two Python frames
        # (Condition.__enter__/__exit__) and notify_all four more, a share of a hop one coroutine waits through
        # (bench/aio.py's hop section); _leave notifies only while wait_idle waits (_idle_waiters).
        self._idle_lock = threading.RLock()
        self._idle = threading.Condition(self._idle_lock)
        self._idle_waiters = 0
        # Calls of pinned runners count (and are refused after close) at _root.
        self._pinned_idle: list[AsyncRunner] = []
        self._pinned_out: set[AsyncRunner] = set()  # handed out by pinned(), not given back yet
        # A pinned runner's open blocks, outermost first (entered and left on its thread: block_entered/_left).
        self._blocks: list[AbstractContextManager[Any]] = []
        self._inbox: Inbox | None = None  # the last loop's (a call from another loop makes its own)
        # Transaction blocks open on this store (durastate.aio): while none
        # is, a call need not look for the block its task is in.
        self.blocks_open = 0
        # The engine's no_wait_changes where it declares inline calls
        # (SQLite files); None elsewhere and once closed (calls then reach _post,
        # which refuses them).
        self.no_wait: Callable[[], int] | None = None
        if engine is not None and engine.capabilities.inline_async_calls:
            self.no_wait = engine.no_wait_changes
        self._inline = self.no_wait is not None
        # The same for calls that only read (``call(..., reads=True)``): also where the engine runs only reads
        # inline (SQLite at durability="full", inline_async_reads).
        self.no_wait_reads: Callable[[], int] | None = self.no_wait
        if engine is not None and engine.capabilities.inline_async_reads:
            self.no_wait_reads = engine.no_wait_changes
        self._inline_reads = self.no_wait_reads is not None
        # The engine's run_without_waiting where it declares loop commits (PostgreSQL); None elsewhere.
        self._without_waiting: Callable[..., tuple[Any, LoopCommit | None]] | None = None
        if engine is not None and engine.capabilities.loop_commits:
            self._without_waiting = engine.run_without_waiting
        # COMMITs whose answers are collected on a loop (call_repeatable): finished by wait_idle if the loop cannot.
        self._collecting: dict[LoopCommit, asyncio.AbstractEventLoop] = {}
        if _root is None:
            _RUNNERS.add(self)

    @property
    def root(self) -> AsyncRunner:
        """The store's runner (a pinned runner's owner; itself otherwise)."""
        return self._root

    @property
    def inline(self) -> bool:
        """Whether calls run on the loop's thread first (SQLite file stores at ``durability="normal"``)."""
        return self._inline

    @property
    def inline_reads(self) -> bool:
        """Whether calls that only read run on the loop's thread first (SQLite file stores)."""
        return self._inline_reads

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)``; its result, or its exception."""
        return await self.call(fn, args, kwargs)

    async def call(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
        *,
        reads: bool = False,
        on_cancel: Callable[[], object] | None = None,
    ) -> T:
        """``run`` with the arguments as a tuple and a dict (one coroutine, no repacking).

        Inline first where it can (``no_wait`` is set; for ``reads``, a
        call that changes nothing, ``no_wait_reads``): a call SQLite refused
        with BUSY before it changed anything goes to a worker; one that had
        changed something raises. ``undo(result)`` is applied if the caller
        is cancelled before it receives a worker's result; ``on_cancel()``
        is called on the loop as soon as the caller is cancelled, before its
        call on a worker is waited for (``transact`` then rolls back instead
        of committing).
        """
        no_wait = self.no_wait_reads if reads else self.no_wait
        if no_wait is not None:
            before = no_wait()
            try:
                return fn(*args, **kwargs)  # a lock met here is refused at once (inline_site, below)
            except LockBusy:
                if no_wait() != before:
                    raise  # it had changed something: running it again could repeat that
        return await self.on_thread(fn, args, kwargs, undo, on_cancel=on_cancel)

    async def call_repeatable(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        on_cancel: Callable[[], object] | None = None,
    ) -> T:
        """``call`` of a function that may run twice: one transaction of writes, sent from the loop's thread.

        On an engine with ``loop_commits`` (PostgreSQL) ``fn`` runs on the
        loop's thread without waiting (``Engine.run_without_waiting``) and
        only its COMMIT's answer is awaited, collected by the loop; where
        it would wait, the attempt is abandoned before its COMMIT (nothing
        applied) and ``fn`` runs again, on a worker. Elsewhere, ``call``.
        A caller cancelled while the answer is awaited leaves the
        collection running, counted as a call in progress: ``close()``
        waits for it (and finishes it if its loop has ended).
        """
        without_waiting = self._without_waiting
        if without_waiting is None:
            return await self.call(fn, args, kwargs, on_cancel=on_cancel)
        self._enter()  # StoreClosed once closed; counted until the COMMIT's answer is in, so close() waits for it
        try:
            result, commit = without_waiting(fn, args, kwargs, self._later)
        except WouldWait:
            self._leave()
            return await self.on_thread(fn, args, kwargs, on_cancel=on_cancel)
        except BaseException:
            self._leave()
            raise
        if commit is None:
            self._leave()
        else:
            await self._commit_collected(commit)
        return cast(T, result)

    def _later(self, work: Callable[[], object]) -> None:
        """Run ``work`` (an abandoned attempt's rollback) on a worker, counted as a call; nobody awaits it."""
        self._count()
        self._post_counted(Job(_quietly, (work,), {}))

    def _post_counted(self, job: Job) -> None:
        """Queue ``job``, already counted as a call, for a worker; a thread of its own once the workers are gone
        (``close(wait=False)`` while a COMMIT's answer was being collected)."""
        try:
            self._workers.post(job)
        except StoreClosed:
            threading.Thread(target=self._run_alone, args=(job,), daemon=True).start()

    def _run_alone(self, job: Job) -> None:
        try:
            job.run()
        except BaseException:  # only an undo's (run keeps the call's own), as on a worker
            pass
        finally:
            self._root._leave()
            job.notify()

    async def _commit_collected(self, commit: LoopCommit) -> None:
        """Collect ``commit``'s answer on this loop; its failure branch's error raised (see ``call_repeatable``).

        The call's count in the busy count is the collection's from here: left when the answer is in, or by the
        worker that runs the failure branch.
        """
        loop = asyncio.get_running_loop()
        inbox = self._inbox
        if inbox is None or inbox.loop is not loop:
            inbox = self._inbox = Inbox(loop)
        waiter = loop.create_future()
        job = Job(_settled, (), {}, None, waiter, inbox)
        with self._idle:
            self._collecting[commit] = loop

        def done(settle: Settle | None) -> None:
            with self._idle:
                self._collecting.pop(commit, None)
            if settle is not None:  # the answer failed: the failure branch waits, on a worker
                job.fn = settle
                self._post_counted(job)  # counted already; the worker leaves for it
                return
            self._leave()
            if asyncio._get_running_loop() is loop:
                job.settle()
            else:  # finished by wait_idle on another thread
                inbox.put(job)

        commit.collect(loop, done)
        # A cancelled caller leaves the collection running (counted as a call in progress: close() waits for it).
        # Waiting for the answer here instead could wait forever: the COMMIT may wait for a lock that code after
        # the cancel, on this very loop, would release (tests/postgres/test_loop_commits.py).
        await waiter
        error, job.error = job.error, None  # raised from here: no cycle through this frame's job
        if error is not None:
            raise error

    def _count(self) -> None:
        """One more call in progress, even once closed (it is under way already: ``close()`` waits for it)."""
        with self._idle_lock:
            self._busy += 1

    async def on_thread(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
        if_cancelled: IfCancelled = WAIT,
        even_if_closed: bool = False,
        on_cancel: Callable[[], object] | None = None,
    ) -> T:
        """Run on a worker thread; ``undo`` as in ``call``.

        The call cannot be interrupted once it runs. If the awaiting caller
        is cancelled, ``if_cancelled`` says what happens before its
        ``CancelledError`` is raised (``IfCancelled``; the module docstring):
        by default (``WAIT``) a call still queued never starts and a running
        one is waited for, its undo too, so nothing of it goes on once the
        caller has the ``CancelledError``; a second cancel stops that wait.
        ``on_cancel`` as in ``call``. ``even_if_closed``: run it though the store is closing (work under
        way already: a block's end), on a thread of its own once the
        workers are gone.
        """
        loop = asyncio.get_running_loop()
        inbox = self._inbox
        if inbox is None or inbox.loop is not loop:
            inbox = self._inbox = Inbox(loop)
        waiter = loop.create_future()
        job = Job(fn, args, kwargs, undo, waiter, inbox)
        if even_if_closed:
            self._root._count()
            self._post_counted(job)
        else:
            self._post(job)
        try:
            await waiter
        except asyncio.CancelledError:
            if on_cancel is not None:
                on_cancel()
            await self._given_up(job, if_cancelled, loop)
            raise
        error, job.error = job.error, None  # raised from here: no cycle through this frame's job
        if error is not None:
            raise error
        return cast(T, job.result)

    async def _given_up(self, job: Job, policy: IfCancelled, loop: asyncio.AbstractEventLoop) -> None:
        """``job``'s caller was cancelled: stop it if still queued, else settle it by ``policy`` (see ``on_thread``).

        A result the caller will not receive is undone: by the worker if the
        cancel came first (``Job.take_back``), else here, on a worker too.
        """
        if not job.finished and policy is not FINISH and job.stop():
            return  # still queued: it never starts
        undo_here = job.handed is not None and not job.take_back()
        waited = policy is not LEAVE
        if waited and not job.finished:
            waited = await _over(job, loop, through_cancels=policy is FINISH)
        if undo_here:
            assert job.undo is not None
            undone: asyncio.Future[None] = loop.create_future()
            try:
                self._post(Job(undo_quietly, (job.undo, job.result), {}, None, undone, job.inbox))
            except StoreClosed:
                return
            if waited:
                try:
                    await undone
                except asyncio.CancelledError:  # a second cancel: the undo still happens, later
                    pass

    def _enter(self) -> AsyncRunner:
        """Count one more call in (or queued for) a worker at the root; ``StoreClosed`` once closed."""
        root = self._root
        with root._idle_lock:
            if root._closed:
                raise StoreClosed("the store is closed")
            root._busy += 1
        return root

    def _post(self, job: Job) -> None:
        root = self._enter()
        try:
            self._workers.post(job)
        except BaseException:
            root._leave()
            raise

    def _leave(self, _future: object = None) -> None:
        with self._idle_lock:
            self._busy -= 1
            if self._busy == 0 and self._idle_waiters:
                self._idle.notify_all()

    # -- pinned threads (transactions that span awaits) ---------------------------

    def pinned(self) -> AsyncRunner:
        """A runner with one thread of its own, for a block of calls on one connection.

        Its calls never run inline; they count toward this runner's
        ``close()``. Give it back with ``unpin``.
        """
        with self._idle:
            if self._closed:
                raise StoreClosed("the store is closed")
            pinned = self._pinned_idle.pop() if self._pinned_idle else None
        if pinned is None:
            pinned = AsyncRunner(workers=1, name=f"{self._name}-tx", _root=self)
        with self._idle:
            self._pinned_out.add(pinned)
        return pinned

    def unpin(self, pinned: AsyncRunner) -> None:
        with self._idle:
            self._pinned_out.discard(pinned)
            if not self._closed:
                self._pinned_idle.append(pinned)
                return
        pinned._workers.shutdown(wait=False)

    # On a pinned runner, from its thread: the blocks open on it, which close() rolls back if their tasks left them.

    def block_entered(self, block: AbstractContextManager[Any]) -> None:
        with self._root._idle_lock:
            self._blocks.append(block)

    def block_left(self, block: AbstractContextManager[Any]) -> bool:
        """``block`` is no longer open; False if it was not (``close()`` rolled it back)."""
        with self._root._idle_lock:
            if block not in self._blocks:
                return False
            self._blocks.remove(block)
            return True

    def _roll_back_blocks(self) -> None:
        """On this pinned runner's thread, at close: roll back the blocks still open on it, innermost first."""
        with self._root._idle_lock:
            blocks = list(self._blocks)
        for block in reversed(blocks):
            if self.block_left(block):
                try:
                    block.__exit__(StoreClosed, StoreClosed("the store was closed with this block open"), None)
                except Exception:  # rolled back anyway: the connection is closed next
                    pass

    def _forget_parent_calls(self) -> None:
        """In a forked child: the calls in progress are the parent's (``close()`` and the exit must not wait for
        them), and its lock may have been held by one of the parent's threads at the fork."""
        self._idle_lock = threading.RLock()
        self._idle = threading.Condition(self._idle_lock)
        self._idle_waiters = 0
        self._busy = 0
        self._collecting = {}
        self._inbox = None

    # -- closing ---------------------------------------------------------------

    def close(self, *, wait: bool = True) -> None:
        """Refuse new calls; with ``wait``, block until no worker is inside one and no block is left open."""
        self._refuse()
        if wait:
            self._quiesce()
        self._shutdown(wait)

    def _refuse(self) -> bool:
        """Refuse new calls; whether closing has anything to wait for (calls in progress, blocks left open)."""
        with self._idle:
            self._closed = True
            self.no_wait = self.no_wait_reads = None
            return self._busy > 0 or any(pinned._blocks for pinned in self._pinned_out)

    def _quiesce(self) -> None:
        """Wait until no call is in progress, then roll back the blocks left open (their tasks abandoned them).

        Each is rolled back on its own pinned thread, where it was entered,
        as a call counted like any other (the block's own ``__aexit__``, if
        it comes later, finds it ended).
        """
        self.wait_idle()
        with self._idle:
            left_open = [pinned for pinned in self._pinned_out if pinned._blocks]
        for pinned in left_open:
            self._count()
            pinned._post_counted(Job(pinned._roll_back_blocks, (), {}))
        if left_open:
            self.wait_idle()

    def _shutdown(self, wait: bool) -> None:
        with self._idle:
            pinned = [*self._pinned_idle, *self._pinned_out]
            self._pinned_idle, self._pinned_out = [], set()
        for workers in [self._workers, *(p._workers for p in pinned)]:
            workers.shutdown(wait)

    def wait_idle(self) -> None:
        """Block until no call is inside (or queued for) a worker.

        A COMMIT's answer its loop cannot collect any more (the loop ended,
        or this thread runs it and is blocked here) is collected on this
        thread first.
        """
        with self._idle:
            stranded = [commit for commit, loop in self._collecting.items() if not _loop_can_run(loop)]
        for commit in stranded:
            commit.finish_here()
        with self._idle:
            self._idle_waiters += 1
            try:
                self._idle.wait_for(lambda: self._busy == 0)
            finally:
                self._idle_waiters -= 1

    async def aclose(self) -> None:
        """``close()`` without blocking the loop: refuse new calls, wait for the workers, roll back abandoned blocks.

        Carried to its end even if cancelled (``to_the_end``): a close given up
        halfway would leave the store refusing calls with its threads and
        connections still held. The ``CancelledError`` is raised after.
        """
        if self._refuse():
            await to_the_end(asyncio.to_thread(self._quiesce))
        self._shutdown(False)

    @property
    def closed(self) -> bool:
        return self._closed


# A call made under AsyncRunner.call's inline branch is refused at once when it meets a lock (engines.loop).
inline_site(AsyncRunner.call)
