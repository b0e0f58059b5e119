"""DurastateMemoryService against ADK's InMemoryMemoryService: the same memories for every search.

Hypothesis draws sequences of add_session_to_memory (sessions re-added with
other events), add_events_to_memory (with and without a session id, events
already held), search_memory (ASCII, accented, CJK and mixed-script words,
several words, the empty query) and delete_memory (held ids, unknown ids,
``None``), over three users (one app name with a ``/``). Events have text
parts, several parts, a text-less part, no content; ids repeat across
sessions. Every search must return what ADK's in-memory service returns,
entry for entry (id, author, timestamp, content), in the same order.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.sessions.session import Session
from google.genai import types
from hypothesis import example, given
from hypothesis import strategies as st

import durastate
from durastate.integrations.adk import DurastateMemoryService

from .._differential import differential

TEXTS = [
    "the cat sat",
    "Cat and dog",
    "私はPythonを使う",
    "python rocks",
    "Café au lait",
    "cafe\u0301 noir",  # decomposed: NFC makes it café
    "dog dog dog",
    "naïve approach",
    "東京タワー",
    "the end",
]
QUERIES = ["cat", "python", "Python dog", "café", "使う", "タワー", "the", "naïve cat", "", "東京", "the cat dog"]
USERS = [("app", "u1"), ("app", "u2"), ("a/b", "u1")]
IDS = ["e1", "e2", "e3", "e4", "e5"]
SESSIONS = ["s1", "s2", "s/3"]

contents = st.one_of(
    st.none(),
    st.just(types.Content(role="user", parts=[])),
    st.lists(st.sampled_from(TEXTS), min_size=1, max_size=2).map(
        lambda texts: types.Content(role="user", parts=[types.Part(text=t) for t in texts])
    ),
    st.just(types.Content(role="model", parts=[types.Part(inline_data=types.Blob(mime_type="x/y", data=b"\x00"))])),
)
events = st.lists(
    st.tuples(st.sampled_from(IDS), st.sampled_from(["user", "agent"]), contents, st.integers(0, 10**6)),
    max_size=4,
)
users = st.sampled_from(USERS)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("session"), users, st.sampled_from(SESSIONS), events),
        st.tuples(st.just("events"), users, st.sampled_from([None, "", "s1", "s2"]), events),
        st.tuples(st.just("search"), users, st.sampled_from(QUERIES)),
        st.tuples(st.just("search"), users, st.sampled_from(QUERIES)),
        st.tuples(st.just("delete"), users, st.sampled_from([*IDS, None, "", "zz"])),
    ),
    max_size=20,
)


def _events(drawn: list[tuple[str, str, Any, int]]) -> list[Event]:
    return [
        Event(id=i, author=author, content=content, timestamp=1_700_000_000 + t / 1000)
        for i, author, content, t in drawn
    ]


def _view(response: Any) -> list[dict[str, Any]]:
    return [memory.model_dump(mode="json", exclude_none=True) for memory in response.memories]


_apps = (f"x{n}-" for n in itertools.count())


async def _run(ours: DurastateMemoryService, ops: list[Any]) -> None:
    reference = InMemoryMemoryService()
    prefix = next(_apps)  # every example its own apps: examples never see each other's memories
    for step, op in enumerate(ops):
        kind, (app, user) = op[0], op[1]
        app = prefix + app
        if kind == "session":
            session = Session(id=op[2], app_name=app, user_id=user, events=_events(op[3]))
            for service in (reference, ours):
                await service.add_session_to_memory(session.model_copy(deep=True))
        elif kind == "events":
            for service in (reference, ours):
                await service.add_events_to_memory(app_name=app, user_id=user, events=_events(op[3]), session_id=op[2])
        elif kind == "delete":
            for service in (reference, ours):
                await service.delete_memory(app_name=app, user_id=user, memory_id=op[2])
        else:
            expected = _view(await reference.search_memory(app_name=app, user_id=user, query=op[2]))
            got = _view(await ours.search_memory(app_name=app, user_id=user, query=op[2]))
            assert got == expected, f"step {step} {op}"


@differential(40)
@given(ops=operations)
# A re-added session keeps its place; a deleted id stays out of later adds; mixed scripts match.
@example(
    ops=[
        ("session", USERS[0], "s1", [("e1", "user", types.Content(parts=[types.Part(text="the cat sat")]), 1)]),
        ("session", USERS[0], "s2", [("e2", "user", types.Content(parts=[types.Part(text="Cat and dog")]), 2)]),
        ("session", USERS[0], "s1", [("e3", "agent", types.Content(parts=[types.Part(text="cat")]), 3)]),
        ("search", USERS[0], "cat"),
        ("delete", USERS[0], "e2"),
        ("events", USERS[0], "s2", [("e2", "user", types.Content(parts=[types.Part(text="cat")]), 4)]),
        ("events", USERS[0], None, [("e4", "user", types.Content(parts=[types.Part(text="私はPythonを使う")]), 5)]),
        ("search", USERS[0], "cat"),
        ("search", USERS[0], "python 使う"),
        ("search", USERS[0], "python"),  # an ASCII word inside a CJK run
    ]
)
def test_random_sequences_match_in_memory_memory(store: durastate.Store, ops: list[Any]) -> None:
    async def main() -> None:
        async with DurastateMemoryService(store=store) as ours:
            await _run(ours, ops)

    asyncio.run(main())


def test_at_most_ten_the_best_first_and_memory_survives_the_service(store: durastate.Store) -> None:
    texts = [f"word{i} common" if i % 3 else f"word{i} common rare" for i in range(25)]
    session = Session(
        id="s",
        app_name="app",
        user_id="u",
        events=[
            Event(id=f"e{i}", author="user", content=types.Content(parts=[types.Part(text=t)]))
            for i, t in enumerate(texts)
        ],
    )

    async def main() -> None:
        async with DurastateMemoryService(store=store) as first:
            await first.add_session_to_memory(session)
        async with DurastateMemoryService(store=store) as second:
            found = await second.search_memory(app_name="app", user_id="u", query="rare common")
            assert [m.id for m in found.memories] == [f"e{i}" for i in range(0, 25, 3)] + ["e1"]

    asyncio.run(main())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.add_session_to_memory({"id": "s"}), "session must be"),
        (lambda s: s.add_events_to_memory(app_name="app", user_id="u", events=[{"id": "x"}]), "Event"),
        (lambda s: s.add_events_to_memory(app_name="app", user_id=3, events=[]), "user_id"),
        (lambda s: s.add_events_to_memory(app_name="app", user_id="u", events="text"), "events"),
        (lambda s: s.search_memory(app_name="app", user_id="u", query=None), "query"),
        (lambda s: s.delete_memory(app_name=None, user_id="u", memory_id="e"), "app_name"),
    ],
)
def test_refusals_change_nothing(store: durastate.Store, call: Any, message: str) -> None:
    async def main() -> None:
        async with DurastateMemoryService(store=store) as service:
            await service.add_events_to_memory(
                app_name="app",
                user_id="u",
                events=[Event(id="e", author="user", content=types.Content(parts=[types.Part(text="kept")]))],
            )
            with pytest.raises(durastate.InvalidRequest, match=message):
                await call(service)
            found = await service.search_memory(app_name="app", user_id="u", query="kept")
            assert [m.id for m in found.memories] == ["e"]

    asyncio.run(main())


# -- add_memory: ADK's in-memory service has none, so no reference; its contract, checked directly.


def _said(event_id: str, text: str) -> Event:
    return Event(id=event_id, author="user", content=types.Content(role="user", parts=[types.Part(text=text)]))


def test_explicit_memories_are_searched_with_the_events(store: durastate.Store) -> None:
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.platform import uuid as platform_uuid

    where = {"app_name": "app", "user_id": "u"}
    fact = MemoryEntry(
        id="m1",
        content=types.Content(parts=[types.Part(text="Ann likes green tea")]),
        author="notes",
        timestamp="2026-01-02T03:04:05",
        custom_metadata={"source": "form", "n": 1},
    )
    anonymous = MemoryEntry(content=types.Content(parts=[types.Part(text="tea at five")]))

    async def main() -> None:
        async with DurastateMemoryService(store=store) as memory:
            await memory.add_session_to_memory(
                Session(id="a", app_name="app", user_id="u", events=[_said("e1", "tea")])
            )
            platform_uuid.set_id_provider(lambda: "generated")
            try:
                await memory.add_memory(memories=[fact, anonymous], **where)
            finally:
                platform_uuid.reset_id_provider()
            await memory.add_session_to_memory(
                Session(id="b", app_name="app", user_id="u", events=[_said("e2", "tea")])
            )
            found = (await memory.search_memory(query="tea", **where)).memories
            # Equal counts in memory order: session a, the explicit memories, session b.
            assert [m.id for m in found] == ["e1", "m1", "generated", "e2"]
            assert found[1].model_dump() == fact.model_dump()
            assert found[2].timestamp is None and found[2].author is None
            assert (await memory.search_memory(query="green tea", **where)).memories[0].id == "m1"

            replaced = fact.model_copy(update={"content": types.Content(parts=[types.Part(text="Ann likes coffee")])})
            await memory.add_memory(memories=[replaced], **where)  # the same id: replaced in place
            assert [m.id for m in (await memory.search_memory(query="tea", **where)).memories] == [
                "e1",
                "generated",
                "e2",
            ]
            assert [m.id for m in (await memory.search_memory(query="coffee", **where)).memories] == ["m1"]

            await memory.delete_memory(memory_id="m1", **where)
            assert (await memory.search_memory(query="coffee", **where)).memories == []
            await memory.add_memory(memories=[replaced], **where)  # explicit: stored again
            assert [m.id for m in (await memory.search_memory(query="coffee", **where)).memories] == ["m1"]

    asyncio.run(main())


def test_refused_explicit_memories_change_nothing(store: durastate.Store) -> None:
    from google.adk.memory.memory_entry import MemoryEntry

    class Opaque:
        pass

    where = {"app_name": "app", "user_id": "u"}
    good = MemoryEntry(id="ok", content=types.Content(parts=[types.Part(text="kept words")]))
    bad_metadata = MemoryEntry(
        id="bad", content=types.Content(parts=[types.Part(text="kept")]), custom_metadata={"o": Opaque()}
    )

    async def main() -> None:
        async with DurastateMemoryService(store=store) as memory:
            for memories, message in [
                ([good, {"id": "x"}], "MemoryEntry"),
                ([good, bad_metadata], "cannot be stored as JSON"),
                ("text", "memories"),
            ]:
                with pytest.raises(durastate.InvalidRequest, match=message):
                    await memory.add_memory(memories=memories, **where)
            assert (await memory.search_memory(query="kept", **where)).memories == []

    asyncio.run(main())
