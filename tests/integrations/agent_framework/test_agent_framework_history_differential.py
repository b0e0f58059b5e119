"""DurastateHistoryProvider against Agent Framework's own providers: the same histories, call by call.

References from the pinned wheel: ``FileHistoryProvider`` (one JSON Lines
file per session) and ``InMemoryHistoryProvider`` (messages in the session's
``state`` dict, one state per session here). Hypothesis draws sequences of
``save_messages`` (batches drawn from a small pool of messages, with and
without ids, so replays and overlaps with the stored tail happen, which the
framework's ``filter_new_messages`` must drop, and repeated user inputs
without an id, which it must keep) and ``get_messages``, on a few sessions
including ``None``; each history read must be the same message list.
``skip_excluded=True`` runs against the file provider with the same option.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from typing import Any

import pytest
from agent_framework import FileHistoryProvider, InMemoryHistoryProvider, Message
from hypothesis import given
from hypothesis import strategies as st

import durastate
from durastate.errors import InvalidRequest
from durastate.integrations.agent_framework import DurastateHistoryProvider

from .._differential import differential

pytestmark = pytest.mark.filterwarnings("ignore::agent_framework._feature_stage.ExperimentalWarning")

SESSIONS = [None, "s1", "s 2"]
POOL = [
    Message(role="user", contents=["hi"]),
    Message(role="user", contents=["hi"], message_id="m1"),
    Message(role="assistant", contents=["hello"]),
    Message(role="assistant", contents=["hello"], message_id="m2"),
    Message(role="user", contents=["again"], additional_properties={"_excluded": True}),
    Message(role="assistant", contents=["ünïcode ✓"], author_name="bot"),
]
batches = st.lists(st.sampled_from(range(len(POOL))), max_size=5)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.sampled_from(range(len(SESSIONS))), batches),
        st.tuples(st.just("get"), st.sampled_from(range(len(SESSIONS)))),
    ),
    min_size=3,
    max_size=16,
)


def view(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


_prefixes = (f"x{n}-" for n in itertools.count())


async def _run(store: durastate.Store, ops: list[Any], skip_excluded: bool) -> None:
    prefix = next(_prefixes)
    with tempfile.TemporaryDirectory(prefix="af-history-") as folder:
        ours = DurastateHistoryProvider(store=store, skip_excluded=skip_excluded)
        file = FileHistoryProvider(folder, skip_excluded=skip_excluded)
        memory = InMemoryHistoryProvider(skip_excluded=skip_excluded)
        states: dict[int, dict[str, Any]] = {i: {} for i in range(len(SESSIONS))}
        try:
            for step, op in enumerate(ops):
                session = SESSIONS[op[1]]
                # A prefix per example keeps the examples apart in the shared store (None stays None).
                sid = None if session is None else prefix + session
                if op[0] == "save":
                    batch = [POOL[i] for i in op[2]]
                    await ours.save_messages(sid, batch)
                    await file.save_messages(sid, batch)
                    await memory.save_messages(sid, batch, state=states[op[1]])
                else:
                    got = view(await ours.get_messages(sid))
                    if session is not None:  # None is the shared "default" session: other examples wrote it too
                        assert got == view(await file.get_messages(sid)), f"step {step} {op}"
                        assert got == view(await memory.get_messages(sid, state=states[op[1]])), f"step {step} {op}"
        finally:
            await ours.aclose()


@differential(30)
@given(ops=operations, skip_excluded=st.booleans())
def test_random_sequences_match_the_framework_providers(
    shared_store: durastate.Store, ops: list[Any], skip_excluded: bool
) -> None:
    asyncio.run(_run(shared_store, ops, skip_excluded))


def test_clear_removes_a_session_and_later_saves_start_afresh(shared_store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateHistoryProvider(store=shared_store) as history:
            await history.save_messages("c", [POOL[1], POOL[3]])
            await history.save_messages("other", [POOL[1]])
            assert await history.clear("c") == 2
            await history.save_messages("c", [POOL[1]])  # not a duplicate any more
            assert view(await history.get_messages("c")) == view([POOL[1]])
            assert view(await history.get_messages("other")) == view([POOL[1]])

    asyncio.run(main())


def test_none_and_empty_are_the_default_session(shared_store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateHistoryProvider(store=shared_store) as history:
            await history.save_messages(None, [POOL[1]])
            await history.save_messages("", [POOL[3]])
            assert view(await history.get_messages("default")) == view([POOL[1], POOL[3]])

    asyncio.run(main())


@pytest.mark.parametrize(
    ("session_id", "messages"),
    [(7, [POOL[0]]), ("s", ["not a message"]), ("s", "hi"), ("\ud800", [POOL[0]]), ("x" * 5000, [POOL[0]])],
)
def test_wrong_arguments_are_refused_and_change_nothing(
    shared_store: durastate.Store, session_id: Any, messages: Any
) -> None:
    async def main() -> None:
        async with DurastateHistoryProvider(store=shared_store) as history:
            batch = [POOL[0], *messages] if isinstance(messages, list) else messages
            with pytest.raises(InvalidRequest):
                await history.save_messages(session_id, batch)
            assert await history.get_messages("s") == []

    asyncio.run(main())


def test_a_message_json_cannot_hold_is_refused(shared_store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateHistoryProvider(store=shared_store) as history:
            bad = Message(role="user", contents=["x"], additional_properties={"score": float("nan")})
            with pytest.raises(InvalidRequest, match="NaN"):
                await history.save_messages("nan", [POOL[0], bad])
            assert await history.get_messages("nan") == []

    asyncio.run(main())
