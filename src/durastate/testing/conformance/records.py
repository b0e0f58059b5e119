"""Conformance: the ``store.records`` facet (pi-durable's records and documents).

Every test runs on every engine (``store`` fixture). Each validation rule of
the seed is its own test, and every refused batch is checked to leave no
trace (the commit sequence and everything readable are unchanged). Fork-chain
reads are compared with a straightforward in-Python walk of the same chain;
documents with an in-memory model (``TestRecordsModel``, a hypothesis state
machine checking every point-in-time read). ``TestRecordsAcrossProcesses``
commits from several processes at once and checks the sequences are strictly
increasing and gap-free.
"""

from __future__ import annotations

import copy
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import durastate
from durastate import Conflict, InvalidRequest, NotFound, records
from durastate._chord import MAX_DELTA_OPERATIONS
from durastate.records import CHECKPOINT_EVERY, FIRST_MINTED_ID, MAX_SAFE_INTEGER, Records

from .plans import STATISTICS, assert_index_search, plan_of, with_statistics

__all__ = [
    "TestRecordsIndexUse",
    "TestRecordsRevisions",
    "TestRecordsAcrossProcesses",
    "rec_seeded",
    "TestRecordsBadInput",
    "TestRecordsCommit",
    "TestRecordsCopy",
    "TestRecordsChordDeltas",
    "TestRecordsLosslessStrings",
    "TestRecordsDocuments",
    "TestRecordsForkChains",
    "TestRecordsModel",
    "TestRecordsScans",
    "TestRecordsTransactions",
    "TestRecordsValidation",
]

WORKER_TIMEOUT = 60.0


# -- helpers -----------------------------------------------------------------


def conversation(
    id: int, *, parent: tuple[int, int] | None = None, owner: tuple[int, int] | None = None
) -> dict[str, Any]:
    value: dict[str, Any] = {"id": id, "title": f"c{id}"}
    if parent is not None:
        value["parent"] = {"conversationId": parent[0], "at": parent[1]}
    if owner is not None:
        value["owner"] = {"conversationId": owner[0], "taskId": owner[1]}
    return {"type": "conversation", "value": value}


