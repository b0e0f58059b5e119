"""Checks of the events facet's arguments: new events, causes, lease expiries.

Shared rules (text, int64, positive, durations) come from ``_validate``;
what is checked here is specific to events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._json import dump_json
from .._validate import MAX_DURATION_MS, as_int64, as_list, fail, fail_type, nonempty_text, positive, text
from .models import Cause, DuplicateBatch


def expiry(now: int, ttl_ms: Any, expires_at_ms: Any, *, claim: bool, seed_rules: bool = False) -> int:
    """The lease expiry in epoch ms: ``expires_at_ms`` if given, else ``now + ttl_ms``.

    A claim (``claim``) must hand out a live lease: ``ttl_ms >= 1``, or an
    ``expires_at_ms`` later than ``now`` (the store's clock). A renewal may
    end a lease: ``ttl_ms >= 0`` (0 ends it now; ``release``-like) and any
    ``expires_at_ms``. ``seed_rules`` (compat.a2): the seed's arithmetic,
    any ``ttl_ms`` in ``[-MAX_DURATION_MS, MAX_DURATION_MS]`` and any
    ``expires_at_ms``, expired leases included.
    """
    if expires_at_ms is not None:
        expires = as_int64("expires_at_ms", expires_at_ms)
        if claim and not seed_rules and expires <= now:
            fail(
                f"expires_at_ms must be later than now ({now} ms by the store's clock), got {expires}:"
                " the claim would have expired already"
            )
        return expires
    if ttl_ms is None:
        fail("pass ttl_ms= or expires_at_ms=")
    ttl = as_int64("ttl_ms", ttl_ms)
    least = -MAX_DURATION_MS if seed_rules else 1 if claim else 0
    if not least <= ttl <= MAX_DURATION_MS:
        if claim and ttl == 0 and not seed_rules:
            fail("ttl_ms must be >= 1: a claim with ttl_ms=0 would have expired already")
        fail(f"ttl_ms must be between {least} and {MAX_DURATION_MS}, got {ttl}")
    return now + ttl


EVENT_KEYS = frozenset(("type", "payload", "id", "cause", "lane", "settled"))


@dataclass
class NewEvent:
    id: str | None
    type: str
    blob: bytes
    cause: Cause | None
    lane: str | None
    settled: bool


def cause_of(name: str, value: Any) -> Cause | None:
    if value is None:
        return None
    if isinstance(value, Cause):
        value = {"index": value.index, "attempt": value.attempt, "batch_size": value.batch_size}
    if not isinstance(value, Mapping):
        fail_type(name, "a mapping {'index', 'attempt', 'batch_size'?}", value)
    unknown = set(value) - {"index", "attempt", "batch_size"}
    if unknown:
        fail(f"{name} has unknown keys {sorted(map(str, unknown))}")
    if "index" not in value or "attempt" not in value:
        fail(f"{name} needs 'index' and 'attempt'")
    batch = value.get("batch_size")
    return Cause(
        positive(f"{name}.index", value["index"]),
        positive(f"{name}.attempt", value["attempt"]),
        None if batch is None else positive(f"{name}.batch_size", batch),
    )


def new_events(name: str, events: Any, max_size: int, *, need_ids: bool, empty_ids: bool = False) -> list[NewEvent]:
    """The checked events of an append (or a completion's children, ``need_ids``).

    An ``id`` names a new event: not empty (``empty_ids``: the a2 seed's
    rule, which allows ``""``).
    """
    if type(events) is tuple and not events:  # the default; skips as_list's ABC checks
        return []
    prepared: list[NewEvent] = []
    # Fast paths (exact list / dict types skip ABC isinstance checks; the
    # key check runs as a subset test) keep an append's validation a small
    # part of its cost; the checks and messages are the same.
    for i, event in enumerate(events if type(events) is list else as_list(name, events)):
        where = f"{name}[{i}]"
        if type(event) is not dict and not isinstance(event, Mapping):
            fail_type(where, "a mapping with 'type' and 'payload'", event)
        if not event.keys() <= EVENT_KEYS:
            unknown = set(event) - EVENT_KEYS
            fail(f"{where} has unknown keys {sorted(map(str, unknown))}")
        if "type" not in event:
            fail(f"{where} needs a 'type'")
        event_id = event.get("id")
        if event_id is not None:
            event_id = (text if empty_ids else nonempty_text)(f"{where}.id", event_id)
        elif need_ids:
            fail(f"{where} needs an 'id' (returned events are matched by id on retry)")
        lane = event.get("lane")
        settled = event.get("settled", False)
        if settled is None:
            settled = False
        if not isinstance(settled, bool):
            fail_type(f"{where}.settled", "a bool", settled)
        prepared.append(
            NewEvent(
                event_id,
                text(f"{where}.type", event["type"], limit=None),
                dump_json(f"{where}.payload", event.get("payload"), max_size),
                None if (cause := event.get("cause")) is None else cause_of(f"{where}.cause", cause),
                None if lane is None else text(f"{where}.lane", lane),
                settled,
            )
        )
    return prepared


def ids_unique(prepared: list[NewEvent]) -> list[str]:
    ids = [e.id for e in prepared if e.id is not None]
    if len(set(ids)) != len(ids):
        raise DuplicateBatch("batch contains the same event id more than once")
    return ids
