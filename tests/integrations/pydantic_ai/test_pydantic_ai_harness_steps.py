"""DurastateStepStore against pydantic-ai-harness's own InMemoryStepStore: the same results.

Hypothesis draws sequences of every ``StepStore`` call (and ``list_snapshots``)
over a few runs: runs registered and re-registered, events with and without
idempotency keys (retried appends), snapshots of both states with keys that
follow the harness's ``<sequence>:<id>`` form (older, equal and newer
sequences) or not, under a retention bound of none, 1 or 2, and tool effects
moving between statuses. Both stores get the same calls and must answer
alike; the two documented orders are compared as such (runs with equal
``started_at`` never occur here; unresolved tool effects by tool call id).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durastate

pytest.importorskip("pydantic_ai_harness")

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    InMemoryStepStore,
    RunRecord,
    StepEvent,
    StepStore,
    ToolEffectRecord,
)

from durastate.integrations import pydantic_ai_harness_steps as ours_module
from durastate.integrations.pydantic_ai_harness import DurastateStepStore

from .._differential import differential

STAMP = datetime(2026, 1, 1, tzinfo=UTC)
RUNS = ["r1", "r2", "r/3"]
run = st.sampled_from(RUNS[:1]) | st.sampled_from(RUNS)  # mostly one run: its calls meet
maybe = st.none() | st.sampled_from(["c1", "c2"])
tool = st.sampled_from(["t1", "t2", "t3"])
snapshot_key = st.sampled_from([None, "0:a", "1:a", "1:b", "2:a", "plain", "x:1"])

operations = st.lists(
    st.one_of(
        st.tuples(st.just("register"), run, maybe, st.none() | run),
        st.tuples(st.just("get_run"), run),
        st.tuples(st.just("list_runs"), st.none() | run, maybe),
        st.tuples(
            st.just("append"),
            run,
            st.sampled_from(["run_started", "tool_call_started"]),
            st.integers(0, 3),
            st.none() | st.sampled_from(["k1", "k2"]),
        ),
        st.tuples(st.just("events"), run),
        *[
            st.tuples(
                st.just("save"), run, st.integers(0, 3), st.sampled_from(["complete", "interrupted"]), snapshot_key
            )
        ]
        * 3,
        st.tuples(st.just("latest"), run, st.booleans()),
        st.tuples(st.just("snapshots"), run, st.booleans()),
        st.tuples(st.just("effect"), run, tool, st.sampled_from(["started", "completed", "failed"])),
        st.tuples(st.just("get_effect"), run, tool),
        st.tuples(st.just("unresolved"), run),
    ),
    min_size=6,  # long enough for calls on one run to meet (a shorter sequence is mostly no test)
    max_size=30,
)


WATCHED = {"save": "snapshots", "append": "events"}


def _messages(n: int) -> list[Any]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {n}", timestamp=STAMP)], timestamp=STAMP),
        ModelResponse(parts=[TextPart(f"answer {n}")], timestamp=STAMP),
    ]


async def _apply(store: Any, i: int, op: tuple[Any, ...]) -> Any:
    kind, run_id = op[0], op[1]
    when = STAMP + timedelta(seconds=i)  # distinct per call: list_runs never sees equal started_at
    if kind == "register":
        return await store.register_run(
            RunRecord(run_id=run_id, conversation_id=op[2], parent_run_id=op[3], started_at=when)
        )
    if kind == "get_run":
        return await store.get_run(run_id=run_id)
    if kind == "list_runs":
        return await store.list_runs(parent_run_id=op[1], conversation_id=op[2])
    if kind == "append":
        event = StepEvent(run_id=run_id, kind=op[2], step_index=op[3], timestamp=when, idempotency_key=op[4])
        return await store.append_event(event)
    if kind == "events":
        return await store.list_events(run_id=run_id)
    if kind == "save":
        snapshot = ContinuableSnapshot(
            run_id=run_id, step_index=op[2], messages=_messages(i), timestamp=when, state=op[3], idempotency_key=op[4]
        )
        return await store.save_snapshot(snapshot)
    if kind == "latest":
        return await store.latest_snapshot(run_id=run_id, include_interrupted=op[2])
    if kind == "snapshots":
        return await store.list_snapshots(run_id=run_id, include_interrupted=op[2])
    if kind == "effect":
        record = ToolEffectRecord(tool_call_id=op[2], tool_name="search", run_id=run_id, status=op[3], started_at=when)
        return await store.record_tool_effect(record)
    if kind == "get_effect":
        return await store.get_tool_effect(run_id=run_id, tool_call_id=op[2])
    return sorted(await store.list_unresolved_tool_effects(run_id=run_id), key=lambda r: r.tool_call_id)


@pytest.fixture
def shared(shared_url: str) -> Iterator[durastate.Store]:
    with durastate.open(shared_url) as store:
        yield store


def _empty(store: durastate.Store) -> None:
    store.kv.clear(ours_module.SCOPE)
    for key in list(store.documents.iter_keys(ours_module.INDEXES)):
        store.documents.delete(key)


@pytest.mark.parametrize("keep", [None, 1, 2])  # a parameter, not drawn: hypothesis favours the first
@differential(25)
@given(ops=operations)
def test_same_results_as_in_memory_step_store(shared: durastate.Store, ops: list[Any], keep: int | None) -> None:
    _empty(shared)
    reference = InMemoryStepStore(max_snapshots_per_run=keep)

    async def main() -> None:
        async with DurastateStepStore(store=shared, max_snapshots_per_run=keep) as ours:
            for i, op in enumerate(ops):
                expected = await _apply(reference, i, op)
                got = await _apply(ours, i, op)
                assert got == expected, (i, op)
                if op[0] in WATCHED:  # and what the change left: every retained snapshot, every event
                    look = (WATCHED[op[0]], op[1], True)
                    assert await _apply(ours, i, look) == await _apply(reference, i, look), (i, op, look)

    asyncio.run(main())


def test_is_the_harness_protocol(shared: durastate.Store) -> None:
    with DurastateStepStore(store=shared) as steps:
        assert isinstance(steps, StepStore)


def test_concurrent_retried_appends_keep_one_event(shared_url: str) -> None:
    """Two processes' stores append the same keyed event at once: the log holds it once."""
    with durastate.open(shared_url) as first, durastate.open(shared_url) as second:
        writers = [DurastateStepStore(store=first), DurastateStepStore(store=second)]
        ready = threading.Barrier(2)

        def append(i: int) -> None:
            ready.wait()
            event = StepEvent(run_id="r", kind="run_started", step_index=0, timestamp=STAMP, idempotency_key="k")
            asyncio.run(writers[i].append_event(event))

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(append, [0, 1]))
        assert len(asyncio.run(writers[0].list_events(run_id="r"))) == 1
        for writer in writers:
            writer.close()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.register_run("r1"), "record must be a pydantic_ai_harness RunRecord"),
        (lambda s: s.register_run(RunRecord(run_id="r", metadata={"a": 1})), "cannot be stored as JSON"),
        (lambda s: s.get_run(run_id="a\x00b"), "NUL"),
        (
            lambda s: s.save_snapshot(
                ContinuableSnapshot(
                    run_id="r", step_index=0, messages=[ModelResponse(parts=[TextPart("x")])], state="odd"
                )
            ),
            "snapshot.state must be",
        ),
        (lambda s: s.latest_snapshot(run_id="r", include_interrupted="yes"), "include_interrupted must be a bool"),
    ],
)
def test_refused_arguments(shared: durastate.Store, call: Any, message: str) -> None:
    with DurastateStepStore(store=shared) as steps, pytest.raises(durastate.InvalidRequest, match=message):
        asyncio.run(call(steps))
    assert shared.kv.namespaces(ours_module.SCOPE) == []
