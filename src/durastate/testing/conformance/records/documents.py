"""Conformance for ``store.records``: versioned documents (reads at a point, copies, Chord deltas,
lossless strings, transactions, revisions).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

import durastate
from durastate import Conflict, InvalidRequest, records
from durastate._chord import MAX_DELTA_OPERATIONS
from durastate.engines.base import READ
from durastate.records import CHECKPOINT_EVERY, MAX_SAFE_INTEGER, Records

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
    "TestRecordsRevisions",
    "TestRecordsCopy",
    "TestRecordsChordDeltas",
    "TestRecordsLosslessStrings",
    "TestRecordsDocuments",
    "TestRecordsTransactions",
]


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
        count = store.engine.sql(READ("SELECT count(*) FROM {p}rec_revision WHERE document_id = ?"))
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
        content = store.engine.sql(READ("SELECT content FROM {p}rec_revision WHERE document_id = ? AND seq = ?"))
        row = store.engine.one(content, (5, seq))
        assert row is not None and orjson.loads(row[0]) == [["r", {"n": MAX_DELTA_OPERATIONS}]]

    def test_a_batch_at_the_limit_is_stored_as_written(self, store: durastate.Store) -> None:
        r = store.records
        r.commit([conversation(1), create(doc_record(5, scope=conv_scope(1)), base({"n": 0}))])
        ops = [["s", ["n"], i] for i in range(MAX_DELTA_OPERATIONS)]
        seq = r.commit([change(5, delta(ops))])
        content = store.engine.sql(READ("SELECT content FROM {p}rec_revision WHERE document_id = ? AND seq = ?"))
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
