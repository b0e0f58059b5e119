"""pgbouncer in transaction mode in front of the test server, for the conformance suite behind a pooler.

``Bouncer(server_url, root).start()`` installs Debian's ``pgbouncer`` if it
is missing (``debian.ensure_package``) and runs it on a free loopback port,
``pool_mode = transaction``, logging in to the server as the server URL's
user (``auth_type = any``: the client's name and password are not checked,
loopback only). pgbouncer refuses to run as root: as root it runs as the
``postgres`` user.

A pooler does not pass ``options=-csearch_path=...`` on, so each test's
schema gets its own pgbouncer database, ``bouncer.url_for(schema)``: a
``[databases]`` entry whose server sessions start with ``SET search_path``
(``connect_query``), added by rewriting the entries file and reloading
(SIGHUP); the URL is returned once pgbouncer serves it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

from .debian import ensure_package

__all__ = ["Bouncer", "find_pgbouncer"]

BINARY = "/usr/sbin/pgbouncer"


def find_pgbouncer() -> tuple[str | None, str]:
    """``(path, "")`` of pgbouncer, installed from Debian if needed; ``(None, reason)``."""
    return ensure_package("pgbouncer", BINARY)


class Bouncer:
    """One pgbouncer process in transaction mode (see the module docstring)."""

    def __init__(self, server_url: str, root: Path, binary: str = BINARY) -> None:
        parts = urlsplit(server_url)
        self.server_host = parts.hostname or "127.0.0.1"
        self.server_port = parts.port or 5432
        self.user = parts.username or "postgres"
        self.database = parts.path.strip("/") or "postgres"  # the server's database every entry reaches
        self.root = root
        self.binary = binary
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self._schemas: list[str] = []
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            as_user = ["runuser", "-u", "postgres", "--"]
        self._write_databases()
        (self.root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"%include {self.root / 'databases.ini'}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            f"unix_socket_dir = {self.root}\n"
            "auth_type = any\n"
            "pool_mode = transaction\n"
            "max_client_conn = 500\n"
            "default_pool_size = 10\n"
            "server_idle_timeout = 5\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self.root / 'pgbouncer.log'}\n"
        )
        self._process = subprocess.Popen(
            [*as_user, self.binary, str(self.root / "pgbouncer.ini")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._until_serving("postgres", timeout)

    def url_for(self, schema: str, timeout: float = 30.0) -> str:
        """A URL reaching the server through pgbouncer with ``search_path`` set to ``schema``.

        A schema handed out again (``postgres_server.SchemaPool``) keeps its entry.
        """
        if schema not in self._schemas:
            self._schemas.append(schema)
            self._write_databases()
            assert self._process is not None
            os.killpg(self._process.pid, signal.SIGHUP)  # reload the configuration
            self._until_serving(schema, timeout)
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{schema}"

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self, tail: int = 2000) -> str:
        try:
            return (self.root / "pgbouncer.log").read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def _write_databases(self) -> None:
        server = f"host={self.server_host} port={self.server_port} user={self.user}"
        lines = [f"postgres = {server} dbname={self.database}"]
        lines += [
            f"{schema} = {server} dbname={self.database} connect_query='SET search_path = {schema}'"
            for schema in self._schemas
        ]
        (self.root / "databases.ini").write_text("\n".join(lines) + "\n")

    def _until_serving(self, database: str, timeout: float) -> None:
        """Poll (every 50 ms) until a connection to ``database`` through pgbouncer answers a query."""
        import psycopg

        deadline = time.monotonic() + timeout
        url = f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"
        while True:
            try:
                with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                    return
            except psycopg.Error as exc:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise RuntimeError(f"pgbouncer exited ({self._process.returncode}): {self.log()}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pgbouncer does not serve {database}: {exc}; {self.log()}") from None
            time.sleep(0.05)
