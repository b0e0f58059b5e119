"""A pydantic-ai conversation saved turn by turn: durastate against pydantic-ai-harness's own SQLite store.

    .venv/bin/python bench/pydantic_ai_harness_conversations.py [--rounds 7] [--calls 100]
        [--durability full|normal] [--lengths 20,200]

The SQLite conversation store the pydantic-ai project ships is
pydantic-ai-harness's ``step_persistence.SqliteConversationStore`` (0.36.0,
the pinned release): a conversation is one row holding its whole transcript
(JSON) with a revision checked in ``BEGIN IMMEDIATE``; ``save`` writes the
whole transcript again, ``get`` reads it. pydantic-ai's own
``ConversationStore`` interface (what ``DurastateConversationStore``
implements) saves a turn as new entries under a record's compare-and-swap,
and reads a history back through the entries' parents. The two APIs differ;
the user's workload is the same: after every turn the conversation is
persisted (its revision checked, so a second writer is refused), and a
resumed agent reads the conversation back. That workload is what is raced.

Contenders, each on a SQLite file of its own:

* ``durastate``: ``DurastateConversationStore.write_record`` of the turn's
  two entries (a prompt, a ~200-character answer) with the stored revision
  expected; a resume is ``read_record`` + ``read_history`` of its head.
  ``--durability full`` by default (an fsync per commit): the harness's
  connection is WAL with SQLite's default ``synchronous=FULL``, the same;
* ``harness``: ``SqliteConversationStore.save`` of the conversation's
  messages (the same messages) with the stored summary; a resume is ``get``.

Ops, at each conversation length of ``--lengths`` (messages already in the
conversation): ``save a turn`` and ``resume``. For the harness a save costs
what the transcript's length makes it cost; durastate's does not grow with it.
Method: ``_race.arace`` (alternating order, round 0 warms up, medians of the
per-round ratios harness / durastate: > 1, durastate faster; CPU is the
process's, so the harness's worker threads are counted).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai_harness.step_persistence.conversations import ConversationSummary, SqliteConversationStore

import durastate
from _race import arace
from durastate.integrations.pydantic_ai import DurastateConversationStore


def _turn(n: int) -> tuple[ModelRequest, ModelResponse]:
    return ModelRequest(parts=[UserPromptPart(f"question {n}?")]), ModelResponse(
        parts=[TextPart(f"answer {n} " + "x" * 190)]
    )


class Ours:
    """One durastate conversation of ``length`` messages that grows by a turn per save."""

    def __init__(self, store: DurastateConversationStore, conversation_id: str) -> None:
        self.store, self.conversation_id = store, conversation_id
        self.revision: str | None = None
        self.head: str | None = None
        self.n = 0

    async def save_turn(self) -> None:
        ask, answer = _turn(self.n)
        self.n += 1
        first = ConversationEntry(parent_id=self.head, message=ask)
        second = ConversationEntry(parent_id=first.id, message=answer)
        record = ConversationRecord(conversation_id=self.conversation_id, head_id=second.id)
        await self.store.write_record(record, new_entries=[first, second], expected_revision=self.revision)
        self.revision, self.head = record.revision, record.head_id

    async def resume(self) -> None:
        record = await self.store.read_record(self.conversation_id)
        assert record is not None
        await self.store.read_history(record.head_id)


class Harness:
    """One harness conversation holding ``length`` messages; each save writes them all, as its save does."""

    def __init__(self, store: SqliteConversationStore, length: int) -> None:
        self.store = store
        self.messages: list[ModelMessage] = [m for n in range(length // 2) for m in _turn(n)]
        self.summary = ConversationSummary(workspace="bench")

    async def save_turn(self) -> None:
        # The conversation's length stays at ``length``: the oldest turn leaves as a new one comes, so every
        # timed save writes a transcript of the same size (the size the op is labelled with).
        self.messages = [*self.messages[2:], *_turn(len(self.messages))]
        self.summary = await self.store.save(summary=self.summary, messages=self.messages)

    async def resume(self) -> None:
        saved = await self.store.get(conversation_id=self.summary.id)
        assert len(saved.messages) == len(self.messages)


async def main(rounds: int, calls: int, durability: str, lengths: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pydantic-ai-harness-") as folder:
        ours = DurastateConversationStore(
            store=durastate.open(f"sqlite://{folder}/durastate.db", durability=durability)
        )
        theirs = SqliteConversationStore(database=Path(folder) / "harness.db")
        ops: dict[str, dict[str, Callable[[], Awaitable[Any]]]] = {"durastate": {}, "harness": {}}

        async def planted(conversation_id: str, length: int) -> tuple[Ours, Harness]:
            """A conversation of ``length`` messages on each side, stored."""
            mine = Ours(ours, conversation_id)
            for _ in range(length // 2):
                await mine.save_turn()
            peer = Harness(theirs, length)
            await peer.save_turn()
            return mine, peer

        for length in lengths:
            mine, peer = await planted(f"bench-{length}", length)
            ops["durastate"][f"save a turn ({length} messages)"] = mine.save_turn
            ops["harness"][f"save a turn ({length} messages)"] = peer.save_turn
            # A resume reads a conversation that stops growing: its own copy, saved once.
            still, resumed = await planted(f"bench-resume-{length}", length)
            ops["durastate"][f"resume ({length} messages)"] = still.resume
            ops["harness"][f"resume ({length} messages)"] = resumed.resume
        await arace(
            f"SQLite, durastate durability={durability!r} vs pydantic-ai-harness SqliteConversationStore",
            ops,
            rounds,
            calls,
        )
        ours.close()
        ours.store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--durability", choices=["normal", "full"], default="full")
    parser.add_argument("--lengths", default="20,200", help="conversation lengths in messages, comma-separated")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.calls, args.durability, [int(n) for n in args.lengths.split(",")]))
