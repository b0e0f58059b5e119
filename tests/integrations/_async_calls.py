"""Cancelling an integration's async call while it waits on a worker thread: the blocker and the two outcomes.

A ``Blocker`` is another connection's open transaction holding what the call
needs: SQLite's write lock, or PostgreSQL row locks on the keys the call
writes. The call then waits on a worker thread, where it is cancelled.
Either the cancelled call rolls back (:func:`cancel_rolls_back`) or it is
carried to its end and raises the cancellation only once nothing of it is
running (:func:`cancel_waits_for_the_outcome`); the caller asserts what the
store holds afterwards.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import durastate
from durastate.integrations._common import Holder


class _RollBack(Exception):
    pass


class Blocker:
    """``write()`` inside a transaction on a thread of its own, held open until ``release()``, then rolled back."""

    def __init__(self, store: durastate.Store, write: Callable[[], object]) -> None:
        self._store = store
        self._write = write
        self._held = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._run, name="blocker")

    def _run(self) -> None:
        try:
            with self._store.transaction():
                self._write()
                self._held.set()
                self._release.wait(60)
                raise _RollBack
        except _RollBack:
            pass

    def start(self) -> Blocker:
        self._thread.start()
        assert self._held.wait(30), "the blocker could not take its locks"
        return self

    def release(self) -> None:
        self._release.set()
        self._thread.join(30)


def busy(holder: Holder) -> int:
    """Calls of ``holder`` inside (or queued for) a worker thread right now."""
    return holder._aio.runner._busy


async def on_a_worker(holder: Holder) -> None:
    """Return once a call of ``holder`` has been handed to a worker thread."""
    for _ in range(30_000):
        if busy(holder):
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the call never reached a worker thread")


class HeldAfter:
    """Hold a worker inside its transaction, after ``target.name`` returned, until ``release()``.

    On PostgreSQL a transaction's writes travel with its COMMIT in one
    flight (the engine pipelines them), so a write blocked by a row lock
    waits inside the commit, after the last chance to roll back. Holding
    the worker after the call returns makes "cancelled before the commit"
    a fact of the test, not a race with the worker's speed.
    """

    def __init__(self, target: Any, name: str) -> None:
        self._returned = threading.Event()
        self._release = threading.Event()
        real = getattr(target, name)

        def held(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            self._returned.set()
            assert self._release.wait(30), "the test never released the held call"
            return result

        setattr(target, name, held)

    def release(self) -> None:
        self._release.set()

    @property
    def ran(self) -> bool:
        """Whether the held method ran and returned (a test naming a method the call no longer runs holds nothing)."""
        return self._returned.is_set()


async def cancel_rolls_back(blocker: Blocker, holder: Any, held: str, call: Callable[[], Awaitable[Any]]) -> None:
    """Cancel ``call()`` while it waits behind ``blocker`` on a worker of ``holder``: it rolls back, then raises.

    ``held`` names the sync method the call runs on the worker; it is held
    after returning (:class:`HeldAfter`) so the cancellation lands before the
    commit. The cancelled caller waits for the call (``AsyncRunner.on_thread``'s
    ``WAIT``): its ``CancelledError`` comes once the call has rolled back.
    """
    blocker.start()
    holding = HeldAfter(holder, held)
    try:
        task = asyncio.create_task(call())
        await on_a_worker(holder)
        task.cancel()
        await asyncio.sleep(0)  # one turn of the loop: the task has taken its cancel (the call is told)
    finally:
        holding.release()
        await asyncio.to_thread(blocker.release)
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(holder._aio.runner.wait_idle)
    assert holding.ran, f"the call never ran {held}: nothing held it before its commit"


async def cancel_waits_for_the_outcome(blocker: Blocker, holder: Holder, call: Callable[[], Awaitable[Any]]) -> None:
    """Cancel ``call()`` while it waits behind ``blocker`` on a worker of ``holder``: it is carried to its end.

    The cancelled task stays pending while the blocker holds (the write's
    outcome first), raises CancelledError once the write is done, and leaves
    no call of ``holder`` running.
    """
    blocker.start()
    try:
        task = asyncio.create_task(call())
        await on_a_worker(holder)
        task.cancel()
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done()  # the write's outcome first
    finally:
        await asyncio.to_thread(blocker.release)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert busy(holder) == 0
