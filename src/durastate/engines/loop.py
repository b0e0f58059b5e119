"""The asyncio event loop running on the calling thread, without importing asyncio; what an engine's loop commits share.

Engines ask it on their refusal paths (a lock wait on an event loop's
thread). Importing asyncio costs a short-lived process a large share of its
first ``durastate.open`` (asyncio pulls in ssl, concurrent.futures, ...),
and no loop can run before something imported asyncio, so until then the
answer is ``None`` without it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol

__all__ = ["LoopCommit", "Settle", "WouldWait", "running_loop"]

# The failure branch of a commit whose answer failed, run on a worker: returns once the transaction is
# known committed (found, or sent again), raises otherwise.
Settle = Callable[[], object]


def running_loop() -> object | None:
    """The event loop running on this thread (``asyncio._get_running_loop()``), or ``None``."""
    asyncio = sys.modules.get("asyncio")
    return None if asyncio is None else asyncio._get_running_loop()


class WouldWait(BaseException):
    """Raised in an engine's no-wait mode (``Engine.run_without_waiting``) where a call would wait.

    A ``BaseException``, so no ``except Exception`` in a facet swallows it;
    it leaves the call before its ``COMMIT`` was sent, so nothing of the
    attempt is applied, and the caller runs the call again on a worker.
    """


class LoopCommit(Protocol):
    """A transaction's ``COMMIT`` sent from an event loop's thread, its answer still to collect there.

    ``collect(loop, done)`` collects it from the loop's reader and writer
    callbacks and then calls ``done(None)`` (committed, connection given
    back) or ``done(settle)`` (the answer failed: ``settle()`` on a worker
    decides, as a sync commit's failure branch does). ``finish_here()``
    collects what is left on the calling thread, blocking, for a loop that
    will not run again (ended, or blocked in a sync ``close()``); ``done``
    is called all the same, exactly once either way.
    """

    def collect(self, loop: object, done: Callable[[Settle | None], None]) -> None: ...

    def finish_here(self) -> None: ...
