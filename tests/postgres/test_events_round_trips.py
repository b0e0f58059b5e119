"""How many network round trips the events facet's writes cost on PostgreSQL (``events.statements``, its
section "writes in as few round trips as they need"), counted on the wire by the relay as in ``test_round_trips``.

One round trip where nothing needs an answer before the COMMIT, or where one statement (its own commit) does the
work and answers; two where a read must decide what to write (the parent of a completion, the event a failure is
recorded on), or where one statement's answer is read inside a transaction before its COMMIT (a renewal). Was, in
the same order: 5 (an append to a new session), 5 (three events), 4 (an explicit id), 3 (a lane), 5 (a completion
with a child), 5 (two renewals), 3 (a failure), 3 (a snapshot), 2 (a session's redrive). Then what the
one-statement writes keep: a retry after a cut connection applies them once (they re-read instead of writing an
attempt row), and a run again racing the first run answers with the first run's events.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.events import DuplicateBatch, facet

from . import test_round_trips
from .proxy import CuttingProxy
from .test_retry_safety import on_new_connections
from .test_round_trips import round_trips

pytestmark = pytest.mark.timeout(120)

# test_round_trips's fixtures: a store with one pooled connection behind the counting relay.
relay = test_round_trips.relay
store = test_round_trips.store


def _names(prefix: str) -> Iterator[str]:
    return (f"{prefix}-{i}" for i in itertools.count())


def test_an_append_to_a_new_session_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    sessions = _names("new")
    assert round_trips(relay, lambda: store.events.append(next(sessions), [{"type": "t"}])) == 1
    assert store.events.read("new-2")[0].index == 1


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "a"}, {"type": "b", "payload": {"n": 1}}, {"type": "c"}],
        [{"type": "t", "lane": "l"}],
        [{"type": "t", "settled": True}],
    ],
    ids=["three", "lane", "settled"],
)
def test_an_append_is_one_round_trip(
    store: durastate.Store, relay: CuttingProxy, events: list[dict[str, object]]
) -> None:
    store.events.append("s", [{"type": "first"}])
    assert round_trips(relay, lambda: store.events.append("s", events)) == 1
    assert store.events.read_events("s").through_index == 1 + 3 * len(events)


def test_an_append_of_more_than_a_statements_bytes_takes_the_full_path(
    store: durastate.Store, relay: CuttingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``durastate._chunks.STATEMENT_BYTES`` of payloads in the one statement (PostgreSQL closes the
    connection on a message over 1 GB); one event is never cut."""
    monkeypatch.setattr(facet, "STATEMENT_BYTES", 100)
    events = [{"type": "t", "payload": "x" * 60}, {"type": "t", "payload": "y" * 60}]
    store.events.append("s", [{"type": "first"}])
    assert round_trips(relay, lambda: store.events.append("s", events)) > 1
    assert round_trips(relay, lambda: store.events.append("s", [{"type": "t", "payload": "z" * 200}])) == 1
    assert [e.payload[0] for e in store.events.read("s", 1)] == ["x", "y"] * 3 + ["z"] * 3


def test_an_append_with_ids_of_its_own_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    ids = _names("id")
    assert round_trips(relay, lambda: store.events.append("s", [{"type": "t", "id": next(ids)}])) == 1
    assert round_trips(relay, lambda: store.events.append("s", [{"type": "t", "id": next(ids)} for _ in range(3)])) == 1
    # Appended again: the statement inserts nothing, the full path answers with the stored events.
    again = store.events.append("s", [{"type": "other", "id": "id-0"}])
    assert [(e.index, e.type) for e in again.events] == [(1, "t")]
    with pytest.raises(DuplicateBatch, match="batch mixes 1 already-appended and 1 fresh events"):
        store.events.append("s", [{"type": "t", "id": "id-1"}, {"type": "t", "id": "fresh"}])
    with pytest.raises(DuplicateBatch, match="already exists in another session"):
        store.events.append("elsewhere", [{"type": "t", "id": "id-1"}])
    assert store.events.read_events("s").through_index == 12
    assert store.events.read("elsewhere") == []


def _claimed(store: durastate.Store, session: str, count: int) -> list[tuple[int, int]]:
    store.events.append(session, [{"type": "t"} for _ in range(count)])
    claimed = store.events.claim_available(session, "w", ttl_ms=60_000).events
    return [(e.index, e.attempt_count) for e in claimed]


