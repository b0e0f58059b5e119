"""Conformance for ``store.events``: killed workers (the torture test), the schema migration, index
use.
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import events
from durastate.engines.base import DDL, WRITE, Statement
from durastate.events import (
    StoredEvent,
)

from ..plans import STATISTICS, assert_index_search, plan_of, with_statistics
from .common import S, ev

__all__ = ["TestEventsIndexUse", "TestEventsMigration", "TestEventsTorture"]

TORTURE_SESSIONS = 20


TORTURE_EVENTS = 12


TORTURE_TTL_MS = 300


TORTURE_MAX_FAILURES = 3


TORTURE_KILLS = 8

# A dying worker is killed (SIGKILL) by a thread of its own at a random moment up to TORTURE_DIE_AFTER seconds after
# its first claim (at any instruction: inside a statement, a COMMIT, between calls), and at the latest when it
# reaches a random one of its first TORTURE_DIE_WITHIN events (holding its claims, or inside the completion's
# transaction before its COMMIT), should the machine starve the thread. Chosen by the worker, not timed by the test,
# so every kill lands while work remains however fast the engine or busy the machine (kills timed by the test's
# clock found the work done before them). The dying workers run alone, and TORTURE_KILLS x TORTURE_DIE_WITHIN stays
# below the lane events and their children (160), which always complete: work always remains for each of them.
TORTURE_DIE_WITHIN = 12
TORTURE_DIE_AFTER = 0.01


TORTURE_DEADLINE = 120.0


def _torture_worker(url: str, holder: str, seed: int, dies: bool) -> None:
    """Claim across sessions; complete (with a child for root events) or fail.

    Completion and its effect (a counter per event) commit together, so the
    counter says how many times an event's processing was committed. Lane
    events and children are never failed (a dead lane head would block its
    lane for good). Exits when no session has pending work; a worker that
    ``dies`` kills itself first (see ``TORTURE_DIE_WITHIN``).
    """
    rng = random.Random(seed)
    die_at = rng.randrange(TORTURE_DIE_WITHIN) if dies else -1
    die_committing = rng.random() < 0.5  # else holding its claims, before the event's completion
    killer: threading.Timer | None = None
    handled = 0
    store = durastate.open(url, busy_timeout=20.0)
    events = store.events
    while True:
        claimed = events.claim_any(holder, ttl_ms=TORTURE_TTL_MS, limit=2)
        if claimed and dies and killer is None:
            killer = threading.Timer(rng.uniform(0, TORTURE_DIE_AFTER), os.kill, (os.getpid(), signal.SIGKILL))
            killer.daemon = True
            killer.start()
        if not claimed:
            pending = sum(s.pending_count for s in events.list_sessions(limit=1000).sessions)
            if pending == 0:
                return
            store.engine.wait_for_change("torture", 0.02)
            continue
        for e in claimed:
            dying = handled == die_at
            handled += 1
            fails = e.lane is None and e.type == "root" and rng.random() < 0.3
            if dying and (fails or not die_committing):
                os.kill(os.getpid(), signal.SIGKILL)  # holding its claims
            if fails:
                events.fail_attempt(e.session_id, e.index, e.attempt_count, f"by {holder}", TORTURE_MAX_FAILURES)
                continue
            children = [{"type": "child", "payload": e.index, "id": f"{e.id}/child"}] if e.type == "root" else []
            with store.transaction():
                result = events.complete_attempt(e.session_id, e.index, e.attempt_count, children)
                if result.outcome == "completed":
                    store.kv.incr(b"torture", b"", e.id.encode(), 1)
                if dying:
                    os.kill(os.getpid(), signal.SIGKILL)  # before the COMMIT


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
        procs: dict[int, Any] = {}  # by slot: the worker running there now (the dying ones' slots emptied)
        spawned = 0

        def start(slot: int, dies: bool) -> None:
            nonlocal spawned
            spawned += 1
            proc = ctx.Process(  # type: ignore[attr-defined]
                target=_torture_worker, args=(shared_url, f"w{slot}-{spawned}", spawned, dies), daemon=True
            )
            proc.start()
            procs[slot] = proc

        try:
            # First only dying workers, TORTURE_KILLS of them, at most four at a time: together they handle fewer
            # events than always remain, so each dies with work left, however the machine schedules them. Then
            # four that finish the work.
            for slot in range(4):
                start(slot, True)
            kills = 0
            deadline = time.monotonic() + TORTURE_DEADLINE
            while procs and time.monotonic() < deadline:
                ended = multiprocessing.connection.wait(
                    [proc.sentinel for proc in procs.values()], timeout=deadline - time.monotonic()
                )
                for slot, proc in list(procs.items()):
                    if proc.sentinel in ended:
                        proc.join()
                        assert proc.exitcode == -signal.SIGKILL, (
                            f"a dying torture worker ended with exit code {proc.exitcode} before it killed itself"
                        )
                        kills += 1
                        del procs[slot]
                        if spawned < TORTURE_KILLS:
                            start(slot, True)
            assert kills == TORTURE_KILLS, f"{kills} of {TORTURE_KILLS} workers killed themselves in time"
            for slot in range(4):
                start(slot, False)
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

    def test_lane_backlog_uses_the_due_and_dead_indexes(self, filled: durastate.Store) -> None:
        # Grouped by lane after the bounded read: a sort of at most ``limit`` rows is the cost.
        self.check(filled, events.LANE_READY, (10**12, 10_000), "due_at", sorts=True)
        # The dead letters walk their partial index (it holds dead rows only), however many events are processed.
        plan = plan_of(filled, events.LANE_DEAD, (10_000,))
        reads = plan.reads(filled.engine.prefix + "event")
        assert reads and all((step.index or "").endswith("event_dead") for step in reads), plan.text

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

    def test_round_trip_shapes(self, filled: durastate.Store) -> None:
        """The statements only an engine with deferred answers and write CTEs compiles (PostgreSQL's)."""
        capabilities = filled.engine.capabilities
        if not (capabilities.deferred_answers and capabilities.write_ctes):
            pytest.skip("compiled only where answers are deferred and a WITH may hold writes")
        prefix = filled.engine.prefix
        now = 10**12
        batch = ("i1", "t", b"1", "l1", 0, None, "i2", "t", b"2", None, 0, now)
        append = (*batch, True, "a", "a", now, now, now)
        renew = (now, now, "a", 1, 1, "w", now, now, now, "a", 2, 1, "w", now, "a", 1, "a", 2)
        with filled.transaction():  # FOR UPDATE: locking reads
            plans = {
                "append_statement": plan_of(filled, events.append_statement(2, checked=True), append),
                "PUT_SNAPSHOT_CHECKED": plan_of(filled, events.PUT_SNAPSHOT_CHECKED, ("a", "a", "r", 3, b"{}", now, 3)),
                "LOCK_SESSION_ROW": plan_of(filled, events.LOCK_SESSION_ROW, ("a",)),
            }
        for name, plan in plans.items():
            # The append's answer is sorted by index: a sort of the batch's rows.
            sorts = name == "append_statement"
            assert_index_search(plan, prefix + "event_session", "s", using=("session_id",), sorts=sorts)
            if name != "LOCK_SESSION_ROW":
                # The session's last index and pending probes, the ids' lookups, the lane's.
                assert_index_search(plan, prefix + "event", "e", "x", "y", using=("session_id",), sorts=sorts)
        self.check(filled, events.INSERTED, (2, "a", 10, 12), "session_id", "idx")
        self.check(filled, events.renew_all(2), renew, "session_id", "idx")

    def test_state_reads(self, filled: durastate.Store) -> None:
        filled.events.put_snapshot("a", "r", 10, {})
        for statement in (events.READ_STATE, events.READ_STATE_BRIEF):
            # Two sorted streams merged (snapshot row, then events by idx): an engine may sort the 50 rows.
            self.check(filled, statement, ("a", "r", "a", "a", "r"), "session_id", sorts=True)
