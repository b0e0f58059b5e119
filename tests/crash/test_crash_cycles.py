"""Crash cycles: a writer on every facet, killed again and again (see workload.py).

SQLite: the writer is SIGKILLed at a random moment in each cycle; the file
must pass ``PRAGMA integrity_check`` and every invariant of ``workload.check``.
PostgreSQL: the same, with the writer's server backends terminated at random
while it runs, and, on a throwaway cluster, the server restarted mid-load.

``DURASTATE_CRASH_CYCLES`` sets the number of cycles (CI: the defaults
below; ``make crash`` runs a long one).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from durastate.testing import plugin, postgres_server

from . import workload

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(900)]

SQLITE_CYCLES = int(os.environ.get("DURASTATE_CRASH_CYCLES", "100"))
POSTGRES_CYCLES = max(1, SQLITE_CYCLES // 3)
PROGRESS_TIMEOUT = 120.0  # seconds a writer may go without finishing a call
SEED = int(os.environ.get("DURASTATE_CRASH_SEED", "20261201"))

_fork = multiprocessing.get_context("fork")


def run_cycles(url: str, cycles: int, *, disrupt: Callable[[random.Random], None] | None = None) -> dict[str, int]:
    """Start, let work, SIGKILL the writer ``cycles`` times; then check everything."""
    workload.setup(url)
    rng = random.Random(SEED)
    acks: list[tuple[Any, ...]] = []
    for cycle in range(cycles):
        receiver, sender = _fork.Pipe(duplex=False)
        proc = _fork.Process(target=workload.write, args=(url, cycle, rng.randrange(2**32), sender), daemon=True)
        proc.start()
        sender.close()
        # Kill after a random number of finished calls, then a random sliver
        # of time so the kill lands inside the next call as often as not.
        for _ in range(rng.randint(1, 25)):
            if not receiver.poll(PROGRESS_TIMEOUT):
                proc.kill()
                pytest.fail(f"cycle {cycle}: the writer finished no call in {PROGRESS_TIMEOUT:.0f} s")
            acks.append(receiver.recv())
            if disrupt is not None:
                disrupt(rng)
        time.sleep(rng.random() * 0.004)  # where the kill lands, not a synchronisation
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL, f"cycle {cycle}: the writer died on its own ({proc.exitcode})"
        while True:  # acknowledgements sent before the kill
            try:
                if not receiver.poll(0):
                    break
                acks.append(receiver.recv())
            except (EOFError, OSError):
                break
        receiver.close()
    facts = workload.check(url, acks)
    facts["cycles"] = cycles
    return facts


def test_sqlite_writer_killed_at_random(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    facts = run_cycles(f"sqlite://{path}", SQLITE_CYCLES)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert facts["acknowledged"] >= SQLITE_CYCLES  # every cycle finished at least one call
    print(f"\ncrash cycles (sqlite): {facts}")


def _with_application_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("application_name", name)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _terminator(
    admin_url: str, application_name: str, chance: float, terminated: list[int]
) -> Callable[[random.Random], None]:
    import psycopg

    def disrupt(rng: random.Random) -> None:
        if rng.random() < chance:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (application_name,),
                ).fetchall()
            terminated.append(sum(1 for (done,) in rows if done))

    return disrupt


@pytest.fixture
def pg_schema_url() -> Iterator[tuple[str, str]]:
    base = plugin._postgres_base_url()
    url, schema = postgres_server.create_schema(base)
    try:
        yield base, url
    finally:
        postgres_server.drop_schema(base, schema)


def test_postgres_writer_killed_and_backends_terminated_at_random(pg_schema_url: tuple[str, str]) -> None:
    base, url = pg_schema_url
    name = f"ds_crash_{uuid.uuid4().hex[:10]}"
    terminated: list[int] = []
    facts = run_cycles(
        _with_application_name(url, name), POSTGRES_CYCLES, disrupt=_terminator(base, name, 0.25, terminated)
    )
    facts["backends terminated"] = sum(terminated)
    assert facts["acknowledged"] >= POSTGRES_CYCLES
    assert sum(terminated) > 0, "the disruption never hit the writer's connections"
    print(f"\ncrash cycles (postgres, backends terminated): {facts}")


class _Cluster:
    """A throwaway PostgreSQL cluster this test may stop and start."""

    def __init__(self) -> None:
        found = postgres_server._find_binaries()
        if found is None:
            pytest.skip("no initdb/pg_ctl on PATH: the restart-mid-load cycle needs a throwaway cluster")
        self.initdb, self.pg_ctl = found
        # Not under pytest's tmp_path: its parents are private to root, and
        # the server runs as the postgres user when the suite runs as root.
        self.datadir = Path(tempfile.mkdtemp(prefix="durastate-crash-pg-"))
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.datadir, pw.pw_uid, pw.pw_gid)
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        self.port = postgres_server._free_port()
        self._run(self.initdb, "-D", str(self.datadir), "-A", "trust", "-U", "postgres", "--no-sync")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.as_postgres, *args], capture_output=True, timeout=120)
        if done.returncode != 0:
            raise AssertionError(f"{args[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")

    def remove(self) -> None:
        shutil.rmtree(self.datadir, ignore_errors=True)

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1 -c max_connections=50"
        self._run(self.pg_ctl, "-D", str(self.datadir), "-w", "-o", opts, "-l", str(self.datadir / "log"), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(self.pg_ctl, "-D", str(self.datadir), "-w", "-m", mode, "stop")


def test_postgres_server_restarted_mid_load() -> None:
    pytest.importorskip("psycopg")
    cluster = _Cluster()
    cluster.start()
    try:
        restarts = 0

        def restart(rng: random.Random) -> None:
            nonlocal restarts
            if rng.random() < 0.1:
                cluster.stop(rng.choice(("fast", "immediate")))
                cluster.start()
                restarts += 1

        facts = run_cycles(cluster.url, max(3, POSTGRES_CYCLES // 3), disrupt=restart)
        facts["server restarts"] = restarts
        print(f"\ncrash cycles (postgres, server restarted): {facts}")
    finally:
        cluster.stop("immediate")
        cluster.remove()
