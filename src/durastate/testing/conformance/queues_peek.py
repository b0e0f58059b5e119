"""Conformance: ``queues.peek_ready``, the non-destructive look at what a claim would take next.

Expectations are the claims themselves: peeking lists exactly the payloads
that successive claims then hand out, in the same order. Time moves only
through the ``clock`` fixture.
"""

from __future__ import annotations

import pytest

import durastate
from durastate import InvalidRequest
from durastate.testing.clock import FakeClock

__all__ = ["TestQueuePeek"]


class TestQueuePeek:
    def test_lists_what_claims_then_take_in_order(self, store: durastate.Store) -> None:
        q = store.queues
        q.push("q", [b"a", b"b", b"c"])
        assert q.peek_ready("q") == [b"a", b"b", b"c"]
        assert q.peek_ready("q") == [b"a", b"b", b"c"]  # nothing was taken
        taken = []
        while (claim := q.claim("q", lease=30)) is not None:
            taken.append(claim.payload)
        assert taken == [b"a", b"b", b"c"]

    def test_limit(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"%d" % i for i in range(5)])
        assert store.queues.peek_ready("q", limit=2) == [b"0", b"1"]
        assert store.queues.peek_ready("q", limit=0) == []
        assert store.queues.peek_ready("q", limit=None) == [b"%d" % i for i in range(5)]
        assert store.queues.peek_ready("q", limit=2**64) == [b"%d" % i for i in range(5)]  # past int64: no limit

    def test_in_flight_and_delayed_are_not_listed_until_due(self, store: durastate.Store, clock: FakeClock) -> None:
        q = store.queues
        q.push("q", [b"first", b"second"])
        q.push("q", [b"later"], delay=10)
        claim = q.claim("q", lease=5)
        assert claim is not None and claim.payload == b"first"
        assert q.peek_ready("q") == [b"second"]
        clock.advance(5)  # the lease ran out: claimable again, joins the line at its deadline
        assert q.peek_ready("q") == [b"second", b"first"]
        clock.advance(5)
        assert q.peek_ready("q") == [b"second", b"first", b"later"]

    def test_exhausted_items_are_not_listed(self, store: durastate.Store, clock: FakeClock) -> None:
        q = store.queues
        q.push("q", [b"fragile"], max_attempts=1)
        assert q.claim("q", lease=5) is not None
        clock.advance(5)
        assert q.peek_ready("q") == []
        assert q.claim("q", lease=5) is None  # the claim buries it rather than delivering it
        assert [d.payload for d in q.dead_letters("q")] == [b"fragile"]

    def test_queues_are_separate(self, store: durastate.Store) -> None:
        store.queues.push("a", [b"1"])
        store.queues.push(b"b", [b"2"])
        assert store.queues.peek_ready("a") == [b"1"]
        assert store.queues.peek_ready(b"b") == [b"2"]
        assert store.queues.peek_ready("empty") == []

    @pytest.mark.parametrize("limit", [-1, 1.5, "3", True])
    def test_bad_limit_is_refused(self, store: durastate.Store, limit: object) -> None:
        with pytest.raises(InvalidRequest, match="limit"):
            store.queues.peek_ready("q", limit=limit)  # type: ignore[arg-type]

    def test_bad_name_is_refused(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="name"):
            store.queues.peek_ready("")
