"""Every async call declared a read (``AsyncRunner.call(..., reads=True)``) that ran inline changed nothing.

Installed for the whole suite by ``tests/conftest.py``: the integrations'
``AsyncCalls.read`` and the facades' iterators and tails then run under it in
every test that reaches them, so a method declared a read that writes (say a
TTL refreshed on read) fails the test that calls it, at either durability.
Checked only for a call that ran once, inline, on the loop's thread (the
thread's change count, ``no_wait_changes``, brackets it with nothing else
running in between); one handed to a worker is not looked at. The facades'
``reads`` methods take a hot path of their own (``aio._build._make_call``):
``tests/test_aio_reads.py`` runs each of those.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from durastate._aio import AsyncRunner


class ReadWrote(AssertionError):
    """A call declared a read changed the store."""


def install() -> None:
    real = AsyncRunner.call

    async def checked_call(
        self: AsyncRunner,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Any = None,
        *,
        reads: bool = False,
        on_cancel: Callable[[], object] | None = None,
    ) -> Any:
        no_wait = self.no_wait_reads if reads else None
        if no_wait is None:
            return await real(self, fn, args, kwargs, undo, reads=reads, on_cancel=on_cancel)
        runs: list[int] = []

        def watched(*a: Any, **k: Any) -> Any:
            runs.append(threading.get_ident())
            return fn(*a, **k)

        before = no_wait()
        result = await real(self, watched, args, kwargs, undo, reads=True, on_cancel=on_cancel)
        if runs == [threading.get_ident()]:
            after = no_wait()
            if after != before:
                raise ReadWrote(
                    f"{getattr(fn, '__qualname__', fn)!s} is declared a read but changed {after - before} rows"
                )
        return result

    AsyncRunner.call = checked_call  # type: ignore[method-assign]