def entry(id: int, conversation_id: int, *, head: str | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {"id": id, "conversationId": conversation_id, "text": f"e{id}"}
    if head is not None:
        value["head"] = head
    return {"type": "entry", "value": value}


def task(
    id: int, conversation_id: int, *, kind: str = "tool", status: str = "running", abort: bool = False, bg: bool = False
) -> dict[str, Any]:
    return {
        "type": "task",
        "value": {
            "id": id,
            "conversationId": conversation_id,
            "kind": kind,
            "state": {"status": status},
            "abortRequested": abort,
            "background": bg,
        },
    }


def submission(
    id: int, conversation_id: int, *, request_id: str | None = None, status: str = "queued"
) -> dict[str, Any]:
    value: dict[str, Any] = {"id": id, "conversationId": conversation_id, "status": status}
    if request_id is not None:
        value["requestId"] = request_id
    return {"type": "submission", "value": value}


def conv_scope(conversation_id: int) -> dict[str, Any]:
    return {"kind": "conversation", "conversationId": conversation_id}


def doc_record(
    id: int, *, kind: str = "notes", scope: dict[str, Any] | None = None, key: str | None = None, **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {"id": id, "kind": kind, "scope": scope or {"kind": "session"}}
    if key is not None:
        record["key"] = key
    record.update(extra)
    return record


def base(value: dict[str, Any], version: int = 1) -> dict[str, Any]:
    return {"kind": "base", "version": version, "value": value}


def delta(ops: list[list[Any]], version: int = 1) -> dict[str, Any]:
    """Delta content; ``ops`` in Chord's tuple vocabulary (``durastate._chord``)."""
    return {"kind": "delta", "version": version, "ops": ops}


def create(record: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "document.create", "record": record, "content": content}


def change(id: int, content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "document.change", "id": id, "content": content}


def retire(id: int) -> dict[str, Any]:
    return {"type": "document.retire", "id": id}


def copy_doc(record: dict[str, Any], source: int, at: int | str) -> dict[str, Any]:
    return {"type": "document.copy", "record": record, "source": {"id": source, "at": at}}


def set_op(key: str, value: Any) -> list[Any]:
    return ["s", [key], value]


def all_pages(scan: Callable[..., dict[str, Any]], query: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Every item of a paged scan, following ``next`` cursors; checks page sizes."""
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):
        page = scan(query, limit, cursor)
        assert len(page["items"]) <= limit
        items.extend(page["items"])
        if "next" not in page:
            return items
        assert len(page["items"]) == limit
        cursor = page["next"]
    raise AssertionError("scan did not end")


def fingerprint(records: Records, ids: range) -> object:
    """Everything readable about ``ids`` (as any record type) plus the sequence."""
    out: list[object] = [records.last_seq()]
    for i in ids:
        out.append(
            (
                records.conversation(i),
                records.entry(i),
                records.task(i),
                records.submission(i),
                records.document(i),
            )
        )
    return out


@pytest.fixture
def rec_seeded(store: durastate.Store) -> Records:
    """A store with one conversation (1), an entry (2), a task (3), a submission (4),
    a session document (5) and a full-history conversation document (6)."""
    r = store.records
    r.commit(
        [
            conversation(1),
            entry(2, 1, head="h"),
            task(3, 1),
            submission(4, 1, request_id="req"),
            create(doc_record(5), base({"a": 1})),
            create(doc_record(6, scope=conv_scope(1), key="k"), base({"n": 0})),
        ]
    )
    return r


def refused(records: Records, writes: Any, error: type[Exception], match: str | None) -> None:
    """``writes`` is refused with ``error`` matching ``match`` and changes nothing."""
    before = fingerprint(records, range(1, 12))
    with pytest.raises(error, match=match):
        records.commit(writes)
    assert fingerprint(records, range(1, 12)) == before


# -- commits -------------------------------------------------------------------


class TestRecordsCommit:
    def test_sequences_are_gap_free_and_increasing(self, store: durastate.Store) -> None:
        r = store.records
        start = r.last_seq()
        seqs = [r.commit([entry(10 + i, 1)]) for i in range(5)]
        assert seqs == list(range(start + 1, start + 6))
        assert r.last_seq() == seqs[-1]

    def test_empty_batch_commits_and_takes_a_sequence(self, store: durastate.Store) -> None:
        r = store.records
        first = r.commit([])
        assert r.commit([]) == first + 1

    def test_refused_batch_does_not_consume_a_sequence(self, rec_seeded: Records) -> None:
        seq = rec_seeded.last_seq()
        with pytest.raises(Conflict):
            rec_seeded.commit([conversation(1)])
        assert rec_seeded.commit([entry(20, 1)]) == seq + 1

    def test_records_read_back_as_written(self, rec_seeded: Records) -> None:
        assert rec_seeded.conversation(1) == conversation(1)["value"]
        assert rec_seeded.entry(2) == {"entry": entry(2, 1, head="h")["value"], "commitSeq": rec_seeded.last_seq()}
        assert rec_seeded.task(3) == task(3, 1)["value"]
        assert rec_seeded.submission(4) == submission(4, 1, request_id="req")["value"]
        assert rec_seeded.conversation(99) is None and rec_seeded.entry(99) is None
        assert rec_seeded.task(99) is None and rec_seeded.submission(99) is None

    def test_tasks_and_submissions_upsert(self, rec_seeded: Records) -> None:
        rec_seeded.commit([task(3, 1, status="done"), submission(4, 1, request_id="req", status="accepted")])
        assert rec_seeded.task(3) == task(3, 1, status="done")["value"]
        assert rec_seeded.submission(4) == submission(4, 1, request_id="req", status="accepted")["value"]

    def test_same_task_twice_in_one_batch_last_wins(self, rec_seeded: Records) -> None:
        rec_seeded.commit([task(7, 1, status="a"), task(7, 1, status="b")])
        assert rec_seeded.task(7) == task(7, 1, status="b")["value"]

    def test_submission_by_request_id(self, rec_seeded: Records) -> None:
        assert rec_seeded.submission_by_request(1, "req") == submission(4, 1, request_id="req")["value"]
        assert rec_seeded.submission_by_request(1, "other") is None
        assert rec_seeded.submission_by_request(2, "req") is None
        rec_seeded.commit([submission(4, 1, request_id="moved")])
        assert rec_seeded.submission_by_request(1, "req") is None
        assert rec_seeded.submission_by_request(1, "moved") is not None

    def test_strings_with_nul_and_unicode_round_trip(self, store: durastate.Store) -> None:
        r = store.records
        odd = "a\x00b\u2603\U0001f600"
        r.commit([submission(1, 1, request_id=odd, status=odd), task(2, 1, kind=odd, status=odd)])
        assert r.submission_by_request(1, odd) is not None
        assert [t["id"] for t in r.scan_tasks({"kind": odd}, 10)["items"]] == [2]

    def test_mint_id_is_unique_increasing_and_above_committed_ids(self, store: durastate.Store) -> None:
        r = store.records
        minted = [r.mint_id() for _ in range(5)]
        assert minted == sorted(set(minted))
        assert minted[0] >= FIRST_MINTED_ID  # 1 is pi-durable's root conversation
        r.commit([conversation(minted[-1] + 100)])
        after = r.mint_id()
        assert after > minted[-1] + 100

    def test_entry_commit_seq_is_its_batch(self, store: durastate.Store) -> None:
        r = store.records
        s1 = r.commit([conversation(1), entry(2, 1)])
        s2 = r.commit([entry(3, 1)])
        assert r.entry(2)["commitSeq"] == s1  # type: ignore[index]
        assert r.entry(3)["commitSeq"] == s2  # type: ignore[index]


# -- the seed's validation rules, one test each ----------------------------------


class TestRecordsValidation:
    def test_id_of_another_record_type(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [task(2, 1)], Conflict, "ID 2 already belongs to entry")

    def test_task_id_reused_as_submission(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [submission(3, 1)], Conflict, "ID 3 already belongs to task")

    def test_conversation_written_again(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [conversation(1)], Conflict, "ID 1 already belongs to conversation")

    def test_entry_written_again(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [entry(2, 1)], Conflict, "ID 2 already belongs to entry")

    def test_entry_twice_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [entry(8, 1), entry(8, 1)], Conflict, "ID 8 is written more than once")

    def test_conversation_after_task_with_same_id_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [task(8, 1), conversation(8)], Conflict, "ID 8 is written more than once")

    def test_two_record_types_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [task(8, 1), submission(8, 1)], Conflict, "ID 8 is written as two record types")

    def test_document_id_taken_by_an_entry(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [create(doc_record(2, kind="x"), base({}))], Conflict, "ID 2 already belongs to entry")

    def test_document_create_with_existing_id(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [create(doc_record(5, kind="x"), base({}))], Conflict, "ID 5 already belongs to document")

    def test_two_content_commands_create_and_change(self, rec_seeded: Records) -> None:
        writes = [create(doc_record(8, kind="x"), base({})), change(8, base({}))]
        refused(rec_seeded, writes, InvalidRequest, "Document 8 has more than one content command")

    def test_two_changes(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [change(5, base({})), change(5, base({}))], InvalidRequest, "more than one content command")

    def test_copy_and_change(self, rec_seeded: Records) -> None:
        record = doc_record(8, scope=conv_scope(1), key="k")
        writes = [copy_doc(record, 6, "current"), change(8, base({}))]
        refused(rec_seeded, writes, InvalidRequest, "Document 8 has more than one content command")

    def test_retired_twice_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [retire(5), retire(5)], InvalidRequest, "Document 5 is retired more than once")

    def test_copy_source_changed_in_the_batch(self, rec_seeded: Records) -> None:
        writes = [copy_doc(doc_record(8, scope=conv_scope(1), key="k"), 6, "current"), retire(6)]
        refused(rec_seeded, writes, InvalidRequest, "Document copy 8 source is changed in the copy batch")

    def test_change_of_unknown_document(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [change(99, base({}))], Conflict, "Unknown document: 99")

    def test_retire_of_unknown_document(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [retire(99)], Conflict, "Unknown document: 99")

    def test_change_of_retired_document(self, rec_seeded: Records) -> None:
        rec_seeded.commit([retire(6)])
        refused(rec_seeded, [change(6, base({}))], Conflict, "Document 6 is retired")

    def test_retire_of_retired_document(self, rec_seeded: Records) -> None:
        rec_seeded.commit([retire(6)])
        refused(rec_seeded, [retire(6)], Conflict, "Document 6 is retired")

    def test_delta_without_a_base(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [create(doc_record(8, kind="x"), delta([]))], Conflict, "Document 8 delta has no base")

    def test_delta_of_another_version(self, rec_seeded: Records) -> None:
        refused(
            rec_seeded, [change(5, delta([set_op("b", 2)], version=2))], Conflict, "version transition requires a base"
        )

    def test_a_new_version_starts_with_a_base(self, rec_seeded: Records) -> None:
        rec_seeded.commit([change(5, base({"v": 2}, version=2))])
        rec_seeded.commit([change(5, delta([set_op("w", 3)], version=2))])
        got = rec_seeded.document(5)
        assert got is not None and got["version"] == 2 and got["value"] == {"v": 2, "w": 3}

    def test_second_live_incarnation_of_an_address(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [create(doc_record(8), base({}))], Conflict, "already has a current incarnation")

    def test_two_creates_at_one_address_in_one_batch(self, rec_seeded: Records) -> None:
        writes = [create(doc_record(8, kind="y"), base({})), create(doc_record(9, kind="y"), base({}))]
        refused(rec_seeded, writes, Conflict, "already has a current incarnation")

    def test_retire_and_recreate_an_address_in_one_batch(self, rec_seeded: Records) -> None:
        seq = rec_seeded.commit([retire(5), create(doc_record(8), base({"b": 1}))])
        found = rec_seeded.find_document({"kind": "notes", "scope": {"kind": "session"}})
        assert found is not None and found["id"] == 8 and found["createdAt"] == seq

    def test_create_and_retire_in_one_batch(self, rec_seeded: Records) -> None:
        seq = rec_seeded.commit([create(doc_record(8, kind="y"), base({})), retire(8)])
        assert rec_seeded.document(8) is None
        scan = rec_seeded.scan_documents({"scope": {"kind": "session"}, "kind": "y", "at": seq - 1}, 10)
        assert scan["items"] == []

    def test_key_and_no_key_are_different_addresses(self, rec_seeded: Records) -> None:
        rec_seeded.commit([create(doc_record(8, key=""), base({}))])  # session/notes without key is 5
        assert rec_seeded.find_document({"kind": "notes", "scope": {"kind": "session"}})["id"] == 5  # type: ignore[index]
        assert rec_seeded.find_document({"kind": "notes", "scope": {"kind": "session"}, "key": ""})["id"] == 8  # type: ignore[index]


# -- bad input -------------------------------------------------------------------


BAD_WRITES: list[tuple[str, Any]] = [
    ("not a list", {"type": "entry"}),
    ("a string", "entry"),
    ("unknown type", [{"type": "entry.delete", "value": {"id": 9}}]),
    ("no type", [{"value": {"id": 9}}]),
    ("not an object", [["entry", 9]]),
    ("unsafe id", [entry(2**53, 1)]),
    ("negative id", [entry(-1, 1)]),
    ("bool id", [entry(True, 1)]),
    ("float id", [{"type": "entry", "value": {"id": 9.0, "conversationId": 1}}]),
    ("string id", [{"type": "entry", "value": {"id": "9", "conversationId": 1}}]),
    ("unsafe conversationId", [entry(9, 2**60)]),
    ("unsafe parent at", [conversation(9, parent=(1, 2**53))]),
    ("NaN in a record", [{"type": "entry", "value": {"id": 9, "conversationId": 1, "x": float("nan")}}]),
    ("infinity in a record", [{"type": "entry", "value": {"id": 9, "conversationId": 1, "x": [float("inf")]}}]),
    ("non-str key", [{"type": "entry", "value": {"id": 9, "conversationId": 1, 1: "x"}}]),
    ("set value", [{"type": "entry", "value": {"id": 9, "conversationId": 1, "x": {1, 2}}}]),
    ("task without state", [{"type": "task", "value": {"id": 9, "conversationId": 1, "kind": "k"}}]),
    ("task abort not bool", [{**task(9, 1), "value": {**task(9, 1)["value"], "abortRequested": 1}}]),
    ("submission status missing", [{"type": "submission", "value": {"id": 9, "conversationId": 1}}]),
    ("huge request id", [submission(9, 1, request_id="r" * 5000)]),
    ("unknown scope", [create(doc_record(9, scope={"kind": "global"}), base({}))]),
    ("base value not an object", [create(doc_record(9, kind="x"), {"kind": "base", "version": 1, "value": [1]})]),
    ("unknown content kind", [create(doc_record(9, kind="x"), {"kind": "patch", "version": 1, "ops": []})]),
    ("unsafe version", [create(doc_record(9, kind="x"), base({}, version=2**53))]),
    ("ops not a list", [change(5, {"kind": "delta", "version": 1, "ops": {"s": ["a"]}})]),
    ("op not a list", [change(5, delta([("s", ["a"], 1)]))]),  # type: ignore[list-item]
    ("empty op", [change(5, delta([[]]))]),
    ("unknown verb", [change(5, delta([["x", ["a"], 1]]))]),
    ("RFC 6902 op", [change(5, delta([{"op": "add", "path": "/a", "value": 1}]))]),  # type: ignore[list-item]
    ("s without its value", [change(5, delta([["s", ["a"]]]))]),
    ("r with a path", [change(5, delta([["r", [], {}]]))]),
    ("string path", [change(5, delta([["s", "/a", 1]]))]),
    ("empty path for s", [change(5, delta([["s", [], 1]]))]),
    ("empty path for d", [change(5, delta([["d", []]]))]),
    ("reserved segment __proto__", [change(5, delta([["s", ["__proto__"], 1]]))]),
    ("reserved segment deep", [change(5, delta([["s", ["a", "constructor", "b"], 1]]))]),
    ("reserved segment prototype", [change(5, delta([["d", ["prototype"]]]))]),
    ("negative index", [change(5, delta([["s", ["a", -1], 1]]))]),
    ("bool segment", [change(5, delta([["s", [True], 1]]))]),
    ("float segment", [change(5, delta([["s", [0.0], 1]]))]),
    ("a appends a number", [change(5, delta([["a", ["a"], 1]]))]),
    ("t negative", [change(5, delta([["t", ["a"], -1]]))]),
    ("t bool count", [change(5, delta([["t", ["a"], True]]))]),
    ("p negative index", [change(5, delta([["p", [], -1, 0, []]]))]),
    ("p items not a list", [change(5, delta([["p", [], 0, 0, "x"]]))]),
    ("p arity", [change(5, delta([["p", [], 0, 0]]))]),
    ("m not a bijection", [change(5, delta([["m", [], [0, 0]]]))]),
    ("m index out of range", [change(5, delta([["m", [], [1]]]))]),
    ("NaN in an op", [change(5, delta([["s", ["a"], float("nan")]]))]),
    ("createdAt set by the writer", [create(doc_record(9, kind="x", createdAt=1), base({}))]),
    ("copy source at not a point", [copy_doc(doc_record(9, scope=conv_scope(1), key="k"), 6, "latest")]),
]

# Document 5 holds {"a": 1}.
UNAPPLICABLE_OPS: list[tuple[str, list[list[Any]]]] = [
    ("append to a missing member", [["a", ["missing"], "x"]]),
    ("append to a number", [["a", ["a"], "x"]]),
    ("trim a number", [["t", ["a"], 1]]),
    ("set below a missing member", [["s", ["missing", "b"], 1]]),
    ("a path into a number", [["s", ["a", "b"], 1]]),
    ("an index into an object", [["s", [0], 1]]),
    ("a member of an array", [["s", ["l"], [1]], ["s", ["l", "x"], 2]]),
    ("set past the end of an array", [["s", ["l"], [1]], ["s", ["l", 1], 2]]),
    ("delete past the end of an array", [["s", ["l"], [1]], ["d", ["l", 1]]]),
    ("splice an object", [["p", [], 0, 0, [1]]]),
    ("permute the root object", [["m", [], []]]),
    ("permutation of another length", [["s", ["l"], [1, 2]], ["m", ["l"], [0]]]),
    ("replace the root with a list", [["r", [1]]]),
    ("second op fails", [set_op("b", 1), ["a", ["nope"], "x"]]),
]


class TestRecordsBadInput:
    @pytest.mark.parametrize(("case", "writes"), BAD_WRITES, ids=[c for c, _ in BAD_WRITES])
    def test_malformed_batch_is_refused_and_changes_nothing(self, rec_seeded: Records, case: str, writes: Any) -> None:
        refused(rec_seeded, writes, InvalidRequest, None)

    @pytest.mark.parametrize(("case", "ops"), UNAPPLICABLE_OPS, ids=[c for c, _ in UNAPPLICABLE_OPS])
    def test_ops_that_do_not_apply_are_refused(self, rec_seeded: Records, case: str, ops: list[list[Any]]) -> None:
        before = rec_seeded.document(5)
        refused(rec_seeded, [entry(9, 1), change(5, delta(ops))], Conflict, "do not apply|not an object")
        assert rec_seeded.document(5) == before

    def test_a_bad_write_after_good_ones_refuses_the_whole_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [entry(9, 1), task(10, 1), {"type": "nope"}], InvalidRequest, "type must be one of")

    @pytest.mark.parametrize("limit", [0, -1, 2**53, 1.5, True, None])
    def test_bad_limits(self, rec_seeded: Records, limit: Any) -> None:
        with pytest.raises(InvalidRequest):
            rec_seeded.scan_tasks({}, limit)

    @pytest.mark.parametrize(
        "cursor",
        [{"after": "3"}, {"after": 2**53}, {"after": None}, "3", {"after": 3, "order": "sideways"}],
    )
    def test_bad_cursors(self, rec_seeded: Records, cursor: Any) -> None:
        with pytest.raises(InvalidRequest, match="cursor"):
            rec_seeded.scan_tasks({}, 10, cursor)

    def test_cursor_of_the_other_order(self, rec_seeded: Records) -> None:
        with pytest.raises(InvalidRequest, match="cursor"):
            rec_seeded.scan_tasks({"order": "ascending"}, 10, {"after": 3, "order": "descending"})

    @pytest.mark.parametrize("at", ["latest", -1, 2**53, 1.0, None])
    def test_bad_points(self, rec_seeded: Records, at: Any) -> None:
        with pytest.raises(InvalidRequest):
            rec_seeded.document(6, at)

    def test_unknown_conversation_in_reads(self, rec_seeded: Records) -> None:
        with pytest.raises(NotFound, match="Unknown conversation: 77"):
            rec_seeded.scan_entries({"conversationId": 77}, 10)
        with pytest.raises(NotFound, match="Unknown conversation: 77"):
            rec_seeded.entry(2, 77)
        with pytest.raises(NotFound, match="Unknown conversation: 77"):
            rec_seeded.find_latest_head_marker(77)


# -- fork chains ---------------------------------------------------------------------


def build_chain(records: Records) -> dict[int, list[int]]:
    """Root 100 with entries 101..110; fork 200 at 105 with 201..205 (203 a head);
    fork 300 of 200 at 202 with 301..304; returns each conversation's visible ids."""
    records.commit(
        [conversation(100), *[entry(i, 100, head="h" if i in (103, 108) else None) for i in range(101, 111)]]
    )
    records.commit(
        [
            conversation(200, parent=(100, 105)),
            *[entry(i, 200, head="x" if i == 203 else None) for i in range(201, 206)],
        ]
    )
    records.commit([conversation(300, parent=(200, 202)), *[entry(i, 300) for i in range(301, 305)]])
    return {
        100: list(range(101, 111)),
        200: [*range(101, 106), *range(201, 206)],
        300: [*range(101, 106), 201, 202, *range(301, 305)],
    }


class TestRecordsForkChains:
    @pytest.mark.parametrize("limit", [1, 3, 100])
    @pytest.mark.parametrize("order", ["ascending", "descending"])
    def test_scan_follows_the_chain_in_both_orders_with_paging(
        self, store: durastate.Store, order: str, limit: int
    ) -> None:
        r = store.records
        visible = build_chain(r)
        for conv, ids in visible.items():
            got = all_pages(r.scan_entries, {"conversationId": conv, "order": order}, limit)
            assert [e["id"] for e in got] == (ids if order == "ascending" else ids[::-1])

    def test_default_order_is_newest_first(self, store: durastate.Store) -> None:
        r = store.records
        visible = build_chain(r)
        page = r.scan_entries({"conversationId": 300}, 100)
        assert [e["id"] for e in page["items"]] == visible[300][::-1]

    @pytest.mark.parametrize("order", ["ascending", "descending"])
    @pytest.mark.parametrize(
        ("low", "high"), [(None, 202), (104, None), (103, 301), (202, 202), (106, 200), (500, None)]
    )
    def test_min_and_max_bounds(self, store: durastate.Store, order: str, low: int | None, high: int | None) -> None:
        r = store.records
        visible = build_chain(r)
        query: dict[str, Any] = {"conversationId": 300, "order": order}
        if low is not None:
            query["minEntryId"] = low
        if high is not None:
            query["maxEntryId"] = high
        want = [i for i in visible[300] if (low is None or i >= low) and (high is None or i <= high)]
        got = [e["id"] for e in all_pages(r.scan_entries, query, 2)]
        assert got == (want if order == "ascending" else want[::-1])

    def test_entry_lookup_through_the_chain(self, store: durastate.Store) -> None:
        r = store.records
        visible = build_chain(r)
        for conv, ids in visible.items():
            for i in [*range(101, 111), *range(201, 206), *range(301, 305)]:
                got = r.entry(i, conv)
                if i in ids:
                    assert got is not None and got["entry"]["id"] == i
                else:
                    assert got is None, (conv, i)
        assert r.entry(999, 300) is None

    def test_latest_head_marker_through_the_chain(self, store: durastate.Store) -> None:
        r = store.records
        build_chain(r)
        assert r.find_latest_head_marker(100)["id"] == 108
        assert r.find_latest_head_marker(200)["id"] == 203
        assert r.find_latest_head_marker(300)["id"] == 103  # 203 is after the fork at 202
        assert r.find_latest_head_marker(200, 202)["id"] == 103
        assert r.find_latest_head_marker(100, 102) is None

    def test_missing_parent_ends_the_chain(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1, parent=(50, 10)), entry(2, 1)])
        assert [e["id"] for e in r.scan_entries({"conversationId": 1}, 10)["items"]] == [2]
        assert r.find_latest_head_marker(1) is None

    def test_cyclic_chain_is_refused_not_looped(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1, parent=(2, 0)), conversation(2, parent=(1, 0))])
        with pytest.raises(Conflict, match="deeper"):
            r.scan_entries({"conversationId": 1}, 10)


