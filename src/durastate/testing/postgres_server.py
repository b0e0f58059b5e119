"""Find or start a PostgreSQL server for the test suite, and isolate tests.

Order of preference:

1. ``DURASTATE_TEST_POSTGRES_URL`` (CI sets it to the machine's server);
2. a throwaway cluster made with ``initdb``/``pg_ctl`` from PATH (or the
   Debian/Ubuntu ``/usr/lib/postgresql/*/bin``), run as the ``postgres``
   user when the suite runs as root, removed at exit;
3. nothing: the PostgreSQL half of the suite is skipped with the reason.

Each test gets its own schema in that server (``search_path`` set through
the URL), dropped afterwards, so runs and tests never see each other's rows.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ENV_URL = "DURASTATE_TEST_POSTGRES_URL"

_cached: tuple[str | None, str] | None = None


def _find_binaries() -> tuple[str, str] | None:
    initdb = shutil.which("initdb")
    pg_ctl = shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return initdb, pg_ctl
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        i, p = os.path.join(bindir, "initdb"), os.path.join(bindir, "pg_ctl")
        if os.access(i, os.X_OK) and os.access(p, os.X_OK):
            return i, p
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_throwaway_cluster() -> tuple[str | None, str]:
    found = _find_binaries()
    if found is None:
        return None, "no DURASTATE_TEST_POSTGRES_URL and no initdb/pg_ctl on PATH"
    initdb, pg_ctl = found
    datadir = tempfile.mkdtemp(prefix="durastate-pg-")
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root; test helpers may switch to postgres.
        try:
            import pwd

            pw = pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no 'postgres' user to run initdb as"
        os.chown(datadir, pw.pw_uid, pw.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    try:
        subprocess.run(
            [*as_postgres, initdb, "-D", datadir, "-A", "trust", "-U", "postgres", "--no-sync"],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                *as_postgres,
                pg_ctl,
                "-D",
                datadir,
                "-w",
                "-o",
                f"-p {port} -k {datadir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                "-l",
                os.path.join(datadir, "log"),
                "start",
            ],
            check=True,
            capture_output=True,
        )
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"could not start a throwaway cluster: {exc} {detail.decode(errors='replace')[-300:]}"

    def stop() -> None:
        subprocess.run([*as_postgres, pg_ctl, "-D", datadir, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(datadir, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", ""


def server_url() -> tuple[str | None, str]:
    """``(url, "")`` of a usable server, or ``(None, reason)``. Cached."""
    global _cached
    if _cached is None:
        url = os.environ.get(ENV_URL)
        _cached = (url, "") if url else _start_throwaway_cluster()
    return _cached


def with_search_path(url: str, schema: str) -> str:
    """``url`` with its sessions' ``search_path`` set to ``schema``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def create_schema(url: str) -> tuple[str, str]:
    """Create a fresh schema; return ``(url bound to it, schema name)``."""
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return with_search_path(url, schema), schema


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
