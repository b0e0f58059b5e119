"""Run the synchronous core from ``async`` code, without a second copy of it.

The facets are synchronous; async front ends (the a2 and pi-durable
adapters, a future ``durastate.aio``) call them through an ``AsyncRunner``:
a small thread pool per store. Each call runs entirely on one pool thread,
so a facet operation (and any transaction inside it) never spans an
``await``; SQLite gets its per-thread connections as usual.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from .errors import StoreClosed

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_WORKERS = 4


class AsyncRunner:
    """``await runner.run(fn, *args)`` runs ``fn`` on the runner's threads."""

    def __init__(self, *, workers: int = DEFAULT_WORKERS, name: str = "durastate") -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._closed = False

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        if self._closed:
            raise StoreClosed("the store's async runner is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def close(self, *, wait: bool = True) -> None:
        """Refuse new calls; with ``wait``, let calls in flight finish first."""
        self._closed = True
        self._executor.shutdown(wait=wait)

    @property
    def closed(self) -> bool:
        return self._closed
