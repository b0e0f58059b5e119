"""DurastateConversationStore against pydantic-ai's own InMemoryConversationStore: the same results, errors included.

pydantic-ai ships no conformance suite in its wheel (its tests live in its
repository), so ``InMemoryConversationStore`` from the pinned wheel is the
reference. Hypothesis draws sequences of the calls an app makes (save of a
loaded, stale, fresh or rewritten conversation, load and load_entries with
limits and scopes, fork at a count or from an entry, branch with a current
or stale revision, update of title and metadata with ``expected_title``,
delete, list) and of the primitives themselves (read_record, read_entry,
read_history, write_record with any expected revision); every call runs on
both stores and must give the same result or the same error
(``ConversationConflict``, ``UserError``, ``KeyError``).

Ids and revisions come from pydantic-ai's ``uuid7``, replaced for the test by
a counter restarted at the same value for each store, so both stores mint
the same ids. ``updated_at`` comes from the wall clock (pydantic-ai binds
its factory at import), so records are compared without it, and lists by
their order.

Deleting is where the stores may differ, as documented: a deleted
conversation whose entries a fork shares keeps all of them here until the
fork is deleted too, where InMemory keeps only those still reachable. So a
``read_entry`` that InMemory refuses may succeed here once such a delete
happened; at the end every conversation is deleted and durastate must hold
nothing at all (no entry, index row, reference or tombstone).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic_ai import conversation_store as pai_store
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage

import durastate
from durastate.integrations import pydantic_ai as ours_module
from durastate.integrations.pydantic_ai import DurastateConversationStore

from .._differential import differential

CIDS = ["c1", "c2", "f/1", "f2"]
SCOPES = [None, "ann", "bob"]
STAMP = __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC)

cid = st.sampled_from(CIDS[:3])
fork_name = st.sampled_from(CIDS[2:])
scope = st.sampled_from(SCOPES)
limit = st.none() | st.integers(0, 5)
turns = st.sampled_from([0, 1, 1, 2])
known = st.integers(0, 12)  # the n-th entry id seen so far (a missing id past the last)

steps = st.lists(
    st.one_of(
        # save: which conversation object (0 loaded, 1 fresh, 2 the one held longest: maybe stale,
        # 3 rewritten: the stored messages with one replaced, as if deserialized), turns, scope
        st.tuples(st.just("save"), cid, st.integers(0, 3), turns, scope, st.booleans()),
        st.tuples(st.just("load"), cid, limit, scope),
        st.tuples(st.just("entries"), cid, limit, scope),
        st.tuples(st.just("fork"), cid, st.none() | st.integers(0, 4), st.none() | known, fork_name, scope),
        st.tuples(st.just("fork"), cid, st.integers(0, 2), st.none(), fork_name, st.none()),
        st.tuples(st.just("fork"), st.just("c1"), st.none(), st.none(), fork_name, st.none()),
        st.tuples(st.just("branch"), cid, st.none() | st.integers(0, 4), st.none() | known, st.booleans()),
        st.tuples(st.just("branch"), cid, st.integers(0, 2), st.none(), st.just(True)),
        st.tuples(
            st.just("update"),
            cid,
            st.none() | st.sampled_from(["T", "U"]),
            st.booleans(),
            st.sampled_from(["unset", None, "T"]),
        ),
        st.tuples(st.just("delete"), cid, scope),
        st.tuples(st.just("list"), scope, limit),
        st.tuples(st.just("record"), cid),
        st.tuples(st.just("entry"), known),
        st.tuples(st.just("history"), known, limit),
        st.tuples(st.just("write"), cid, st.integers(0, 2), known),
    ),
    min_size=8,
    max_size=30,
)
# Every sequence starts with a conversation of two turns, so most calls find one.
operations = steps.map(lambda rest: [("save", "c1", 1, 2, None, False), *rest])


def _outcome(exc: BaseException) -> str:
    for kind in (ConversationConflict, UserError, KeyError):
        if isinstance(exc, kind):
            return kind.__name__
    return f"unexpected {type(exc).__name__}: {exc}"


def _record_view(record: ConversationRecord | None) -> Any:
    return None if record is None else dataclasses.replace(record, updated_at=STAMP)


def _conversation_view(conversation: Conversation | None) -> Any:
    if conversation is None:
        return None
    return (
        conversation.conversation_id,
        conversation.messages,
        conversation.usage,
        conversation.deferred_tool_requests,
        conversation.revision,
    )


class Ids:
    """pydantic-ai's uuid7, replaced by a counter both stores restart from the same value."""

    def __init__(self) -> None:
        self.next = 1

    def __call__(self) -> uuid.UUID:
        self.next += 1
        return uuid.UUID(int=self.next)