# -- scans ------------------------------------------------------------------------------


class TestRecordsScans:
    def test_conversations_by_owner_with_paging(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(i, owner=(1 if i % 2 else 2, 10 + i % 3)) for i in range(20, 40)])
        for query in (
            {},
            {"ownerConversationId": 1},
            {"ownerTaskId": 11},
            {"ownerConversationId": 2, "ownerTaskId": 12},
        ):
            want = [
                i
                for i in range(20, 40)
                if query.get("ownerConversationId", 1 if i % 2 else 2) == (1 if i % 2 else 2)
                and query.get("ownerTaskId", 10 + i % 3) == 10 + i % 3
            ]
            for order in ("ascending", "descending"):
                got = [c["id"] for c in all_pages(r.scan_conversations, {**query, "order": order}, 3)]
                assert got == (want if order == "ascending" else want[::-1])

    def test_tasks_by_every_filter(self, store: durastate.Store) -> None:
        r = store.records
        specs: dict[int, dict[str, Any]] = {
            i: {
                "conversation_id": i % 2,
                "kind": "ab"[i % 3 % 2],
                "status": "xyz"[i % 3],
                "abort": i % 4 == 0,
                "bg": i % 5 == 0,
            }
            for i in range(10, 40)
        }
        r.commit(
            [
                task(i, s["conversation_id"], kind=s["kind"], status=s["status"], abort=s["abort"], bg=s["bg"])
                for i, s in specs.items()
            ]
        )
        queries: list[tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]] = [
            ({"conversationId": 1}, lambda s: s["conversation_id"] == 1),
            ({"kind": "b"}, lambda s: s["kind"] == "b"),
            ({"status": "z"}, lambda s: s["status"] == "z"),
            ({"abortRequested": True}, lambda s: s["abort"]),
            ({"background": False, "status": "x"}, lambda s: not s["bg"] and s["status"] == "x"),
        ]
        for query, keep in queries:
            want = [i for i, s in specs.items() if keep(s)]
            assert [t["id"] for t in all_pages(r.scan_tasks, query, 4)] == want
            assert [t["id"] for t in all_pages(r.scan_tasks, {**query, "order": "descending"}, 4)] == want[::-1]

    def test_submissions_by_conversation_and_status(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([submission(i, i % 3, status="ab"[i % 2]) for i in range(10, 30)])
        want = [i for i in range(10, 30) if i % 3 == 2 and i % 2 == 1]
        assert [s["id"] for s in all_pages(r.scan_submissions, {"conversationId": 2, "status": "b"}, 2)] == want

    def test_next_cursor_continues_after_the_last_item(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([task(i, 1) for i in range(10, 15)])
        page = r.scan_tasks({}, 2)
        assert page["next"] == {"after": 11, "order": "ascending"}
        last = r.scan_tasks({}, 5)
        assert "next" not in last and len(last["items"]) == 5


# -- documents ---------------------------------------------------------------------------


class TestRecordsDocuments:
    def test_point_in_time_reads_of_a_full_history_document(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1)])
        history: list[tuple[int, dict[str, Any]]] = []
        value: dict[str, Any] = {"n": 0}
        history.append((r.commit([create(doc_record(5, scope=conv_scope(1)), base(value))]), copy.deepcopy(value)))
        for i in range(1, 2 * CHECKPOINT_EVERY + 3):
            value["n"] = i
            value[f"k{i}"] = [i]
            ops = [["s", ["n"], i], set_op(f"k{i}", [i])]
            history.append((r.commit([change(5, delta(ops))]), copy.deepcopy(value)))
        for depth, (seq, want) in enumerate(history):
            got = r.document(5, seq)
            assert got is not None
            assert got["value"] == want and got["deltasSinceBase"] == depth and got["version"] == 1
        assert r.document(5, history[0][0] - 1) is None  # before it was created
        assert r.document(5)["value"] == history[-1][1]  # type: ignore[index]

    def test_read_cost_is_bounded_by_checkpoints(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1), create(doc_record(5, scope=conv_scope(1)), base({"n": 0}))])
        for i in range(3 * CHECKPOINT_EVERY):
            r.commit([change(5, delta([["s", ["n"], i]]))])
        engine = store.engine
        materialize = engine.sql(records.MATERIALIZE)
        for at in range(1, r.last_seq() + 1):
            rows = engine.all(materialize, (at, at, MAX_SAFE_INTEGER + 1, 5))
            assert len(rows) <= CHECKPOINT_EVERY
        current = engine.all(materialize, (MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, 5))
        assert len(current) == 1  # the newest revision carries the value

    def test_current_only_documents_keep_one_revision(self, store: durastate.Store) -> None:
        r = store.records
        r.commit(
            [
                conversation(1),
                create(doc_record(5), base({"n": 0})),
                create(doc_record(6, scope=conv_scope(1), history="latest"), base({})),
            ]
        )
        for i in range(20):
            r.commit([change(5, delta([set_op("n", i)])), change(6, delta([set_op(f"k{i}", i)]))])
        count = store.engine.sql("SELECT count(*) FROM {p}rec_revision WHERE document_id = ?")
        assert store.engine.one(count, (5,)) == (1,)
        assert store.engine.one(count, (6,)) == (1,)
        assert r.document(5) == {
            "record": r.document(5)["record"],  # type: ignore[index]
            "version": 1,
            "value": {"n": 19},
            "deltasSinceBase": 20,
        }
        assert r.document(6)["value"] == {f"k{i}": i for i in range(20)}  # type: ignore[index]
        r.commit([retire(5)])
        assert store.engine.one(count, (5,)) == (0,)

    def test_current_only_documents_refuse_historical_reads(self, rec_seeded: Records) -> None:
        with pytest.raises(InvalidRequest, match="does not retain historical content"):
            rec_seeded.document(5, rec_seeded.last_seq())

    def test_retired_document_reads(self, rec_seeded: Records) -> None:
        before = rec_seeded.last_seq()
        at = rec_seeded.commit([retire(6)])
        assert rec_seeded.document(6) is None
        assert rec_seeded.document(6, at) is None
        assert rec_seeded.document(6, before)["value"] == {"n": 0}  # type: ignore[index]
        assert rec_seeded.document(99) is None
        address = {"kind": "notes", "scope": conv_scope(1), "key": "k"}
        assert rec_seeded.find_document(address) is None
        assert rec_seeded.find_document(address, before)["retiredAt"] == at  # type: ignore[index]

    def test_find_document_picks_the_incarnation_alive_at_the_point(self, rec_seeded: Records) -> None:
        address = {"kind": "notes", "scope": conv_scope(1), "key": "k"}
        first = rec_seeded.last_seq()
        second = rec_seeded.commit([retire(6), create(doc_record(8, scope=conv_scope(1), key="k"), base({}))])
        assert rec_seeded.find_document(address, first)["id"] == 6  # type: ignore[index]
        assert rec_seeded.find_document(address, second)["id"] == 8  # type: ignore[index]
        assert rec_seeded.find_document(address)["id"] == 8  # type: ignore[index]
        assert rec_seeded.find_document(address, first - 1) is None

    def test_scan_documents_by_scope_kind_and_point(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1)])
        s1 = r.commit(
            [create(doc_record(i, kind="ab"[i % 2], scope=conv_scope(1), key=str(i)), base({})) for i in range(10, 20)]
        )
        s2 = r.commit([retire(12), retire(13), create(doc_record(30, scope=conv_scope(2)), base({}))])
        scope = conv_scope(1)
        assert [d["id"] for d in all_pages(r.scan_documents, {"scope": scope, "at": s1}, 3)] == list(range(10, 20))
        alive = [i for i in range(10, 20) if i not in (12, 13)]
        assert [d["id"] for d in all_pages(r.scan_documents, {"scope": scope, "at": "current"}, 3)] == alive
        assert [d["id"] for d in all_pages(r.scan_documents, {"scope": scope, "at": s2}, 3)] == alive
        assert [d["id"] for d in all_pages(r.scan_documents, {"scope": scope, "kind": "b", "at": s1}, 2)] == [
            11,
            13,
            15,
            17,
            19,
        ]
        assert [d["id"] for d in all_pages(r.scan_documents, {"scope": scope, "at": s1 - 1}, 2)] == []


