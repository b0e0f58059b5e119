"""Conformance: the ``store.kv`` facet (values, expiry, logs, counters, views).

Every test runs on every engine through the ``store`` / ``open_store``
fixtures of ``durastate.testing.plugin``. Each class covers one family of
the contract; each test one clause that can break on its own. Expectations
are computed from the inputs (sorted keys, the model in ``TestKVModel``),
never hard-coded engine output.

Time only moves through the ``clock`` fixture (a ``FakeClock``): no test
sleeps. Engine-specific checks (``TestKVIndexUse``, SQLite's query planner)
skip on other engines with the reason.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import durastate
from durastate import InvalidRequest, StoreUnavailable, kv
from durastate.kv import KEY_CHUNK, KV, PAGE_SIZE, PRUNE_BATCH, PRUNE_EVERY, ScopedKV
from durastate.testing.clock import FakeClock

from .plans import STATISTICS, assert_index_search, plan_of, with_statistics

__all__ = [
    "TestKVListing",
    "TestKVBadInput",
    "TestKVClear",
    "TestKVCounters",
    "TestKVDelete",
    "TestKVDrain",
    "TestKVGetPut",
    "TestKVIndexUse",
    "TestKVIsolation",
    "TestKVKeySizeOption",
    "TestKVLogs",
    "TestKVModel",
    "TestKVScan",
    "TestKVScanPaging",
    "TestKVTTL",
    "TestScopedKV",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Keys whose unsigned-byte order differs from signed order and from "shorter
# first" order, and that are prefixes of each other.
ODD_KEYS = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"\x01",
    b"\x7f",
    b"\x7f\xff",
    b"\x80",
    b"\x80\x00",
    b"\xfe",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"a",
    b"a\x00",
    b"ab",
    b"b",
]


def page_crossing_keys(count: int) -> list[bytes]:
    """``count`` sorted keys where each second key is the first one plus NUL.

    ``k`` and ``k + b"\\x00"`` are adjacent in byte order, so every page
    boundary of a streamed scan lands next to the tightest possible
    successor: a continuation that skips or repeats a key shows up.
    """
    keys: list[bytes] = []
    for i in itertools.count():
        base = i.to_bytes(2, "big")
        keys.append(base)
        keys.append(base + b"\x00")
        if len(keys) >= count:
            return keys[:count]
    raise AssertionError("unreachable")


def value_of(key: bytes) -> bytes:
    """A value derived from the key, so a swapped pair is visible."""
    return b"v:" + key.hex().encode()


def kv_fingerprint(
    kv: KV,
    scopes: tuple[bytes, ...] = (b"s", b"t"),
    namespaces: tuple[bytes, ...] = (b"n", b""),
    keys: tuple[bytes, ...] = (b"k", b"k2"),
) -> object:
    """Everything observable at the addresses the bad-input cases aim at."""
    return [
        (
            list(kv.scan(scope, ns)),
            [list(kv.log(scope, ns, key)) for key in keys],
            [kv.counter(scope, ns, key) for key in keys],
        )
        for scope in scopes
        for ns in namespaces
    ]


def seed_kv(kv: KV) -> None:
    """Known data at the addresses ``kv_fingerprint`` reads."""
    for scope in (b"s", b"t"):
        for ns in (b"n", b""):
            kv.put_many(scope, ns, [(b"k", b"v-" + scope + ns), (b"k2", b"w")])
            kv.append(scope, ns, b"k", b"entry-1")
            kv.append(scope, ns, b"k", b"entry-2")
            kv.incr(scope, ns, b"k", 5)


# -- values ------------------------------------------------------------------


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


# -- scans -------------------------------------------------------------------


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


# -- drain, delete, clear ----------------------------------------------------


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


# -- expiry --------------------------------------------------------------------


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


# -- logs ----------------------------------------------------------------------


class TestKVLogs:
    def test_ordinals_increase_across_keys_namespaces_and_scopes(self, store: durastate.Store) -> None:
        addresses = [(b"s", b"n", b"a"), (b"s", b"n", b"b"), (b"s", b"m", b"a"), (b"t", b"n", b"a")] * 3
        ordinals = [store.kv.append(scope, ns, key, b"e") for scope, ns, key in addresses]
        assert ordinals == sorted(set(ordinals))
        assert all(type(o) is int and o > 0 for o in ordinals)

    def test_log_returns_entries_in_append_order(self, store: durastate.Store) -> None:
        entries = [(store.kv.append(b"s", b"n", b"k", b"e%d" % i), b"e%d" % i) for i in range(5)]
        store.kv.append(b"s", b"n", b"other", b"not mine")
        store.kv.append(b"s", b"n\x00", b"k", b"not mine")
        assert list(store.kv.log(b"s", b"n", b"k")) == entries

    def test_log_of_an_absent_key_is_empty(self, store: durastate.Store) -> None:
        assert list(store.kv.log(b"s", b"n", b"nothing")) == []

    def test_empty_entries_are_kept(self, store: durastate.Store) -> None:
        ordinal = store.kv.append(b"s", b"n", b"k", b"")
        assert list(store.kv.log(b"s", b"n", b"k")) == [(ordinal, b"")]

    def test_after_is_an_exclusive_cursor(self, store: durastate.Store) -> None:
        entries = [(store.kv.append(b"s", b"n", b"k", b"e%d" % i), b"e%d" % i) for i in range(6)]
        assert list(store.kv.log(b"s", b"n", b"k", after=entries[2][0])) == entries[3:]
        assert list(store.kv.log(b"s", b"n", b"k", after=entries[-1][0])) == []

    @pytest.mark.parametrize("after", [0, -1, INT64_MIN])
    def test_after_zero_or_negative_reads_from_the_start(self, store: durastate.Store, after: int) -> None:
        entries = [(store.kv.append(b"s", b"n", b"k", b"e%d" % i), b"e%d" % i) for i in range(3)]
        assert list(store.kv.log(b"s", b"n", b"k", after=after)) == entries

    def test_limit_and_cursor_page_through_the_log(self, store: durastate.Store) -> None:
        entries = [(store.kv.append(b"s", b"n", b"k", b"e%d" % i), b"e%d" % i) for i in range(7)]
        pages: list[list[tuple[int, bytes]]] = []
        cursor = 0
        while True:
            page = list(store.kv.log(b"s", b"n", b"k", after=cursor, limit=3))
            if not page:
                break
            pages.append(page)
            cursor = page[-1][0]
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [e for p in pages for e in p] == entries

    def test_limit_zero_reads_nothing(self, store: durastate.Store) -> None:
        store.kv.append(b"s", b"n", b"k", b"e")
        assert list(store.kv.log(b"s", b"n", b"k", limit=0)) == []

    def test_ordinals_are_never_reused_after_clear(self, store: durastate.Store) -> None:
        before = store.kv.append(b"s", b"n", b"k", b"old")
        store.kv.clear(b"s")
        after = store.kv.append(b"s", b"n", b"k", b"new")
        assert after > before
        assert list(store.kv.log(b"s", b"n", b"k")) == [(after, b"new")]

    def test_ordinals_keep_increasing_after_clearing_every_log(self, store: durastate.Store) -> None:
        highest = max(store.kv.append(scope, b"n", b"k", b"e") for scope in (b"s", b"t"))
        store.kv.clear(b"s")
        store.kv.clear(b"t")
        assert store.kv.append(b"u", b"n", b"k", b"e") > highest

    def test_log_streams_past_a_page(self, store: durastate.Store) -> None:
        count = 2 * PAGE_SIZE + 76
        entries = [(store.kv.append(b"s", b"n", b"k", b"%d" % i), b"%d" % i) for i in range(count)]
        assert list(store.kv.log(b"s", b"n", b"k")) == entries
        for limit in (PAGE_SIZE, PAGE_SIZE + 1, 2 * PAGE_SIZE + 5, count + 10):
            assert list(store.kv.log(b"s", b"n", b"k", limit=limit)) == entries[:limit]
        middle = entries[100][0]
        assert list(store.kv.log(b"s", b"n", b"k", after=middle, limit=700)) == entries[101:801]

    def test_a_long_log_is_read_lazily(self, store: durastate.Store) -> None:
        count = 3 * PAGE_SIZE
        for i in range(count):
            store.kv.append(b"s", b"n", b"k", b"%d" % i)
        rows = store.kv.log(b"s", b"n", b"k")
        next(rows)
        store.kv.clear(b"s")
        assert len(list(rows)) < count - 1


# -- counters --------------------------------------------------------------------


class TestKVCounters:
    def test_absent_counter_reads_zero(self, store: durastate.Store) -> None:
        assert store.kv.counter(b"s", b"n", b"k") == 0

    def test_incr_defaults_to_one_and_returns_the_sum(self, store: durastate.Store) -> None:
        assert store.kv.incr(b"s", b"n", b"k") == 1
        assert store.kv.incr(b"s", b"n", b"k") == 2
        assert store.kv.counter(b"s", b"n", b"k") == 2

    def test_incr_by_delta_including_negative(self, store: durastate.Store) -> None:
        deltas = [10, -3, -20, 0, 7]
        totals = [store.kv.incr(b"s", b"n", b"k", d) for d in deltas]
        assert totals == list(itertools.accumulate(deltas))
        assert store.kv.counter(b"s", b"n", b"k") == sum(deltas)

    def test_set_counter_overwrites(self, store: durastate.Store) -> None:
        store.kv.incr(b"s", b"n", b"k", 5)
        store.kv.set_counter(b"s", b"n", b"k", -42)
        assert store.kv.counter(b"s", b"n", b"k") == -42
        assert store.kv.incr(b"s", b"n", b"k", 2) == -40

    def test_set_counter_creates(self, store: durastate.Store) -> None:
        store.kv.set_counter(b"s", b"n", b"k", 9)
        assert store.kv.counter(b"s", b"n", b"k") == 9

    def test_delete_counter_reports_whether_it_existed(self, store: durastate.Store) -> None:
        store.kv.incr(b"s", b"n", b"k", 4)
        assert store.kv.delete_counter(b"s", b"n", b"k") is True
        assert store.kv.counter(b"s", b"n", b"k") == 0
        assert store.kv.delete_counter(b"s", b"n", b"k") is False
        assert store.kv.incr(b"s", b"n", b"k") == 1

    def test_counters_are_per_address(self, store: durastate.Store) -> None:
        addresses = [(b"s", b"n", b"k"), (b"s", b"n", b"k\x00"), (b"s", b"m", b"k"), (b"t", b"n", b"k")]
        for i, address in enumerate(addresses, start=1):
            store.kv.incr(*address, i)
        assert [store.kv.counter(*a) for a in addresses] == list(range(1, len(addresses) + 1))

    @pytest.mark.parametrize("value", [INT64_MAX, INT64_MIN])
    def test_int64_extremes_are_stored_exactly(self, store: durastate.Store, value: int) -> None:
        store.kv.set_counter(b"s", b"n", b"k", value)
        assert store.kv.counter(b"s", b"n", b"k") == value

    def test_incr_up_to_the_bound_is_allowed(self, store: durastate.Store) -> None:
        store.kv.set_counter(b"s", b"n", b"k", INT64_MAX - 1)
        assert store.kv.incr(b"s", b"n", b"k") == INT64_MAX
        store.kv.set_counter(b"s", b"n", b"k", INT64_MIN + 1)
        assert store.kv.incr(b"s", b"n", b"k", -1) == INT64_MIN

    @pytest.mark.parametrize(
        ("start", "delta"),
        [(INT64_MAX, 1), (INT64_MAX - 5, 6), (1, INT64_MAX), (INT64_MIN, -1), (-2, INT64_MIN), (INT64_MIN, INT64_MIN)],
    )
    def test_overflowing_incr_is_refused_and_keeps_the_old_value(
        self, store: durastate.Store, start: int, delta: int
    ) -> None:
        store.kv.set_counter(b"s", b"n", b"k", start)
        with pytest.raises(InvalidRequest):
            store.kv.incr(b"s", b"n", b"k", delta)
        assert store.kv.counter(b"s", b"n", b"k") == start
        # The store is fine afterwards.
        assert store.kv.incr(b"s", b"n", b"k", 0) == start

    @pytest.mark.parametrize("delta", [True, False, 1.0, 1.5, "1", b"1", None, 2**63, -(2**63) - 1], ids=repr)
    def test_non_int64_deltas_are_refused(self, store: durastate.Store, delta: Any) -> None:
        store.kv.incr(b"s", b"n", b"k", 3)
        with pytest.raises(InvalidRequest):
            store.kv.incr(b"s", b"n", b"k", delta)
        assert store.kv.counter(b"s", b"n", b"k") == 3


# -- the scoped view -------------------------------------------------------------


class TestScopedKV:
    def test_every_scoped_method_of_kv_has_a_view_method(self) -> None:
        """A KV method taking ``scope`` first is mirrored, minus that parameter."""
        for name, method in inspect.getmembers(KV, inspect.isfunction):
            if name.startswith("_"):
                continue
            params = list(inspect.signature(method).parameters.values())[1:]
            if not params or params[0].name != "scope" or name == "scope":
                continue
            assert hasattr(ScopedKV, name), f"ScopedKV lacks {name}"
            view_params = list(inspect.signature(getattr(ScopedKV, name)).parameters.values())[1:]
            assert [(p.name, p.kind, p.default) for p in view_params] == [
                (p.name, p.kind, p.default) for p in params[1:]
            ], name

    def test_view_reads_what_kv_wrote_and_the_reverse(self, store: durastate.Store) -> None:
        view = store.kv.scope(b"x")
        store.kv.put(b"x", b"n", b"a", b"from kv")
        view.put(b"n", b"b", b"from view")
        assert view.get(b"n", b"a") == b"from kv"
        assert store.kv.get(b"x", b"n", b"b") == b"from view"
        assert view.get_many(b"n", [b"b", b"z", b"a"]) == [b"from view", None, b"from kv"]

    def test_view_put_many_scan_and_ttl(self, store: durastate.Store, clock: FakeClock) -> None:
        view = store.kv.scope(b"x")
        view.put_many(b"n", [(k, value_of(k)) for k in ODD_KEYS])
        view.put(b"n", b"\xff\xff\xff", b"brief", ttl=1)
        view.put_many(b"n", [(b"\xfe\xfe", b"brief")], ttl=1)
        clock.advance(2)
        expected = [(k, value_of(k)) for k in sorted(ODD_KEYS)]
        assert list(view.scan(b"n")) == expected
        assert list(store.kv.scan(b"x", b"n")) == expected
        assert list(view.scan(b"n", start=b"\x7f", end=b"b", reverse=True, limit=3)) == list(
            store.kv.scan(b"x", b"n", start=b"\x7f", end=b"b", reverse=True, limit=3)
        )

    def test_view_drain_and_delete(self, store: durastate.Store) -> None:
        view = store.kv.scope(b"x")
        view.put_many(b"n", [(k, b"v") for k in ODD_KEYS])
        assert view.delete(b"n", [b"a", b"b", b"missing"]) == 2
        assert view.delete(b"n", start=b"\x80", end=b"a") == len([k for k in ODD_KEYS if b"\x80" <= k < b"a"])
        with pytest.raises(InvalidRequest):
            view.delete(b"n")
        left = sorted(k for k in ODD_KEYS if k not in (b"a", b"b") and not b"\x80" <= k < b"a")
        assert view.drain(b"n") == [(k, b"v") for k in left]
        view.put(b"n", b"k", b"v")
        assert view.delete(b"n", all=True) == 1

    def test_view_logs_and_counters(self, store: durastate.Store) -> None:
        view = store.kv.scope(b"x")
        first = view.append(b"n", b"k", b"one")
        second = store.kv.append(b"x", b"n", b"k", b"two")
        assert list(view.log(b"n", b"k")) == [(first, b"one"), (second, b"two")]
        assert list(view.log(b"n", b"k", after=first, limit=5)) == [(second, b"two")]
        assert view.incr(b"n", b"c") == 1
        assert view.incr(b"n", b"c", 4) == 5
        assert store.kv.counter(b"x", b"n", b"c") == 5
        view.set_counter(b"n", b"c", 11)
        assert view.counter(b"n", b"c") == 11
        assert view.delete_counter(b"n", b"c") is True
        assert view.counter(b"n", b"c") == 0

    def test_view_is_confined_to_its_scope(self, store: durastate.Store) -> None:
        view = store.kv.scope(b"x")
        for scope in (b"x\x00", b"xx", b""):
            store.kv.put(scope, b"n", b"k", b"other")
            store.kv.append(scope, b"n", b"k", b"other")
            store.kv.incr(scope, b"n", b"k")
        assert view.get(b"n", b"k") is None
        assert list(view.scan(b"n")) == []
        assert view.drain(b"n") == []
        assert list(view.log(b"n", b"k")) == []
        assert view.counter(b"n", b"k") == 0
        assert view.delete(b"n", all=True) == 0
        assert view.clear() == 0
        assert store.kv.get(b"xx", b"n", b"k") == b"other"

    def test_view_clear_wipes_only_its_scope(self, store: durastate.Store) -> None:
        view = store.kv.scope(b"x")
        view.put(b"n", b"k", b"v")
        view.append(b"n", b"k", b"e")
        view.incr(b"n", b"k")
        store.kv.put(b"y", b"n", b"k", b"v")
        assert view.clear() == 3
        assert view.get(b"n", b"k") is None
        assert store.kv.get(b"y", b"n", b"k") == b"v"

    def test_view_validates_like_kv(self, store: durastate.Store) -> None:
        view: Any = store.kv.scope(b"x")  # Any: the calls below are wrong on purpose
        bad_calls: list[Callable[[], object]] = [
            lambda: view.get("n", b"k"),
            lambda: view.put(b"n", b"k", "v"),
            lambda: view.put(b"n", b"k", b"v", ttl=-1),
            lambda: view.put_many(b"n", {b"k": b"v"}),
            lambda: view.scan(b"n", limit=-1),
            lambda: view.delete(b"n", [b"k"], all=True),
            lambda: view.append(b"n", None, b"v"),
            lambda: view.incr(b"n", b"k", 1.5),
        ]
        for call in bad_calls:
            with pytest.raises(InvalidRequest):
                call()
        assert list(view.scan(b"n")) == []
        assert view.counter(b"n", b"k") == 0

    @pytest.mark.parametrize("scope", ["x", None, 1, [b"x"]], ids=repr)
    def test_scope_must_be_bytes(self, store: durastate.Store, scope: Any) -> None:
        with pytest.raises(InvalidRequest):
            store.kv.scope(scope)


# -- bad input -------------------------------------------------------------------

# The KV is typed Any: these calls are wrong on purpose.
KVCall = Callable[[Any], object]


def expect_invalid(label: str, call: Callable[..., object], *args: Any) -> None:
    """``call(*args)`` must raise ``InvalidRequest`` (a ``ValueError``) with a message."""
    try:
        call(*args)
    except InvalidRequest as exc:
        assert isinstance(exc, ValueError)
        assert str(exc), f"{label}: the message must say what was wrong"
    except Exception as exc:  # the wrong kind of error is a failure, with the call named
        pytest.fail(f"{label}: raised {type(exc).__name__}: {exc} instead of InvalidRequest")
    else:
        pytest.fail(f"{label}: accepted")


# Wrong-typed stand-ins for a bytes argument.
NOT_BYTES: list[Any] = ["s", None, 7, True, [1, 2]]
ADDRESS_METHODS: dict[str, Callable[[Any, Any, Any, Any], object]] = {
    "get": lambda kv, s, n, k: kv.get(s, n, k),
    "put": lambda kv, s, n, k: kv.put(s, n, k, b"v"),
    "append": lambda kv, s, n, k: kv.append(s, n, k, b"v"),
    "incr": lambda kv, s, n, k: kv.incr(s, n, k),
    "counter": lambda kv, s, n, k: kv.counter(s, n, k),
    "set_counter": lambda kv, s, n, k: kv.set_counter(s, n, k, 1),
    "delete_counter": lambda kv, s, n, k: kv.delete_counter(s, n, k),
    "log": lambda kv, s, n, k: kv.log(s, n, k),
    "get_many": lambda kv, s, n, k: kv.get_many(s, n, [b"k", k]),
    "put_many": lambda kv, s, n, k: kv.put_many(s, n, [(b"k", b"v"), (k, b"v")]),
    "delete-keys": lambda kv, s, n, k: kv.delete(s, n, [b"k", k]),
}

BAD_SECONDS: list[Any] = [float("nan"), float("inf"), float("-inf"), -1, -0.5, 0, "1", True, b"1", [1], 1e300]


def _cases(template: Callable[[Any, Any], object], label: str, values: list[Any]) -> list[tuple[str, KVCall]]:
    return [(f"{label}={v!r}", functools.partial(_swap, template, v)) for v in values]


def _swap(template: Callable[[Any, Any], object], value: Any, kv: Any) -> object:
    return template(kv, value)


BAD_KV_CALLS: dict[str, list[tuple[str, KVCall]]] = {
    "put-value": _cases(lambda kv, v: kv.put(b"s", b"n", b"k", v), "put value", ["v", None, 1, [b"v"], True]),
    "append-value": _cases(lambda kv, v: kv.append(b"s", b"n", b"k", v), "append value", ["v", None, 1]),
    "put-ttl": _cases(lambda kv, t: kv.put(b"s", b"n", b"k", b"v", ttl=t), "put ttl", BAD_SECONDS),
    "put_many-ttl": _cases(lambda kv, t: kv.put_many(b"s", b"n", [(b"k", b"v")], ttl=t), "ttl", BAD_SECONDS),
    "put_many-items": _cases(
        lambda kv, items: kv.put_many(b"s", b"n", items),
        "put_many items",
        [
            {b"k": b"v"},
            b"kv",
            "kv",
            None,
            7,
            [b"kv"],
            [(b"k",)],
            [(b"k", b"v", b"x")],
            [(b"k", "v")],
            [("k", b"v")],
            [(b"k", None)],
            [None],
            [(b"a", b"1"), (b"b", b"2"), {b"c": b"3"}],
        ],
    ),
    "get_many-keys": _cases(
        lambda kv, keys: kv.get_many(b"s", b"n", keys),
        "get_many keys",
        [b"abc", "abc", {b"k": 1}, None, 3, [b"k", None], [b"k", "k"]],
    ),
    "scan-bounds": [
        ("start=str", lambda kv: kv.scan(b"s", b"n", start="a")),
        ("end=int", lambda kv: kv.scan(b"s", b"n", end=1)),
        ("scope=str", lambda kv: kv.scan("s", b"n")),
        ("ns=None", lambda kv: kv.scan(b"s", None)),
    ],
    "scan-limit": _cases(lambda kv, n: kv.scan(b"s", b"n", limit=n), "limit", [-1, "3", 1.5, True, float("nan")]),
    "scan-reverse": _cases(lambda kv, r: kv.scan(b"s", b"n", reverse=r), "reverse", [1, 0, "yes", None, b"\x01"]),
    "drain": [
        ("scope=str", lambda kv: kv.drain("s", b"n")),
        ("ns=int", lambda kv: kv.drain(b"s", 1)),
    ],
    "delete-forms": [
        ("bare", lambda kv: kv.delete(b"s", b"n")),
        ("keys+range", lambda kv: kv.delete(b"s", b"n", [b"k"], start=b"a")),
        ("keys+all", lambda kv: kv.delete(b"s", b"n", [b"k"], all=True)),
        ("range+all", lambda kv: kv.delete(b"s", b"n", start=b"a", all=True)),
        ("all=1", lambda kv: kv.delete(b"s", b"n", all=1)),
        ("all=str", lambda kv: kv.delete(b"s", b"n", all="yes")),
    ],
    "delete-types": [
        ("keys=bytes", lambda kv: kv.delete(b"s", b"n", b"k")),
        ("keys=dict", lambda kv: kv.delete(b"s", b"n", {b"k": 1})),
        ("start=str", lambda kv: kv.delete(b"s", b"n", start="a")),
        ("end=str", lambda kv: kv.delete(b"s", b"n", start=b"a", end="z")),
        ("scope=str", lambda kv: kv.delete("s", b"n", all=True)),
    ],
    "clear": _cases(lambda kv, s: kv.clear(s), "clear scope", ["s", None, 1]),
    "log-after": _cases(
        lambda kv, a: kv.log(b"s", b"n", b"k", after=a), "after", ["1", 1.5, True, None, 2**63, float("nan")]
    ),
    "log-limit": _cases(lambda kv, n: kv.log(b"s", b"n", b"k", limit=n), "limit", [-1, "1", 2.0, True]),
    "incr-delta": _cases(
        lambda kv, d: kv.incr(b"s", b"n", b"k", d), "delta", [True, 1.0, "1", None, 2**63, -(2**63) - 1, float("nan")]
    ),
    "set_counter-value": _cases(
        lambda kv, v: kv.set_counter(b"s", b"n", b"k", v), "value", [True, 1.0, "1", None, 2**63, -(2**63) - 1]
    ),
    "prune_expired-limit": _cases(lambda kv, n: kv.prune_expired(n), "limit", [-1, "3", 1.5, True]),
}


class TestKVBadInput:
    """Every wrong argument raises ``InvalidRequest`` and changes nothing.

    The store is seeded with known data at the addresses the calls aim at;
    after each refused call everything readable there is as before. The
    call itself raises: a lazy iterator must not defer the error to ``next``.
    """

    @pytest.fixture
    def seeded(self, store: durastate.Store) -> durastate.Store:
        seed_kv(store.kv)
        return store

    @pytest.mark.parametrize("position", ["scope", "ns", "key"])
    @pytest.mark.parametrize("method", sorted(ADDRESS_METHODS))
    def test_address_parts_must_be_bytes(self, seeded: durastate.Store, method: str, position: str) -> None:
        before = kv_fingerprint(seeded.kv)
        for bad in NOT_BYTES:
            args: list[Any] = [b"s", b"n", b"k"]
            args[("scope", "ns", "key").index(position)] = bad
            expect_invalid(f"{method} {position}={bad!r}", ADDRESS_METHODS[method], seeded.kv, *args)
            assert kv_fingerprint(seeded.kv) == before, f"{method} {position}={bad!r} changed the store"

    @pytest.mark.parametrize("group", sorted(BAD_KV_CALLS))
    def test_refused_without_effect(self, seeded: durastate.Store, group: str) -> None:
        before = kv_fingerprint(seeded.kv)
        for label, call in BAD_KV_CALLS[group]:
            expect_invalid(label, call, seeded.kv)
            assert kv_fingerprint(seeded.kv) == before, f"{label} changed the store"

    def test_overflowing_incr_is_refused_without_effect(self, seeded: durastate.Store) -> None:
        before = kv_fingerprint(seeded.kv)
        expect_invalid("incr past INT64_MAX", lambda: seeded.kv.incr(b"s", b"n", b"k", INT64_MAX))
        assert kv_fingerprint(seeded.kv) == before

    def test_refused_calls_leave_an_open_transaction_usable(self, seeded: durastate.Store) -> None:
        """Argument errors are raised before any statement runs, so they do not
        doom the caller's transaction (statement errors do: see conformance.engine)."""
        before = kv_fingerprint(seeded.kv)
        with seeded.transaction():
            seeded.kv.put(b"s", b"n", b"new", b"v")
            expect_invalid("put_many", lambda: seeded.kv.put_many(b"s", b"n", [(b"x", b"v"), (b"y", None)]))  # type: ignore[list-item]
            expect_invalid("scan", lambda: seeded.kv.scan(b"s", b"n", limit=-1))
        assert seeded.kv.get(b"s", b"n", b"new") == b"v"
        seeded.kv.delete(b"s", b"n", [b"new"])
        assert kv_fingerprint(seeded.kv) == before

    def test_oversized_inputs_are_refused_without_effect(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_value_size=16, max_key_size=16)
        seed_kv(store.kv)
        before = kv_fingerprint(store.kv)
        big_value = b"v" * 17
        big_key = b"k" * 14  # + scope b"s" + ns b"n" = 16 fits; one more does not
        store.kv.get(b"s", b"n", big_key)  # exactly at the limit: allowed
        calls: list[tuple[str, Callable[[], object]]] = [
            ("put value", lambda: store.kv.put(b"s", b"n", b"k", big_value)),
            ("put_many value", lambda: store.kv.put_many(b"s", b"n", [(b"k", b"ok"), (b"k2", big_value)])),
            ("append value", lambda: store.kv.append(b"s", b"n", b"k", big_value)),
            ("put key", lambda: store.kv.put(b"s", b"n", big_key + b"k", b"v")),
            ("put_many key", lambda: store.kv.put_many(b"s", b"n", [(b"k", b"ok"), (big_key + b"k", b"v")])),
            ("append key", lambda: store.kv.append(b"s", b"n", big_key + b"k", b"v")),
            ("incr key", lambda: store.kv.incr(b"s", b"n", big_key + b"k")),
            ("set_counter key", lambda: store.kv.set_counter(b"s", b"n", big_key + b"k", 1)),
            ("get key", lambda: store.kv.get(b"s", b"n", big_key + b"k")),
            ("get_many key", lambda: store.kv.get_many(b"s", b"n", [b"k", big_key + b"k"])),
            ("delete key", lambda: store.kv.delete(b"s", b"n", [b"k", big_key + b"k"])),
        ]
        for label, call in calls:
            expect_invalid(label, call)
            assert kv_fingerprint(store.kv) == before, f"{label} changed the store"


