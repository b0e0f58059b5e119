"""CPU time of PostgreSQL server processes, for CPU-normalised benchmark figures.

Wall-clock latency on a machine shared with other work measures the
machine as much as the code under test. The work itself is CPU: this
process's (``time.process_time`` / ``time.thread_time``) plus that of the
server processes serving our connections. Each contender connects with its
own ``application_name`` (``with_application_name``); ``ServerCPU`` finds
its backends in ``pg_stat_activity`` and reads their CPU time in
nanoseconds from ``/proc/<pid>/schedstat``. That needs the server on this
machine and its ``/proc`` readable; otherwise ``available`` turns False and
the figures are client CPU only (say so when reporting).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg


def with_application_name(url: str, name: str) -> str:
    """``url`` whose sessions report ``application_name`` = ``name`` (to find their server processes)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "application_name"]
    query.append(("application_name", name))
    return urlunsplit(parts._replace(query=urlencode(query)))


def process_ns(pid: int) -> int:
    """CPU time (ns) the process ``pid`` has run so far (``/proc/<pid>/schedstat``)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


class ServerCPU:
    """CPU time (ns) of the server processes of one ``application_name``."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(with_application_name(url, "bench-admin"), autocommit=True)
        self.available = True

    def pids(self, name: str) -> list[int]:
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchall()
        return [int(r[0]) for r in rows]

    def ns(self, name: str) -> dict[int, int]:
        return self.ns_of(self.pids(name))

    def ns_of(self, pids: list[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for pid in pids:
            try:
                out[pid] = process_ns(pid)
            except (OSError, ValueError, IndexError):
                self.available = False  # not on this machine, or not allowed: client CPU only
        return out

    def close(self) -> None:
        self.conn.close()


def spent_ns(before: dict[int, int], after: dict[int, int]) -> int:
    """Server CPU between two readings (a process that appeared meanwhile counts from zero)."""
    return sum(ns - before.get(pid, 0) for pid, ns in after.items())
