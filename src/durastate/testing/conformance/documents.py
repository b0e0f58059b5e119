"""Conformance: the ``store.documents`` facet.

Every test runs on every engine through the ``store`` / ``open_store`` /
``shared_url`` fixtures of ``durastate.testing.plugin``. Expectations are
computed from the inputs (``orjson.dumps`` sizes, sorted keys, the model in
``TestDocumentsModel``), never hard-coded engine output.

Concurrency tests synchronise with barriers and events, never sleeps; the
multi-process ones use the plumbing of ``conformance.multiprocess``.
"""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import durastate
from durastate import Conflict, InvalidRequest, StoreUnavailable, documents
from durastate.documents import (
    MAX_KEY_SIZE,
    Document,
    DocumentInfo,
    Documents,
    PrefixInfo,
    RawDocument,
    UnreadableDocument,
    prefix_successor,
)

from .multiprocess import ANY_METHOD, BUSY_TIMEOUT, _Workers
from .plans import STATISTICS, assert_index_search, plan_of, with_statistics

__all__ = [
    "TestDocumentsAcrossProcesses",
    "TestDocumentsBadInput",
    "TestDocumentsCAS",
    "TestDocumentsClear",
    "TestDocumentsDescribeList",
    "TestDocumentsIndexUse",
    "TestDocumentsLock",
    "TestDocumentsModel",
    "TestDocumentsReadWrite",
    "TestDocumentsTransactions",
    "TestDocumentsUnreadable",
]

# Payloads no JSON decoder accepts, or that decode to something not an object.
UNDECODABLE = [b"", b"\xff\xfe\x00", b"{not json", b'{"a": 1', b"NaN", b'{"a": NaN}']
NOT_AN_OBJECT = [b"[1, 2]", b"42", b'"text"', b"null", b"true"]


def plant(store: durastate.Store, key: str, payload: bytes, revision: int = 1) -> None:
    """Store ``payload`` at ``key`` bypassing the facet (as another program might)."""
    engine = store.engine
    engine.execute(
        engine.sql("INSERT INTO {p}documents (key, payload, revision) VALUES (?, ?, ?)"),
        (key, payload, revision),
    )


def snapshot(docs: Documents) -> list[tuple[str, bytes, int]]:
    """Every stored document, raw: what a rejected call must leave alone."""
    out = []
    for key in docs.iter_keys():
        raw = docs.read_raw(key)
        assert raw is not None
        out.append((key, raw.payload, raw.revision))
    return out


def size_of(data: dict[str, Any]) -> int:
    return len(orjson.dumps(data))


# -- reads and writes -----------------------------------------------------------


