"""Conformance for ``store.documents``: clear and backups, unreadable bodies, describe and list, index
use, transactions, refused input.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import durastate
from durastate import Conflict, InvalidRequest, documents
from durastate.documents import (
    MAX_KEY_SIZE,
    Document,
    DocumentInfo,
    PrefixInfo,
    RawDocument,
    UnreadableDocument,
    prefix_successor,
)

from ..plans import STATISTICS, assert_index_search, plan_of, with_statistics
from .common import NOT_AN_OBJECT, UNDECODABLE, plant, size_of, snapshot

__all__ = [
    "TestDocumentsBadInput",
    "TestDocumentsClear",
    "TestDocumentsDescribeList",
    "TestDocumentsIndexUse",
    "TestDocumentsTransactions",
    "TestDocumentsUnreadable",
]


class TestDocumentsClear:
    def test_clear_of_absent_key_is_none_and_writes_nothing(self, store: durastate.Store) -> None:
        assert store.documents.clear("missing") is None
        assert snapshot(store.documents) == []

    def test_clear_moves_the_payload_to_the_backup_key(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        store.documents.write("k", {"v": 2})
        raw = store.documents.read_raw("k")
        assert raw is not None
        assert store.documents.clear("k") == "k.bak"
        assert store.documents.read("k") is None
        assert store.documents.read_raw("k.bak") == RawDocument(raw.payload, 1)

    def test_backup_keys_count_up(self, store: durastate.Store) -> None:
        backups: list[str | None] = []
        for i in range(4):
            store.documents.write("k", {"v": i})
            backups.append(store.documents.clear("k"))
        assert backups == ["k.bak", "k.bak.1", "k.bak.2", "k.bak.3"]
        assert [store.documents.read(str(b)) for b in backups] == [Document({"v": i}, 1) for i in range(4)]

    def test_backup_fills_the_first_gap_and_ignores_lookalike_keys(self, store: durastate.Store) -> None:
        for key in ("k.bak", "k.bak.2", "k.bakery", "k.bak.1x"):
            store.documents.write(key, {"other": key})
        store.documents.write("k", {"v": 1})
        assert store.documents.clear("k") == "k.bak.1"
        store.documents.write("k", {"v": 2})
        assert store.documents.clear("k") == "k.bak.3"
        assert store.documents.read("k.bakery") == Document({"other": "k.bakery"}, 1)

    def test_clear_of_a_backup_backs_up_the_backup(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        assert store.documents.clear("k") == "k.bak"
        assert store.documents.clear("k.bak") == "k.bak.bak"

    def test_clear_inside_a_rolled_back_transaction_leaves_no_trace(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        before = snapshot(store.documents)
        with pytest.raises(RuntimeError), store.transaction():
            assert store.documents.clear("k") == "k.bak"
            raise RuntimeError("undo")
        assert snapshot(store.documents) == before


class TestDocumentsUnreadable:
    @pytest.mark.parametrize("payload", UNDECODABLE + NOT_AN_OBJECT)
    def test_read_raises_and_clear_still_works(self, store: durastate.Store, payload: bytes) -> None:
        plant(store, "bad", payload, revision=7)
        with pytest.raises(UnreadableDocument) as caught:
            store.documents.read("bad")
        assert caught.value.key == "bad"
        assert caught.value.revision == 7
        assert caught.value.reason
        assert store.documents.read_raw("bad") == RawDocument(payload, 7)
        assert store.documents.describe("bad") == DocumentInfo("bad", 7, len(payload))
        assert store.documents.clear("bad") == "bad.bak"
        assert store.documents.read_raw("bad") is None
        assert store.documents.read_raw("bad.bak") == RawDocument(payload, 1)

    def test_non_object_reason_names_the_type(self, store: durastate.Store) -> None:
        plant(store, "list", b"[1]")
        with pytest.raises(UnreadableDocument, match="expected an object, found list"):
            store.documents.read("list")

    def test_unreadable_document_can_be_deleted_or_overwritten(self, store: durastate.Store) -> None:
        plant(store, "a", b"{oops", revision=3)
        plant(store, "b", b"{oops", revision=3)
        assert store.documents.write("a", {"v": 1}, expect=3) == 4
        assert store.documents.read("a") == Document({"v": 1}, 4)
        assert store.documents.delete("b") is True


class TestDocumentsDescribeList:
    def test_describe_one_key(self, store: durastate.Store) -> None:
        data = {"v": "ü" * 10}
        store.documents.write("k", data)
        store.documents.write("k", data)
        assert store.documents.describe("k") == DocumentInfo("k", 2, size_of(data))
        assert store.documents.describe("missing") is None

    def test_describe_prefix_counts_and_sums_exactly(self, store: durastate.Store) -> None:
        docs: dict[str, dict[str, Any]] = {
            "scope/": {"root": True},
            "scope/a": {"v": 1},
            "scope/b": {"v": [1, 2, 3]},
            "scope/a/deep": {"v": "x" * 100},
            "scope0": {"not": "inside"},
            "scopf": {"not": "inside"},
            "scop": {"not": "inside"},
        }
        for key, data in docs.items():
            store.documents.write(key, data)
        for prefix in ("scope/", "scope", "scope/a", "", "nothing", "scope/a/deep"):
            inside = [k for k in docs if k.startswith(prefix)]
            expected = PrefixInfo(len(inside), sum(size_of(docs[k]) for k in inside))
            assert store.documents.describe(prefix=prefix) == expected, prefix

    def test_prefix_is_not_a_pattern(self, store: durastate.Store) -> None:
        for key in ("a_c", "abc", "a%c", "aXc", "a\\c"):
            store.documents.write(key, {"k": key})
        for prefix in ("a_", "a%", "a\\"):
            assert store.documents.describe(prefix=prefix).count == 1
            assert [i.key for i in store.documents.list(prefix).items] == [prefix + "c"]

    def test_prefixes_at_code_point_edges(self, store: durastate.Store) -> None:
        keys = ["x\ud7ff", "x\ud7ffz", "x\ue000", "x\U0010ffff", "x\U0010ffffa", "y", "x"]
        for key in keys:
            store.documents.write(key, {})
        for prefix in ("x\ud7ff", "x\U0010ffff", "x", "x\ue000"):
            inside = sorted(k for k in keys if k.startswith(prefix))
            assert [i.key for i in store.documents.list(prefix).items] == inside, repr(prefix)
            assert store.documents.describe(prefix=prefix).count == len(inside)

    def test_prefix_successor(self) -> None:
        assert prefix_successor("") is None
        assert prefix_successor("ab") == "ac"
        assert prefix_successor("a\ud7ff") == "a\ue000"
        assert prefix_successor("a\U0010ffff") == "b"
        assert prefix_successor("\U0010ffff") is None

    def test_list_is_in_code_point_order_with_sizes(self, store: durastate.Store) -> None:
        keys = ["b", "a", "B", "é", "e", "z", "a/b", "a.b", "ab", "\U0001f600", "\uffff", "A"]
        for i, key in enumerate(keys):
            store.documents.write(key, {"i": i})
        page = store.documents.list()
        assert [item.key for item in page.items] == sorted(keys)
        assert page.cursor is None
        for item in page.items:
            assert item == DocumentInfo(item.key, 1, size_of({"i": keys.index(item.key)}))
            # list builds its items with tuple.__new__: still DocumentInfo, with int fields
            assert type(item) is DocumentInfo and type(item.revision) is int and type(item.size) is int
            assert item._asdict() == {"key": item.key, "revision": 1, "size": item.size}

    def test_list_pages_through_every_key_once(self, store: durastate.Store) -> None:
        keys = [f"p/{i:03d}" for i in range(23)] + ["p/", "p0", "o"]
        for key in keys:
            store.documents.write(key, {})
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = store.documents.list("p/", limit=5, cursor=cursor)
            pages += 1
            seen.extend(item.key for item in page.items)
            assert len(page.items) <= 5
            if page.cursor is None:
                break
            cursor = page.cursor
        expected = sorted(k for k in keys if k.startswith("p/"))
        assert seen == expected
        assert pages == -(-len(expected) // 5)
        assert list(store.documents.iter_keys("p/")) == expected

    def test_list_cursor_outside_the_prefix(self, store: durastate.Store) -> None:
        for key in ("a", "m/1", "m/2", "z"):
            store.documents.write(key, {})
        assert [i.key for i in store.documents.list("m/", cursor="b").items] == ["m/1", "m/2"]
        assert store.documents.list("m/", cursor="n").items == []
        assert [i.key for i in store.documents.list("m/", cursor="m/1").items] == ["m/2"]

    def test_list_limit_exactly_the_number_of_keys_ends_with_no_cursor(self, store: durastate.Store) -> None:
        for key in ("a", "b", "c"):
            store.documents.write(key, {})
        page = store.documents.list(limit=3)
        assert len(page.items) == 3
        assert page.cursor is None

    def test_describe_needs_exactly_one_of_key_and_prefix(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest):
            store.documents.describe()  # type: ignore[call-overload]
        with pytest.raises(InvalidRequest):
            store.documents.describe("k", prefix="k")  # type: ignore[call-overload]

    @pytest.mark.parametrize("limit", [0, -1, 1.5, "3", True, None])
    def test_list_refuses_a_bad_limit(self, store: durastate.Store, limit: Any) -> None:
        with pytest.raises(InvalidRequest):
            store.documents.list(limit=limit)


class TestDocumentsIndexUse:
    """Point reads and prefix queries are primary-key searches, never LIKE or scans."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        for i in range(50):
            store.documents.write(f"k/{i}", {"i": i})
        return with_statistics(store, request.param)

    def check(self, store: durastate.Store, statement: Any, params: tuple[Any, ...], sorts: bool = False) -> None:
        plan = plan_of(store, statement, params)
        assert_index_search(plan, store.engine.prefix + "documents", using=("key",), sorts=sorts)
        assert "~~" not in plan.text and "LIKE" not in plan.text.upper(), plan.text

    def test_point_statements(self, filled: durastate.Store) -> None:
        self.check(filled, documents.READ_DOCUMENT, ("k/1",))
        self.check(filled, documents.CAS, (b"{}", "k/1", 1))
        self.check(filled, documents.DELETE, ("k/1",))
        self.check(filled, documents.DESCRIBE, ("k/1",))

    def test_describe_prefix_is_an_index_range(self, filled: durastate.Store) -> None:
        self.check(filled, documents.describe_prefix_sql(True), ("k/", "k0"))

    def test_list_is_an_index_range_in_key_order(self, filled: durastate.Store) -> None:
        self.check(filled, documents.list_sql(True, True), ("k/1", "k0", 10))

    def test_backups_of_a_key_are_an_index_range(self, filled: durastate.Store) -> None:
        self.check(filled, documents.BACKUP_KEYS, ("k/1.", "k/1/"))


