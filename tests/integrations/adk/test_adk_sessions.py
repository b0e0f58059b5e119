"""DurastateSessionService's own rules: refusals (no pickle), re-delivery, foreign session objects, the cache."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import math
import uuid
from typing import Any

import pytest
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig

import durastate
from durastate.errors import InvalidRequest, StoreClosed
from durastate.integrations.adk import DurastateSessionService
from durastate.integrations.adk.sessions import SCOPE


class Opaque:
    """Something pydantic has no JSON form for."""


@pytest.fixture
def store(store_url: str) -> Any:
    with durastate.open(store_url) as opened:
        yield opened


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def _stored(store: durastate.Store) -> list[tuple[bytes, bytes]]:
    return [(ns, key) for ns in store.kv.namespaces(SCOPE, limit=1000) for key, _ in store.kv.scan(SCOPE, ns)]


@pytest.mark.parametrize(
    ("delta", "why"),
    [
        ({"k": Opaque()}, "cannot be stored as JSON"),
        ({"k": math.nan}, "NaN"),
        ({"user:k": [math.inf]}, "NaN or an infinity"),
        ({"k": 2**70}, "64 bits|64-bit"),
    ],
)
def test_an_event_json_cannot_hold_is_refused_and_nothing_changes(
    store: durastate.Store, delta: dict[str, Any], why: str
) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            session = await service.create_session(app_name="a", user_id="u", session_id="s")
            event = Event(author="user", actions=EventActions(state_delta={**delta, "temp:t": 1}))
            with pytest.raises(InvalidRequest, match=why):
                await service.append_event(session, event)
            # The caller's objects are as they were; nothing was stored.
            assert "temp:t" in event.actions.state_delta
            assert session.events == [] and "temp:t" not in session.state
            stored = await service.get_session(app_name="a", user_id="u", session_id="s")
            assert stored is not None and stored.events == [] and stored.state == {}
            await service.append_event(session, Event(author="user"))  # the session object is still current

    _run(main())


def test_state_that_is_not_utf8_bytes_is_refused_naming_its_key(store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            session = await service.create_session(app_name="a", user_id="u", session_id="s")
            event = Event(author="user", actions=EventActions(state_delta={"fine": b"ok", "blob": {"x": b"\xff"}}))
            with pytest.raises(InvalidRequest, match=r"state_delta\['blob'\] .* bytes that are not UTF-8"):
                await service.append_event(session, event)
            with pytest.raises(InvalidRequest, match=r"state\['app:thing'\] cannot be stored as JSON: Unable"):
                await service.create_session(app_name="a", user_id="u", state={"app:thing": Opaque()})

    _run(main())


def test_state_reads_back_in_the_json_form_adks_sql_services_store(store: durastate.Store) -> None:
    """What docs/adk.md says is converted: as ADK's DatabaseSessionService (``make_json_safe_state``)."""
    from google.adk.sessions import _session_util

    state = {
        "set": {1, 2},
        "tuple": (1, "a"),
        "decimal": decimal.Decimal("1.5"),
        "date": datetime.date(2026, 1, 2),
        "id": uuid.UUID(int=1),
        "bytes": b"text",
        "list": [1, "a"],
    }

    async def main() -> dict[str, Any]:
        async with DurastateSessionService(store=store) as service:
            await service.create_session(app_name="a", user_id="u", session_id="s", state=state)
            stored = await service.get_session(app_name="a", user_id="u", session_id="s")
            assert stored is not None
            return stored.state

    assert _run(main()) == _session_util.make_json_safe_state(state)


def test_state_json_cannot_hold_is_refused_at_create(store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            with pytest.raises(InvalidRequest, match="cannot be stored as JSON"):
                await service.create_session(app_name="a", user_id="u", session_id="s", state={"app:x": Opaque()})
            assert await service.get_session(app_name="a", user_id="u", session_id="s") is None
            assert (await service.list_sessions(app_name="a")).sessions == []

    _run(main())


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.create_session(app_name=1, user_id="u"),
        lambda s: s.create_session(app_name="a", user_id="u", state=[1]),
        lambda s: s.get_session(app_name="a", user_id=None, session_id="s"),
        lambda s: s.get_session(app_name="a", user_id="u", session_id="s", config={"num_recent_events": 1}),
        lambda s: s.list_sessions(app_name=b"a"),
        lambda s: s.append_event("not a session", Event(author="u")),
        lambda s: s.append_event(Session(id="s", app_name="a", user_id="u"), {"author": "u"}),
        lambda s: s.create_session(app_name="a\ud800", user_id="u"),
    ],
)
def test_arguments_of_the_wrong_kind_are_refused(store: durastate.Store, call: Any) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            with pytest.raises(InvalidRequest):
                await call(service)

    _run(main())


