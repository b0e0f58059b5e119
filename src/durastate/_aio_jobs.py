"""The jobs ``durastate._aio.AsyncRunner`` hands to worker threads, the threads, and how results reach a loop.

``Job``: one call and its outcome; ``Inbox``: the finished jobs of one
event loop, one wake-up for all; ``Waker``: the thread that wakes loops
for busy workers; ``_Workers``: the threads. What runs where, and the
rules a cancelled caller gets, are ``durastate._aio``'s.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import StoreClosed

if TYPE_CHECKING:
    from ._aio import AsyncRunner

Undo = Callable[[Any], object]


def undo_quietly(undo: Undo, result: Any) -> None:
    try:
        undo(result)
    except Exception:  # best effort: the lease runs out anyway
        pass


class Job:
    """One call handed to a worker; settles who stops a queued call and who undoes a result nobody received.

    ``waiter`` is woken (through ``inbox``, on its loop) when the call is
    over; ``result`` or ``error`` is then what it gave, and ``finished`` is
    set (on the loop's thread). Two one-item lists decide races between
    the worker and a cancelled caller without a lock (``list.pop`` is
    atomic: exactly one side gets the item):

    * ``gate``: the worker takes it to start the call; a cancelled caller
      that takes it first has stopped a call still queued (``stop``).
    * ``handed`` (with an ``undo`` only): the worker takes it to hand its
      result over; a cancelled caller that takes it first will not receive
      the result, so the worker undoes it (``take_back``: False when the
      result was handed over already, and the caller undoes it).
    """

    __slots__ = ("args", "error", "finished", "fn", "gate", "handed", "inbox", "kwargs", "result", "undo", "waiter")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
        waiter: asyncio.Future[None] | None = None,
        inbox: Inbox | None = None,
    ):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.undo = undo
        self.waiter = waiter
        self.inbox = inbox
        self.gate = [True]
        self.handed = None if undo is None else [True]
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """On a worker: the call (unless stopped while queued), then its undo if its caller gave it up.

        The waiter is woken afterwards by ``notify``, once the worker has
        left the runner's busy count: a coroutine that resumes finds the
        call over in every sense (``wait_idle``, ``close``).
        """
        try:
            self.gate.pop()
        except IndexError:  # stopped by its cancelled caller while queued: it never starts
            return
        try:
            result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:
            self.error = exc
            return
        self.result = result
        handed = self.handed
        if handed is not None:
            try:
                handed.pop()
            except IndexError:  # its caller was cancelled first: nobody will receive it
                assert self.undo is not None
                undo_quietly(self.undo, result)

    def stop(self) -> bool:
        """On the loop, for a cancelled caller: whether the call was still queued (it never starts now)."""
        try:
            self.gate.pop()
        except IndexError:
            return False
        return True

    def take_back(self) -> bool:
        """On the loop, for a cancelled caller: whether its worker undoes the result (False: it was handed over)."""
        assert self.handed is not None
        try:
            self.handed.pop()
        except IndexError:
            return False
        return True

    def notify(self, more_queued: bool = False) -> None:
        """On a worker, after ``run``: wake the waiter through its loop's inbox.

        ``more_queued``: the worker has another job waiting; the loop is
        then woken by the ``WAKER`` thread, not by this worker (see there).
        """
        if self.inbox is not None:
            self.inbox.put(self, more_queued)

    def settle(self) -> None:
        self.finished = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():  # cancelled meanwhile: the coroutine is gone already
            waiter.set_result(None)


class Inbox:
    """Finished jobs for one event loop: one wake-up of the loop settles every job that finished meanwhile."""

    __slots__ = ("_jobs", "_lock", "_scheduled", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._jobs: list[Job] = []
        self._lock = threading.Lock()
        self._scheduled = False

    def put(self, job: Job, deferred: bool = False) -> None:
        """Add a finished job; wake the loop unless a wake-up is pending (``deferred``: by ``WAKER``)."""
        with self._lock:
            self._jobs.append(job)
            if self._scheduled:
                return
            self._scheduled = True
        if deferred:
            WAKER.wake(self)
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


class Waker:
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
        self._queue: queue.SimpleQueue[Inbox] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def wake(self, inbox: Inbox) -> None:
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


WAKER = Waker()
os.register_at_fork(after_in_child=WAKER._reset)


class Workers:
    """Up to ``size`` threads taking jobs from one queue, started as jobs arrive.

    Lighter than ``ThreadPoolExecutor`` plus ``asyncio.wrap_future`` (a
    job is one queue put, and finished jobs reach their loop through an
    ``Inbox``, one wake-up for all that finished meanwhile; no
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
    (``forget_parent``, from ``durastate._aio``'s fork hook).
    """

    def __init__(self, size: int, name: str, runner: weakref.ref[AsyncRunner]) -> None:
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._size = size
        self._name = name
        self._runner = runner
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stopped = False
        WORKERS.add(self)

    def forget_parent(self) -> None:
        """In a forked child: the parent's threads, the jobs queued for them and their lock are not this process's.

        Without this the child's copy counted the parent's threads as its
        own and started none: every call it queued waited forever.
        """
        self._queue = queue.SimpleQueue()
        self._threads = []
        self._lock = threading.Lock()

    def post(self, job: Job) -> None:
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
                    root._leave()  # before the waiter wakes (see Job.run)
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


# Every runner's workers (pinned runners' too), for the fork hook (``durastate._aio``).
WORKERS: weakref.WeakSet[Workers] = weakref.WeakSet()
