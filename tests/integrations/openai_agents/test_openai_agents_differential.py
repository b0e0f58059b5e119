"""DurastateSession against the SDK's own SQLiteSession: identical results.

The SDK ships no test suite for third-party sessions, so its first-party
``SQLiteSession`` is the reference: hypothesis draws random sequences of
``add_items`` / ``get_items(limit)`` / ``pop_item`` / ``clear_session``
(with and without a ``session_settings`` limit) and every call must return
the same value on both, on each engine.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from agents.memory import SQLiteSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durastate
from durastate.integrations.openai_agents import DurastateSession
from durastate.testing.conformance.documents import JSON_VALUES

# JSON values (str keys, finite floats, integers inside 64 bits): both
# sessions round-trip these exactly. The documents conformance suite's.
items = st.dictionaries(st.sampled_from(["role", "content", "type", "id", "call_id"]), JSON_VALUES, min_size=1)
limits = st.none() | st.integers(min_value=-2, max_value=6)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(items, max_size=4)),
        st.tuples(st.just("get"), limits),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=25,
)

_session_ids = (f"diff-{n}" for n in itertools.count())


async def _run(session: Any, op: str, arg: Any) -> Any:
    if op == "add":
        return await session.add_items(arg)
    if op == "get":
        return await session.get_items(arg)
    if op == "pop":
        return await session.pop_item()
    return await session.clear_session()


def _compare(store: durastate.Store, ops: list[tuple[str, Any]], default_limit: int | None) -> None:
    async def main() -> None:
        session_settings = {"limit": default_limit}
        reference = SQLiteSession("s", session_settings=session_settings)
        ours = DurastateSession(next(_session_ids), store=store, session_settings=session_settings)
        try:
            for step, (op, arg) in enumerate(ops):
                expected = await _run(reference, op, arg)
                got = await _run(ours, op, arg)
                assert got == expected, f"step {step}: {op}({arg!r})"
            assert await ours.get_items() == await reference.get_items()
        finally:
            reference.close()
            ours.close()

    asyncio.run(main())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, default_limit=st.none() | st.integers(min_value=0, max_value=4))
def test_random_sequences_match_sqlite_session(
    shared_store: durastate.Store, ops: list[tuple[str, Any]], default_limit: int | None
) -> None:
    # Each example uses a fresh session id on the test's store, so examples
    # cannot see each other's items.
    _compare(shared_store, ops, default_limit)


def test_a_long_history_matches_across_page_boundaries(shared_store: durastate.Store) -> None:
    # kv scans page by 512 keys: 1300 items cross two page boundaries.
    batch = [{"role": "user", "content": f"m{i}"} for i in range(650)]
    ops: list[tuple[str, Any]] = [("add", batch), ("add", batch), ("get", None), ("get", 700), ("pop", None)]
    ops += [("get", -1), ("get", 513)]
    _compare(shared_store, ops, None)