def test_a_completion_with_children_is_two_round_trips(store: durastate.Store, relay: CuttingProxy) -> None:
    """The parent's row (read with BEGIN and the session lock) decides; the mark, the children and COMMIT ride
    the second round trip."""
    claims = iter(_claimed(store, "s", 3))
    children = _names("child")

    def complete() -> None:
        index, attempt = next(claims)
        done = store.events.complete_attempt("s", index, attempt, [{"type": "c", "id": next(children)}])
        assert done.outcome == "completed" and done.events[0].cause is not None

    assert round_trips(relay, complete) == 2
    assert [(e.index, e.id) for e in store.events.read("s", 3)] == [(4, "child-0"), (5, "child-1"), (6, "child-2")]


def test_a_completion_whose_child_id_is_taken_takes_the_precise_path(store: durastate.Store) -> None:
    """The flight's inserts skip the taken id, its requirement fails, nothing stays; the precise path refuses."""
    ((index, attempt),) = _claimed(store, "s", 1)
    store.events.append("other", [{"type": "t", "id": "taken"}])
    with pytest.raises(DuplicateBatch, match="already-appended event id"):
        store.events.complete_attempt("s", index, attempt, [{"type": "c", "id": "fresh"}, {"type": "c", "id": "taken"}])
    event = store.events.get("s", index)
    assert event is not None and event.processed_at is None
    assert store.events.read_events("s").through_index == 1
    done = store.events.complete_attempt("s", index, attempt, [{"type": "c", "id": "fresh"}])
    assert [e.index for e in done.events] == [2]


def test_a_renewal_is_two_round_trips(store: durastate.Store, relay: CuttingProxy) -> None:
    claims = [{"index": i, "attempt": a} for i, a in _claimed(store, "s", 2)]
    renewed = []
    assert round_trips(relay, lambda: renewed.append(store.events.renew_claims("s", "w", claims, ttl_ms=60_000))) == 2
    assert renewed[-1].renewed == (1, 2) and renewed[-1].superseded == ()
    stale = [{"index": 1, "attempt": 0}, {"index": 2, "attempt": 1}, {"index": 9, "attempt": 1}]
    assert store.events.renew_claims("s", "w", stale, ttl_ms=60_000) == durastate.events.RenewResult((2,), (1,))


def test_a_failure_is_two_round_trips(store: durastate.Store, relay: CuttingProxy) -> None:
    """The event's row decides the outcome; the write rides the COMMIT."""
    claims = iter(_claimed(store, "s", 3))

    def fail() -> None:
        index, attempt = next(claims)
        assert store.events.fail_attempt("s", index, attempt, "boom", 1).outcome == "dead_lettered"

    assert round_trips(relay, fail) == 2
    assert len(store.events.dead_letters("s")) == 3


def test_a_snapshot_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    store.events.append("s", [{"type": "t"} for _ in range(5)])
    indexes = iter(range(1, 4))
    assert round_trips(relay, lambda: store.events.put_snapshot("s", "r", next(indexes), {"n": 1})) == 1
    assert store.events.read_state("s", "r").snapshot == durastate.events.Snapshot(3, {"n": 1})
    assert store.events.put_snapshot("s", "r", 2, {}) is False  # never backwards
    with pytest.raises(durastate.InvalidRequest, match="past the last event of session 's' \\(5\\)"):
        store.events.put_snapshot("s", "r", 6, {})
    with pytest.raises(durastate.InvalidRequest, match="session 'none' \\(0\\)"):
        store.events.put_snapshot("none", "r", 1, {})


def test_a_redrive_of_a_session_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    def dead_then_redrive() -> int:
        for index, attempt in _claimed(store, "s", 1):
            store.events.fail_attempt("s", index, attempt, "boom", 1)
        before = relay.flights
        redriven = store.events.redrive("s")
        counted.append(relay.flights - before)
        return redriven

    counted: list[int] = []
    assert [dead_then_redrive() for _ in range(3)] == [1, 2, 3]  # each round dead-letters the redriven ones again
    assert counted[-1] == 1


@pytest.fixture
def cut_store(pg_url: str, via_proxy: str) -> Iterator[durastate.Store]:
    """A store through the relay whose connections are opened as needed (``on_new_connections``)."""
    durastate.open(pg_url).close()  # migrate without the relay in the way
    with durastate.open(via_proxy, min_connections=0) as s:
        yield s


