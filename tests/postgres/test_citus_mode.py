"""The Citus statement mode (``citus://``) on plain PostgreSQL: no triggers, NOTIFY after the commit.

The conformance suite runs whole in this mode (tests/conformance/conftest.py);
these tests check what it does differently from the plain mode.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines import postgres_after_commit
from durastate.engines.base import WRITE
from durastate.engines.postgres import PostgresEngine
from durastate.errors import DurastateError, InvalidRequest
from durastate.queues.names import channel as queue_channel
from durastate.testing import postgres_server
from durastate.testing.postgres_server import as_citus

# Channels are global to the server's database, and a store's are named by its prefix and the name alone
# (not its schema): every name here is this test's own, so tests running beside it (other pytest workers, other
# schemas, the same prefix) never land on its channels, and another's marker never ends its wait early.
MARK = f"durastate_test_marker_{uuid.uuid4().hex}"


@pytest.fixture
def citus_store(pg_url: str) -> Iterator[durastate.Store]:
    store = durastate.open(as_citus(pg_url))
    yield store
    store.close()


@pytest.fixture
def listener(pg_base_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    conn = psycopg.connect(pg_base_url, autocommit=True)
    conn.execute(f"LISTEN {MARK}")
    yield conn
    conn.close()


def _received_until_marker(listener: psycopg.Connection[tuple[object, ...]], pg_base_url: str) -> list[str]:
    """Channels notified before a marker NOTIFY sent now from another session (no waiting on time)."""
    with psycopg.connect(pg_base_url, autocommit=True) as other:
        other.execute(f"NOTIFY {MARK}")
    seen = []
    for note in listener.notifies(timeout=10):
        if note.channel == MARK:
            return seen
        seen.append(note.channel)
    raise AssertionError("the marker notification never arrived")


def test_url_and_mode(citus_store: durastate.Store, pg_url: str) -> None:
    assert citus_store.url.startswith("citus://")
    engine = citus_store.engine
    assert isinstance(engine, PostgresEngine) and engine.citus
    with durastate.open(citus_store.url) as again:  # store.url reopens in the same mode
        assert isinstance(again.engine, PostgresEngine) and again.engine.citus


def test_no_triggers_in_citus_mode(citus_store: durastate.Store, pg_url: str) -> None:
    kinds = {row[0] for row in citus_store.engine.catalog()}
    assert "trigger" not in kinds
    assert "column" in kinds
    with durastate.open(pg_url, prefix="plain_") as plain:  # the plain mode announces by trigger
        assert "trigger" in {row[0] for row in plain.engine.catalog()}


@pytest.mark.parametrize("facet", ["queues", "events"])
def test_notify_after_commit_only(
    citus_store: durastate.Store, listener: psycopg.Connection[tuple[object, ...]], pg_base_url: str, facet: str
) -> None:
    engine = citus_store.engine
    name = f"jobs-{uuid.uuid4().hex}"  # this test's own channel (see MARK)
    if facet == "queues":
        channel = engine.channel(queue_channel(name.encode()))

        def write() -> None:
            citus_store.queues.push(name, [b"x"])
    else:
        channel = engine.channel(citus_store.events.channel(name))

        def write() -> None:
            citus_store.events.append(name, [{"type": "t"}])

    listener.execute(f"LISTEN {channel}")
    with pytest.raises(RuntimeError), citus_store.transaction():
        write()
        raise RuntimeError("roll back")
    assert _received_until_marker(listener, pg_base_url) == []  # a rolled-back write announces nothing
    with citus_store.transaction():
        write()
        write()
    assert _received_until_marker(listener, pg_base_url) == [channel]  # once, after the commit
    write()  # outside a transaction: at once
    assert _received_until_marker(listener, pg_base_url) == [channel]


def test_no_notify_inside_the_transaction(citus_store: durastate.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Citus refuses to PREPARE (commit across nodes) a transaction that ran NOTIFY: none is sent before COMMIT."""

    def push_and_append() -> None:
        with citus_store.transaction():
            citus_store.queues.push("jobs", [b"x"])
            citus_store.events.append("s1", [{"type": "t"}])

    sent = _sent_by(monkeypatch, push_and_append)
    commit = sent.index("COMMIT")
    notifies = [i for i, text in enumerate(sent) if "notify" in text.lower()]
    assert notifies and min(notifies) > commit, sent
    assert len(notifies) == 1  # both channels in one statement


def test_a_commit_whose_notifications_fail_stands(
    citus_store: durastate.Store, listener: psycopg.Connection[tuple[object, ...]], pg_base_url: str
) -> None:
    """The notifications go out after the COMMIT in its round trip; when only they fail, the commit is kept.

    They fail here by a payload over PostgreSQL's 8,000 bytes (the statement
    swapped for one that sends such a payload); in use the server's full
    notification queue would. A notification is a hint (waiters also
    look on their own), so the writer gets no error for a write that
    committed.
    """
    engine = citus_store.engine
    name = f"jobs-{uuid.uuid4().hex}"
    listener.execute(f"LISTEN {engine.channel(queue_channel(name.encode()))}")
    failing = "SELECT pg_notify(c, repeat('x', 9000)) FROM unnest(%s::text[]) AS c"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postgres_after_commit, "NOTIFY_CHANNELS", failing)
        with citus_store.transaction():
            citus_store.queues.push(name, [b"kept"])
            citus_store.kv.put(b"s", b"n", b"k", b"kept")
    assert citus_store.kv.get(b"s", b"n", b"k") == b"kept"
    claim = citus_store.queues.claim(name)
    assert claim is not None and claim.payload == b"kept"
    assert _received_until_marker(listener, pg_base_url) == []  # nothing was sent: it failed
    citus_store.kv.put(b"s", b"n", b"k", b"after")  # the connection went back to the pool usable
    assert citus_store.kv.get(b"s", b"n", b"k") == b"after"


