"""Waiting for a channel's changes: a watch registered before the check it guards.

A waiter (``queues.claim(wait=)``, ``queues.pop(wait=)``, ``events.stream``)
follows one rule: register, check, wait, check again. The engine's
``watch(channel, poll)`` registers; ``wait(timeout)`` (or ``await
wait_async(timeout)``) waits. A change notified after the registration is
never lost, however it falls against the check: it is remembered by the
watch until the next wait returns for it.

What a wait's answer means:

* ``True``: look again. Something may have changed: a notification, the
  engine's listening connection came back (a notification may have been
  missed while it was away), the store was closed (the next check raises
  ``StoreClosed``), or the watch cannot tell (polling: see below).
* ``False``: ``timeout`` passed and nothing was notified. Only a
  ``reliable`` watch answers it; the caller may keep waiting without
  running its check again (so an idle waiter sends no statement).

``PolledWatch``, the engines' default, hears only what its engine's
``wait_for_change`` hears (SQLite: ``notify`` in this process; a PostgreSQL
store behind a pooler: nothing) and answers ``True`` every ``poll`` seconds
at the latest, so the caller polls at that pace, as waiters always did.
PostgreSQL's listening watch is ``postgres_listen.ListenWatch``.

asyncio is imported only by ``wait_async`` (see ``engines.loop`` for why).
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["ChangeWatch", "PolledWatch"]


class ChangeWatch:
    """A registration for notifications on one channel (see the module docstring).

    Use it as a context manager, or ``close()`` it: a closed watch hears
    nothing more. Not shared between threads or tasks: one waiter each.
    """

    reliable = False

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; ``True``: look again, ``False``: nothing was notified."""
        raise NotImplementedError

    async def wait_async(self, timeout: float) -> bool:
        """``wait`` for a coroutine: the event loop keeps running meanwhile, no thread is held."""
        raise NotImplementedError

    def wait_until(self, deadline: float) -> bool:
        """Wait until woken (``True``: look again) or ``time.monotonic()`` reaches ``deadline`` (``False``)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self.wait(remaining):
                return True

    async def wait_until_async(self, deadline: float) -> bool:
        """``wait_until`` for a coroutine."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if await self.wait_async(remaining):
                return True

    def close(self) -> None:
        """Stop hearing the channel. Idempotent."""

    def __enter__(self) -> ChangeWatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class PolledWatch(ChangeWatch):
    """The engine's ``wait_for_change`` for at most ``poll`` seconds a wait, then ``True``: the caller polls."""

    __slots__ = ("_channel", "_engine", "_poll")

    def __init__(self, engine: Engine, channel: str, poll: float) -> None:
        self._engine = engine
        self._channel = channel
        self._poll = poll

    def wait(self, timeout: float) -> bool:
        self._engine.wait_for_change(self._channel, max(0.0, min(timeout, self._poll)))
        return True

    async def wait_async(self, timeout: float) -> bool:
        import asyncio  # already imported: a coroutine is running

        await asyncio.sleep(max(0.0, min(timeout, self._poll)))
        return True
