"""DurastateConversationStore vs a plain-sqlite3 ConversationStore, side by side (pydantic-ai's hot path).

    .venv/bin/python bench/pydantic_ai_conversations.py [--rounds 7] [--calls 200] [--durability normal|full]

pydantic-ai 2.78 ships one backend, ``InMemoryConversationStore``: no
durability, so no fair anchor. The anchor here is the best plain ``sqlite3``
``ConversationStore`` we could write at equal durability: one file in WAL
mode with the same ``synchronous`` setting as durastate's (``normal``:
``synchronous=NORMAL``, durastate's default; ``full``: ``FULL`` and
durastate's ``durability="full"``), one connection, no thread hop (its
coroutines call ``sqlite3`` directly, as durastate runs SQLite calls inline
on the loop), a records table (compare-and-swap by ``UPDATE ... WHERE
revision = ?``) and an entries table keyed by id with a parent column,
``read_history`` as ONE recursive CTE. Entries are encoded and decoded with
the same functions durastate uses (pydantic-ai's ``ModelMessagesTypeAdapter``,
a history decoded in one call), so the comparison is the storage alone.

Ops, through the ``ConversationStore`` primitives pydantic-ai calls:

* ``write_record``: a turn saved (a record moved on by two new entries, a
  prompt and a ~200-byte answer, expected_revision = the stored one);
* ``read_history``: the history of a 50-message conversation, whole and
  with ``limit=10`` (what ``load(limit=10)`` reads).

Method: one untimed warm-up round, then ``--rounds`` rounds; in each round
every op runs ``--calls`` times per contender, back to back, in an order
that alternates from round to round. Reported, in wall time and in CPU time
(everything runs on this one thread): median time per call and the median
(and range) of the per-round ratios sqlite3 / durastate (> 1: durastate
faster). The machine is shared and noisy: read ratios, not times.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

import durastate
from durastate.integrations.pydantic_ai import (
    _RECORD,
    DurastateConversationStore,
    _entries,
    _entry_json,
)

HISTORY = 50

# -- the plain-sqlite3 anchor -----------------------------------------------------------

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records (conversation_id TEXT PRIMARY KEY, revision TEXT NOT NULL,"
    " scope TEXT, updated_at TEXT NOT NULL, title TEXT, metadata TEXT, record TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, parent_id TEXT, blob BLOB NOT NULL)",
)
INSERT_RECORD = (
    "INSERT INTO records (conversation_id, revision, scope, updated_at, record) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (conversation_id) DO NOTHING"
)
UPDATE_RECORD = (
    "UPDATE records SET revision = ?, scope = ?, updated_at = ?, record = ? WHERE conversation_id = ? AND revision = ?"
)
READ_RECORD = "SELECT record, title, metadata FROM records WHERE conversation_id = ?"
ENTRY_EXISTS = "SELECT 1 FROM entries WHERE id = ?"
INSERT_ENTRY = "INSERT OR REPLACE INTO entries (id, parent_id, blob) VALUES (?, ?, ?)"
HISTORY_CTE = (
    "WITH RECURSIVE chain(id, parent_id, blob, depth) AS ("
    " SELECT id, parent_id, blob, 0 FROM entries WHERE id = ?"
    " UNION ALL SELECT e.id, e.parent_id, e.blob, c.depth + 1 FROM entries e JOIN chain c ON e.id = c.parent_id"
    " WHERE c.depth + 1 < ?)"
    " SELECT blob FROM chain ORDER BY depth DESC"
)


class SqliteConversationStore(ConversationStore):
    """write_record and read_history as plain sqlite3 does them best (the rest is not raced)."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        for statement in SCHEMA:
            self.db.execute(statement)

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        row = self.db.execute(READ_RECORD, (conversation_id,)).fetchone()
        return None if row is None else _RECORD.validate_json(row[0])

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        raise NotImplementedError

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        blob = _RECORD.dump_json(record)
        stamp = record.updated_at.isoformat()
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if expected_revision is None:
                cursor = db.execute(INSERT_RECORD, (record.conversation_id, record.revision, record.scope, stamp, blob))
            else:
                cursor = db.execute(
                    UPDATE_RECORD,
                    (record.revision, record.scope, stamp, blob, record.conversation_id, expected_revision),
                )
            if cursor.rowcount != 1:
                raise ConversationConflict(record.conversation_id)
            new_ids = {entry.id for entry in new_entries}
            if (
                record.head_id is not None
                and record.head_id not in new_ids
                and db.execute(ENTRY_EXISTS, (record.head_id,)).fetchone() is None
            ):
                raise ConversationConflict(record.conversation_id)
            db.executemany(INSERT_ENTRY, [(e.id, e.parent_id, _entry_json(e)) for e in new_entries])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        raise NotImplementedError

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        raise NotImplementedError

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        if head_id is None or limit == 0:
            return []
        rows = self.db.execute(HISTORY_CTE, (head_id, 2**62 if limit is None else limit)).fetchall()
        if not rows:
            raise KeyError(head_id)
        return _entries([row[0] for row in rows])

    def close(self) -> None:
        self.db.close()


