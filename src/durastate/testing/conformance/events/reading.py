"""Conformance for ``store.events``: snapshots, inspection, streams, claim_any, dead letters, pruning,
transactions, refused input and value ranges.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import InvalidRequest, NotFound
from durastate.events import (
    DuplicateBatch,
    LaneBacklog,
    StoredEvent,
    SupersededAttempt,
    UnknownEvent,
)
from durastate.testing.clock import FakeClock

from .common import S, claim_one, ev, everything, now_ms

__all__ = [
    "TestEventsBadInput",
    "TestEventsClaimAny",
    "TestEventsDeadLetters",
    "TestEventsInspection",
    "TestEventsPrune",
    "TestEventsRanges",
    "TestEventsSnapshots",
    "TestEventsStream",
    "TestEventsTransactions",
]


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
        assert store.events.redrive("s1", [2, 2]) == 1  # an index twice counts once
        again = claim_one(store.events, "s1")
        assert (again.index, again.attempt_count, again.failure_count) == (2, 2, 0)
        assert store.events.fail_attempt("s1", 2, 1, "old attempt", 1).outcome == "superseded"
        assert store.events.redrive("s2") == 2
        assert [e.index for e in store.events.claim_available("s2", "w", ttl_ms=5).events] == [1, 2]
        assert [(e.session_id, e.index) for e in store.events.dead_letters()] == [("s1", 1)]

    def test_discarded_dead_letters_settle_and_their_lane_moves_on(self, store: durastate.Store) -> None:
        events = store.events
        events.append("s1", [ev(lane="tools"), ev(lane="tools"), ev(), ev()])
        claimed = events.claim_available("s1", "w", ttl_ms=1000).events
        assert [e.index for e in claimed] == [1, 3, 4]  # the second tools event waits behind the first
        for e in claimed:
            assert events.fail_attempt("s1", e.index, e.attempt_count, "boom", 1).outcome == "dead_lettered"
        head = claimed[0]
        assert [e.index for e in events.dead_letters("s1")] == [1, 3, 4]
        with pytest.raises(InvalidRequest):
            events.discard("s1", ["one"])  # type: ignore[list-item]
        assert [e.index for e in events.dead_letters("s1")] == [1, 3, 4]  # the refused call changed nothing
        assert events.discard("s1", [1, 1]) == 1  # an index twice counts once
        discarded = events.get("s1", 1)
        assert discarded is not None
        assert discarded.processed_at is not None and discarded.processed_by_attempt is None
        assert discarded.failure_count == 1
        assert [e.index for e in events.claim_available("s1", "w", ttl_ms=1000).events] == [2]  # the lane moved on
        assert events.complete_attempt("s1", 1, head.attempt_count).outcome == "superseded"
        assert events.discard("s1") == 2
        assert events.dead_letters("s1") == []
        assert events.discard("s1") == 0

    @pytest.mark.parametrize("operation", ["redrive", "discard"])
    def test_indexes_that_are_not_dead_letters_are_refused_and_none_is_touched(
        self, store: durastate.Store, operation: str
    ) -> None:
        events = store.events
        act = getattr(events, operation)
        events.append("s1", [ev(), ev(), ev()])
        events.append("s2", [ev()])
        for session in ("s1", "s2"):
            for e in events.claim_available(session, "w", ttl_ms=1000).events:
                if (session, e.index) != ("s1", 3):  # s1's third stays claimed: not a dead letter
                    events.fail_attempt(session, e.index, e.attempt_count, "dead", 1)
        verb = {"redrive": "redriven", "discard": "discarded"}[operation]
        # Not dead (claimed), no such event (another session's index only), never appended: each named.
        with pytest.raises(NotFound, match=rf"no dead letter at index 3, 9 in session 's1'.*nothing was {verb}"):
            act("s1", [1, 3, 9, 2])
        assert [e.index for e in events.dead_letters("s1")] == [1, 2]
        assert act("s1", [2]) == 1
        with pytest.raises(NotFound, match=r"no dead letter at index 2 in session 's1'"):
            act("s1", [1, 2])  # 2 is no longer a dead letter
        with pytest.raises(NotFound, match=r"in session 'nobody'"):
            act("nobody", [1])
        assert [e.index for e in events.dead_letters("s1")] == [1]
        assert [e.index for e in events.dead_letters("s2")] == [1]
        with store.transaction():  # inside a block: the refused call undoes only itself
            events.append("s2", [ev()])
            with pytest.raises(NotFound):
                act("s1", [1, 9])
            assert [e.index for e in events.dead_letters("s1")] == [1]
        assert events.get("s2", 2) is not None
        assert act("s1", []) == 0
        assert act("s1") == 1

    def test_lane_backlog_counts_ready_expired_and_dead_per_lane(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        events = store.events
        assert events.lane_backlog() == ([], False)
        start = now_ms(clock)
        events.append("s1", [ev(lane="tools"), ev(lane="tools"), ev()])  # the second tools event waits its turn
        clock.advance(2)
        events.append("s2", [ev(lane="tools"), ev(lane="mail")])
        backlog, capped = events.lane_backlog()
        assert not capped
        assert [(b.lane, b.ready, b.expired_claims, b.oldest_ready_at, b.dead) for b in backlog] == [
            (None, 1, 0, start, 0),
            ("mail", 1, 0, start + 2000, 0),
            ("tools", 2, 0, start, 0),
        ]
        claimed = events.claim_available("s2", "w", ttl_ms=1000).events
        dead = next(e for e in claimed if e.lane == "mail")
        events.fail_attempt("s2", dead.index, dead.attempt_count, "boom", 1)  # mail: dead-lettered
        clock.advance(5)  # the tools claim in s2 ran out: ready again, flagged
        backlog, _ = events.lane_backlog()
        by_lane = {b.lane: (b.ready, b.expired_claims, b.dead) for b in backlog}
        assert by_lane == {None: (1, 0, 0), "mail": (0, 0, 1), "tools": (2, 1, 0)}
        assert next(b for b in backlog if b.lane == "mail").oldest_ready_at is None
        assert events.lane_backlog(limit=1) == (
            [LaneBacklog("mail", 0, 0, None, 1), LaneBacklog("tools", 1, 0, start, 0)],  # s1's first, in due order
            True,
        )
        for bad in (0, -1, True, "5", 10_000_001):
            with pytest.raises(InvalidRequest, match="limit"):
                events.lane_backlog(limit=bad)  # type: ignore[arg-type]


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
