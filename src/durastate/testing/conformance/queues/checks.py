"""Conformance for ``store.queues``: waiting, concurrency, refused input, index use, the hypothesis
model, listing.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import durastate
from durastate import Conflict, InvalidRequest, StoreClosed, queues
from durastate.engines.base import Statement
from durastate.engines.watch import ChangeWatch
from durastate.queues import Claim, QueueBacklog
from durastate.testing.clock import FakeClock

from ..kv import expect_invalid
from ..plans import STATISTICS, assert_index_search, plan_of, with_statistics
from .common import FAILURE_DEADLINE, claim, counts, pop_all, stats

__all__ = [
    "TestQueueListing",
    "TestQueueBadInput",
    "TestQueueConcurrency",
    "TestQueueIndexUse",
    "TestQueueModel",
    "TestQueueWait",
]


class _Waiter:
    """Runs ``consume()`` in a thread; ``waiting`` is set once it blocks."""

    def __init__(self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch, consume: Callable[[], Any]) -> None:
        self.waiting = threading.Event()
        self.result: list[Any] = []
        self.error: list[BaseException] = []
        original = store.engine.watch
        waiting = self.waiting

        class Spy(ChangeWatch):
            """The engine's watch, telling the test when the waiter waits on it."""

            def __init__(self, watch: ChangeWatch) -> None:
                self.inner = watch
                self.reliable = watch.reliable

            def wait(self, timeout: float) -> bool:
                waiting.set()
                return self.inner.wait(timeout)

            def close(self) -> None:
                self.inner.close()

        monkeypatch.setattr(store.engine, "watch", lambda channel, poll: Spy(original(channel, poll)))

        def run() -> None:
            try:
                self.result.append(consume())
            except BaseException as exc:  # reported by finish()
                self.error.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self) -> Any:
        self.thread.join(FAILURE_DEADLINE)
        assert not self.thread.is_alive(), "the waiter never returned"
        if self.error:
            raise self.error[0]
        return self.result[0]


