"""A lost connection never makes durastate apply a write twice.

The worst moment is after the server committed and before the reply
arrived: the client cannot know whether its write happened. durastate's
retry must then return the first attempt's result instead of writing again
(attempt ids, see durastate.engines.postgres_attempts). These tests put the cut at
exactly that moment with a relay (``CuttingProxy``), at the moment before
the statement reaches the server, and at random moments with
``pg_terminate_backend``.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines.base import DDL, READ, WRITE_ROWS
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_attempts import NOT_APPLIED, MarkedWrite
from durastate.kv.statements import PUT_CHUNK

from .proxy import CuttingProxy

pytestmark = pytest.mark.timeout(120)

CALLS = 150  # writes made while backends are being killed...
MIN_KILLS = 5  # ...and at least this many backends killed meanwhile
# After a kill, the killer waits for the writer's next call, except this share of the time: it kills again in the
# same call (its retry). Without waiting it killed every 5-30 ms, each retry's new backend too: a call took seconds
# of retry pauses, and the test ran into its 60 s deadline after about 20 of its CALLS calls.
AGAIN = 0.25


@pytest.fixture
def store(pg_url: str, via_proxy: str) -> Iterator[durastate.Store]:
    durastate.open(pg_url).close()  # migrate without the relay in the way
    s = durastate.open(via_proxy, min_connections=0)
    yield s
    s.close()


@contextmanager
def on_new_connections(store: durastate.Store) -> Iterator[None]:
    """Run the block on connections that never ran its statements.

    The relay finds its moment by the statement's text, which psycopg sends
    only the first time a connection runs a statement (then it is
    prepared, and only its name goes over the wire). The pool hands out the
    most recently used connection first, which has run them already: every
    idle one is held meanwhile, so the block gets new ones.
    """
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    pool = engine._pool
    assert pool is not None
    held = [engine._borrow() for _ in range(pool.get_stats().get("pool_available", 0))]
    try:
        yield
    finally:
        for conn in held:
            engine._give_back(conn)


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_counter_add_applies_once(store: durastate.Store, proxy: CuttingProxy, cut: str) -> None:
    store.kv.incr(b"s", b"n", b"warm", 1)  # a pooled connection exists; not the one cut
    getattr(proxy, f"drop_{cut}")(b"kv_counter (scope, ns, key, n)")
    with on_new_connections(store):
        assert store.kv.incr(b"s", b"n", b"c", 5) == 5
    assert proxy.cuts == 1
    assert store.kv.counter(b"s", b"n", b"c") == 5


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_append_applies_once_and_returns_the_first_ordinal(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    """The entry carries the attempt id: the retry finds it by the id, no attempt row is written."""
    engine = store.engine
    attempts = engine.sql(READ("SELECT count(*) FROM {p}attempt"))
    first = store.kv.append(b"s", b"n", b"log", b"one")
    before = engine.one(attempts)
    getattr(proxy, f"drop_{cut}")(b"INSERT INTO ds_kv_log")
    with on_new_connections(store):
        second = store.kv.append(b"s", b"n", b"log", b"two")
    assert proxy.cuts == 1
    assert list(store.kv.log(b"s", b"n", b"log")) == [(first, b"one"), (second, b"two")]
    assert second == first + 1
    assert engine.one(attempts) == before  # neither the append nor its retry wrote one
    assert store.kv.append(b"s", b"n", b"log", b"three") == second + 1  # no ordinal spent twice


def _waiting(admin: psycopg.Connection[Any], pid: int) -> bool:
    row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def test_an_append_retried_while_its_first_attempt_still_runs_applies_once(pg_url: str) -> None:
    """The first attempt, on a backend the client lost, commits while its retry waits for it.

    The retry inserts nothing and rolls back (its ordinal is not spent) and
    answers with the first attempt's ordinal.
    """
    store = durastate.open(pg_url)
    try:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        marked = store.kv._append.companion
        assert isinstance(marked, MarkedWrite)
        before = store.kv.append(b"s", b"n", b"log", b"before")
        attempt = os.urandom(16)
        params = (b"s", b"n", b"log", b"entry", engine.now_ms())
        with psycopg.connect(pg_url, autocommit=True) as lost, psycopg.connect(pg_url, autocommit=True) as admin:
            first = lost.transaction()
            first.__enter__()  # the lost backend's statement, done but not yet committed
            (ordinal,) = lost.execute(marked.sql, (*params, attempt)).fetchone() or (None,)
            answers: list[Any] = []
            retry_pid: list[int] = []

            def retry() -> None:
                conn = engine._borrow()
                try:
                    retry_pid.append(conn.info.backend_pid)
                    assert marked.replay(conn, attempt, 1) is NOT_APPLIED  # not committed yet
                    answers.append(marked.run_again(conn, params, attempt, 1))
                finally:
                    engine._give_back(conn)

            retrying = threading.Thread(target=retry)
            retrying.start()
            deadline = time.monotonic() + 30
            while not (retry_pid and _waiting(admin, retry_pid[0])) and retrying.is_alive():
                assert time.monotonic() < deadline, "the retry never waited for the first attempt"
                time.sleep(0.005)
            first.__exit__(None, None, None)  # the first attempt commits
            retrying.join()
        assert answers == [(ordinal,)]
        assert ordinal == before + 1
        assert [v for _, v in store.kv.log(b"s", b"n", b"log")] == [b"before", b"entry"]
        assert store.kv.append(b"s", b"n", b"log", b"after") == ordinal + 1  # the retry's ordinal given back
    finally:
        store.close()


def test_drain_replay_returns_the_drained_values(store: durastate.Store, proxy: CuttingProxy) -> None:
    store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"\x00\xff")])
    proxy.drop_reply(b"RETURNING key, value, expires_at")
    assert store.kv.drain(b"s", b"n") == [(b"a", b"1"), (b"b", b"\x00\xff")]
    assert proxy.cuts == 1
    assert store.kv.drain(b"s", b"n") == []


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_queue_push_applies_once(store: durastate.Store, proxy: CuttingProxy, cut: str) -> None:
    getattr(proxy, f"drop_{cut}")(b"INSERT INTO ds_queue")
    assert store.queues.push("jobs", [b"only"]) == 1
    assert proxy.cuts == 1
    assert store.queues.pop("jobs") == b"only"
    assert store.queues.pop("jobs") is None


@pytest.mark.parametrize("if_absent", [False, True], ids=["upsert", "if-absent"])
@pytest.mark.parametrize("cut", ["reply", "request"])
def test_put_many_in_one_statement_applies_once(
    store: durastate.Store, proxy: CuttingProxy, cut: str, if_absent: bool
) -> None:
    """A batch within ``PUT_CHUNK`` is one statement outside a transaction: an attempt-recorded write."""
    store.kv.put(b"s", b"n", b"kept", b"old")
    getattr(proxy, f"drop_{cut}")(b"ds_kv (scope, ns, key, value, expires_at) VALUES")
    with on_new_connections(store):
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2"), (b"kept", b"new")], if_absent=if_absent)
    assert proxy.cuts == 1
    kept = b"old" if if_absent else b"new"
    assert store.kv.get_many(b"s", b"n", [b"a", b"b", b"kept"]) == [b"1", b"2", kept]


def test_put_many_transaction_commit_lost_is_resolved(store: durastate.Store, proxy: CuttingProxy) -> None:
    """A batch past ``PUT_CHUNK`` is several statements in a transaction."""
    pairs = [(b"k%04d" % i, b"v") for i in range(PUT_CHUNK + 1)]
    proxy.drop_reply(b"COMMIT")
    with on_new_connections(store):
        store.kv.put_many(b"s", b"n", pairs)  # returns: it did commit
    assert proxy.cuts == 1
    assert store.kv.get_many(b"s", b"n", [pairs[0][0], pairs[-1][0]]) == [b"v", b"v"]


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_records_commit_in_one_flight_applies_once_and_returns_its_sequence(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    """The whole commit is one flight: lost after the server committed, the attempt row answers with the
    sequence it got; lost before, the flight is sent again on another connection."""
    records = store.records
    before = records.commit([{"type": "entry", "value": {"id": 5000, "conversationId": 1}}])
    getattr(proxy, f"drop_{cut}")(b"COMMIT")
    with on_new_connections(store):
        seq = records.commit([{"type": "entry", "value": {"id": 5001, "conversationId": 1}}])
    assert proxy.cuts == 1
    assert seq == before + 1 == records.last_seq()
    entry = records.entry(5001)
    assert entry is not None and entry["commitSeq"] == seq
    assert records.commit([{"type": "entry", "value": {"id": 5002, "conversationId": 1}}]) == seq + 1


def test_transaction_commit_lost_is_resolved(store: durastate.Store, proxy: CuttingProxy) -> None:
    proxy.drop_reply(b"COMMIT")
    with on_new_connections(store), store.transaction():
        store.kv.incr(b"s", b"n", b"c", 1)
        store.queues.push("jobs", [b"x"])
    assert proxy.cuts == 1
    assert store.kv.counter(b"s", b"n", b"c") == 1
    assert store.queues.stats("jobs").ready == 1


def test_transaction_lost_before_commit_reports_nothing_applied(store: durastate.Store, proxy: CuttingProxy) -> None:
    proxy.drop_request(b"COMMIT")
    with (
        on_new_connections(store),
        pytest.raises(durastate.StoreUnavailable, match="nothing was applied"),
        store.transaction(),
    ):
        store.kv.incr(b"s", b"n", b"c", 1)
    assert store.kv.counter(b"s", b"n", b"c") == 0


def _terminate_backends(
    admin_url: str,
    app: str,
    stop: threading.Event,
    seed: int,
    kills: list[int],
    started: list[int],
    progress: threading.Condition,
) -> None:
    """Kill the test's backends at random moments until ``stop``; count in ``kills[0]``.

    A kill comes 5-30 ms after the writer began a call (``started[0]``, notified through ``progress``): in the
    call, or on the idle connection its next call finds dead; then the killer waits for the next call, or with
    probability ``AGAIN`` kills again in this one (its retry)."""
    rng = random.Random(seed)
    last = -1
    with psycopg.connect(admin_url, autocommit=True) as admin:
        while True:
            with progress:
                progress.wait_for(lambda seen=last: stop.is_set() or started[0] != seen)
            if stop.wait(rng.uniform(0.005, 0.03)):
                return
            cur = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (app,),
            )
            row = cur.fetchone()
            kills[0] += int(row[0]) if row else 0
            if rng.random() >= AGAIN:
                last = started[0]


def test_random_backend_terminations_never_double_apply(pg_url: str, pg_base_url: str) -> None:
    """Writers keep going while their backends are killed at random moments.

    A kill comes at a random moment after each call begins, a quarter of the time another in the same call's
    retry (``_terminate_backends``). Every call either returns (then it applied exactly once) or raises
    StoreUnavailable after its retries (then it applied at most once). So
    the totals must lie between the successes and successes + failures,
    and no unique payload may ever appear twice. The writer goes on until
    it has made CALLS calls and seen MIN_KILLS terminations.
    """
    # Unique: the killer terminates every backend with this name, so another run on the same server
    # (a parallel worker, another checkout) must never share it.
    app = f"ds-retry-{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in pg_url else "?"
    durastate.open(pg_url).close()
    store = durastate.open(f"{pg_url}{sep}application_name={app}", min_connections=0, max_connections=4)
    stop = threading.Event()
    kills = [0]
    started = [0]
    progress = threading.Condition()
    killer = threading.Thread(target=_terminate_backends, args=(pg_base_url, app, stop, 7, kills, started, progress))
    killer.start()
    ok = failed = calls = counter_calls = 0
    deadline = time.monotonic() + 60
    try:
        while (calls < CALLS or kills[0] < MIN_KILLS) and time.monotonic() < deadline:
            i = calls
            calls += 1
            with progress:
                started[0] = calls
                progress.notify()
            try:
                if i % 3 == 0:
                    counter_calls += 1
                    store.kv.incr(b"s", b"n", b"count", 1)
                elif i % 3 == 1:
                    store.kv.append(b"s", b"n", b"log", f"entry-{i}".encode())
                else:
                    store.queues.push("jobs", [f"job-{i}".encode()])
                ok += 1
            except durastate.StoreUnavailable:
                failed += 1
    finally:
        stop.set()
        with progress:
            progress.notify()
        killer.join()
    try:
        count = store.kv.counter(b"s", b"n", b"count")
        entries = [v for _, v in store.kv.log(b"s", b"n", b"log")]
        jobs = []
        while (job := store.queues.pop("jobs")) is not None:
            jobs.append(job)
    finally:
        store.close()
    print(f"{calls} calls ({ok} returned, {failed} StoreUnavailable), {kills[0]} backends killed")
    assert kills[0] >= MIN_KILLS, "the killer hit too few backends; the test proved little"
    assert len(entries) == len(set(entries)), "an append was applied twice"
    assert len(jobs) == len(set(jobs)), "a push was applied twice"
    assert count <= counter_calls
    assert ok <= count + len(entries) + len(jobs) <= ok + failed


def test_replayed_rows_keep_text_that_looks_like_bytea(store: durastate.Store, proxy: CuttingProxy) -> None:
    """A replay turns only BYTEA columns back into bytes, by their declared type."""
    engine = store.engine
    engine.execute(engine.sql(DDL("CREATE TABLE {p}replay_probe (t TEXT, b BYTEA, n BIGINT)")))
    statement = engine.sql(WRITE_ROWS("INSERT INTO {p}replay_probe (t, b, n) VALUES (?, ?, ?) RETURNING t, b, n"))
    proxy.drop_reply(b"replay_probe (t, b, n)")
    row = engine.one(statement, ("\\xdeadbeef", b"\xde\xad", 7))
    assert proxy.cuts == 1
    assert row == ("\\xdeadbeef", b"\xde\xad", 7)


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_claim_applies_once_and_its_retry_rereads_the_leased_item(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    """A claim keeps no copy of its row: its retry finds it again by the lease token it set."""
    store.queues.push("jobs", [b"first", b"\x00second"])
    getattr(proxy, f"drop_{cut}")(b"SET lease")
    with on_new_connections(store):
        claim = store.queues.claim("jobs", lease=60)
    assert proxy.cuts == 1
    assert claim is not None and (claim.payload, claim.attempts) == (b"first", 1)
    claim.ack()  # the token the retry answered with is the one on the row
    stats = store.queues.stats("jobs")
    assert (stats.ready, stats.in_flight) == (1, 0)
    assert store.queues.pop("jobs") == b"\x00second"


@pytest.mark.parametrize("ttl", [None, 60.0], ids=["persistent", "ttl"])
@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_put_is_run_again_without_an_attempt_row(
    store: durastate.Store, proxy: CuttingProxy, cut: str, ttl: float | None
) -> None:
    """An upsert of given values is idempotent: its retry runs it again, the key holds the value once."""
    engine = store.engine
    attempts = engine.sql(READ("SELECT count(*) FROM {p}attempt"))
    store.kv.put(b"s", b"n", b"k", b"old")
    before = engine.one(attempts)
    getattr(proxy, f"drop_{cut}")(b"INSERT INTO ds_kv (scope")
    with on_new_connections(store):
        store.kv.put(b"s", b"n", b"k", b"new", ttl=ttl)
    assert proxy.cuts == 1
    assert store.kv.get(b"s", b"n", b"k") == b"new"
    assert [key for key, _ in store.kv.scan(b"s", b"n")] == [b"k"]
    assert engine.one(attempts) == before  # no attempt row: neither the put nor its retry wrote one


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_an_ack_then_claim_applies_once_and_its_retry_rereads_the_claim(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    """One statement acks and claims: its retry finds the claim by its lease token, the ack done once."""
    store.queues.push("jobs", [b"done", b"next", b"later"])
    done = store.queues.claim("jobs", lease=60)
    assert done is not None
    getattr(proxy, f"drop_{cut}")(b"WITH acked AS")
    with on_new_connections(store):
        acked, claim = store.queues._ack_then_claim(done, "jobs", lease=60)
    assert proxy.cuts == 1
    assert acked and claim is not None and (claim.payload, claim.attempts) == (b"next", 1)
    stats = store.queues.stats("jobs")
    assert (stats.ready, stats.in_flight) == (1, 1)  # "done" gone, "next" claimed once, "later" untouched
    claim.ack()  # the token the retry answered with is the one on the row
    assert store.queues.pop("jobs") == b"later"


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_an_ack_then_claim_of_an_empty_queue_answers_the_ack_after_a_retry(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    """No claim to re-read: the statement runs again, and finds the acked item gone (done), not lost."""
    store.queues.push("jobs", [b"only"])
    done = store.queues.claim("jobs", lease=60)
    assert done is not None
    getattr(proxy, f"drop_{cut}")(b"WITH acked AS")
    with on_new_connections(store):
        assert store.queues._ack_then_claim(done, "jobs", lease=60) == (True, None)
    assert proxy.cuts == 1
    stats = store.queues.stats("jobs")
    assert (stats.ready, stats.in_flight, stats.delayed) == (0, 0, 0)


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_pop_replay_returns_the_popped_payload(store: durastate.Store, proxy: CuttingProxy, cut: str) -> None:
    """A destructive read's retry answers from the payload recorded in binary (the row is gone)."""
    store.queues.push("jobs", [b"\x00\xffonly", b"next"])
    getattr(proxy, f"drop_{cut}")(b"DELETE FROM ds_queue WHERE id")
    with on_new_connections(store):
        assert store.queues.pop("jobs") == b"\x00\xffonly"
    assert proxy.cuts == 1
    assert store.queues.pop("jobs") == b"next"
    assert store.queues.pop("jobs") is None


def test_an_empty_pops_retry_answers_none(store: durastate.Store, proxy: CuttingProxy) -> None:
    """Nothing popped is recorded too (no values: NULL), and answers the retry as nothing."""
    proxy.drop_reply(b"DELETE FROM ds_queue WHERE id")
    with on_new_connections(store):
        assert store.queues.pop("jobs") is None
    assert proxy.cuts == 1
