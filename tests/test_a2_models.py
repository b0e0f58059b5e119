"""compat.a2's result models carry every field of the facets' types they mirror.

The a2 adapter copies the events facet's results (and presence's entries)
into the seed's shapes field by field, turning epoch milliseconds into
datetimes. A field added to an events type must show up in the a2 model
too, or this test names it: nothing is dropped silently. The conversion
functions are checked with a value in every field.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import typing
from datetime import datetime
from typing import Any

import pytest

from durastate import events as ev
from durastate import presence as pr
from durastate.compat import a2
from durastate.events import models as event_models

# events (or presence) type -> the a2 model that mirrors it, field for field.
MIRRORS: dict[type, type] = {
    ev.Cause: a2.EventCause,
    ev.StoredEvent: a2.StoredEvent,
    ev.AppendResult: a2.AppendResult,
    ev.ClaimResult: a2.ClaimResult,
    ev.CompleteResult: a2.CompleteResult,
    ev.StateRead: a2.StateRead,
    ev.SnapshotInfo: a2.SnapshotInfo,
    ev.SessionSummary: a2.SessionSummary,
    ev.SessionPage: a2.SessionList,
    ev.EventPage: a2.EventPage,
    pr.PresenceEntry: a2.PresenceRow,
}
# Types a2 hands out as they are (re-exported: nothing to drift).
SHARED = {ev.RenewResult, ev.FailResult, ev.Snapshot}
# Results of events methods the a2 seed has no counterpart for (operators' listings): a2 hands none out.
NOT_IN_A2 = {ev.LaneBacklog}


def result_types() -> list[type]:
    """Every dataclass the events facet returns (its models module)."""
    return [
        value
        for _, value in inspect.getmembers(event_models, inspect.isclass)
        if dataclasses.is_dataclass(value) and value.__module__ == event_models.__name__
    ]


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_every_events_result_type_is_mirrored_or_shared() -> None:
    found = set(result_types())
    assert found >= {ev.StoredEvent, ev.SessionSummary}  # the scan works
    assert found - set(MIRRORS) - SHARED - NOT_IN_A2 == set(), "an events result type a2 neither mirrors nor re-exports"
    assert not any(hasattr(a2, cls.__name__) for cls in NOT_IN_A2)


def test_shared_types_are_the_same_objects() -> None:
    for cls in SHARED:
        assert getattr(a2, cls.__name__) is cls


@pytest.mark.parametrize(("facet_type", "model"), list(MIRRORS.items()), ids=lambda c: c.__qualname__)
def test_the_a2_model_has_every_field_in_the_same_order(facet_type: type, model: type) -> None:
    assert field_names(model) == field_names(facet_type)


def test_the_seeds_brief_event_is_a_prefix_of_the_stored_event() -> None:
    # read_state answers the seed's Event, the first six fields of a StoredEvent (by the seed's design).
    brief = field_names(a2.Event)
    assert brief == field_names(ev.StoredEvent)[: len(brief)]


def _is_time(model: type, name: str) -> bool:
    return "datetime" in str(typing.get_type_hints(model)[name])


def _sample(cls: type, seed: int) -> Any:
    """An instance of a facet type with a distinct, non-None value in every field."""
    values: dict[str, Any] = {}
    for number, f in enumerate(dataclasses.fields(cls), seed):
        hint = str(typing.get_type_hints(cls)[f.name])
        if f.name == "cause":
            values[f.name] = ev.Cause(number, number + 1, number + 2)
        elif f.name == "returned_event_ids":
            values[f.name] = (f"id-{number}",)
        elif f.name == "payload":
            values[f.name] = {"n": number}
        elif hint.startswith("<class 'str'>") or "str" in hint.split("|")[0]:
            values[f.name] = f"{f.name}-{number}"
        else:
            values[f.name] = 1_700_000_000_000 + number
    return cls(**values)


def _same(facet_value: Any, model: type, name: str, a2_value: Any) -> bool:
    if _is_time(model, name):
        return isinstance(a2_value, datetime) and int(a2_value.timestamp() * 1000) == facet_value
    if name == "cause":
        return field_names(type(a2_value)) == field_names(ev.Cause) and all(
            getattr(a2_value, n) == getattr(facet_value, n) for n in field_names(ev.Cause)
        )
    return bool(a2_value == facet_value)


def test_a_stored_event_keeps_every_field_through_the_adapter() -> None:
    event = _sample(ev.StoredEvent, 10)
    converted = a2._stored(event)
    for name in field_names(ev.StoredEvent):
        assert _same(getattr(event, name), a2.StoredEvent, name, getattr(converted, name)), name


def test_a_presence_entry_keeps_every_field_through_the_adapter() -> None:
    entry = _sample(pr.PresenceEntry, 20)
    converted = a2._presence_row(entry)
    for name in field_names(pr.PresenceEntry):
        assert _same(getattr(entry, name), a2.PresenceRow, name, getattr(converted, name)), name


def test_session_summaries_and_snapshot_infos_keep_every_field() -> None:
    async def main() -> tuple[a2.SessionList, tuple[a2.SnapshotInfo, ...], ev.SessionPage, list[ev.SnapshotInfo]]:
        store = a2.open_store("memory:")
        try:
            await store.append("s-1", [{"type": "t", "payload": {}}])
            await store.put_snapshot("s-1", "r", 1, {"state": 1})
            sessions = await store.inspect.list_sessions(prefix="", limit=10)
            snapshots = await store.inspect.list_snapshots("s-1")
            facet = store._events
            return sessions, snapshots, facet.list_sessions("", 10, None), facet.list_snapshots("s-1")
        finally:
            store.close()

    sessions, snapshots, facet_sessions, facet_snapshots = asyncio.run(main())
    assert len(sessions.sessions) == len(facet_sessions.sessions) == 1
    for name in field_names(ev.SessionSummary):
        facet_value = getattr(facet_sessions.sessions[0], name)
        assert _same(facet_value, a2.SessionSummary, name, getattr(sessions.sessions[0], name)), name
    assert len(snapshots) == len(facet_snapshots) == 1
    for name in field_names(ev.SnapshotInfo):
        assert _same(getattr(facet_snapshots[0], name), a2.SnapshotInfo, name, getattr(snapshots[0], name)), name
