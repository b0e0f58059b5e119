"""Conformance for ``store.queues``: the helpers its test modules share."""

from __future__ import annotations

import durastate
from durastate.queues import Claim, QueueStats

__all__ = []

# Real-time bound for a thread the test waits on; reached only when broken.
FAILURE_DEADLINE = 60.0


def stats(store: durastate.Store, name: str | bytes = "q") -> QueueStats:
    return store.queues.stats(name)


def counts(ready: int = 0, in_flight: int = 0, delayed: int = 0, dead: int = 0) -> QueueStats:
    return QueueStats(ready=ready, in_flight=in_flight, delayed=delayed, dead=dead)


def pop_all(store: durastate.Store, name: str | bytes = "q") -> list[bytes]:
    popped: list[bytes] = []
    while (payload := store.queues.pop(name)) is not None:
        popped.append(payload)
    return popped


def claim(store: durastate.Store, name: str | bytes = "q", lease: float = 10.0) -> Claim:
    """Claim that must succeed."""
    got = store.queues.claim(name, lease=lease)
    assert got is not None, f"nothing to claim in {name!r}"
    return got
