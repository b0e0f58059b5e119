"""Cancellation in ``durastate.aio``: nothing of a cancelled call goes on behind its caller's back, nothing leaks.

Each test holds a call on its worker thread with events (``_Gate``), cancels
its caller while it is there, and lets it go on only once the cancel has
been taken (one turn of the loop after ``cancel()``). On a SQLite file the
calls that write are sent to workers by ``durability="full"`` (inline, on
the loop's thread, a call cannot be cancelled at all).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

import durastate
from durastate import _aio, aio
from durastate._aio import FINISH, LEAVE, WAIT, AsyncRunner, IfCancelled
from durastate.aio import _build
from durastate.testing import FakeClock

# Seconds a wait may last before the test fails (reached only on failure).
FAILURE_DEADLINE = 30.0


def _on_workers(url: str) -> dict[str, Any]:
    """Options that send writes to worker threads: a SQLite file at durability="full" (elsewhere they go anyway)."""
    return {"durability": "full"} if url.startswith("sqlite://") else {}


def run(url: str, body: Callable[[aio.AsyncStore], Awaitable[Any]], **options: Any) -> Any:
    async def main() -> Any:
        async with aio.open(url, **_on_workers(url), **options) as store:
            return await body(store)

    return asyncio.run(main())


class _Gate:
    """Holds calls of ``owner.name`` made on a worker thread: ``inside`` once one is held, ``go_on`` lets it go.

    ``after``: the real call runs first, then the hold (a claim committed,
    not yet handed over); else the hold comes first. ``finished`` is set
    when the held call has returned. Only the first call is held.
    """

    def __init__(self, owner: Any, name: str, *, after: bool = False, holder: Any = None) -> None:
        self.inside, self.go_on, self.finished = threading.Event(), threading.Event(), threading.Event()
        self._held = False
        real = getattr(owner, name)
        loop_thread = threading.current_thread()

        def held(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is loop_thread or self._held:
                return real(*args, **kwargs)
            self._held = True
            try:
                if after:
                    result = real(*args, **kwargs)
                self.inside.set()
                assert self.go_on.wait(FAILURE_DEADLINE)
                if not after:
                    result = real(*args, **kwargs)
                return result
            finally:
                self.finished.set()

        setattr(holder or owner, name, held)

    async def reached(self) -> None:
        assert await asyncio.to_thread(self.inside.wait, FAILURE_DEADLINE)


async def _cancel_then_let_go(task: asyncio.Task[Any], gate: _Gate) -> None:
    """Cancel ``task``, let it take the cancel (one turn of the loop), then let the held call go on."""
    task.cancel()
    await asyncio.sleep(0)  # not a wait for time: the task's wake-up was queued by cancel(), it runs in this turn
    gate.go_on.set()


# -- 1. a cancelled call is over before the CancelledError reaches the caller ---------------------------------


def test_a_cancelled_write_on_a_worker_has_committed_before_the_cancel_reaches_the_caller(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        gate = _Gate(s._store.kv, "put")
        seen: list[bool] = []

        async def put() -> None:
            try:
                await s.kv.put(b"s", b"n", b"k", b"v")
            except asyncio.CancelledError:
                seen.append(gate.finished.is_set())
                raise

        task = asyncio.create_task(put())
        await gate.reached()
        await _cancel_then_let_go(task, gate)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == [True]  # the write was over (committed) when the caller heard of its cancel
        assert await s.kv.get(b"s", b"n", b"k") == b"v"

    run(store_url, body)


def test_a_timeout_around_a_call_on_a_worker_waits_for_it_then_raises_timeout_error(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        gate = _Gate(s._store.kv, "put")
        timeouts: list[asyncio.Timeout] = []
        seen: list[bool] = []

        async def put_with_timeout() -> None:
            try:
                async with asyncio.timeout(None) as timeout:
                    timeouts.append(timeout)
                    await s.kv.put(b"s", b"n", b"k", b"v")
            except TimeoutError:
                seen.append(gate.finished.is_set())
                raise

        task = asyncio.create_task(put_with_timeout())
        await gate.reached()
        timeouts[0].reschedule(asyncio.get_running_loop().time())  # expires at the loop's next turn
        while not timeouts[0].expired():  # turns of the loop, not time: until the timeout has cancelled the task
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the task takes its cancel
        gate.go_on.set()
        with pytest.raises(TimeoutError):
            await task
        assert seen == [True]
        assert await s.kv.get(b"s", b"n", b"k") == b"v"

    run(store_url, body)


def test_a_second_cancel_stops_the_wait_and_the_call_still_ends_on_its_worker(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        gate = _Gate(s._store.kv, "put")
        task = asyncio.create_task(s.kv.put(b"s", b"n", b"k", b"v"))
        await gate.reached()
        task.cancel()
        await asyncio.sleep(0)  # the first cancel taken: the task waits for the call
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # the wait is given up ...
        assert not gate.finished.is_set()
        gate.go_on.set()
        await asyncio.to_thread(s._runner.wait_idle)  # ... the call is not: it commits on its worker
        assert await s.kv.get(b"s", b"n", b"k") == b"v"

    run(store_url, body)


@pytest.mark.parametrize("policy", [WAIT, FINISH, LEAVE])
def test_what_a_cancelled_caller_waits_for_under_each_policy(policy: IfCancelled) -> None:
    runner = AsyncRunner(workers=1, name="policy")
    log: list[str] = []
    started, go_on = threading.Event(), threading.Event()

    def held() -> None:
        log.append("started")
        started.set()
        assert go_on.wait(FAILURE_DEADLINE)
        log.append("finished")

    async def main() -> None:
        # A running call, cancelled twice.
        running = asyncio.create_task(runner.on_thread(held, (), {}, if_cancelled=policy))
        assert await asyncio.to_thread(started.wait, FAILURE_DEADLINE)
        for _ in range(2):
            running.cancel()
            await asyncio.sleep(0)
            if policy is WAIT:
                assert running.done() is (_ == 1)  # the first cancel is waited through, the second stops the wait
        assert running.done() is (policy is not FINISH)  # LEAVE: at once; FINISH: every cancel waited through
        started.clear()
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await running
        await asyncio.to_thread(runner.wait_idle)
        assert log == ["started", "finished"]
        # A call still queued behind another when its caller is cancelled.
        go_on.clear()
        first = asyncio.create_task(runner.on_thread(held, (), {}))
        assert await asyncio.to_thread(started.wait, FAILURE_DEADLINE)
        queued = asyncio.create_task(runner.on_thread(log.append, ("queued",), {}, if_cancelled=policy))
        await asyncio.sleep(0)  # posted, behind the running call
        queued.cancel()
        await asyncio.sleep(0)
        assert queued.done() is (policy is not FINISH)
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await queued
        await first
        await runner.on_thread(log.append, ("after",), {})
        # FINISH: the queued call ran, and was over when the cancel reached the caller; else it never started.
        assert log[2:] == ["started", "finished", *(["queued"] if policy is FINISH else []), "after"]

    asyncio.run(main())
    runner.close()


def test_a_cancelled_transact_on_a_worker_rolls_back_and_is_over_when_the_cancel_arrives(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        inside, go_on, over = threading.Event(), threading.Event(), threading.Event()

        def write(store: durastate.Store) -> None:
            store.kv.put(b"s", b"n", b"k", b"v")
            inside.set()
            assert go_on.wait(FAILURE_DEADLINE)

        def watched(store: durastate.Store) -> None:
            try:
                write(store)
            finally:
                over.set()

        task = asyncio.create_task(s.transact(watched))
        assert await asyncio.to_thread(inside.wait, FAILURE_DEADLINE)
        task.cancel()
        await asyncio.sleep(0)
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert over.is_set()
        assert await s.kv.get(b"s", b"n", b"k") is None  # told of the cancel before it could commit: rolled back

    run(store_url, body)


# -- 2. close() with transaction blocks other tasks left open -------------------------------------------------


def _threads_of(before: set[threading.Thread]) -> Iterator[threading.Thread]:
    """Threads started since ``before`` that a store may own (not asyncio's executor, not the process's waker)."""
    for thread in set(threading.enumerate()) - before:
        if thread is not _aio.WAKER._thread and not thread.name.startswith("asyncio_"):
            yield thread


@pytest.mark.parametrize("then", ["cancelled", "resumed"])
def test_close_rolls_back_a_block_another_task_left_open_and_ends_its_thread(store_url: str, then: str) -> None:
    before = set(threading.enumerate())

    async def main() -> None:
        s = await aio.open(store_url)
        entered, resume = asyncio.Event(), asyncio.Event()

        async def left_open() -> None:
            async with s.transaction() as tx:
                await tx.kv.put(b"s", b"n", b"k", b"v")
                entered.set()
                await resume.wait()  # until cancelled or resumed, after the close

        task = asyncio.create_task(left_open())
        await entered.wait()
        await s.close()
        # The block's pinned thread ends with the store's own.
        deadline = time.monotonic() + FAILURE_DEADLINE
        for thread in _threads_of(before):
            thread.join(max(0.0, deadline - time.monotonic()))
        assert [thread.name for thread in _threads_of(before) if thread.is_alive()] == []
        if then == "cancelled":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):  # its own exception, not the closed store's
                await task
        else:
            resume.set()  # the block ends normally: it cannot commit any more, and says so
            with pytest.raises(durastate.StoreClosed, match="rolled back"):
                await task
        async with aio.open(store_url) as again:  # nothing of it committed, nothing left locked
            assert await again.kv.get(b"s", b"n", b"k") is None
            await again.kv.put(b"s", b"n", b"after", b"v")

    asyncio.run(main())


# -- 3. a cancelled claim -------------------------------------------------------------------------------------


def test_a_claim_cancelled_after_it_committed_is_due_again_at_once(store_url: str) -> None:
    clock = FakeClock()  # never advanced: "at once" is the same millisecond

    async def body(s: aio.AsyncStore) -> tuple[int, int]:
        await s.queues.push("q", [b"job"])
        gate = _Gate(s._store.queues, "claim", after=True)
        task = asyncio.create_task(s.queues.claim("q", lease=60))
        await gate.reached()  # the claim has committed on its worker, the caller has not got it
        await _cancel_then_let_go(task, gate)
        with pytest.raises(asyncio.CancelledError):
            await task
        job = await s.queues.claim("q", lease=60)
        assert job is not None  # on main: None, its lease renewed for 1 ms (and no waiter woken)
        return job.attempts

    assert run(store_url, body, clock=clock) == 2  # the cancelled delivery counts, as a crash's would


def test_a_claim_cancelled_after_it_committed_wakes_a_waiting_consumer(store_url: str) -> None:
    clock = FakeClock()

    async def body(s: aio.AsyncStore) -> bytes:
        await s.queues.push("q", [b"job"])
        gate = _Gate(s._store.queues, "claim", after=True)
        task = asyncio.create_task(s.queues.claim("q", lease=60))
        await gate.reached()
        waiter = asyncio.create_task(s.queues.claim("q", lease=60, wait=FAILURE_DEADLINE))
        await _cancel_then_let_go(task, gate)
        with pytest.raises(asyncio.CancelledError):
            await task
        job = await waiter  # woken by the release, not by its lease's end (60 s away) nor by its deadline
        assert job is not None
        return job.payload

    assert run(store_url, body, clock=clock) == b"job"


# -- 4. a cancelled open ------------------------------------------------------------------------------------


def test_a_cancelled_open_closes_the_store_it_was_making(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[durastate.Store] = []
    real_open = durastate.store.open

    def recorded(*args: Any, **kwargs: Any) -> durastate.Store:
        store = real_open(*args, **kwargs)
        made.append(store)
        return store

    monkeypatch.setattr(durastate.store, "open", recorded)

    async def main() -> None:
        gate = _Gate(durastate.store, "open", holder=durastate.store)
        opening = asyncio.ensure_future(aio.open(store_url))
        await gate.reached()
        await _cancel_then_let_go(opening, gate)
        with pytest.raises(asyncio.CancelledError):
            await opening
        assert len(made) == 1 and made[0].closed  # on main it stayed open, nobody holding it

    asyncio.run(main())


# -- 5. the rest: close, iterators, repeatable commits --------------------------------------------------------


def test_a_cancelled_close_still_closes_the_store(store_url: str) -> None:
    async def main() -> None:
        s = await aio.open(store_url, **_on_workers(store_url))
        gate = _Gate(s._store.kv, "put")
        putting = asyncio.create_task(s.kv.put(b"s", b"n", b"k", b"v"))
        await gate.reached()
        closing = asyncio.create_task(s.close())
        await asyncio.sleep(0)  # close() has begun: calls refused, waiting for the one on its worker
        await _cancel_then_let_go(closing, gate)
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert s.closed and s._store.closed  # on main: left refusing calls, its connections still open
        await putting  # it committed before the close went on
        if store_url != "memory:":  # a memory: store is gone with its connections
            async with aio.open(store_url) as again:
                assert await again.kv.get(b"s", b"n", b"k") == b"v"

    asyncio.run(main())


def _paged(s: aio.AsyncStore) -> None:
    if s._runner.inline_reads:
        pytest.skip("a SQLite file's iterator steps run inline on the loop's thread: a step cannot be cancelled")


def test_a_scan_whose_page_read_was_cancelled_loses_no_item(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(s: aio.AsyncStore) -> list[bytes]:
        _paged(s)
        await s.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
        gate = _Gate(_build, "_take", after=True)
        items = s.kv.scan(b"s", b"n")
        first = asyncio.ensure_future(items.__anext__())
        await gate.reached()  # the page is read, not handed over
        await _cancel_then_let_go(first, gate)
        with pytest.raises(asyncio.CancelledError):
            await first
        return [key async for key, _ in items]

    monkeypatch.setattr(_build, "_take", _build._take)  # restored after the gate replaced it
    assert run(store_url, body) == [b"a", b"b", b"c"]


def test_a_scan_whose_first_step_was_cancelled_can_go_on(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> list[bytes]:
        _paged(s)
        await s.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
        gate = _Gate(s._store.kv, "scan")
        items = s.kv.scan(b"s", b"n")
        first = asyncio.ensure_future(items.__anext__())
        await gate.reached()  # making the iterator, on a worker
        await _cancel_then_let_go(first, gate)
        with pytest.raises(asyncio.CancelledError):
            await first
        return [key async for key, _ in items]  # on main: AssertionError (the maker was dropped)

    assert run(store_url, body) == [b"a", b"b"]
