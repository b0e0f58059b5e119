"""DurastateSessionService vs Google ADK's own session services, side by side.

    .venv/bin/python bench/adk.py [--rounds 7] [--calls 200] [--postgres-url URL]

Contenders, each on a fresh database in one temporary folder, driven through
ADK's async ``BaseSessionService`` methods from one event loop:

* ``durastate``: ``DurastateSessionService`` on a SQLite file opened with
  ``durability="full"`` (an fsync per commit, as SQLite's default
  ``synchronous=FULL`` gives the peers);
* ``adk-sqlite``: ADK's ``SqliteSessionService`` (aiosqlite, a connection
  per call);
* ``adk-database``: ADK's ``DatabaseSessionService`` on
  ``sqlite+aiosqlite://`` (SQLAlchemy's async ORM).

With ``--postgres-url``, also ``durastate`` on that server against
``DatabaseSessionService`` on ``postgresql+psycopg://`` (psycopg 3's async
driver, the one durastate's extra installs), each in a fresh schema.

Ops: ``append_event``, an event carrying a ~200-byte text and a one-key
state delta, appended through the session object the previous append
updated (ADK's runner does this); ``get_session`` of a session holding
``HISTORY`` such events (all of them), and with
``GetSessionConfig(num_recent_events=10)``.

Method: one untimed warm-up round, then ``--rounds`` rounds; in each round
every op runs ``--calls`` times per contender, back to back, in an order
that alternates from round to round. Reported, in wall time and in the
process's CPU time (all its threads: aiosqlite and SQLAlchemy run the
peers' statements on a thread of their own, so on a machine with idle
cores their wall time can be below their CPU time, and on a saturated one
the wall time is mostly waiting for a core): median time per call, and per
peer the median of the per-round ratios peer / durastate (> 1: durastate
faster) with their range. The machine is shared and noisy: read ratios,
not times.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from google.adk.events import Event, EventActions
from google.adk.sessions import DatabaseSessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

import durastate
from _race import arace, arguments, postgres_schema
from durastate.integrations.adk import DurastateSessionService

HISTORY = 50
APP, USER = "bench", "user"


def _event(n: int) -> Event:
    text = f"message {n} " + "x" * 190
    return Event(
        invocation_id=f"inv-{n // 4}", author="assistant" if n % 2 else "user",
        content=types.Content(role="model" if n % 2 else "user", parts=[types.Part(text=text)]),
        actions=EventActions(state_delta={"turn": n}),
    )  # fmt: skip


async def _ops(service: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    writer = await service.create_session(app_name=APP, user_id=USER, session_id=f"w-{uuid.uuid4().hex}")
    reader = await service.create_session(app_name=APP, user_id=USER, session_id=f"r-{uuid.uuid4().hex}")
    for n in range(HISTORY):
        await service.append_event(reader, _event(n))
    counter = iter(range(10**9))
    recent = GetSessionConfig(num_recent_events=10)

    async def append() -> None:
        await service.append_event(writer, _event(next(counter)))

    async def get_all() -> None:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=reader.id)
        assert len(session.events) == HISTORY

    async def get_recent() -> None:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=reader.id, config=recent)
        assert len(session.events) == 10

    return {
        "append_event": append,
        f"get_session ({HISTORY} events)": get_all,
        "get_session (newest 10)": get_recent,
    }


async def race(title: str, services: dict[str, Any], rounds: int, calls: int) -> None:
    await arace(title, {label: await _ops(service) for label, service in services.items()}, rounds, calls)


async def main(rounds: int, calls: int, postgres_url: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = durastate.open(Path(folder, "durastate.db"), durability="full")
        services: dict[str, Any] = {
            "durastate": DurastateSessionService(store=store),
            "adk-sqlite": SqliteSessionService(db_path=str(Path(folder, "adk-sqlite.db"))),
            "adk-database": DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{Path(folder, 'adk-db.db')}"),
        }
        try:
            await race("SQLite", services, rounds, calls)
        finally:
            await services["durastate"].aclose()
            await services["adk-sqlite"].close()
            await services["adk-database"].close()
            store.close()
    if postgres_url is None:
        return
    with postgres_schema(postgres_url) as (ours_url, _), postgres_schema(postgres_url) as (_, peer_schema):
        pg_store = durastate.open(ours_url)
        # The peer's tables in their own schema: search_path through libpq options.
        options = {"connect_args": {"options": f"-csearch_path={peer_schema}"}}
        peer = DatabaseSessionService(db_url=postgres_url.replace("postgresql://", "postgresql+psycopg://"), **options)
        services = {"durastate": DurastateSessionService(store=pg_store), "adk-database": peer}
        try:
            await race("PostgreSQL", services, rounds, calls)
        finally:
            await services["durastate"].aclose()
            await peer.close()
            pg_store.close()


if __name__ == "__main__":
    args = arguments(__doc__, durability=False)
    asyncio.run(main(args.rounds, args.calls, args.postgres_url))
