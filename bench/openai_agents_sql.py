"""DurastateSession vs the OpenAI Agents SDK's other SQL sessions: its PostgreSQL one, and its async SQLite ones.

    .venv/bin/python bench/openai_agents_sql.py [--rounds 7] [--calls 100] [--history 200]
        [--postgres-url URL] [--pg-synchronous-commit on|off]

``bench/openai_agents_session.py`` races the SDK's ``SQLiteSession``, the
session its docs start with. The SDK ships more SQL sessions, and a user who
outgrows one SQLite file moves to the PostgreSQL one: ``SQLAlchemySession``
(``agents.extensions.memory``; SQLAlchemy's async engine, here on psycopg 3:
``postgresql+psycopg``, the driver durastate uses; asyncpg is not installed).
This bench races, through the SDK's async ``Session`` methods from one event
loop, the same ops as ``openai_agents_session.py`` on a session holding
``--history`` items of about 200 bytes:

* on PostgreSQL (with ``--postgres-url``): ``DurastateSession`` against
  ``SQLAlchemySession``, each in a fresh schema of the same server, at the
  same ``synchronous_commit`` (``on`` by default: a commit returns once its
  WAL is flushed, for both);
* on SQLite: ``DurastateSession`` at ``durability="full"`` against
  ``AsyncSQLiteSession`` (aiosqlite) and ``SQLAlchemySession`` on
  ``sqlite+aiosqlite`` (both in WAL mode at SQLite's default
  ``synchronous=FULL``: an fsync per commit, as ``durability="full"``).

Ratios are peer / durastate (> 1: durastate faster), median and range of the
per-round ratios; CPU is the whole process's (aiosqlite's and SQLAlchemy's
threads included). The machine is shared and noisy: read ratios, not times.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agents.extensions.memory import AsyncSQLiteSession, SQLAlchemySession
from sqlalchemy.ext.asyncio import create_async_engine

import durastate
from _postgres import postgres_url
from _race import arace, postgres_schema
from durastate.integrations.openai_agents import DurastateSession
from openai_agents_session import _item, _ops


def _sqlalchemy_url(url: str, scheme: str) -> str:
    """A libpq URL (``postgresql://...``) as SQLAlchemy's URL for ``scheme`` (say ``postgresql+psycopg``)."""
    return scheme + url[url.index(":") :]


async def _plant_and_race(title: str, sessions: dict[str, Any], rounds: int, calls: int, history_size: int) -> None:
    """Give every session the same ``history_size`` items, then race the ops on them."""
    history = [_item(n) for n in range(history_size)]
    for session in sessions.values():
        await session.add_items(history)
        assert len(await session.get_items()) == history_size
    await arace(title, {label: _ops(session) for label, session in sessions.items()}, rounds, calls)


async def sqlite_race(rounds: int, calls: int, history_size: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = durastate.open(Path(folder, "durastate.db"), durability="full")
        engine = create_async_engine(f"sqlite+aiosqlite:///{Path(folder, 'sqlalchemy.db')}")
        sessions: dict[str, Any] = {
            "durastate-full": DurastateSession("bench", store=store),
            "AsyncSQLiteSession": AsyncSQLiteSession("bench", Path(folder, "aiosqlite.db")),
            "SQLAlchemySession": SQLAlchemySession("bench", engine=engine, create_tables=True),
        }
        try:
            title = f"SQLite, history {history_size} (durastate durability='full'; peers WAL at synchronous=FULL)"
            await _plant_and_race(title, sessions, rounds, calls, history_size)
        finally:
            sessions["durastate-full"].close()
            await sessions["AsyncSQLiteSession"].close()
            await engine.dispose()
            store.close()


async def postgres_race(rounds: int, calls: int, history_size: int, base_url: str, synchronous_commit: str) -> None:
    with (
        postgres_schema(base_url, synchronous_commit=synchronous_commit) as (ours_url, _),
        postgres_schema(base_url, synchronous_commit=synchronous_commit) as (peer_url, _),
    ):
        store = durastate.open(ours_url)
        # The schema (and synchronous_commit) ride in the URL's libpq options, which psycopg reads as given.
        engine = create_async_engine(_sqlalchemy_url(peer_url, "postgresql+psycopg"))
        sessions: dict[str, Any] = {
            "durastate-pg": DurastateSession("bench", store=store),
            "SQLAlchemySession": SQLAlchemySession("bench", engine=engine, create_tables=True),
        }
        try:
            title = f"PostgreSQL, history {history_size} (synchronous_commit={synchronous_commit} for both)"
            await _plant_and_race(title, sessions, rounds, calls, history_size)
        finally:
            sessions["durastate-pg"].close()
            await engine.dispose()
            store.close()


async def main(args: argparse.Namespace) -> None:
    await sqlite_race(args.rounds, args.calls, args.history)
    if args.postgres_url is not None:
        await postgres_race(args.rounds, args.calls, args.history, args.postgres_url, args.pg_synchronous_commit)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--history", type=int, default=200, help="items in the session while the ops run")
    parser.add_argument(
        "--postgres-url", nargs="?", const=postgres_url(), help="also race on PostgreSQL (default: the local server)"
    )
    parser.add_argument("--pg-synchronous-commit", choices=["on", "off"], default="on")
    asyncio.run(main(parser.parse_args()))
