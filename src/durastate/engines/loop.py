"""The asyncio event loop running on the calling thread, without importing asyncio; what an engine's loop commits share.

Engines ask it on their refusal paths (a lock wait on an event loop's
thread). Importing asyncio costs a short-lived process a large share of its
first ``durastate.open`` (asyncio pulls in ssl, concurrent.futures, ...),
and no loop can run before something imported asyncio, so until then the
answer is ``None`` without it.

How long a call waits for a lock another connection holds, by where it
runs (``lock_wait_here``; both engines):

* off an event loop's thread: the store's busy timeout;
* a sync call made on an event loop's thread (a notebook cell, an
  ``async def`` handler calling a sync API): ``LOOP_LOCK_WAIT`` at most.
  The loop stalls while it waits, as it does for any sync call, so the
  wait is short; and if the holder is a transaction that very loop drives
  it could never finish: after ``LOOP_LOCK_WAIT`` the call is refused with
  an error saying so, never hung. A lock another process or thread holds
  for a moment (the usual case) is simply waited for;
* an async front end's inline call: not at all. It is refused at once,
  having changed nothing, and the front end runs it again on a worker
  thread, which waits as a sync call does: the loop never sleeps on a lock.
  Such a call is told by the code it runs under: each front end registers
  the function that makes its inline calls (``inline_site``), and a call
  that meets a lock on a loop's thread looks up its stack for one
  (``in_inline_call``). Nothing is marked per call: an inline call is a
  facade's hot path (a thread-local flag set and reset around each cost
  ~80 ns, measured as +0.3 us on an async kv.get, past its target of 1.15x
  the sync call), while the look happens only once a lock was met.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType
from typing import Protocol

__all__ = [
    "LOOP_LOCK_WAIT",
    "LoopCommit",
    "Settle",
    "WouldWait",
    "in_inline_call",
    "inline_site",
    "lock_wait_here",
    "running_loop",
]

# Seconds a sync call made on an event loop's thread waits for a lock (a SQLite write lock, a PostgreSQL row lock).
LOOP_LOCK_WAIT = 2.0

# The code of the functions that make the async front ends' inline calls (``inline_site``).
_INLINE_SITES: set[CodeType] = set()


def inline_site(function: Callable[..., object]) -> None:
    """Register ``function`` as one that runs calls inline on an event loop's thread (see the module docstring).

    A call made under it (anywhere up its stack) that meets a lock is
    refused at once, for the function to run it again elsewhere.
    """
    _INLINE_SITES.add(function.__code__)


def in_inline_call() -> bool:
    """Whether this thread runs under a registered inline site (looked up the stack; only once a lock was met)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _INLINE_SITES:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# The failure branch of a commit whose answer failed, run on a worker: returns once the transaction is
# known committed (found, or sent again), raises otherwise.
Settle = Callable[[], object]


def running_loop() -> object | None:
    """The event loop running on this thread (``asyncio._get_running_loop()``), or ``None``."""
    asyncio = sys.modules.get("asyncio")
    return None if asyncio is None else asyncio._get_running_loop()


def lock_wait_here(busy_timeout: float) -> float | None:
    """Seconds a call on this thread waits for a lock held elsewhere (see the module docstring).

    ``busy_timeout`` off event loop threads; ``min(LOOP_LOCK_WAIT,
    busy_timeout)`` for a sync call on one; ``None`` (refuse at once) inside
    an async front end's inline call. Asked only once a lock was met.
    """
    if running_loop() is None:
        return busy_timeout
    if in_inline_call():
        return None
    return min(LOOP_LOCK_WAIT, busy_timeout)


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