class TestRecordsCopy:
    def _source(self, r: Records) -> list[int]:
        r.commit([conversation(1), conversation(2, parent=(1, 0))])
        seqs = [r.commit([create(doc_record(5, scope=conv_scope(1), key="k", fork="copy"), base({"n": 0}))])]
        for i in range(1, 4):
            seqs.append(r.commit([change(5, delta([["s", ["n"], i]]))]))
        return seqs

    def test_copy_starts_from_the_source_at_the_point(self, store: durastate.Store) -> None:
        r = store.records
        seqs = self._source(r)
        seq = r.commit([copy_doc(doc_record(8, scope=conv_scope(2), key="k", fork="copy"), 5, seqs[1])])
        got = r.document(8)
        assert got is not None and got["value"] == {"n": 1} and got["version"] == 1 and got["deltasSinceBase"] == 0
        assert got["record"]["createdAt"] == seq
        r.commit([change(8, delta([["s", ["n"], 9]]))])
        assert r.document(5)["value"] == {"n": 3}  # type: ignore[index]
        assert r.document(8)["value"] == {"n": 9}  # type: ignore[index]

    def test_copy_of_current(self, store: durastate.Store) -> None:
        r = store.records
        self._source(r)
        r.commit([copy_doc(doc_record(8, scope=conv_scope(2), key="k", fork="copy"), 5, "current")])
        assert r.document(8)["value"] == {"n": 3}  # type: ignore[index]

    @pytest.mark.parametrize(
        "record",
        [
            doc_record(8, kind="other", scope=conv_scope(2), key="k", fork="copy"),
            doc_record(8, scope=conv_scope(2), key="other", fork="copy"),
            doc_record(8, scope=conv_scope(2), fork="copy"),
            doc_record(8, scope=conv_scope(2), key="k", fork="copy", history="latest"),
            doc_record(8, scope=conv_scope(2), key="k", fork="other"),
            doc_record(8, scope={"kind": "task", "taskId": 3}, key="k", fork="copy"),
        ],
        ids=["kind", "key", "no key", "history", "fork", "scope"],
    )
    def test_copy_must_match_the_source(self, store: durastate.Store, record: dict[str, Any]) -> None:
        r = store.records
        self._source(r)
        refused(r, [copy_doc(record, 5, "current")], Conflict, "Document copy 8 was rejected: .*does not match")

    def test_copy_of_a_point_where_the_source_is_not_alive(self, store: durastate.Store) -> None:
        r = store.records
        seqs = self._source(r)
        record = doc_record(8, scope=conv_scope(2), key="k", fork="copy")
        refused(r, [copy_doc(record, 5, seqs[0] - 1)], Conflict, "Document copy 8 was rejected: .*cannot be read")
        refused(r, [copy_doc(record, 77, "current")], Conflict, "Document copy 8 was rejected")

    def test_copy_of_a_current_only_source_at_a_point(self, store: durastate.Store) -> None:
        r = store.records
        seq = r.commit([conversation(1), create(doc_record(5, scope=conv_scope(1), history="latest"), base({}))])
        record = doc_record(8, scope=conv_scope(1), key="k", history="latest")
        refused(r, [copy_doc(record, 5, seq)], Conflict, "Document copy 8 was rejected: .*historical")

    def test_copy_from_a_session_document_is_refused(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [copy_doc(doc_record(8, scope=conv_scope(1)), 5, "current")], Conflict, "does not match")