class TestDocumentsReadWrite:
    def test_read_of_absent_key_is_none(self, store: durastate.Store) -> None:
        assert store.documents.read("missing") is None
        assert store.documents.read_raw("missing") is None

    def test_write_then_read_returns_data_and_revision_one(self, store: durastate.Store) -> None:
        data = {"step": 3, "name": "ünïcødé ✓ 𝄞", "nested": {"list": [1, 2.5, None, True, False, "x"]}}
        assert store.documents.write("run/1", data) == 1
        assert store.documents.read("run/1") == Document(data, 1)

    def test_every_write_bumps_the_revision(self, store: durastate.Store) -> None:
        revisions = [store.documents.write("k", {"n": i}) for i in range(5)]
        assert revisions == list(range(1, 6))
        assert store.documents.read("k") == Document({"n": 4}, 5)

    def test_rewriting_the_same_content_still_bumps_the_revision(self, store: durastate.Store) -> None:
        store.documents.write("k", {"same": 1})
        assert store.documents.write("k", {"same": 1}) == 2

    def test_keys_are_independent(self, store: durastate.Store) -> None:
        store.documents.write("a", {"v": "a"})
        store.documents.write("a/", {"v": "a/"})
        store.documents.write("", {"v": "empty"})
        assert store.documents.read("a") == Document({"v": "a"}, 1)
        assert store.documents.read("a/") == Document({"v": "a/"}, 1)
        assert store.documents.read("") == Document({"v": "empty"}, 1)

    def test_payload_is_stored_as_compact_json_bytes(self, store: durastate.Store) -> None:
        data = {"b": [1, {"c": "d"}], "a": "ü"}
        store.documents.write("k", data)
        assert store.documents.read_raw("k") == RawDocument(orjson.dumps(data), 1)

    def test_values_round_trip_exactly(self, store: durastate.Store) -> None:
        data = {
            "int64_min": -(2**63),
            "int64_max": 2**63 - 1,
            "float": 0.1,
            "tiny": 5e-324,
            "big": 1.7976931348623157e308,
            "neg_zero": -0.0,
            "nul_in_string": "a\x00b",
            "astral": "\U0010ffff",
            "empty": {},
            "empty_list": [],
            "tuple_becomes_list": (1, 2),
        }
        store.documents.write("k", data)
        got = store.documents.read("k")
        assert got is not None
        expected = dict(data, tuple_becomes_list=[1, 2])
        assert got.data == expected
        assert repr(got.data["float"]) == "0.1"

    def test_dict_subclass_is_accepted(self, store: durastate.Store) -> None:
        class Sub(dict[str, Any]):
            pass

        store.documents.write("k", Sub(a=1))
        assert store.documents.read("k") == Document({"a": 1}, 1)

    def test_large_document_round_trips(self, store: durastate.Store) -> None:
        data = {f"field-{i}": "x" * 1000 for i in range(4000)}  # ~4 MB
        store.documents.write("big", data)
        assert store.documents.read("big") == Document(data, 1)
        info = store.documents.describe("big")
        assert info == DocumentInfo("big", 1, size_of(data))

    def test_key_at_the_size_limit_works(self, store: durastate.Store) -> None:
        key = "é" * (MAX_KEY_SIZE // 2)  # 2 bytes each: exactly the limit
        assert len(key.encode()) == MAX_KEY_SIZE
        store.documents.write(key, {"v": 1})
        assert store.documents.read(key) == Document({"v": 1}, 1)
        assert list(store.documents.iter_keys()) == [key]
        # Its backup key would be too long: refused, nothing changes.
        with pytest.raises(InvalidRequest, match="backup"):
            store.documents.clear(key)
        assert store.documents.read(key) == Document({"v": 1}, 1)
        assert list(store.documents.iter_keys()) == [key]

    def test_long_key_with_room_for_the_backup_suffix_can_be_cleared(self, store: durastate.Store) -> None:
        key = "é" * ((MAX_KEY_SIZE - 4) // 2)  # "key.bak" is exactly the limit
        store.documents.write(key, {"v": 1})
        assert store.documents.clear(key) == key + ".bak"
        assert store.documents.read(key + ".bak") == Document({"v": 1}, 1)
        store.documents.write(key, {"v": 2})
        with pytest.raises(InvalidRequest, match="backup"):
            store.documents.clear(key)  # "key.bak.1" would pass the limit
        assert store.documents.read(key) == Document({"v": 2}, 1)

    def test_delete(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        assert store.documents.delete("k") is True
        assert store.documents.read("k") is None
        assert store.documents.delete("k") is False

    def test_a_recreated_key_starts_again_at_revision_one(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        store.documents.write("k", {"v": 2})
        store.documents.delete("k")
        assert store.documents.write("k", {"v": 3}) == 1

    def test_documents_survive_reopening(self, shared_url: str, open_shared: Callable[..., durastate.Store]) -> None:
        with open_shared() as first:
            first.documents.write("k", {"v": 1})
            first.documents.write("k", {"v": 2})
        with open_shared() as second:
            assert second.documents.read("k") == Document({"v": 2}, 2)


# -- compare and swap --------------------------------------------------------


class TestDocumentsCAS:
    def test_matching_expect_writes_and_bumps(self, store: durastate.Store) -> None:
        rev = store.documents.write("k", {"v": 1})
        assert store.documents.write("k", {"v": 2}, expect=rev) == rev + 1
        assert store.documents.read("k") == Document({"v": 2}, rev + 1)

    def test_stale_expect_is_refused_and_changes_nothing(self, store: durastate.Store) -> None:
        rev = store.documents.write("k", {"v": 1})
        store.documents.write("k", {"v": 2})
        with pytest.raises(Conflict):
            store.documents.write("k", {"v": "lost"}, expect=rev)
        assert store.documents.read("k") == Document({"v": 2}, rev + 1)

    def test_expect_on_an_absent_key_is_refused(self, store: durastate.Store) -> None:
        with pytest.raises(Conflict):
            store.documents.write("k", {"v": 1}, expect=1)
        assert store.documents.read("k") is None

    def test_expect_zero_creates_an_absent_key(self, store: durastate.Store) -> None:
        assert store.documents.write("k", {"v": 1}, expect=0) == 1
        assert store.documents.read("k") == Document({"v": 1}, 1)

    def test_expect_zero_on_an_existing_key_is_refused(self, store: durastate.Store) -> None:
        store.documents.write("k", {"v": 1})
        with pytest.raises(Conflict):
            store.documents.write("k", {"v": "second"}, expect=0)
        assert store.documents.read("k") == Document({"v": 1}, 1)

    def test_delete_with_expect(self, store: durastate.Store) -> None:
        rev = store.documents.write("k", {"v": 1})
        assert store.documents.delete("k", expect=rev + 1) is False
        assert store.documents.read("k") == Document({"v": 1}, rev)
        assert store.documents.delete("k", expect=rev) is True
        assert store.documents.read("k") is None

    def test_concurrent_cas_loops_in_threads_are_exact(self, store: durastate.Store) -> None:
        threads, rounds = 4, 25
        store.documents.write("n", {"n": 0})
        barrier = threading.Barrier(threads)
        errors: list[BaseException] = []

        def work() -> None:
            try:
                barrier.wait(30)
                for _ in range(rounds):
                    cas_increment(store.documents, "n")
            except BaseException as exc:  # reported below
                errors.append(exc)

        run_threads(work, threads)
        assert errors == []
        got = store.documents.read("n")
        assert got is not None
        assert got.data["n"] == threads * rounds
        assert got.revision == threads * rounds + 1


def cas_increment(docs: Documents, key: str) -> int:
    """Add 1 to ``docs[key]["n"]`` with a CAS retry loop; return the conflicts met."""
    conflicts = 0
    while True:
        doc = docs.read(key)
        assert doc is not None
        try:
            docs.write(key, {"n": doc.data["n"] + 1}, expect=doc.revision)
            return conflicts
        except Conflict:
            conflicts += 1


def locked_increment(docs: Documents, *keys: str) -> None:
    """Add 1 to ``docs[k]["n"]`` for each key, read-modify-write under ``lock(*keys)``."""
    with docs.lock(*keys):
        for key in keys:
            doc = docs.read(key)
            n = 0 if doc is None else doc.data["n"]
            docs.write(key, {"n": n + 1})


def run_threads(target: Callable[[], None], count: int, timeout: float = 60.0) -> None:
    threads = [threading.Thread(target=target, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread hung (deadlock?)"


# -- the lock ----------------------------------------------------------------


class TestDocumentsLock:
    def test_lock_commits_everything_at_the_end(self, store: durastate.Store) -> None:
        with store.documents.lock("a", "b"):
            store.documents.write("a", {"v": 1})
            store.documents.write("b", {"v": 2})
            assert store.documents.read("a") == Document({"v": 1}, 1)
        assert store.documents.read("b") == Document({"v": 2}, 1)

    def test_an_exception_rolls_back_everything_in_the_lock(self, store: durastate.Store) -> None:
        store.documents.write("a", {"v": 0})
        with pytest.raises(KeyError), store.documents.lock("a", "b"):
            store.documents.write("a", {"v": 1})
            store.documents.write("b", {"v": 1})
            store.kv.put(b"s", b"n", b"k", b"v")
            raise KeyError("boom")
        assert store.documents.read("a") == Document({"v": 0}, 1)
        assert store.documents.read("b") is None
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_lock_is_reentrant_with_more_keys(self, store: durastate.Store) -> None:
        with store.documents.lock("a"):
            store.documents.write("a", {"v": 1})
            with store.documents.lock("b", "a"), store.documents.lock("c"):
                store.documents.write("b", {"v": 1})
            store.documents.write("c", {"v": 1})
        assert [store.documents.read(k) for k in "abc"] == [Document({"v": 1}, 1)] * 3

    def test_a_caught_failure_in_a_nested_lock_undoes_only_the_nested_block(self, store: durastate.Store) -> None:
        with store.documents.lock("a"):
            store.documents.write("a", {"v": 1})
            with pytest.raises(KeyError), store.documents.lock("b"):
                store.documents.write("b", {"v": 1})
                raise KeyError("inner")
            store.documents.write("c", {"v": 1})
        assert store.documents.read("a") == Document({"v": 1}, 1)
        assert store.documents.read("b") is None
        assert store.documents.read("c") == Document({"v": 1}, 1)

    def test_nested_lock_takes_no_second_lock(self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch) -> None:
        engine = store.engine
        taken: list[str] = []
        real_lock = engine.lock

        def spy(name: str) -> None:
            taken.append(name)
            real_lock(name)

        monkeypatch.setattr(engine, "lock", spy)
        with store.documents.lock("a", "b"):
            store.documents.write("a", {"v": 1})
            with store.documents.lock("b", "c", "a"):
                store.documents.write("c", {"v": 1})
                store.documents.clear("c")
        assert taken == ["documents"]

    def test_lock_excludes_other_holders_whatever_keys_they_name(self, open_store: Any, store_url: str) -> None:
        if store_url == "memory:":
            pytest.skip("memory: stores are private to one Store; two Stores are needed here")
        holder = open_store()
        waiter = open_store(busy_timeout=0.3)
        inside = threading.Event()
        release = threading.Event()
        errors: list[BaseException] = []

        def hold() -> None:
            try:
                with holder.documents.lock("a"):
                    holder.documents.write("a", {"v": 1})
                    inside.set()
                    release.wait(30)
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=hold, daemon=True)
        t.start()
        try:
            assert inside.wait(30)
            # Disjoint keys: still the one lock, so the waiter times out.
            with pytest.raises(StoreUnavailable), waiter.documents.lock("zzz"):
                pass
        finally:
            release.set()
            t.join(30)
        assert errors == []
        with waiter.documents.lock("zzz"):
            waiter.documents.write("zzz", {"v": 1})
        assert waiter.documents.read("a") == Document({"v": 1}, 1)

    def test_locked_read_modify_write_in_threads_is_exact(self, store: durastate.Store) -> None:
        threads, rounds = 4, 20
        barrier = threading.Barrier(threads)
        errors: list[BaseException] = []

        def work() -> None:
            try:
                barrier.wait(30)
                for _ in range(rounds):
                    locked_increment(store.documents, "n")
            except BaseException as exc:
                errors.append(exc)

        run_threads(work, threads)
        assert errors == []
        assert store.documents.read("n") == Document({"n": threads * rounds}, threads * rounds)

    def test_opposite_order_nested_locks_in_threads_never_deadlock_or_fail(self, store: durastate.Store) -> None:
        rounds = 25
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def work(first: str, second: str) -> None:
            try:
                barrier.wait(30)
                for _ in range(rounds):
                    with store.documents.lock(first):
                        locked_increment(store.documents, first)
                        with store.documents.lock(second):
                            locked_increment(store.documents, second, first)
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=work, args=("a", "b"), daemon=True),
            threading.Thread(target=work, args=("b", "a"), daemon=True),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "deadlock: a thread never finished"
        assert errors == []
        for key in "ab":
            doc = store.documents.read(key)
            assert doc is not None
            assert doc.data["n"] == 3 * rounds  # each round: first +2, second +1

    def test_opposite_order_writes_in_plain_transactions_never_deadlock(self, store: durastate.Store) -> None:
        # Without lock(): on PostgreSQL, row locks taken in opposite orders
        # would deadlock; every document write inside a transaction takes the
        # facet lock first, so they serialise instead.
        rounds = 25
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def work(first: str, second: str) -> None:
            try:
                barrier.wait(30)
                for i in range(rounds):
                    with store.transaction():
                        store.documents.write(first, {"i": i})
                        store.documents.write(second, {"i": i})
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=work, args=("a", "b"), daemon=True),
            threading.Thread(target=work, args=("b", "a"), daemon=True),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "deadlock: a thread never finished"
        assert errors == []
        for key in "ab":
            doc = store.documents.read(key)
            assert doc is not None
            assert doc.revision == 2 * rounds

    def test_lock_validates_its_keys_before_taking_anything(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest), store.documents.lock("a", b"bytes"):  # type: ignore[arg-type]
            pytest.fail("entered a lock with an invalid key")
        assert not store.engine.in_transaction()


# -- clear -------------------------------------------------------------------


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


# -- unreadable payloads --------------------------------------------------------


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


# -- describe and list ----------------------------------------------------------


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


# -- transactions ----------------------------------------------------------------


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


# -- bad input -----------------------------------------------------------------


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


# -- model -----------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)
DOCS = st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4)
MODEL_KEYS = st.sampled_from(["a", "a/", "a/b", "a/c", "b", "a.bak", "é", ""])
MODEL_PREFIXES = st.sampled_from(["", "a", "a/", "a.", "b", "é", "z"])


class DocumentsMachine(RuleBasedStateMachine):
    """``store.documents`` against a dict ``key -> (payload bytes, revision)``."""

    def __init__(self, docs: Documents) -> None:
        super().__init__()
        self.docs = docs
        self.model: dict[str, tuple[bytes, int]] = {}
        for key in list(docs.iter_keys()):
            docs.delete(key)

    @rule(key=MODEL_KEYS, data=DOCS)
    def write(self, key: str, data: dict[str, Any]) -> None:
        rev = self.docs.write(key, data)
        expected = self.model[key][1] + 1 if key in self.model else 1
        assert rev == expected
        self.model[key] = (orjson.dumps(data), rev)

    @rule(key=MODEL_KEYS, data=DOCS, stale=st.booleans())
    def write_cas(self, key: str, data: dict[str, Any], stale: bool) -> None:
        current = self.model.get(key, (b"", 0))[1]
        expect = current + 1 if stale else current
        if expect == 0 or not stale:
            # expect=0 is create-only: it works exactly when the key is absent.
            rev = self.docs.write(key, data, expect=expect)
            assert rev == current + 1
            self.model[key] = (orjson.dumps(data), rev)
        else:
            with pytest.raises(Conflict):
                self.docs.write(key, data, expect=expect)

    @rule(key=MODEL_KEYS, data=DOCS)
    def create_only(self, key: str, data: dict[str, Any]) -> None:
        if key in self.model:
            with pytest.raises(Conflict):
                self.docs.write(key, data, expect=0)
        else:
            assert self.docs.write(key, data, expect=0) == 1
            self.model[key] = (orjson.dumps(data), 1)

    @rule(key=MODEL_KEYS)
    def delete(self, key: str) -> None:
        assert self.docs.delete(key) == (key in self.model)
        self.model.pop(key, None)

    @precondition(lambda self: bool(self.model))
    @rule(key=MODEL_KEYS)
    def clear(self, key: str) -> None:
        got = self.docs.clear(key)
        if key not in self.model:
            assert got is None
            return
        backup, n = key + ".bak", 1
        while backup in self.model:
            backup, n = f"{key}.bak.{n}", n + 1
        assert got == backup
        self.model[backup] = (self.model.pop(key)[0], 1)

    @rule(key=MODEL_KEYS)
    def read(self, key: str) -> None:
        got = self.docs.read(key)
        if key not in self.model:
            assert got is None
        else:
            payload, rev = self.model[key]
            assert got == Document(orjson.loads(payload), rev)

    @rule(prefix=MODEL_PREFIXES)
    def describe_prefix(self, prefix: str) -> None:
        inside = [p for k, (p, _) in self.model.items() if k.startswith(prefix)]
        assert self.docs.describe(prefix=prefix) == PrefixInfo(len(inside), sum(map(len, inside)))

    @invariant()
    def listing_matches(self) -> None:
        items = self.docs.list().items
        assert items == [DocumentInfo(k, self.model[k][1], len(self.model[k][0])) for k in sorted(self.model)]


class TestDocumentsModel:
    def test_documents_behave_like_the_model(self, store: durastate.Store) -> None:
        factory: Any = lambda: DocumentsMachine(store.documents)  # noqa: E731
        run_state_machine_as_test(
            factory,
            settings=settings(max_examples=25, stateful_step_count=25, deadline=None),
        )


# -- several processes -------------------------------------------------------------


def mp_locked_increments(url: str, rounds: int, barrier: Any) -> None:
    with durastate.open(url, busy_timeout=BUSY_TIMEOUT) as store:
        barrier.wait(30)
        for _ in range(rounds):
            locked_increment(store.documents, "counter")


def mp_cas_increments(url: str, rounds: int, barrier: Any) -> int:
    conflicts = 0
    with durastate.open(url, busy_timeout=BUSY_TIMEOUT) as store:
        barrier.wait(30)
        for _ in range(rounds):
            conflicts += cas_increment(store.documents, "counter")
    return conflicts


def mp_opposite_locks(url: str, first: str, second: str, rounds: int, barrier: Any) -> None:
    with durastate.open(url, busy_timeout=BUSY_TIMEOUT) as store:
        docs = store.documents
        barrier.wait(30)
        for _ in range(rounds):
            with docs.lock(first):
                locked_increment(docs, first)
                with docs.lock(second, first):
                    locked_increment(docs, second)


@pytest.mark.multiprocess
class TestDocumentsAcrossProcesses:
    PROCESSES = 3
    ROUNDS = 30

    def test_locked_read_modify_write_from_processes_is_exact(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        open_shared().close()  # create and migrate before the race
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(self.PROCESSES)
            for i in range(self.PROCESSES):
                workers.start(f"locker-{i}", mp_locked_increments, shared_url, self.ROUNDS, barrier)
            workers.results()
        total = self.PROCESSES * self.ROUNDS
        with open_shared() as store:
            assert store.documents.read("counter") == Document({"n": total}, total)

    def test_cas_retry_loops_from_processes_are_exact(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        with open_shared() as store:
            store.documents.write("counter", {"n": 0})
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(self.PROCESSES)
            for i in range(self.PROCESSES):
                workers.start(f"cas-{i}", mp_cas_increments, shared_url, self.ROUNDS, barrier)
            workers.results()
        total = self.PROCESSES * self.ROUNDS
        with open_shared() as store:
            assert store.documents.read("counter") == Document({"n": total}, total + 1)

    def test_opposite_order_nested_locks_from_processes_never_deadlock_or_fail(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        open_shared().close()
        rounds = 20
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(2)
            workers.start("ab", mp_opposite_locks, shared_url, "a", "b", rounds, barrier)
            workers.start("ba", mp_opposite_locks, shared_url, "b", "a", rounds, barrier)
            workers.results()
        with open_shared() as store:
            for key in "ab":
                doc = store.documents.read(key)
                assert doc is not None
                assert doc.data["n"] == 2 * rounds
