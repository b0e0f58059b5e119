"""The reading commands and the inspector open the store read-only and write nothing.

``info``, ``doctor``, ``stats``, ``export``, the browse commands and
``durastate ui`` open through ``_common.open_for_reading`` (``read_only=True``):
on PostgreSQL they work under a role granted only USAGE on the schema and
SELECT on its tables, and every table's row count (the attempt table's
included) is the same afterwards; on SQLite they work on a file of mode 0444
in a folder of mode 0555, run as an unprivileged user (root ignores file
modes), and the file's bytes and mtime are unchanged.

The commands and the pages run in one subprocess per test (``READ_SCRIPT``:
each command through click's ``CliRunner``, each opening and closing the
store itself as a separate run does; durastate keeps no per-process state
between opens): the process runs as that user and opens the store only as
the commands do, without an interpreter start per command.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

import durastate
from durastate.testing import postgres_server
from durastate.testing.sample import Sample, fill

from .conftest import HISTORY

COMMANDS = (
    ("info",),
    ("doctor",),
    ("stats",),
    ("export", "-", "--quiet"),
    ("kv", "ls"),
    ("kv", "ls", "run-1"),
    ("queue", "ls"),
    ("queue", "stats", "emails"),
    ("queue", "peek", "emails"),
    ("queue", "dead", "fragile"),
    ("events", "sessions"),
    ("kv", "get", "run-1", "cfg", "model"),
    ("kv", "scan", "run-1", "cfg"),
    ("kv", "log", "run-1", "log"),
    ("kv", "log", "run-1", "log", "stream"),
    ("kv", "counter", "run-1", "stats"),
    ("events", "read", "chat-1"),
    ("events", "dead"),
    ("docs", "ls"),
    ("records", "documents"),
    ("presence",),
)


def pages(sample: Sample) -> list[str]:
    fork = next(c for c, p in sample.conversations.items() if p is not None)
    return [
        "/",
        "/kv",
        "/kv?scope=run-1&ns=cfg&key=params&view=json",
        "/queues",
        "/queues/emails",
        "/queues/fragile",
        "/events",
        "/events/chat-1",
        "/documents",
        "/documents/" + quote("runs/1"),
        "/records",
        f"/records/conversations/{fork}",
        f"/records/documents/{sample.record_document}",
        "/presence",
        "/presence/room-1",
    ]


# Runs each command of argv[1] (JSON) as ``durastate ARGS`` (DURASTATE_URL is the store's), then opens the store as
# ``durastate ui`` does and asks for every page of argv[2:]; prints what failed as JSON.
READ_SCRIPT = """
import json, os, sys
from click.testing import CliRunner
from durastate.cli.app import cli

failed = []
for args in json.loads(sys.argv[1]):
    done = CliRunner().invoke(cli, args, prog_name="durastate")
    if done.exit_code != 0:
        failed.append([args, done.exit_code, done.stdout[-2000:], done.stderr[-2000:], repr(done.exception)])
pages = sys.argv[2:]
if pages:
    from starlette.testclient import TestClient
    from durastate.cli._common import open_for_reading
    from durastate.cli.ui import create_app

    store = open_for_reading(os.environ["DURASTATE_URL"], "ds_")
    assert store.engine.read_only
    client = TestClient(
        create_app(store, page_size=3, bound="127.0.0.1", allow_hosts=(), token=None), base_url="http://127.0.0.1"
    )
    failed += [[path, status] for path in pages if (status := client.get(path).status_code) != 200]
    store.close()
print(json.dumps(failed))
"""


def _commands_and_pages_succeed(url: str, sample: Sample, user: str | None = None) -> None:
    """Every command of ``COMMANDS`` exits 0 and every inspector page answers 200 on a store
    ``open_for_reading`` opened, in one process run as ``user``."""
    try:
        import starlette  # noqa: F401
    except ImportError:
        paths = []  # the commands still run; the pages need the ui extra
    else:
        paths = pages(sample)
    done = _run(url, ["-c", READ_SCRIPT, json.dumps(COMMANDS), *paths], user)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == [], done.stdout
    if not paths:
        pytest.skip("the commands passed; the inspector's pages need starlette (pip install 'durastate[ui]')")


def _run(url: str, args: list[str], user: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    env["DURASTATE_URL"] = url
    command = [sys.executable, *args]
    if user is not None:
        account = pwd.getpwnam(user)
        command = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", *command]
        env["HOME"] = "/nonexistent"
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=180)


# -- PostgreSQL: a role that may only read ---------------------------------------------


@pytest.fixture
def postgres_reader() -> Iterator[tuple[str, str, Sample, object]]:
    """``(owner_url, reader_url, sample, conn)``: a filled schema and a role granted only USAGE and SELECT."""
    psycopg = pytest.importorskip("psycopg")
    base, reason = postgres_server.server_url()
    if base is None:
        pytest.skip(f"PostgreSQL: {reason}")
    owner_url, schema = postgres_server.create_schema(base)
    role = "ds_reader_" + uuid.uuid4().hex[:12]
    conn = psycopg.connect(base, autocommit=True)
    try:
        with durastate.open(owner_url, retention=HISTORY) as store:
            sample = fill(store)
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
        reader_url = _with_user(owner_url, role)
        yield owner_url, reader_url, sample, (conn, schema)
    finally:
        if _role_exists(conn, role):
            conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.close()
        postgres_server.drop_schema(base, schema)


def _with_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def _role_exists(conn: object, role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None  # type: ignore[attr-defined]


def _row_counts(conn: object, schema: str) -> dict[str, int]:
    tables = [
        r[0]
        for r in conn.execute(  # type: ignore[attr-defined]
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,)
        ).fetchall()
    ]
    return {t: conn.execute(f'SELECT count(*) FROM "{schema}"."{t}"').fetchone()[0] for t in tables}  # type: ignore[attr-defined]


def test_postgres_select_only_role(postgres_reader: tuple[str, str, Sample, object]) -> None:
    _owner_url, reader_url, sample, (conn, schema) = postgres_reader  # type: ignore[misc]
    before = _row_counts(conn, schema)
    assert "ds_attempt" in before
    _commands_and_pages_succeed(reader_url, sample)
    assert _row_counts(conn, schema) == before
    # The role really may not write: a writable open would fail.
    with pytest.raises(durastate.DurastateError), durastate.open(reader_url) as store:
        store.kv.put(b"s", b"n", b"k", b"v")


# -- SQLite: a read-only file in a read-only folder ---------------------------------------


def _fingerprint(path: Path) -> tuple[str, int, list[str]]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))


@pytest.fixture
def read_only_file() -> Iterator[tuple[str, Sample, Path]]:
    folder = Path(tempfile.mkdtemp(prefix="durastate-ro-"))
    folder.chmod(0o755)
    path = folder / "state.db"
    try:
        with durastate.open(str(path), retention=HISTORY) as store:
            sample = fill(store)
        assert sorted(os.listdir(folder)) == ["state.db"]  # a clean close leaves no WAL behind
        path.chmod(0o444)
        folder.chmod(0o555)
        yield f"sqlite://{path}", sample, path
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_sqlite_read_only_file_in_a_read_only_folder(read_only_file: tuple[str, Sample, Path]) -> None:
    url, sample, path = read_only_file
    before = _fingerprint(path)
    # Root ignores file modes: run the commands as a user they bind.
    user = "nobody" if os.geteuid() == 0 and shutil.which("setpriv") else None
    _commands_and_pages_succeed(url, sample, user)
    assert _fingerprint(path) == before