# -- Chord deltas and lossless strings --------------------------------------------------


class TestRecordsChordDeltas:
    """Every verb through a commit and back, at current and past points (both engines)."""

    def test_every_verb_at_every_point(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1)])
        start = {"text": "😀ab", "list": [1, 2, 3], "obj": {"x": 1}}
        obj = {"y": [5]}
        text = "abc\ud800"  # t counts characters: the emoji is one
        steps: list[tuple[list[list[Any]], dict[str, Any]]] = [
            ([["s", ["obj", "y"], [0]], ["s", ["obj", "y", 0], 5]], {**start, "obj": {"x": 1, "y": [5]}}),
            ([["d", ["obj", "x"]], ["d", ["list", 0]]], {"text": "😀ab", "list": [2, 3], "obj": obj}),
            ([["a", ["text"], "c\ud800"], ["t", ["text"], 1]], {"text": text, "list": [2, 3], "obj": obj}),
            ([["p", ["list"], 1, 0, ["i", "j"]]], {"text": text, "list": [2, "i", "j", 3], "obj": obj}),
            ([["m", ["list"], [3, 2, 1, 0]]], {"text": text, "list": [3, "j", "i", 2], "obj": obj}),
            ([["r", {"fresh": True}], ["s", ["n"], 1]], {"fresh": True, "n": 1}),
        ]
        points = [r.commit([create(doc_record(5, scope=conv_scope(1)), base(start))])]
        for ops, _want in steps:
            points.append(r.commit([change(5, delta(ops))]))
        wants = [start, *(want for _ops, want in steps)]
        for depth, (at, want) in enumerate(zip(points, wants, strict=True)):
            got = r.document(5, at)
            assert got is not None and got["value"] == want and got["deltasSinceBase"] == depth
        assert r.document(5)["value"] == wants[-1]  # type: ignore[index]

    def test_a_batch_over_the_limit_is_stored_folded(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1), create(doc_record(5, scope=conv_scope(1)), base({"n": 0}))])
        ops = [["s", ["n"], i] for i in range(MAX_DELTA_OPERATIONS + 1)]
        seq = r.commit([change(5, delta(ops))])
        r.commit([change(5, delta([["s", ["after"], True]]))])
        got = r.document(5, seq)
        assert got is not None and got["value"] == {"n": MAX_DELTA_OPERATIONS} and got["deltasSinceBase"] == 1
        assert r.document(5)["value"] == {"n": MAX_DELTA_OPERATIONS, "after": True}  # type: ignore[index]
        content = store.engine.sql("SELECT content FROM {p}rec_revision WHERE document_id = ? AND seq = ?")
        row = store.engine.one(content, (5, seq))
        assert row is not None and orjson.loads(row[0]) == [["r", {"n": MAX_DELTA_OPERATIONS}]]

    def test_a_batch_at_the_limit_is_stored_as_written(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1), create(doc_record(5, scope=conv_scope(1)), base({"n": 0}))])
        ops = [["s", ["n"], i] for i in range(MAX_DELTA_OPERATIONS)]
        seq = r.commit([change(5, delta(ops))])
        content = store.engine.sql("SELECT content FROM {p}rec_revision WHERE document_id = ? AND seq = ?")
        row = store.engine.one(content, (5, seq))
        assert row is not None and orjson.loads(row[0]) == ops

    def test_the_callers_ops_are_not_changed(self, rec_seeded: Records) -> None:
        payload = {"c": 1}
        ops: list[list[Any]] = [["s", ["b"], payload], ["s", ["b", "c"], 2]]
        rec_seeded.commit([change(5, delta(ops))])
        assert payload == {"c": 1} and ops[1] == ["s", ["b", "c"], 2]
        assert rec_seeded.document(5)["value"] == {"a": 1, "b": {"c": 2}}  # type: ignore[index]