def test_an_equal_redelivery_of_the_newest_event_is_a_no_op(store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            session = await service.create_session(app_name="a", user_id="u", session_id="s")
            event = Event(author="user", actions=EventActions(state_delta={"n": 1}))
            await service.append_event(session, event)
            stale_copy = await service.get_session(app_name="a", user_id="u", session_id="s")
            assert stale_copy is not None
            await service.append_event(session, event)  # a retried call: nothing new
            await service.append_event(stale_copy, event.model_copy(deep=True))  # equal copy, same id
            stored = await service.get_session(app_name="a", user_id="u", session_id="s")
            assert stored is not None and [e.id for e in stored.events] == [event.id]
            # A different event with that id is another event.
            await service.append_event(stored, Event(id=event.id, author="agent"))
            again = await service.get_session(app_name="a", user_id="u", session_id="s")
            assert again is not None and [e.author for e in again.events] == ["user", "agent"]

    _run(main())


def test_a_session_object_from_elsewhere_is_stale_by_its_timestamp(store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            created = await service.create_session(app_name="a", user_id="u", session_id="s")
            by_hand = Session(id="s", app_name="a", user_id="u", last_update_time=created.last_update_time)
            await service.append_event(by_hand, Event(author="user", timestamp=created.last_update_time + 5))
            late = Session(id="s", app_name="a", user_id="u", last_update_time=created.last_update_time + 1)
            with pytest.raises(StaleSessionError):
                await service.append_event(late, Event(author="user"))
            # by_hand now carries our marker: it goes on appending.
            await service.append_event(by_hand, Event(author="user", timestamp=created.last_update_time + 6))

    _run(main())


def test_a_deleted_and_recreated_session_refuses_objects_of_its_earlier_life(store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateSessionService(store=store) as service:
            old = await service.create_session(app_name="a", user_id="u", session_id="s")
            await service.append_event(old, Event(author="user"))
            await service.delete_session(app_name="a", user_id="u", session_id="s")
            assert _stored(store) == []  # the events went with it
            await service.create_session(app_name="a", user_id="u", session_id="s")
            with pytest.raises(StaleSessionError):
                await service.append_event(old, Event(author="user"))
            fresh = await service.get_session(app_name="a", user_id="u", session_id="s")
            assert fresh is not None and fresh.events == []

    _run(main())


def test_events_handed_out_are_copies_whatever_the_cache(store: durastate.Store) -> None:
    async def main() -> None:
        for decoded_events in (0, 1, 10_000):
            async with DurastateSessionService(store=store, decoded_events=decoded_events) as service:
                session = await service.create_session(app_name=f"a{decoded_events}", user_id="u")
                for n in range(3):
                    await service.append_event(session, Event(author="user", custom_metadata={"n": n}))
                first = await service.get_session(app_name=f"a{decoded_events}", user_id="u", session_id=session.id)
                assert first is not None
                first.events[0].custom_metadata["n"] = "changed"  # a caller changing what it got
                config = GetSessionConfig(num_recent_events=3)
                again = await service.get_session(
                    app_name=f"a{decoded_events}", user_id="u", session_id=session.id, config=config
                )
                assert again is not None
                assert [e.custom_metadata["n"] for e in again.events] == [0, 1, 2]

    _run(main())


def test_decoded_events_must_be_a_count(store: durastate.Store) -> None:
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(InvalidRequest, match="decoded_events"):
            DurastateSessionService(store=store, decoded_events=bad)


def test_a_closed_service_refuses_calls_and_leaves_a_borrowed_store_open(store: durastate.Store) -> None:
    async def main() -> None:
        service = DurastateSessionService(store=store)
        await service.aclose()
        with pytest.raises(StoreClosed):
            await service.list_sessions(app_name="a")
        assert store.kv.get(b"s", b"n", b"k") is None  # still open

    _run(main())
