"""Conformance for ``store.queues``: FIFO, names, clear, delays, claims (ack, nack, renew), lease
expiry, dead letters, stats.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import Conflict, InvalidRequest, NotFound
from durastate.queues import DEFAULT_MAX_ATTEMPTS, MAX_NAME_SIZE
from durastate.testing.clock import FakeClock

from ..kv import expect_invalid
from .common import claim, counts, pop_all, stats

__all__ = [
    "TestClaimAckNackRenew",
    "TestDeadLetters",
    "TestLeaseExpiry",
    "TestQueueClear",
    "TestQueueDelay",
    "TestQueueFIFO",
    "TestQueueNames",
    "TestQueueStats",
]


class TestQueueFIFO:
    def test_pop_returns_items_in_push_order(self, store: durastate.Store) -> None:
        assert store.queues.push("q", [b"a", b"b", b"c"]) == 3
        assert store.queues.push("q", [b"d"]) == 1
        assert pop_all(store) == [b"a", b"b", b"c", b"d"]

    def test_claims_come_in_push_order(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"%d" % i for i in range(5)])
        assert [claim(store).payload for _ in range(5)] == [b"%d" % i for i in range(5)]
        assert store.queues.claim("q") is None

    def test_pop_and_claim_share_one_line(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b", b"c"])
        assert store.queues.pop("q") == b"a"
        assert claim(store).payload == b"b"
        assert store.queues.pop("q") == b"c"

    def test_pop_of_an_empty_queue_is_none(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a"])
        assert store.queues.pop("q") == b"a"
        assert store.queues.pop("q") is None

    def test_pop_and_claim_of_an_unknown_queue_are_none(self, store: durastate.Store) -> None:
        assert store.queues.pop("never pushed") is None
        assert store.queues.claim("never pushed") is None

    def test_payloads_are_kept_exactly(self, store: durastate.Store) -> None:
        payloads = [b"", bytes(range(256)), b"\x00" * 10, b"x" * 100_000]
        store.queues.push("q", payloads)
        popped = pop_all(store)
        assert popped == payloads
        assert all(type(p) is bytes for p in popped)

    def test_bytes_like_payloads_are_accepted(self, store: durastate.Store) -> None:
        items: list[Any] = [bytearray(b"ba"), memoryview(b"mv")]
        store.queues.push("q", items)
        assert pop_all(store) == [b"ba", b"mv"]

    def test_push_of_nothing_adds_nothing(self, store: durastate.Store) -> None:
        assert store.queues.push("q", []) == 0
        assert stats(store) == counts()

    def test_push_batch_with_one_bad_item_adds_nothing(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"old"])
        items: list[Any] = [b"a", b"b", "not bytes", b"d"]
        with pytest.raises(InvalidRequest):
            store.queues.push("q", items)
        assert pop_all(store) == [b"old"]

    def test_push_batch_with_one_oversized_item_adds_nothing(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_value_size=8)
        with pytest.raises(InvalidRequest):
            store.queues.push("q", [b"12345678", b"123456789"])
        assert stats(store) == counts()
        assert store.queues.push("q", [b"12345678"]) == 1  # the limit itself is allowed

    def test_a_large_batch_lands_whole_and_in_order(self, store: durastate.Store) -> None:
        payloads = [b"%05d" % i for i in range(1500)]
        assert store.queues.push("q", payloads) == len(payloads)
        assert pop_all(store) == payloads


class TestQueueNames:
    def test_str_and_bytes_names_are_the_same_queue(self, store: durastate.Store) -> None:
        store.queues.push("jobs", [b"a"])
        store.queues.push(b"jobs", [b"b"])
        store.queues.push("j\u00f6bs", [b"c"])
        assert store.queues.pop(b"jobs") == b"a"
        assert store.queues.pop("jobs") == b"b"
        assert store.queues.pop("j\u00f6bs".encode()) == b"c"

    def test_queues_are_isolated(self, store: durastate.Store) -> None:
        names: list[str | bytes] = ["q", "q\x00", "qq", "Q", b"\xff"]
        for name in names:
            store.queues.push(name, [b"for " + (name.encode() if isinstance(name, str) else name)])
        for name in names:
            expected = b"for " + (name.encode() if isinstance(name, str) else name)
            assert pop_all(store, name) == [expected]

    def test_name_length_limit(self, store: durastate.Store) -> None:
        """Up to ``MAX_NAME_SIZE`` bytes (UTF-8 for str), on every engine alike."""
        longest = os.urandom(MAX_NAME_SIZE)  # incompressible: the hard case for an index
        assert store.queues.push(longest, [b"a"]) == 1
        assert claim(store, longest).payload == b"a"
        too_long: list[str | bytes] = [longest + b"x", "\u00e9" * (MAX_NAME_SIZE // 2) + "x"]
        for name in too_long:
            expect_invalid(f"name of {len(name)} chars", store.queues.push, name, [b"b"])
            expect_invalid(f"name of {len(name)} chars", store.queues.pop, name)
        assert stats(store, longest) == counts(in_flight=1)

    def test_claim_reports_the_queue_name_as_bytes(self, store: durastate.Store) -> None:
        store.queues.push("j\u00f6bs", [b"a"])
        assert claim(store, "j\u00f6bs").queue == "j\u00f6bs".encode()


class TestQueueClear:
    def test_clear_counts_ready_delayed_and_claimed_items(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b", b"c"])
        store.queues.push("q", [b"later"], delay=100)
        claim(store)
        assert store.queues.clear("q") == 4
        assert stats(store) == counts()
        assert store.queues.pop("q") is None

    def test_clear_keeps_dead_letters(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"doomed"], max_attempts=1)
        claim(store).nack()
        store.queues.push("q", [b"live"])
        assert store.queues.clear("q") == 1
        assert [d.payload for d in store.queues.dead_letters("q")] == [b"doomed"]

    def test_clear_touches_only_its_queue(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a"])
        store.queues.push("other", [b"b"])
        assert store.queues.clear("q") == 1
        assert store.queues.pop("other") == b"b"

    def test_clear_of_an_unknown_queue_is_zero(self, store: durastate.Store) -> None:
        assert store.queues.clear("nothing") == 0

    def test_a_cleared_holder_cannot_ack(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a"])
        held = claim(store)
        store.queues.clear("q")
        with pytest.raises(Conflict):
            held.ack()


class TestQueueDelay:
    def test_delayed_item_is_held_back_until_due(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"later"], delay=10)
        assert store.queues.pop("q") is None
        assert store.queues.claim("q") is None
        clock.advance(9)
        assert store.queues.pop("q") is None
        clock.advance(2)
        assert store.queues.pop("q") == b"later"

    def test_undelayed_items_overtake_a_delayed_one(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"later"], delay=5)
        store.queues.push("q", [b"now"])
        assert store.queues.pop("q") == b"now"
        clock.advance(6)
        assert store.queues.pop("q") == b"later"

    def test_a_due_item_joins_the_line_when_it_becomes_due(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"first-due"], delay=1)
        clock.advance(2)
        store.queues.push("q", [b"pushed-after-due"])
        assert pop_all(store) == [b"first-due", b"pushed-after-due"]

    def test_delayed_claim(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"later"], delay=3)
        assert store.queues.claim("q") is None
        clock.advance(4)
        got = claim(store)
        assert (got.payload, got.attempts) == (b"later", 1)

    def test_zero_delay_is_due_at_once(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a"], delay=0)
        assert store.queues.pop("q") == b"a"


class TestClaimAckNackRenew:
    def test_claim_hands_out_payload_and_first_attempt(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        got = claim(store, lease=30)
        assert got.payload == b"job"
        assert got.attempts == 1
        assert got.lease_expires_at == pytest.approx(clock() + 30)

    def test_claimed_item_is_invisible_while_leased(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        claim(store, lease=30)
        clock.advance(29)
        assert store.queues.claim("q") is None
        assert store.queues.pop("q") is None

    def test_ack_removes_the_item_for_good(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job", b"next"])
        claim(store, lease=5).ack()
        clock.advance(100)
        assert pop_all(store) == [b"next"]

    def test_second_ack_conflicts(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store)
        held.ack()
        with pytest.raises(Conflict):
            held.ack()

    def test_nack_gives_the_item_back_with_one_more_attempt(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"])
        claim(store).nack()
        again = claim(store)
        assert (again.payload, again.attempts) == (b"job", 2)

    def test_nack_delay_holds_the_item_back(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        claim(store).nack(delay=10)
        assert store.queues.claim("q") is None
        assert stats(store) == counts(delayed=1)
        clock.advance(11)
        assert claim(store).attempts == 2

    def test_nacked_item_goes_behind_items_already_waiting(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"a", b"b"])
        held = claim(store)
        clock.advance(1)  # due again later than "b", which has waited since the push
        held.nack()
        assert pop_all(store) == [b"b", b"a"]

    def test_settled_claim_cannot_be_settled_again(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store)
        held.nack()
        for settle in (held.ack, held.nack, held.renew):
            with pytest.raises(Conflict):
                settle()
        assert claim(store).attempts == 2

    def test_renew_extends_the_lease_by_its_original_length(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store, lease=10)
        clock.advance(8)
        held.renew()
        assert held.lease_expires_at == pytest.approx(clock() + 10)
        clock.advance(8)
        assert store.queues.claim("q") is None
        held.ack()
        assert stats(store) == counts()

    def test_renew_with_a_new_length(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store, lease=10)
        held.renew(lease=60)
        clock.advance(50)
        assert store.queues.claim("q") is None
        clock.advance(11)
        assert claim(store).attempts == 2

    def test_renew_can_shorten_the_lease(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store, lease=60)
        held.renew(lease=1)
        clock.advance(2)
        assert claim(store).attempts == 2

    def test_ack_in_a_rolled_back_transaction_keeps_the_claim(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store)
        with pytest.raises(RuntimeError), store.transaction():
            held.ack()
            raise RuntimeError("undo")
        assert stats(store) == counts(in_flight=1)
        held.ack()
        assert stats(store) == counts()


class TestLeaseExpiry:
    def test_expired_lease_is_redelivered_with_one_more_attempt(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        first = claim(store, lease=5)
        clock.advance(6)
        store.queues.push("q", [b"next"])  # due after the lease ran out
        again = claim(store, lease=5)
        assert (again.id, again.payload, again.attempts) == (first.id, b"job", 2)
        assert claim(store).payload == b"next"

    @pytest.mark.parametrize("settle", ["ack", "nack", "renew"])
    def test_stale_holder_conflicts_and_changes_nothing(
        self, store: durastate.Store, clock: FakeClock, settle: str
    ) -> None:
        store.queues.push("q", [b"job"])
        stale = claim(store, lease=5)
        clock.advance(6)
        current = claim(store, lease=30)
        with pytest.raises(Conflict):
            getattr(stale, settle)()
        # The current holder still owns it, on its own lease.
        assert stats(store) == counts(in_flight=1)
        clock.advance(20)
        assert store.queues.claim("q") is None
        current.ack()
        assert stats(store) == counts()

    def test_expired_but_unclaimed_lease_can_still_ack(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        late = claim(store, lease=5)
        clock.advance(60)
        late.ack()
        assert stats(store) == counts()
        assert store.queues.claim("q") is None

    def test_expired_but_unclaimed_lease_can_still_nack_and_renew(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.queues.push("q", [b"job"])
        late = claim(store, lease=5)
        clock.advance(60)
        late.renew()
        assert store.queues.claim("q") is None
        late.nack(delay=3)
        assert stats(store) == counts(delayed=1)

    def test_pop_never_takes_an_item_whose_lease_runs(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        claim(store, lease=5)
        assert store.queues.pop("q") is None
        clock.advance(6)
        assert store.queues.pop("q") == b"job"

    def test_expired_lease_keeps_its_place_by_due_time(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"a"])
        claim(store, lease=5)
        clock.advance(6)
        store.queues.push("q", [b"b"])  # pushed after "a" became due again
        assert [claim(store).payload for _ in range(2)] == [b"a", b"b"]


class TestDeadLetters:
    def test_nack_on_the_last_attempt_moves_to_dead_letters(self, store: durastate.Store, clock: FakeClock) -> None:
        pushed_at = clock()
        store.queues.push("q", [b"job"], max_attempts=2)
        claim(store).nack(error="first")
        clock.advance(1)
        held = claim(store)
        assert held.attempts == 2
        held.nack(error="second")
        assert store.queues.claim("q") is None
        assert stats(store) == counts(dead=1)
        (dead,) = store.queues.dead_letters("q")
        assert (dead.payload, dead.attempts, dead.last_error) == (b"job", 2, "second")
        assert dead.created_at == pytest.approx(pushed_at)
        assert dead.died_at == pytest.approx(clock())

    def test_lease_expiry_on_the_last_attempt_moves_to_dead_letters(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.queues.push("q", [b"job"], max_attempts=2)
        for attempt in (1, 2):
            assert claim(store, lease=5).attempts == attempt
            clock.advance(6)
        assert stats(store).dead == 0  # buried lazily, by the next claim
        store.queues.push("q", [b"next"])  # due after the exhausted item
        # The exhausted head is buried and the claim moves on to the next item.
        assert claim(store).payload == b"next"
        (dead,) = store.queues.dead_letters("q")
        assert (dead.payload, dead.attempts) == (b"job", 2)

    def test_many_exhausted_heads_are_buried_by_one_claim(self, store: durastate.Store, clock: FakeClock) -> None:
        doomed = [b"%03d" % i for i in range(150)]
        store.queues.push("q", doomed, max_attempts=1)
        for _ in doomed:
            claim(store, lease=5)
        clock.advance(6)
        store.queues.push("q", [b"survivor"])  # due after every doomed item
        assert claim(store).payload == b"survivor"
        assert [d.payload for d in store.queues.dead_letters("q", limit=None)] == doomed

    def test_default_max_attempts(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"])
        for attempt in range(1, DEFAULT_MAX_ATTEMPTS + 1):
            held = claim(store)
            assert held.attempts == attempt
            held.nack()
        assert store.queues.claim("q") is None
        assert stats(store) == counts(dead=1)

    def test_unlimited_attempts(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"], max_attempts=None)
        for _ in range(DEFAULT_MAX_ATTEMPTS * 2):
            claim(store).nack()
        assert claim(store).attempts == DEFAULT_MAX_ATTEMPTS * 2 + 1
        assert stats(store).dead == 0

    def test_pop_ignores_attempt_counts(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"job"], max_attempts=2)
        claim(store).nack()
        assert store.queues.pop("q") == b"job"
        assert stats(store) == counts()

    def test_dead_letters_page_by_cursor_oldest_first(self, store: durastate.Store) -> None:
        payloads = [b"%d" % i for i in range(7)]
        store.queues.push("q", payloads, max_attempts=1)
        for _ in payloads:
            claim(store).nack()
        all_dead = store.queues.dead_letters("q", limit=None)
        assert [d.payload for d in all_dead] == payloads
        assert [d.id for d in all_dead] == sorted({d.id for d in all_dead})
        pages: list[list[bytes]] = []
        cursor = 0
        while page := store.queues.dead_letters("q", after=cursor, limit=3):
            pages.append([d.payload for d in page])
            cursor = page[-1].id
        assert pages == [payloads[0:3], payloads[3:6], payloads[6:]]
        assert store.queues.dead_letters("q", limit=0) == []

    def test_dead_letters_are_per_queue(self, store: durastate.Store) -> None:
        for name in ("q", "other"):
            store.queues.push(name, [name.encode()], max_attempts=1)
            claim(store, name).nack()
        assert [d.payload for d in store.queues.dead_letters("q")] == [b"q"]
        assert store.queues.dead_letters("empty") == []

    def test_redrive_all_with_fresh_attempts(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b"], max_attempts=1)
        claim(store).nack()
        claim(store).nack()
        assert store.queues.redrive("q") == 2
        assert stats(store) == counts(ready=2)
        first = claim(store)
        assert (first.payload, first.attempts) == (b"a", 1)
        first.nack()  # max_attempts is kept: dead again after one more attempt
        assert [d.payload for d in store.queues.dead_letters("q")] == [b"a"]
        assert claim(store).payload == b"b"

    def test_redrive_by_ids(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b", b"c"], max_attempts=1)
        store.queues.push("other", [b"x"], max_attempts=1)
        for _ in range(3):
            claim(store).nack()
        claim(store, "other").nack()
        dead = {d.payload: d.id for d in store.queues.dead_letters("q")}
        assert store.queues.redrive("q", [dead[b"c"], dead[b"a"], dead[b"a"]]) == 2  # an id twice moves once
        assert [d.payload for d in store.queues.dead_letters("q")] == [b"b"]
        assert len(store.queues.dead_letters("other")) == 1
        assert sorted(pop_all(store)) == [b"a", b"c"]

    @pytest.mark.parametrize("operation", ["redrive", "delete_dead"])
    def test_redrive_or_delete_of_an_id_that_is_not_a_dead_letter_of_the_queue_is_refused_and_touches_none(
        self, store: durastate.Store, operation: str
    ) -> None:
        act = getattr(store.queues, operation)
        verb = {"redrive": "redriven", "delete_dead": "deleted"}[operation]
        store.queues.push("q", [b"a", b"b"], max_attempts=1)
        store.queues.push("other", [b"x"], max_attempts=1)
        for _ in range(2):
            claim(store).nack()
        claim(store, "other").nack()
        dead = [d.id for d in store.queues.dead_letters("q")]
        other_id = store.queues.dead_letters("other")[0].id
        unknown = max([*dead, other_id]) + 1000
        # Another queue's dead letter, an id never used, one gone already: each named, none of the ids touched.
        with pytest.raises(NotFound, match=rf"no dead letter {other_id}, {unknown} in queue .*nothing was {verb}"):
            act("q", [dead[0], other_id, unknown])
        assert act("q", [dead[0]]) == 1
        with pytest.raises(NotFound, match=rf"no dead letter {dead[0]} in queue"):
            act("q", [dead[1], dead[0]])
        assert [d.id for d in store.queues.dead_letters("q")] == [dead[1]]
        assert [d.id for d in store.queues.dead_letters("other")] == [other_id]
        assert pop_all(store) == ([b"a"] if operation == "redrive" else [])
        with store.transaction():  # inside a block: the refused call undoes only itself
            store.queues.push("q", [b"in-block"])
            with pytest.raises(NotFound):
                act("q", [dead[1], unknown])
            assert [d.id for d in store.queues.dead_letters("q")] == [dead[1]]
        assert pop_all(store) == [b"in-block"]

    def test_redrive_of_nothing(self, store: durastate.Store) -> None:
        assert store.queues.redrive("q") == 0
        assert store.queues.redrive("q", []) == 0

    def test_delete_dead(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b", b"c"], max_attempts=1)
        for _ in range(3):
            claim(store).nack()
        ids = [d.id for d in store.queues.dead_letters("q")]
        assert store.queues.delete_dead("q", [ids[1], ids[1]]) == 1  # an id twice goes once
        assert [d.payload for d in store.queues.dead_letters("q")] == [b"a", b"c"]
        assert store.queues.delete_dead("q", []) == 0
        assert store.queues.delete_dead("q") == 2
        assert store.queues.dead_letters("q") == []
        assert store.queues.delete_dead("q") == 0


class TestQueueStats:
    def test_stats_count_each_state(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"dies"], max_attempts=1)
        claim(store).nack()
        store.queues.push("q", [b"r1", b"r2", b"r3", b"f1", b"f2"])
        store.queues.push("q", [b"d1"], delay=50)
        claim(store, lease=20)
        claim(store, lease=20)
        claim(store, lease=5).nack(delay=50)
        assert stats(store) == counts(ready=2, in_flight=2, delayed=2, dead=1)
        clock.advance(30)  # leases ran out: redeliverable, so ready
        assert stats(store) == counts(ready=4, in_flight=0, delayed=2, dead=1)
        clock.advance(30)
        assert stats(store) == counts(ready=6, in_flight=0, delayed=0, dead=1)

    def test_stats_of_an_unknown_queue(self, store: durastate.Store) -> None:
        assert stats(store, "nothing") == counts()