class Run:
    def __init__(self, ours: DurastateConversationStore, ids: Ids) -> None:
        self.stores: dict[str, Any] = {"reference": InMemoryConversationStore(), "durastate": ours}
        self.ids = ids
        self.held: dict[str, dict[str, Conversation]] = {"reference": {}, "durastate": {}}
        self.oldest: dict[str, dict[str, Conversation]] = {"reference": {}, "durastate": {}}
        self.entry_ids: list[str] = []
        self.turn = itertools.count()
        self.shared_and_deleted = False
        self.forked = False

    async def each(self, call: Callable[[str, Any], Any]) -> dict[str, tuple[str, Any]]:
        start = self.ids.next
        outcomes: dict[str, tuple[str, Any]] = {}
        ends = []
        for label, store in self.stores.items():
            self.ids.next = start
            try:
                outcomes[label] = ("ok", await call(label, store))
            except Exception as exc:
                outcomes[label] = ("error", _outcome(exc))
            ends.append(self.ids.next)
        self.ids.next = max(ends)
        return outcomes

    def agree(self, step: int, op: Any, outcomes: dict[str, tuple[str, Any]], view: Callable[[Any], Any]) -> None:
        seen = {label: (kind, view(value) if kind == "ok" else value) for label, (kind, value) in outcomes.items()}
        assert seen["durastate"] == seen["reference"], (
            f"step {step} {op}: {seen['durastate']!r} != {seen['reference']!r}"
        )

    def note_entries(self, entries: Any) -> None:
        for entry in entries or ():
            if entry.id not in self.entry_ids:
                self.entry_ids.append(entry.id)

    def messages(self, turns: int, deferred: bool) -> tuple[list[Any], DeferredToolRequests | None]:
        made: list[Any] = []
        for _ in range(turns):
            n = next(self.turn)
            made.append(ModelRequest(parts=[UserPromptPart(f"q{n}", timestamp=STAMP)], timestamp=STAMP))
            made.append(ModelResponse(parts=[TextPart(f"a{n}")], timestamp=STAMP))
        waiting = None
        if deferred:
            call = ToolCallPart("approve", {"n": len(made), "why": "é"}, tool_call_id=f"t{len(made)}")
            waiting = DeferredToolRequests(approvals=[call])
        return made, waiting

    async def run(self, ops: list[Any]) -> None:
        for step, op in enumerate(ops):
            await getattr(self, f"op_{op[0]}")(step, op)

    async def op_save(self, step: int, op: Any) -> None:
        _, name, which, turns, scope, deferred = op
        made, waiting = self.messages(turns, deferred)
        stored = await self.stores["reference"].load(name)

        def pick(label: str) -> Conversation:
            if which == 0 and name in self.held[label]:
                return self.held[label][name]
            if which == 2 and name in self.oldest[label]:
                return self.oldest[label][name]
            if which == 3 and stored is not None and stored.messages:
                # The stored history with its last message replaced, carrying the stored revision
                # without pydantic-ai's marks (as if it was serialized): the save compares and branches.
                rewritten = [
                    *copy.deepcopy(stored.messages[:-1]),
                    ModelResponse(parts=[TextPart("edited")], timestamp=STAMP),
                ]
                return Conversation(conversation_id=name, messages=rewritten, revision=stored.revision)
            return Conversation(conversation_id=name)

        conversations = {label: pick(label) for label in self.stores}

        async def call(label: str, store: Any) -> Any:
            conversation = conversations[label]
            conversation.messages.extend(copy.deepcopy(made))
            conversation.usage = conversation.usage + RunUsage(requests=1, input_tokens=len(made))
            conversation.deferred_tool_requests = copy.deepcopy(waiting)
            return await store.save(conversation, scope=scope)

        outcomes = await self.each(call)
        self.agree(step, op, outcomes, lambda entries: entries)
        if outcomes["durastate"][0] == "ok":
            self.note_entries(outcomes["durastate"][1])
            for label in self.stores:
                self.held[label][name] = conversations[label]
                self.oldest[label].setdefault(name, conversations[label])

    async def op_load(self, step: int, op: Any) -> None:
        _, name, limit, scope = op
        outcomes = await self.each(lambda _label, store: store.load(name, limit=limit, scope=scope))
        self.agree(step, op, outcomes, _conversation_view)
        if outcomes["durastate"][0] == "ok" and outcomes["durastate"][1] is not None:
            for label in self.stores:
                self.held[label][name] = outcomes[label][1]
                self.oldest[label].setdefault(name, outcomes[label][1])

    async def op_entries(self, step: int, op: Any) -> None:
        _, name, limit, scope = op
        outcomes = await self.each(lambda _label, store: store.load_entries(name, limit=limit, scope=scope))
        self.agree(step, op, outcomes, lambda entries: entries)

    def entry_id(self, index: int | None) -> str | None:
        if index is None:
            return None
        return self.entry_ids[index] if index < len(self.entry_ids) else f"missing-{index}"

    async def op_fork(self, step: int, op: Any) -> None:
        _, name, at, entry, new_name, scope = op
        from_entry = None if at is not None else self.entry_id(entry)
        outcomes = await self.each(
            lambda _label, store: store.fork(
                name, at=at, from_entry=from_entry, new_conversation_id=new_name, scope=scope
            )
        )
        self.agree(step, op, outcomes, _conversation_view)
        if outcomes["durastate"][0] == "ok":
            self.forked = True
            for label in self.stores:
                self.held[label][new_name] = outcomes[label][1]

    async def op_branch(self, step: int, op: Any) -> None:
        _, name, at, entry, current = op
        from_entry = None if at is not None else self.entry_id(entry)
        record = await self.stores["reference"].read_record(name)
        revision = record.revision if record is not None and current else "stale"
        outcomes = await self.each(
            lambda _label, store: store.branch(name, at=at, from_entry=from_entry, expected_revision=revision)
        )
        self.agree(step, op, outcomes, _conversation_view)
        if outcomes["durastate"][0] == "ok":
            for label in self.stores:
                self.held[label][name] = outcomes[label][1]

    async def op_update(self, step: int, op: Any) -> None:
        _, name, title, with_metadata, expected = op
        kwargs: dict[str, Any] = {"title": title}
        if with_metadata:
            kwargs["metadata"] = {"model": "scripted", "n": step, "nested": [1.5, {"x": None}]}
        if expected != "unset":
            kwargs["expected_title"] = expected
        outcomes = await self.each(lambda _label, store: store.update(name, **kwargs))
        self.agree(step, op, outcomes, _record_view)

    async def op_delete(self, step: int, op: Any) -> None:
        _, name, scope = op
        outcomes = await self.each(lambda _label, store: store.delete(name, scope=scope))
        self.agree(step, op, outcomes, lambda nothing: nothing)
        if self.forked:
            self.shared_and_deleted = True

    async def op_list(self, step: int, op: Any) -> None:
        _, scope, limit = op
        outcomes = await self.each(lambda _label, store: store.list_conversations(scope=scope, limit=limit))
        self.agree(step, op, outcomes, lambda records: [_record_view(record) for record in records])

    async def op_record(self, step: int, op: Any) -> None:
        outcomes = await self.each(lambda _label, store: store.read_record(op[1]))
        self.agree(step, op, outcomes, _record_view)

    async def op_entry(self, step: int, op: Any) -> None:
        entry_id = self.entry_id(op[1])
        outcomes = await self.each(lambda _label, store: store.read_entry(entry_id))
        if outcomes["reference"] == ("error", "KeyError") and outcomes["durastate"][0] == "ok":
            # Kept here, released there: only after deleting a conversation a fork shares.
            assert self.shared_and_deleted, f"step {step} {op}: an entry InMemory never held"
            return
        self.agree(step, op, outcomes, lambda entry: entry)

    async def op_history(self, step: int, op: Any) -> None:
        head = self.entry_id(op[1])
        outcomes = await self.each(lambda _label, store: store.read_history(head, limit=op[2]))
        if outcomes["reference"] == ("error", "KeyError") and outcomes["durastate"][0] == "ok":
            assert self.shared_and_deleted, f"step {step} {op}: a history InMemory never held"
            return
        self.agree(step, op, outcomes, lambda entries: entries)

    async def op_write(self, step: int, op: Any) -> None:
        """write_record itself: a record moved to a known (or unknown) entry, with some expected revision."""
        _, name, expectation, head_index = op
        stored = await self.stores["reference"].read_record(name)
        expected = {0: stored.revision if stored is not None else None, 1: None, 2: "stale"}[expectation]
        # A known entry or none (a parent nobody has: test_pydantic_ai_store.py, where the stores differ).
        head = self.entry_ids[head_index] if head_index < len(self.entry_ids) else None
        try:
            await self.stores["reference"].read_entry(head)
        except KeyError:
            head = None  # released by a delete: InMemory would store a dangling entry, durastate refuses
        new = ConversationEntry(parent_id=head, message=ModelRequest(parts=[UserPromptPart("w", timestamp=STAMP)]))
        record = ConversationRecord(conversation_id=name, head_id=new.id, title="ignored", branches=[])
        outcomes = await self.each(
            lambda _label, store: store.write_record(
                copy.deepcopy(record), new_entries=[copy.deepcopy(new)], expected_revision=expected
            )
        )
        self.agree(step, op, outcomes, lambda nothing: nothing)
        if outcomes["durastate"][0] == "ok":
            self.note_entries([new])

    async def finish(self) -> None:
        """Delete everything, on both; durastate must then hold nothing."""
        for name in CIDS:
            outcomes = await self.each(lambda _label, store, name=name: store.delete(name))
            self.agree(-1, ("delete", name), outcomes, lambda nothing: nothing)
        ours = self.stores["durastate"].store
        assert ours.kv.namespaces(ours_module.SCOPE) == []
        assert list(ours.documents.iter_keys("pydantic-ai/")) == []


