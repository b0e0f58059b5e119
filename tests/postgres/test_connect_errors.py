"""Misconfiguration fails at once, permanently, with the server's message; passwords never shown.

The local server trusts every login, so a failed password check cannot be
produced by it: ``_RefusingServer`` speaks just enough of the protocol to
refuse a login with a chosen SQLSTATE and message, like a real server does.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import uuid
from collections.abc import Iterator

import pytest

import durastate
from durastate import ConfigurationError, InvalidRequest, StoreUnavailable
from durastate.engines.base import READ
from durastate.engines.postgres import PostgresEngine
from durastate.engines.redact import redact_url

SECRET = "s3cr3t-pw"


def _server_url(pg_base_url: str, database: str | None = None, user: str = "postgres", query: str = "") -> str:
    """A URL of the test server; ``database`` by default the test run's (``pg_base_url``'s)."""
    host, _, path = pg_base_url.split("@", 1)[1].partition("/")
    return f"postgresql://{user}@{host}/{database or path.split('?', 1)[0]}{query}"


def _no_pool_warnings(caplog: pytest.LogCaptureFixture) -> None:
    noisy = [r for r in caplog.records if r.name.startswith("psycopg") and r.levelno >= logging.WARNING]
    assert noisy == [], [r.getMessage() for r in noisy]


@pytest.mark.parametrize(
    ("database", "user", "query", "server_says"),
    [
        ("no_such_database_xyz", "postgres", "", 'database "no_such_database_xyz" does not exist'),
        ("postgres", "no_such_role_xyz", "", 'role "no_such_role_xyz" does not exist'),
        ("postgres", "postgres", "?options=-cno_such_setting%3D1", "unrecognized configuration parameter"),
        ("postgres", "postgres", "?options=-cwork_mem%3Dlots", 'invalid value for parameter "work_mem"'),
    ],
)
def test_the_server_refusing_the_login_is_a_configuration_error_with_its_message(
    pg_base_url: str, caplog: pytest.LogCaptureFixture, database: str, user: str, query: str, server_says: str
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigurationError) as caught:
        durastate.open(_server_url(pg_base_url, database, user, query))
    assert server_says in str(caught.value)
    assert not isinstance(caught.value, StoreUnavailable)
    _no_pool_warnings(caplog)


@pytest.mark.parametrize(
    ("query", "says"),
    [("?no_such_parameter=1", '"no_such_parameter"'), ("?sslmode=sometimes", "sslmode"), ("?port=abc", "port")],
)
def test_a_malformed_url_parameter_is_a_configuration_error(pg_base_url: str, query: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        durastate.open(_server_url(pg_base_url, query=query))


def test_a_refused_connection_is_transient(pg_base_url: str) -> None:
    with pytest.raises(StoreUnavailable, match="refused"):
        durastate.open("postgresql://postgres@127.0.0.1:1/postgres")


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:{SECRET}@127.0.0.1:5432/postgres",
        f"postgresql://postgres@127.0.0.1:5432/postgres?password={SECRET}",
        f"postgresql://postgres@127.0.0.1:5432/postgres?sslmode=prefer&password={SECRET}&application_name=x",
        f"host=127.0.0.1 password={SECRET} dbname=postgres",
        f"host=127.0.0.1 password = '{SECRET} with space' dbname=postgres",
    ],
)
def test_every_password_form_is_redacted(url: str) -> None:
    shown = redact_url(url)
    assert SECRET not in shown
    assert "127.0.0.1" in shown and "postgres" in shown


def test_a_password_in_the_query_string_is_not_in_url_repr_or_errors(pg_base_url: str, pg_url: str) -> None:
    # In the test's own schema: the database's public schema is shared with every other run on the server.
    with durastate.open(f"{pg_url}&password={SECRET}") as store:
        assert SECRET not in store.url and SECRET not in repr(store)
        store.kv.put(b"s", b"n", b"k", b"v")
        with pytest.raises(InvalidRequest) as caught:  # a server-side error names the store's URL
            store.engine.one(store.engine.sql(READ("SELECT 1 / 0")))
        assert "127.0.0.1" in str(caught.value) and SECRET not in str(caught.value)
    for url in (
        _server_url(pg_base_url, database="no_such_database_xyz", query=f"?password={SECRET}"),
        _server_url(pg_base_url, query=f"?password={SECRET}&no_such_parameter=1"),
    ):
        with pytest.raises(ConfigurationError) as refused:
            durastate.open(url)
        assert SECRET not in str(refused.value)


def test_the_missing_driver_message_hides_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "durastate.engines.postgres", None)
    with pytest.raises(InvalidRequest) as caught:
        durastate.open(f"postgresql://postgres@127.0.0.1/postgres?password={SECRET}")
    assert SECRET not in str(caught.value)


class _RefusingServer:
    """Answers every startup with one ErrorResponse (severity FATAL, the given SQLSTATE)."""

    def __init__(self, sqlstate: str, message: str) -> None:
        self.sqlstate, self.message = sqlstate, message
        self.logins = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        while True:
            header = conn.recv(8, socket.MSG_WAITALL)
            if len(header) < 8:
                return
            length, code = struct.unpack("!ii", header)
            conn.recv(length - 8, socket.MSG_WAITALL)
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not supported
                conn.sendall(b"N")
                continue
            self.logins += 1
            fields = b"".join(
                tag + value.encode() + b"\0"
                for tag, value in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", self.sqlstate), (b"M", self.message))
            )
            body = fields + b"\0"
            conn.sendall(b"E" + struct.pack("!i", len(body) + 4) + body)
            return

    def close(self) -> None:
        self._listener.close()
        self._thread.join(5)


@pytest.fixture
def refusing_server(request: pytest.FixtureRequest) -> Iterator[_RefusingServer]:
    server = _RefusingServer(*request.param)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(
    "refusing_server",
    [("28P01", 'password authentication failed for user "app"'), ("28000", 'no pg_hba.conf entry for host "10.0.0.1"')],
    indirect=True,
)
def test_a_failed_authentication_is_permanent_and_tried_once(
    refusing_server: _RefusingServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://app:{SECRET}@127.0.0.1:{refusing_server.port}/app?sslmode=disable&gssencmode=disable"
    with pytest.raises(ConfigurationError) as caught:
        durastate.open(url)
    assert refusing_server.message in str(caught.value)
    assert SECRET not in str(caught.value)
    assert refusing_server.logins == 1, "one login attempt, no pool retrying in the background"
    _no_pool_warnings(caplog)


@pytest.mark.parametrize(
    "refusing_server",
    [("53300", "sorry, too many clients already"), ("57P03", "the database system is starting up")],
    indirect=True,
)
def test_a_server_not_accepting_connections_now_is_transient(refusing_server: _RefusingServer) -> None:
    url = f"postgresql://app@127.0.0.1:{refusing_server.port}/app?sslmode=disable&gssencmode=disable"
    with pytest.raises(StoreUnavailable, match=refusing_server.message):
        PostgresEngine(url)


def test_a_store_in_its_own_schema_via_search_path(pg_base_url: str) -> None:
    """``options=-csearch_path=<schema>`` puts every table of the store in that schema."""
    import psycopg

    schema = f"ds_own_schema_{uuid.uuid4().hex[:12]}"  # unique: parallel runs share the server
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        with durastate.open(_server_url(pg_base_url, query=f"?options=-csearch_path%3D{schema}")) as store:
            store.kv.put(b"s", b"n", b"k", b"v")
        with psycopg.connect(pg_base_url) as conn:
            rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
        assert {"ds_kv", "ds_queue", "ds_attempt", "ds_schema"} <= {name for (name,) in rows}
    finally:
        with psycopg.connect(pg_base_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_search_path_without_an_existing_schema_is_a_configuration_error(pg_base_url: str) -> None:
    with pytest.raises(ConfigurationError, match="CREATE SCHEMA"):
        durastate.open(_server_url(pg_base_url, query="?options=-csearch_path%3Dno_such_schema_xyz"))
