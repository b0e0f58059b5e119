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
completes. A call on a worker thread keeps running when its awaiting
coroutine is cancelled; if the caller gave an ``undo``, it is applied to
the result the caller never received (a cancelled claim is released), on
the worker, before the worker counts as idle, and the ``CancelledError``
reaches the caller only then: a claim made right after a cancelled one
finds its item (a call still queued never starts; a second cancel stops
that wait, the undo still happens). ``close()`` refuses new calls
and waits until no worker is inside a call (undo included) before the
store's connections are closed, so no connection is ever freed under a
thread still using it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .engines.loop import LoopCommit, Settle, WouldWait, inline_site
from .engines.sqlite import LockBusy
from .errors import StoreClosed

if TYPE_CHECKING:
    from .engines.base import Engine

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_WORKERS = 8

Undo = Callable[[Any], object]


class _Job:
    """One call handed to a worker; settles who undoes a result nobody received.

    ``waiter`` is woken (through ``inbox``, on its loop) when the call is
    over; ``result`` or ``error`` is then what it gave. ``cancelled``: the awaiting coroutine
    was cancelled first (a call still queued then never starts);
    ``delivered``: the result was handed to the loop first. With an
    ``undo``, both are read and set under ``lock``, so exactly one side
    undoes a result the caller never received.
    """

    __slots__ = (
        "args",
        "cancelled",
        "delivered",
        "error",
        "finished",
        "fn",
        "inbox",
        "kwargs",
        "lock",
        "result",
        "started",
        "undo",
        "waiter",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
        waiter: asyncio.Future[None] | None = None,
        inbox: _Inbox | None = None,
    ):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.undo = undo
        self.waiter = waiter
        self.inbox = inbox
        self.lock = None if undo is None else threading.Lock()
        self.cancelled = False
        self.started = False
        self.delivered = False
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """On a worker: the call (unless cancelled while queued), then the undo if due.

        The waiter is woken afterwards by ``notify``, once the worker has
        left the runner's busy count: a coroutine that resumes finds the
        call over in every sense (``wait_idle``, ``close``).
        """
        if self.lock is None:
            if self.cancelled:
                return
        else:
            with self.lock:  # a cancel from now on waits for the call and its undo (``on_thread``)
                if self.cancelled:
                    return
                self.started = True
        try:
            result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:
            self.error = exc
            return
        self.result = result
        if self.lock is not None:
            assert self.undo is not None
            with self.lock:
                cancelled = self.cancelled
                self.delivered = not cancelled
            if cancelled:
                _undo_quietly(self.undo, result)

    def notify(self, more_queued: bool = False) -> None:
        """On a worker, after ``run``: wake the waiter through its loop's inbox.

        ``more_queued``: the worker has another job waiting; the loop is
        then woken by the ``_WAKER`` thread, not by this worker (see there).
        """
        if self.inbox is not None:
            self.inbox.put(self, more_queued)

    def settle(self) -> None:
        self.finished = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():  # cancelled meanwhile: the coroutine is gone already
            waiter.set_result(None)