@pytest.fixture
def ids(monkeypatch: pytest.MonkeyPatch) -> Ids:
    counter = Ids()
    monkeypatch.setattr(pai_store, "uuid7", counter)
    return counter


@pytest.fixture
def conversations(shared_url: str) -> Iterator[DurastateConversationStore]:
    with durastate.open(shared_url) as store, DurastateConversationStore(store=store) as conversations:
        yield conversations


def _empty(conversations: DurastateConversationStore) -> None:
    store = conversations.store
    store.kv.clear(ours_module.SCOPE)
    for key in list(store.documents.iter_keys("pydantic-ai/")):
        store.documents.delete(key)


@differential(40)
@given(ops=operations)
# Found by a CI-size run: a fork, a write_record moving c1's record onto a fresh entry, then the final deletes
# left c1's lines behind.
@example(
    ops=[
        ("save", "c1", 1, 2, None, False),
        ("fork", "c1", None, None, "f/1", None),
        ("history", 0, None),
        ("save", "c1", 0, 0, None, False),
        ("load", "c1", None, None),
        ("save", "c1", 0, 0, None, False),
        ("save", "c1", 0, 0, None, False),
        ("save", "f/1", 0, 1, None, False),
        ("write", "c1", 0, 4),
    ]
)
def test_same_results_as_in_memory_store(conversations: DurastateConversationStore, ids: Ids, ops: list[Any]) -> None:
    _empty(conversations)
    ids.next = 1
    run = Run(conversations, ids)

    async def main() -> None:
        await run.run(ops)
        await run.finish()

    asyncio.run(main())