class TestDocumentsTransactions:
    def test_documents_commit_with_other_facets(self, store: durastate.Store) -> None:
        with store.transaction() as tx:
            tx.documents.write("k", {"v": 1})
            tx.kv.put(b"s", b"n", b"k", b"v")
            tx.queues.push("q", [b"job"])
        assert store.documents.read("k") == Document({"v": 1}, 1)
        assert store.kv.get(b"s", b"n", b"k") == b"v"

    def test_documents_roll_back_with_other_facets(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 0})
        with pytest.raises(RuntimeError), store.transaction() as tx:
            tx.documents.write("k", {"v": 1})
            tx.documents.write("new", {"v": 1})
            tx.documents.delete("k")
            tx.kv.put(b"s", b"n", b"k", b"v")
            raise RuntimeError("undo")
        assert store.documents.read("k") == Document({"v": 0}, 1)
        assert store.documents.read("new") is None
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_a_lost_cas_does_not_doom_the_transaction(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        with store.transaction():
            with pytest.raises(Conflict):
                store.documents.write("k", {"v": "x"}, expect=99)
            with pytest.raises(Conflict):
                store.documents.write("k", {"v": "x"}, expect=0)
            with pytest.raises(InvalidRequest):
                store.documents.write("k", {"v": float("nan")})
            store.documents.write("other", {"v": 2})
        assert store.documents.read("other") == Document({"v": 2}, 1)
        assert store.documents.read("k") == Document({"v": 1}, 1)

    def test_lock_inside_a_transaction_joins_it(self, store: durastate.Store) -> None:
        with pytest.raises(RuntimeError), store.transaction():
            with store.documents.lock("k"):
                store.documents.write("k", {"v": 1})
            raise RuntimeError("undo the outer block")
        assert store.documents.read("k") is None


@dataclass
class _Point:
    x: int


class _Plain:
    pass


BAD_DATA: list[tuple[str, Any, bool]] = [
    # (case, data, is a type problem: also TypeError)
    ("list", [1, 2], True),
    ("str", "text", True),
    ("none", None, True),
    ("bytes_doc", b"{}", True),
    ("set", {"v": {1, 2}}, True),
    ("bytes_value", {"v": b"raw"}, True),
    ("datetime", {"v": datetime.datetime(2024, 1, 1)}, True),
    ("date", {"v": datetime.date(2024, 1, 1)}, True),
    ("dataclass", {"v": _Point(1)}, True),
    ("object", {"v": _Plain()}, True),
    ("int_key", {1: "v"}, True),
    ("none_key", {None: "v"}, True),
    ("nested_int_key", {"a": [{"b": {2: 1}}]}, True),
    ("nan", {"v": float("nan")}, False),
    ("inf", {"v": float("inf")}, False),
    ("nested_neg_inf", {"a": [1, {"b": [float("-inf")]}], "c": None}, False),
    ("surrogate_value", {"v": "a\ud800b"}, False),
    ("surrogate_key", {"\udfff": 1}, False),
    ("int_too_big", {"v": 2**64}, False),
    ("int_too_small", {"v": -(2**63) - 1}, False),
    # orjson writes these (up to 2**64 - 1): refused by the 64-bit check after the 53-bit first try.
    ("int64_max_plus_one", {"v": 2**63}, False),
    ("nested_uint64_max", {"a": [{"b": 2**64 - 1}], "c": None, "d": 2**53}, False),
    # Two problems at once: the type refusal wins, as when encoded once.
    ("wide_int_and_object", {"a": 2**60, "b": _Plain()}, True),
    ("wide_int_and_nan", {"a": -(2**60), "b": float("nan")}, False),
]


BAD_KEYS: list[tuple[str, Any]] = [
    ("bytes", b"k"),
    ("int", 1),
    ("none", None),
    ("surrogate", "k\ud800"),
    ("nul", "k\x00"),
    ("too_long", "é" * (MAX_KEY_SIZE // 2) + "x"),
]


def _deep(levels: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for _ in range(levels):
        data = {"d": data}
    return data


class TestDocumentsBadInput:
    def _seed(self, store: durastate.Store) -> list[tuple[str, bytes, int]]:
        store.documents.write("k", {"v": 1})
        store.documents.write("other", {"v": 2})
        return snapshot(store.documents)

    @pytest.mark.parametrize(("case", "data", "type_problem"), BAD_DATA, ids=[c[0] for c in BAD_DATA])
    def test_bad_data_is_refused_and_changes_nothing(
        self, store: durastate.Store, case: str, data: Any, type_problem: bool
    ) -> None:
        before = self._seed(store)
        for expect in (None, 0, 1):
            with pytest.raises(InvalidRequest) as caught:
                store.documents.write("k", data, expect=expect)
            assert isinstance(caught.value, TypeError) == type_problem, caught.value
            with pytest.raises(InvalidRequest):
                store.documents.write("new", data, expect=expect)
        assert snapshot(store.documents) == before

    def test_nesting_too_deep_is_refused(self, store: durastate.Store) -> None:
        before = self._seed(store)
        with pytest.raises(InvalidRequest):
            store.documents.write("k", _deep(300))
        assert snapshot(store.documents) == before
        store.documents.write("deep", _deep(200))
        assert store.documents.read("deep") == Document(_deep(200), 1)

    def test_document_over_max_value_size_is_refused(self, open_store: Any) -> None:
        store = open_store(max_value_size=1000)
        before = self._seed(store)
        fits = {"v": "x" * (1000 - size_of({"v": ""}))}
        assert size_of(fits) == 1000
        with pytest.raises(InvalidRequest, match="max_value_size"):
            store.documents.write("k", {"v": "x" * 1000})
        assert snapshot(store.documents) == before
        store.documents.write("fits", fits)
        assert store.documents.read("fits") == Document(fits, 1)

    @pytest.mark.parametrize(("case", "key"), BAD_KEYS, ids=[c[0] for c in BAD_KEYS])
    def test_bad_keys_are_refused_everywhere(self, store: durastate.Store, case: str, key: Any) -> None:
        before = self._seed(store)
        docs = store.documents
        calls: list[Callable[[], Any]] = [
            lambda: docs.read(key),
            lambda: docs.read_raw(key),
            lambda: docs.write(key, {"v": 1}),
            lambda: docs.write(key, {"v": 1}, expect=0),
            lambda: docs.delete(key),
            lambda: docs.clear(key),
            lambda: docs.describe(key),
            lambda: docs.describe(prefix=key),
            lambda: docs.list(key),
        ]
        if key is not None:  # cursor=None is the first page
            calls.append(lambda: docs.list("", cursor=key))
        for call in calls:
            with pytest.raises(InvalidRequest):
                call()
        assert snapshot(store.documents) == before

    @pytest.mark.parametrize("expect", [-1, 1.0, "1", True, 2**63, b"1"])
    def test_bad_expect_is_refused(self, store: durastate.Store, expect: Any) -> None:
        before = self._seed(store)
        with pytest.raises(InvalidRequest):
            store.documents.write("k", {"v": 9}, expect=expect)
        with pytest.raises(InvalidRequest):
            store.documents.delete("k", expect=expect)
        assert snapshot(store.documents) == before

    def test_bad_input_inside_a_transaction_does_not_doom_it(self, store: durastate.Store) -> None:
        with store.transaction():
            store.documents.write("a", {"v": 1})
            for _, data, _ in BAD_DATA:
                with pytest.raises(InvalidRequest):
                    store.documents.write("a", data)
            for _, key in BAD_KEYS:
                with pytest.raises(InvalidRequest):
                    store.documents.read(key)
        assert store.documents.read("a") == Document({"v": 1}, 1)

    def test_uuid_is_stored_as_its_string(self, store: durastate.Store) -> None:
        value = uuid.UUID(int=7)
        store.documents.write("k", {"id": value})
        assert store.documents.read("k") == Document({"id": str(value)}, 1)
