"""``integrations._common.to_the_end``: a mutation carried to its end when its caller is cancelled.

The first step runs in the caller's task, so a call that completes without
suspending (inline on SQLite) needs no task of its own; one that suspends
is carried on in a task the caller's cancellation does not reach, and the
caller's ``CancelledError`` comes only once it has finished.
"""

from __future__ import annotations

import asyncio

import pytest

from durastate.integrations._common import to_the_end


def test_a_call_that_does_not_suspend_runs_in_the_callers_task() -> None:
    async def probe() -> asyncio.Task[object] | None:
        return asyncio.current_task()

    async def main() -> tuple[object, object]:
        return await to_the_end(probe()), asyncio.current_task()

    ran_in, caller = asyncio.run(main())
    assert ran_in is caller


def test_an_error_before_and_after_suspending_reaches_the_caller() -> None:
    async def fails_at_once() -> None:
        raise ValueError("first step")

    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise ValueError("after a suspension")

    async def main() -> None:
        with pytest.raises(ValueError, match="first step"):
            await to_the_end(fails_at_once())
        with pytest.raises(ValueError, match="after a suspension"):
            await to_the_end(fails_later())

    asyncio.run(main())


def test_a_cancelled_caller_waits_for_the_suspended_call_to_finish() -> None:
    steps: list[str] = []

    async def mutation(began: asyncio.Event, release: asyncio.Event) -> str:
        steps.append("began")
        began.set()
        await release.wait()  # suspends: carried on in a task of its own
        await asyncio.sleep(0)  # and again, after the caller was cancelled
        steps.append("finished")
        return "done"

    async def main() -> None:
        began, release = asyncio.Event(), asyncio.Event()
        caller = asyncio.create_task(to_the_end(mutation(began, release)))
        await began.wait()
        caller.cancel()
        for _ in range(3):  # the loop's turns in which the caller takes its cancellation
            await asyncio.sleep(0)
        assert not caller.done(), "the caller waits for the mutation"
        assert steps == ["began"]
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert steps == ["began", "finished"], "the CancelledError came after the mutation finished"

    asyncio.run(main())


def test_the_result_of_a_suspended_call_is_returned() -> None:
    async def later(value: int) -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return value * 2

    async def main() -> int:
        return await to_the_end(later(21))

    assert asyncio.run(main()) == 42
