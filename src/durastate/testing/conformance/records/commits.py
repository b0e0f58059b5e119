"""Conformance for ``store.records``: commits, the seed's validation rules, refused input, fork chains
and scans.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import Conflict, InvalidRequest, NotFound
from durastate.engines.base import READ, WRITE
from durastate.records import FIRST_MINTED_ID, Records

from .common import (
    all_pages,
    base,
    change,
    conv_scope,
    conversation,
    copy_doc,
    create,
    delta,
    doc_record,
    entry,
    refused,
    retire,
    set_op,
    submission,
    task,
)

__all__ = [
    "TestRecordsBadInput",
    "TestRecordsCommit",
    "TestRecordsForkChains",
    "TestRecordsEntryIdsMigration",
    "TestRecordsScans",
    "TestRecordsValidation",
]


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

    # Entries claim their ids in rec_entry, the other types in rec_id (schema
    # 3): each direction of a collision, stored or within the batch.
    @pytest.mark.parametrize(("id", "owner"), [(1, "conversation"), (3, "task"), (4, "submission"), (5, "document")])
    def test_entry_id_taken_by_another_type(self, rec_seeded: Records, id: int, owner: str) -> None:
        refused(rec_seeded, [entry(id, 1)], Conflict, f"ID {id} already belongs to {owner}")

    def test_submission_id_taken_by_an_entry(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [submission(2, 1)], Conflict, "ID 2 already belongs to entry")

    def test_entry_then_task_with_same_id_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [entry(8, 1), task(8, 1)], Conflict, "ID 8 is written as two record types")

    def test_task_then_entry_with_same_id_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [task(8, 1), entry(8, 1)], Conflict, "ID 8 is written more than once")

    def test_conversation_and_entry_with_same_id_in_one_batch(self, rec_seeded: Records) -> None:
        refused(rec_seeded, [entry(9, 1), conversation(9)], Conflict, "ID 9 is written more than once")

    @pytest.mark.parametrize("count", [17, 200])
    def test_a_taken_id_among_many_entries(self, rec_seeded: Records, count: int) -> None:
        # Past EXACT_CLAIM the entries go in padded chunks; the collision is the last row.
        writes = [entry(1000 + i, 1) for i in range(count - 1)] + [entry(3, 1)]
        refused(rec_seeded, writes, Conflict, "ID 3 already belongs to task")
        assert rec_seeded.entry(1000) is None

    @pytest.mark.parametrize("count", [17, 200])
    def test_many_entries_commit(self, rec_seeded: Records, count: int) -> None:
        seq = rec_seeded.commit([entry(1000 + i, 1) for i in range(count)])
        assert [rec_seeded.entry(1000 + i)["commitSeq"] for i in (0, count - 1)] == [seq, seq]  # type: ignore[index]
        page = rec_seeded.scan_entries({"conversationId": 1, "minEntryId": 1000}, count + 1)
        assert [e["id"] for e in page["items"]] == list(range(1000 + count - 1, 999, -1))

    def test_mint_id_is_above_committed_entries(self, rec_seeded: Records) -> None:
        rec_seeded.commit([entry(5000, 1)])
        assert rec_seeded.mint_id() > 5000

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


# The schema 2 layout: every entry's id also had a rec_id row.
_CLAIM_ENTRIES_AS_BEFORE = WRITE("INSERT INTO {p}rec_id (id, type) SELECT id, 'entry' FROM {p}rec_entry")
_SET_VERSION_2 = WRITE("UPDATE {p}schema SET version = 2 WHERE facet = 'records'")
_ENTRY_CLAIMS = READ("SELECT count(*) FROM {p}rec_id WHERE type = 'entry'")


class TestRecordsEntryIdsMigration:
    """Schema 3 moves entries' id claims from rec_id to rec_entry's own key."""

    def test_a_schema_2_store_keeps_every_id_rule(self, open_shared: Callable[..., durastate.Store]) -> None:
        with open_shared() as store:
            r = store.records
            r.commit([conversation(1), entry(2, 1), entry(3, 1), task(4, 1)])
            engine = store.engine
            with engine.transaction():  # the store as schema 2 left it
                engine.execute(engine.sql(_CLAIM_ENTRIES_AS_BEFORE))
                engine.execute(engine.sql(_SET_VERSION_2))
            assert engine.one(engine.sql(_ENTRY_CLAIMS)) == (2,)
        with open_shared() as store:
            r = store.records
            engine = store.engine
            assert engine.one(engine.sql(_ENTRY_CLAIMS)) == (0,)
            refused(r, [entry(2, 1)], Conflict, "ID 2 already belongs to entry")
            refused(r, [task(3, 1)], Conflict, "ID 3 already belongs to entry")
            refused(r, [entry(4, 1)], Conflict, "ID 4 already belongs to task")
            assert r.mint_id() > 4
            seq = r.commit([entry(10, 1), task(4, 1)])
            assert r.entry(10)["commitSeq"] == seq  # type: ignore[index]
            assert [e["id"] for e in r.scan_entries({"conversationId": 1}, 10)["items"]] == [10, 3, 2]
