"""Guarantees of the PostgreSQL engine beyond the shared conformance suite."""

from __future__ import annotations

import multiprocessing
import sys
import threading

import psycopg
import psycopg_pool
import pytest

import durastate
from durastate.engines.base import READ
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_pool import FAST_VERSIONS

pytestmark = pytest.mark.timeout(120)


def test_tailing_reader_never_skips_a_late_commit(pg_url: str) -> None:
    """Ordinals are handed out in commit order, so tailing by ordinal is safe.

    Writer A appends inside a transaction and holds it open. Writer B
    appends meanwhile. With an identity column B would get A's ordinal + 1
    and commit first, and a reader at that moment would move its cursor past
    A's ordinal and never see A's row. Here B waits for A's commit.
    """
    store = durastate.open(pg_url)
    a_appended = threading.Event()
    release_a = threading.Event()
    b_done = threading.Event()
    seen: list[int] = []

    def writer_a() -> None:
        with store.transaction():
            store.kv.append(b"s", b"n", b"log", b"a")
            a_appended.set()
            release_a.wait(30)

    def writer_b() -> None:
        a_appended.wait(30)
        store.kv.append(b"s", b"n", b"log", b"b")
        b_done.set()

    ta = threading.Thread(target=writer_a)
    tb = threading.Thread(target=writer_b)
    ta.start()
    tb.start()
    a_appended.wait(30)
    # B is blocked behind A's uncommitted ordinal; a reader sees nothing yet.
    assert not b_done.wait(0.3)
    assert list(store.kv.log(b"s", b"n", b"log")) == []
    release_a.set()
    ta.join(30)
    tb.join(30)
    seen = [ordinal for ordinal, _ in store.kv.log(b"s", b"n", b"log")]
    values = [value for _, value in store.kv.log(b"s", b"n", b"log")]
    store.close()
    assert values == [b"a", b"b"]
    assert seen == [seen[0], seen[0] + 1]


def test_concurrent_appenders_and_a_tailer_see_every_ordinal_in_order(pg_url: str) -> None:
    """4 writers append in transactions of varying size while a reader tails.

    The reader only ever asks for ``after=last_seen``. It must end up with
    every ordinal, consecutive, none skipped (a skipped ordinal would be a
    row that committed after the reader had moved past it).
    """
    store = durastate.open(pg_url, max_connections=8)
    writers_done = threading.Event()
    per_writer = 60
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(per_writer):
                if i % 3 == 0:
                    with store.transaction():
                        store.kv.append(b"s", b"n", b"log", f"{w}-{i}".encode())
                        store.kv.put(b"s", b"n", f"{w}".encode(), b"x")  # some work inside
                else:
                    store.kv.append(b"s", b"n", b"log", f"{w}-{i}".encode())
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    observed: list[int] = []
    last = 0
    while True:
        finished = writers_done.is_set()
        for ordinal, _ in store.kv.log(b"s", b"n", b"log", after=last):
            observed.append(ordinal)
            last = ordinal
        if finished:
            break
        if all(not t.is_alive() for t in threads):
            writers_done.set()  # one more read after everyone committed
    for t in threads:
        t.join()
    store.close()
    assert not errors, errors
    assert len(observed) == 4 * per_writer
    assert observed == list(range(observed[0], observed[0] + len(observed)))


def test_push_sends_a_notification_and_wakes_a_waiter(pg_url: str) -> None:
    producer = durastate.open(pg_url)
    consumer = durastate.open(pg_url)
    engine = producer.engine
    assert isinstance(engine, PostgresEngine)
    channel = engine.channel("queue:" + b"jobs".hex())
    with psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {channel}")
        producer.queues.push("jobs", [b"first"])
        received = [n.channel for n in listener.notifies(timeout=10, stop_after=1)]
    assert received == [channel]

    got: list[bytes | None] = []
    waiting = threading.Thread(target=lambda: got.append(consumer.queues.pop("jobs2", wait=30)))
    waiting.start()
    producer.queues.push("jobs2", [b"second"])
    waiting.join(30)
    producer.close()
    consumer.close()
    assert got == [b"second"]


