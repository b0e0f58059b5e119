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

import threading
import time
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
        self.url = url
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


class WaitSampler:
    """What the server processes ``pids`` wait on, sampled from ``pg_stat_activity``.

    Samples every ``every`` seconds between ``resume()`` and ``pause()``
    (any number of times), on a connection and thread of its own, until
    ``close()``. ``shares()``: ``(share, "state wait_event_type:wait_event")``,
    most frequent first. Tells a limit of the server (``IO:WALSync``,
    ``LWLock:WALWrite``: commit flushes) from one of the client
    (``idle Client:ClientRead``: the backend waits for the next statement).
    """

    def __init__(self, url: str, pids: list[int], every: float = 0.005) -> None:
        self.url, self.pids, self.every = url, pids, every
        self.counts: dict[str, int] = {}
        self._active = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        with psycopg.connect(with_application_name(self.url, "bench-waits"), autocommit=True) as conn:
            while True:
                self._active.wait()
                if self._closed:
                    return
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity WHERE pid = ANY(%s)",
                    (self.pids,),
                ).fetchall()
                for state, kind, event in rows:
                    key = f"{state} {kind}:{event}" if kind else f"{state} (running)"
                    self.counts[key] = self.counts.get(key, 0) + 1
                time.sleep(self.every)

    def resume(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        self._active.set()

    def pause(self) -> None:
        self._active.clear()

    def close(self) -> None:
        self._closed = True
        self._active.set()
        if self._thread is not None:
            self._thread.join()

    def shares(self) -> list[tuple[float, str]]:
        total = sum(self.counts.values()) or 1
        return sorted(((n / total, key) for key, n in self.counts.items()), reverse=True)
