"""Conformance: the failures users of peer libraries report, each a test durastate passes (issue 26).

README, "What goes wrong elsewhere, and what durastate does", names each
test here with its pain. Real processes (fork), synchronised by barriers,
every wait with a deadline (``multiprocess``'s plumbing):

* pain 1, "database is locked" at startup: 16 processes open one new store
  at the same instant and each writes: no error, one migration;
* pain 2, migrations at a concurrent start: processes open, at once, a
  store whose schema is one version older than the code's, and one from
  the oldest version still supported: no error, each step applied once
  (a second run of a step would fail its CREATE or ALTER), data intact;
* pain 3, lost updates: processes compare-and-swap one document: every
  increment lands, every lost race is reported to its caller as
  ``Conflict``;
* pains 5 and 8, queues under dead rows and backlogs: claims start at the
  queue's floor (``Queues._floor``); ten queues with waiting items are each
  served in order, an item due below the floor is still claimed, and
  claims under a session idle in transaction take every new item.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

import durastate
from durastate.engines import registry
from durastate.engines.schema import Schema
from durastate.engines.statements import READ, WRITE
from durastate.errors import Conflict
from durastate.queues.facet import Queues
from durastate.store import SCHEMAS

from .multiprocess import SCOPE, WORKER_TIMEOUT, _kill, _opened, _receive, _Workers, open_at_once

__all__ = [
    "TestPainCrashedEventHolder",
    "TestPainConcurrentMigration",
    "TestPainLostUpdates",
    "TestPainQueueFloor",
    "TestPainStartupLocked",
]

METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _versions(store: durastate.Store) -> list[tuple[str, int]]:
    engine = store.engine
    rows = engine.all(engine.sql(READ("SELECT facet, version FROM {p}schema ORDER BY facet")))
    return [(str(facet), int(version)) for facet, version in rows]


@pytest.mark.multiprocess
class TestPainStartupLocked:
    """Pain 1: many processes first-opening one new store at once."""

    OPENERS = 16

    def test_sixteen_processes_open_a_new_store_at_once_and_each_writes(self, shared_url: str) -> None:
        with _Workers(METHOD) as workers:
            barrier = workers.ctx.Barrier(self.OPENERS)
            for i in range(self.OPENERS):
                workers.start(f"opener-{i}", open_at_once, shared_url, barrier)
            results = workers.results()
        expected = sorted((schema.facet, schema.version) for schema in SCHEMAS)
        assert all(versions == expected for versions in results.values()), results
        with _opened(shared_url) as store:
            assert store.kv.counter(SCOPE, b"openers", b"count") == self.OPENERS


def _older_store(url: str, keep: int | None) -> None:
    """Build the store at an older schema: each facet's first ``keep`` steps (``None``: all but its last).

    A facet keeps at least its first step (the engine's own core schema
    has one, and the data written here needs kv's).
    """
    engine = registry.create(url, {})
    try:
        older = [
            Schema(schema.facet, schema.migrations[: max(1, len(schema.migrations) - 1 if keep is None else keep)])
            for schema in SCHEMAS
        ]
        assert older != list(SCHEMAS), "no facet has a step to leave out"
        engine.migrate(older)
        engine.execute(
            engine.sql(WRITE("INSERT INTO {p}kv (scope, ns, key, value) VALUES (?, ?, ?, ?)")),
            (SCOPE, b"kept", b"before", b"from the older schema"),
        )
    finally:
        engine.close()


def open_migrate_and_read(url: str, barrier: Any) -> tuple[list[tuple[str, int]], bytes | None]:
    """Open the older store with every sibling at once (migrating it), then read what it held."""
    barrier.wait(WORKER_TIMEOUT)
    with _opened(url) as store:
        store.kv.incr(SCOPE, b"openers", b"count")
        return _versions(store), store.kv.get(SCOPE, b"kept", b"before")


@pytest.mark.multiprocess
class TestPainConcurrentMigration:
    """Pain 2: processes opening an older store at once migrate it exactly once."""

    OPENERS = 8

    @pytest.mark.parametrize("keep", [None, 1], ids=["one-version-older", "oldest-supported"])
    def test_processes_opening_an_older_store_at_once_migrate_it_once(self, shared_url: str, keep: int | None) -> None:
        _older_store(shared_url, keep)
        with _Workers(METHOD) as workers:
            barrier = workers.ctx.Barrier(self.OPENERS)
            for i in range(self.OPENERS):
                workers.start(f"opener-{i}", open_migrate_and_read, shared_url, barrier)
            results = workers.results()
        expected = sorted((schema.facet, schema.version) for schema in SCHEMAS)
        for name, (versions, kept) in results.items():
            assert versions == expected, name
            assert kept == b"from the older schema", name
        with _opened(shared_url) as store:
            assert store.kv.counter(SCOPE, b"openers", b"count") == self.OPENERS


INCREMENTS = 25


def cas_increment(url: str, barrier: Any) -> int:
    """Add 1 to the shared document's count ``INCREMENTS`` times by compare-and-swap; the conflicts it met."""
    conflicts = 0
    with _opened(url) as store:
        barrier.wait(WORKER_TIMEOUT)
        done = 0
        while done < INCREMENTS:
            current = store.documents.read("counter")
            assert current is not None
            try:
                store.documents.write("counter", {"n": current.data["n"] + 1}, expect=current.revision)
            except Conflict:
                conflicts += 1  # reported: read again and retry
                continue
            done += 1
    return conflicts


@pytest.mark.multiprocess
class TestPainLostUpdates:
    """Pain 3: concurrent writers of one document lose nothing; every lost race is reported."""

    WRITERS = 4

    def test_concurrent_compare_and_swap_loses_no_update(self, shared_url: str) -> None:
        with _opened(shared_url) as store:
            first = store.documents.write("counter", {"n": 0})
        with _Workers(METHOD) as workers:
            barrier = workers.ctx.Barrier(self.WRITERS)
            for i in range(self.WRITERS):
                workers.start(f"writer-{i}", cas_increment, shared_url, barrier)
            results = workers.results()
        with _opened(shared_url) as store:
            final = store.documents.read("counter")
        assert final is not None
        assert final.data["n"] == self.WRITERS * INCREMENTS  # nothing lost
        # Each successful write made exactly one revision: no write landed unreported or twice.
        assert final.revision - first == self.WRITERS * INCREMENTS, results


class TestPainQueueFloor:
    """Pains 5 and 8: claims start at the queue's floor, above rows settled long ago, and the floor hides nothing.

    The latency figures (200,000 settled items under an idle-in-transaction
    session; a backlog) are ``bench/queue_bloat.py``'s; here, that claims
    stay correct and fair with the floor in place.
    """

    QUEUES = 10
    WAITING = 60

    def test_ten_queues_with_waiting_items_are_each_served_in_order(self, store: durastate.Store) -> None:
        names = [f"q{i}" for i in range(self.QUEUES)]
        for name in names:
            store.queues.push(name, [b"%s-%03d" % (name.encode(), i) for i in range(self.WAITING)])
        served: dict[str, list[bytes]] = {name: [] for name in names}
        for _ in range(self.WAITING):
            for name in names:  # one consumer taking from every queue in turn
                claim = store.queues.claim(name, lease=30)
                assert claim is not None, f"{name} starved"
                served[name].append(claim.payload)
                claim.ack()
        for name in names:
            assert served[name] == [b"%s-%03d" % (name.encode(), i) for i in range(self.WAITING)]
            assert store.queues.claim(name, lease=30) is None

    def test_an_item_due_before_the_floor_is_still_claimed(self, open_store: Any) -> None:
        now = [1_800_000_000.0]
        store = open_store(clock=lambda: now[0])
        store.queues.push("jobs", [b"first"])
        claim = store.queues.claim("jobs", lease=30)
        assert claim is not None
        claim.ack()
        assert store.queues.claim("jobs", lease=30) is None  # the floor is now near the clock
        now[0] -= 3600  # the store's clock goes back an hour: an item due then lies below that floor
        store.queues.push("jobs", [b"from the past"])
        claim = store.queues.claim("jobs", lease=30)
        assert claim is not None and claim.payload == b"from the past"
        claim.ack()
        assert store.queues.pop("jobs") is None

    def test_the_floor_is_kept_only_where_the_engines_indexes_keep_dead_entries(
        self, store: durastate.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Claims, pops and ``_ack_then_claim`` look up the floor (``Queues._floor``) where
        ``capabilities.dead_index_entries`` says a scan from the head steps over dead entries, and only there."""
        looked_up: list[bytes] = []
        floor = Queues._floor

        def counted(queues: Queues, queue: bytes, now: int) -> int:
            looked_up.append(queue)
            return floor(queues, queue, now)

        monkeypatch.setattr(Queues, "_floor", counted)
        store.queues.push("jobs", [b"a", b"b", b"c"])
        claim = store.queues.claim("jobs", lease=30)
        assert claim is not None and claim.payload == b"a"
        assert store.queues.pop("jobs") == b"b"
        acked, following = store.queues._ack_then_claim(claim, "jobs", 30)
        assert acked and following is not None and following.payload == b"c"
        following.ack()
        assert store.queues.claim("jobs", lease=30) is None
        assert len(looked_up) == (4 if store.engine.capabilities.dead_index_entries else 0)

    SETTLED = 500

    def test_claims_under_an_idle_transaction_pass_the_rows_it_keeps_alive(self, shared_url: str) -> None:
        """PostgreSQL: a session idle in a transaction (with a transaction id) keeps every settled
        item's row versions; claims still take every new item, in order, and leave nothing behind."""
        if not shared_url.startswith("postgres"):
            pytest.skip("dead row versions kept by an old snapshot are PostgreSQL's (MVCC)")
        import psycopg

        with _opened(shared_url) as store, psycopg.connect(shared_url) as holder:
            holder.execute("SELECT txid_current()").fetchone()  # idle in transaction from here on
            store.queues.push("jobs", [b"settled-%03d" % i for i in range(self.SETTLED)])
            for _ in range(self.SETTLED):
                claim = store.queues.claim("jobs", lease=30)
                assert claim is not None
                claim.ack()
            fresh = [b"new-%02d" % i for i in range(20)]
            store.queues.push("jobs", fresh)
            taken = []
            while (claim := store.queues.claim("jobs", lease=30)) is not None:
                taken.append(claim.payload)
                claim.ack()
            assert taken == fresh
            stats = store.queues.stats("jobs")
            assert (stats.ready, stats.in_flight, stats.delayed) == (0, 0, 0)


EVENT_LEASE_MS = 1_000


def claim_events_and_hold(url: str, session: str, channel: Any) -> None:
    """Claim the session's ready events for ``EVENT_LEASE_MS``, report their indexes, block until killed."""
    with _opened(url) as store:
        result = store.events.claim_available(session, "victim", ttl_ms=EVENT_LEASE_MS)
        channel.send((result.outcome, [event.index for event in result.events]))
        channel.recv()  # the parent never answers: it kills us


@pytest.mark.multiprocess
class TestPainCrashedEventHolder:
    """Pain 6 for event sessions: a processor killed mid-claim; its events come back after the lease, no reaper."""

    def test_events_claimed_by_a_killed_process_are_claimable_once_the_lease_ran_out(self, shared_url: str) -> None:
        with _opened(shared_url) as store:
            store.events.append("session", [{"type": "work", "payload": {"n": n}} for n in range(3)])
        with _Workers(METHOD) as workers:
            ours, theirs = workers.ctx.Pipe()
            victim = workers.start_plain("victim", claim_events_and_hold, shared_url, "session", theirs)
            outcome, held = _receive(ours, "the victim's claim")
            assert outcome == "claimed" and held, (outcome, held)
            _kill(victim)
        with _opened(shared_url) as store:
            # The lease is the victim's still: nobody else gets its events before it ends.
            assert store.events.claim_available("session", "survivor", ttl_ms=60_000).outcome == "busy"
        later = durastate.open(shared_url, clock=lambda: time.time() + 2 * EVENT_LEASE_MS / 1000)
        try:  # the same store, read by a clock past the lease: no waiting, no reaper
            result = later.events.claim_available("session", "survivor", ttl_ms=60_000)
            assert result.outcome == "claimed"
            assert [event.index for event in result.events] == held
        finally:
            later.close()
