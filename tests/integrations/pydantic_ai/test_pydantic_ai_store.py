"""DurastateConversationStore's own rules: refusals, JSON (no pickle), what a delete erases, errors of both families."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import durastate
from durastate.errors import Conflict, InvalidRequest, NotFound, WrongType
from durastate.integrations import pydantic_ai as module
from durastate.integrations.pydantic_ai import DurastateConversationStore, EntryNotFound, RevisionConflict


@pytest.fixture
def conversations(store_url: str) -> Iterator[DurastateConversationStore]:
    with durastate.open(store_url) as store, DurastateConversationStore(store=store) as conversations:
        yield conversations


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def turn(n: int) -> list[Any]:
    return [ModelRequest(parts=[UserPromptPart(f"q{n}")]), ModelResponse(parts=[TextPart(f"a{n}")])]


def saved(conversations: DurastateConversationStore, conversation_id: str, turns: int) -> Conversation:
    async def go() -> Conversation:
        conversation = Conversation(conversation_id=conversation_id)
        for n in range(turns):
            conversation.messages.extend(turn(n))
            await conversations.save(conversation)
        loaded = await conversations.load(conversation_id)
        assert loaded is not None
        return loaded

    result: Conversation = run(go())
    return result


def stored_rows(conversations: DurastateConversationStore) -> tuple[list[bytes], list[str]]:
    store = conversations.store
    return store.kv.namespaces(module.SCOPE), list(store.documents.iter_keys("pydantic-ai/"))


def test_values_are_json_not_pickles(conversations: DurastateConversationStore) -> None:
    conversation = Conversation(conversation_id="c")
    conversation.messages.extend(turn(0))
    # A tool's raw bytes: stored as pydantic-ai stores a history (base64), read back as its round trip does.
    conversation.messages.append(ModelRequest(parts=[ToolReturnPart("blob", b"\xff\x00raw", tool_call_id="t")]))
    run(conversations.save(conversation))
    store = conversations.store
    record = store.documents.read("pydantic-ai/c/c")
    assert record is not None and record.data["record"]["conversation_id"] == "c"
    rows = list(store.kv.scan(module.SCOPE, module.ENTRIES))
    assert store.kv.namespaces(module.SCOPE) == [module.ENTRIES]
    index = [value for key, value in rows if key.startswith(module.INDEX)]
    lines = [(key, value) for key, value in rows if key.startswith(module.LINE)]
    assert len(index) == 3 and len(lines) == 4  # three entries and the line's header
    for key, blob in lines:
        if not key.endswith(bytes(8)):
            meta, _, message = blob.partition(b"\n")
            assert set(orjson.loads(meta)) == {"id", "parent_id", "kind"}
            orjson.loads(message)  # JSON, nothing else
    loaded = run(conversations.load("c"))
    expected = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(conversation.messages))
    assert loaded.messages == expected


UNENCODABLE = [
    ModelResponse(parts=[ToolCallPart("f", {"handle": object()})]),  # pydantic cannot serialise it
    ModelResponse(parts=[ToolCallPart("f", {"x": math.nan})]),  # pydantic would write null
    ModelResponse(parts=[ToolCallPart("f", {"x": [math.inf]})]),
]


def test_what_json_cannot_hold_is_refused_and_nothing_is_written(conversations: DurastateConversationStore) -> None:
    before = saved(conversations, "c", 1)
    rows = stored_rows(conversations)
    for bad in UNENCODABLE:
        attempt = Conversation(conversation_id="c", messages=[*before.messages, bad], revision=before.revision)
        with pytest.raises(InvalidRequest, match="cannot be stored as JSON"):
            run(conversations.save(attempt))
        assert stored_rows(conversations) == rows
        assert run(conversations.read_record("c")).revision == before.revision


def test_a_json_refusal_names_the_message_part_and_type_not_an_entry_id(
    conversations: DurastateConversationStore,
) -> None:
    before = saved(conversations, "c", 1)
    bad = ModelResponse(parts=[TextPart("fine"), ToolCallPart("f", {"handle": object()})])
    attempt = Conversation(conversation_id="c", messages=[*before.messages, turn(9)[0], bad], revision=before.revision)
    with pytest.raises(InvalidRequest) as refused:
        run(conversations.save(attempt))
    message = str(refused.value)
    assert message.startswith("new message 2 of 2, a response's parts[1] (a 'tool-call' part), cannot be stored")
    assert "<class 'object'>" in message  # pydantic's reason: the offending type
    attempt = Conversation(conversation_id="c", messages=[*before.messages, UNENCODABLE[1]], revision=before.revision)
    with pytest.raises(InvalidRequest, match=r"new message 1 of 1, a response's parts\[0\] .*NaN"):
        run(conversations.save(attempt))


def test_metadata_json_cannot_hold_is_refused(conversations: DurastateConversationStore) -> None:
    saved(conversations, "c", 1)
    for bad in ({"x": math.nan}, {"x": object()}):
        with pytest.raises(InvalidRequest, match="cannot be stored as JSON"):
            run(conversations.update("c", metadata=bad))
    assert run(conversations.read_record("c")).metadata is None


def test_errors_belong_to_both_families(conversations: DurastateConversationStore) -> None:
    stale = saved(conversations, "c", 1)
    saved_again = run(conversations.load("c"))
    saved_again.messages.extend(turn(5))
    run(conversations.save(saved_again))
    record = run(conversations.read_record("c"))
    with pytest.raises(RevisionConflict) as conflict:
        run(conversations.write_record(record, expected_revision=stale.revision))
    assert isinstance(conflict.value, ConversationConflict) and isinstance(conflict.value, Conflict)
    with pytest.raises(RevisionConflict):
        run(conversations.delete_record("c", expected_revision=stale.revision))
    with pytest.raises(RevisionConflict):
        run(conversations.write_record(record, expected_revision=None))  # exists already
    with pytest.raises(EntryNotFound) as missing:
        run(conversations.read_entry("nope"))
    assert isinstance(missing.value, KeyError) and isinstance(missing.value, NotFound)
    with pytest.raises(KeyError):
        run(conversations.read_history("nope"))


def test_a_write_naming_an_entry_nobody_has_is_refused(conversations: DurastateConversationStore) -> None:
    record = ConversationRecord(conversation_id="c", head_id="ghost")
    with pytest.raises(RevisionConflict):
        run(conversations.write_record(record, expected_revision=None))
    orphan = ConversationEntry(parent_id="ghost", message=turn(0)[0])
    record = ConversationRecord(conversation_id="c", head_id=orphan.id)
    with pytest.raises(RevisionConflict):
        run(conversations.write_record(record, new_entries=[orphan], expected_revision=None))
    assert stored_rows(conversations) == ([], [])


EMPTY = ConversationRecord(conversation_id="c", head_id=None)
WRONG_CALLS = [
    (lambda s: s.write_record("record", expected_revision=None), WrongType),
    (lambda s: s.write_record(ConversationRecord(conversation_id=1, head_id=None), expected_revision=None), WrongType),
    (lambda s: s.write_record(EMPTY, new_entries=[1], expected_revision=None), WrongType),
    (lambda s: s.write_record(EMPTY, new_entries="ab", expected_revision=None), WrongType),
    (lambda s: s.write_record(EMPTY, expected_revision=3), WrongType),
    (lambda s: s.read_record(None), WrongType),
    (lambda s: s.read_entry(7), WrongType),
    (lambda s: s.read_history("x", limit=-1), InvalidRequest),
    (lambda s: s.read_history("x", limit="2"), WrongType),
    (lambda s: s.read_records(limit=-1), InvalidRequest),
    (lambda s: s.read_records(scope=3), WrongType),
    (lambda s: s.delete_record("c", expected_revision=None), WrongType),
    (lambda s: s.write_details("c", {"title": "t"}, expected_revision=None), WrongType),
    (lambda s: s.write_details("c", "title", expected_revision="r"), WrongType),
    (lambda s: s.save("hello"), WrongType),  # pydantic-ai's own save raises AttributeError
    (lambda s: s.save(None), WrongType),
    (lambda s: s.save(Conversation(messages=[]), scope=3), WrongType),
]


def test_wrong_arguments_are_refused_and_change_nothing(conversations: DurastateConversationStore) -> None:
    for number, (call, error) in enumerate(WRONG_CALLS):
        with pytest.raises(error):
            run(call(conversations))
        assert stored_rows(conversations) == ([], []), number


def test_new_entries_must_form_one_chain(conversations: DurastateConversationStore) -> None:
    first = ConversationEntry(parent_id=None, message=turn(0)[0])
    stray = ConversationEntry(parent_id=None, message=turn(0)[1])
    record = ConversationRecord(conversation_id="c", head_id=stray.id)
    with pytest.raises(InvalidRequest, match="must follow"):
        run(conversations.write_record(record, new_entries=[first, stray], expected_revision=None))
    assert stored_rows(conversations) == ([], [])


def test_write_details_keys_it_does_not_keep_are_not_implemented(conversations: DurastateConversationStore) -> None:
    loaded = saved(conversations, "c", 1)
    with pytest.raises(NotImplementedError):
        run(conversations.write_details("c", {"colour": "red"}, expected_revision=loaded.revision))  # type: ignore[typeddict-unknown-key]


def test_delete_erases_the_messages_unless_a_fork_shares_them(conversations: DurastateConversationStore) -> None:
    saved(conversations, "solo", 2)
    run(conversations.delete("solo"))
    assert stored_rows(conversations) == ([], [])

    saved(conversations, "a", 3)
    fork = run(conversations.fork("a", at=4, new_conversation_id="b"))
    fork.messages.extend(turn(9))
    run(conversations.save(fork))
    grandchild = run(conversations.fork("b", at=5, new_conversation_id="c"))  # shares a's lines and b's
    run(conversations.delete("a"))
    run(conversations.delete("b"))
    # Both deleted, but c's history runs through their lines: kept, under tombstones.
    assert [m.parts[0].content for m in run(conversations.load("c")).messages] == ["q0", "a0", "q1", "a1", "q9"]
    assert sorted(stored_rows(conversations)[1]) == sorted(
        ["pydantic-ai/c/c", *(key for key in stored_rows(conversations)[1] if key.startswith("pydantic-ai/o/"))]
    )
    assert len([key for key in stored_rows(conversations)[1] if key.startswith("pydantic-ai/o/")]) == 2
    assert grandchild.revision is not None
    run(conversations.delete("c"))
    assert stored_rows(conversations) == ([], [])


def test_conversations_using_each_other_are_erased_with_the_last_of_them(
    conversations: DurastateConversationStore,
) -> None:
    """A fork, then the original's record moved onto one of the fork's entries: each uses the other's lines.

    Deleting one keeps everything the other's history needs; deleting the
    second erases both (counting users alone kept the cycle forever).
    """
    saved(conversations, "a", 2)
    fork = run(conversations.fork("a", at=2, new_conversation_id="b"))
    fork.messages.extend(turn(5))
    run(conversations.save(fork))
    b_head = run(conversations.read_record("b")).head_id
    a_record = run(conversations.read_record("a"))
    onto_b = ConversationEntry(parent_id=b_head, message=ModelRequest(parts=[UserPromptPart("on b")]))
    moved = ConversationRecord(conversation_id="a", head_id=onto_b.id, title=None, branches=[])
    run(conversations.write_record(moved, new_entries=[onto_b], expected_revision=a_record.revision))
    assert [m.parts[0].content for m in run(conversations.load("a")).messages] == ["q0", "a0", "q5", "a5", "on b"]

    run(conversations.delete("b"))  # a's history runs through b's lines: kept
    assert [m.parts[0].content for m in run(conversations.load("a")).messages] == ["q0", "a0", "q5", "a5", "on b"]
    run(conversations.delete("a"))
    assert stored_rows(conversations) == ([], [])


def test_a_conversation_created_again_shares_nothing_with_the_deleted_one(
    conversations: DurastateConversationStore,
) -> None:
    old = saved(conversations, "c", 2)
    run(conversations.delete("c"))
    new = saved(conversations, "c", 1)
    assert [m.parts[0].content for m in new.messages] == ["q0", "a0"]
    old.messages.extend(turn(7))
    with pytest.raises(ConversationConflict):
        run(conversations.save(old))


def test_a_history_across_forks_and_branches_reads_in_order(conversations: DurastateConversationStore) -> None:
    base = saved(conversations, "a", 3)  # q0 a0 q1 a1 q2 a2
    branched = run(conversations.branch("a", at=2, expected_revision=base.revision))
    branched.messages.extend(turn(5))
    run(conversations.save(branched))
    fork = run(conversations.fork("a", at=3, new_conversation_id="b"))
    fork.messages.append(ModelResponse(parts=[TextPart("b-only")]))
    run(conversations.save(fork))
    loaded = run(conversations.load("b"))
    assert [m.parts[0].content for m in loaded.messages] == ["q0", "a0", "q5", "b-only"]
    for limit in range(7):
        tail = run(conversations.load("b", limit=limit))
        expected = loaded.messages[max(0, len(loaded.messages) - limit) :] if limit else []
        assert tail.messages == expected
    record = run(conversations.read_record("a"))
    (left,) = record.branches
    assert [e.message.parts[0].content for e in run(conversations.read_history(left))] == [
        "q0", "a0", "q1", "a1", "q2", "a2",
    ]  # fmt: skip


def test_a_save_never_undoes_a_title(conversations: DurastateConversationStore) -> None:
    loaded = saved(conversations, "c", 1)
    run(conversations.update("c", title="Weather", metadata={"model": "x"}))
    loaded.messages.extend(turn(3))
    run(conversations.save(loaded))
    record = run(conversations.read_record("c"))
    assert (record.title, record.metadata) == ("Weather", {"model": "x"})
    with pytest.raises(ConversationConflict):
        run(conversations.update("c", title="Other", expected_title=None))
    assert run(conversations.read_record("c")).title == "Weather"


def test_a_fork_racing_a_delete_keeps_its_history_or_fails_cleanly(shared_url: str) -> None:
    """Fork and delete of one conversation at once, from two threads with stores of their own.

    The fork either wins (then its history stays readable after the delete,
    its entries kept for it) or is refused (``UserError``: gone before it
    read; ``ConversationConflict``: the entries were released before it
    wrote). Never a fork whose history is missing. Deleting every fork at
    the end leaves nothing.
    """
    import threading

    from pydantic_ai.exceptions import UserError

    outcomes: list[str] = []
    with DurastateConversationStore(url=shared_url) as setup:
        for round_number in range(6):
            saved(setup, "a", 2)
            barrier = threading.Barrier(2)

            def fork(n: int = round_number, barrier: threading.Barrier = barrier) -> None:
                with DurastateConversationStore(url=shared_url) as store:
                    barrier.wait(timeout=60)
                    try:
                        run(store.fork("a", new_conversation_id=f"f{n}"))
                        outcomes.append("forked")
                    except (UserError, ConversationConflict) as exc:
                        outcomes.append(type(exc).__name__)

            def delete(barrier: threading.Barrier = barrier) -> None:
                with DurastateConversationStore(url=shared_url) as store:
                    barrier.wait(timeout=60)
                    run(store.delete("a"))

            threads = [threading.Thread(target=fork), threading.Thread(target=delete)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert run(setup.load("a")) is None
            forked = run(setup.load(f"f{round_number}"))
            if outcomes[-1] == "forked":
                assert [m.parts[0].content for m in forked.messages] == ["q0", "a0", "q1", "a1"]
            else:
                assert forked is None
        for round_number in range(6):
            run(setup.delete(f"f{round_number}"))
        assert stored_rows(setup) == ([], [])
    assert len(outcomes) == 6


def test_a_history_longer_than_a_scan_page_reads_whole(conversations: DurastateConversationStore) -> None:
    entries: list[ConversationEntry] = []
    for n in range(600):  # more than one page of the kv scan (PAGE_SIZE 512)
        entries.append(ConversationEntry(parent_id=entries[-1].id if entries else None, message=turn(n)[n % 2]))
    record = ConversationRecord(conversation_id="long", head_id=entries[-1].id)
    run(conversations.write_record(record, new_entries=entries, expected_revision=None))
    assert run(conversations.read_history(entries[-1].id)) == entries
    assert run(conversations.read_history(entries[-1].id, limit=550)) == entries[-550:]
    assert run(conversations.read_history(entries[99].id, limit=3)) == entries[97:100]


def test_a_history_released_after_it_was_located_reads_as_missing(shared_url: str) -> None:
    """A location a store remembers outlives a delete made elsewhere: the read says so, never comes back empty."""
    with DurastateConversationStore(url=shared_url) as reader, DurastateConversationStore(url=shared_url) as other:
        saved(reader, "c", 2)
        record = run(reader.read_record("c"))  # remembers where the head is
        run(other.delete("c"))
        with pytest.raises(EntryNotFound):
            run(reader.read_history(record.head_id))
        with pytest.raises(EntryNotFound):
            run(reader.read_entry(record.head_id))
        assert run(reader.load("c")) is None


def test_new_entries_of_any_iterable_are_stored(conversations: DurastateConversationStore) -> None:
    """A list and a tuple take the exact-type path of the argument check; any other iterable the general one."""
    written: list[ConversationEntry] = []
    for n, container in enumerate((list, tuple, iter)):
        ask = ConversationEntry(parent_id=written[-1].id if written else None, message=turn(n)[0])
        answer = ConversationEntry(parent_id=ask.id, message=turn(n)[1])
        stored = run(conversations.read_record("c"))
        record = ConversationRecord(conversation_id="c", head_id=answer.id)
        entries: Any = container([ask, answer])
        run(conversations.write_record(record, new_entries=entries, expected_revision=stored and stored.revision))
        written += [ask, answer]
    assert run(conversations.read_history(written[-1].id)) == written


def test_remembered_locations_stay_bounded(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save remembers all its entries' locations at once; the memo still keeps at most PLACES of them."""
    monkeypatch.setattr(module, "PLACES", 4)
    with durastate.open(store_url) as store, DurastateConversationStore(store=store) as conversations:
        entries: list[ConversationEntry] = []
        for n in range(10):
            entries.append(ConversationEntry(parent_id=entries[-1].id if entries else None, message=turn(n)[n % 2]))
        record = ConversationRecord(conversation_id="c", head_id=entries[-1].id)
        run(conversations.write_record(record, new_entries=entries, expected_revision=None))
        remembered = conversations._places._items
        assert list(remembered) == [entry.id for entry in entries[-4:]]  # the newest, head last
        assert run(conversations.read_history(entries[2].id)) == entries[:3]  # forgotten: found in the index
        assert run(conversations.read_entry(entries[0].id)) == entries[0]