# -- the workload -------------------------------------------------------------------------


def _turn(parent: str | None, n: int) -> list[ConversationEntry]:
    ask = ConversationEntry(parent_id=parent, message=ModelRequest(parts=[UserPromptPart(f"question {n}?")]))
    answer = ConversationEntry(parent_id=ask.id, message=ModelResponse(parts=[TextPart(f"answer {n} " + "x" * 190)]))
    return [ask, answer]


class Writer:
    """Saves turns to one conversation per contender, each against the revision it stored last."""

    def __init__(self, store: ConversationStore, conversation_id: str) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.revision: str | None = None
        self.head: str | None = None
        self.n = 0

    async def save_turn(self) -> None:
        entries = _turn(self.head, self.n)
        self.n += 1
        record = ConversationRecord(conversation_id=self.conversation_id, head_id=entries[-1].id)
        await self.store.write_record(record, new_entries=entries, expected_revision=self.revision)
        self.revision, self.head = record.revision, record.head_id


async def _calls(op: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call: CPU time is the steadier measure on a loaded machine (all runs in this thread)."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await op()
    return (time.perf_counter() - started) / calls, (time.process_time() - cpu) / calls


async def main(rounds: int, calls: int, durability: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pydantic-ai-") as folder:
        ours = DurastateConversationStore(
            store=durastate.open(f"sqlite://{folder}/durastate.db", durability=durability)
        )
        plain = SqliteConversationStore(Path(folder) / "plain.db", "FULL" if durability == "full" else "NORMAL")
        contenders: dict[str, ConversationStore] = {"durastate": ours, "sqlite3": plain}
        writers = {name: Writer(store, "bench-writes") for name, store in contenders.items()}
        heads: dict[str, str] = {}
        for name, store in contenders.items():
            history = Writer(store, "bench-history")
            for _ in range(HISTORY // 2):
                await history.save_turn()
            assert history.head is not None
            heads[name] = history.head
            assert len(await store.read_history(history.head)) == HISTORY

        ops: dict[str, Callable[[str], Callable[[], Awaitable[Any]]]] = {
            "write_record (a turn: 2 entries)": lambda name: writers[name].save_turn,
            f"read_history ({HISTORY} entries)": lambda name: lambda: contenders[name].read_history(heads[name]),
            "read_history (limit=10)": lambda name: lambda: contenders[name].read_history(heads[name], limit=10),
        }
        results: dict[str, dict[str, dict[str, list[float]]]] = {
            clock: {op: {name: [] for name in contenders} for op in ops} for clock in ("wall", "CPU")
        }
        names = list(contenders)
        for round_number in range(rounds + 1):
            order = names if round_number % 2 else names[::-1]
            for op, make in ops.items():
                for name in order:
                    wall, cpu = await _calls(make(name), calls)
                    if round_number:  # round 0 warms up
                        results["wall"][op][name].append(wall)
                        results["CPU"][op][name].append(cpu)
        print(
            f"## SQLite, durability={durability!r} ({rounds} rounds x {calls} calls;"
            " ratio = sqlite3 / durastate, > 1: durastate faster)"
        )
        for clock, by_op in results.items():
            print(f"\n{clock} time per call")
            print(f"{'op':<34} {'durastate':>12} {'sqlite3':>12} {'ratio (median, range)':>26}")
            for op, by_name in by_op.items():
                ratios = [b / a for a, b in zip(by_name["durastate"], by_name["sqlite3"], strict=True)]
                print(
                    f"{op:<34} {statistics.median(by_name['durastate']) * 1e6:>10.1f}us"
                    f" {statistics.median(by_name['sqlite3']) * 1e6:>10.1f}us"
                    f" {statistics.median(ratios):>10.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
                )
        plain.close()
        ours.close()
        ours.store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--durability", choices=["normal", "full"], default="normal")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.calls, args.durability))
