"""Per-call cost of pydantic-ai's ``write_record`` on SQLite, for profiling: CPU split into SQL and the rest.

``python bench/pydantic_ai_calls.py [--side durastate|sqlite3] [--calls N] [--split] [--callgrind-lib LIB]``
saves 100 turns to warm up, then N more (the bench's turn: a prompt and a ~200-character answer,
``bench/pydantic_ai_conversations.py``), against ``DurastateConversationStore`` or that bench's
plain-sqlite3 anchor, both at ``synchronous=NORMAL``. The records and entries are built before the
clock starts: only ``write_record`` is measured. Prints the CPU microseconds a call
(``time.process_time``).

``--split``: each statement's CPU (``sqlite3.Cursor.execute`` timed, by its first word) and the rest
("other": the library's Python, encoding, the event loop), a call. ``--callgrind-lib``: the
``cgtoggle.so`` of ``bench/langgraph_calls.py``'s docstring; under ``valgrind --tool=callgrind
--instr-atstart=no --collect-atstart=no`` the last dump then counts the N calls only
(``callgrind_annotate --inclusive=yes``: ``sqlite3_step`` is the SQL).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic_ai.conversation_store import ConversationRecord, ConversationStore

import durastate
from durastate.integrations.pydantic_ai import DurastateConversationStore
from pydantic_ai_conversations import SqliteConversationStore, Writer, _turn

SPLIT: Counter[str] = Counter()  # statement's first word -> CPU seconds


class TimedCursor(sqlite3.Cursor):
    """Adds each statement's CPU time to ``SPLIT``."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        started = time.process_time()
        try:
            return super().execute(sql, parameters)
        finally:
            SPLIT[sql.split(None, 1)[0]] += time.process_time() - started

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:
        started = time.process_time()
        try:
            return super().executemany(sql, seq_of_parameters)
        finally:
            SPLIT[sql.split(None, 1)[0] + " (many)"] += time.process_time() - started


class TimedConnection(sqlite3.Connection):
    """The anchor's connection: its ``execute`` shortcuts go through a ``TimedCursor``."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return TimedCursor(self).execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:
        return TimedCursor(self).executemany(sql, seq_of_parameters)


def _store(side: str, folder: Path, split: bool) -> ConversationStore:
    if side == "durastate":
        ours = DurastateConversationStore(store=durastate.open(f"sqlite://{folder}/durastate.db"))
        if split:  # the engine's per-thread cursor (this thread) becomes a timed one
            engine: Any = ours.store.engine
            engine._tls.state.cursor = TimedCursor(engine._thread_connection())
        return ours
    plain = SqliteConversationStore(folder / "plain.db", "NORMAL")
    if split:
        plain.db.close()
        plain.db = sqlite3.connect(folder / "plain.db", isolation_level=None, factory=TimedConnection)
        plain.db.execute("PRAGMA synchronous=NORMAL")
    return plain


async def main(side: str, calls: int, split: bool, callgrind_lib: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pydantic-ai-calls-") as folder:
        store = _store(side, Path(folder), split)
        writer = Writer(store, "c")
        for _ in range(100):
            await writer.save_turn()
        saves = []
        head, revision = writer.head, writer.revision
        for n in range(calls):
            entries = _turn(head, n)
            record = ConversationRecord(conversation_id="c", head_id=entries[-1].id)
            saves.append((record, entries, revision))
            head, revision = record.head_id, record.revision
        toggle = ctypes.CDLL(callgrind_lib) if callgrind_lib else None
        SPLIT.clear()
        if toggle is not None:
            toggle.cg_start()
        started = time.process_time()
        for record, entries, expected in saves:
            await store.write_record(record, new_entries=entries, expected_revision=expected)
        cpu = time.process_time() - started
        if toggle is not None:
            toggle.cg_stop()
        per_call = 1e6 / max(1, calls)
        print(f"{side} write_record: {cpu * per_call:.1f} us CPU a call ({calls} calls)")
        if split:
            for statement, seconds in SPLIT.items():
                print(f"  {statement:<16} {seconds * per_call:6.1f} us")
            sql = sum(SPLIT.values())
            print(f"  {'SQL':<16} {sql * per_call:6.1f} us\n  {'other':<16} {(cpu - sql) * per_call:6.1f} us")
        if isinstance(store, DurastateConversationStore):
            store.close()
            store.store.close()
        elif isinstance(store, SqliteConversationStore):
            store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=["durastate", "sqlite3"], default="durastate")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--callgrind-lib", help="bench/langgraph_calls.py's cgtoggle.so: callgrind counts the calls")
    args = parser.parse_args()
    asyncio.run(main(args.side, args.calls, args.split, args.callgrind_lib))
    sys.exit(0)
