"""DurastateSession vs the OpenAI Agents SDK's own SQLiteSession, side by side.

    .venv/bin/python bench/openai_agents_session.py [--rounds 7] [--calls 200] [--history 200]
        [--baseline-src DIR]

Each on a fresh SQLite file in one temporary folder, driven through the
SDK's async ``Session`` methods from one event loop (all run each call on a
worker thread, so the thread hop is in all). Contenders: ``durastate``
(default ``durability="normal"``: synchronous=NORMAL), ``durastate-full``
(``durability="full"``: an fsync per commit, which is what SQLiteSession's
connections get from SQLite's default synchronous=FULL) and the SDK's
``SQLiteSession``; with ``--baseline-src DIR`` (say, main's ``src``) also
``base-full``: that tree's ``DurastateSession`` at ``durability="full"``,
on a file of its own, so a change is raced against what it replaces in
one run. Ops, on a session holding ``--history`` items (200) of about 200
bytes:

* ``add_items(2)``: one turn (a user message and an assistant message);
* ``get_items(20)``: the newest 20 items (what a ``limit`` setting reads);
* ``get_items()``: the whole history;
* ``pop_item+add``: pop the newest item and put it back.

Method: one untimed warm-up round, then ``--rounds`` rounds; in every round
each op runs ``--calls`` times per contender, back to back, in an order that
alternates from round to round. Reported: median time per call and, per
durastate contender, the median of the per-round speed ratios to
SQLiteSession (SQLiteSession's time over durastate's: > 1, durastate
faster, as every other bench here) with their range, in wall time and in
CPU time (the whole process's: worker threads and the kernel's share of an
fsync count). The machine is shared and noisy: read ratios, not times.

The history's size decides how a write meets the b-trees: the bench's
writes keep it constant, so a size where an append splits a leaf page and
the next pop merges it again does so on every call (durastate's ``ds_kv``
at 200 items: 4.2 WAL pages a commit, 1.4 at 199 or 201; SQLiteSession
2.4 at all of these; bench/RESULTS-openai-agents.md, "oaifull").
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
from _baseline import baseline_module, load_baseline
from durastate.integrations.openai_agents import DurastateSession


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


async def _time(op: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await op()
    return (time.perf_counter() - start) / calls, (time.process_time() - cpu) / calls


def _ratios(ours: list[float], theirs: list[float]) -> str:
    ratios = [b / a for a, b in zip(ours, theirs, strict=True)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


async def main(rounds: int, calls: int, history_size: int, baseline_src: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        stores = [durastate.open(Path(folder, "normal.db")), durastate.open(Path(folder, "full.db"), durability="full")]
        sessions: dict[str, Any] = {
            "durastate": DurastateSession("bench", store=stores[0]),
            "durastate-full": DurastateSession("bench", store=stores[1]),
        }
        if baseline_src is not None:
            base = load_baseline(baseline_src)
            stores.append(base.open(Path(folder, "base.db"), durability="full"))
            sessions["base-full"] = baseline_module("integrations.openai_agents").DurastateSession(
                "bench", store=stores[-1]
            )
        sessions["SQLiteSession"] = SQLiteSession("bench", Path(folder, "sdk.db"))
        history = [_item(n) for n in range(history_size)]
        for session in sessions.values():
            await session.add_items(history)
        contenders = {who: _ops(session) for who, session in sessions.items()}
        names = list(contenders["durastate"])
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round_no in range(rounds + 1):
            turn = round_no % len(contenders)
            order = list(contenders)[turn:] + list(contenders)[:turn]  # rotates
            for name in names:
                for who in order:
                    took = await _time(contenders[who][name], calls)
                    if round_no:  # round 0 warms up
                        times.setdefault((who, name), []).append(took)
        for session in sessions.values():
            session.close()
        for store in stores:
            store.close()

    ours = [who for who in contenders if who != "SQLiteSession"]
    print(f"{'op':<20} " + " ".join(f"{who:>14}" for who in contenders) + "   (median wall / CPU per call)")
    for name in names:
        cells = []
        for who in contenders:
            wall, cpu = (statistics.median(t[i] for t in times[(who, name)]) * 1e6 for i in (0, 1))
            cells.append(f"{wall:>6.0f}/{cpu:<5.0f}us".rjust(14))
        print(f"{name:<20} " + " ".join(cells))
    for kind, i in (("wall", 0), ("CPU", 1)):
        print(f"\nspeed vs SQLiteSession, {kind} (median of per-round ratios, range; > 1 faster)")
        for name in names:
            theirs = [t[i] for t in times[("SQLiteSession", name)]]
            cells = [f"{who} {_ratios([t[i] for t in times[(who, name)]], theirs)}" for who in ours]
            print(f"  {name:<20} " + ", ".join(cells))
        if baseline_src is not None:
            print(f"durastate-full vs base-full, {kind} (> 1: this tree faster)")
            for name in names:
                base_times = [t[i] for t in times[("base-full", name)]]
                print(f"  {name:<20} {_ratios([t[i] for t in times[('durastate-full', name)]], base_times)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="DurastateSession vs SQLiteSession")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--history", type=int, default=200, help="items in the session while the ops run")
    parser.add_argument("--baseline-src", help="another durastate tree's src, raced as base-full")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.calls, args.history, args.baseline_src))
