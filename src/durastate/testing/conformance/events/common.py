"""Conformance for ``store.events``: the helpers its test modules share."""

from __future__ import annotations

from typing import Any

from durastate.events import (
    Events,
    StoredEvent,
)
from durastate.testing.clock import FakeClock

__all__ = []

S = "session-1"


def ev(type: str = "t", payload: Any = None, **extra: Any) -> dict[str, Any]:
    return {"type": type, "payload": payload, **extra}


def now_ms(clock: FakeClock) -> int:
    return int(clock() * 1000)


def everything(events: Events, session: str = S) -> list[StoredEvent]:
    return events.read(session)


def claim_one(events: Events, session: str = S, holder: str = "w", ttl_ms: int = 1000) -> StoredEvent:
    result = events.claim_available(session, holder, ttl_ms=ttl_ms)
    assert result.outcome == "claimed", result
    assert len(result.events) == 1, result
    return result.events[0]
