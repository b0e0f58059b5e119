"""WAL pages each write of bench/openai_agents_session.py commits: DurastateSession against SQLiteSession.

    .venv/bin/python bench/openai_agents_wal_pages.py [--history 190,199,200,201,210] [--cycles 20]

A commit at ``synchronous=FULL`` fsyncs the frames it appended to the WAL,
so pages per commit is what each side's fsync has to carry. For each
history size, each side gets a fresh file holding that many items, then
runs ``--cycles`` times the session bench's write cycle (``add_items`` of 2
items, 2 pops, then a pop and an ``add_items`` of the popped item), and the
WAL's frames are read back from the file and grouped by commit (no
checkpoint runs meanwhile: the cycles stay below both sides' checkpoint
thresholds). Deterministic: no timing.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession

import durastate
from durastate.integrations.openai_agents import DurastateSession

LABELS = ("add_items(2)", "pop", "pop", "pop", "add_items(1)")


def _item(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 else "assistant", "content": f"message {n} " + "x" * 160}


def _commits(wal: Path) -> list[int]:
    """Frames of each commit in the WAL's current generation (https://www.sqlite.org/walformat.html)."""
    data = wal.read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    commits, frames, offset = [], 0, 32
    while offset + 24 + page_size <= len(data) and data[offset + 8 : offset + 16] == salts:
        frames += 1
        if struct.unpack(">I", data[offset + 4 : offset + 8])[0]:  # database size after a commit, else 0
            commits.append(frames)
            frames = 0
        offset += 24 + page_size
    return commits


async def _pages(side: str, folder: str, history: int, cycles: int) -> list[int]:
    path = Path(folder, f"{side}-{history}.db")
    store = None
    if side == "durastate":
        store = durastate.open(path, durability="full")
        session: Any = DurastateSession("bench", store=store)
    else:
        session = SQLiteSession("bench", path)
    await session.add_items([_item(n) for n in range(history)])
    before = len(_commits(Path(f"{path}-wal")))
    for _ in range(cycles):
        await session.add_items([_item(1), _item(2)])
        await session.pop_item()
        await session.pop_item()
        await session.add_items([await session.pop_item()])
    commits = _commits(Path(f"{path}-wal"))[before:]
    session.close()
    if store is not None:
        store.close()
    if len(commits) != len(LABELS) * cycles:
        raise SystemExit(f"{side}: {len(commits)} commits in the WAL, expected {len(LABELS) * cycles} (checkpointed?)")
    return commits


async def main(histories: list[int], cycles: int) -> None:
    print(f"{'history':>7} {'side':<14} {'all':>5}  " + "  ".join(f"{label:>12}" for label in LABELS))
    with tempfile.TemporaryDirectory() as folder:
        for history in histories:
            for side in ("durastate", "SQLiteSession"):
                commits = await _pages(side, folder, history, cycles)
                per_op = [sum(commits[i :: len(LABELS)]) / cycles for i in range(len(LABELS))]
                print(
                    f"{history:>7} {side:<14} {sum(commits) / len(commits):>5.2f}  "
                    + "  ".join(f"{pages:>12.2f}" for pages in per_op)
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="WAL pages per commit, DurastateSession vs SQLiteSession")
    parser.add_argument("--history", default="190,199,200,201,210", help="comma-separated history sizes")
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main([int(h) for h in args.history.split(",")], args.cycles))
