"""``AsyncRunner.on_thread``: results, errors and cancellation of calls on worker threads."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from durastate._aio import AsyncRunner


def test_a_workers_result_and_error_reach_the_caller() -> None:
    runner = AsyncRunner(workers=2, name="results")

    def fail() -> None:
        raise KeyError("from the worker")

    async def main() -> None:
        a, b, thread = await runner.on_thread(lambda a, b=0: (a, b, threading.current_thread()), (1,), {"b": 2})
        assert (a, b) == (1, 2) and thread is not threading.current_thread()
        with pytest.raises(KeyError, match="from the worker"):
            await runner.on_thread(fail, (), {})

    asyncio.run(main())
    runner.close()


def test_loops_on_two_threads_share_a_runner_and_each_gets_its_own_results() -> None:
    runner = AsyncRunner(workers=3, name="loops")
    results: dict[str, list[tuple[str, int]]] = {}

    async def calls(name: str) -> None:
        async def one(i: int) -> tuple[str, int]:
            return await runner.on_thread(lambda: (name, i), (), {})

        results[name] = list(await asyncio.gather(*(one(i) for i in range(300))))

    threads = [threading.Thread(target=asyncio.run, args=(calls(name),)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runner.close()
    assert results == {name: [(name, i) for i in range(300)] for name in ("a", "b")}


def test_a_call_still_queued_when_its_caller_is_cancelled_never_runs() -> None:
    runner = AsyncRunner(workers=1, name="queued")
    busy = threading.Event()
    go_on = threading.Event()
    ran: list[str] = []

    def occupy() -> None:
        busy.set()
        go_on.wait()

    async def main() -> None:
        first = asyncio.create_task(runner.on_thread(occupy, (), {}))
        await asyncio.to_thread(busy.wait)  # the one worker is inside occupy()
        queued = asyncio.create_task(runner.on_thread(ran.append, ("queued",), {}))
        await asyncio.sleep(0)  # queued behind occupy()
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        go_on.set()
        await first
        await runner.on_thread(ran.append, ("after",), {})  # the worker is past where the queued call was

    asyncio.run(main())
    runner.close()
    assert ran == ["after"]


def test_a_running_call_whose_caller_is_cancelled_is_undone_before_the_cancel_reaches_the_caller() -> None:
    runner = AsyncRunner(workers=1, name="undo")
    inside = threading.Event()
    go_on = threading.Event()
    undone: list[int] = []

    def claim() -> int:
        inside.set()
        go_on.wait()
        return 7

    async def main() -> None:
        call = asyncio.create_task(runner.on_thread(claim, (), {}, undone.append))
        await asyncio.to_thread(inside.wait)
        call.cancel()
        await asyncio.sleep(0)  # one turn of the loop: the call's task has taken its cancel
        try:
            assert not call.done()  # it waits for the call in flight (and its undo) before it ends
        finally:
            go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert undone == [7]  # a claim made now would find the item

    asyncio.run(main())
    runner.close()
    assert undone == [7]


def test_a_result_handed_over_to_a_cancelled_caller_is_undone_before_the_cancel_reaches_it() -> None:
    runner = AsyncRunner(workers=1, name="handed")
    undone: list[int] = []

    async def main() -> None:
        call = asyncio.create_task(runner.on_thread(lambda: 7, (), {}, undone.append))
        await asyncio.sleep(0)  # the call is posted
        runner.wait_idle()  # on the loop's thread: the worker has run it and handed the result over
        call.cancel()  # before the loop took the result
        with pytest.raises(asyncio.CancelledError):
            await call
        assert undone == [7]

    asyncio.run(main())
    runner.close()
    assert undone == [7]


_CALL_IN_FLIGHT_AT_EXIT = """
import asyncio, threading
from durastate._aio import LEAVE, AsyncRunner

runner = AsyncRunner(workers=1, name="exit")
started = threading.Event()

def slow_call():
    started.set()
    threading.Event().wait(0.5)  # a call that is still running when the program ends
    print("finished", flush=True)