class _Inbox:
    """Finished jobs for one event loop: one wake-up of the loop settles every job that finished meanwhile."""

    __slots__ = ("_jobs", "_lock", "_scheduled", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._jobs: list[_Job] = []
        self._lock = threading.Lock()
        self._scheduled = False

    def put(self, job: _Job, deferred: bool = False) -> None:
        """Add a finished job; wake the loop unless a wake-up is pending (``deferred``: by ``_WAKER``)."""
        with self._lock:
            self._jobs.append(job)
            if self._scheduled:
                return
            self._scheduled = True
        if deferred:
            _WAKER.wake(self)
        else:
            self.wake()

    def wake(self) -> None:
        """Schedule ``_drain`` on the loop (from any thread)."""
        loop = self.loop
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # closed since: nobody is waiting any more
                pass

    def _drain(self) -> None:
        with self._lock:
            jobs, self._jobs = self._jobs, []
            self._scheduled = False
        for job in jobs:
            job.settle()


class _Waker:
    """One thread per process that wakes event loops on behalf of busy workers.

    Waking a loop from another thread (``call_soon_threadsafe``) writes to
    its self-pipe, a system call that releases the GIL: the worker then
    queues for the GIL again, usually behind the loop it has just woken,
    before it can start its next job, and its connection idles meanwhile.
    A worker with another job queued hands the wake-up to this thread
    instead (a ``SimpleQueue.put``, which keeps the GIL) and goes straight
    on; a worker about to go idle wakes the loop itself (it loses nothing
    by waiting, and an uncontended call pays no extra thread switch).
    Measured on PostgreSQL, 200 coroutines over a pool of 10 against 10
    threads: worth 1-5 % of throughput, about one run's noise
    (``bench/RESULTS.md``, "PostgreSQL async: one waker thread").

    The thread is a daemon started on first use; a forked child starts its
    own (the parent's does not exist there).
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._queue: queue.SimpleQueue[_Inbox] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def wake(self, inbox: _Inbox) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    thread = threading.Thread(target=self._run, name="durastate-waker", daemon=True)
                    thread.start()
                    self._thread = thread
        self._queue.put(inbox)

    def _run(self) -> None:
        get = self._queue.get
        while True:
            inbox = get()
            try:
                inbox.wake()
            except Exception:  # never end the thread: every later wake-up would be lost
                pass


_WAKER = _Waker()
os.register_at_fork(after_in_child=_WAKER._reset)


class _Workers:
    """Up to ``size`` threads taking jobs from one queue, started as jobs arrive.

    Lighter than ``ThreadPoolExecutor`` plus ``asyncio.wrap_future`` (a
    job is one queue put, and finished jobs reach their loop through an
    ``_Inbox``, one wake-up for all that finished meanwhile; no
    ``concurrent.futures.Future`` with its condition and callbacks, no
    two-way chaining of futures): a hop measured ~4 us of CPU instead of
    16-20 (``bench/aio.py --only hop``). Threads are
    daemons, so a store nobody closed does not keep the process alive; at
    exit, calls still on a worker are waited for first (``_at_exit``).
    ``runner._leave()`` is called after every job, undo included.

    The threads hold their runner weakly (``runner``, a ``weakref.ref``): a
    runner nobody uses any more (an ``AsyncStore`` dropped without
    ``close()``, its facades and iterators with it) is collected, and its
    finalizer (``AsyncRunner.__init__``) ends these threads. Held strongly,
    as the threads once did, they kept it, and through it the store's
    connections (on PostgreSQL its pooled and listening sessions), for the
    life of the process: a service opening a store per task and dropping
    it leaked them all, task after task.

    Fork: a child has none of the parent's threads; its copy starts its own
    (``forget_parent``, from ``_after_fork_in_child``).
    """

    def __init__(self, size: int, name: str, runner: weakref.ref[AsyncRunner]) -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._size = size
        self._name = name
        self._runner = runner
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stopped = False
        _WORKERS.add(self)

    def forget_parent(self) -> None:
        """In a forked child: the parent's threads, the jobs queued for them and their lock are not this process's.

        Without this the child's copy counted the parent's threads as its
        own and started none: every call it queued waited forever.
        """
        self._queue = queue.SimpleQueue()
        self._threads = []
        self._lock = threading.Lock()

    def post(self, job: _Job) -> None:
        """Queue ``job``; ``StoreClosed`` once ``shutdown()`` was called (it would never run)."""
        with self._lock:  # shutdown's sentinels are never queued ahead of a job they would strand
            if self._stopped:
                raise StoreClosed("the store is closed")
            self._queue.put(job)
            if len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        jobs = self._queue
        get, runner = jobs.get, self._runner
        while (job := get()) is not None:
            try:
                job.run()
            except BaseException:  # only an undo's (run keeps the call's own): never end the worker
                pass
            finally:
                root = runner()
                if root is not None:  # collected: nobody can be waiting for its calls to end
                    root._leave()  # before the waiter wakes (see _Job.run)
                    root = None  # not kept while the next get() waits (see the class docstring)
                job.notify(not jobs.empty())
            # Not kept while the next get() waits: a job holds its function (an integration object's bound
            # method, say), which would keep that object alive as long as this thread idles, and with it
            # this runner (integrations._common's reaper ends the runner of an object collected unclosed).
            job = None

    def shutdown(self, wait: bool) -> None:
        """Stop the threads once the jobs queued before are done; with ``wait``, join them."""
        with self._lock:
            self._stopped = True
            threads = list(self._threads)
            for _ in threads:
                self._queue.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception:  # best effort: an abandoned attempt's rollback (the pool replaces a broken connection)
        pass


def _settled() -> None:
    """A collected COMMIT's job when its answer came: nothing left to run."""


def _loop_can_run(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` can still run its callbacks: not closed, running, on another thread than this one."""
    return not loop.is_closed() and loop.is_running() and asyncio._get_running_loop() is not loop


def _undo_quietly(undo: Undo, result: Any) -> None:
    try:
        undo(result)
    except Exception:  # best effort: the lease runs out anyway
        pass


# Runners alive in this process: at exit, calls still on their workers finish first.
_RUNNERS: weakref.WeakSet[AsyncRunner] = weakref.WeakSet()
# Every runner's workers (pinned runners' too), for the fork hook.
_WORKERS: weakref.WeakSet[_Workers] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A runner made before the fork works in the child: threads of its own, none of the parent's calls."""
    for workers in list(_WORKERS):
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
        self._workers = _Workers(workers, name, weakref.ref(self._root))
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
        self._inbox: _Inbox | None = None  # the last loop's (a call from another loop makes its own)
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
    ) -> T:
        """``run`` with the arguments as a tuple and a dict (one coroutine, no repacking).

        Inline first where it can (``no_wait`` is set; for ``reads``, a
        call that changes nothing, ``no_wait_reads``): a call SQLite refused
        with BUSY before it changed anything goes to a worker; one that had
        changed something raises. ``undo(result)`` is applied if the caller
        is cancelled before it receives a worker's result.
        """
        no_wait = self.no_wait_reads if reads else self.no_wait
        if no_wait is not None:
            before = no_wait()
            try:
                return fn(*args, **kwargs)  # a lock met here is refused at once (inline_site, below)
            except LockBusy:
                if no_wait() != before:
                    raise  # it had changed something: running it again could repeat that
        return await self.on_thread(fn, args, kwargs, undo)

    async def call_repeatable(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
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
            return await self.call(fn, args, kwargs)
        self._enter()  # StoreClosed once closed; counted until the COMMIT's answer is in, so close() waits for it
        try:
            result, commit = without_waiting(fn, args, kwargs, self._later)
        except WouldWait:
            self._leave()
            return await self.on_thread(fn, args, kwargs)
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
        self._post_counted(_Job(_quietly, (work,), {}))

    def _post_counted(self, job: _Job) -> None:
        """Queue ``job``, already counted as a call, for a worker; a thread of its own once the workers are gone
        (``close(wait=False)`` while a COMMIT's answer was being collected)."""
        try:
            self._workers.post(job)
        except StoreClosed:
            threading.Thread(target=self._run_alone, args=(job,), daemon=True).start()

    def _run_alone(self, job: _Job) -> None:
        try:
            job.run()
        except BaseException:  # only an undo's (run keeps the call's own), as on a worker
            pass
        finally:
            self._leave()
            job.notify()

    async def _commit_collected(self, commit: LoopCommit) -> None:
        """Collect ``commit``'s answer on this loop; its failure branch's error raised (see ``call_repeatable``).

        The call's count in the busy count is the collection's from here: left when the answer is in, or by the
        worker that runs the failure branch.
        """
        loop = asyncio.get_running_loop()
        inbox = self._inbox
        if inbox is None or inbox.loop is not loop:
            inbox = self._inbox = _Inbox(loop)
        waiter = loop.create_future()
        job = _Job(_settled, (), {}, None, waiter, inbox)
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
        await waiter
        error, job.error = job.error, None  # raised from here: no cycle through this frame's job
        if error is not None:
            raise error

    def _count(self) -> None:
        """One more call in progress, even once closed (it is under way already: ``close()`` waits for it)."""
        with self._idle_lock:
            self._busy += 1

    async def on_thread(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], undo: Undo | None = None
    ) -> T:
        """Run on a worker thread; ``undo`` as in ``call``."""
        loop = asyncio.get_running_loop()
        inbox = self._inbox
        if inbox is None or inbox.loop is not loop:
            inbox = self._inbox = _Inbox(loop)
        waiter = loop.create_future()
        job = _Job(fn, args, kwargs, undo, waiter, inbox)
        self._post(job)
        try:
            await waiter
        except asyncio.CancelledError:
            if job.lock is None:
                job.cancelled = True  # a call still queued never starts
            else:
                assert undo is not None
                await self._undone(job, undo, loop)
            raise
        error, job.error = job.error, None  # raised from here: no cycle through this frame's job
        if error is not None:
            raise error
        return cast(T, job.result)

    async def _undone(self, job: _Job, undo: Undo, loop: asyncio.AbstractEventLoop) -> None:
        """After its caller was cancelled: ``job``'s call did not start, or it is over and undone.

        So a cancelled claim holds nothing once its ``CancelledError`` reaches
        the caller: a claim made right after finds the item. A call in flight
        is waited for (its worker undoes it); a result already handed over is
        undone on a worker, waited for too. A second cancel stops the wait
        (the undo still happens, later).
        """
        assert job.lock is not None  # a job with an undo has its lock
        with job.lock:
            job.cancelled = True
            started, delivered = job.started, job.delivered
        waiter: asyncio.Future[None] = loop.create_future()
        if delivered:  # the worker had handed the result over already: undo it on a worker
            try:
                self._post(_Job(_undo_quietly, (undo, job.result), {}, None, waiter, job.inbox))
            except StoreClosed:
                return
        elif started and not job.finished:  # in flight: its worker undoes it, then settles the waiter
            job.waiter = waiter
        else:  # never started, or over (an error, or undone by its worker)
            return
        try:
            await waiter
        except asyncio.CancelledError:
            pass

    def _enter(self) -> AsyncRunner:
        """Count one more call in (or queued for) a worker at the root; ``StoreClosed`` once closed."""
        root = self._root
        with root._idle_lock:
            if root._closed:
                raise StoreClosed("the store is closed")
            root._busy += 1
        return root

    def _post(self, job: _Job) -> None:
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
            if self._pinned_idle:
                return self._pinned_idle.pop()
        return AsyncRunner(workers=1, name=f"{self._name}-tx", _root=self)

    def unpin(self, pinned: AsyncRunner) -> None:
        with self._idle:
            if not self._closed:
                self._pinned_idle.append(pinned)
                return
        pinned._workers.shutdown(wait=False)

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
        """Refuse new calls; with ``wait``, block until no worker is inside one."""
        self._refuse()
        if wait:
            self.wait_idle()
        self._shutdown(wait)

    def _refuse(self) -> int:
        with self._idle:
            self._closed = True
            self.no_wait = self.no_wait_reads = None
            busy = self._busy
        return busy

    def _shutdown(self, wait: bool) -> None:
        with self._idle:
            pinned, self._pinned_idle = self._pinned_idle, []
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
        """``close()`` without blocking the loop: refuse new calls, wait for the workers."""
        if self._refuse():
            await asyncio.to_thread(self.wait_idle)
        self._shutdown(False)

    @property
    def closed(self) -> bool:
        return self._closed


# A call made under AsyncRunner.call's inline branch is refused at once when it meets a lock (engines.loop).
inline_site(AsyncRunner.call)
