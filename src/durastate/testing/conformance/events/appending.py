"""Conformance for ``store.events``: append (one writer and several), lanes, claims, renewals,
completion, failure.
"""

from __future__ import annotations

import threading

import pytest

import durastate
from durastate import InvalidRequest
from durastate.events import (
    Cause,
    DuplicateBatch,
    SupersededAttempt,
    UnknownEvent,
)
from durastate.testing.clock import FakeClock

from .common import S, claim_one, ev, everything, now_ms

__all__ = [
    "TestEventsAppend",
    "TestEventsClaims",
    "TestEventsComplete",
    "TestEventsConcurrentAppends",
    "TestEventsFail",
    "TestEventsLanes",
    "TestEventsRenew",
]


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

    def test_ttl_and_explicit_expiry_together_are_refused(self, store: durastate.Store, clock: FakeClock) -> None:
        store.events.append(S, [ev()])
        at = now_ms(clock) + 12_345
        with pytest.raises(durastate.InvalidRequest, match="not both"):
            store.events.claim_available(S, "w", ttl_ms=1, expires_at_ms=at)
        (e,) = store.events.claim_available(S, "w", expires_at_ms=at).events
        assert e.claim_expires_at == at

    def test_with_the_seed_rules_explicit_expiry_wins_over_ttl(self, store: durastate.Store, clock: FakeClock) -> None:
        from durastate.events import Events

        seeded = Events(store.engine, max_value_size=store.events.max_value_size, seed_rules=True)  # compat.a2's
        seeded.append(S, [ev()])
        at = now_ms(clock) + 12_345
        (e,) = seeded.claim_available(S, "w", ttl_ms=1, expires_at_ms=at).events
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
        store.events.renew_claims(S, "w", [{"index": 1, "attempt": 1}], expires_at_ms=at)
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
