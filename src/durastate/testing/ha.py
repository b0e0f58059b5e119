"""A PostgreSQL high-availability cluster for failover tests: pg_auto_failover, a monitor and two data nodes.

``AutoFailoverCluster(root).start()`` installs Debian's
``postgresql-15-auto-failover`` if it is missing (``debian.ensure_package``),
then runs, under ``root`` and on free loopback ports, a pg_auto_failover
monitor and two data nodes replicating synchronously (pg_auto_failover's
default: ``synchronous_standby_names = 'ANY 1 (...)'`` once the secondary
has caught up). The monitor's health checks and timeouts are shortened
(``MONITOR_SETTINGS``) so a failover completes in seconds instead of the
default's half a minute. ``url`` is the multi-host URL a client uses,
``target_session_attrs=read-write``.

pg_autoctl refuses to run as root: when the suite is root, every
pg_autoctl process runs as the ``postgres`` user (``runuser``), with its
configuration and state under ``root`` (``XDG_*`` variables), so nothing
of the machine's own PostgreSQL setup is touched.

Faults: ``kill_primary()`` SIGKILLs the primary's pg_autoctl and its
postmaster (the process group), ``restart(node)`` brings a killed node back
(it rejoins as a secondary), ``switchover()`` runs ``pg_autoctl perform
switchover`` (the primary is demoted, the secondary promoted).
``wait_for_primary`` watches the monitor until a node is the writable
primary. ``stop()`` kills everything and removes ``root``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .debian import ensure_package

__all__ = ["MONITOR_SETTINGS", "AutoFailoverCluster", "Node", "find_pg_autoctl"]

PACKAGE = "postgresql-15-auto-failover"
PG_BINDIR = "/usr/lib/postgresql/15/bin"
# The monitor's GUCs (milliseconds). Defaults: a health check every 5 s, a node unhealthy after 20 s, and
# 30 s for a failed primary to report itself demoted before the standby is promoted anyway.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": 500,
    "pgautofailover.health_check_timeout": 500,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 200,
    "pgautofailover.node_considered_unhealthy_timeout": 1000,
    "pgautofailover.primary_demote_timeout": 1000,
    "pgautofailover.startup_grace_period": 1000,
}
# A data node's own timeouts (pg_autoctl config set), seconds: how long a primary that reaches neither the
# monitor nor its standby waits before demoting itself (default 20).
NODE_SETTINGS = {"timeout.network_partition_timeout": "2"}
JOINED = ("single", "primary", "wait_primary", "secondary")  # a node's states once it is in the cluster
# The monitor's own deadlock, cancelled by PostgreSQL (its DETAIL lines; the error line may be cut off).
_MONITOR_DEADLOCK = re.compile(r"deadlock detected|waits for \w+Lock .*blocked by process")
STATE_QUERY = "SELECT nodeport, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid"


def find_pg_autoctl() -> tuple[str | None, str]:
    """``(path, "")`` of pg_autoctl, installed from Debian if needed; ``(None, reason)``."""
    if not os.access(os.path.join(PG_BINDIR, "pg_ctl"), os.X_OK):
        return None, f"PostgreSQL 15 server binaries are not in {PG_BINDIR}"
    return ensure_package(PACKAGE, "pg_autoctl")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The URL of this node's own PostgreSQL (as the superuser, its ``postgres`` database)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class AutoFailoverCluster:
    """A monitor and two data nodes under ``root`` (see the module docstring)."""

    def __init__(self, root: Path, pg_autoctl: str = "pg_autoctl") -> None:
        self.root = root
        self.pg_autoctl = pg_autoctl
        monitor_port, *ports = _free_ports(3)
        self.monitor = Node("monitor", monitor_port, root / "monitor")
        self.nodes = [Node(f"node_{i + 1}", port, root / f"node{i + 1}") for i, port in enumerate(ports)]
        self.monitor_url = f"postgresql://autoctl_node@127.0.0.1:{monitor_port}/pg_auto_failover"
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        self.url = f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write&connect_timeout=2"
        self._as_user: list[str] = []
        self._env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_DATA_HOME": str(root / "share"),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "PATH": f"{PG_BINDIR}:/usr/sbin:/usr/bin:/sbin:/bin",
            # The nodes' Unix sockets go under root too (pg_autoctl reads this to set unix_socket_directories).
            "PG_REGRESS_SOCK_DIR": str(root / "run"),
            "PGHOST": str(root / "run"),
        }

    # -- lifecycle ----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Monitor, then the primary, then the secondary; returns once replication is synchronous."""
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in ("config", "share", "run"):
            (self.root / sub).mkdir(exist_ok=True)
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            for path in (self.root, *self.root.iterdir()):
                os.chown(path, pw.pw_uid, pw.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        deadline = time.monotonic() + timeout
        self.monitor.process = self._spawn(
            "create", "monitor", "--pgdata", str(self.monitor.pgdata), "--pgport", str(self.monitor.port),
            "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run",
        )  # fmt: skip
        self._until(deadline, self._monitor_ready, "the monitor to accept connections")
        self._configure_monitor()
        for node in self.nodes:
            node.process = self._spawn(
                "create", "postgres", "--pgdata", str(node.pgdata), "--pgport", str(node.port),
                "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl",
                "--monitor", self.monitor_url, "--name", node.name, "--run",
            )  # fmt: skip
            self._until(deadline, lambda n=node: self._state_of(n.port) in JOINED, f"{node.name} to join")
            for key, value in NODE_SETTINGS.items():
                self._until(deadline, partial(self._set_config, node, key, value), f"{node.name}'s {key} to be set")
        self.wait_stable(deadline - time.monotonic())

    def _set_config(self, node: Node, key: str, value: str) -> bool:
        """``pg_autoctl config set``; False while the node's own pg_autoctl is rewriting its configuration file.

        A node that has joined may still be writing its ``pg_autoctl.cfg``
        (it does at each state change): read then, the file has no sections
        yet ("Failed to find section", "Failed to parse configuration file").
        Seen once in CI; the next poll reads the whole file.
        """
        try:
            self._autoctl("config", "set", "--pgdata", str(node.pgdata), key, value)
        except RuntimeError as exc:
            if "Failed to parse configuration file" in str(exc):
                return False
            raise
        return True

    def stop(self) -> None:
        """Kill every process of the cluster and remove ``root``."""
        for node in (*self.nodes, self.monitor):
            self._kill(node)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- state ----------------------------------------------------------------------

    def states(self) -> dict[int, tuple[str, str]]:
        """``{port: (reported state, goal state)}`` of every data node, as the monitor sees them."""
        import psycopg

        with psycopg.connect(self.monitor_url, autocommit=True, connect_timeout=2) as conn:
            return {int(port): (reported, goal) for port, reported, goal in conn.execute(STATE_QUERY)}

    def primary(self) -> Node | None:
        """The node both reporting and assigned a writable primary state, if any."""
        writable = ("primary", "wait_primary", "single")
        for port, (reported, goal) in self.states().items():
            if reported in writable and goal in writable:
                return next(n for n in self.nodes if n.port == port)
        return None

    def wait_for_primary(self, other_than: Node | None = None, timeout: float = 60.0) -> Node:
        """The writable primary (not ``other_than``), once the monitor reports one."""
        found: list[Node] = []

        def ready() -> bool:
            node = self._safe(self.primary)
            if node is None or node is other_than:
                return False
            found.append(node)
            return True

        self._until(time.monotonic() + timeout, ready, "a new primary")
        return found[-1]

    def wait_stable(self, timeout: float = 60.0) -> None:
        """Until one node is ``primary`` and the other ``secondary`` (synchronous replication on)."""

        def stable() -> bool:
            states = self._safe(self.states) or {}
            seen = sorted(reported for reported, goal in states.values() if reported == goal)
            return seen == ["primary", "secondary"]

        self._until(time.monotonic() + timeout, stable, "a primary with a synchronous secondary")

    def wait_replayed(self, standby: Node, timeout: float = 60.0) -> None:
        """Until ``standby`` has replayed everything the primary has written so far.

        Synchronous replication here (``synchronous_commit = on``) makes a
        commit wait for the standby to flush its WAL, not to apply it: a read
        on the standby right after a commit may not see it yet (a store just
        migrated on the primary looked unmigrated on the standby once).
        """
        import psycopg

        primary = self.primary()
        assert primary is not None, f"no primary: {self.states()}"
        with psycopg.connect(primary.url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        written = row[0]

        def replayed() -> bool:
            with psycopg.connect(standby.url, autocommit=True, connect_timeout=2) as conn:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (written,)).fetchone()
            return done is not None and done[0] is True

        self._until(time.monotonic() + timeout, lambda: self._safe(replayed), f"{standby.name} to replay {written}")

    # -- faults -----------------------------------------------------------------------

    def kill_primary(self) -> Node:
        """SIGKILL the primary's pg_autoctl and postmaster (its whole process group); the node killed."""
        node = self.primary()
        assert node is not None, f"no primary to kill: {self.states()}"
        self._kill(node)
        return node

    def restart(self, node: Node) -> None:
        """Run a killed node's pg_autoctl again: it rejoins the cluster as a secondary."""
        node.process = self._spawn("run", "--pgdata", str(node.pgdata))

    def switchover(self) -> None:
        """``pg_autoctl perform switchover``: demote the primary, promote the secondary; waits until done.

        Asked again (at most twice more, once the cluster is stable) when the
        monitor refused it with a deadlock: its ``perform_switchover`` and a
        keeper's ``node_active`` update the same ``pgautofailover.node`` rows
        and PostgreSQL cancels one of them (seen in a full suite run: "Process
        ... waits for ExclusiveLock on advisory lock ...; blocked by process
        ..."). The cancelled function rolled back: nothing was switched over.
        """
        for attempt in range(3):
            try:
                self._autoctl("perform", "switchover", "--monitor", self.monitor_url, "--wait", "60", timeout=90)
                return
            except RuntimeError as exc:
                if attempt == 2 or not _MONITOR_DEADLOCK.search(str(exc)):
                    raise
            self.wait_stable()

    # -- helpers ----------------------------------------------------------------------

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.root / "pg_autoctl.log", "ab")  # noqa: SIM115 (the child owns it)
        try:
            return subprocess.Popen(
                [*self._as_user, self.pg_autoctl, *args],
                env=self._env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # one process group per pg_autoctl: kill_primary kills it whole
            )
        finally:
            log.close()

    def _autoctl(self, *args: str, timeout: float = 30) -> None:
        done = subprocess.run(
            [*self._as_user, self.pg_autoctl, *args],
            env=self._env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)} failed: {done.stderr.strip()[-800:]}")

    def _kill(self, node: Node) -> None:
        postmaster = node.pgdata / "postmaster.pid"
        pids: list[int] = []
        if node.process is not None and node.process.poll() is None:
            try:
                os.killpg(node.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            pids.append(int(postmaster.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if node.process is not None:
            try:
                node.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def _configure_monitor(self) -> None:
        import psycopg

        url = self.monitor_url.replace("autoctl_node@", "postgres@")
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            for name, value in MONITOR_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
            conn.execute("SELECT pg_reload_conf()")

    def _monitor_ready(self) -> bool:
        return self._safe(self.states) is not None

    def _state_of(self, port: int) -> str | None:
        states: dict[int, tuple[str, str]] = self._safe(self.states) or {}
        return states[port][0] if port in states else None

    @staticmethod
    def _safe(read: Any) -> Any:
        import psycopg

        try:
            return read()
        except psycopg.Error:
            return None

    def _until(self, deadline: float, ready: Any, what: str) -> None:
        """Poll ``ready()`` (the monitor's state) every 50 ms until it is true; ``TimeoutError`` naming ``what``."""
        while not ready():
            for node in (self.monitor, *self.nodes):
                if node.process is not None and node.process.poll() not in (None, 0, -signal.SIGKILL):
                    raise RuntimeError(f"{node.name}'s pg_autoctl exited with {node.process.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"waiting for {what}: {self._safe(self.states)}; {self.log()}")
            time.sleep(0.05)

    def log(self, tail: int = 3000) -> str:
        try:
            return (self.root / "pg_autoctl.log").read_text(errors="replace")[-tail:]
        except OSError:
            return ""
