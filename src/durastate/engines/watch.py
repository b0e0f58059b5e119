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
``wait_for_change`` hears (a PostgreSQL store behind a pooler: nothing) and
answers ``True`` every ``poll`` seconds at the latest, so the caller polls
at that pace, as waiters always did.

``FiredWatch`` is a watch its engine fires from any thread: a sync wait
blocks on an event, a coroutine's wait is woken on its own loop (no thread
is held while it waits). Its two kinds: ``LocalWatch``, fired by
``notify`` in this process (``LocalChannels``: SQLite's watches, which
also answer ``True`` every ``poll`` seconds since other processes'
commits are unheard), and PostgreSQL's listening watch
(``postgres_listen.ListenWatch``).

asyncio is imported only by ``wait_async`` (see ``engines.loop`` for why).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["ChangeWatch", "FiredWatch", "LocalChannels", "LocalWatch", "PolledWatch", "forget"]


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


W = TypeVar("W")


def forget(by_channel: dict[str, set[W]], channel: str, watch: W) -> None:
    """Remove ``watch`` from ``by_channel[channel]``, and the channel once it has no watch left."""
    watches = by_channel.get(channel)
    if watches is not None:
        watches.discard(watch)
        if not watches:
            del by_channel[channel]


class FiredWatch(ChangeWatch):
    """A watch woken by ``fire()`` from any thread; a fire before a wait is kept until that wait returns.

    A subclass says how long a quiet wait may last and what it answers then (``_quiet``).
    """

    def __init__(self, poll: float) -> None:
        self._poll = poll
        self._fired = threading.Event()
        # A coroutine's wake-up while it awaits (set by wait_async), called from the firing thread.
        self._wake: Callable[[], None] | None = None

    def fire(self) -> None:
        """Wake the waiter (any thread): its next wait returns ``True``."""
        self._fired.set()
        wake = self._wake
        if wake is not None:
            wake()

    def _quiet(self, timeout: float) -> tuple[float, bool]:
        """``(seconds to wait at most, the answer if nothing fired meanwhile)`` for a wait of ``timeout``."""
        raise NotImplementedError

    def wait(self, timeout: float) -> bool:
        limit, quiet = self._quiet(timeout)
        if self._fired.wait(max(0.0, limit)):
            # Cleared before the caller's check: a notification from now on fires again.
            self._fired.clear()
            return True
        return quiet

    async def wait_async(self, timeout: float) -> bool:
        import asyncio  # already imported: a coroutine is running

        limit, quiet = self._quiet(timeout)
        if not self._fired.is_set():
            loop = asyncio.get_running_loop()
            woken = loop.create_future()

            def settle() -> None:
                if not woken.done():
                    woken.set_result(None)

            def wake() -> None:
                try:
                    loop.call_soon_threadsafe(settle)
                except RuntimeError:  # the loop was closed meanwhile: nobody is waiting
                    pass

            # A timer, not asyncio.wait_for: on Python 3.11 wait_for can swallow a cancellation that
            # arrives as the future completes, and a cancelled waiter would wait on.
            timer = loop.call_later(max(0.0, limit), settle)
            self._wake = wake
            try:
                if not self._fired.is_set():  # fired before _wake was set: nothing to wait for
                    await woken
            finally:
                timer.cancel()
                self._wake = None
            if not self._fired.is_set():
                return quiet
        self._fired.clear()
        return True


class LocalWatch(FiredWatch):
    """A watch fired by ``notify`` in this process (``LocalChannels``); answers ``True`` every ``poll`` seconds
    too, since another process's commit is not heard.
    """

    def __init__(self, channels: LocalChannels | None, channel: str, poll: float) -> None:
        super().__init__(poll)
        self.channel = channel
        self._channels = channels

    def _quiet(self, timeout: float) -> tuple[float, bool]:
        return min(timeout, self._poll), True

    def close(self) -> None:
        channels, self._channels = self._channels, None
        if channels is not None:
            channels.release(self)


class LocalChannels:
    """This process's watches by channel: ``fire(channel)`` wakes each; ``close()`` wakes all and ends watching."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[str, set[LocalWatch]] = {}
        self._closed = False

    def watch(self, channel: str, poll: float) -> LocalWatch:
        """A watch on ``channel`` registered now; once closed, one that is fired already (the check raises)."""
        watch = LocalWatch(self, channel, poll)
        with self._lock:
            if not self._closed:
                self._watches.setdefault(channel, set()).add(watch)
                return watch
        watch._channels = None
        watch.fire()
        return watch

    def fire(self, channel: str) -> None:
        if not self._watches:
            # Nobody watches (a push with no waiter in this process): no lock, no list. Read without the lock:
            # a watch registered after this read was registered after the change it would wait for was made
            # (notify follows the write), so its first try sees it (see ChangeWatch).
            return
        with self._lock:
            watches = list(self._watches.get(channel, ()))
        for watch in watches:
            watch.fire()

    def release(self, watch: LocalWatch) -> None:
        with self._lock:
            forget(self._watches, watch.channel, watch)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watches = [w for ws in self._watches.values() for w in ws]
            self._watches.clear()
        for watch in watches:
            watch._channels = None
            watch.fire()