async def main():
    # LEAVE: the cancelled task does not wait for it (the default, WAIT, would: then nothing is left for the exit)
    asyncio.create_task(runner.on_thread(slow_call, (), {}, if_cancelled=LEAVE))
    await asyncio.to_thread(started.wait)

asyncio.run(main())  # cancels the awaiting task; the call goes on on its worker
print("main done", flush=True)
"""


def test_a_call_still_on_a_worker_when_the_program_ends_finishes_first() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CALL_IN_FLIGHT_AT_EXIT], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["main", "done", "finished"]


def test_results_of_a_busy_worker_reach_their_loop_through_the_waker_thread() -> None:
    # One worker, many queued calls: every job but the last finishes with
    # another queued, so its wake-up goes through the process's waker thread.
    runner = AsyncRunner(workers=1, name="busy")

    async def main() -> list[int]:
        calls = (runner.on_thread(lambda i=i: i * i, (), {}) for i in range(500))
        return list(await asyncio.wait_for(asyncio.gather(*calls), timeout=60))

    assert asyncio.run(main()) == [i * i for i in range(500)]
    runner.close()
    assert any(thread.name == "durastate-waker" for thread in threading.enumerate())


_WAKER_AFTER_FORK = """
import asyncio, os
from durastate._aio import AsyncRunner

def queued_calls(name):
    runner = AsyncRunner(workers=1, name=name)
    async def main():
        calls = (runner.on_thread(lambda i=i: i, (), {}) for i in range(200))
        return sum(await asyncio.wait_for(asyncio.gather(*calls), timeout=20))
    try:
        return asyncio.run(main())
    finally:
        runner.close()

assert queued_calls("parent") == sum(range(200))  # the parent's waker thread now runs
pid = os.fork()
if pid == 0:
    try:
        ok = queued_calls("child") == sum(range(200))
    except BaseException:
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_wakes_its_loops_with_a_waker_thread_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WAKER_AFTER_FORK], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["child", "0"]


_STORE_AFTER_FORK = """
import asyncio, os, sys
from durastate import aio

async def calls(store, who):
    await store.kv.put(b"s", who.encode(), b"k", b"v")  # on a worker (memory:, PostgreSQL)
    async with store.transaction() as tx:  # on a thread pinned to the block (every engine)
        await tx.kv.incr(b"s", b"n", b"calls")
    return await store.kv.get(b"s", who.encode(), b"k") == b"v"

async def opened():
    store = await aio.open(sys.argv[1])
    assert await calls(store, "parent")  # the parent's threads now run
    return store

store = asyncio.run(opened())
pid = os.fork()
if pid == 0:
    try:
        ok = asyncio.run(asyncio.wait_for(calls(store, "child"), timeout=20))
        asyncio.run(store.close())
    except BaseException:
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
print("parent", asyncio.run(calls(store, "parent")))
asyncio.run(store.close())
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_an_async_store_opened_before_a_fork_works_in_the_child_and_the_parent(store_url: str) -> None:
    # The child's copy of the runner has none of the parent's threads: it starts its own.
    done = subprocess.run(
        [sys.executable, "-c", _STORE_AFTER_FORK, store_url], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["child", "0", "parent", "True"]


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_calls_leave_the_loop_thread_where_each_commit_waits_for_an_fsync(tmp_path: Path, durability: str) -> None:
    """At durability="full" a commit's fsync would stall the loop: calls run on a worker; at "normal", inline."""
    import durastate
    import durastate.aio

    async def main() -> set[int]:
        threads: set[int] = set()
        async with durastate.aio.open(tmp_path / "s.db", durability=durability) as store:

            def put_and_note(sync: durastate.Store, key: bytes) -> None:
                threads.add(threading.get_ident())
                sync.kv.put(b"s", b"n", key, b"v")

            for i in range(5):
                await store.transact(put_and_note, b"k%d" % i)
            assert await store.kv.get(b"s", b"n", b"k4") == b"v"
        return threads

    loop_thread = threading.get_ident()  # asyncio.run runs the loop on this thread
    threads = asyncio.run(main())
    assert (loop_thread in threads) is (durability == "normal")
