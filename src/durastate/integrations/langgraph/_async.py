"""The one bridge from LangGraph's ``a*`` methods to the synchronous implementation.

Every async method of ``DurastateSaver`` and ``DurastateStore`` awaits
``AsyncBridge.call(fn, *args)``, which runs the sync method on a small
thread pool owned by the saver or store (``durastate._aio.AsyncRunner``).
There is no second, async copy of any logic: the day ``durastate.aio``
lands, this is the one place to switch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from ..._aio import AsyncRunner
from ...errors import StoreClosed

P = ParamSpec("P")
T = TypeVar("T")


class AsyncBridge:
    """Runs sync callables for async callers; the pool starts on first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._runner: AsyncRunner | None = None
        self._lock = threading.Lock()
        self._closed = False

    async def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        runner = self._runner
        if runner is None:
            with self._lock:
                if self._closed:
                    raise StoreClosed(f"{self._name} is closed")
                if self._runner is None:
                    self._runner = AsyncRunner(name=self._name)
                runner = self._runner
        return await runner.run(fn, *args, **kwargs)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            runner, self._runner = self._runner, None
        if runner is not None:
            runner.close(wait=True)