class TestQueueWait:
    def test_pop_wait_returns_an_item_pushed_by_another_thread(
        self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        waiter = _Waiter(store, monkeypatch, lambda: store.queues.pop("q", wait=FAILURE_DEADLINE))
        assert waiter.waiting.wait(FAILURE_DEADLINE), "pop(wait=) never waited"
        store.queues.push("q", [b"hello"])
        assert waiter.finish() == b"hello"

    def test_claim_wait_returns_an_item_pushed_by_another_thread(
        self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        waiter = _Waiter(store, monkeypatch, lambda: store.queues.claim("q", lease=30, wait=FAILURE_DEADLINE))
        assert waiter.waiting.wait(FAILURE_DEADLINE), "claim(wait=) never waited"
        store.queues.push("q", [b"hello"])
        got = waiter.finish()
        assert isinstance(got, Claim)
        assert (got.payload, got.attempts) == (b"hello", 1)
        got.ack()
        assert stats(store) == counts()

    def test_wait_is_woken_by_a_committed_transaction(
        self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        waiter = _Waiter(store, monkeypatch, lambda: store.queues.pop("q", wait=FAILURE_DEADLINE))
        assert waiter.waiting.wait(FAILURE_DEADLINE)
        with store.transaction():
            store.queues.push("q", [b"in a transaction"])
        assert waiter.finish() == b"in a transaction"

    def test_closing_the_store_ends_a_wait_with_store_closed(
        self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        waiter = _Waiter(store, monkeypatch, lambda: store.queues.claim("q", wait=FAILURE_DEADLINE))
        assert waiter.waiting.wait(FAILURE_DEADLINE)
        store.close()
        with pytest.raises(StoreClosed):
            waiter.finish()

    def test_wait_times_out_with_none(self, store: durastate.Store) -> None:
        store.queues.push("other", [b"not for q"])
        assert store.queues.pop("q", wait=0.05) is None
        assert store.queues.claim("q", wait=0.05) is None
        assert store.queues.pop("other") == b"not for q"

    def test_zero_wait_does_not_block(self, store: durastate.Store) -> None:
        assert store.queues.pop("q", wait=0) is None
        store.queues.push("q", [b"a"])
        assert store.queues.pop("q", wait=0) == b"a"

    def test_wait_returns_at_once_when_an_item_is_there(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b"])
        assert store.queues.pop("q", wait=FAILURE_DEADLINE) == b"a"
        assert claim(store).payload == b"b"

    @pytest.mark.parametrize("consume", ["pop", "claim"])
    def test_wait_inside_a_transaction_is_refused(self, store: durastate.Store, consume: str) -> None:
        store.queues.push("q", [b"a"])
        with store.transaction():
            with pytest.raises(InvalidRequest):
                getattr(store.queues, consume)("q", wait=1)
            store.queues.push("q", [b"b"])
        # The refusal changed nothing; the transaction went on and committed.
        assert pop_all(store) == [b"a", b"b"]


class TestQueueConcurrency:
    def test_concurrent_claimers_get_each_item_exactly_once(self, store: durastate.Store) -> None:
        payloads = [b"%04d" % i for i in range(200)]
        store.queues.push("q", payloads)
        start = threading.Barrier(4)
        taken: list[list[bytes]] = [[] for _ in range(4)]
        errors: list[BaseException] = []

        def worker(mine: list[bytes]) -> None:
            try:
                start.wait(FAILURE_DEADLINE)
                while (got := store.queues.claim("q", lease=600)) is not None:
                    mine.append(got.payload)
                    got.ack()
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in taken]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(FAILURE_DEADLINE)
        assert not errors
        everything = [p for t in taken for p in t]
        assert sorted(everything) == payloads
        assert stats(store) == counts()

    def test_concurrent_poppers_get_each_item_exactly_once(self, store: durastate.Store) -> None:
        payloads = [b"%04d" % i for i in range(200)]
        store.queues.push("q", payloads)
        start = threading.Barrier(4)
        taken: list[list[bytes]] = [[] for _ in range(4)]
        errors: list[BaseException] = []

        def worker(mine: list[bytes]) -> None:
            try:
                start.wait(FAILURE_DEADLINE)
                while (got := store.queues.pop("q")) is not None:
                    mine.append(got)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in taken]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(FAILURE_DEADLINE)
        assert not errors
        assert sorted(p for t in taken for p in t) == payloads


BAD_NAMES: list[Any] = ["", b"", None, 1, 1.5, ["q"], "\ud800", "q\udfff", "\udc80abc"]


BAD_WAITS: list[Any] = [float("nan"), float("inf"), -1, "1", True, [1], b"1"]


BAD_LEASES: list[Any] = [0, -1, -0.001, float("nan"), float("inf"), "30", None, True, [1], 1e300]


BAD_DELAYS: list[Any] = [-1, -0.001, float("nan"), float("inf"), float("-inf"), "1", None, True, [1], 1e300]


BAD_ITEMS: list[Any] = [b"abc", "abc", {b"a": b"b"}, None, 7, [b"a", "b"], [None], [1], [[b"a"]], (b"a", 1)]


BAD_IDS: list[Any] = [b"\x01\x02", "12", [1.5], ["1"], [True], [None], 3, {1: 2}, [2**63]]


BAD_LIMITS: list[Any] = [-1, "3", 1.5, True]


BAD_AFTERS: list[Any] = ["x", 1.5, True, None, 2**63]


# Queues / Claim typed Any: these calls are wrong on purpose.
QueuesCall = Callable[[Any, Any], object]


def _name_cases() -> dict[str, QueuesCall]:
    return {
        "push": lambda q, n: q.push(n, [b"x"]),
        "pop": lambda q, n: q.pop(n),
        "claim": lambda q, n: q.claim(n),
        "clear": lambda q, n: q.clear(n),
        "stats": lambda q, n: q.stats(n),
        "dead_letters": lambda q, n: q.dead_letters(n),
        "redrive": lambda q, n: q.redrive(n),
        "delete_dead": lambda q, n: q.delete_dead(n),
    }


NAME_METHODS = _name_cases()


BAD_QUEUE_CALLS: dict[str, tuple[Callable[[Any, Any], object], list[Any]]] = {
    "push-items": (lambda q, v: q.push("q", v), BAD_ITEMS),
    "push-delay": (lambda q, v: q.push("q", [b"x"], delay=v), BAD_DELAYS),
    "push-max_attempts": (lambda q, v: q.push("q", [b"x"], max_attempts=v), [0, -1, True, 1.5, "3", 2**63]),
    "pop-wait": (lambda q, v: q.pop("q", wait=v), BAD_WAITS),
    "claim-wait": (lambda q, v: q.claim("q", wait=v), BAD_WAITS),
    "claim-lease": (lambda q, v: q.claim("q", lease=v), BAD_LEASES),
    "dead_letters-after": (lambda q, v: q.dead_letters("q", after=v), BAD_AFTERS),
    "dead_letters-limit": (lambda q, v: q.dead_letters("q", limit=v), BAD_LIMITS),
    "redrive-ids": (lambda q, v: q.redrive("q", v), BAD_IDS),
    "delete_dead-ids": (lambda q, v: q.delete_dead("q", v), BAD_IDS),
}


BAD_CLAIM_CALLS: dict[str, tuple[Callable[[Any, Any], object], list[Any]]] = {
    "nack-delay": (lambda c, v: c.nack(delay=v), BAD_DELAYS),
    "nack-error": (lambda c, v: c.nack(error=v), [5, b"boom", ["boom"], "\ud800 lone surrogate"]),
    "renew-lease": (lambda c, v: c.renew(lease=v), [v for v in BAD_LEASES if v is not None]),
}


class TestQueueBadInput:
    """Every wrong argument raises ``InvalidRequest`` and changes nothing."""

    @pytest.fixture
    def seeded(self, store: durastate.Store) -> tuple[durastate.Store, Claim]:
        """Queue "q" with one item in each state; returns the live claim."""
        store.queues.push("q", [b"dead"], max_attempts=1)
        claim(store).nack(error="seed")
        store.queues.push("q", [b"held", b"ready-1", b"ready-2"])
        store.queues.push("q", [b"delayed"], delay=100)
        held = claim(store, lease=60)
        store.queues.push("other", [b"x"])
        return store, held

    @staticmethod
    def fingerprint(store: durastate.Store) -> object:
        return (
            [stats(store, name) for name in ("q", "other")],
            store.queues.dead_letters("q", limit=None),
        )

    @pytest.mark.parametrize("method", sorted(NAME_METHODS))
    def test_bad_queue_names(self, seeded: tuple[durastate.Store, Claim], method: str) -> None:
        store, _ = seeded
        before = self.fingerprint(store)
        for name in BAD_NAMES:
            expect_invalid(f"{method} name={name!r}", NAME_METHODS[method], store.queues, name)
            assert self.fingerprint(store) == before, f"{method} name={name!r} changed the store"

    @pytest.mark.parametrize("group", sorted(BAD_QUEUE_CALLS))
    def test_bad_arguments(self, seeded: tuple[durastate.Store, Claim], group: str) -> None:
        store, _ = seeded
        call, values = BAD_QUEUE_CALLS[group]
        before = self.fingerprint(store)
        for value in values:
            expect_invalid(f"{group}={value!r}", call, store.queues, value)
            assert self.fingerprint(store) == before, f"{group}={value!r} changed the store"

    @pytest.mark.parametrize("group", sorted(BAD_CLAIM_CALLS))
    def test_bad_settle_arguments_keep_the_claim(self, seeded: tuple[durastate.Store, Claim], group: str) -> None:
        store, held = seeded
        call, values = BAD_CLAIM_CALLS[group]
        before = self.fingerprint(store)
        for value in values:
            expect_invalid(f"{group}={value!r}", call, held, value)
            assert self.fingerprint(store) == before, f"{group}={value!r} changed the store"
        held.ack()  # the claim is still valid

    def test_oversized_payload_is_refused(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(max_value_size=16)
        store.queues.push("q", [b"x" * 16])
        expect_invalid("push 17 bytes", store.queues.push, "q", [b"y" * 17])
        expect_invalid("push batch with 17 bytes", store.queues.push, "q", [b"ok", b"y" * 17])
        assert pop_all(store) == [b"x" * 16]

    def test_a_tiny_positive_lease_is_not_expired_on_arrival(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        held = claim(store, lease=0.0001)
        assert store.queues.claim("q") is None
        clock.advance(1)
        assert claim(store).id == held.id


class TestQueueIndexUse:
    """Claims, pops and settling are index searches: cost flat in queue length."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        for name in ("q", "other"):
            store.queues.push(name, [b"%d" % i for i in range(300)])
            store.queues.push(name, [b"dead"], max_attempts=1)
        for _ in range(300):
            claim(store, "other").ack()
        claim(store, "other").nack()
        # Dead letters enough that a lookup of a few by id is cheaper as probes (SQLite scans a 2-row table).
        store.queues.push("graveyard", [b"%d" % i for i in range(30)], max_attempts=1)
        for _ in range(30):
            claim(store, "graveyard").nack()
        for i in range(40):  # many queues, as in production: statistics then show `queue` selective
            store.queues.push(f"bystander-{i}", [b"x"] * 10)
        return with_statistics(store, request.param)

    def check(
        self, store: durastate.Store, statement: Statement, params: tuple[Any, ...], table: str, *using: str
    ) -> None:
        plan = plan_of(store, statement, params)
        assert_index_search(plan, store.engine.prefix + table, using=using)

    def test_claim(self, filled: durastate.Store) -> None:
        self.check(filled, queues.CLAIM, (b"token", 10**12, b"q", 10**12, 0), "queue", "queue", "available_at")
        self.check(filled, queues.HEAD_TIME, (b"q",), "queue", "queue")

    def test_claim_slow_path(self, filled: durastate.Store) -> None:
        self.check(filled, queues.CLAIM_HEAD, (b"q", 10**12, 0), "queue", "queue", "available_at")
        self.check(filled, queues.CLAIM_ID, (b"token", 10**12, 1), "queue", "id")
        self.check(filled, queues.BURY, (10**12, 1), "queue", "id")

    def test_backlog(self, filled: durastate.Store) -> None:
        """Bounded by the claim index (no payloads), and the dead-letter count by its own index."""
        plan = plan_of(filled, queues.BACKLOG, (b"q", b"q", 10**12, 10_000))
        prefix = filled.engine.prefix
        assert_index_search(plan, prefix + "queue", using=("queue",))
        assert_index_search(plan, prefix + "queue_dead", using=("queue",))

    def test_pop(self, filled: durastate.Store) -> None:
        self.check(filled, queues.POP, (b"q", 10**12, 0), "queue", "available_at")

    def test_ack_nack_renew(self, filled: durastate.Store) -> None:
        self.check(filled, queues.ACK, (1, b"token"), "queue", "id")
        self.check(filled, queues.NACK, (10**12, None, 1, b"token"), "queue", "id")
        self.check(filled, queues.RENEW, (10**12, 1, b"token"), "queue", "id")

    def test_stats(self, filled: durastate.Store) -> None:
        params = (10**12, 10**12, 10**12, b"q", b"q")
        self.check(filled, queues.STATS, params, "queue", "queue")
        self.check(filled, queues.STATS, params, "queue_dead", "queue")

    def test_dead_letters(self, filled: durastate.Store) -> None:
        self.check(filled, queues.DEAD_PAGE, (b"q", 0, 100), "queue_dead", "queue", "id")
        # By ids: a probe of the primary key per id, not the queue's range filtered by id.
        ids = (1, 2, 3)
        for statement, params in (
            (queues.dead_ids_held_sql(3), (b"q", 3, *ids)),
            (queues.redrive_ids_sql(3), (10**12, *ids, *ids)),
            (queues.delete_dead_ids_sql(3), ids),
        ):
            plan = plan_of(filled, statement, params)
            # The move sorts its (at most ID_CHUNK) rows into the order the ids were given in.
            assert_index_search(plan, filled.engine.prefix + "queue_dead", using=("id",), sorts=True)


class _Item:
    __slots__ = ("attempts", "due", "error", "max_attempts", "payload", "seq", "token")

    def __init__(self, payload: bytes, due: int, max_attempts: int | None, seq: int) -> None:
        self.payload = payload
        self.due = due
        self.max_attempts = max_attempts
        self.seq = seq
        self.attempts = 0
        self.error: str | None = None
        self.token: object | None = None  # the Claim holding the lease, if any


class QueueMachine(RuleBasedStateMachine):
    """One queue of ``store.queues`` against a list-based model.

    The model orders by (due time, push order), as the contract says; holds
    the ``Claim`` objects handed out (live, stale or settled) and predicts
    for each ack/nack/renew whether it succeeds or conflicts.
    """

    def __init__(self, store: durastate.Store, clock: FakeClock, name: bytes) -> None:
        super().__init__()
        self.queues = store.queues
        self.clock = clock
        self.name = name
        self.items: list[_Item] = []
        self.dead: list[tuple[bytes, int, str | None]] = []
        self.claims: list[tuple[Claim, _Item]] = []
        self.seq = 0
        self.pushed = 0
        self.max_attempts_of: dict[bytes, int | None] = {}

    def now(self) -> int:
        return int(self.clock() * 1000)

    def head(self) -> _Item | None:
        due = [i for i in self.items if i.due <= self.now()]
        return min(due, key=lambda i: (i.due, i.seq)) if due else None

    def bury(self, item: _Item) -> None:
        self.items.remove(item)
        self.dead.append((item.payload, item.attempts, item.error))

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    @rule(
        count=st.integers(1, 3),
        delay=st.sampled_from([0, 0, 2]),
        max_attempts=st.sampled_from([None, 1, 2, 3]),
    )
    def push(self, count: int, delay: int, max_attempts: int | None) -> None:
        payloads = []
        for _ in range(count):
            self.pushed += 1
            payloads.append(b"%d" % self.pushed)
        assert self.queues.push(self.name, payloads, delay=delay, max_attempts=max_attempts) == count
        for payload in payloads:
            self.max_attempts_of[payload] = max_attempts
            self.items.append(_Item(payload, self.now() + delay * 1000, max_attempts, self.next_seq()))

    @rule()
    def pop(self) -> None:
        head = self.head()
        assert self.queues.pop(self.name) == (None if head is None else head.payload)
        if head is not None:
            self.items.remove(head)

    @rule(lease=st.sampled_from([1, 3]))
    def claim(self, lease: int) -> None:
        got = self.queues.claim(self.name, lease=lease)
        while (head := self.head()) is not None and head.max_attempts is not None:
            if head.attempts < head.max_attempts:
                break
            self.bury(head)
        if head is None:
            assert got is None
            return
        assert got is not None
        head.attempts += 1
        head.due = self.now() + lease * 1000
        head.token = got
        assert (got.payload, got.attempts) == (head.payload, head.attempts)
        self.claims.append((got, head))

    def holder_is_current(self, held: Claim, item: _Item) -> bool:
        return item in self.items and item.token is held

    @precondition(lambda self: self.claims)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        held, item = data.draw(st.sampled_from(self.claims))
        if self.holder_is_current(held, item):
            held.ack()
            self.items.remove(item)
        else:
            with pytest.raises(Conflict):
                held.ack()

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), delay=st.sampled_from([0, 2]), error=st.sampled_from([None, "e1", "e2"]))
    def nack(self, data: st.DataObject, delay: int, error: str | None) -> None:
        held, item = data.draw(st.sampled_from(self.claims))
        if not self.holder_is_current(held, item):
            with pytest.raises(Conflict):
                held.nack(delay=delay, error=error)
            return
        held.nack(delay=delay, error=error)
        item.token = None
        item.error = error
        item.due = self.now() + delay * 1000
        if item.max_attempts is not None and item.attempts >= item.max_attempts:
            self.bury(item)

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), lease=st.sampled_from([1, 4]))
    def renew(self, data: st.DataObject, lease: int) -> None:
        held, item = data.draw(st.sampled_from(self.claims))
        if self.holder_is_current(held, item):
            held.renew(lease=lease)
            item.due = self.now() + lease * 1000
        else:
            with pytest.raises(Conflict):
                held.renew(lease=lease)

    @rule(seconds=st.sampled_from([0.5, 1, 2, 5]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def redrive(self) -> None:
        assert self.queues.redrive(self.name) == len(self.dead)
        for payload, _, _ in self.dead:
            # Due now, fresh attempts, no error; max_attempts as pushed.
            self.items.append(_Item(payload, self.now(), self.max_attempts_of[payload], self.next_seq()))
        self.dead.clear()

    @rule()
    def clear(self) -> None:
        assert self.queues.clear(self.name) == len(self.items)
        self.items.clear()

    @invariant()
    def stats_and_dead_letters_match(self) -> None:
        now = self.now()
        expected = counts(
            ready=sum(1 for i in self.items if i.due <= now),
            in_flight=sum(1 for i in self.items if i.due > now and i.token is not None),
            delayed=sum(1 for i in self.items if i.due > now and i.token is None),
            dead=len(self.dead),
        )
        assert self.queues.stats(self.name) == expected
        dead = [(d.payload, d.attempts, d.last_error) for d in self.queues.dead_letters(self.name, limit=None)]
        assert dead == self.dead


class TestQueueModel:
    def test_queues_behave_like_the_model(self, store: durastate.Store, clock: FakeClock) -> None:
        names = (b"model-%d" % i for i in itertools.count())
        factory: Any = lambda: QueueMachine(store, clock, next(names))  # noqa: E731
        run_state_machine_as_test(factory, settings=settings(max_examples=50, stateful_step_count=30, deadline=None))


class TestQueueListing:
    """``queues.names()`` and ``queues.peek(name)``: read-only views of every queue."""

    def test_names_cover_items_and_dead_letters(self, store: durastate.Store) -> None:
        q = store.queues
        q.push("b-ready", [b"x"])
        q.push("a-dead", [b"y"], max_attempts=1)
        claim = q.claim("a-dead", lease=10)
        assert claim is not None
        claim.nack(error="boom")  # last attempt: dead-lettered, the queue itself is empty
        q.push(b"\xff-bytes", [b"z"])
        assert q.stats("a-dead").dead == 1
        assert q.names() == sorted([b"a-dead", b"b-ready", b"\xff-bytes"])
        assert q.names(after=b"a-dead", limit=1) == [b"b-ready"]
        assert q.names(after="b-ready") == [b"\xff-bytes"]

    def test_peek_reports_each_state_in_delivery_order_without_claiming(
        self, store: durastate.Store, clock: FakeClock
    ) -> None:
        q = store.queues
        q.push("jobs", [b"one", b"two"])
        q.push("jobs", [b"later"], delay=60)
        claim = q.claim("jobs", lease=30)
        assert claim is not None and claim.payload == b"one"
        items = q.peek("jobs")
        # Ready first (as claim takes them), then by when each becomes claimable: the lease ends before the delay.
        assert [(i.payload, i.state, i.attempts) for i in items] == [
            (b"two", "ready", 0),
            (b"one", "leased", 1),
            (b"later", "delayed", 0),
        ]
        assert items[1].available_at == pytest.approx(claim.lease_expires_at)
        assert q.stats("jobs").ready == 1  # peeking claimed nothing
        assert not any(i.lease_expired for i in items)
        clock.advance(31)  # the lease ran out: claimable again, and flagged (its consumer never answered)
        assert [(i.payload, i.state, i.lease_expired) for i in q.peek("jobs")] == [
            (b"two", "ready", False),
            (b"one", "ready", True),
            (b"later", "delayed", False),
        ]

    def test_backlog_counts_ready_expired_leases_and_dead(self, store: durastate.Store, clock: FakeClock) -> None:
        q = store.queues
        assert q.backlog("jobs") == QueueBacklog(0, 0, None, 0, False)
        first = clock()
        q.push("jobs", [b"a", b"b", b"c"])
        clock.advance(1)
        q.push("jobs", [b"later"], delay=60)
        assert q.backlog("jobs") == QueueBacklog(3, 0, first, 0, False)
        lost = q.claim("jobs", lease=5)
        assert lost is not None
        failed = q.claim("jobs", lease=5)
        assert failed is not None
        failed.nack(error="boom")  # ready again at once, not a lost lease
        assert q.backlog("jobs") == QueueBacklog(2, 0, first, 0, False)
        clock.advance(10)  # the first claim's lease ran out unanswered
        backlog = q.backlog("jobs")
        assert (backlog.ready, backlog.expired_leases, backlog.dead) == (3, 1, 0)
        assert backlog.oldest_ready_at == pytest.approx(first)
        assert q.backlog("jobs", limit=2) == QueueBacklog(2, 0, first, 0, True)
        q.push("other", [b"fragile"], max_attempts=1)
        doomed = q.claim("other", lease=5)
        assert doomed is not None
        doomed.nack(error="boom")  # its last attempt: dead-lettered
        assert q.backlog("other") == QueueBacklog(0, 0, None, 1, False)
        for bad in (0, -1, True, "5", 10_000_001):
            with pytest.raises(InvalidRequest, match="limit"):
                q.backlog("jobs", limit=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="name"):
            q.backlog("")

    def test_peek_pages_by_cursor_and_keeps_last_error(self, store: durastate.Store, clock: FakeClock) -> None:
        q = store.queues
        q.push("jobs", [b"%d" % i for i in range(5)])  # same push time: delivery order is id order
        first = q.claim("jobs", lease=10)
        assert first is not None
        first.nack(error="smtp down", delay=100)  # now due last
        page = q.peek("jobs", limit=2)
        assert [i.payload for i in page] == [b"1", b"2"]
        rest = q.peek("jobs", after=page[-1].cursor)
        assert [i.payload for i in rest] == [b"3", b"4", b"0"]
        assert rest[-1].last_error == "smtp down" and rest[-1].max_attempts == 5 and rest[-1].state == "delayed"
        clock.advance(101)
        assert not q.peek("jobs")[-1].lease_expired  # nacked: released, not a lost lease
        assert q.peek("jobs", after=rest[-1].cursor) == []
        assert q.peek("nothing") == []

    def test_bad_arguments_are_refused(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest):
            store.queues.names(limit=0)
        with pytest.raises(InvalidRequest):
            store.queues.peek("", limit=5)
        for cursor in ("1", "a:b", 7, "1:2:3"):
            with pytest.raises(InvalidRequest, match="after"):
                store.queues.peek("jobs", after=cursor)  # type: ignore[arg-type]
