"""Conformance: ``kv.take``, ``take_first``/``take_last``, ``put_if_absent``, ``put_many(if_absent=True)``.

One statement each, and ``kv.require_absent``, the check a writer sends with
its writes to go in one flight when its key is new.

Each is atomic on its own: of concurrent callers on one key exactly one
takes the value / creates the key (checked with threads racing on the same
keys); racing ``take_first``/``take_last`` callers each get a different
pair. Expired values count as absent. Time moves only through the
``clock`` fixture.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import durastate
from durastate import InvalidRequest
from durastate.engines.deferred import RequirementFailed
from durastate.kv.statements import PUT_CHUNK
from durastate.testing.clock import FakeClock

__all__ = [
    "TestKVPutIfAbsent",
    "TestKVPutManyIfAbsent",
    "TestKVRequireAbsent",
    "TestKVTake",
    "TestKVTakeFirstAndLast",
]

S, NS = b"scope", b"ns"


def _race(threads: int, work: Callable[[int], None]) -> None:
    """Run ``work(n)`` in ``threads`` threads released together; re-raise the first error."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            barrier.wait()
            work(n)
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    if errors:
        raise errors[0]


class TestKVTake:
    def test_returns_the_value_and_removes_it(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"v")
        store.kv.put(S, NS, b"other", b"o")
        assert store.kv.take(S, NS, b"k") == b"v"
        assert store.kv.get(S, NS, b"k") is None
        assert store.kv.take(S, NS, b"k") is None
        assert store.kv.get(S, NS, b"other") == b"o"

    def test_absent_key_is_none(self, store: durastate.Store) -> None:
        assert store.kv.take(S, NS, b"missing") is None

    def test_empty_value_is_not_a_miss(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"")
        assert store.kv.take(S, NS, b"k") == b""

    def test_expired_value_is_a_miss_and_removed(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(S, NS, b"k", b"v", ttl=10)
        clock.advance(10)
        assert store.kv.take(S, NS, b"k") is None
        assert store.kv.delete(S, NS, keys=[b"k"]) == 0  # the expired row went with the take

    def test_rolled_back_take_keeps_the_value(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"v")
        with pytest.raises(RuntimeError), store.transaction():
            assert store.kv.take(S, NS, b"k") == b"v"
            raise RuntimeError("undo")
        assert store.kv.get(S, NS, b"k") == b"v"

    def test_concurrent_takes_hand_each_value_out_once(self, store: durastate.Store) -> None:
        keys = [b"k%d" % i for i in range(20)]
        store.kv.put_many(S, NS, [(key, b"v-" + key) for key in keys])
        taken: list[bytes] = []
        lock = threading.Lock()

        def work(n: int) -> None:
            for key in keys:
                value = store.kv.take(S, NS, key)
                if value is not None:
                    with lock:
                        taken.append(value)

        _race(6, work)
        assert sorted(taken) == sorted(b"v-" + key for key in keys)

    def test_scoped_view(self, store: durastate.Store) -> None:
        view = store.kv.scope(S)
        view.put(NS, b"k", b"v")
        assert view.take(NS, b"k") == b"v"
        assert view.take(NS, b"k") is None

    def test_bad_key_is_refused(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="key must be bytes"):
            store.kv.take(S, NS, "k")  # type: ignore[arg-type]


class TestKVTakeFirstAndLast:
    def test_the_smallest_and_the_greatest_key_in_turn(self, store: durastate.Store) -> None:
        store.kv.put_many(S, NS, [(b"b", b"2"), (b"a", b"1"), (b"c", b"3"), (b"d", b"4")])
        store.kv.put(S, b"other", b"0", b"elsewhere")
        store.kv.put(b"other scope", NS, b"0", b"elsewhere")
        assert store.kv.take_first(S, NS) == (b"a", b"1")
        assert store.kv.take_last(S, NS) == (b"d", b"4")
        assert store.kv.take_last(S, NS) == (b"c", b"3")
        assert store.kv.take_first(S, NS) == (b"b", b"2")
        assert store.kv.take_first(S, NS) is None
        assert store.kv.take_last(S, NS) is None
        assert store.kv.get(S, b"other", b"0") == b"elsewhere"
        assert store.kv.get(b"other scope", NS, b"0") == b"elsewhere"

    def test_an_empty_value_is_taken(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"")
        assert store.kv.take_last(S, NS) == (b"k", b"")

    def test_expired_values_are_passed_over(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(S, NS, b"a", b"gone", ttl=5)
        store.kv.put(S, NS, b"b", b"live")
        store.kv.put(S, NS, b"c", b"gone", ttl=5)
        clock.advance(10)
        assert store.kv.take_last(S, NS) == (b"b", b"live")
        assert store.kv.take_first(S, NS) is None

    def test_rolled_back_take_keeps_the_pair(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"v")
        with pytest.raises(RuntimeError), store.transaction():
            assert store.kv.take_first(S, NS) == (b"k", b"v")
            raise RuntimeError("undo")
        assert store.kv.get(S, NS, b"k") == b"v"

    def test_concurrent_takers_each_get_a_different_pair_and_none_comes_back_empty(
        self, store: durastate.Store
    ) -> None:
        pairs = [(b"k%02d" % i, b"v%02d" % i) for i in range(30)]
        store.kv.put_many(S, NS, pairs)
        taken: list[tuple[bytes, bytes] | None] = []
        lock = threading.Lock()

        def work(n: int) -> None:
            take = store.kv.take_first if n % 2 else store.kv.take_last
            for _ in range(5):  # 6 takers x 5 = the 30 pairs: every take finds one left
                pair = take(S, NS)
                with lock:
                    taken.append(pair)

        _race(6, work)
        assert None not in taken  # a taker that met another's row took the next, not "empty"
        assert sorted(pair for pair in taken if pair is not None) == pairs  # each pair once
        assert store.kv.take_first(S, NS) is None

    def test_scoped_view(self, store: durastate.Store) -> None:
        view = store.kv.scope(S)
        view.put_many(NS, [(b"a", b"1"), (b"b", b"2")])
        assert view.take_last(NS) == (b"b", b"2")
        assert view.take_first(NS) == (b"a", b"1")
        assert view.take_first(NS) is None

    def test_bad_scope_or_ns_is_refused_and_takes_nothing(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"v")
        with pytest.raises(InvalidRequest, match="ns must be bytes"):
            store.kv.take_first(S, "ns")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="scope must be bytes"):
            store.kv.take_last(1, NS)  # type: ignore[arg-type]
        assert store.kv.get(S, NS, b"k") == b"v"


class TestKVPutIfAbsent:
    def test_creates_only_once(self, store: durastate.Store) -> None:
        assert store.kv.put_if_absent(S, NS, b"k", b"first") is True
        assert store.kv.put_if_absent(S, NS, b"k", b"second") is False
        assert store.kv.get(S, NS, b"k") == b"first"

    def test_ttl_applies_and_an_expired_value_counts_as_absent(self, store: durastate.Store, clock: FakeClock) -> None:
        assert store.kv.put_if_absent(S, NS, b"k", b"v1", ttl=5) is True
        assert store.kv.put_if_absent(S, NS, b"k", b"v2", ttl=5) is False
        clock.advance(5)
        assert store.kv.get(S, NS, b"k") is None
        assert store.kv.put_if_absent(S, NS, b"k", b"v3") is True
        clock.advance(3600)
        assert store.kv.get(S, NS, b"k") == b"v3"  # stored without a deadline
        assert store.kv.put_if_absent(S, NS, b"k", b"v4") is False

    def test_a_persistent_value_is_never_replaced(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(S, NS, b"k", b"v")
        clock.advance(10**6)
        assert store.kv.put_if_absent(S, NS, b"k", b"x", ttl=1) is False
        assert store.kv.get(S, NS, b"k") == b"v"

    def test_refusal_does_not_doom_the_transaction(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"v")
        with store.transaction():
            assert store.kv.put_if_absent(S, NS, b"k", b"x") is False
            store.kv.put(S, NS, b"after", b"a")
        assert store.kv.get_many(S, NS, [b"k", b"after"]) == [b"v", b"a"]

    def test_concurrent_callers_one_winner_per_key(self, store: durastate.Store) -> None:
        keys = [b"k%d" % i for i in range(20)]
        winners: dict[bytes, bytes] = {}
        lock = threading.Lock()

        def work(n: int) -> None:
            mine = b"%d" % n
            for key in keys:
                if store.kv.put_if_absent(S, NS, key, mine):
                    with lock:
                        assert key not in winners
                        winners[key] = mine

        _race(6, work)
        assert sorted(winners) == sorted(keys)
        assert store.kv.get_many(S, NS, keys) == [winners[key] for key in keys]

    @pytest.mark.parametrize(
        ("value", "ttl", "message"),
        [("text", None, "value must be bytes"), (b"v", 0, "ttl"), (b"v", -1, "ttl"), (b"v", "1", "ttl")],
    )
    def test_bad_input_is_refused_and_writes_nothing(
        self, store: durastate.Store, value: object, ttl: object, message: str
    ) -> None:
        with pytest.raises(InvalidRequest, match=message):
            store.kv.put_if_absent(S, NS, b"k", value, ttl=ttl)  # type: ignore[arg-type]
        assert store.kv.get(S, NS, b"k") is None

    def test_scoped_view(self, store: durastate.Store) -> None:
        view = store.kv.scope(S)
        assert view.put_if_absent(NS, b"k", b"v") is True
        assert view.put_if_absent(NS, b"k", b"w") is False
        assert view.get(NS, b"k") == b"v"


class TestKVPutManyIfAbsent:
    def test_stores_only_the_absent_keys(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"a", b"old")
        assert store.kv.put_many(S, NS, [(b"a", b"new"), (b"b", b"new"), (b"c", b"new")], if_absent=True) == 2
        assert store.kv.get_many(S, NS, [b"a", b"b", b"c"]) == [b"old", b"new", b"new"]
        assert store.kv.put_many(S, NS, [(b"a", b"newer"), (b"b", b"newer")], if_absent=True) == 0

    def test_the_count_inside_a_transaction_and_past_one_statement(self, store: durastate.Store) -> None:
        # Inside a transaction the count is the statement's (on PostgreSQL it waits for it); a batch past
        # PUT_CHUNK is several statements, whose counts add up.
        store.kv.put_many(S, NS, [(b"%04d" % i, b"old") for i in range(0, PUT_CHUNK + 10, 2)])
        batch = [(b"%04d" % i, b"new") for i in range(PUT_CHUNK + 10)]
        with store.transaction():
            assert store.kv.put_many(S, NS, batch, if_absent=True) == (PUT_CHUNK + 10) // 2
            assert store.kv.put_many(S, NS, [(b"x", b"1")], if_absent=True) == 1
        assert store.kv.put_many(S, NS, batch, if_absent=True) == 0
        assert store.kv.get_many(S, NS, [b"0000", b"0001"]) == [b"old", b"new"]

    def test_without_if_absent_the_count_is_every_distinct_key(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"a", b"old")
        assert store.kv.put_many(S, NS, [(b"a", b"new"), (b"b", b"new"), (b"a", b"newer")]) == 2
        assert store.kv.put_many(S, NS, []) == 0
        assert store.kv.get(S, NS, b"a") == b"newer"

    def test_the_first_of_duplicates_wins(self, store: durastate.Store) -> None:
        assert store.kv.put_many(S, NS, [(b"k", b"first"), (b"k", b"second")], if_absent=True) == 1
        assert store.kv.get(S, NS, b"k") == b"first"
        assert store.kv.put_many(S, NS, [(b"one", b"only")], if_absent=True) == 1  # the one-row path
        assert store.kv.put_many(S, NS, [(b"one", b"again")], if_absent=True) == 0
        assert store.kv.get(S, NS, b"one") == b"only"

    def test_an_expired_value_counts_as_absent_and_ttl_applies(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(S, NS, b"gone", b"old", ttl=5)
        store.kv.put(S, NS, b"live", b"old", ttl=50)
        clock.advance(10)
        batch = [(b"gone", b"new"), (b"live", b"new"), (b"fresh", b"new")]
        assert store.kv.put_many(S, NS, batch, ttl=20, if_absent=True) == 2
        assert store.kv.get_many(S, NS, [b"gone", b"live", b"fresh"]) == [b"new", b"old", b"new"]
        clock.advance(25)
        assert store.kv.get_many(S, NS, [b"gone", b"live", b"fresh"]) == [None, b"old", None]

    def test_all_or_nothing_inside_a_transaction(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"a", b"old")
        with pytest.raises(RuntimeError), store.transaction():
            store.kv.put_many(S, NS, [(b"a", b"new"), (b"b", b"new")], if_absent=True)
            raise RuntimeError("roll back")
        assert store.kv.get_many(S, NS, [b"a", b"b"]) == [b"old", None]

    def test_a_non_bool_is_refused_and_writes_nothing(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="if_absent must be a bool"):
            store.kv.put_many(S, NS, [(b"k", b"v")], if_absent="yes")  # type: ignore[arg-type]
        assert store.kv.get(S, NS, b"k") is None

    def test_scoped_view(self, store: durastate.Store) -> None:
        view = store.kv.scope(S)
        assert view.put_many(NS, [(b"k", b"v")], if_absent=True) == 1
        assert view.put_many(NS, [(b"k", b"w")], if_absent=True) == 0
        assert view.get(NS, b"k") == b"v"


class TestKVRequireAbsent:
    def test_an_absent_key_lets_the_transaction_commit(self, store: durastate.Store) -> None:
        with store.transaction():
            store.kv.require_absent(S, NS, b"k")
            store.kv.put(S, NS, b"k", b"v")
            store.kv.put(S, b"other", b"k", b"w")
        assert store.kv.get(S, NS, b"k") == b"v"
        assert store.kv.get(S, b"other", b"k") == b"w"

    def test_a_stored_key_fails_the_transaction_and_undoes_its_writes(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"old")
        with pytest.raises(RequirementFailed, match="the key holds no value"), store.transaction():
            store.kv.require_absent(S, NS, b"k")
            store.kv.put(S, NS, b"k", b"new")
            store.kv.put(S, b"other", b"k", b"w")
        assert store.kv.get(S, NS, b"k") == b"old"
        assert store.kv.get(S, b"other", b"k") is None

    def test_a_failure_in_a_savepoint_leaves_the_outer_transaction_going(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k", b"old")
        with store.transaction():
            store.kv.put(S, NS, b"before", b"b")
            with pytest.raises(RequirementFailed), store.transaction():
                store.kv.require_absent(S, NS, b"k")
                store.kv.put(S, NS, b"k", b"new")
            store.kv.put(S, NS, b"after", b"a")
        assert [store.kv.get(S, NS, key) for key in (b"k", b"before", b"after")] == [b"old", b"b", b"a"]

    def test_an_expired_value_counts_as_absent(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.put(S, NS, b"k", b"v", ttl=5)
        with pytest.raises(RequirementFailed), store.transaction():
            store.kv.require_absent(S, NS, b"k")
        clock.advance(5)
        with store.transaction():
            store.kv.require_absent(S, NS, b"k")
            store.kv.put(S, NS, b"k", b"again")
        assert store.kv.get(S, NS, b"k") == b"again"

    def test_only_that_key_counts(self, store: durastate.Store) -> None:
        store.kv.put(S, NS, b"k2", b"v")
        store.kv.put(S, b"other", b"k", b"v")
        store.kv.put(b"other", NS, b"k", b"v")
        with store.transaction():
            store.kv.require_absent(S, NS, b"k")
            store.kv.scope(S).require_absent(NS, b"k")
            store.kv.put(S, NS, b"k", b"mine")
        assert store.kv.get(S, NS, b"k") == b"mine"

    def test_outside_a_transaction_and_bad_arguments_are_refused(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="needs an open transaction"):
            store.kv.require_absent(S, NS, b"k")
        with pytest.raises(InvalidRequest, match="key must be bytes"), store.transaction():
            store.kv.require_absent(S, NS, "k")  # type: ignore[arg-type]
