"""What DurastateSaver and DurastateStore share: the async bridge, and owning a store.

``AsyncBridge``: the one bridge from LangGraph's ``a*`` methods to the
synchronous implementation.

Every async method of ``DurastateSaver`` and ``DurastateStore`` awaits
``AsyncBridge.call(fn, *args)``, which runs the sync method on a small
thread pool owned by the saver or store (``durastate._aio.AsyncRunner``).
There is no second, async copy of any logic: the day ``durastate.aio``
lands, this is the one place to switch.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from ..._aio import AsyncRunner
from ...errors import InvalidRequest, StoreClosed
from ...store import Store
from ...store import open as open_store

P = ParamSpec("P")
T = TypeVar("T")
Bound = TypeVar("Bound", bound="StoreBound")


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


class StoreBound:
    """A durastate ``Store`` held, and closed with this object if it opened it (``opened``)."""

    store: Store
    _bridge: AsyncBridge
    _owns_store: bool

    def _bind(self, store: Store, name: str, what: str) -> None:
        if not isinstance(store, Store):
            raise InvalidRequest(f"store must be a durastate.Store, got {type(store).__name__}")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"name must be a non-empty str, got {name!r}")
        self.store = store
        self._owns_store = False
        self._bridge = AsyncBridge(f"durastate-{what}-{name}")

    @classmethod
    def opened(
        cls: type[Bound], url: str | os.PathLike[str] | None, open_options: dict[str, Any], **options: Any
    ) -> Bound:
        """``cls(durastate.open(url, **open_options), **options)``, owning the store it opened."""
        store = open_store(url, **open_options)
        try:
            bound = cls(store, **options)  # type: ignore[call-arg]
        except BaseException:
            store.close()
            raise
        bound._owns_store = True
        return bound

    def close(self) -> None:
        """Stop the async pool; close the store if ``from_url`` opened it. Idempotent."""
        self._bridge.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self: Bound) -> Bound:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self: Bound) -> Bound:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Closing waits for calls in flight: not on the event loop's thread.
        await asyncio.to_thread(self.close)
