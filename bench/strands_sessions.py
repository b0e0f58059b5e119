"""Strands on durastate vs Strands' own file backends, side by side.

    .venv/bin/python bench/strands_sessions.py [--rounds 7] [--calls 200] [--postgres-url URL]
        [--durability normal|full] [--pg-synchronous-commit on|off]

(Not ``bench/strands.py``: a script named after the package shadows it when
run.)

Contenders, in one temporary folder:

* ``durastate``: ``DurastateSessionRepository`` and ``DurastateStorage`` on a
  SQLite file, ``--durability normal`` by default (WAL, no fsync per commit:
  the file backends do not fsync either); ``full`` fsyncs each commit;
* ``file``: Strands' ``FileSessionManager`` (its repository half: a JSON file
  per message, written to a temporary file and renamed) and
  ``LocalFileStorage`` (a file per key);
* with ``--postgres-url``, ``durastate-pg``: the same classes on that server
  (a fresh schema), against the same file backends (Strands ships no SQL one).
  ``--pg-synchronous-commit off`` sets that session option: a commit returns
  before its WAL is flushed, the durability of a file written without fsync
  (``on``, the server's default, waits for the flush).

Ops (the repository is synchronous, as Strands calls it; the storage is
async): ``create_message`` (a new id each call, a ~300-byte message),
``list_messages`` of a 40-message agent (all of them, and a page of 10 at
offset 30: what restoring an agent reads), ``read_message``, storage
``write`` and ``read`` of a ~1 KB value, storage ``list`` of a 50-key prefix.

Method: one untimed warm-up round, then ``--rounds`` rounds; in each round
every op runs ``--calls`` times per contender, back to back, in an order that
alternates from round to round. Reported, in wall time and in the process's
CPU time: median time per call, and per peer the median of the per-round
ratios peer / durastate (> 1: durastate faster) with their range. The
machine is shared and noisy: read ratios.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strands.session import FileSessionManager
from strands.storage import LocalFileStorage
from strands.types.session import SessionAgent, SessionMessage

import durastate
from _race import arguments, postgres_schema
from _race import race as run_race
from durastate.integrations.strands import DurastateSessionRepository, DurastateStorage

TEXT = "a sentence of a conversation, long enough to look like one. " * 5


def _message(n: int) -> SessionMessage:
    return SessionMessage(message={"role": "user", "content": [{"text": f"{n}: {TEXT}"}]}, message_id=n)


def _ops(repo: Any, storage: Any, loop: asyncio.AbstractEventLoop) -> dict[str, Callable[[], Any]]:
    for agent in ("reader", "writer"):
        repo.create_agent("bench", SessionAgent(agent_id=agent, state={}, conversation_manager_state={}))
    for n in range(40):
        repo.create_message("bench", "reader", _message(n))
    for n in range(50):
        loop.run_until_complete(storage.write(f"listed/{n:03}.json", TEXT.encode()))
    ids = itertools.count()
    value = (TEXT * 4).encode()
    keys = itertools.cycle(f"kv/{n}" for n in range(50))

    def write() -> None:
        loop.run_until_complete(storage.write(next(keys), value))

    def read() -> None:
        loop.run_until_complete(storage.read(next(keys)))

    def listing() -> None:
        loop.run_until_complete(storage.list("listed/"))

    return {
        "create_message": lambda: repo.create_message("bench", "writer", _message(next(ids))),
        "list_messages (40)": lambda: repo.list_messages("bench", "reader"),
        "list_messages (10 at 30)": lambda: repo.list_messages("bench", "reader", limit=10, offset=30),
        "read_message": lambda: repo.read_message("bench", "reader", 17),
        "storage write (1 KB)": write,
        "storage read (1 KB)": read,
        "storage list (50)": listing,
    }


def race(title: str, contenders: dict[str, tuple[Any, Any]], rounds: int, calls: int) -> None:
    loop = asyncio.new_event_loop()
    try:
        run_race(
            title, {label: _ops(repo, storage, loop) for label, (repo, storage) in contenders.items()}, rounds, calls
        )
    finally:
        loop.close()


def race_store(title: str, label: str, store: Any, files: tuple[Any, Any], rounds: int, calls: int) -> None:
    """Race durastate's repository and storage on ``store`` against Strands' files (one session each)."""
    repo = DurastateSessionRepository(store=store)
    repo.create_session(files[0].session)
    race(title, {label: (repo, DurastateStorage(store=store)), "file": files}, rounds, calls)


def main(rounds: int, calls: int, postgres_url: str | None, durability: str, synchronous_commit: str = "on") -> None:
    with tempfile.TemporaryDirectory() as folder:
        files = (
            FileSessionManager("bench", storage_dir=str(Path(folder, "sessions"))),
            LocalFileStorage(str(Path(folder, "kv"))),
        )
        with durastate.open(Path(folder, "durastate.db"), durability=durability) as store:
            race_store(
                f"SQLite file (durability={durability!r}) vs Strands' files", "durastate", store, files, rounds, calls
            )
        if postgres_url is None:
            return
        with (
            postgres_schema(postgres_url, synchronous_commit=synchronous_commit) as (url, _),
            durastate.open(url) as pg,
        ):
            title = f"PostgreSQL (synchronous_commit={synchronous_commit}) vs Strands' files"
            race_store(title, "durastate-pg", pg, files, rounds, calls)


if __name__ == "__main__":
    args = arguments(__doc__, synchronous_commit=True)
    main(args.rounds, args.calls, args.postgres_url, args.durability, args.pg_synchronous_commit)
