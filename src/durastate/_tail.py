"""Following a channel: read what is new, wait for a change, read again; one rule, driven sync or async.

A facet's stream (``events.stream``) is a ``Tail``, which does no waiting of
its own: the change watch to register before the first read (so a commit
between a read and the wait wakes the wait), ``read_after(cursor)`` giving
the next items and the cursor after them, the cursor to start from, and the
poll interval. ``follow`` drives it on the calling thread; the async
facades drive the same ``Tail`` with each read on the store's runner and
each wait on the event loop (``aio._build.FollowedTail``), so an async
stream holds no thread while it waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Generic, TypeVar

from .engines.watch import ChangeWatch

__all__ = ["Tail", "follow"]

T = TypeVar("T")
C = TypeVar("C")


@dataclass(frozen=True)
class Tail(Generic[T, C]):
    """What following needs (see the module docstring); ``read_after`` never changes the cursor it is given."""

    watch: Callable[[], ChangeWatch]
    read_after: Callable[[C], tuple[list[T], C]]
    start: C
    poll_interval: float


def follow(tail: Tail[T, C], stop: threading.Event | None = None) -> Generator[T, None, None]:
    """Every item after ``tail.start``, then new ones as they are notified; ends when ``stop`` is set (looked at
    every ``poll_interval`` seconds while waiting) or the generator is closed.

    While caught up it reads again when the watch says "look again": when
    woken, and also every ``poll_interval`` seconds where the watch cannot
    hear every commit (``ChangeWatch.reliable`` false).
    """
    cursor = tail.start
    with tail.watch() as watch:
        while True:
            items, cursor = tail.read_after(cursor)
            yield from items
            if items:
                continue
            while True:
                if stop is not None and stop.is_set():
                    return
                if watch.wait(tail.poll_interval):
                    break
            if stop is not None and stop.is_set():
                return
