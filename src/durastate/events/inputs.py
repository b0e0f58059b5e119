"""Checks of the events facet's arguments: new events, causes, lease expiries.

Shared rules (text, int64, positive, durations) come from ``_validate``;
what is checked here is specific to events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._json import dump_json
from .._validate import (
    MAX_DURATION_MS,
    MAX_NAME_SIZE,
    as_int64,
    as_list,
    fail,
    fail_type,
    nonempty_text,
    positive,
    text,
)
from .models import Cause, DuplicateBatch


def expiry(now: int, ttl_ms: Any, expires_at_ms: Any, *, claim: bool, seed_rules: bool = False) -> int:
    """The lease expiry in epoch ms: ``expires_at_ms`` if given, else ``now + ttl_ms``.

    A claim (``claim``) must hand out a live lease: ``ttl_ms >= 1``, or an
    ``expires_at_ms`` later than ``now`` (the store's clock). A renewal may
    end a lease: ``ttl_ms >= 0`` (0 ends it now; ``release``-like) and any
    ``expires_at_ms``. ``seed_rules`` (compat.a2): the seed's arithmetic,
    any ``ttl_ms`` in ``[-MAX_DURATION_MS, MAX_DURATION_MS]`` and any
    ``expires_at_ms``, expired leases included, and both at once
    (``expires_at_ms`` wins); otherwise passing both is refused.
    """
    if expires_at_ms is not None:
        if ttl_ms is not None and not seed_rules:
            fail("pass ttl_ms= or expires_at_ms=, not both")
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
TYPE_AND_PAYLOAD = frozenset(("type", "payload"))


@dataclass(slots=True)
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


def _plain(value: Any) -> bool:
    """Whether ``value`` is a str that ``text`` would take as is (ASCII, no NUL): the common case, checked fast."""
    return type(value) is str and value.isascii() and "\x00" not in value


def plain_name(value: Any) -> bool:
    """Whether ``value`` passes ``nonempty_text`` as is, by the fast test of the common case (ASCII)."""
    return type(value) is str and 0 < len(value) <= MAX_NAME_SIZE and value.isascii() and "\x00" not in value


def new_events(name: str, events: Any, max_size: int, *, need_ids: bool, empty_ids: bool = False) -> list[NewEvent]:
    """The checked events of an append (or a completion's children, ``need_ids``).

    An ``id``, a ``type`` and a ``lane`` name something: not empty
    (``empty_ids``: the a2 seed's rule, which allows ``""``).
    """
    if type(events) in (tuple, list) and not events:  # the default, or []: skips as_list's ABC checks
        return []
    named = text if empty_ids else nonempty_text  # a type or a lane names something: not empty either
    prepared: list[NewEvent] = []
    # Fast paths (exact list / dict types skip ABC isinstance checks; the
    # key check runs as a subset test; plain ASCII strings skip ``text``,
    # whose checks they pass) keep an append's validation a small part of
    # its cost; the checks and messages are the same.
    for i, event in enumerate(events if type(events) is list else as_list(name, events)):
        if type(event) is not dict and not isinstance(event, Mapping):
            fail_type(f"{name}[{i}]", "a mapping with 'type' and 'payload'", event)
        if event.keys() == TYPE_AND_PAYLOAD:  # the usual event: nothing else to look for
            if need_ids:
                fail(f"{name}[{i}] needs an 'id' (returned events are matched by id on retry)")
            event_id = lane = cause = None
            settled = False
            event_type = event["type"]
            if not (_plain(event_type) and event_type):
                event_type = named(f"{name}[{i}].type", event_type, limit=None)
        else:
            if not event.keys() <= EVENT_KEYS:
                unknown = set(event) - EVENT_KEYS
                fail(f"{name}[{i}] has unknown keys {sorted(map(str, unknown))}")
            if "type" not in event:
                fail(f"{name}[{i}] needs a 'type'")
            event_type = event["type"]
            if not (_plain(event_type) and event_type):
                event_type = named(f"{name}[{i}].type", event_type, limit=None)
            event_id = event.get("id")
            if event_id is not None:
                if not plain_name(event_id):
                    event_id = (text if empty_ids else nonempty_text)(f"{name}[{i}].id", event_id)
            elif need_ids:
                fail(f"{name}[{i}] needs an 'id' (returned events are matched by id on retry)")
            lane = event.get("lane")
            if lane is not None and not (_plain(lane) and 0 < len(lane) <= MAX_NAME_SIZE):
                lane = named(f"{name}[{i}].lane", lane)
            settled = event.get("settled", False)
            if settled is not False and settled is not True:
                if settled is not None:
                    fail_type(f"{name}[{i}].settled", "a bool", settled)
                settled = False
            cause = event.get("cause")
            if cause is not None:
                cause = cause_of(f"{name}[{i}].cause", cause)
        prepared.append(
            NewEvent(
                event_id,
                event_type,
                dump_json(f"{name}[{i}].payload", event.get("payload"), max_size),
                cause,
                lane,
                settled,
            )
        )
    return prepared


def ids_unique(prepared: list[NewEvent]) -> list[str]:
    ids = [e.id for e in prepared if e.id is not None]
    if len(set(ids)) != len(ids):
        raise DuplicateBatch("batch contains the same event id more than once")
    return ids
