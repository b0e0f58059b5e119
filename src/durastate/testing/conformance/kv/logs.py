"""Conformance for ``store.kv``: logs, counters and the scope view (``ScopedKV``)."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import InvalidRequest
from durastate.kv import KV, PAGE_SIZE, ScopedKV
from durastate.kv import SCHEMA as KV_SCHEMA
from durastate.testing.clock import FakeClock

from .._schema_edits import migrate_again, rewind
from .common import INT64_MAX, INT64_MIN, ODD_KEYS, value_of

__all__ = ["TestKVCounters", "TestKVLogAttemptMigration", "TestKVLogs", "TestScopedKV"]


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


class TestKVLogAttemptMigration:
    def test_a_log_from_before_the_attempt_column_goes_on_after_it(
        self, open_store: Callable[..., durastate.Store]
    ) -> None:
        """Schema step 3 of kv (the attempt id an append carries) migrates a store that has logs."""
        store = open_store()
        first = store.kv.append(b"s", b"n", b"k", b"before")
        # The database as step 2 left it (no attempt column), then migrated again.
        rewind(store.engine, KV_SCHEMA, 2, "DROP INDEX {p}kv_log_attempt", "ALTER TABLE {p}kv_log DROP COLUMN attempt")
        store = migrate_again(store, KV_SCHEMA, open_store)
        second = store.kv.append(b"s", b"n", b"k", b"after")
        with store.transaction():
            third = store.kv.append(b"s", b"n", b"k", b"inside")
        assert (second, third) == (first + 1, first + 2)
        assert list(store.kv.log(b"s", b"n", b"k")) == [(first, b"before"), (second, b"after"), (third, b"inside")]


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
