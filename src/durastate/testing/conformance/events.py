"""Conformance: the ``store.events`` facet (a2's event sessions).

One test per rule of the a2 seed's SQL store (``append``, lanes,
``claimAvailable``, ``renewClaims``, ``completeAttempt``, ``failAttempt``,
snapshots, inspection, streaming), then the rules durastate adds
(``claim_any``, dead letters, ``prune``, transactions, bad input). Every
test runs on every engine; time moves only through the ``clock`` fixture.
Expected values are computed from the inputs and the clock, never copied
from engine output.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import InvalidRequest, events
from durastate.engines.base import DDL, WRITE, Statement
from durastate.events import (
    Cause,
    DuplicateBatch,
    Events,
    StoredEvent,
    SupersededAttempt,
    UnknownEvent,
)
from durastate.testing.clock import FakeClock

from .plans import STATISTICS, assert_index_search, plan_of, with_statistics

__all__ = [
    "TestEventsIndexUse",
    "TestEventsAppend",
    "TestEventsBadInput",
    "TestEventsClaimAny",
    "TestEventsClaims",
    "TestEventsComplete",
    "TestEventsConcurrentAppends",
    "TestEventsDeadLetters",
    "TestEventsFail",
    "TestEventsInspection",
    "TestEventsLanes",
    "TestEventsMigration",
    "TestEventsPrune",
    "TestEventsRanges",
    "TestEventsRenew",
    "TestEventsSnapshots",
    "TestEventsStream",
    "TestEventsTorture",
    "TestEventsTransactions",
]

S = "session-1"


def ev(type: str = "t", payload: Any = None, **extra: Any) -> dict[str, Any]:
    return {"type": type, "payload": payload, **extra}


def now_ms(clock: FakeClock) -> int:
    return int(clock() * 1000)


def everything(events: Events, session: str = S) -> list[StoredEvent]:
    return events.read(session)


def claim_one(events: Events, session: str = S, holder: str = "w", ttl_ms: int = 1000) -> StoredEvent:
    result = events.claim_available(session, holder, ttl_ms=ttl_ms)
    assert result.outcome == "claimed", result
    assert len(result.events) == 1, result
    return result.events[0]


# -- append ------------------------------------------------------------------


class TestEventsAppend:
    def test_empty_batch_appends_nothing_and_reports_pending(self, store: durastate.Store) -> None:
        assert store.events.append(S, []).events == ()
        assert store.events.append(S, []).has_pending is False
        store.events.append(S, [ev()])
        result = store.events.append(S, [])
        assert result.events == ()
        assert result.has_pending is True
        assert [e.index for e in everything(store.events)] == [1]

    def test_indexes_are_dense_from_one_per_session(self, store: durastate.Store) -> None:
        first = store.events.append(S, [ev("a"), ev("b")])
        other = store.events.append("other", [ev("x")])
        second = store.events.append(S, [ev("c")])
        assert [e.index for e in first.events] == [1, 2]
        assert [e.index for e in second.events] == [3]
        assert [e.index for e in other.events] == [1]
        assert [(e.index, e.type) for e in everything(store.events)] == [(1, "a"), (2, "b"), (3, "c")]

    def test_stored_fields_come_from_the_input_and_the_store_clock(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        payload = {"nested": [1, 2.5, "x", None, True], "ü": {}}
        (stored,) = store.events.append(S, [ev("kind", payload, id="id-1", lane="L")]).events
        assert (stored.id, stored.type, stored.payload, stored.session_id, stored.lane) == (
            "id-1",
            "kind",
            payload,
            S,
            "L",
        )
        assert stored.created_at == now_ms(clock)
        assert stored.processed_at is None and stored.attempt_count == 0 and stored.claim_holder is None
        assert everything(store.events) == [stored]

    def test_events_without_id_get_generated_ids(self, store: durastate.Store) -> None:
        made = iter(["gen-1", "gen-2"])
        result = store.events.append(S, [ev(), ev(id="given"), ev()], new_id=lambda: next(made))
        assert [e.id for e in result.events] == ["gen-1", "given", "gen-2"]
        default = store.events.append(S, [ev(), ev()]).events
        assert default[0].id != default[1].id

    def test_replay_of_a_whole_batch_returns_the_first_append(self, store: durastate.Store, clock: FakeClock) -> None:
        first = store.events.append(S, [ev("a", 1, id="x"), ev("b", 2, id="y")])
        clock.advance(5)
        store.events.append(S, [ev("later")])
        replay = store.events.append(S, [ev("a", 1, id="x"), ev("b", 2, id="y")])
        assert replay.events == first.events
        assert replay.has_pending is True
        assert [e.index for e in everything(store.events)] == [1, 2, 3]

    def test_replay_returns_the_stored_state_in_index_order(self, store: durastate.Store) -> None:
        store.events.append(S, [ev("a", id="x"), ev("b", id="y")])
        claimed = store.events.claim_available(S, "w", ttl_ms=10).events
        replay = store.events.append(S, [ev("b", id="y"), ev("a", id="x")])
        assert [e.id for e in replay.events] == ["x", "y"]
        assert list(replay.events) == list(claimed)

    def test_mixing_stored_and_new_ids_is_refused_whole(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(id="x")])
        before = everything(store.events)
        with pytest.raises(DuplicateBatch):
            store.events.append(S, [ev(id="x"), ev(id="new")])
        with pytest.raises(DuplicateBatch):
            store.events.append(S, [ev(id="x"), ev()])  # an event without id is new
        assert everything(store.events) == before

    def test_repeating_an_id_in_one_batch_is_refused(self, store: durastate.Store) -> None:
        with pytest.raises(DuplicateBatch):
            store.events.append(S, [ev(id="x"), ev(id="x")])
        assert everything(store.events) == []
        assert store.events.list_sessions().sessions == ()

    def test_reusing_another_sessions_id_is_refused(self, store: durastate.Store) -> None:
        store.events.append("other", [ev(id="x")])
        with pytest.raises(DuplicateBatch):
            store.events.append(S, [ev(id="x")])
        assert everything(store.events) == []

    def test_settled_events_are_stored_processed(self, store: durastate.Store, clock: FakeClock) -> None:
        result = store.events.append(S, [ev(settled=True), ev(settled=True)])
        assert result.has_pending is False
        assert all(e.processed_at == now_ms(clock) for e in result.events)
        assert store.events.claim_available(S, "w", ttl_ms=10).outcome == "settled"
        assert store.events.append(S, [ev()]).has_pending is True
        assert store.events.append(S, [ev(settled=True)]).has_pending is True  # the earlier one is pending

    def test_cause_of_the_current_attempt_is_accepted_and_stored(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        parent = claim_one(store.events)
        cause = {"index": parent.index, "attempt": parent.attempt_count, "batch_size": 2}
        (child,) = store.events.append(S, [ev("child", cause=cause)]).events
        assert child.cause == Cause(parent.index, parent.attempt_count, 2)
        assert everything(store.events)[-1].cause == Cause(1, 1, 2)

    def test_cause_naming_no_event_is_refused(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        with pytest.raises(UnknownEvent):
            store.events.append(S, [ev(cause={"index": 9, "attempt": 1})])
        with pytest.raises(UnknownEvent):
            store.events.append("other", [ev(cause={"index": 1, "attempt": 1})])
        assert len(everything(store.events)) == 1

    def test_cause_of_a_stale_attempt_is_refused_whole(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        claim_one(store.events, ttl_ms=1000)
        clock.advance(2)
        again = claim_one(store.events, holder="w2")
        assert again.attempt_count == 2
        with pytest.raises(SupersededAttempt):
            store.events.append(S, [ev("ok"), ev("stale", cause={"index": 1, "attempt": 1})])
        assert len(everything(store.events)) == 1
        store.events.append(S, [ev(cause={"index": 1, "attempt": 2})])

    def test_cause_of_an_unclaimed_event_is_refused(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        with pytest.raises(SupersededAttempt):
            store.events.append(S, [ev(cause={"index": 1, "attempt": 1})])

    def test_cause_of_a_dead_lettered_event_is_refused(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        claimed = claim_one(store.events)
        assert store.events.fail_attempt(S, 1, claimed.attempt_count, "x", 1).outcome == "dead_lettered"
        with pytest.raises(SupersededAttempt):
            store.events.append(S, [ev(cause={"index": 1, "attempt": claimed.attempt_count})])

    def test_cause_of_a_failed_but_current_attempt_is_accepted(self, store: durastate.Store) -> None:
        # The fence is the attempt number and dead-lettering, as in the seed.
        store.events.append(S, [ev()])
        claimed = claim_one(store.events)
        assert store.events.fail_attempt(S, 1, claimed.attempt_count, "x", 5).outcome == "failed"
        store.events.append(S, [ev(cause={"index": 1, "attempt": claimed.attempt_count})])


# -- lanes -------------------------------------------------------------------


class TestEventsConcurrentAppends:
    def test_concurrent_appends_get_dense_indexes_committed_in_order(self, store: durastate.Store) -> None:
        """Lone events (one statement), batches and lane events (the session lock) from 4 threads at once.

        A reader tailing ``index > last seen`` must see every event: indexes
        dense and committed in index order, whichever path appended them
        (on PostgreSQL a locked read that waited may be stale, and the
        insert then finds its index taken and takes the next free one).
        """
        store.events.append(S, [ev("first")])  # the session exists: lone appends take their one-statement path
        writers, rounds = 4, 12
        barrier = threading.Barrier(writers + 1)
        done = threading.Event()
        gaps: list[tuple[int, list[int]]] = []

        def writer(n: int) -> None:
            barrier.wait(timeout=30)
            for k in range(rounds):
                if k % 3 == 0:
                    store.events.append(S, [ev("batch", n), ev("batch", n), ev("batch", n)])
                elif k % 3 == 1:
                    store.events.append(S, [ev("lane", n, lane=f"lane-{n}")])
                else:
                    store.events.append(S, [ev("lone", n)])

        def reader() -> None:
            barrier.wait(timeout=30)
            last = 1
            while True:
                finished = done.is_set()
                seen = [e.index for e in store.events.read(S, last)]
                if seen and seen != list(range(last + 1, last + 1 + len(seen))):
                    gaps.append((last, seen))
                    return
                last = seen[-1] if seen else last
                if finished and not seen:
                    return

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
        tail = threading.Thread(target=reader)
        for t in [*threads, tail]:
            t.start()
        for t in threads:
            t.join(timeout=120)
        done.set()
        tail.join(timeout=120)
        assert gaps == []
        total = 1 + writers * (rounds // 3) * (3 + 1 + 1)
        assert [e.index for e in everything(store.events)] == list(range(1, total + 1))
        claimed = {e.index for e in store.events.claim_available(S, "w", ttl_ms=1000).events}
        for n in range(writers):  # each lane's first event is its head, the others wait behind it
            lane = [e.index for e in everything(store.events) if e.lane == f"lane-{n}"]
            assert len(lane) == rounds // 3
            assert lane[0] in claimed and not claimed & set(lane[1:])


class TestEventsLanes:
    def test_only_the_first_unprocessed_event_of_a_lane_is_ready(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A"), ev(lane="A"), ev(lane="B"), ev(), ev(lane="A")])
        claimed = store.events.claim_available(S, "w", ttl_ms=1000)
        assert [e.index for e in claimed.events] == [1, 3, 4]

    def test_completing_the_head_promotes_the_next(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A"), ev(lane="A"), ev(lane="A")])
        for expected in (1, 2, 3):
            head = claim_one(store.events)
            assert head.index == expected
            assert store.events.claim_available(S, "w", ttl_ms=1000).outcome == "busy"
            assert store.events.complete_attempt(S, head.index, head.attempt_count).outcome == "completed"
        assert store.events.claim_available(S, "w", ttl_ms=1000).outcome == "settled"

    def test_lane_appended_after_its_head_waits(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A")])
        head = claim_one(store.events)
        store.events.append(S, [ev(lane="A")])
        assert store.events.claim_available(S, "w", ttl_ms=1000).outcome == "busy"
        store.events.complete_attempt(S, head.index, head.attempt_count)
        assert claim_one(store.events).index == 2

    def test_settled_events_do_not_block_their_lane(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A", settled=True), ev(lane="A")])
        assert claim_one(store.events).index == 2

    def test_a_failed_head_stays_the_head(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A"), ev(lane="A")])
        head = claim_one(store.events)
        store.events.fail_attempt(S, head.index, head.attempt_count, "oops", 5)
        again = claim_one(store.events)
        assert (again.index, again.attempt_count) == (1, 2)

    def test_a_dead_lettered_head_blocks_its_lane(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A"), ev(lane="A"), ev(lane="B")])
        claimed = store.events.claim_available(S, "w", ttl_ms=1000).events
        assert [e.index for e in claimed] == [1, 3]
        store.events.fail_attempt(S, 1, 1, "dead", 1)
        store.events.complete_attempt(S, 3, 1)
        assert store.events.claim_available(S, "w", ttl_ms=1000).outcome == "settled"

    def test_completion_children_join_lanes(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(lane="A"), ev(lane="A")])
        head = claim_one(store.events)
        store.events.complete_attempt(S, 1, head.attempt_count, [ev(id="c1", lane="A"), ev(id="c2", lane="C")])
        claimed = store.events.claim_available(S, "w", ttl_ms=1000).events
        assert [e.index for e in claimed] == [2, 4]


# -- claims ------------------------------------------------------------------


class TestEventsClaims:
    def test_claim_takes_every_ready_event_in_index_order(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev("a"), ev("b"), ev("c")])
        clock.advance(1)
        result = store.events.claim_available(S, "holder-1", ttl_ms=500)
        assert result.outcome == "claimed"
        now = now_ms(clock)
        assert [(e.index, e.attempt_count, e.claim_holder, e.claim_expires_at) for e in result.events] == [
            (i, 1, "holder-1", now + 500) for i in (1, 2, 3)
        ]
        assert all(e.first_claimed_at == now == e.last_claimed_at for e in result.events)
        assert everything(store.events) == list(result.events)

    def test_limit_bounds_the_claim(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(), ev(), ev()])
        assert [e.index for e in store.events.claim_available(S, "w", ttl_ms=5, limit=2).events] == [1, 2]
        assert [e.index for e in store.events.claim_available(S, "w", ttl_ms=5, limit=2).events] == [3]

    def test_explicit_expiry_wins_over_ttl(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        at = now_ms(clock) + 12_345
        (e,) = store.events.claim_available(S, "w", ttl_ms=1, expires_at_ms=at).events
        assert e.claim_expires_at == at

    def test_excluded_indexes_are_not_claimed(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(), ev(), ev()])
        result = store.events.claim_available(S, "w", ttl_ms=5, exclude_indexes=[2, 99])
        assert [e.index for e in result.events] == [1, 3]
        only_excluded = store.events.claim_available(S, "w", ttl_ms=5, exclude_indexes=[2])
        assert only_excluded.outcome == "busy"

    def test_busy_reports_the_earliest_live_expiry(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        store.events.claim_available(S, "w", ttl_ms=900)
        store.events.append(S, [ev()])
        store.events.claim_available(S, "w", ttl_ms=300)
        result = store.events.claim_available(S, "w", ttl_ms=5)
        assert (result.outcome, result.events, result.retry_at) == ("busy", (), now_ms(clock) + 300)

    def test_settled_when_nothing_is_claimable_or_claimed(self, store: durastate.Store) -> None:
        assert store.events.claim_available("nothing", "w", ttl_ms=5).outcome == "settled"
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        store.events.complete_attempt(S, e.index, e.attempt_count)
        result = store.events.claim_available(S, "w", ttl_ms=5)
        assert (result.outcome, result.retry_at) == ("settled", None)

    def test_an_expired_lease_is_claimed_again_with_the_next_attempt(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.events.append(S, [ev()])
        first = claim_one(store.events, ttl_ms=1000)
        clock.advance(0.999)
        assert store.events.claim_available(S, "w2", ttl_ms=1000).outcome == "busy"
        clock.advance(0.001)
        second = claim_one(store.events, holder="w2")
        assert (second.attempt_count, second.claim_holder) == (2, "w2")
        assert second.first_claimed_at == first.first_claimed_at
        assert second.last_claimed_at == now_ms(clock)

    def test_processed_and_dead_events_are_never_claimed(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev(), ev()])
        a, b = store.events.claim_available(S, "w", ttl_ms=10).events
        store.events.complete_attempt(S, a.index, a.attempt_count)
        store.events.fail_attempt(S, b.index, b.attempt_count, "x", 1)
        clock.advance(60)
        assert store.events.claim_available(S, "w", ttl_ms=10).outcome == "settled"

    def test_concurrent_claimers_never_share_an_event(self, store: durastate.Store) -> None:
        store.events.append(S, [ev() for _ in range(40)])
        got: list[list[int]] = [[] for _ in range(4)]
        barrier = threading.Barrier(4)

        def worker(n: int) -> None:
            barrier.wait(timeout=30)
            for _ in range(10):
                result = store.events.claim_available(S, f"w{n}", ttl_ms=60_000, limit=2)
                got[n].extend(e.index for e in result.events)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        claimed = [i for g in got for i in g]
        assert sorted(claimed) == list(range(1, 41))


# -- renew -------------------------------------------------------------------


class TestEventsRenew:
    def test_renew_extends_live_leases_of_the_holder(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev(), ev()])
        store.events.claim_available(S, "w", ttl_ms=1000)
        clock.advance(0.5)
        result = store.events.renew_claims(
            S, "w", [{"index": 2, "attempt": 1}, {"index": 1, "attempt": 1}], ttl_ms=1000
        )
        assert (result.renewed, result.superseded) == ((1, 2), ())
        assert {e.claim_expires_at for e in everything(store.events)} == {now_ms(clock) + 1000}

    def test_renew_with_explicit_expiry(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        store.events.claim_available(S, "w", ttl_ms=1000)
        at = now_ms(clock) + 77_000
        store.events.renew_claims(S, "w", [{"index": 1, "attempt": 1}], ttl_ms=1, expires_at_ms=at)
        assert everything(store.events)[0].claim_expires_at == at

    def test_reclaimed_events_are_reported_superseded(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        store.events.claim_available(S, "w", ttl_ms=1000)
        clock.advance(2)
        claim_one(store.events, holder="w2")
        result = store.events.renew_claims(S, "w", [{"index": 1, "attempt": 1}], ttl_ms=1000)
        assert (result.renewed, result.superseded) == ((), (1,))

    def test_expired_foreign_unknown_and_processed_claims_are_neither(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.events.append(S, [ev(), ev(), ev()])
        store.events.claim_available(S, "w", ttl_ms=1000)
        store.events.complete_attempt(S, 3, 1)
        clock.advance(0.5)
        foreign = store.events.renew_claims(S, "other", [{"index": 1, "attempt": 1}], ttl_ms=1000)
        assert (foreign.renewed, foreign.superseded) == ((), ())
        clock.advance(0.5)  # expired now (expiry == now)
        result = store.events.renew_claims(
            S, "w", [{"index": 1, "attempt": 1}, {"index": 3, "attempt": 1}, {"index": 42, "attempt": 1}], ttl_ms=5
        )
        assert (result.renewed, result.superseded) == ((), ())

    def test_empty_renew_changes_nothing(self, store: durastate.Store) -> None:
        result = store.events.renew_claims(S, "w", [], ttl_ms=5)
        assert (result.renewed, result.superseded) == ((), ())


# -- complete ----------------------------------------------------------------


class TestEventsComplete:
    def test_complete_marks_processed_and_appends_children(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev(), ev()])
        claimed = store.events.claim_available(S, "w", ttl_ms=1000).events
        clock.advance(1)
        result = store.events.complete_attempt(
            S, 1, claimed[0].attempt_count, [ev("c", {"n": 1}, id="c1"), ev("d", id="c2", lane="L", settled=True)]
        )
        assert result.outcome == "completed"
        now = now_ms(clock)
        assert [(e.index, e.id, e.cause, e.lane, e.processed_at) for e in result.events] == [
            (3, "c1", Cause(1, 1), None, None),
            (4, "c2", Cause(1, 1), "L", now),
        ]
        parent = store.events.get(S, 1)
        assert parent is not None
        assert (parent.processed_at, parent.processed_by_attempt, parent.returned_event_ids) == (now, 1, ("c1", "c2"))
        assert (parent.claim_holder, parent.claim_expires_at) == (None, None)
        assert everything(store.events)[2:] == list(result.events)

    def test_complete_retry_returns_the_stored_children(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        first = store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c1"), ev(id="c2")])
        clock.advance(1)
        store.events.append(S, [ev("after")])
        retry = store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c1"), ev(id="c2")])
        assert retry == first
        assert len(everything(store.events)) == 4

    def test_complete_retry_without_children(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        assert store.events.complete_attempt(S, 1, e.attempt_count).outcome == "completed"
        assert store.events.complete_attempt(S, 1, e.attempt_count).events == ()

    def test_complete_retry_with_another_batch_is_refused(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c1"), ev(id="c2")])
        before = everything(store.events)
        for batch in ([ev(id="c1")], [ev(id="c2"), ev(id="c1")], [ev(id="c1"), ev(id="c2"), ev(id="c3")], []):
            with pytest.raises(DuplicateBatch):
                store.events.complete_attempt(S, 1, e.attempt_count, batch)
        assert everything(store.events) == before

    def test_stale_attempt_is_superseded_and_changes_nothing(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        claim_one(store.events, ttl_ms=1000)
        clock.advance(2)
        claim_one(store.events, holder="w2")
        before = everything(store.events)
        assert store.events.complete_attempt(S, 1, 1, [ev(id="c1")]).outcome == "superseded"
        assert everything(store.events) == before

    def test_completed_by_another_attempt_is_superseded(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        claim_one(store.events, ttl_ms=1000)
        clock.advance(2)
        second = claim_one(store.events, holder="w2")
        store.events.complete_attempt(S, 1, second.attempt_count)
        assert store.events.complete_attempt(S, 1, 1).outcome == "superseded"

    def test_failed_dead_settled_and_unclaimed_are_superseded(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(), ev(), ev(settled=True), ev()])
        a, b = store.events.claim_available(S, "w", ttl_ms=1000, exclude_indexes=[4]).events
        store.events.fail_attempt(S, a.index, a.attempt_count, "x", 5)
        store.events.fail_attempt(S, b.index, b.attempt_count, "x", 1)
        assert store.events.complete_attempt(S, a.index, a.attempt_count).outcome == "superseded"
        assert store.events.complete_attempt(S, b.index, b.attempt_count).outcome == "superseded"
        assert store.events.complete_attempt(S, 3, 0).outcome == "superseded"
        assert store.events.complete_attempt(S, 4, 0).outcome == "superseded"

    def test_an_expired_but_unclaimed_lease_may_still_complete(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events, ttl_ms=10)
        clock.advance(5)
        assert store.events.complete_attempt(S, 1, e.attempt_count).outcome == "completed"

    def test_complete_of_an_unknown_event_raises(self, store: durastate.Store) -> None:
        with pytest.raises(UnknownEvent):
            store.events.complete_attempt(S, 1, 1)
        store.events.append(S, [ev()])
        with pytest.raises(UnknownEvent):
            store.events.complete_attempt(S, 2, 1)

    def test_duplicate_or_existing_child_ids_are_refused_whole(self, store: durastate.Store) -> None:
        store.events.append("other", [ev(id="taken")])
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        before = everything(store.events)
        with pytest.raises(DuplicateBatch):
            store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c"), ev(id="c")])
        with pytest.raises(DuplicateBatch):
            store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="new"), ev(id="taken")])
        assert everything(store.events) == before
        assert store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="new")]).outcome == "completed"

    def test_children_need_ids_and_no_cause(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        with pytest.raises(InvalidRequest):
            store.events.complete_attempt(S, 1, e.attempt_count, [ev()])
        with pytest.raises(InvalidRequest):
            store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c", cause={"index": 1, "attempt": 1})])
        assert store.events.get(S, 1) == e


# -- fail --------------------------------------------------------------------


class TestEventsFail:
    def test_fail_records_the_failure_and_releases_the_claim(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        clock.advance(1)
        result = store.events.fail_attempt(S, 1, e.attempt_count, "boom", 3)
        assert (result.outcome, result.failure_count) == ("failed", 1)
        stored = store.events.get(S, 1)
        assert stored is not None
        now = now_ms(clock)
        assert (stored.failure_count, stored.last_error, stored.last_failed_at, stored.last_failed_attempt) == (
            1,
            "boom",
            now,
            1,
        )
        assert (stored.failed_at, stored.claim_holder, stored.claim_expires_at) == (None, None, None)
        assert claim_one(store.events).attempt_count == 2  # claimable again at once

    def test_dead_lettered_at_max_failures(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        outcomes = []
        for _ in range(3):
            e = claim_one(store.events)
            outcomes.append(store.events.fail_attempt(S, 1, e.attempt_count, "x", 3))
        assert [(r.outcome, r.failure_count) for r in outcomes] == [
            ("failed", 1),
            ("failed", 2),
            ("dead_lettered", 3),
        ]
        stored = store.events.get(S, 1)
        assert stored is not None and stored.failed_at == now_ms(clock)
        assert store.events.claim_available(S, "w", ttl_ms=5).outcome == "settled"

    def test_retrying_a_failure_answers_the_same_outcome(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(), ev()])
        a, b = store.events.claim_available(S, "w", ttl_ms=1000).events
        assert store.events.fail_attempt(S, 1, a.attempt_count, "x", 5).outcome == "failed"
        assert store.events.fail_attempt(S, 1, a.attempt_count, "x", 5) == store.events.fail_attempt(
            S, 1, a.attempt_count, "y", 5
        )
        assert store.events.fail_attempt(S, 1, a.attempt_count, "x", 5).failure_count == 1
        assert store.events.fail_attempt(S, 2, b.attempt_count, "x", 1).outcome == "dead_lettered"
        again = store.events.fail_attempt(S, 2, b.attempt_count, "x", 1)
        assert (again.outcome, again.failure_count) == ("dead_lettered", 1)

    def test_stale_processed_and_unclaimed_attempts_are_superseded(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.events.append(S, [ev(), ev()])
        store.events.claim_available(S, "w", ttl_ms=1000)
        store.events.complete_attempt(S, 2, 1)
        clock.advance(2)
        assert claim_one(store.events, holder="w2").attempt_count == 2
        before = everything(store.events)
        assert store.events.fail_attempt(S, 1, 1, "stale", 5).outcome == "superseded"  # re-claimed
        assert store.events.fail_attempt(S, 2, 1, "done", 5).outcome == "superseded"  # processed
        assert everything(store.events) == before

    def test_fail_of_a_never_claimed_event_is_superseded(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        result = store.events.fail_attempt(S, 1, 0, "x", 5)
        assert (result.outcome, result.failure_count) == ("superseded", 0)

    def test_fail_of_an_unknown_event_raises(self, store: durastate.Store) -> None:
        with pytest.raises(UnknownEvent):
            store.events.fail_attempt(S, 1, 1, "x", 1)


# -- snapshots ---------------------------------------------------------------


class TestEventsSnapshots:
    def test_read_state_without_snapshot_returns_all_events(self, store: durastate.Store) -> None:
        store.events.append(S, [ev("a"), ev("b")])
        state = store.events.read_state(S, "r")
        assert state.snapshot is None
        assert list(state.events) == everything(store.events)

    def test_read_state_returns_snapshot_and_later_events(self, store: durastate.Store) -> None:
        store.events.append(S, [ev("a"), ev("b"), ev("c")])
        assert store.events.put_snapshot(S, "r", 2, {"sum": [1, 2]}) is True
        state = store.events.read_state(S, "r")
        assert state.snapshot is not None
        assert (state.snapshot.index, state.snapshot.state) == (2, {"sum": [1, 2]})
        assert [e.index for e in state.events] == [3]
        assert store.events.read_state(S, "other").snapshot is None

    def test_brief_state_is_read_state_with_fewer_fields(self, store: durastate.Store) -> None:
        store.events.append(S, [ev("a", {"n": 1}), ev("b", [2], lane="L"), ev("c", None, settled=True)])
        for with_snapshot in (False, True):
            if with_snapshot:
                store.events.put_snapshot(S, "r", 1, {"sum": 1})
            full = store.events.read_state(S, "r")
            snapshot, brief = store.events._brief_state(S, "r", lambda *fields: fields)
            assert snapshot == full.snapshot
            assert brief == [(e.id, e.type, e.payload, e.index, e.session_id, e.created_at) for e in full.events]

    def test_snapshot_never_moves_backwards(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev() for _ in range(6)])
        store.events.put_snapshot(S, "r", 5, "five")
        written_at = now_ms(clock)
        clock.advance(1)
        assert store.events.put_snapshot(S, "r", 4, "four") is False
        assert store.events.put_snapshot(S, "r", 5, "five again") is False
        snap = store.events.read_state(S, "r").snapshot
        assert snap is not None and (snap.index, snap.state) == (5, "five")
        assert store.events.list_snapshots(S)[0].updated_at == written_at
        assert store.events.put_snapshot(S, "r", 6, None) is True
        snap = store.events.read_state(S, "r").snapshot
        assert snap is not None and (snap.index, snap.state) == (6, None)

    def test_list_snapshots_by_reducer_name(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev() for _ in range(3)])
        store.events.append("other", [ev()])
        store.events.put_snapshot(S, "zeta", 1, {})
        clock.advance(1)
        store.events.put_snapshot(S, "alpha", 3, {})
        store.events.put_snapshot("other", "beta", 1, {})
        infos = store.events.list_snapshots(S)
        assert [(i.reducer_name, i.index, i.updated_at) for i in infos] == [
            ("alpha", 3, now_ms(clock)),
            ("zeta", 1, now_ms(clock) - 1000),
        ]


# -- inspection --------------------------------------------------------------


class TestEventsInspection:
    def test_list_sessions_counts(self, store: durastate.Store, clock: FakeClock) -> None:
        created = now_ms(clock)
        store.events.append("app/1", [ev(), ev(), ev(), ev(settled=True)])
        clock.advance(1)
        a, b, _c = store.events.claim_available("app/1", "w", ttl_ms=10_000).events
        clock.advance(1)
        store.events.complete_attempt("app/1", a.index, a.attempt_count)
        store.events.fail_attempt("app/1", b.index, b.attempt_count, "x", 1)
        page = store.events.list_sessions(prefix="app/")
        (summary,) = page.sessions
        assert (summary.session_id, summary.event_count, summary.pending_count, summary.failed_count) == (
            "app/1",
            4,
            1,
            1,
        )
        assert (summary.attempt_count, summary.failure_count) == (3, 1)
        assert (summary.first_event_at, summary.updated_at) == (created, now_ms(clock))
        assert page.cursor is None

    def test_list_sessions_by_prefix_with_cursor(self, store: durastate.Store) -> None:
        names = ["a", "a/1", "a/2", "a/3", "a0", "b/1", "a/\U0010ffff"]
        for name in names:
            store.events.append(name, [ev()])
        wanted = sorted(n for n in names if n.startswith("a/"))
        seen: list[str] = []
        cursor = None
        while True:
            page = store.events.list_sessions(prefix="a/", limit=2, cursor=cursor)
            seen.extend(s.session_id for s in page.sessions)
            cursor = page.cursor
            if cursor is None:
                break
        assert seen == wanted
        assert [s.session_id for s in store.events.list_sessions(limit=100).sessions] == sorted(names)

    def test_read_events_pages_up_to_a_frontier(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(str(i)) for i in range(5)])
        page = store.events.read_events(S, after_index=1, limit=2)
        assert ([e.index for e in page.events], page.through_index) == ([2, 3], 5)
        store.events.append(S, [ev("late")])
        rest = store.events.read_events(S, after_index=3, limit=10, through_index=page.through_index)
        assert ([e.index for e in rest.events], rest.through_index) == ([4, 5], 5)
        capped = store.events.read_events(S, after_index=0, limit=10, through_index=99)
        assert capped.through_index == 6
        empty = store.events.read_events("nobody", after_index=0, limit=10)
        assert (empty.events, empty.through_index) == ((), 0)

    def test_read_bounds(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(str(i)) for i in range(5)])
        assert [e.index for e in store.events.read(S, after_index=1, through_index=3)] == [2, 3]
        assert [e.index for e in store.events.read(S, after_index=4)] == [5]
        assert [e.index for e in store.events.read(S, through_index=2)] == [1, 2]


# -- stream ------------------------------------------------------------------


class TestEventsStream:
    def test_stream_yields_existing_then_new_events(self, store: durastate.Store) -> None:
        store.events.append(S, [ev("a"), ev("b"), ev("c")])
        stream = store.events.stream(S, start_after=1)
        assert [next(stream).index, next(stream).index] == [2, 3]
        got: list[int] = []
        done = threading.Event()

        def consume() -> None:
            got.append(next(stream).index)
            got.append(next(stream).index)
            done.set()

        t = threading.Thread(target=consume)
        t.start()
        store.events.append(S, [ev("d")])
        store.events.append("other", [ev()])
        store.events.append(S, [ev("e")])
        assert done.wait(timeout=30)
        t.join(timeout=30)
        assert got == [4, 5]
        stream.close()

    def test_stream_stops_when_asked(self, store: durastate.Store) -> None:
        stop = threading.Event()
        store.events.append(S, [ev()])
        stop.set()
        assert [e.index for e in store.events.stream(S, stop=stop)] == [1]

    def test_stream_wakes_promptly_for_another_store(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        reader = open_shared()
        writer = open_shared()
        try:
            writer.events.append(S, [ev()])
            stream = reader.events.stream(S, start_after=1)
            arrived = threading.Event()
            got: list[StoredEvent] = []

            def consume() -> None:
                got.append(next(stream))
                arrived.set()

            t = threading.Thread(target=consume)
            t.start()
            writer.events.append(S, [ev("x")])
            assert arrived.wait(timeout=30)
            t.join(timeout=30)
            assert got[0].type == "x"
            stream.close()
        finally:
            reader.close()
            writer.close()

    def test_stream_raises_store_closed(self, open_store: Callable[..., durastate.Store]) -> None:
        s = open_store()
        stream = s.events.stream(S)
        s.close()
        with pytest.raises(durastate.StoreClosed):
            next(stream)


# -- beyond the seed ---------------------------------------------------------


class TestEventsClaimAny:
    def test_claim_any_takes_ready_events_across_sessions(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append("s1", [ev(lane="L"), ev(lane="L")])
        clock.advance(1)
        store.events.append("s2", [ev()])
        clock.advance(1)
        store.events.append("s3", [ev(settled=True)])
        got = store.events.claim_any("w", ttl_ms=1000, limit=10)
        assert [(e.session_id, e.index, e.attempt_count, e.claim_holder) for e in got] == [
            ("s1", 1, 1, "w"),
            ("s2", 1, 1, "w"),
        ]
        assert store.events.claim_any("w", ttl_ms=1000, limit=10) == []
        assert store.events.claim_available("s1", "x", ttl_ms=5).outcome == "busy"

    def test_claim_any_oldest_ready_first_and_limit(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append("b", [ev()])
        clock.advance(1)
        store.events.append("a", [ev()])
        (first,) = store.events.claim_any("w", ttl_ms=1000)
        assert first.session_id == "b"
        clock.advance(2)  # b's lease expired: due again, but at its expiry (later than a's append)
        (second,) = store.events.claim_any("w", ttl_ms=1000)
        assert second.session_id == "a"
        (third,) = store.events.claim_any("w", ttl_ms=1000)
        assert (third.session_id, third.attempt_count) == ("b", 2)

    def test_concurrent_claim_any_never_shares_an_event(self, store: durastate.Store) -> None:
        for n in range(8):
            store.events.append(f"s{n}", [ev() for _ in range(5)])
        got: list[list[tuple[str, int]]] = [[] for _ in range(4)]
        barrier = threading.Barrier(4)

        def worker(n: int) -> None:
            barrier.wait(timeout=30)
            for _ in range(12):
                got[n].extend((e.session_id, e.index) for e in store.events.claim_any(f"w{n}", ttl_ms=60_000))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        claimed = [c for g in got for c in g]
        assert len(claimed) == len(set(claimed)) == 40


class TestEventsDeadLetters:
    def test_dead_letters_are_listed_and_redriven(self, store: durastate.Store) -> None:
        for session in ("s1", "s2"):
            store.events.append(session, [ev(), ev()])
            for e in store.events.claim_available(session, "w", ttl_ms=1000).events:
                store.events.fail_attempt(session, e.index, e.attempt_count, "dead", 1)
        assert [(e.session_id, e.index) for e in store.events.dead_letters()] == [
            ("s1", 1),
            ("s1", 2),
            ("s2", 1),
            ("s2", 2),
        ]
        assert [(e.session_id, e.index) for e in store.events.dead_letters(after=("s1", 2), limit=1)] == [("s2", 1)]
        assert [e.index for e in store.events.dead_letters("s1", after=1)] == [2]
        assert store.events.redrive("s1", [2, 7]) == 1
        again = claim_one(store.events, "s1")
        assert (again.index, again.attempt_count, again.failure_count) == (2, 2, 0)
        assert store.events.fail_attempt("s1", 2, 1, "old attempt", 1).outcome == "superseded"
        assert store.events.redrive("s2") == 2
        assert [e.index for e in store.events.claim_available("s2", "w", ttl_ms=5).events] == [1, 2]
        assert [(e.session_id, e.index) for e in store.events.dead_letters()] == [("s1", 1)]


class TestEventsPrune:
    def _processed(self, store: durastate.Store, session: str, count: int) -> None:
        store.events.append(session, [ev() for _ in range(count)])
        for e in store.events.claim_available(session, "w", ttl_ms=1000).events:
            store.events.complete_attempt(session, e.index, e.attempt_count)

    def test_prune_removes_processed_events_covered_by_every_snapshot(self, store: durastate.Store) -> None:
        self._processed(store, S, 10)
        store.events.append(S, [ev()])  # 11: unprocessed
        self._processed(store, "no-snapshot", 3)
        store.events.put_snapshot(S, "a", 11, {})
        store.events.put_snapshot(S, "b", 6, {})
        assert store.events.prune(batch_size=2) == 6
        assert [e.index for e in everything(store.events)] == [7, 8, 9, 10, 11]
        assert len(everything(store.events, "no-snapshot")) == 3
        state = store.events.read_state(S, "b")
        assert state.snapshot is not None and [e.index for e in state.events] == [7, 8, 9, 10, 11]
        assert store.events.append(S, [ev()]).events[0].index == 12

    def test_prune_by_count_and_age(self, store: durastate.Store, clock: FakeClock) -> None:
        self._processed(store, S, 4)
        clock.advance(10)
        store.events.append(S, [ev() for _ in range(4)])
        for e in store.events.claim_available(S, "w", ttl_ms=1000).events:
            store.events.complete_attempt(S, e.index, e.attempt_count)
        store.events.put_snapshot(S, "r", 8, {})
        assert store.events.prune(keep_last=6) == 2
        assert store.events.prune(older_than_ms=5_000) == 2
        assert [e.index for e in everything(store.events)] == [5, 6, 7, 8]
        assert store.events.prune() == 4


class TestEventsTransactions:
    def test_append_and_complete_roll_back_with_the_transaction(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        with pytest.raises(RuntimeError), store.transaction():
            store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c")])
            store.events.append(S, [ev()])
            store.kv.put(b"s", b"n", b"k", b"v")
            raise RuntimeError("abort")
        assert everything(store.events) == [e]
        assert store.kv.get(b"s", b"n", b"k") is None

    def test_complete_commits_with_other_facets(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        with store.transaction():
            store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="c")])
            store.kv.incr(b"s", b"n", b"done", 1)
        assert store.kv.counter(b"s", b"n", b"done") == 1
        assert [x.id for x in everything(store.events)][1:] == ["c"]

    def test_a_refusal_inside_a_transaction_does_not_doom_it(self, store: durastate.Store) -> None:
        store.events.append(S, [ev(id="x")])
        with store.transaction():
            with pytest.raises(DuplicateBatch):
                store.events.append(S, [ev(id="x"), ev(id="y")])
            with pytest.raises(SupersededAttempt):
                store.events.append(S, [ev(cause={"index": 1, "attempt": 3})])
            store.events.append(S, [ev(id="z")])
        assert [x.id for x in everything(store.events)] == ["x", "z"]


class TestEventsBadInput:
    @pytest.mark.parametrize(
        "call",
        [
            lambda e: e.append(1, [ev()]),
            lambda e: e.append(S, "not a list"),
            lambda e: e.append(S, [{"payload": 1}]),
            lambda e: e.append(S, [ev(unknown=1)]),
            lambda e: e.append(S, [ev(payload=float("nan"))]),
            lambda e: e.append(S, [ev(payload={1: 2})]),
            lambda e: e.append(S, [ev(payload="\ud800")]),
            lambda e: e.append(S, [ev(payload=object())]),
            lambda e: e.append(S, [ev(id=5)]),
            lambda e: e.append(S, [ev(lane=5)]),
            lambda e: e.append(S, [ev(settled="yes")]),
            lambda e: e.append(S, [ev(cause={"index": 0, "attempt": 1})]),
            lambda e: e.append(S, [ev(cause={"index": 1})]),
            lambda e: e.append("a\x00b", [ev()]),
            lambda e: e.append("x" * 2000, [ev()]),
            lambda e: e.claim_available(S, "w"),
            lambda e: e.claim_available(S, "w", ttl_ms=-1),
            lambda e: e.claim_available(S, "w", ttl_ms=1.5),
            lambda e: e.claim_available(S, None, ttl_ms=1),
            lambda e: e.renew_claims(S, "w", [{"index": 1}], ttl_ms=5),
            lambda e: e.fail_attempt(S, 1, 1, None, 1),
            lambda e: e.put_snapshot(S, "r", 1, {"x": float("inf")}),
            lambda e: e.list_sessions(limit=0),
        ],
    )
    def test_bad_input_is_refused_and_changes_nothing(self, store: durastate.Store, call: Any) -> None:
        store.events.append(S, [ev()])
        before = everything(store.events)
        with pytest.raises(InvalidRequest):
            call(store.events)
        assert everything(store.events) == before
        assert store.events.read_state(S, "r").snapshot is None

    @pytest.mark.parametrize(
        "call",
        [
            lambda e: e.append("", [ev()]),
            lambda e: e.append(S, [ev(id="")]),
            lambda e: e.append(S, [ev()], new_id=lambda: ""),
            lambda e: e.claim_available(S, "w", ttl_ms=0),
            lambda e: e.claim_any("w", ttl_ms=0),
            lambda e: e.claim_any("w", ttl_ms=-5),
            lambda e: e.renew_claims(S, "w", [{"index": 1, "attempt": 1}], ttl_ms=-1),
            lambda e: e.fail_attempt(S, 1, 1, "x", 0),
            lambda e: e.fail_attempt(S, 1, 1, "x", -1),
            lambda e: e.put_snapshot(S, "r", 0, {}),
            lambda e: e.put_snapshot(S, "r", -1, {}),
            lambda e: e.put_snapshot(S, "r", 3, {}),
            lambda e: e.put_snapshot("no-such-session", "r", 1, {}),
        ],
    )
    def test_meaningless_values_are_refused_and_change_nothing(self, store: durastate.Store, call: Any) -> None:
        store.events.append(S, [ev(), ev()])
        (claimed,) = store.events.claim_available(S, "w", ttl_ms=1000, limit=1).events
        before = everything(store.events)
        with pytest.raises(InvalidRequest):
            call(store.events)
        assert everything(store.events) == before
        assert store.events.read("") == []
        assert store.events.read_state(S, "r").snapshot is None
        assert store.events.get(S, claimed.index) == claimed

    def test_oversize_payload_is_refused(self, open_store: Callable[..., durastate.Store]) -> None:
        s = open_store(max_value_size=100)
        with pytest.raises(InvalidRequest):
            s.events.append(S, [ev(payload="x" * 200)])
        assert s.events.read(S) == []


class TestEventsRanges:
    """The valid range of each parameter whose edge is easy to get wrong, and the refusal just past it."""

    def test_max_failures_one_dead_letters_the_first_failure(self, store: durastate.Store) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        with pytest.raises(InvalidRequest, match="max_failures must be >= 1"):
            store.events.fail_attempt(S, 1, e.attempt_count, "x", 0)
        assert store.events.get(S, 1) == e  # still claimed, no failure recorded
        result = store.events.fail_attempt(S, 1, e.attempt_count, "x", 1)
        assert (result.outcome, result.failure_count) == ("dead_lettered", 1)

    def test_snapshot_index_runs_from_one_to_the_last_index(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="past the last event"):
            store.events.put_snapshot(S, "r", 1, "none yet")
        store.events.append(S, [ev(), ev(), ev()])
        with pytest.raises(InvalidRequest, match="index must be >= 1"):
            store.events.put_snapshot(S, "r", 0, "nothing folded in")
        with pytest.raises(InvalidRequest, match="past the last event"):
            store.events.put_snapshot(S, "r", 4, "ahead of the log")
        assert store.events.list_snapshots(S) == []
        assert store.events.put_snapshot(S, "r", 1, "first") is True
        assert store.events.put_snapshot(S, "r", 3, "all") is True
        state = store.events.read_state(S, "r")
        assert state.snapshot is not None and (state.snapshot.index, state.events) == (3, ())
        store.events.append(S, [ev()])
        assert store.events.put_snapshot(S, "r", 4, "caught up") is True

    def test_snapshot_inside_the_transaction_that_appended(self, store: durastate.Store) -> None:
        with store.transaction():
            store.events.append(S, [ev(), ev()])
            assert store.events.put_snapshot(S, "r", 2, "both") is True
        snap = store.events.read_state(S, "r").snapshot
        assert snap is not None and snap.index == 2

    def test_a_claim_must_hand_out_a_live_lease(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev(), ev()])
        now = now_ms(clock)
        with pytest.raises(InvalidRequest, match="ttl_ms must be >= 1"):
            store.events.claim_available(S, "w", ttl_ms=0)
        with pytest.raises(InvalidRequest, match="expires_at_ms must be later than now"):
            store.events.claim_available(S, "w", expires_at_ms=now)
        with pytest.raises(InvalidRequest, match="expires_at_ms must be later than now"):
            store.events.claim_any("w", expires_at_ms=now - 1)
        assert all(e.attempt_count == 0 for e in everything(store.events))
        (first,) = store.events.claim_available(S, "w", ttl_ms=1, limit=1).events
        assert first.claim_expires_at == now + 1
        (second,) = store.events.claim_any("w", expires_at_ms=now + 1)
        assert (second.index, second.claim_expires_at) == (2, now + 1)

    def test_renew_with_ttl_zero_ends_the_lease(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        e = claim_one(store.events, ttl_ms=1000)
        result = store.events.renew_claims(S, "w", [{"index": 1, "attempt": e.attempt_count}], ttl_ms=0)
        assert result.renewed == (1,)
        assert claim_one(store.events, holder="w2").attempt_count == e.attempt_count + 1

    def test_empty_ids_are_refused_where_they_would_name_something_new(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="session_id must not be empty"):
            store.events.append("", [ev()])
        with pytest.raises(InvalidRequest, match=r"events\[1\]\.id must not be empty"):
            store.events.append(S, [ev(id="a"), ev(id="")])
        with pytest.raises(InvalidRequest, match="generated id must not be empty"):
            store.events.append(S, [ev()], new_id=lambda: "")
        assert store.events.read(S) == []
        store.events.append(S, [ev()])
        e = claim_one(store.events)
        with pytest.raises(InvalidRequest, match=r"events\[0\]\.id must not be empty"):
            store.events.complete_attempt(S, 1, e.attempt_count, [ev(id="")])
        assert store.events.get(S, 1) == e
        # Operations on existing sessions take any id: a store written through
        # compat.a2 (whose seed allows "") may hold one. None exists here.
        assert store.events.claim_available("", "w", ttl_ms=5).outcome == "settled"
        assert store.events.read("") == []
        with pytest.raises(UnknownEvent):
            store.events.fail_attempt("", 1, 1, "x", 1)


# -- torture: worker processes killed at random ------------------------------

TORTURE_SESSIONS = 20
TORTURE_EVENTS = 12
TORTURE_TTL_MS = 300
TORTURE_MAX_FAILURES = 3
TORTURE_KILLS = 8
TORTURE_DEADLINE = 120.0


def _torture_worker(url: str, holder: str, seed: int) -> None:
    """Claim across sessions; complete (with a child for root events) or fail.

    Completion and its effect (a counter per event) commit together, so the
    counter says how many times an event's processing was committed. Lane
    events and children are never failed (a dead lane head would block its
    lane for good). Exits when no session has pending work.
    """
    rng = random.Random(seed)
    store = durastate.open(url, busy_timeout=20.0)
    events = store.events
    while True:
        claimed = events.claim_any(holder, ttl_ms=TORTURE_TTL_MS, limit=2)
        if not claimed:
            pending = sum(s.pending_count for s in events.list_sessions(limit=1000).sessions)
            if pending == 0:
                return
            store.engine.wait_for_change("torture", 0.02)
            continue
        for e in claimed:
            may_fail = e.lane is None and e.type == "root"
            if may_fail and rng.random() < 0.3:
                events.fail_attempt(e.session_id, e.index, e.attempt_count, f"by {holder}", TORTURE_MAX_FAILURES)
                continue
            children = [{"type": "child", "payload": e.index, "id": f"{e.id}/child"}] if e.type == "root" else []
            with store.transaction():
                result = events.complete_attempt(e.session_id, e.index, e.attempt_count, children)
                if result.outcome == "completed":
                    store.kv.incr(b"torture", b"", e.id.encode(), 1)


class TestEventsTorture:
    @pytest.mark.multiprocess
    def test_workers_killed_at_random_lose_and_duplicate_nothing(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        setup = open_shared()
        try:
            for n in range(TORTURE_SESSIONS):
                setup.events.append(
                    f"t{n:02d}",
                    [
                        ev("root", i, id=f"t{n:02d}-{i}", lane="L" if n % 2 and i % 3 else None)
                        for i in range(TORTURE_EVENTS)
                    ],
                )
        finally:
            setup.close()
        ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        rng = random.Random(1234)
        procs: dict[int, Any] = {}
        spawned = 0

        def start(slot: int) -> None:
            nonlocal spawned
            spawned += 1
            proc = ctx.Process(target=_torture_worker, args=(shared_url, f"w{slot}-{spawned}", spawned), daemon=True)  # type: ignore[attr-defined]
            proc.start()
            procs[slot] = proc

        try:
            for slot in range(4):
                start(slot)
            kills = 0
            deadline = time.monotonic() + TORTURE_DEADLINE
            finished = False
            while kills < TORTURE_KILLS and not finished and time.monotonic() < deadline:
                slot = rng.randrange(4)
                victim = procs[slot]
                victim.join(timeout=rng.uniform(0.02, 0.2))  # let it work a random while
                if victim.is_alive():
                    os.kill(victim.pid, signal.SIGKILL)
                    victim.join(timeout=30)
                if victim.exitcode == -signal.SIGKILL:
                    kills += 1
                    start(slot)
                else:  # it ended on its own: the work is done (or it failed, checked below)
                    finished = True
            assert kills >= 1, "no worker was killed while there was work: make the work bigger"
            for proc in procs.values():
                proc.join(timeout=max(1.0, deadline - time.monotonic()))
                assert not proc.is_alive(), "a torture worker did not finish in time"
                assert proc.exitcode == 0, f"a torture worker failed with exit code {proc.exitcode}"
        finally:
            for proc in procs.values():
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=30)

        check = open_shared()
        try:
            everything_stored: list[StoredEvent] = []
            for n in range(TORTURE_SESSIONS):
                everything_stored.extend(check.events.read(f"t{n:02d}"))
            by_key = {(e.session_id, e.index): e for e in everything_stored}
            roots = [e for e in everything_stored if e.type == "root"]
            assert len(roots) == TORTURE_SESSIONS * TORTURE_EVENTS
            for e in everything_stored:
                done = check.kv.counter(b"torture", b"", e.id.encode())
                # Exactly once, or dead-lettered (and then never processed).
                assert (e.processed_at is not None, e.failed_at is not None) in ((True, False), (False, True)), e
                assert done == (1 if e.processed_at is not None else 0), e
                if e.failed_at is not None:
                    assert e.failure_count == TORTURE_MAX_FAILURES and e.lane is None
                if e.type == "child":
                    assert e.cause is not None
                    parent = by_key[(e.session_id, e.cause.index)]
                    # Output only of the attempt that completed the parent.
                    assert parent.processed_by_attempt == e.cause.attempt, (parent, e)
                    assert parent.returned_event_ids == (e.id,)
            for e in roots:
                children = [
                    c
                    for c in everything_stored
                    if c.cause is not None and c.cause.index == e.index and c.session_id == e.session_id
                ]
                assert len(children) == (1 if e.processed_at is not None else 0), e
            # Lanes: a lane event is first claimed only after the previous
            # one of its lane was processed, so no two were ever claimed at once.
            lanes: dict[tuple[str, str], list[StoredEvent]] = {}
            for e in everything_stored:
                if e.lane is not None:
                    lanes.setdefault((e.session_id, e.lane), []).append(e)
            assert lanes
            for lane_events in lanes.values():
                lane_events.sort(key=lambda x: x.index)
                for earlier, later in itertools.pairwise(lane_events):
                    assert earlier.processed_at is not None and later.first_claimed_at is not None
                    assert later.first_claimed_at >= earlier.processed_at, (earlier, later)
        finally:
            check.close()


# -- migration 1 -> 2 ----------------------------------------------------------------

# Migration 2 undone by hand: what a database of schema version 1 holds.
_BACK_TO_VERSION_1 = (
    "DROP INDEX {p}event_lane",
    "CREATE INDEX {p}event_lane ON {p}event (session_id, lane, idx) WHERE processed_at IS NULL",
    "CREATE INDEX {p}event_unprocessed ON {p}event (session_id, idx) WHERE processed_at IS NULL",
    "ALTER TABLE {p}event_session RENAME COLUMN index_floor TO last_index",
)


class TestEventsMigration:
    def test_a_version_1_database_carries_on(self, store_url: str, open_store: Callable[..., durastate.Store]) -> None:
        """Version 1 kept each session's last index in its row; version 2 reads it as the floor."""
        if store_url.startswith("memory"):
            pytest.skip("a memory: store is gone once closed: there is nothing to open again")
        old = open_store()
        old.events.append(S, [ev("a"), ev("b", lane="L"), ev("c", lane="L")])
        old.events.append("pruned", [ev("done", settled=True) for _ in range(4)])
        old.events.put_snapshot("pruned", "r", 4, "all of it")
        assert old.events.prune() == 4  # "pruned" keeps no event: only its last index says 4
        engine = old.engine
        for statement in _BACK_TO_VERSION_1:
            engine.execute(engine.sql(DDL(statement)))
        engine.execute(engine.sql(WRITE("UPDATE {p}event_session SET last_index = ? WHERE session_id = ?")), (3, S))
        engine.execute(engine.sql(WRITE("UPDATE {p}schema SET version = 1 WHERE facet = 'events'")))
        old.close()

        new = open_store()
        assert [e.index for e in new.events.append(S, [ev("d")]).events] == [4]
        assert [e.index for e in new.events.append("pruned", [ev("next")]).events] == [5]
        assert new.events.append(S, []).has_pending is True
        claimed = new.events.claim_available(S, "w", ttl_ms=1000).events
        assert [e.type for e in claimed] == ["a", "b", "d"]  # "c" waits behind its lane's head
        for e in claimed:
            new.events.complete_attempt(S, e.index, e.attempt_count)
        assert [e.type for e in new.events.claim_available(S, "w", ttl_ms=1000).events] == ["c"]


