"""Conformance for ``store.kv``: values (get/put, key sizes, isolation, scans and paging, drain,
delete, clear, expiry).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import InvalidRequest, StoreUnavailable
from durastate.kv import KEY_CHUNK, PAGE_SIZE, PRUNE_BATCH, PRUNE_EVERY
from durastate.testing.clock import FakeClock

from .common import ODD_KEYS, page_crossing_keys, value_of

__all__ = [
    "TestKVClear",
    "TestKVDelete",
    "TestKVDrain",
    "TestKVGetPut",
    "TestKVIsolation",
    "TestKVKeySizeOption",
    "TestKVScan",
    "TestKVScanPaging",
    "TestKVTTL",
]


class TestKVGetPut:
    def test_get_of_absent_key_is_none(self, store: durastate.Store) -> None:
        assert store.kv.get(b"s", b"n", b"missing") is None

    def test_put_then_get_returns_the_value(self, store: durastate.Store) -> None:
        every_byte = bytes(range(256))
        store.kv.put(b"s", b"n", b"k", every_byte)
        got = store.kv.get(b"s", b"n", b"k")
        assert got == every_byte
        assert type(got) is bytes

    def test_put_replaces_the_previous_value(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"k", b"first")
        store.kv.put(b"s", b"n", b"k", b"second")
        assert store.kv.get(b"s", b"n", b"k") == b"second"

    def test_empty_value_is_stored_not_absent(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"k", b"")
        assert store.kv.get(b"s", b"n", b"k") == b""
        assert list(store.kv.scan(b"s", b"n")) == [(b"k", b"")]

    def test_empty_scope_ns_and_key_are_valid_addresses(self, store: durastate.Store) -> None:
        store.kv.put(b"", b"", b"", b"root")
        assert store.kv.get(b"", b"", b"") == b"root"
        assert store.kv.get(b"", b"", b"\x00") is None

    def test_bytes_like_arguments_are_accepted_and_read_back_as_bytes(self, store: durastate.Store) -> None:
        bytes_like: list[Any] = [bytearray(b"s"), memoryview(b"n"), bytearray(b"k"), memoryview(b"value")]
        store.kv.put(*bytes_like)
        got = store.kv.get(b"s", b"n", b"k")
        assert got == b"value"
        assert type(got) is bytes

    def test_get_many_is_parallel_to_keys_with_misses_and_duplicates(self, store: durastate.Store) -> None:
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"c", b"3")])
        keys = [b"c", b"missing", b"a", b"c", b"b", b"a"]
        expected = {b"a": b"1", b"c": b"3"}
        assert store.kv.get_many(b"s", b"n", keys) == [expected.get(k) for k in keys]

    def test_get_many_of_no_keys_is_empty(self, store: durastate.Store) -> None:
        assert store.kv.get_many(b"s", b"n", []) == []

    def test_get_many_over_the_statement_chunk_size(self, store: durastate.Store) -> None:
        stored = page_crossing_keys(3 * KEY_CHUNK)
        store.kv.put_many(b"s", b"n", [(k, value_of(k)) for k in stored[::2]])
        # Duplicates spread over several chunks, misses in between.
        keys = stored + stored[: KEY_CHUNK + 5] + [b"absent"]
        present = set(stored[::2])
        expected = [value_of(k) if k in present else None for k in keys]
        assert store.kv.get_many(b"s", b"n", keys) == expected

    def test_put_many_writes_every_pair(self, store: durastate.Store) -> None:
        items = [(k, value_of(k)) for k in page_crossing_keys(1000)]
        store.kv.put_many(b"s", b"n", items)
        assert list(store.kv.scan(b"s", b"n")) == sorted(items)

    def test_put_many_duplicates_last_one_wins(self, store: durastate.Store) -> None:
        store.kv.put_many(b"s", b"n", [(b"k", b"1"), (b"j", b"x"), (b"k", b"2"), (b"k", b"3")])
        assert store.kv.get(b"s", b"n", b"k") == b"3"
        assert store.kv.get(b"s", b"n", b"j") == b"x"

    def test_put_many_takes_lists_and_bytes_likes_from_any_iterable_duplicates_included(
        self, store: durastate.Store
    ) -> None:
        items: list[Any] = [[b"a", b"1"], (bytearray(b"b"), memoryview(b"2")), (b"a", bytearray(b"3")), (b"c", b"4")]
        store.kv.put_many(b"s", b"n", iter(items))
        assert list(store.kv.scan(b"s", b"n")) == [(b"a", b"3"), (b"b", b"2"), (b"c", b"4")]
        store.kv.put_many(b"s", b"n", iter(items[::-1]), if_absent=True)
        more: list[Any] = [(b"d", b"5"), [bytearray(b"d"), b"6"], (b"e", b"7")]
        store.kv.put_many(b"s", b"n", more, if_absent=True)
        assert list(store.kv.scan(b"s", b"n")) == [(b"a", b"3"), (b"b", b"2"), (b"c", b"4"), (b"d", b"5"), (b"e", b"7")]

    def test_put_many_if_absent_keeps_live_values_and_the_first_of_duplicates(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.kv.put(b"s", b"n", b"live", b"old")
        store.kv.put(b"s", b"n", b"expiring", b"old", ttl=1)
        clock.advance(2)
        items = [(b"live", b"new"), (b"expiring", b"new"), (b"fresh", b"first"), (b"fresh", b"second")]
        store.kv.put_many(b"s", b"n", items, if_absent=True)
        assert store.kv.get_many(b"s", b"n", [b"live", b"expiring", b"fresh"]) == [b"old", b"new", b"first"]

    def test_put_many_if_absent_in_a_rolled_back_transaction_writes_nothing(self, store: durastate.Store) -> None:
        with pytest.raises(RuntimeError), store.transaction():
            store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")], if_absent=True)
            raise RuntimeError("roll back")
        assert store.kv.get_many(b"s", b"n", [b"a", b"b"]) == [None, None]

    def test_put_many_if_absent_must_be_a_bool(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="if_absent"):
            store.kv.put_many(b"s", b"n", [(b"a", b"1")], if_absent=1)  # type: ignore[arg-type]
        assert store.kv.get(b"s", b"n", b"a") is None

    def test_put_many_of_nothing_writes_nothing(self, store: durastate.Store) -> None:
        store.kv.put_many(b"s", b"n", [])
        assert list(store.kv.scan(b"s", b"n")) == []

    def test_put_many_with_one_bad_item_writes_nothing(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"a", b"old")
        items: list[Any] = [(b"a", b"new"), (b"b", b"new"), (b"c", "not bytes"), (b"d", b"new")]
        with pytest.raises(InvalidRequest):
            store.kv.put_many(b"s", b"n", items)
        assert list(store.kv.scan(b"s", b"n")) == [(b"a", b"old")]

    def test_put_many_with_one_oversized_item_writes_nothing(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_value_size=8)
        items = [(b"a", b"12345678"), (b"b", b"123456789"), (b"c", b"1")]
        with pytest.raises(InvalidRequest):
            store.kv.put_many(b"s", b"n", items)
        assert list(store.kv.scan(b"s", b"n")) == []

    def test_value_size_limit_is_inclusive(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_value_size=8)
        store.kv.put(b"s", b"n", b"k", b"x" * 8)
        assert store.kv.get(b"s", b"n", b"k") == b"x" * 8
        with pytest.raises(InvalidRequest):
            store.kv.put(b"s", b"n", b"k", b"x" * 9)
        with pytest.raises(InvalidRequest):
            store.kv.append(b"s", b"n", b"k", b"x" * 9)
        assert store.kv.get(b"s", b"n", b"k") == b"x" * 8
        assert list(store.kv.log(b"s", b"n", b"k")) == []

    def test_key_size_limit_counts_scope_ns_and_key(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_key_size=8)
        store.kv.put(b"ss", b"nn", b"kkkk", b"fits")  # 2 + 2 + 4 = 8
        assert store.kv.get(b"ss", b"nn", b"kkkk") == b"fits"
        too_long: list[Callable[[], object]] = [
            lambda: store.kv.put(b"ss", b"nn", b"kkkkk", b"v"),
            lambda: store.kv.put_many(b"ss", b"nn", [(b"k", b"v"), (b"kkkkk", b"v")]),
            lambda: store.kv.append(b"ss", b"nnn", b"kkkk", b"v"),
            lambda: store.kv.incr(b"sss", b"nn", b"kkkk"),
            lambda: store.kv.set_counter(b"ss", b"nn", b"kkkkk", 1),
        ]
        for call in too_long:
            with pytest.raises(InvalidRequest):
                call()
        assert list(store.kv.scan(b"ss", b"nn")) == [(b"kkkk", b"fits")]
        assert list(store.kv.log(b"ss", b"nn", b"kkkk")) == []
        assert store.kv.counter(b"ss", b"nn", b"kkkk") == 0


class TestKVKeySizeOption:
    def test_keys_at_a_large_max_key_size_work_or_the_option_is_refused(
        self, open_store: Callable[..., durastate.Store], store_url: str, request: pytest.FixtureRequest
    ) -> None:
        """``max_key_size`` is a promise: a key that long works, or ``open`` refuses it.

        Incompressible keys are the hard case for an engine whose index
        entries are bounded (PostgreSQL's btree: about 2.7 KB).
        """
        size = 6000
        try:
            store = open_store(max_key_size=size)
        except InvalidRequest:
            return  # refused up front: the promise is kept
        key = os.urandom(size - 2)
        store.kv.put(b"s", b"n", key, b"v")
        store.kv.append(b"s", b"n", key, b"e")
        store.kv.incr(b"s", b"n", key)
        assert store.kv.get(b"s", b"n", key) == b"v"

    def test_none_means_the_engines_own_limit_and_it_holds(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_key_size=None)
        limit = store.kv.max_key_size
        key = os.urandom(min(limit, 100_000) - 2)  # scope + ns take the other 2 bytes
        store.kv.put(b"s", b"n", key, b"v")
        store.kv.append(b"s", b"n", key, b"e")
        store.kv.incr(b"s", b"n", key)
        assert store.kv.get(b"s", b"n", key) == b"v"
        if limit <= 100_000:  # an engine with an index bound: one byte more is refused up front
            with pytest.raises(InvalidRequest):
                store.kv.put(b"s", b"n", key + b".", b"v")


class TestKVIsolation:
    def test_namespaces_do_not_see_each_other(self, store: durastate.Store) -> None:
        # b"n" is a prefix of b"n\x00" and of b"nn": no prefix leaks.
        for ns in (b"n", b"n\x00", b"nn", b""):
            store.kv.put(b"s", ns, b"k", b"in " + ns)
        for ns in (b"n", b"n\x00", b"nn", b""):
            assert store.kv.get(b"s", ns, b"k") == b"in " + ns
            assert list(store.kv.scan(b"s", ns)) == [(b"k", b"in " + ns)]

    def test_scopes_do_not_see_each_other(self, store: durastate.Store) -> None:
        for scope in (b"s", b"s\x00", b"ss"):
            store.kv.put(scope, b"n", b"k", b"of " + scope)
            store.kv.append(scope, b"n", b"k", b"log of " + scope)
            store.kv.incr(scope, b"n", b"k", len(scope))
        for scope in (b"s", b"s\x00", b"ss"):
            assert list(store.kv.scan(scope, b"n")) == [(b"k", b"of " + scope)]
            assert [v for _, v in store.kv.log(scope, b"n", b"k")] == [b"log of " + scope]
            assert store.kv.counter(scope, b"n", b"k") == len(scope)

    def test_values_logs_and_counters_at_one_address_are_independent(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"k", b"value")
        store.kv.append(b"s", b"n", b"k", b"entry")
        store.kv.incr(b"s", b"n", b"k", 7)
        store.kv.delete(b"s", b"n", [b"k"])
        assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"entry"]
        assert store.kv.counter(b"s", b"n", b"k") == 7
        store.kv.delete_counter(b"s", b"n", b"k")
        assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"entry"]


class TestKVScan:
    @pytest.fixture
    def odd(self, store: durastate.Store) -> durastate.Store:
        store.kv.put_many(b"s", b"n", [(k, value_of(k)) for k in ODD_KEYS])
        return store

    @staticmethod
    def expected(start: bytes | None = None, end: bytes | None = None, reverse: bool = False) -> list[bytes]:
        keys = sorted(k for k in ODD_KEYS if (start is None or k >= start) and (end is None or k < end))
        return keys[::-1] if reverse else keys

    def test_keys_come_in_unsigned_byte_order(self, odd: durastate.Store) -> None:
        assert [k for k, _ in odd.kv.scan(b"s", b"n")] == self.expected()

    def test_pairs_carry_their_values(self, odd: durastate.Store) -> None:
        assert list(odd.kv.scan(b"s", b"n")) == [(k, value_of(k)) for k in self.expected()]

    def test_reverse_is_descending_unsigned_order(self, odd: durastate.Store) -> None:
        assert [k for k, _ in odd.kv.scan(b"s", b"n", reverse=True)] == self.expected(reverse=True)

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize(
        ("start", "end"),
        [
            (b"\x00", b"\x80"),  # both bounds are stored keys
            (b"\x00\x01", b"\x7f\xfe"),  # neither bound is stored
            (b"", b"\x00"),  # only the empty key
            (b"a", b"a\x00"),  # exactly one key, its tightest successor excluded
            (b"\x7f", b"\xff\xff\xff"),
        ],
    )
    def test_range_is_half_open(self, odd: durastate.Store, start: bytes, end: bytes, reverse: bool) -> None:
        got = [k for k, _ in odd.kv.scan(b"s", b"n", start=start, end=end, reverse=reverse)]
        assert got == self.expected(start, end, reverse)

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize("bound", [b"", b"\x00", b"\x7f\xff", b"\x80", b"a", b"\xff\xff\xff"])
    def test_open_end(self, odd: durastate.Store, bound: bytes, reverse: bool) -> None:
        got = [k for k, _ in odd.kv.scan(b"s", b"n", start=bound, reverse=reverse)]
        assert got == self.expected(start=bound, reverse=reverse)

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize("bound", [b"", b"\x00", b"\x7f\xff", b"\x80", b"a", b"\xff\xff\xff"])
    def test_open_start(self, odd: durastate.Store, bound: bytes, reverse: bool) -> None:
        got = [k for k, _ in odd.kv.scan(b"s", b"n", end=bound, reverse=reverse)]
        assert got == self.expected(end=bound, reverse=reverse)

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize(("start", "end"), [(b"a", b"a"), (b"b", b"a"), (b"\x80", b"\x7f"), (b"", b"")])
    def test_start_at_or_after_end_gives_nothing(
        self, odd: durastate.Store, start: bytes, end: bytes, reverse: bool
    ) -> None:
        assert list(odd.kv.scan(b"s", b"n", start=start, end=end, reverse=reverse)) == []

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize("limit", [0, 1, 3, len(ODD_KEYS) - 1, len(ODD_KEYS), len(ODD_KEYS) + 10])
    def test_limit_caps_from_the_scan_start(self, odd: durastate.Store, limit: int, reverse: bool) -> None:
        got = [k for k, _ in odd.kv.scan(b"s", b"n", reverse=reverse, limit=limit)]
        assert got == self.expected(reverse=reverse)[:limit]

    def test_limit_applies_inside_the_range(self, odd: durastate.Store) -> None:
        got = [k for k, _ in odd.kv.scan(b"s", b"n", start=b"\x00\x00", end=b"b", reverse=True, limit=4)]
        assert got == self.expected(b"\x00\x00", b"b", reverse=True)[:4]

    def test_scan_of_an_empty_namespace_is_empty(self, store: durastate.Store) -> None:
        assert list(store.kv.scan(b"s", b"nothing here")) == []


class TestKVScanPaging:
    """Scans over more than one page (``PAGE_SIZE`` rows) are streamed."""

    COUNT = 2000

    @pytest.fixture
    def big(self, store: durastate.Store) -> tuple[durastate.Store, list[bytes]]:
        keys = page_crossing_keys(self.COUNT)
        store.kv.put_many(b"s", b"n", [(k, value_of(k)) for k in keys])
        return store, keys

    @pytest.mark.parametrize("reverse", [False, True])
    def test_whole_namespace_in_order_without_gaps_or_repeats(
        self, big: tuple[durastate.Store, list[bytes]], reverse: bool
    ) -> None:
        store, keys = big
        expected = keys[::-1] if reverse else keys
        assert list(store.kv.scan(b"s", b"n", reverse=reverse)) == [(k, value_of(k)) for k in expected]

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize(
        "limit", [PAGE_SIZE - 1, PAGE_SIZE, PAGE_SIZE + 1, 2 * PAGE_SIZE, 2 * PAGE_SIZE + 1, COUNT - 1, COUNT, 5000]
    )
    def test_limits_across_page_boundaries(
        self, big: tuple[durastate.Store, list[bytes]], limit: int, reverse: bool
    ) -> None:
        store, keys = big
        expected = keys[::-1] if reverse else keys
        assert [k for k, _ in store.kv.scan(b"s", b"n", reverse=reverse, limit=limit)] == expected[:limit]

    @pytest.mark.parametrize("reverse", [False, True])
    def test_bounded_range_across_pages(self, big: tuple[durastate.Store, list[bytes]], reverse: bool) -> None:
        store, keys = big
        start, end = keys[101], keys[1801]
        inside = [k for k in keys if start <= k < end]
        expected = inside[::-1] if reverse else inside
        got = [k for k, _ in store.kv.scan(b"s", b"n", start=start, end=end, reverse=reverse, limit=1500)]
        assert got == expected[:1500]

    @pytest.mark.parametrize("reverse", [False, True])
    def test_a_large_scan_is_read_lazily(self, big: tuple[durastate.Store, list[bytes]], reverse: bool) -> None:
        """Rows are fetched page by page as the caller iterates.

        Deleting everything after the first row is consumed leaves the
        iterator with at most what it already fetched: a scan that loaded
        the whole namespace up front would still yield all of it.
        """
        store, keys = big
        rows = store.kv.scan(b"s", b"n", reverse=reverse)
        first = next(rows)
        assert first[0] == (keys[-1] if reverse else keys[0])
        assert store.kv.delete(b"s", b"n", all=True) == self.COUNT
        assert len(list(rows)) < self.COUNT - 1

    def test_rows_written_while_iterating_are_never_repeated(self, big: tuple[durastate.Store, list[bytes]]) -> None:
        """Not a snapshot, but each key at most once, in order, none behind the cursor."""
        store, keys = big
        rows = store.kv.scan(b"s", b"n")
        seen = [next(rows)[0] for _ in range(PAGE_SIZE + 10)]
        behind = seen[3] + b"\x01"  # sorts between two keys already yielded
        ahead = keys[-1] + b"\x01"  # sorts after every stored key
        store.kv.put(b"s", b"n", behind, b"late")
        store.kv.put(b"s", b"n", ahead, b"late")
        seen.extend(k for k, _ in rows)
        assert behind not in seen
        assert [k for k in seen if k != ahead] == keys
        assert seen == sorted(set(seen))


class TestKVDrain:
    def test_drain_returns_every_pair_sorted_and_empties_the_namespace(self, store: durastate.Store) -> None:
        store.kv.put_many(b"s", b"n", [(k, value_of(k)) for k in reversed(ODD_KEYS)])
        assert store.kv.drain(b"s", b"n") == [(k, value_of(k)) for k in sorted(ODD_KEYS)]
        assert list(store.kv.scan(b"s", b"n")) == []
        assert store.kv.drain(b"s", b"n") == []

    def test_drain_touches_only_its_namespace(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"k", b"drained")
        store.kv.put(b"s", b"n\x00", b"k", b"other ns")
        store.kv.put(b"t", b"n", b"k", b"other scope")
        store.kv.append(b"s", b"n", b"k", b"log entry")
        store.kv.incr(b"s", b"n", b"k")
        assert store.kv.drain(b"s", b"n") == [(b"k", b"drained")]
        assert store.kv.get(b"s", b"n\x00", b"k") == b"other ns"
        assert store.kv.get(b"t", b"n", b"k") == b"other scope"
        assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"log entry"]
        assert store.kv.counter(b"s", b"n", b"k") == 1

    def test_drain_of_more_than_a_page(self, store: durastate.Store) -> None:
        keys = page_crossing_keys(PAGE_SIZE * 2 + 3)
        store.kv.put_many(b"s", b"n", [(k, value_of(k)) for k in reversed(keys)])
        assert store.kv.drain(b"s", b"n") == [(k, value_of(k)) for k in keys]

    def test_concurrent_writes_are_drained_exactly_once(self, store: durastate.Store) -> None:
        """Each pair written while draining lands in exactly one drain."""
        keys = [i.to_bytes(4, "big") for i in range(300)]
        started = threading.Event()
        failure: list[BaseException] = []

        def writer() -> None:
            try:
                started.set()
                for key in keys:
                    store.kv.put(b"s", b"n", key, value_of(key))
            except BaseException as exc:  # reported in the main thread
                failure.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        started.wait(timeout=30)
        drained: list[tuple[bytes, bytes]] = []
        while thread.is_alive():
            drained.extend(store.kv.drain(b"s", b"n"))
        thread.join(timeout=60)
        assert not failure
        drained.extend(store.kv.drain(b"s", b"n"))
        assert sorted(drained) == [(k, value_of(k)) for k in keys]


class TestKVDelete:
    @pytest.fixture
    def odd(self, store: durastate.Store) -> durastate.Store:
        store.kv.put_many(b"s", b"n", [(k, value_of(k)) for k in ODD_KEYS])
        store.kv.put(b"s", b"other", b"a", b"kept")
        store.kv.put(b"t", b"n", b"a", b"kept")
        return store

    @staticmethod
    def remaining(store: durastate.Store) -> list[bytes]:
        return [k for k, _ in store.kv.scan(b"s", b"n")]

    @staticmethod
    def others_intact(store: durastate.Store) -> bool:
        return store.kv.get(b"s", b"other", b"a") == b"kept" and store.kv.get(b"t", b"n", b"a") == b"kept"

    def test_delete_keys_counts_only_existing_rows(self, odd: durastate.Store) -> None:
        victims = [b"\x00", b"\xff", b"missing", b"\x00"]
        assert odd.kv.delete(b"s", b"n", victims) == 2
        assert self.remaining(odd) == sorted(set(ODD_KEYS) - {b"\x00", b"\xff"})
        assert self.others_intact(odd)

    def test_delete_keys_as_keyword(self, odd: durastate.Store) -> None:
        assert odd.kv.delete(b"s", b"n", keys=[b"a"]) == 1
        assert b"a" not in self.remaining(odd)

    def test_delete_of_no_keys_removes_nothing(self, odd: durastate.Store) -> None:
        assert odd.kv.delete(b"s", b"n", []) == 0
        assert self.remaining(odd) == sorted(ODD_KEYS)

    def test_delete_keys_over_the_statement_chunk_size(self, store: durastate.Store) -> None:
        keys = page_crossing_keys(3 * KEY_CHUNK + 7)
        store.kv.put_many(b"s", b"n", [(k, b"v") for k in keys])
        victims = keys[1::2] + [b"missing"] * 3
        assert store.kv.delete(b"s", b"n", victims) == len(keys[1::2])
        assert [k for k, _ in store.kv.scan(b"s", b"n")] == keys[::2]

    @pytest.mark.parametrize(
        ("start", "end"),
        [(b"\x00", b"\x80"), (b"\x00\x01", b"a\x00"), (None, b"\x7f"), (b"\x80", None), (b"b", b"a")],
    )
    def test_delete_range_is_half_open(self, odd: durastate.Store, start: bytes | None, end: bytes | None) -> None:
        doomed = {k for k in ODD_KEYS if (start is None or k >= start) and (end is None or k < end)}
        assert odd.kv.delete(b"s", b"n", start=start, end=end) == len(doomed)
        assert self.remaining(odd) == sorted(set(ODD_KEYS) - doomed)
        assert self.others_intact(odd)

    def test_delete_all_empties_only_the_namespace(self, odd: durastate.Store) -> None:
        assert odd.kv.delete(b"s", b"n", all=True) == len(ODD_KEYS)
        assert self.remaining(odd) == []
        assert self.others_intact(odd)
        assert odd.kv.delete(b"s", b"n", all=True) == 0

    @pytest.mark.parametrize(
        "kwargs",
        [
            pytest.param({}, id="bare"),
            pytest.param({"keys": [b"a"], "start": b"a"}, id="keys+start"),
            pytest.param({"keys": [b"a"], "end": b"b"}, id="keys+end"),
            pytest.param({"keys": [b"a"], "all": True}, id="keys+all"),
            pytest.param({"start": b"a", "all": True}, id="start+all"),
            pytest.param({"end": b"b", "all": True}, id="end+all"),
            pytest.param({"keys": [], "all": True}, id="empty-keys+all"),
        ],
    )
    def test_ambiguous_delete_is_refused_and_removes_nothing(
        self, odd: durastate.Store, kwargs: dict[str, Any]
    ) -> None:
        with pytest.raises(InvalidRequest):
            odd.kv.delete(b"s", b"n", **kwargs)
        assert self.remaining(odd) == sorted(ODD_KEYS)


class TestKVClear:
    def test_clear_wipes_values_logs_and_counters_of_the_scope_and_counts_them(self, store: durastate.Store) -> None:
        values = [(b"n", b"a"), (b"n", b"b"), (b"m", b"a")]
        logs = [(b"n", b"a"), (b"n", b"a"), (b"l", b"x")]
        counters = [(b"n", b"a"), (b"c", b"z")]
        for scope in (b"s", b"t"):
            for ns, key in values:
                store.kv.put(scope, ns, key, b"v")
            for ns, key in logs:
                store.kv.append(scope, ns, key, b"e")
            for ns, key in counters:
                store.kv.incr(scope, ns, key, 3)
        assert store.kv.clear(b"s") == len(values) + len(logs) + len(counters)
        for ns, key in values:
            assert store.kv.get(b"s", ns, key) is None
            assert store.kv.get(b"t", ns, key) == b"v"
        for ns, key in logs:
            assert list(store.kv.log(b"s", ns, key)) == []
            assert list(store.kv.log(b"t", ns, key)) != []
        for ns, key in counters:
            assert store.kv.counter(b"s", ns, key) == 0
            assert store.kv.counter(b"t", ns, key) == 3

    def test_clear_leaves_scopes_that_share_a_prefix(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"k", b"v")
        store.kv.put(b"s\x00", b"n", b"k", b"v")
        store.kv.put(b"ss", b"n", b"k", b"v")
        assert store.kv.clear(b"s") == 1
        assert store.kv.get(b"s\x00", b"n", b"k") == b"v"
        assert store.kv.get(b"ss", b"n", b"k") == b"v"

    def test_clear_of_an_empty_scope_is_zero(self, store: durastate.Store) -> None:
        assert store.kv.clear(b"nobody") == 0

    def test_clear_leaves_queues_alone(self, store: durastate.Store) -> None:
        store.queues.push(b"s", [b"job"])
        store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.clear(b"s") == 1
        assert store.queues.pop(b"s") == b"job"


class TestKVTTL:
    def test_value_is_visible_until_the_deadline(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"k", b"v", ttl=10)
        clock.advance(9)
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        clock.advance(2)
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_expired_value_is_hidden_from_get_many(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"short", b"1", ttl=1)
        store.kv.put(b"s", b"n", b"long", b"2", ttl=100)
        store.kv.put(b"s", b"n", b"forever", b"3")
        clock.advance(2)
        keys = [b"short", b"long", b"forever", b"short"]
        assert store.kv.get_many(b"s", b"n", keys) == [None, b"2", b"3", None]

    @pytest.mark.parametrize("reverse", [False, True])
    def test_expired_value_is_hidden_from_scan(self, store: durastate.Store, clock: FakeClock, reverse: bool) -> None:
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"c", b"3")])
        store.kv.put(b"s", b"n", b"b", b"2", ttl=1)
        clock.advance(2)
        got = list(store.kv.scan(b"s", b"n", reverse=reverse))
        assert got == sorted([(b"a", b"1"), (b"c", b"3")], reverse=reverse)
        assert list(store.kv.scan(b"s", b"n", start=b"b", end=b"c")) == []
        assert list(store.kv.scan(b"s", b"n", limit=1)) == [(b"a", b"1")]

    @pytest.mark.parametrize("reverse", [False, True])
    def test_scan_pages_skip_expired_rows(self, store: durastate.Store, clock: FakeClock, reverse: bool) -> None:
        keys = page_crossing_keys(3 * PAGE_SIZE)
        store.kv.put_many(b"s", b"n", [(k, b"live") for k in keys[::2]])
        store.kv.put_many(b"s", b"n", [(k, b"dying") for k in keys[1::2]], ttl=5)
        clock.advance(6)
        live = keys[::2][::-1] if reverse else keys[::2]
        assert [k for k, _ in store.kv.scan(b"s", b"n", reverse=reverse)] == live
        got = [k for k, _ in store.kv.scan(b"s", b"n", reverse=reverse, limit=PAGE_SIZE + 7)]
        assert got == live[: PAGE_SIZE + 7]

    def test_expired_value_is_not_drained_but_is_removed(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"live", b"1")
        store.kv.put(b"s", b"n", b"dead", b"2", ttl=1)
        clock.advance(2)
        assert store.kv.drain(b"s", b"n") == [(b"live", b"1")]
        assert store.kv.delete(b"s", b"n", all=True) == 0

    def test_put_without_ttl_clears_an_earlier_ttl(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"k", b"v1", ttl=1)
        store.kv.put(b"s", b"n", b"k", b"v2")
        clock.advance(1000)
        assert store.kv.get(b"s", b"n", b"k") == b"v2"

    def test_put_many_without_ttl_clears_an_earlier_ttl(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"1")], ttl=1)
        store.kv.put_many(b"s", b"n", [(b"a", b"2"), (b"b", b"2")])
        clock.advance(1000)
        assert store.kv.get_many(b"s", b"n", [b"a", b"b"]) == [b"2", b"2"]

    def test_a_new_ttl_replaces_the_old_deadline(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"k", b"v", ttl=5)
        clock.advance(4)
        store.kv.put(b"s", b"n", b"k", b"v", ttl=5)
        clock.advance(4)
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        clock.advance(2)
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_put_many_ttl_applies_to_every_pair(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")], ttl=3)
        assert store.kv.get_many(b"s", b"n", [b"a", b"b"]) == [b"1", b"2"]
        clock.advance(4)
        assert store.kv.get_many(b"s", b"n", [b"a", b"b"]) == [None, None]

    def test_fractional_ttl(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"k", b"v", ttl=0.5)
        clock.advance(0.25)
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        clock.advance(0.5)
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_a_tiny_positive_ttl_is_not_already_expired(self, store: durastate.Store, clock: FakeClock) -> None:
        """``ttl`` below the clock's resolution still means "not yet expired"."""
        store.kv.put(b"s", b"n", b"k", b"v", ttl=0.0001)
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        clock.advance(1)
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_an_expired_key_can_be_written_again(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"k", b"old", ttl=1)
        clock.advance(2)
        store.kv.put(b"s", b"n", b"k", b"new")
        assert store.kv.get(b"s", b"n", b"k") == b"new"
        assert list(store.kv.scan(b"s", b"n")) == [(b"k", b"new")]

    def test_prune_expired_removes_expired_rows_only(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")], ttl=1)
        store.kv.put(b"t", b"m", b"c", b"3", ttl=1)
        store.kv.put(b"s", b"n", b"later", b"4", ttl=100)
        store.kv.put(b"s", b"n", b"never", b"5")
        clock.advance(2)
        assert store.kv.prune_expired() == 3
        # Unpruned expired rows would be counted by delete(all=True).
        assert store.kv.delete(b"t", b"m", all=True) == 0
        assert store.kv.delete(b"s", b"n", all=True) == 2
        assert store.kv.prune_expired() == 0

    def test_prune_expired_limit_bounds_the_work(self, store: durastate.Store, clock: FakeClock) -> None:
        expiring = PRUNE_BATCH + 10
        store.kv.put_many(b"s", b"n", [(i.to_bytes(2, "big"), b"v") for i in range(expiring)], ttl=1)
        clock.advance(2)
        assert store.kv.prune_expired(limit=0) == 0
        assert store.kv.prune_expired(limit=3) == 3
        assert store.kv.prune_expired(limit=PRUNE_BATCH + 1) == PRUNE_BATCH + 1
        assert store.kv.prune_expired() == expiring - 3 - PRUNE_BATCH - 1
        assert store.kv.delete(b"s", b"n", all=True) == 0

    def test_later_writes_prune_expired_rows(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put_many(b"s", b"expiring", [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], ttl=1)
        clock.advance(2)
        for i in range(PRUNE_EVERY):
            store.kv.put(b"s", b"busy", i.to_bytes(2, "big"), b"v")
        assert store.kv.delete(b"s", b"expiring", all=True) == 0
        assert store.kv.delete(b"s", b"busy", all=True) == PRUNE_EVERY

    def test_a_failing_sweep_never_fails_the_write_that_triggered_it(
        self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The sweep runs after the write committed: its failure is not the write's."""

        def unavailable(limit: int | None = None) -> int:
            raise StoreUnavailable("simulated: store busy during the sweep")

        monkeypatch.setattr(store.kv, "prune_expired", unavailable)
        keys = [i.to_bytes(2, "big") for i in range(PRUNE_EVERY + 1)]
        for key in keys:
            store.kv.put(b"s", b"n", key, b"v")
        with store.transaction():
            for key in keys:
                store.kv.put_many(b"s", b"t", [(key, b"v"), (key + b"\x00", b"v")])
        assert store.kv.delete(b"s", b"n", all=True) == len(keys)
        assert store.kv.delete(b"s", b"t", all=True) == 2 * len(keys)

    def test_expiry_does_not_touch_logs_or_counters(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(b"s", b"n", b"k", b"v", ttl=1)
        store.kv.append(b"s", b"n", b"k", b"e")
        store.kv.incr(b"s", b"n", b"k")
        clock.advance(2)
        store.kv.prune_expired()
        assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"e"]
        assert store.kv.counter(b"s", b"n", b"k") == 1
