"""What the framework integrations share: whose store it is, and the thread bridge.

``StoreHolder``: an integration object is given ``url`` (it opens the store
and closes it on ``close()`` or at the end of a ``with`` block) or ``store=``
(a borrowed ``durastate.Store``, left open), never both.

``call_in_thread``: until ``durastate.aio`` is in place, each integration
routes every coroutine through its own one-line ``_call``, which lands here:
the synchronous implementation runs on a worker thread
(``asyncio.to_thread``), so there is one copy of the logic and no
transaction ever spans an ``await``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from .. import store as _store
from .._validate import fail

__all__ = ["StoreHolder", "call_in_thread"]

T = TypeVar("T")
Self = TypeVar("Self", bound="StoreHolder")


class StoreHolder:
    """Holds ``self.store``: opened from ``url`` (and closed here) or borrowed as ``store=``.

    ``url=None`` without ``store=`` opens durastate's default store. Arguments
    are checked before anything is opened.
    """

    def __init__(self, url: str | None, store: _store.Store | None) -> None:
        if url is not None and store is not None:
            fail("pass url or store=, not both")
        if store is not None and not isinstance(store, _store.Store):
            fail(f"store must be a durastate.Store, got {type(store).__name__}")
        self.store = _store.open(url) if store is None else store
        self._owns_store = store is None

    def close(self) -> None:
        """Close the store if this object opened it (a borrowed one stays open). Idempotent."""
        if self._owns_store:
            self.store.close()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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