LONE = "x\ud800y\udfff"


class TestRecordsLosslessStrings:
    """Lone surrogates are stored and read back unchanged (pi-durable stores them)."""

    def test_records_and_documents_keep_lone_surrogates(self, store: durastate.Store) -> None:
        r = store.records
        r.commit(
            [
                {"type": "conversation", "value": {"id": 1, "title": LONE, LONE: [LONE]}},
                {"type": "entry", "value": {"id": 2, "conversationId": 1, "text": LONE}},
                create(doc_record(5, scope=conv_scope(1), kind=LONE, key=LONE), base({LONE: LONE})),
            ]
        )
        assert r.conversation(1) == {"id": 1, "title": LONE, LONE: [LONE]}
        assert r.entry(2)["entry"]["text"] == LONE  # type: ignore[index]
        assert [e["text"] for e in r.scan_entries({"conversationId": 1}, 10)["items"]] == [LONE]
        r.commit([change(5, delta([["a", [LONE], "\udbff"]]))])
        got = r.document(5)
        assert got is not None and got["value"] == {LONE: LONE + "\udbff"} and got["record"]["kind"] == LONE
        found = r.find_document({"kind": LONE, "scope": conv_scope(1), "key": LONE})
        assert found is not None and found["id"] == 5

    def test_indexed_strings_compare_exactly(self, store: durastate.Store) -> None:
        r = store.records
        near = ["\ud800", "\udc00", "\ud800\udc00", "\U00010000", "\\ud800", "\ufffd", ""]
        r.commit(
            [
                *[task(10 + i, 1, kind=k, status=k) for i, k in enumerate(near)],
                *[submission(30 + i, 1, request_id=k, status=k) for i, k in enumerate(near)],
            ]
        )
        for i, k in enumerate(near):
            assert [t["id"] for t in r.scan_tasks({"kind": k}, 20)["items"]] == [10 + i], k
            assert [t["id"] for t in r.scan_tasks({"status": k}, 20)["items"]] == [10 + i], k
            assert r.submission_by_request(1, k)["id"] == 30 + i, k  # type: ignore[index]
            assert r.task(10 + i)["kind"] == k  # type: ignore[index]

    def test_other_refusals_still_hold_with_a_surrogate(self, rec_seeded: Records) -> None:
        bads: list[dict[Any, Any]] = [
            {"x": LONE, "n": float("nan")},
            {LONE: 1, 2: "int key"},
            {"x": [LONE, 2**70]},
            {"x": LONE, "s": {1, 2}},
        ]
        for bad in bads:
            write = {"type": "entry", "value": {"id": 9, "conversationId": 1, **bad}}
            refused(rec_seeded, [write], InvalidRequest, None)