# -- model-based -----------------------------------------------------------------

KEY_BYTES = st.lists(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]), max_size=3).map(bytes)
NAMESPACES = st.sampled_from([b"", b"n", b"n\x00"])
VALUES = st.binary(max_size=4)
TTLS = st.sampled_from([None, None, 1, 2, 5])
DELTAS = st.one_of(st.integers(-5, 5), st.integers(INT64_MIN, INT64_MAX))

Address = tuple[bytes, bytes]  # (ns, key)


class KVMachine(RuleBasedStateMachine):
    """``store.kv`` under one fresh scope against a plain-dict model.

    Expired-but-unpruned rows are real rows to ``delete``/``clear`` counts;
    since pruning also happens on its own every ``PRUNE_EVERY`` writes, the
    model keeps expired rows until a prune provably removed them and checks
    those counts as a range.
    """

    def __init__(self, kv: KV, clock: FakeClock, scope: bytes) -> None:
        super().__init__()
        self.kv = kv
        self.clock = clock
        self.scope = scope
        self.values: dict[Address, tuple[bytes, int | None]] = {}
        self.counters: dict[Address, int] = {}
        self.logs: dict[Address, list[tuple[int, bytes]]] = {}
        self.highest_ordinal = 0

    # model helpers
    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def live(self, ns: bytes) -> list[tuple[bytes, bytes]]:
        now = self.now_ms()
        return sorted(
            (key, value)
            for (n, key), (value, deadline) in self.values.items()
            if n == ns and self.is_live(deadline, now)
        )

    @staticmethod
    def is_live(deadline: int | None, now: int) -> bool:
        return deadline is None or deadline > now

    def remove(self, matches: list[Address], reported: int) -> None:
        """Drop ``matches`` from the model; ``reported`` counts the live ones and maybe the expired."""
        now = self.now_ms()
        live = sum(1 for a in matches if self.is_live(self.values[a][1], now))
        assert live <= reported <= len(matches)
        for address in matches:
            del self.values[address]

    def deadline(self, ttl: int | None) -> int | None:
        return None if ttl is None else self.now_ms() + ttl * 1000

    # values
    @rule(ns=NAMESPACES, key=KEY_BYTES, value=VALUES, ttl=TTLS)
    def put(self, ns: bytes, key: bytes, value: bytes, ttl: int | None) -> None:
        self.kv.put(self.scope, ns, key, value, ttl=ttl)
        self.values[(ns, key)] = (value, self.deadline(ttl))

    @rule(ns=NAMESPACES, items=st.lists(st.tuples(KEY_BYTES, VALUES), max_size=6), ttl=TTLS)
    def put_many(self, ns: bytes, items: list[tuple[bytes, bytes]], ttl: int | None) -> None:
        self.kv.put_many(self.scope, ns, items, ttl=ttl)
        for key, value in items:
            self.values[(ns, key)] = (value, self.deadline(ttl))

    @rule(ns=NAMESPACES, key=KEY_BYTES)
    def get(self, ns: bytes, key: bytes) -> None:
        assert self.kv.get(self.scope, ns, key) == dict(self.live(ns)).get(key)

    @rule(ns=NAMESPACES, keys=st.lists(KEY_BYTES, max_size=6))
    def get_many(self, ns: bytes, keys: list[bytes]) -> None:
        live = dict(self.live(ns))
        assert self.kv.get_many(self.scope, ns, keys) == [live.get(k) for k in keys]

    @rule(
        ns=NAMESPACES,
        start=st.none() | KEY_BYTES,
        end=st.none() | KEY_BYTES,
        reverse=st.booleans(),
        limit=st.none() | st.integers(0, 6),
    )
    def scan(self, ns: bytes, start: bytes | None, end: bytes | None, reverse: bool, limit: int | None) -> None:
        expected = [
            pair for pair in self.live(ns) if (start is None or pair[0] >= start) and (end is None or pair[0] < end)
        ]
        if reverse:
            expected.reverse()
        if limit is not None:
            expected = expected[:limit]
        assert list(self.kv.scan(self.scope, ns, start=start, end=end, reverse=reverse, limit=limit)) == expected

    @rule(ns=NAMESPACES)
    def drain(self, ns: bytes) -> None:
        expected = self.live(ns)
        assert self.kv.drain(self.scope, ns) == expected
        for address in [a for a in self.values if a[0] == ns]:
            del self.values[address]

    @rule(ns=NAMESPACES, keys=st.lists(KEY_BYTES, max_size=5))
    def delete_keys(self, ns: bytes, keys: list[bytes]) -> None:
        removed = self.kv.delete(self.scope, ns, keys)
        self.remove([(ns, k) for k in set(keys) if (ns, k) in self.values], removed)

    @rule(ns=NAMESPACES, start=st.none() | KEY_BYTES, end=st.none() | KEY_BYTES)
    def delete_range(self, ns: bytes, start: bytes | None, end: bytes | None) -> None:
        if start is None and end is None:
            return  # that is delete(all=True), its own rule
        removed = self.kv.delete(self.scope, ns, start=start, end=end)
        matches = [
            (n, k) for (n, k) in self.values if n == ns and (start is None or k >= start) and (end is None or k < end)
        ]
        self.remove(matches, removed)

    @rule(ns=NAMESPACES)
    def delete_all(self, ns: bytes) -> None:
        removed = self.kv.delete(self.scope, ns, all=True)
        self.remove([a for a in self.values if a[0] == ns], removed)

    @rule(seconds=st.sampled_from([0.5, 1, 3]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def prune(self) -> None:
        self.kv.prune_expired()
        now = self.now_ms()
        for address in [a for a, (_, d) in self.values.items() if d is not None and d <= now]:
            del self.values[address]

    @rule()
    def clear(self) -> None:
        now = self.now_ms()
        live = sum(1 for _, deadline in self.values.values() if self.is_live(deadline, now))
        certain = live + sum(len(entries) for entries in self.logs.values()) + len(self.counters)
        removed = self.kv.clear(self.scope)
        assert certain <= removed <= certain + len(self.values) - live
        self.values.clear()
        self.counters.clear()
        self.logs.clear()

    # counters
    @rule(ns=NAMESPACES, key=KEY_BYTES, delta=DELTAS)
    def incr(self, ns: bytes, key: bytes, delta: int) -> None:
        total = self.counters.get((ns, key), 0) + delta
        if INT64_MIN <= total <= INT64_MAX:
            assert self.kv.incr(self.scope, ns, key, delta) == total
            self.counters[(ns, key)] = total
        else:
            try:
                self.kv.incr(self.scope, ns, key, delta)
            except InvalidRequest:
                pass
            else:
                raise AssertionError(f"incr by {delta} past int64 was accepted")

    @rule(ns=NAMESPACES, key=KEY_BYTES, value=st.integers(INT64_MIN, INT64_MAX))
    def set_counter(self, ns: bytes, key: bytes, value: int) -> None:
        self.kv.set_counter(self.scope, ns, key, value)
        self.counters[(ns, key)] = value

    @rule(ns=NAMESPACES, key=KEY_BYTES)
    def delete_counter(self, ns: bytes, key: bytes) -> None:
        assert self.kv.delete_counter(self.scope, ns, key) == ((ns, key) in self.counters)
        self.counters.pop((ns, key), None)

    @rule(ns=NAMESPACES, key=KEY_BYTES)
    def counter(self, ns: bytes, key: bytes) -> None:
        assert self.kv.counter(self.scope, ns, key) == self.counters.get((ns, key), 0)

    # logs
    @rule(ns=NAMESPACES, key=KEY_BYTES, value=VALUES)
    def append(self, ns: bytes, key: bytes, value: bytes) -> None:
        ordinal = self.kv.append(self.scope, ns, key, value)
        assert ordinal > self.highest_ordinal
        self.highest_ordinal = ordinal
        self.logs.setdefault((ns, key), []).append((ordinal, value))

    @rule(ns=NAMESPACES, key=KEY_BYTES, cursor=st.integers(-1, 8), limit=st.none() | st.integers(0, 4))
    def log(self, ns: bytes, key: bytes, cursor: int, limit: int | None) -> None:
        entries = self.logs.get((ns, key), [])
        # A cursor is "after nothing" (<= 0) or the ordinal of a stored entry.
        after = cursor if cursor <= 0 or not entries else entries[min(cursor, len(entries)) - 1][0]
        expected = [e for e in entries if e[0] > after]
        if limit is not None:
            expected = expected[:limit]
        assert list(self.kv.log(self.scope, ns, key, after=after, limit=limit)) == expected

    @invariant()
    def whole_namespace_matches(self) -> None:
        for ns in (b"", b"n", b"n\x00"):
            assert list(self.kv.scan(self.scope, ns)) == self.live(ns)


class TestKVModel:
    def test_kv_behaves_like_the_model(self, store: durastate.Store, clock: FakeClock) -> None:
        scopes = (b"model-%d" % i for i in itertools.count())
        # A factory, not the class: each run gets this store and a fresh scope.
        factory: Any = lambda: KVMachine(store.kv, clock, next(scopes))  # noqa: E731
        run_state_machine_as_test(
            factory,
            settings=settings(max_examples=50, stateful_step_count=30, deadline=None),
        )


# -- index use (every engine) ------------------------------------------------------


class TestKVIndexUse:
    """Point reads, scans and log reads are index searches (flat cost)."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        for scope in (b"s", b"t"):
            store.kv.put_many(scope, b"n", [(k, b"v") for k in page_crossing_keys(200)])
            for i in range(20):
                store.kv.append(scope, b"n", b"k", b"%d" % i)
        return with_statistics(store, request.param)

    def table(self, store: durastate.Store, name: str) -> str:
        return store.engine.prefix + name

    def test_get(self, filled: durastate.Store) -> None:
        plan = plan_of(filled, kv.GET, (b"s", b"n", b"k"))
        assert_index_search(plan, self.table(filled, "kv"), using=("scope", "ns", "key"))

    def test_get_many(self, filled: durastate.Store) -> None:
        plan = plan_of(filled, kv.get_many_sql(3), (b"s", b"n", b"a", b"b", b"c"))
        assert_index_search(plan, self.table(filled, "kv"), using=("scope", "ns", "key"), unfiltered=("key",))

    @pytest.mark.parametrize("reverse", [False, True])
    @pytest.mark.parametrize(("has_start", "has_end"), [(False, False), (True, False), (False, True), (True, True)])
    def test_scan(self, filled: durastate.Store, has_start: bool, has_end: bool, reverse: bool) -> None:
        params: list[Any] = [b"s", b"n"]
        params += [b"\x00\x10"] if has_start else []
        params += [b"\x00\x90"] if has_end else []
        params += [0, PAGE_SIZE]
        plan = plan_of(filled, kv.scan_sql(has_start, has_end, reverse), params)
        using = ("scope", "ns", "key") if has_start or has_end else ("scope", "ns")
        assert_index_search(plan, self.table(filled, "kv"), using=using, unfiltered=("key",))

    def test_log(self, filled: durastate.Store) -> None:
        plan = plan_of(filled, kv.LOG_PAGE, (b"s", b"n", b"k", 0, PAGE_SIZE))
        assert_index_search(plan, self.table(filled, "kv_log"), using=("scope", "ns", "key", "id"))

    def test_counter(self, filled: durastate.Store) -> None:
        plan = plan_of(filled, kv.COUNTER_GET, (b"s", b"n", b"k"))
        assert_index_search(plan, self.table(filled, "kv_counter"), using=("scope", "ns", "key"))

    def test_drain_and_delete(self, filled: durastate.Store) -> None:
        kv_table = self.table(filled, "kv")
        assert_index_search(plan_of(filled, kv.DRAIN, (b"s", b"n")), kv_table, using=("scope", "ns"))
        assert_index_search(plan_of(filled, kv.DELETE_ALL, (b"s", b"n")), kv_table, using=("scope", "ns"))
        plan = plan_of(filled, kv.delete_keys_sql(2), (b"s", b"n", b"a", b"b"))
        assert_index_search(plan, kv_table, using=("key",), unfiltered=("key",))
        plan = plan_of(filled, kv.delete_range_sql(True, True), (b"s", b"n", b"a", b"b"))
        assert_index_search(plan, kv_table, using=("scope", "ns", "key"))

    def test_prune_uses_the_expiry_index(self, filled: durastate.Store) -> None:
        plan = plan_of(filled, kv.PRUNE, (0, PRUNE_BATCH))
        assert_index_search(plan, self.table(filled, "kv"))
        assert any("expires_at" in step.condition for step in plan.steps), f"expiry index unused:\n{plan.text}"
        plan = plan_of(filled, kv.PRUNE_DUE, (0,))
        assert_index_search(plan, self.table(filled, "kv"), using=("expires_at",))

    def test_clear(self, filled: durastate.Store) -> None:
        statements = (kv.CLEAR_VALUES, kv.CLEAR_LOGS, kv.CLEAR_COUNTERS)
        for statement, name in zip(statements, ("kv", "kv_log", "kv_counter"), strict=True):
            plan = plan_of(filled, statement, (b"s",))
            assert_index_search(plan, self.table(filled, name), using=("scope",))


class TestKVListing:
    """``kv.scopes()`` / ``kv.namespaces(scope)``: every family counts, bytes order, paging."""

    @pytest.fixture
    def filled(self, store: durastate.Store) -> durastate.Store:
        kv = store.kv
        for key in ODD_KEYS:  # scopes that sort unsigned, including b""
            kv.put(key, b"ns", b"k", b"v")
        kv.append(b"log-only", b"events", b"k", b"v")
        kv.incr(b"counter-only", b"stats", b"k")
        for ns in (b"b", b"a", b"\xff", b""):
            kv.put(b"many", ns, b"k", b"v")
        kv.append(b"many", b"log", b"k", b"v")
        kv.incr(b"many", b"cnt", b"k")
        return store

    def expected_scopes(self) -> list[bytes]:
        return sorted({*ODD_KEYS, b"log-only", b"counter-only", b"many"})

    def test_scopes_lists_values_logs_and_counters_in_bytes_order(self, filled: durastate.Store) -> None:
        assert filled.kv.scopes(limit=1000) == self.expected_scopes()

    def test_scopes_pages_by_after(self, filled: durastate.Store) -> None:
        seen: list[bytes] = []
        after = None
        while True:
            page = filled.kv.scopes(after=after, limit=3)
            assert len(page) <= 3
            if not page:
                break
            seen += page
            after = page[-1]
        assert seen == self.expected_scopes()

    def test_namespaces_of_one_scope(self, filled: durastate.Store) -> None:
        assert filled.kv.namespaces(b"many") == sorted([b"", b"a", b"b", b"\xff", b"log", b"cnt"])
        assert filled.kv.namespaces(b"many", after=b"b", limit=2) == [b"cnt", b"log"]
        assert filled.kv.namespaces(b"absent") == []

    def test_scoped_view_lists_its_namespaces(self, filled: durastate.Store) -> None:
        assert filled.kv.scope(b"many").namespaces(after=b"a") == filled.kv.namespaces(b"many", after=b"a")

    def test_cleared_scope_disappears(self, filled: durastate.Store) -> None:
        filled.kv.clear(b"many")
        assert b"many" not in filled.kv.scopes(limit=1000)
        assert filled.kv.namespaces(b"many") == []

    def test_empty_store_lists_nothing(self, store: durastate.Store) -> None:
        assert store.kv.scopes() == []

    @pytest.mark.parametrize("limit", [0, -1, 10_001, True, "5", None])
    def test_bad_limit_is_refused(self, store: durastate.Store, limit: Any) -> None:
        with pytest.raises(InvalidRequest, match="limit"):
            store.kv.scopes(limit=limit)

    def test_bad_names_are_refused(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="after"):
            store.kv.scopes(after="text")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="scope"):
            store.kv.namespaces("text")  # type: ignore[arg-type]
