"""What every integration object on a store shares (``integrations._common.Holder``/``StoreHolder``).

An object dropped without ``close()`` on a borrowed store does not leave its
worker threads behind once it is garbage-collected.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

pytest.importorskip("agents.memory")

import durastate
from durastate.integrations.openai_agents import DurastateSession

# A generous bound on the threads' exit (they end as soon as the reaper has queued their stop): only a
# failure waits this long.
JOIN_TIMEOUT = 30.0


def _join_all(threads: list[threading.Thread]) -> list[threading.Thread]:
    """Join ``threads`` within one overall deadline; the ones still alive after it."""
    deadline = time.monotonic() + JOIN_TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


def test_dropped_sessions_leave_no_worker_threads(shared_url: str) -> None:
    # durability="full" on SQLite: writes run on workers there too (PostgreSQL runs every call on one).
    options = {"durability": "full"} if shared_url.startswith("sqlite") else {}
    with durastate.open(shared_url, **options) as store:
        before = set(threading.enumerate())

        sessions = [DurastateSession(f"m{i}", store=store) for i in range(20)]

        async def use(sessions: list[DurastateSession]) -> None:
            for session in sessions:
                await session.add_items([{"role": "user", "content": "hi"}])

        asyncio.run(use(sessions))
        workers = [t for t in set(threading.enumerate()) - before if t.name.startswith("durastate-openai-agents")]
        assert len(workers) >= len(sessions)  # each session's calls ran on a worker thread of its own runner
        del sessions
        gc.collect()
        assert _join_all(workers) == []
        # The store is untouched: still open and usable by a new session.
        assert asyncio.run(DurastateSession("m0", store=store).get_items()) == [{"role": "user", "content": "hi"}]


def test_closed_session_is_not_reaped_twice(shared_url: str) -> None:
    with durastate.open(shared_url) as store:
        session = DurastateSession("s", store=store)
        session.close()
        assert not session._reaped.alive  # close() ended the runner; nothing is left for collection to do
