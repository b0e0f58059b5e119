"""Conformance for ``store.documents``: read and write, compare-and-set, the lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import durastate
from durastate import Conflict, InvalidRequest, StoreUnavailable
from durastate.documents import (
    MAX_KEY_SIZE,
    Document,
    DocumentInfo,
    RawDocument,
)

from .common import cas_increment, locked_increment, run_threads, size_of

__all__ = ["TestDocumentsCAS", "TestDocumentsLock", "TestDocumentsReadWrite"]


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

    def test_integers_either_side_of_53_bits_are_stored_alike(self, store: durastate.Store) -> None:
        # The write encodes with a 53-bit limit first and again without it
        # when a wider integer is there: the bytes must be the same either way.
        narrow = {"a": 2**53 - 1, "b": -(2**53) + 1, "n": None, "f": 0.5}
        wide = {"a": 2**53, "b": -(2**53), "n": None, "f": 0.5, "ns": 1_733_400_000_123_456_789}
        for key, data in (("narrow", narrow), ("wide", wide)):
            store.documents.write(key, data)
            assert store.documents.read_raw(key) == RawDocument(orjson.dumps(data), 1)
            assert store.documents.read(key) == Document(data, 1)

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

    def test_lock_excludes_other_holders_whatever_keys_they_name(self, open_store: Any) -> None:
        holder = open_store()
        if holder.engine.capabilities.in_memory:
            pytest.skip("in-memory stores are private to one Store; two Stores are needed here")
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
