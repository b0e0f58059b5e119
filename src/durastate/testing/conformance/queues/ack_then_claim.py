"""Conformance for ``Queues._ack_then_claim``: a finished item's ack and the next claim in one commit.

Engines with ``capabilities.write_ctes`` run it as one statement, the others
as a transaction; both answer the same. (huey's worker uses it: the ack of
the task it ran goes with its next dequeue.)
"""

from __future__ import annotations

import pytest

import durastate
from durastate import WrongType
from durastate.testing.clock import FakeClock

from .common import claim, counts, stats

__all__ = ["TestAckThenClaim"]


class TestAckThenClaim:
    def test_acks_the_done_item_and_claims_the_next(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b"])
        done = claim(store)
        acked, got = store.queues._ack_then_claim(done, "q", lease=30)
        assert acked and got is not None and (got.payload, got.attempts) == (b"b", 1)
        assert stats(store) == counts(in_flight=1)
        got.ack()  # the claim holds the lease the statement set
        assert stats(store) == counts()

    def test_the_claim_may_be_of_another_queue(self, store: durastate.Store) -> None:
        store.queues.push("a", [b"from a"])
        store.queues.push("b", [b"from b"])
        done = claim(store, "a")
        acked, got = store.queues._ack_then_claim(done, "b")
        assert acked and got is not None and got.payload == b"from b"
        assert stats(store, "a") == counts() and stats(store, "b") == counts(in_flight=1)

    def test_an_empty_queue_still_takes_the_ack(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"only"])
        done = claim(store)
        assert store.queues._ack_then_claim(done, "q") == (True, None)
        assert stats(store) == counts()

    def test_an_expired_lease_still_ours_is_acked_not_claimed_again(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        store.queues.push("q", [b"job", b"next"])
        done = claim(store, lease=5)
        clock.advance(60)  # "job" is due again, its row still carries our lease token
        acked, got = store.queues._ack_then_claim(done, "q")
        assert acked and got is not None and got.payload == b"next"
        assert stats(store) == counts(in_flight=1)

    def test_a_lost_lease_is_reported_and_the_claim_goes_ahead(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        stale = claim(store, lease=5)
        clock.advance(6)
        current = claim(store, lease=30)
        store.queues.push("q", [b"next"])
        acked, got = store.queues._ack_then_claim(stale, "q")
        assert not acked and got is not None and got.payload == b"next"
        current.ack()  # the current holder's lease was left alone
        assert stats(store) == counts(in_flight=1)

    def test_an_item_already_gone_counts_as_acked(self, store: durastate.Store) -> None:
        """What a retry after a lost connection finds when its first attempt deleted the item."""
        store.queues.push("q", [b"job"])
        done = claim(store)
        done.ack()
        assert store.queues._ack_then_claim(done, "q") == (True, None)

    def test_an_exhausted_head_is_buried_and_the_next_claimed(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("done", [b"finished"])
        done = claim(store, "done")
        store.queues.push("q", [b"doomed"], max_attempts=1)
        claim(store, lease=5)
        clock.advance(6)  # its one attempt is used up: the next claim buries it
        store.queues.push("q", [b"next"])
        acked, got = store.queues._ack_then_claim(done, "q", lease=30)
        assert acked and got is not None and got.payload == b"next"
        assert stats(store) == counts(in_flight=1, dead=1)
        assert stats(store, "done") == counts()

    @pytest.mark.parametrize("bad", [None, b"claim", object()])
    def test_anything_but_a_claim_is_refused_and_changes_nothing(self, store: durastate.Store, bad: object) -> None:
        store.queues.push("q", [b"job"])
        with pytest.raises(WrongType, match="done must be a Claim"):
            store.queues._ack_then_claim(bad, "q")  # type: ignore[arg-type]
        assert stats(store) == counts(ready=1)

    def test_a_claim_of_another_store_is_refused(self, store: durastate.Store) -> None:
        with durastate.open("memory:") as other:
            other.queues.push("q", [b"elsewhere"])
            foreign = claim(other)
            store.queues.push("q", [b"job"])
            with pytest.raises(WrongType, match="this store's queues"):
                store.queues._ack_then_claim(foreign, "q")
        assert stats(store) == counts(ready=1)
