"""Conformance for ``store.kv``: refused input, the hypothesis model, index use and the listing
methods.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import durastate
from durastate import InvalidRequest, kv
from durastate.kv import KV, PAGE_SIZE, PRUNE_BATCH
from durastate.testing.clock import FakeClock

from ..plans import STATISTICS, assert_index_search, plan_of, with_statistics
from .common import INT64_MAX, INT64_MIN, ODD_KEYS, KVCall, expect_invalid, kv_fingerprint, page_crossing_keys, seed_kv

__all__ = ["TestKVListing", "TestKVBadInput", "TestKVIndexUse", "TestKVModel"]

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

    def test_counter_page(self, filled: durastate.Store) -> None:
        plan = plan_of(filled, kv.COUNTER_PAGE[True], (b"s", b"n", b"k", PAGE_SIZE))
        assert_index_search(plan, self.table(filled, "kv_counter"), using=("scope", "ns", "key"))
        plan = plan_of(filled, kv.COUNTER_PAGE[False], (b"s", b"n", PAGE_SIZE))
        assert_index_search(plan, self.table(filled, "kv_counter"), using=("scope", "ns"))

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

    def test_log_keys_and_counters_of_a_namespace(self, store: durastate.Store) -> None:
        kv = store.kv
        for key in (b"b", b"\xff", b"", b"a"):
            kv.append(b"s", b"logs", key, b"entry")
            kv.append(b"s", b"logs", key, b"entry 2")  # a key with two entries is listed once
            kv.incr(b"s", b"cnt", key, len(key) + 1)
        kv.append(b"s", b"other", b"z", b"v")
        kv.put(b"s", b"logs", b"value-only", b"v")  # values are not logs
        assert kv.log_keys(b"s", b"logs") == [b"", b"a", b"b", b"\xff"]
        assert kv.log_keys(b"s", b"logs", after=b"a", limit=1) == [b"b"]
        assert kv.log_keys(b"s", b"absent") == []
        assert kv.counters(b"s", b"cnt") == [(b"", 1), (b"a", 2), (b"b", 2), (b"\xff", 2)]
        assert kv.counters(b"s", b"cnt", after=b"a", limit=2) == [(b"b", 2), (b"\xff", 2)]
        assert kv.scope(b"s").counters(b"cnt", limit=1) == [(b"", 1)]
        assert kv.scope(b"s").log_keys(b"logs", after=b"b") == [b"\xff"]
        kv.delete(b"s", b"logs", all=True)  # deletes values, not logs
        assert kv.log_keys(b"s", b"logs", limit=2) == [b"", b"a"]
        kv.delete_counter(b"s", b"cnt", b"")
        assert [k for k, _ in kv.counters(b"s", b"cnt")] == [b"a", b"b", b"\xff"]

    @pytest.mark.parametrize("limit", [0, 10_001, True, None])
    def test_log_keys_and_counters_refuse_bad_input(self, store: durastate.Store, limit: Any) -> None:
        for listing in (store.kv.log_keys, store.kv.counters):
            with pytest.raises(InvalidRequest, match="limit"):
                listing(b"s", b"n", limit=limit)
            with pytest.raises(InvalidRequest, match="ns"):
                listing(b"s", "text")  # type: ignore[arg-type]
            with pytest.raises(InvalidRequest, match="after"):
                listing(b"s", b"n", after="text")  # type: ignore[arg-type]
