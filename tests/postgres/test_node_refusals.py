"""A node that cannot take writes now: discard the connection and retry, never as a configuration error.

SQLSTATE 25006 on a store not opened read-only, 57P03, and the 0A000 /
55000 "... during recovery" refusals mean the node a connection reaches is
a standby, turned read-only, or shutting down (a failover, a proxy or DNS
name now pointing at a replica): the store discards that connection and
retries the statement (under the attempt rules) until ``busy_timeout``,
then raises ``StoreUnavailable``. On a store opened ``read_only=True`` 25006
is the store's own refusal: ``ConfigurationError``, at once.

On the real server a node "turned read-only" is a role whose sessions
default to ``default_transaction_read_only = on``: its existing sessions
are ended, so the pool's new ones are read-only, and set back while a write
is being retried.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import errors as pg_errors

import durastate
from durastate.engines.postgres_errors import connection_lost, node_unusable, translate_postgres_error
from durastate.testing import postgres_server

pytestmark = pytest.mark.timeout(120)

RECOVERY = "cannot set transaction read-write mode during recovery"


@pytest.mark.parametrize(
    ("exc", "writable_store", "read_only_store"),
    [
        (pg_errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), True, False),
        (pg_errors.CannotConnectNow("the database system is shutting down"), True, True),
        (pg_errors.FeatureNotSupported(RECOVERY), True, True),
        (pg_errors.ObjectNotInPrerequisiteState("cannot execute NOTIFY during recovery"), True, True),
        (pg_errors.IdleSessionTimeout("terminating connection due to idle-session timeout"), True, True),
        (pg_errors.AdminShutdown("terminating connection due to administrator command"), True, True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True, True),
        # Not the node's fault: the statement's own, or a feature this node lacks on any day.
        (pg_errors.FeatureNotSupported("cannot use FOR UPDATE with aggregate functions"), False, False),
        (pg_errors.UniqueViolation("duplicate key"), False, False),
        (pg_errors.SyntaxError("syntax error"), False, False),
        (pg_errors.LockNotAvailable("canceling statement due to lock timeout"), False, False),
    ],
)
def test_which_errors_send_a_statement_to_another_connection(
    exc: Exception, writable_store: bool, read_only_store: bool
) -> None:
    assert node_unusable(exc, read_only=False) is writable_store
    assert node_unusable(exc, read_only=True) is read_only_store


def test_25006_is_a_configuration_error_only_on_a_read_only_store() -> None:
    exc = pg_errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction")
    assert isinstance(translate_postgres_error(exc, "w", read_only=True), durastate.ConfigurationError)
    writable = translate_postgres_error(exc, "w", read_only=False)
    assert type(writable) is durastate.StoreUnavailable and "does not take writes now" in str(writable)
    recovery = translate_postgres_error(pg_errors.FeatureNotSupported(RECOVERY), "w")
    assert type(recovery) is durastate.StoreUnavailable
    other = translate_postgres_error(pg_errors.FeatureNotSupported("cannot use FOR UPDATE here"), "w")
    assert not isinstance(other, durastate.StoreUnavailable)


def test_a_session_timeout_counts_as_a_lost_connection() -> None:
    assert connection_lost(pg_errors.IdleSessionTimeout("terminating connection due to idle-session timeout"))
    assert not connection_lost(pg_errors.ReadOnlySqlTransaction("read-only"))


@pytest.fixture
def role_url(pg_base_url: str) -> Iterator[tuple[str, str, psycopg.Connection[Any]]]:
    """``(url, role, admin)``: a fresh schema owned by a fresh login role, the URL logging in as that role."""
    role = f"ds_ro_{uuid.uuid4().hex[:10]}"
    url, schema = postgres_server.create_schema(pg_base_url)
    admin = psycopg.connect(pg_base_url, autocommit=True)
    admin.execute(f"CREATE ROLE {role} LOGIN")
    admin.execute(f"ALTER SCHEMA {schema} OWNER TO {role}")
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    as_role = urlunsplit(parts._replace(netloc=f"{role}@{host}"))
    sep = "&" if parts.query else "?"
    try:
        yield f"{as_role}{sep}application_name={role}", role, admin
    finally:
        postgres_server.drop_schema(pg_base_url, schema)
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()


def _end_sessions(admin: psycopg.Connection[Any], role: str) -> None:
    """Terminate the role's sessions and wait until they are gone (the pool's new ones may already be up)."""
    rows = admin.execute(
        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
    ).fetchall()
    pids = [row[0] for row in rows]
    deadline = time.monotonic() + 30
    while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()[0]:
        assert time.monotonic() < deadline, "the role's sessions did not end"
        time.sleep(0.02)


def test_a_write_refused_by_a_read_only_node_is_retried_until_the_node_takes_writes(
    role_url: tuple[str, str, psycopg.Connection[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, role, admin = role_url
    with durastate.open(url, min_connections=2, busy_timeout=60) as store:
        store.kv.put(b"s", b"n", b"before", b"1")
        admin.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
        _end_sessions(admin, role)  # the pool reconnects: every new session is read-only
        refused = threading.Event()  # set when the store discards a connection the server refused the write on
        discard = store.engine._discard  # type: ignore[attr-defined]

        def spy(conn: Any) -> None:
            refused.set()
            discard(conn)

        monkeypatch.setattr(store.engine, "_discard", spy)
        done: list[Any] = []
        writer = threading.Thread(target=lambda: done.append(_try(lambda: store.kv.incr(b"s", b"n", b"c"))))
        writer.start()
        # Once a read-only session has refused the write, make the node writable again for new sessions;
        # the store's retry must find one.
        assert refused.wait(30), "the write was never refused"
        admin.execute(f"ALTER ROLE {role} RESET default_transaction_read_only")
        writer.join(timeout=60)
        assert done == [1]  # returned its value, no error reached the caller
        assert store.kv.counter(b"s", b"n", b"c") == 1  # applied once
        assert store.kv.get(b"s", b"n", b"before") == b"1"


def test_a_node_that_stays_read_only_is_unavailable_not_misconfigured(
    role_url: tuple[str, str, psycopg.Connection[Any]],
) -> None:
    url, role, admin = role_url
    with durastate.open(url, min_connections=1, busy_timeout=3) as store:
        admin.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
        _end_sessions(admin, role)  # the pool's new sessions are read-only
        with pytest.raises(durastate.StoreUnavailable, match="does not take writes now"):
            store.kv.put(b"s", b"n", b"k", b"v")
        # A transaction of sent writes is one flight, sent again whole until the retry budget runs
        # out; one that waited for an answer says "nothing was applied". Either is unavailable.
        refused = "does not take writes now|read-only transaction .*nothing was applied"
        with pytest.raises(durastate.StoreUnavailable, match=refused), store.transaction():
            store.kv.put(b"s", b"n", b"k", b"v")
    admin.execute(f"ALTER ROLE {role} RESET default_transaction_read_only")
    with durastate.open(url) as store:
        assert store.kv.get(b"s", b"n", b"k") is None  # nothing was applied
        store.kv.put(b"s", b"n", b"k", b"v")


def test_a_read_only_store_refuses_a_write_as_misconfigured(
    role_url: tuple[str, str, psycopg.Connection[Any]],
) -> None:
    url, _role, _admin = role_url
    durastate.open(url).close()  # migrate
    with durastate.open(url, read_only=True, busy_timeout=60) as store:
        with pytest.raises(durastate.ConfigurationError):
            store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") is None


def _try(call: Any) -> Any:
    try:
        return call()
    except durastate.DurastateError as exc:
        return exc