@pytest.mark.parametrize("cut", ["reply", "request"])
@pytest.mark.parametrize("session", ["new", "existing"])
@pytest.mark.parametrize("ids", ["given", "made"])
def test_an_append_in_one_statement_applies_once(
    cut_store: durastate.Store, proxy: CuttingProxy, cut: str, session: str, ids: str
) -> None:
    """No attempt row: the retry re-reads the events by their ids (found: they are its answer; none: it runs
    again), so three events go in once, at the indexes the answer names."""
    events = cut_store.events
    events.append("existing", [{"type": "first"}])
    getattr(proxy, f"drop_{cut}")(b"WITH batch (event_id")
    with on_new_connections(cut_store):
        appended = events.append(session, [{"type": "b", "id": f"b-{session}"} if ids == "given" else {"type": "b"}])
        more = events.append(session, [{"type": "x"}, {"type": "y"}, {"type": "z"}])
    assert proxy.cuts == 1
    first = 1 if session == "new" else 2
    assert [e.index for e in appended.events] == [first]
    assert [e.index for e in more.events] == [first + 1, first + 2, first + 3]
    assert [e.type for e in events.read(session)][-4:] == ["b", "x", "y", "z"]
    assert events.read_events(session).through_index == first + 3


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_snapshot_in_one_statement_applies_once(cut_store: durastate.Store, proxy: CuttingProxy, cut: str) -> None:
    events = cut_store.events
    events.append("s", [{"type": "t"} for _ in range(3)])
    getattr(proxy, f"drop_{cut}")(b"WITH s AS (SELECT")
    with on_new_connections(cut_store):
        assert events.put_snapshot("s", "r", 2, {"n": 2}) is True
    assert proxy.cuts == 1
    assert [(i.reducer_name, i.index) for i in events.list_snapshots("s")] == [("r", 2)]
    assert events.put_snapshot("s", "r", 2, {}) is False


def _waiting(admin: psycopg.Connection[Any], pid: int) -> bool:
    row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


@pytest.mark.parametrize("session", ["new", "existing"])
def test_an_append_run_again_while_its_first_run_still_goes_on_answers_the_first_runs_events(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, session: str
) -> None:
    """The run a retry makes after finding nothing to re-read, while the first run (on the backend the client
    lost) still holds the session: once that commits, the second finds its index or id taken (a ``Conflict``) and
    answers with the first run's events, which carry its made ids and time, instead of refusing those ids."""
    monkeypatch.setattr(facet, "random_id", lambda: "made-id")
    with durastate.open(pg_url, clock=lambda: 1_700_000_000.0) as store, psycopg.connect(pg_url) as lost:
        events = store.events
        if session == "existing":
            events.append("existing", [{"type": "earlier", "id": "earlier"}])
        statement = events._append_statement[1, False]
        row = (
            "made-id",
            "t",
            b"null",
            None,
            0,
            None,
            False,
            session,
            session,
            1_700_000_000_000,
            *[1_700_000_000_000] * 2,
        )
        lost.execute(statement, row)  # the first run: done, not committed
        answers: list[Any] = []
        appending = threading.Thread(target=lambda: answers.append(events.append(session, [{"type": "t"}])))
        with psycopg.connect(pg_url, autocommit=True) as admin:
            appending.start()
            deadline = time.monotonic() + 30
            while not any(_waiting(admin, pid) for (pid,) in admin.execute(_OTHERS, (lost.info.backend_pid,))):
                assert time.monotonic() < deadline, "the second run never waited for the first"
                time.sleep(0.005)
            lost.commit()  # the first run commits
            appending.join()
        first = 2 if session == "existing" else 1
        assert [(e.id, e.index) for e in answers[0].events] == [("made-id", first)]
        assert answers[0].has_pending is True
        assert [e.id for e in events.read(session)][-1:] == ["made-id"] and events.read_events(
            session
        ).through_index == first


_OTHERS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s"
)


def test_a_claim_that_takes_nothing_is_two_round_trips(store: durastate.Store, relay: CuttingProxy) -> None:
    """The claim, then the lease read that says busy or settled (was 4: the claim again in a transaction, whose
    statements each read a snapshot of their own on PostgreSQL anyway)."""
    events = store.events
    events.append("busy", [{"type": "t"}])
    leased = events.claim_available("busy", "h1", ttl_ms=60_000)
    assert leased.outcome == "claimed"
    answers: list[durastate.events.ClaimResult] = []
    assert round_trips(relay, lambda: answers.append(events.claim_available("busy", "h2", ttl_ms=1_000))) == 2
    assert answers[-1].outcome == "busy"
    assert answers[-1].retry_at == leased.events[0].claim_expires_at
    events.append("settled", [{"type": "t", "settled": True}])
    assert round_trips(relay, lambda: answers.append(events.claim_available("settled", "h2", ttl_ms=1_000))) == 2
    assert answers[-1].outcome == "settled"
