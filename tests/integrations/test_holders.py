"""What every integration object on a store shares (``integrations._common``).

An object dropped without ``close()`` on a borrowed store does not leave its
worker threads behind once it is garbage-collected; a closed store is
refused when the object is built (``store=``, or the store argument of LangGraph's
saver and store and eventsourcing's recorders), not at its first call.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

pytest.importorskip("agents.memory")

import importlib
from typing import Any

import durastate
from durastate.errors import StoreClosed
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


# Every integration class built on a borrowed store: (module, class, positional arguments). Those of
# POSITIONAL take the store as their first argument, as their framework builds them; the rest take store=.
POSITIONAL = ("eventsourcing", "langgraph")
BORROWERS = [
    ("langgraph", "DurastateSaver", ()),
    ("langgraph", "DurastateStore", ()),
    ("openai_agents", "DurastateSession", ("s",)),
    ("pydantic_ai", "DurastateConversationStore", ()),
    ("pydantic_ai_harness", "DurastateMemoryStore", ()),
    ("pydantic_ai_harness_media", "DurastateMediaStore", ()),
    ("pydantic_ai_harness_steps", "DurastateStepStore", ()),
    ("adk", "DurastateSessionService", ()),
    ("adk", "DurastateArtifactService", ()),
    ("adk", "DurastateMemoryService", ()),
    ("strands", "DurastateSessionRepository", ()),
    ("strands", "DurastateStorage", ()),
    ("agent_framework", "DurastateHistoryProvider", ()),
    ("agent_framework", "DurastateCheckpointStorage", ()),
    ("huey", "DurastateStorage", ()),
    ("eventsourcing", "DurastateAggregateRecorder", ()),
    ("eventsourcing", "DurastateApplicationRecorder", ()),
    ("eventsourcing", "DurastateTrackingRecorder", ()),
    ("eventsourcing", "DurastateProcessRecorder", ()),
]


def _borrower(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(f"durastate.integrations.{module}"), name)
    except ImportError as exc:
        pytest.skip(f"{module}: {exc}")


@pytest.mark.parametrize(("module", "name", "args"), BORROWERS, ids=[f"{m}.{n}" for m, n, _ in BORROWERS])
def test_a_closed_store_is_refused_when_built(module: str, name: str, args: tuple[Any, ...]) -> None:
    cls = _borrower(module, name)
    store = durastate.open("memory:")
    store.close()
    before = set(threading.enumerate())
    with pytest.raises(StoreClosed, match="store= is closed"):
        if module in POSITIONAL:
            cls(store, *args)
        else:
            cls(*args, store=store)
    assert set(threading.enumerate()) <= before  # nothing was started for the refused object
