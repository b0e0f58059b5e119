"""Cancel async calls, then close what they run on, round after round: the body of the cancel-and-close tests.

A connection freed under a thread still inside SQLite crashes the process,
so the tests run :func:`cancel_then_close` in a child process (a crash is an
exit code, a test failure) for every adapter on ``durastate._aio`` (the
integrations, ``compat.a2``, ``compat.pi_durable``, ``durastate.aio``).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

__all__ = ["cancel_then_close"]

T = TypeVar("T")


async def cancel_then_close(
    url: str,
    rounds: int,
    open_target: Callable[[], Awaitable[T]],
    calls: Sequence[Callable[[T, int], Coroutine[Any, Any, Any]]],
    close: Callable[[T], Awaitable[Any]],
    *,
    copies: int = 3,
    seed: int = 7,
) -> None:
    """Each round: open a target, start ``copies`` of each call, cancel them all, close the target.

    The calls get 0 to 3 loop steps before they are cancelled (some have not
    started, some wait on a worker thread). On a SQLite file (``url``
    ``sqlite://PATH``), every other round on average another connection holds
    the write lock while the calls start, so they are on workers waiting for
    it when they are cancelled and the target is closed; a timer thread lets
    it go while ``close`` waits. Each call gets a distinct number (keys stay
    apart). ``seed`` makes the rounds repeatable.
    """
    path = url[len("sqlite://") :] if url.startswith("sqlite://") else None
    rng = random.Random(seed)
    for r in range(rounds):
        target = await open_target()
        lock = _hold_lock(path, rng)
        tasks = [asyncio.create_task(call(target, r * 100 + i)) for i, call in enumerate(list(calls) * copies)]
        for _ in range(rng.randint(0, 3)):
            await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        if lock is not None:
            threading.Timer(rng.random() / 500, _let_go, (lock,)).start()
        await close(target)
        await asyncio.gather(*tasks, return_exceptions=True)


def _hold_lock(path: str | None, rng: random.Random) -> sqlite3.Connection | None:
    """Half the time on a SQLite file: another connection inside ``BEGIN IMMEDIATE``."""
    if path is None or rng.random() < 0.5:
        return None
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _let_go(conn: sqlite3.Connection) -> None:
    conn.execute("ROLLBACK")
    conn.close()