def test_a_transaction_failing_at_its_commit_applies_and_announces_nothing(
    citus_store: durastate.Store,
    listener: psycopg.Connection[tuple[object, ...]],
    pg_base_url: str,
    pg_url: str,
) -> None:
    """The COMMIT itself fails (a deferred constraint): the caller gets the error, the server skips the
    notifications sent behind it, and nothing is applied."""
    engine = citus_store.engine
    name = f"jobs-{uuid.uuid4().hex}"
    listener.execute(f"LISTEN {engine.channel(queue_channel(name.encode()))}")
    with psycopg.connect(pg_url, autocommit=True) as ddl:
        ddl.execute(
            "CREATE TABLE checked_at_commit (id int PRIMARY KEY,"
            " parent int REFERENCES checked_at_commit (id) DEFERRABLE INITIALLY DEFERRED)"
        )
    orphan = engine.sql(WRITE("INSERT INTO checked_at_commit VALUES (1, 2)"))
    with pytest.raises(DurastateError, match="checked_at_commit"), citus_store.transaction():
        citus_store.queues.push(name, [b"lost"])
        engine.send(orphan)  # accepted; its foreign key is checked at the COMMIT
    assert citus_store.queues.stats(name).ready == 0
    assert _received_until_marker(listener, pg_base_url) == []


def _sent_by(monkeypatch: pytest.MonkeyPatch, operation: Callable[[], object]) -> list[str]:
    """The statements ``operation`` sends (psycopg's ``Cursor.execute``, which ``Connection.execute``,
    ``PooledConnection.run`` and ``send`` end in)."""
    sent: list[str] = []
    original = psycopg.Cursor.execute

    def spy(self: psycopg.Cursor[object], query: object, *args: object, **kwargs: object) -> object:
        sent.append(str(query))
        return original(self, query, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", spy)
        operation()
    return sent


def test_a_recorded_write_alone_runs_in_a_transaction_of_its_own(
    citus_store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a transaction a write whose retry needs its attempt row runs as BEGIN, the attempt row, the
    statement, COMMIT: never as one statement whose data-modifying CTE is read back, which Citus plans recursively
    and commits in two phases (``test_a_recorded_write_alone_commits_in_one_phase_on_citus``)."""
    kv = citus_store.kv
    kv.put(b"s", b"n", b"k", b"v0")
    for operation, expected in (
        (lambda: kv.put(b"s", b"n", b"k", b"v1"), None),
        (lambda: kv.incr(b"s", b"n", b"count", 2), 2),
    ):
        result: list[object] = []
        sent = _sent_by(monkeypatch, lambda: result.append(operation()))  # noqa: B023
        assert not [text for text in sent if "WITH _ds_r" in text], sent
        assert sent[0] == "BEGIN" and sent[-1] == "COMMIT", sent
        assert any("attempt" in text for text in sent), sent
        assert result == [expected]
    assert kv.get(b"s", b"n", b"k") == b"v1"
    assert kv.incr(b"s", b"n", b"count", 1) == 3


def test_a_recorded_write_alone_commits_in_one_phase_on_citus(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a Citus coordinator (``DURASTATE_TEST_CITUS_URL``): writes of every facet, each alone in a distributed
    schema (a put, a counter add, an ack, a take, a document write, an id minted, a presence removal, a pop),
    reach its worker as single-shard statements committed in one phase: no PREPARE TRANSACTION and no rows pulled
    through the coordinator in Citus's log of the commands it sends (``citus.log_remote_commands``);
    bench/citus_remote_commands.py shows the same per write."""
    base, reason = postgres_server.citus_url()
    if base is None:
        pytest.skip(reason)
    url, schema = postgres_server.create_schema(base)
    remote: list[str] = []

    def log_remote_commands(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET citus.log_remote_commands = on")
        conn.execute("SET client_min_messages = log")
        conn.add_notice_handler(lambda diag: remote.append(diag.message_primary or ""))

    try:
        with durastate.open(as_citus(url), min_connections=1, max_connections=1) as store:
            store.queues.push("jobs", [b"job"])
            claim = store.queues.claim("jobs")
            assert claim is not None
            conn = store.engine._pool.getconn()  # type: ignore[attr-defined]  # the pool's one connection
            log_remote_commands(conn)
            store.engine._pool.putconn(conn)  # type: ignore[attr-defined]
            store.kv.put(b"s", b"n", b"k", b"v")
            assert store.kv.incr(b"s", b"n", b"count") == 1
            claim.ack()
            assert store.kv.take(b"s", b"n", b"k") == b"v"
            assert store.documents.write("doc", {"a": 1}) == 1
            assert store.records.mint_id() > 0
            assert store.presence.remove("ns", "nobody") == 0
            assert store.queues.pop("jobs") is None
            assert store.queues.stats("jobs").ready == 0 and store.kv.get(b"s", b"n", b"k") is None
    finally:
        postgres_server.drop_schema(base, schema)
    issued = [line for line in remote if line.startswith("issuing")]
    assert sum("COMMIT" in line for line in issued) >= 8, remote  # the writes reached the worker
    assert not [line for line in issued if "PREPARE TRANSACTION" in line or "intermediate" in line], remote


def test_citus_flag_validated(pg_url: str) -> None:
    with pytest.raises(InvalidRequest, match="citus must be True or False"):
        PostgresEngine(pg_url, citus="yes")  # type: ignore[arg-type]