# -- transactions --------------------------------------------------------------------------


class TestRecordsTransactions:
    def test_records_commit_joins_a_store_transaction(self, store: durastate.Store) -> None:
        r = store.records
        with store.transaction():
            seq = r.commit([conversation(1), entry(2, 1)])
            store.kv.put(b"s", b"n", b"k", b"v")
        assert r.entry(2) == {"entry": entry(2, 1)["value"], "commitSeq": seq}
        assert store.kv.get(b"s", b"n", b"k") == b"v"

    def test_rollback_undoes_records_and_the_sequence(self, store: durastate.Store) -> None:
        r = store.records
        start = r.last_seq()
        with pytest.raises(RuntimeError, match="boom"), store.transaction():
            r.commit([conversation(1), entry(2, 1)])
            store.kv.put(b"s", b"n", b"k", b"v")
            raise RuntimeError("boom")
        assert r.conversation(1) is None and r.entry(2) is None
        assert store.kv.get(b"s", b"n", b"k") is None
        assert r.last_seq() == start
        assert r.commit([]) == start + 1

    def test_refused_commit_does_not_doom_the_surrounding_transaction(self, store: durastate.Store) -> None:
        r = store.records
        with store.transaction():
            first = r.commit([conversation(1)])
            with pytest.raises(Conflict):
                r.commit([entry(3, 1), conversation(1)])
            with pytest.raises(InvalidRequest):
                r.commit([{"type": "bogus"}])
            second = r.commit([entry(2, 1)])
        assert second == first + 1
        assert r.entry(2) is not None and r.entry(3) is None


# -- model ----------------------------------------------------------------------------------


class _Doc:
    def __init__(self, scope: dict[str, Any], history: str | None) -> None:
        self.scope = scope
        self.history = history
        self.created: int | None = None
        self.retired: int | None = None
        self.revisions: list[tuple[int, int, dict[str, Any], int]] = []  # (seq, version, value, depth)

    @property
    def current_only(self) -> bool:
        return self.scope["kind"] != "conversation" or self.history == "latest"

    def at(self, point: int | None) -> tuple[int, dict[str, Any], int] | None:
        if self.created is None:
            return None
        if point is None:
            if self.retired is not None:
                return None
            point = MAX_SAFE_INTEGER
        elif not (self.created <= point and (self.retired is None or point < self.retired)):
            return None
        best = None
        for seq, version, value, depth in self.revisions:
            if seq <= point:
                best = (version, value, depth)
        return best


KEYS = st.sampled_from(["a", "b", "c"])


class RecordsMachine(RuleBasedStateMachine):
    """Random batches of document writes (and entries) against a model."""

    def __init__(self, factory: Callable[[], durastate.Store]) -> None:
        super().__init__()
        self.store = factory()
        self.r = self.store.records
        self.r.commit([conversation(1)])
        self.docs: dict[int, _Doc] = {}
        self.next_id = 100
        self.seqs: list[int] = [self.r.last_seq()]

    def _commit(self, writes: list[dict[str, Any]], apply: Callable[[int], None]) -> None:
        seq = self.r.commit(writes)
        assert seq == self.seqs[-1] + 1
        self.seqs.append(seq)
        apply(seq)

    @rule(full=st.booleans(), value=st.dictionaries(KEYS, st.integers(-5, 5), max_size=3), with_entry=st.booleans())
    def create_document(self, full: bool, value: dict[str, Any], with_entry: bool) -> None:
        id = self.next_id
        self.next_id += 2
        scope = conv_scope(1) if full else {"kind": "task", "taskId": 9}
        doc = _Doc(scope, None)
        writes = [create(doc_record(id, kind=f"k{id}", scope=scope), base(value))]
        if with_entry:
            writes.append(entry(id + 1, 1))

        def apply(seq: int) -> None:
            doc.created = seq
            doc.revisions.append((seq, 1, copy.deepcopy(value), 0))
            self.docs[id] = doc

        self._commit(writes, apply)

    @precondition(lambda self: any(d.retired is None for d in self.docs.values()))
    @rule(data=st.data())
    def change_documents(self, data: st.DataObject) -> None:
        live = sorted(i for i, d in self.docs.items() if d.retired is None)
        chosen = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=3, unique=True))
        writes: list[dict[str, Any]] = []
        plans: list[tuple[int, str, Any]] = []
        for id in chosen:
            doc = self.docs[id]
            version, value, depth = doc.at(None)  # type: ignore[misc]
            action = data.draw(st.sampled_from(["set", "remove", "base", "retire"]))
            if action == "set":
                key, n = data.draw(KEYS), data.draw(st.integers(-5, 5))
                writes.append(change(id, delta([set_op(key, n)], version)))
                new = {**value, key: n}
                plans.append((id, "delta", (version, new, depth + 1)))
            elif action == "remove" and value:
                key = data.draw(st.sampled_from(sorted(value)))
                writes.append(change(id, delta([["d", [key]]], version)))
                new = {k: v for k, v in value.items() if k != key}
                plans.append((id, "delta", (version, new, depth + 1)))
            elif action == "retire":
                writes.append(retire(id))
                plans.append((id, "retire", None))
            else:
                new = data.draw(st.dictionaries(KEYS, st.integers(-5, 5), max_size=3))
                writes.append(change(id, base(new, version + 1)))
                plans.append((id, "delta", (version + 1, new, 0)))

        def apply(seq: int) -> None:
            for id, kind, payload in plans:
                doc = self.docs[id]
                if kind == "retire":
                    doc.retired = seq
                else:
                    version, new, depth = payload
                    doc.revisions.append((seq, version, new, depth))

        self._commit(writes, apply)

    @precondition(lambda self: any(d.retired is None for d in self.docs.values()))
    @rule(data=st.data())
    def refused_batch(self, data: st.DataObject) -> None:
        live = sorted(i for i, d in self.docs.items() if d.retired is None)
        id = data.draw(st.sampled_from(live))
        version = self.docs[id].at(None)[0]  # type: ignore[index]
        bad = data.draw(
            st.sampled_from(
                [
                    change(id, delta([["a", ["zz"], "x"]], version)),
                    change(id, delta([set_op("a", 1)], version + 1)),
                    create(doc_record(id), base({})),
                    entry(1, 1),
                ]
            )
        )
        before = self.r.last_seq()
        with pytest.raises(Conflict):
            self.r.commit([entry(self.next_id, 1), task(self.next_id + 1, 1), bad])
        assert self.r.last_seq() == before

    @rule(data=st.data())
    def read_at_a_point(self, data: st.DataObject) -> None:
        point = data.draw(st.sampled_from(self.seqs))
        for id, doc in self.docs.items():
            if doc.current_only:
                continue
            want = doc.at(point)
            got = self.r.document(id, point)
            if want is None:
                assert got is None, (id, point)
            else:
                assert got is not None, (id, point)
                assert (got["version"], got["value"], got["deltasSinceBase"]) == want, (id, point)

    @invariant()
    def current_reads_match(self) -> None:
        for id, doc in self.docs.items():
            want = doc.at(None)
            got = self.r.document(id)
            if want is None:
                assert got is None
            else:
                assert got is not None and (got["version"], got["value"], got["deltasSinceBase"]) == want

    def teardown(self) -> None:
        self.store.close()