# -- index use (every engine) ------------------------------------------------------


class TestEventsIndexUse:
    """The append/claim/complete cycle and reads are index searches (flat in session size)."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        for session in ("a", "b"):
            store.events.append(session, [{"type": "t", "payload": {"i": i}, "lane": f"l{i % 3}"} for i in range(60)])
        for i in range(40):  # many sessions, as in production: statistics then show `session_id` selective
            store.events.append(f"bystander-{i}", [{"type": "t", "payload": {"i": j}} for j in range(10)])
        return with_statistics(store, request.param)

    def check(
        self, store: durastate.Store, statement: Statement, params: tuple[Any, ...], *using: str, sorts: bool = False
    ) -> None:
        prefix = store.engine.prefix
        plan = plan_of(store, statement, params)
        # "x": the session's highest index (LAST_OF_SESSION), "e": the other event reads.
        assert_index_search(plan, prefix + "event", "e", "x", using=using, sorts=sorts)

    def test_claim_cycle(self, filled: durastate.Store) -> None:
        now = 10**12
        # Every ready event of the session (no LIMIT): the cost follows the
        # result, so an engine may gather them by index and sort them.
        self.check(filled, events.CLAIM_CANDIDATES, ("a", now), "session_id", sorts=True)
        self.check(filled, events.CLAIM_ONE, (now, now, "w", now, now, "a", 1, now), "session_id", "idx")
        self.check(filled, events.CLAIM_SESSION, ("a", now, 5, now, now, "w", now, now, "a", now), "session_id")
        self.check(filled, events.CLAIM_SESSION_ALL, (now, now, "w", now, now, "a", now), "session_id")
        self.check(filled, events.COMPLETE_ALONE, (now, 1, "[]", "a", 1, 1), "session_id", "idx")
        insert = ("a", 99, "i", "t", b"1", now, None, None, None, "l1", "l1", "a", "l1", now, None)
        self.check(filled, events.INSERT_EVENT, insert, "lane")
        self.check(filled, events.MARK_PROCESSED, (now, 1, None, "a", 1), "session_id", "idx")
        self.check(filled, events.PROMOTE_LANE, (now, "a", "a", "l1"), "session_id", "lane")
        self.check(filled, events.RENEW, (now, now, "a", 1, 1, "w", now), "session_id", "idx")
        self.check(filled, events.FAIL, (1, "e", now, 1, None, now, "a", 1), "session_id", "idx")

    def test_claim_any_uses_the_due_index(self, filled: durastate.Store) -> None:
        self.check(filled, events.CLAIM_ANY_CANDIDATES, (10**12, 10), "due_at")

    def test_reads(self, filled: durastate.Store) -> None:
        self.check(filled, events.GET_EVENT, ("a", 3), "session_id", "idx")
        self.check(filled, events.READ_RANGE, ("a", 10, 20, 5), "session_id", "idx")
        self.check(filled, events.DEAD_IN_SESSION, ("a", 0, 10), "session_id")
        self.check(filled, events.RETRY_AT, ("a", 0), "session_id")
        self.check(filled, events.EVENT_BY_ID, ("no-such-id",), "event_id")

    @pytest.mark.parametrize(
        ("statement", "params"),
        [
            (events.LOCK_SESSION, ("a",)),
            (events.LOCK_PARENT, ("a", 3)),
            (events.APPEND_ALONE, ("i", "t", b"1", 1, 1, "a")),
            (events.LAST_INDEX, ("a",)),
            (events.HAS_PENDING, ("a",)),
            (events.STILL_SETTLED, ("a", 0)),
        ],
        ids=["LOCK_SESSION", "LOCK_PARENT", "APPEND_ALONE", "LAST_INDEX", "HAS_PENDING", "STILL_SETTLED"],
    )
    def test_session_reads(self, filled: durastate.Store, statement: Statement, params: tuple[Any, ...]) -> None:
        prefix = filled.engine.prefix
        with filled.transaction():  # FOR UPDATE: a locking read
            plan = plan_of(filled, statement, params)
        assert_index_search(plan, prefix + "event_session", "s", using=("session_id",))
        assert_index_search(plan, prefix + "event", "e", "x", using=("session_id",))

    def test_state_reads(self, filled: durastate.Store) -> None:
        filled.events.put_snapshot("a", "r", 10, {})
        for statement in (events.READ_STATE, events.READ_STATE_BRIEF):
            # Two sorted streams merged (snapshot row, then events by idx): an engine may sort the 50 rows.
            self.check(filled, statement, ("a", "r", "a", "a", "r"), "session_id", sorts=True)
