"""DurastateSession vs the OpenAI Agents SDK's own SQLiteSession, side by side.

    .venv/bin/python bench/openai_agents_session.py [--rounds 7] [--calls 200]

Each on a fresh SQLite file in one temporary folder, driven through the
SDK's async ``Session`` methods from one event loop (all run each call on a
worker thread, so the thread hop is in all). Contenders: ``durastate``
(default ``durability="normal"``: synchronous=NORMAL), ``durastate-full``
(``durability="full"``: an fsync per commit, which is what SQLiteSession's
connections get from SQLite's default synchronous=FULL) and the SDK's
``SQLiteSession``. Ops, on a session holding
``HISTORY`` items of about 200 bytes:

* ``add_items(2)``: one turn (a user message and an assistant message);
* ``get_items(20)``: the newest 20 items (what a ``limit`` setting reads);
* ``get_items()``: the whole history;
* ``pop_item+add``: pop the newest item and put it back.

Method: one untimed warm-up round, then ``--rounds`` rounds; in every round
each op runs ``--calls`` times per contender, back to back, in an order that
alternates from round to round. Reported: median time per call and, per
durastate contender, the median of the per-round speed ratios to
SQLiteSession (SQLiteSession's time over durastate's: > 1, durastate
faster, as every other bench here) with their range. The machine is shared and noisy: read ratios, not times.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession

import durastate
from durastate.integrations.openai_agents import DurastateSession

HISTORY = 200


def _item(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 else "assistant", "content": f"message {n} " + "x" * 160}


def _ops(session: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    turn = [_item(1), _item(2)]

    async def add() -> None:
        await session.add_items(turn)
        await session.pop_item()  # keep the history at its size (both contenders pay it)
        await session.pop_item()

    async def pop_and_add() -> None:
        item = await session.pop_item()
        await session.add_items([item])

    return {
        "add_items(2)+2 pops": add,
        "get_items(20)": lambda: session.get_items(20),
        "get_items()": lambda: session.get_items(),
        "pop_item+add": pop_and_add,
    }


async def _time(op: Callable[[], Awaitable[Any]], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await op()
    return (time.perf_counter() - start) / calls


async def main(rounds: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        normal = durastate.open(Path(folder, "normal.db"))
        full = durastate.open(Path(folder, "full.db"), durability="full")
        sessions = {
            "durastate": DurastateSession("bench", store=normal),
            "durastate-full": DurastateSession("bench", store=full),
            "SQLiteSession": SQLiteSession("bench", Path(folder, "sdk.db")),
        }
        history = [_item(n) for n in range(HISTORY)]
        for session in sessions.values():
            await session.add_items(history)
        contenders = {who: _ops(session) for who, session in sessions.items()}
        names = list(contenders["durastate"])
        times: dict[tuple[str, str], list[float]] = {}
        for round_no in range(rounds + 1):
            order = list(contenders)[round_no % 3 :] + list(contenders)[: round_no % 3]  # rotates
            for name in names:
                for who in order:
                    seconds = await _time(contenders[who][name], calls)
                    if round_no:  # round 0 warms up
                        times.setdefault((who, name), []).append(seconds)
        for session in sessions.values():
            session.close()
        normal.close()
        full.close()

    print(
        f"{'op':<20} {'durastate':>10} {'-full':>9} {'SQLiteSession':>14}"
        "   speed vs SQLiteSession (median, range; > 1 faster)"
    )
    for name in names:
        medians = [statistics.median(times[(who, name)]) * 1e6 for who in contenders]
        theirs = times[("SQLiteSession", name)]
        cells = []
        for who in ("durastate", "durastate-full"):
            ratios = [b / a for a, b in zip(times[(who, name)], theirs, strict=True)]
            cells.append(f"{who} {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        print(f"{name:<20} {medians[0]:>8.0f}us {medians[1]:>7.0f}us {medians[2]:>12.0f}us   " + ", ".join(cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="DurastateSession vs SQLiteSession")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.calls))
