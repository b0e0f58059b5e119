"""The async facades: which sync methods are iterators, streams, waits, blocks, claims.

Everything else about a facade is generated from the sync facet's class by
``durastate.aio._build``; its types are in the generated ``_facades.pyi``
(``python -m durastate.aio._stubgen --write`` after changing a facet's
public methods; a test fails while the stub is out of date).
"""

from __future__ import annotations

from typing import Any

from ..documents import Documents
from ..errors import DurastateError
from ..events import Events
from ..kv import KV, ScopedKV
from ..presence import Presence
from ..queues import Claim, Queues
from ..records import Records
from ._build import CONTEXT, ITER, PLAIN, STREAM, WAIT, FacadeSpec, Method, build_facades

__all__ = ["AsyncClaim", "AsyncDocuments", "AsyncEvents", "AsyncKV", "AsyncPresence", "AsyncQueues"]
__all__ += ["AsyncRecords", "AsyncScopedKV", "SPECS"]


def release_queue_claim(_queues: Queues, claim: Claim | None) -> None:
    """A cancelled ``claim``'s item is claimable again at once (the delivery counts, as a crash's would)."""
    if claim is not None:
        claim.renew(0.001)


def release_event_claims(events: Events, result: Any) -> None:
    """End the leases a cancelled ``claim_available``/``claim_any`` took (ready again at once)."""
    claimed = result.events if hasattr(result, "events") else result
    by_session: dict[tuple[str, str | None], list[dict[str, int]]] = {}
    for event in claimed:
        by_session.setdefault((event.session_id, event.claim_holder), []).append(
            {"index": event.index, "attempt": event.attempt_count}
        )
    for (session, holder), claims in by_session.items():
        if holder is not None:
            try:
                events.renew_claims(session, holder, claims, ttl_ms=0)
            except DurastateError:
                pass  # the lease runs out by itself


SPECS = [
    FacadeSpec("AsyncScopedKV", ScopedKV, {"scan": Method(ITER), "log": Method(ITER)}),
    FacadeSpec(
        "AsyncKV",
        KV,
        {"scan": Method(ITER), "log": Method(ITER), "scope": Method(PLAIN, wrap="AsyncScopedKV")},
    ),
    FacadeSpec(
        "AsyncClaim",
        Claim,
        attributes={"queue": "bytes", "id": "int", "payload": "bytes", "attempts": "int", "lease_expires_at": "float"},
    ),
    FacadeSpec(
        "AsyncQueues",
        Queues,
        {"claim": Method(WAIT, undo=release_queue_claim, wrap="AsyncClaim"), "pop": Method(WAIT)},
    ),
    FacadeSpec("AsyncDocuments", Documents, {"lock": Method(CONTEXT), "iter_keys": Method(ITER)}),
    FacadeSpec(
        "AsyncEvents",
        Events,
        {
            "stream": Method(STREAM),
            "channel": Method(PLAIN),
            "claim_available": Method(undo=release_event_claims),
            "claim_any": Method(undo=release_event_claims),
        },
    ),
    FacadeSpec("AsyncRecords", Records),
    FacadeSpec("AsyncPresence", Presence),
]

_FACADES = build_facades(SPECS)
AsyncScopedKV = _FACADES["AsyncScopedKV"]
AsyncKV = _FACADES["AsyncKV"]
AsyncClaim = _FACADES["AsyncClaim"]
AsyncQueues = _FACADES["AsyncQueues"]
AsyncDocuments = _FACADES["AsyncDocuments"]
AsyncEvents = _FACADES["AsyncEvents"]
AsyncRecords = _FACADES["AsyncRecords"]
AsyncPresence = _FACADES["AsyncPresence"]
