"""The async facades: which sync methods are iterators, streams, waits, blocks, claims.

One facade per facet of the registry (``durastate.facets.FACETS``), named
``Async`` + the facet's class, plus the facades of what facets return
(``AsyncScopedKV``, ``AsyncClaim``). Everything else about a facade is
generated from the sync class by ``durastate.aio._build``; its types are in
the generated ``_facades.pyi`` (``python -m durastate.aio._stubgen --write``
after changing a facet's public methods or the registry; a test fails while
the stub is out of date), ``AsyncFacets`` (the typed facet attributes of
``AsyncStore``) among them.
"""

from __future__ import annotations

from typing import Any

from .._tail import Tail
from ..engines.watch import ChangeWatch
from ..errors import DurastateError
from ..events import Events, StoredEvent
from ..facets import FACETS, Facet
from ..kv import ScopedKV
from ..queues import Claim, Queues
from ._build import CONTEXT, ITER, PLAIN, STREAM, WAIT, FacadeSpec, Method, build_facades


def release_queue_claim(queues: Queues, claim: Claim | None) -> None:
    """A cancelled ``claim``'s item is claimable again at once, its waiters woken (the delivery counts, as a
    crash's would)."""
    if claim is not None:
        queues._release(claim)


def watch_queue(queues: Queues, name: str | bytes, /, *_args: Any, **_kwargs: Any) -> ChangeWatch:
    """The change watch ``claim``/``pop`` on queue ``name`` wait on (the sync methods' own)."""
    return queues._watch(name)


def queue_look_again_at(
    queues: Queues, watch: ChangeWatch, deadline: float, name: str | bytes, /, *_args: Any, **_kwargs: Any
) -> float:
    """When a waiter on queue ``name`` tries again unless woken (the sync methods' own rule)."""
    return queues._look_again_at(name, watch, deadline)


def events_tail(events: Events, /, *args: Any, **kwargs: Any) -> Tail[StoredEvent, int]:
    """The ``Tail`` the sync ``events.stream`` follows for the same arguments."""
    return events._tail(*args, **kwargs)


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


READ = Method(reads=True)


def reads(*names: str) -> dict[str, Method]:
    """``names`` declared reads: calls that never write (run inline at ``durability="full"`` too, see ``_build``)."""
    return dict.fromkeys(names, READ)


# Reads of ScopedKV and KV alike (KV's take the scope first).
KV_READS = reads("get", "get_many", "counter", "counters", "log_keys", "namespaces")

# Per facet (durastate.facets.FACETS, by name): its methods that are not plain calls (which may write). A method
# declared a read has no path that writes: presence.read is not one (it sweeps expired rows in passing), nor are
# claims and pops. tests/test_aio_reads.py calls every one declared here.
FACET_METHODS: dict[str, dict[str, Method]] = {
    "kv": {
        **KV_READS,
        **reads("scopes"),
        "scan": Method(ITER),
        "log": Method(ITER),
        "scope": Method(PLAIN, wrap="AsyncScopedKV"),
    },
    "queues": {
        **reads("backlog", "dead_letters", "names", "peek", "peek_ready", "stats"),
        "claim": Method(
            WAIT, undo=release_queue_claim, wrap="AsyncClaim", watch=watch_queue, look_again_at=queue_look_again_at
        ),
        "pop": Method(WAIT, watch=watch_queue, look_again_at=queue_look_again_at),
    },
    "documents": {
        **reads("describe", "describe_history", "history", "list", "read", "read_raw", "read_as"),
        "lock": Method(CONTEXT),
        "iter_keys": Method(ITER),
    },
    "records": reads(
        "conversation",
        "document",
        "document_revisions",
        "entry",
        "find_document",
        "find_latest_head_marker",
        "last_seq",
        "scan_conversations",
        "scan_documents",
        "scan_entries",
        "scan_submissions",
        "scan_tasks",
        "submission",
        "submission_by_request",
        "task",
    ),
    "events": {
        **reads(
            "get",
            "list_sessions",
            "list_snapshots",
            "read",
            "read_after",
            "read_events",
            "read_state",
            "lane_backlog",
            "dead_letters",
        ),
        "stream": Method(STREAM, tail=events_tail),
        "channel": Method(PLAIN),
        "claim_available": Method(undo=release_event_claims),
        "claim_any": Method(undo=release_event_claims),
    },
    "presence": reads("namespaces", "peek"),
}


def facade_name(facet: Facet) -> str:
    """The facade class of a facet: ``Async`` + its class's name (``AsyncKV``)."""
    return f"Async{facet.cls.__name__}"


# The facades of what facets return (wrapped results), then one per facet.
SPECS = [
    FacadeSpec("AsyncScopedKV", ScopedKV, {**KV_READS, "scan": Method(ITER), "log": Method(ITER)}),
    FacadeSpec(
        "AsyncClaim",
        Claim,
        attributes={"queue": "bytes", "id": "int", "payload": "bytes", "attempts": "int", "lease_expires_at": "float"},
    ),
    *(FacadeSpec(facade_name(facet), facet.cls, FACET_METHODS.get(facet.name, {})) for facet in FACETS),
]
# Facet name -> its facade's class name (what ``AsyncStore`` makes for ``store.<name>``).
FACADE_OF = {facet.name: facade_name(facet) for facet in FACETS}

FACADES = build_facades(SPECS)
globals().update(FACADES)  # AsyncKV, AsyncQueues, ...: typed in the generated _facades.pyi
__all__ = [*FACADES, "FACADE_OF", "FACADES", "SPECS", "AsyncFacets"]


class AsyncFacets:
    """Base of ``AsyncStore``: the facet attributes, one per facet, typed in the generated stub."""

    __slots__ = ()
