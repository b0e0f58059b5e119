"""Running the synchronous core from an integration's coroutines.

Until ``durastate.aio`` exists, each integration routes every coroutine
through its own one-line ``_call``, which lands here: the synchronous
implementation runs on a worker thread (``asyncio.to_thread``), so there is
one copy of the logic and no transaction ever spans an ``await``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["call_in_thread"]

T = TypeVar("T")


async def call_in_thread(fn: Callable[..., T], /, *args: Any) -> T:
    """``fn(*args)`` on a worker thread, carried to its end even if the caller is cancelled.

    A cancelled caller still waits for ``fn`` to finish (a write that began
    is committed or rolled back before the caller moves on, never left
    running behind its back), then the first ``CancelledError`` is raised.
    This is how the OpenAI Agents SDK's own sessions treat cancellation.
    """
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        task.exception()  # retrieved, so a failed write is not reported as "never retrieved"
        raise cancelled
    return task.result()
