"""DurastateCheckpointStorage against Agent Framework's own storages: the same results, errors included.

The framework ships no conformance suite in its wheel; its two storages are
the reference: ``InMemoryCheckpointStorage`` and ``FileCheckpointStorage``
(agent-framework-core 1.26.0). Hypothesis draws sequences of save (ids and
workflow names from small pools, so ids are re-saved, also under another
workflow; timestamps from a small pool, so ``get_latest`` meets ties its
lineage rule breaks) / load / delete / list_checkpoints /
list_checkpoint_ids / get_latest, including missing ids and workflows;
every call runs on every storage and must give the same outcome: the same
checkpoints (compared field by field), the same booleans, the same error
class (``WorkflowCheckpointException``). Listings are compared as sets: the
protocol promises no order (the file storage lists in directory order).

State values cover what both storages keep: JSON values (ints of any size),
tuples, datetimes, UUIDs, nested dicts and lists, Agent Framework
``Message`` objects and a registered dataclass; the file storage pickles the
non-JSON ones, durastate stores them as tagged JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import itertools
import tempfile
import uuid
from typing import Any

from agent_framework import (
    FileCheckpointStorage,
    InMemoryCheckpointStorage,
    Message,
    WorkflowCheckpoint,
    WorkflowCheckpointException,
)
from hypothesis import given
from hypothesis import strategies as st

import durastate
from durastate.integrations.agent_framework import DurastateCheckpointStorage

from .._differential import differential


@dataclasses.dataclass
class Note:
    """An application dataclass, allowed by name in both storages."""

    text: str
    tags: tuple[str, ...] = ()


NOTE_KEY = f"{Note.__module__}:{Note.__qualname__}"
IDS = ["a", "b", "c d", "é"]  # no "/": the file storage puts each id in a file name
WORKFLOWS = ["w1", "w 2"]
STAMPS = ["2026-01-01T00:00:00+00:00", "2026-01-01T00:00:01+00:00", "2026-01-01T00:00:01"]

leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | st.datetimes(timezones=st.none() | st.just(dt.UTC))
    | st.uuids()
    | st.builds(Note, st.text(max_size=4), st.tuples(st.text(max_size=3)))
    | st.builds(lambda text: Message(role="user", contents=[text]), st.text(min_size=1, max_size=6))
)
values = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4).filter(lambda k: not k.startswith("__")), inner, max_size=3)
    ),
    max_leaves=8,
)
saves = st.tuples(
    st.just("save"),
    st.sampled_from(IDS),
    st.sampled_from(WORKFLOWS),
    st.sampled_from(STAMPS),
    st.none() | st.sampled_from(IDS),
    st.dictionaries(st.sampled_from(["x", "y"]), values, max_size=2),
    st.integers(0, 3),
)
operations = st.lists(
    st.one_of(
        saves,
        saves,
        st.tuples(st.just("load"), st.sampled_from(IDS)),
        st.tuples(st.just("delete"), st.sampled_from(IDS)),
        st.tuples(st.just("list"), st.sampled_from(WORKFLOWS)),
        st.tuples(st.just("ids"), st.sampled_from(WORKFLOWS)),
        st.tuples(st.just("latest"), st.sampled_from(WORKFLOWS)),
    ),
    min_size=4,
    max_size=20,
)


def view(value: Any) -> Any:
    """A comparable form: Messages by their dict, checkpoints by their fields."""
    if isinstance(value, WorkflowCheckpoint):
        return {f.name: view(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Message):
        return ("Message", view(value.to_dict()))
    if isinstance(value, dict):
        return {k: view(v) for k, v in value.items()}
    if isinstance(value, list):
        return [view(v) for v in value]
    if isinstance(value, tuple):
        return ("tuple", *map(view, value))
    if isinstance(value, Note):
        return ("Note", value.text, view(value.tags))
    return (type(value).__name__, value)


class Runs:
    def __init__(self, storages: dict[str, Any], prefix: str) -> None:
        self.storages = storages
        self.prefix = prefix

    def id(self, name: str | None) -> str | None:
        return None if name is None else f"{self.prefix}{name}"

    async def each(self, call: Any) -> dict[str, Any]:
        outcomes = {}
        for label, storage in self.storages.items():
            try:
                outcomes[label] = ("ok", await call(storage))
            except WorkflowCheckpointException:
                outcomes[label] = ("error", "WorkflowCheckpointException")
        return outcomes

    async def run(self, ops: list[Any]) -> None:
        for step, op in enumerate(ops):
            kind = op[0]
            if kind == "save":
                _, cid, wf, stamp, previous, state, iteration = op
                checkpoint = WorkflowCheckpoint(
                    workflow_name=self.id(wf),  # type: ignore[arg-type]
                    graph_signature_hash="h",
                    checkpoint_id=self.id(cid),  # type: ignore[arg-type]
                    previous_checkpoint_id=self.id(previous),
                    timestamp=stamp,
                    state=state,
                    iteration_count=iteration,
                    metadata={"step": step},
                )
                outcomes = await self.each(lambda s, c=checkpoint: s.save(c))
            elif kind == "load":
                outcomes = await self.each(lambda s, c=self.id(op[1]): s.load(c))
            elif kind == "delete":
                outcomes = await self.each(lambda s, c=self.id(op[1]): s.delete(c))
            elif kind == "list":
                outcomes = await self.each(lambda s, w=self.id(op[1]): s.list_checkpoints(workflow_name=w))
                outcomes = {k: (o[0], sorted((view(c) for c in o[1]), key=repr)) for k, o in outcomes.items()}
            elif kind == "ids":
                outcomes = await self.each(lambda s, w=self.id(op[1]): s.list_checkpoint_ids(workflow_name=w))
                outcomes = {k: (o[0], sorted(o[1])) for k, o in outcomes.items()}
            else:
                outcomes = await self.each(lambda s, w=self.id(op[1]): s.get_latest(workflow_name=w))
            seen = {label: (o[0], view(o[1])) for label, o in outcomes.items()}
            ours = seen.pop("durastate")
            for label, theirs in seen.items():
                assert ours == theirs, f"step {step} {op}: durastate {ours!r} != {label} {theirs!r}"


_prefixes = (f"x{n}-" for n in itertools.count())


@differential(30)
@given(ops=operations)
def test_random_sequences_match_the_framework_storages(shared_store: durastate.Store, ops: list[Any]) -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory(prefix="af-diff-") as folder:
            storages = {
                "durastate": DurastateCheckpointStorage(store=shared_store, allowed_checkpoint_types=[NOTE_KEY]),
                "memory": InMemoryCheckpointStorage(),
                "file": FileCheckpointStorage(folder, allowed_checkpoint_types=[NOTE_KEY]),
            }
            try:
                await Runs(storages, next(_prefixes)).run(ops)
            finally:
                await storages["durastate"].aclose()

    asyncio.run(main())


def test_a_loaded_checkpoint_is_a_copy(shared_store: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateCheckpointStorage(store=shared_store) as storage:
            checkpoint = WorkflowCheckpoint(workflow_name="copy", graph_signature_hash="h", state={"k": [1]})
            assert await storage.save(checkpoint) == checkpoint.checkpoint_id
            checkpoint.state["k"].append(2)  # the caller's object changes after save: the stored one does not
            first = await storage.load(checkpoint.checkpoint_id)
            first.state["k"].append(3)
            assert (await storage.load(checkpoint.checkpoint_id)).state == {"k": [1]}

    asyncio.run(main())


def test_values_the_framework_pickles_round_trip_as_json(shared_store: durastate.Store) -> None:
    value = {
        "big": 2**100,
        "inf": float("inf"),
        "keys": {1: "int key", (1, 2): "tuple key", "$ds": "the reserved key"},
        "set": {3, 1, 2},
        "frozen": frozenset({"a"}),
        "bytes": b"\x00\xff",
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "day": dt.date(2026, 1, 2),
        "span": dt.timedelta(days=1, microseconds=5),
        "id": uuid.UUID(int=7),
        "note": Note("n", ("t",)),
    }

    async def main() -> None:
        async with DurastateCheckpointStorage(store=shared_store, allowed_checkpoint_types=[NOTE_KEY]) as storage:
            checkpoint = WorkflowCheckpoint(workflow_name="types", graph_signature_hash="h", state=value)
            await storage.save(checkpoint)
            assert (await storage.load(checkpoint.checkpoint_id)).state == value
            raw = shared_store.kv.get(b"agent-framework", b"c", checkpoint.checkpoint_id.encode())
            assert raw is not None and b"__pickled__" not in raw

    asyncio.run(main())


def test_listings_come_back_in_save_order_as_the_in_memory_storage_lists_them(shared_store: durastate.Store) -> None:
    # Ids out of order, as the framework's random UUIDs are; each checkpoint stamped when made, as the
    # framework stamps them, made and saved one after another. A naive stamp is read as UTC (the
    # framework's rule), so it sorts between its neighbours here.
    ids = ["e", "b", "d", "a", "c"]
    stamps = [
        "2026-01-01T00:00:00+00:00",
        "2026-01-01T00:00:01+00:00",
        "2026-01-01T00:00:02",
        "2026-01-01T01:00:03+01:00",  # 00:00:03 UTC
        "2026-01-01T00:00:04+00:00",
    ]

    async def listed(storage: Any) -> tuple[list[str], list[str]]:
        for checkpoint_id, stamp in zip(ids, stamps, strict=True):
            await storage.save(
                WorkflowCheckpoint(
                    workflow_name="w", graph_signature_hash="h", checkpoint_id=checkpoint_id, timestamp=stamp
                )
            )
        return (
            [c.checkpoint_id for c in await storage.list_checkpoints(workflow_name="w")],
            await storage.list_checkpoint_ids(workflow_name="w"),
        )

    async def main() -> None:
        async with DurastateCheckpointStorage(store=shared_store) as storage:
            assert await listed(storage) == await listed(InMemoryCheckpointStorage()) == (ids, ids)

    asyncio.run(main())