class TestRecordsModel:
    def test_documents_match_the_model(self, open_store: Callable[..., durastate.Store]) -> None:
        stores: list[durastate.Store] = []

        def factory() -> durastate.Store:
            # A fresh, empty store per example: the same URL, a new table prefix.
            s = open_store(prefix=f"m{len(stores)}_")
            stores.append(s)
            return s

        machine: Any = lambda: RecordsMachine(factory)  # noqa: E731
        run_state_machine_as_test(
            machine,
            settings=settings(max_examples=25, stateful_step_count=25, deadline=None),
        )


# -- several processes ----------------------------------------------------------------------


def commit_many(url: str, worker: int, count: int) -> list[int]:
    store = durastate.open(url, busy_timeout=30.0)
    try:
        r = store.records
        seqs = []
        own_task = r.mint_id()
        for i in range(count):
            id = r.mint_id()
            seqs.append(r.commit([entry(id, 1), task(own_task, 1, status=f"{worker}:{i}")]))
        return seqs
    finally:
        store.close()


def _run_worker(sender: Any, url: str, worker: int, count: int) -> None:
    try:
        sender.send(("ok", commit_many(url, worker, count)))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        sender.send(("error", repr(exc)))


class TestRecordsAcrossProcesses:
    WORKERS = 4
    COMMITS = 40

    def test_concurrent_commits_get_strictly_increasing_gap_free_sequences(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        setup = open_shared()
        try:
            start = setup.records.commit([conversation(1)])
        finally:
            setup.close()
        ctx = multiprocessing.get_context("spawn")
        procs: list[tuple[Any, Any]] = []
        try:
            for w in range(self.WORKERS):
                receiver, sender = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_run_worker, args=(sender, shared_url, w, self.COMMITS), daemon=True)
                proc.start()
                sender.close()
                procs.append((proc, receiver))
            results: list[list[int]] = []
            for proc, receiver in procs:
                assert receiver.poll(WORKER_TIMEOUT), "a committing worker hung"
                status, value = receiver.recv()
                assert status == "ok", value
                results.append(value)
                proc.join(WORKER_TIMEOUT)
        finally:
            for proc, _ in procs:
                if proc.is_alive():
                    proc.kill()
                    proc.join(10)
        for seqs in results:
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        every = sorted(s for seqs in results for s in seqs)
        assert every == list(range(start + 1, start + 1 + self.WORKERS * self.COMMITS))
        check = open_shared()
        try:
            entries = _all_entries(check.records)
            assert len(entries) == self.WORKERS * self.COMMITS
            assert sorted(e["commitSeq"] for e in entries) == every
        finally:
            check.close()


def _all_entries(r: Records) -> list[dict[str, Any]]:
    out: Iterator[dict[str, Any]] = iter(all_pages(r.scan_entries, {"conversationId": 1, "order": "ascending"}, 50))
    return [r.entry(e["id"]) for e in out]  # type: ignore[misc]


# -- index use (every engine) ------------------------------------------------------


class TestRecordsIndexUse:
    """Commit, entry and document reads are index searches (flat in store size)."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        # Rows to gather statistics on: an empty analyzed table plans like no real one.
        store.records.commit([conversation(i) for i in range(1, 201)])
        return with_statistics(store, request.param)

    def check(
        self,
        store: durastate.Store,
        statement: Any,
        params: tuple[Any, ...],
        table: str,
        *using: str,
        sorts: bool = False,
    ) -> None:
        plan = plan_of(store, statement, params)
        assert_index_search(plan, store.engine.prefix + table, "c", "a", "d", "r", using=using, sorts=sorts)

    def test_entries(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_ENTRY, (1,), "rec_entry", "id")
        self.check(filled, records.HEAD_MARKER, (1, 10), "rec_entry", "conversation_id")
        for statement in records.ENTRIES.values():
            self.check(filled, statement, (1, 0, 10, 5), "rec_entry", "conversation_id")

    def test_conversations(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_CONVERSATION, (1,), "rec_conversation", "id")
        # The chain's rows (at most MAX_CHAIN_DEPTH) are put in order by a sort.
        self.check(filled, records.CHAIN, (1, 10), "rec_conversation", "id", sorts=True)

    def test_documents(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_DOCUMENT_RECORD, (1,), "rec_document", "id")
        self.check(filled, records.FIND_DOCUMENT["current"], ("k", "s", 1, 1, "key"), "rec_document", "key_value")
        # At most CHECKPOINT_EVERY + 1 revision rows, which an engine may sort after the join.
        self.check(filled, records.MATERIALIZE, (5, 5, 0, 1), "rec_revision", "document_id", sorts=True)
        self.check(filled, records.LATEST_REVISION, (1,), "rec_revision", "document_id")

    def test_id_lookups(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_TASK, (1,), "rec_task", "id")
        self.check(filled, records.GET_SUBMISSION, (1,), "rec_submission", "id")


class TestRecordsRevisions:
    """``records.document_revisions(id)``: every stored revision, oldest first."""

    def test_revisions_follow_commits(self, store: durastate.Store) -> None:
        rec = store.records
        conv, doc = rec.mint_id(), rec.mint_id()
        rec.commit([conversation(conv)])
        # A conversation-scoped document keeps its history (session-scoped ones keep only the latest).
        first = rec.commit([create(doc_record(doc, scope=conv_scope(conv)), base({"n": 0}))])
        second = rec.commit([change(doc, delta([["s", ["n"], 1]]))])
        third = rec.commit([change(doc, base({"n": 5}, version=2))])
        revisions = rec.document_revisions(doc)
        assert [(r["seq"], r["kind"], r["version"]) for r in revisions] == [
            (first, "base", 1),
            (second, "delta", 1),
            (third, "base", 2),
        ]
        assert revisions[1]["depth"] == revisions[0]["depth"] + 1
        assert revisions[2]["depth"] == 0
        assert rec.document(doc, at=first)["value"] == {"n": 0}  # type: ignore[index]
        assert rec.document_revisions(rec.mint_id()) == []

    def test_bad_id_is_refused(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest):
            store.records.document_revisions("1")  # type: ignore[arg-type]
