"""``postgres_server.run_database``: a test run's own database on the server it was given (tests/conftest.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from durastate.testing import postgres_server

pytestmark = pytest.mark.timeout(120)


def _on(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


def _databases(url: str) -> dict[str, str | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database").fetchall()
    return {name: comment for name, comment in rows}


@pytest.fixture
def source(pg_base_url: str) -> Iterator[str]:
    """A database standing for the one a run is given, with an extension installed."""
    name = f"durastate_source_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _on(pg_base_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION seg")
    yield url
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_a_run_gets_a_database_with_the_given_ones_extensions_dropped_at_the_end(source: str) -> None:
    run_url, reason = postgres_server.run_database(source)
    assert reason == ""
    name = urlsplit(run_url).path.strip("/")
    assert name.startswith(postgres_server.RUN_DATABASE_PREFIX)
    assert _databases(source)[name] == f"durastate test run: host={socket.gethostname()} pid={os.getpid()}"
    with psycopg.connect(run_url, autocommit=True) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (name,)
        assert conn.execute("SELECT '1 .. 2'::seg::text").fetchone() == ("1 .. 2",)
    postgres_server.drop_run_database(source, run_url)
    assert name not in _databases(source)


def test_databases_of_exited_runs_of_this_host_are_dropped_and_no_others(pg_base_url: str) -> None:
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(exited.stdout)
    host = socket.gethostname()
    left = {
        "abandoned": f"durastate test run: host={host} pid={dead_pid}",
        "running": f"durastate test run: host={host} pid={os.getpid()}",
        "elsewhere": f"durastate test run: host=not-{host} pid={dead_pid}",
    }
    names = {kind: f"{postgres_server.RUN_DATABASE_PREFIX}{kind}_{uuid.uuid4().hex[:8]}" for kind in left}
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        for kind, comment in left.items():
            conn.execute(f'CREATE DATABASE "{names[kind]}"')
            conn.execute(f"COMMENT ON DATABASE \"{names[kind]}\" IS '{comment}'")
    run_url = None
    try:
        run_url, reason = postgres_server.run_database(pg_base_url)
        assert reason == ""
        found = _databases(pg_base_url)
        assert names["abandoned"] not in found
        assert names["running"] in found and names["elsewhere"] in found
    finally:
        with psycopg.connect(pg_base_url, autocommit=True) as conn:
            for name in names.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if run_url is not None:
            postgres_server.drop_run_database(pg_base_url, run_url)


def test_a_role_that_cannot_create_databases_keeps_the_given_one(pg_base_url: str) -> None:
    role = f"durastate_nocreatedb_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN NOCREATEDB')
    try:
        given = urlunsplit(
            urlsplit(pg_base_url)._replace(netloc=f"{role}@{urlsplit(pg_base_url).netloc.split('@')[-1]}")
        )
        run_url, reason = postgres_server.run_database(given)
        assert run_url == given
        assert "could not create a database for the run" in reason and "permission denied" in reason
    finally:
        with psycopg.connect(pg_base_url, autocommit=True) as conn:
            conn.execute(f'DROP ROLE "{role}"')


def test_dropping_the_run_database_leaves_its_schema_pools_nothing_to_drop_at_exit(source: str) -> None:
    """A run in one process drops its database in ``pytest_unconfigure``, before the schema pools' ``close`` at exit:
    the pools on it are let go first, or each ``close`` connects to the dropped database and fails."""
    run_url, reason = postgres_server.run_database(source)
    assert reason == ""
    pool = postgres_server.schema_pool(run_url)
    url, schema = pool.take()
    pool.give_back(url, schema)  # a spare schema and the template now held
    assert postgres_server.schema_pool(run_url) is pool
    postgres_server.drop_run_database(source, run_url)
    pool.close()  # what atexit runs: nothing left to drop, no connection made
    assert run_url not in postgres_server._admin_connections
    assert postgres_server.schema_pool(run_url) is not pool  # a later one starts afresh
    postgres_server._pools.pop((run_url, False)).discard()