def _open_and_close(url: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait(30)
    durastate.open(url).close()


def test_many_processes_migrate_a_fresh_schema_exactly_once(pg_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(5)
    procs = [ctx.Process(target=_open_and_close, args=(pg_url, barrier)) for _ in range(5)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(90)
    assert [p.exitcode for p in procs] == [0] * 5
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT facet, version FROM ds_schema ORDER BY facet").fetchall()
    assert {facet for facet, _ in rows} >= {"core", "kv", "queues"}


def test_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(durastate.StoreUnavailable, match="connecting to"):
        durastate.open("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", busy_timeout=2)


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "durastate.engines.postgres", None)
    with pytest.raises(durastate.InvalidRequest, match=r"durastate\[postgres\]"):
        durastate.open("postgresql://postgres@127.0.0.1/postgres")


@pytest.mark.parametrize(
    "options",
    [{"max_connections": 0}, {"min_connections": 5, "max_connections": 2}, {"min_connections": -1}],
)
def test_bad_pool_sizes_are_refused(pg_url: str, options: dict[str, int]) -> None:
    with pytest.raises(durastate.InvalidRequest):
        durastate.open(pg_url, **options)


def test_pool_bounds_are_honoured(pg_url: str) -> None:
    store = durastate.open(pg_url, min_connections=2, max_connections=3)
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    pool = engine._pool
    assert pool is not None
    assert (pool.min_size, pool.max_size) == (2, 3)
    store.close()
    with pytest.raises(durastate.StoreClosed):
        store.kv.get(b"s", b"n", b"k")


def test_one_thread_keeps_reusing_its_last_connection(pg_url: str) -> None:
    """The pool hands out the most recently returned idle connection (postgres_pool.LifoPool).

    psycopg_pool's own order, first in first out, would spread one thread's
    statements over all four connections, each with cold caches.
    """
    store = durastate.open(pg_url, min_connections=4, max_connections=4)
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    backend = engine.sql(READ("SELECT pg_backend_pid()"))
    try:
        pids = {engine.one(backend) for _ in range(12)}
        assert len(pids) == 1, f"one thread's reads went to {len(pids)} backends"
        with store.transaction():  # a transaction borrows the same way
            assert {engine.one(backend)} == pids
    finally:
        store.close()


def test_the_newest_idle_connection_goes_out_first_and_none_is_held_back(pg_url: str) -> None:
    store = durastate.open(pg_url, min_connections=3, max_connections=3)
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    pool = engine._pool
    assert pool is not None
    first, second = engine._borrow(), engine._borrow()
    engine._give_back(first)
    engine._give_back(second)
    again = engine._borrow()
    assert again is second, "the most recently returned connection first"
    third = engine._borrow()  # with `again` still out: the next newest idle one
    assert third is first
    engine._give_back(third)
    engine._give_back(again)
    # Nothing is kept outside the pool: every connection is idle in it, for any thread.
    assert pool.get_stats()["pool_available"] == 3
    store.close()
    assert first.closed and second.closed, "closing the store closes every connection"


def test_statements_are_prepared_by_the_server(pg_url: str) -> None:
    store = durastate.open(pg_url, min_connections=1, max_connections=1)
    for _ in range(5):
        store.kv.get(b"s", b"n", b"k")
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    pool = engine._pool
    assert pool is not None
    with pool.connection() as conn:
        prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    store.close()
    assert any("FROM ds_kv WHERE" in text for (text,) in prepared)


def _attempt_rows(pg_url: str) -> int:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM ds_attempt").fetchone()
    assert row is not None
    return int(row[0])


def test_reads_record_no_attempt_row(pg_url: str) -> None:
    """Only writes pay for commit-ambiguity records; every facet's reads write nothing."""
    with durastate.open(pg_url) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        store.kv.append(b"s", b"n", b"log", b"entry")
        store.documents.write("doc", {"a": 1})
        store.presence.set("room", "alice", {"typing": True}, at_ms=1, seen=1, ttl_ms=60_000)
        store.events.append("session", [{"type": "started", "payload": {}}])
        written = _attempt_rows(pg_url)
        assert written > 0, "writes outside a transaction record their attempt"
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert store.kv.get_many(b"s", b"n", [b"k", b"missing"]) == [b"v", None]
        assert list(store.kv.scan(b"s", b"n")) == [(b"k", b"v")]
        assert [v for _, v in store.kv.log(b"s", b"n", b"log")] == [b"entry"]
        assert store.documents.read("doc") is not None
        assert [e.participant for e in store.presence.read("room")] == ["alice"]
        assert len(store.events.read("session")) == 1
        with store.transaction():  # a transaction of reads only records nothing either
            assert store.kv.get(b"s", b"n", b"k") == b"v"
            assert store.presence.read("room") != []
        assert _attempt_rows(pg_url) == written
        store.kv.incr(b"s", b"n", b"k2", 1)
        assert _attempt_rows(pg_url) == written + 1


def test_the_pools_fast_paths_are_on_and_leave_unusual_returns_to_psycopg_pool(pg_url: str) -> None:
    """``LifoPool``'s one-pass getconn/putconn run on this psycopg_pool; anything unusual is psycopg_pool's.

    ``fast`` turns False when psycopg_pool loses a private name the fast
    paths use: this notices it. A connection returned inside a
    transaction must still be rolled back by psycopg_pool before reuse.
    """
    store = durastate.open(pg_url, min_connections=1, max_connections=1)
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    pool = engine._pool
    assert pool is not None
    try:
        if not psycopg_pool.__version__.startswith(FAST_VERSIONS):
            # A release the fast paths were not checked against: psycopg_pool's own methods throughout.
            assert not pool.fast
        else:
            assert pool.fast, "psycopg_pool changed: LifoPool's fast paths are off"
        before = pool.get_stats()["requests_num"]
        for _ in range(5):
            store.kv.get(b"s", b"n", b"k")
        assert pool.get_stats()["requests_num"] - before == 5, "the fast path counts requests like psycopg_pool"
        conn = engine._borrow()
        conn.execute("BEGIN")
        conn.execute("CREATE TEMP TABLE left_open (x int)")
        engine._give_back(conn)
        again = engine._borrow()
        assert again is conn and again.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert again.execute("SELECT to_regclass('pg_temp.left_open')").fetchone() == (None,), "rolled back"
        engine._give_back(again)
        assert pool.get_stats()["pool_available"] == 1
    finally:
        store.close()


def test_a_failed_statement_leaves_the_connections_statement_cursor_usable(pg_url: str) -> None:
    store = durastate.open(pg_url, min_connections=1, max_connections=1)
    engine = store.engine
    try:
        backend = engine.sql(READ("SELECT pg_backend_pid()"))
        pid = engine.one(backend)
        with pytest.raises(durastate.DurastateError):
            engine.one(engine.sql(READ("SELECT 1 / (0 * CAST(? AS int))")), (1,))
        assert engine.one(backend) == pid, "the same connection, not discarded"
        assert engine.one(engine.sql(READ("SELECT CAST(? AS int) + 1")), (41,)) == (42,)
    finally:
        store.close()
