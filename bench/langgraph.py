"""Side-by-side benchmark of ``DurastateSaver`` against LangGraph's own savers.

Run it with ``make bench-langgraph`` (or ``.venv/bin/python bench/langgraph.py --help``).

Pairs, each contender on its own fresh database:

* ``sqlite``: ``DurastateSaver.from_url(<file>, durability=...)`` vs
  ``SqliteSaver(sqlite3.connect(<file>))`` (langgraph-checkpoint-sqlite:
  WAL), both files in one temporary folder, at the same durability
  (``--durability full``, the default: SqliteSaver as shipped, SQLite's
  ``synchronous=FULL``, and durastate's ``durability="full"``; ``normal``:
  SqliteSaver's connection set to ``synchronous=NORMAL``, durastate's
  default);
* ``sqlite-async``: the same durastate saver's ``a*`` methods vs
  ``AsyncSqliteSaver`` (aiosqlite);
* ``postgres`` / ``postgres-async``: ``DurastateSaver.from_url(<url>)`` vs
  ``PostgresSaver`` / ``AsyncPostgresSaver`` (langgraph-checkpoint-postgres,
  one autocommit connection as ``from_conn_string`` makes it), each in a
  fresh schema of the server (``--postgres-url``,
  ``DURASTATE_TEST_POSTGRES_URL`` or the local default).

The state is a chat: five messages (``--state dicts``, the default: plain
``{"role", "content", "id"}`` dicts, the issue's reference state;
``--state langchain``: ``HumanMessage``/``AIMessage`` objects, whose pydantic
construction then dominates every read on both sides) in a ``messages`` channel that gets a new version
at every checkpoint, plus a ``step`` counter, with the metadata LangGraph
writes (source, step, parents, run_id). Each thread is preloaded with
``--history`` checkpoints, each carrying two pending writes.

Ops: ``put`` (a new checkpoint, child of the previous one), ``put_writes``
(two writes of a new task against the latest checkpoint),
``get_tuple(latest)`` (no checkpoint id), ``list(limit 10)``, and ``graph
run``: an agent loop on a new thread (``agent_graph``: five nodes, a
reducer channel, 24 steps, an ``interrupt()`` and the resume, LangGraph's
default durability), the mix a real run asks of a saver (calls/s there are
runs/s, ``--calls``/10 runs per round).

Method: one untimed warm-up round, then ``--rounds`` rounds; in every round
each op runs ``--calls`` times per contender, back to back, the contender
order alternating from round to round. The table shows the median calls/s
of each side and the median of the per-round ratios (paired, so drift on
the shared machine cancels) with their range. ``--clock cpu`` times with
``time.process_time`` (CPU seconds of the whole process, worker threads
included) instead of the wall clock: steadier on a loaded machine; it leaves
out time spent waiting (for a server, a lock, the disk).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import operator
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

# Run as a script, this file's folder comes first on sys.path and its name
# would shadow the langgraph package it measures.
_here = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, create_checkpoint, empty_checkpoint  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from durastate.integrations.langgraph import DurastateSaver  # noqa: E402

# Issue 22 item 4: against every one of LangGraph's savers, each call and the graph run (the users' whole
# workload) at least as fast. (Issue 12's older targets asked 2x of SqliteSaver for put and list.)
OPS = ["put", "put_writes", "get_tuple(latest)", "list(limit 10)", "graph run"]
TARGETS = {pair: dict.fromkeys(OPS, 1.0) for pair in ("sqlite", "sqlite-async", "postgres", "postgres-async")}
GRAPH_TURNS = 10


# "dicts" (the reference state) or "langchain" (message objects,
# whose pydantic construction then dominates both sides' reads).
STATE = ["dicts"]


def messages(step: int) -> list[Any]:
    out: list[Any] = []
    for i in range(step, step + 5):
        if STATE[0] == "dicts":
            role = "assistant" if i % 2 else "user"
            out.append({"role": role, "content": f"Message {i}: what is the capital of France? Paris.", "id": f"m{i}"})
        elif i % 2:
            out.append(AIMessage(content=f"Answer {i}: the capital of France is Paris, as you asked.", id=f"m{i}"))
        else:
            out.append(HumanMessage(content=f"Question {i}: what is the capital of France, please?", id=f"m{i}"))
    return out


class Chat:
    """A thread whose checkpoints look like a chat graph's."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.thread_id = str(uuid.uuid4())
        self.run_id = str(uuid.uuid4())
        self.config: dict[str, Any] = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        self.checkpoint = empty_checkpoint()
        self.step = 0

    def next_put(self) -> tuple[Any, Any, Any, Any]:
        self.step += 1
        version = self.saver.get_next_version(self.checkpoint["channel_versions"].get("messages"), None)
        checkpoint = create_checkpoint(self.checkpoint, None, self.step)
        checkpoint["channel_values"] = {"messages": messages(self.step), "step": self.step}
        checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "messages": version, "step": version}
        metadata = {"source": "loop", "step": self.step, "parents": {}, "run_id": self.run_id}
        self.checkpoint = checkpoint
        return self.config, checkpoint, metadata, {"messages": version, "step": version}

    def writes(self) -> tuple[Any, Any, str]:
        return self.config, [("messages", messages(self.step)[:1]), ("step", self.step)], str(uuid.uuid4())

    def latest(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}

    def preload(self, history: int) -> None:
        for _ in range(history):
            self.config = self.saver.put(*self.next_put())
            self.saver.put_writes(*self.writes())

    async def apreload(self, history: int) -> None:
        for _ in range(history):
            self.config = await self.saver.aput(*self.next_put())
            await self.saver.aput_writes(*self.writes())


class Agent(TypedDict):
    messages: Annotated[list[Any], operator.add]
    turns: int
    approved: bool


def agent_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    """An agent loop, what a real run asks of its checkpointer.

    Five nodes: ``plan``, then ``agent`` and ``tool`` in turn for
    ``GRAPH_TURNS`` turns (each adding to the ``messages`` reducer channel
    and bumping the ``turns`` counter), then ``review``, which interrupts
    for a human's approval (``interrupt()``), then ``finish``. A run is the
    ``invoke`` that stops at the interrupt plus the ``invoke`` that resumes
    it with ``Command(resume=True)``: 2 * GRAPH_TURNS + 4 steps, each a
    checkpoint with its writes, and a ``get_tuple`` per invoke.
    """
    builder = StateGraph(Agent)

    def plan(state: Agent) -> dict[str, Any]:
        return {"messages": messages(0)[:1], "turns": 0, "approved": False}

    def agent(state: Agent) -> dict[str, Any]:
        return {"messages": messages(state["turns"])[1:2]}

    def tool(state: Agent) -> dict[str, Any]:
        return {"messages": messages(state["turns"])[:1], "turns": state["turns"] + 1}

    def review(state: Agent) -> dict[str, Any]:
        return {"approved": bool(interrupt({"question": "approve?", "turns": state["turns"]}))}

    def finish(state: Agent) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": f"done: {state['approved']}", "id": "done"}]}

    for name, node in (("plan", plan), ("agent", agent), ("tool", tool), ("review", review), ("finish", finish)):
        builder.add_node(name, node)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "agent")
    builder.add_conditional_edges("agent", lambda s: "tool" if s["turns"] < GRAPH_TURNS else "review")
    builder.add_edge("tool", "agent")
    builder.add_edge("review", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=saver)


def check_run(final: dict[str, Any]) -> None:
    assert final["approved"] is True and final["turns"] == GRAPH_TURNS, final
    assert len(final["messages"]) == 2 * GRAPH_TURNS + 3, len(final["messages"])


def sync_ops(saver: BaseCheckpointSaver[Any], history: int, calls: int) -> dict[str, Callable[[], None]]:
    # Readers read a thread nobody writes to any more; put and put_writes
    # grow threads of their own, so reads never meet the writes' pile.
    reader, writer, tasks = Chat(saver), Chat(saver), Chat(saver)
    reader.preload(history)
    tasks.preload(1)

    def put() -> None:
        for _ in range(calls):
            writer.config = saver.put(*writer.next_put())

    def put_writes() -> None:
        for _ in range(calls):
            saver.put_writes(*tasks.writes())

    def get_latest() -> None:
        config = reader.latest()
        for _ in range(calls):
            assert saver.get_tuple(config) is not None

    def list10() -> None:
        config = reader.latest()
        for _ in range(calls):
            assert len(list(saver.list(config, limit=10))) == 10

    graph = agent_graph(saver)

    def graph_run() -> None:
        for _ in range(max(1, calls // 10)):
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            assert "__interrupt__" in graph.invoke({"messages": []}, config)
            check_run(graph.invoke(Command(resume=True), config))

    return dict(zip(OPS, (put, put_writes, get_latest, list10, graph_run), strict=True))


async def async_ops(
    saver: BaseCheckpointSaver[Any], history: int, calls: int
) -> dict[str, Callable[[], Awaitable[None]]]:
    reader, writer, tasks = Chat(saver), Chat(saver), Chat(saver)
    await reader.apreload(history)
    await tasks.apreload(1)

    async def put() -> None:
        for _ in range(calls):
            writer.config = await saver.aput(*writer.next_put())

    async def put_writes() -> None:
        for _ in range(calls):
            await saver.aput_writes(*tasks.writes())

    async def get_latest() -> None:
        config = reader.latest()
        for _ in range(calls):
            assert await saver.aget_tuple(config) is not None

    async def list10() -> None:
        config = reader.latest()
        for _ in range(calls):
            assert len([t async for t in saver.alist(config, limit=10)]) == 10

    graph = agent_graph(saver)

    async def graph_run() -> None:
        for _ in range(max(1, calls // 10)):
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            assert "__interrupt__" in await graph.ainvoke({"messages": []}, config)
            check_run(await graph.ainvoke(Command(resume=True), config))

    return dict(zip(OPS, (put, put_writes, get_latest, list10, graph_run), strict=True))


# time.perf_counter (wall) or time.process_time (--clock cpu).
CLOCK = [time.perf_counter]


def timed(run: Callable[[], Any], loop: asyncio.AbstractEventLoop | None) -> float:
    gc.collect()
    gc.disable()
    try:
        clock = CLOCK[0]
        start = clock()
        if loop is not None:
            loop.run_until_complete(run())
        else:
            run()
        return max(clock() - start, 1e-9)
    finally:
        gc.enable()


def race(
    name: str,
    ours: dict[str, Callable[[], Any]],
    theirs: dict[str, Callable[[], Any]],
    args: argparse.Namespace,
    loop: asyncio.AbstractEventLoop | None,
) -> list[str]:
    per_op: dict[str, list[tuple[float, float]]] = {op: [] for op in args.ops}
    for round_no in range(args.rounds + 1):
        for op in args.ops:
            pair = [("durastate", ours[op]), ("langgraph", theirs[op])]
            if round_no % 2:
                pair.reverse()
            seconds = {who: timed(run, loop) for who, run in pair}
            if round_no:  # round 0 warms up
                n = max(1, args.calls // 10) if op == "graph run" else args.calls
                per_op[op].append((n / seconds["durastate"], n / seconds["langgraph"]))
    lines = []
    for op in args.ops:
        ratios = [d / t for d, t in per_op[op]]
        target = TARGETS[name].get(op)
        ratio = statistics.median(ratios)
        verdict = "(no target)" if target is None else f">= {target:g}x " + ("met" if ratio >= target else "MISSED")
        lines.append(
            f"| {name} | {op} | {statistics.median(d for d, _ in per_op[op]):,.0f} "
            f"| {statistics.median(t for _, t in per_op[op]):,.0f} | {ratio:.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f}) | {verdict} |"
        )
    return lines


def bench_sqlite(args: argparse.Namespace, folder: Path) -> list[str]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    ours = DurastateSaver.from_url(folder / "durastate.db", durability=args.durability)
    conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
    theirs = SqliteSaver(conn)
    theirs.setup()
    if args.durability == "normal":
        conn.execute("PRAGMA synchronous=NORMAL")
    try:
        return race("sqlite", *(sync_ops(s, args.history, args.calls) for s in (ours, theirs)), args, None)
    finally:
        ours.close()
        conn.close()


def bench_sqlite_async(args: argparse.Namespace, folder: Path) -> list[str]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    loop = asyncio.new_event_loop()
    ours = DurastateSaver.from_url(folder / "durastate-async.db", durability=args.durability)
    theirs_cm = AsyncSqliteSaver.from_conn_string(str(folder / "langgraph-async.db"))
    theirs = loop.run_until_complete(theirs_cm.__aenter__())
    loop.run_until_complete(theirs.setup())
    if args.durability == "normal":
        loop.run_until_complete(theirs.conn.execute("PRAGMA synchronous=NORMAL"))
    try:
        sides = [loop.run_until_complete(async_ops(s, args.history, args.calls)) for s in (ours, theirs)]
        return race("sqlite-async", *sides, args, loop)
    finally:
        loop.run_until_complete(theirs_cm.__aexit__(None, None, None))
        ours.close()
        loop.close()


def bench_postgres(args: argparse.Namespace, base_url: str) -> list[str]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from durastate.testing import postgres_server

    lines: list[str] = []
    for name in ("postgres", "postgres-async"):
        if name not in args.pairs:
            continue
        ours_url, ours_schema = postgres_server.create_schema(base_url)
        theirs_url, theirs_schema = postgres_server.create_schema(base_url)
        ours = DurastateSaver.from_url(ours_url)
        try:
            if name == "postgres":
                with PostgresSaver.from_conn_string(theirs_url) as theirs:
                    theirs.setup()
                    lines += race(name, *(sync_ops(s, args.history, args.calls) for s in (ours, theirs)), args, None)
            else:
                loop = asyncio.new_event_loop()
                cm = AsyncPostgresSaver.from_conn_string(theirs_url)
                atheirs = loop.run_until_complete(cm.__aenter__())
                try:
                    loop.run_until_complete(atheirs.setup())
                    sides = [loop.run_until_complete(async_ops(s, args.history, args.calls)) for s in (ours, atheirs)]
                    lines += race(name, *sides, args, loop)
                finally:
                    loop.run_until_complete(cm.__aexit__(None, None, None))
                    loop.close()
        finally:
            ours.close()
            postgres_server.drop_schema(base_url, ours_schema)
            postgres_server.drop_schema(base_url, theirs_schema)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200, help="calls per op, contender and round")
    parser.add_argument("--history", type=int, default=100, help="checkpoints preloaded per thread")
    parser.add_argument("--ops", nargs="*", default=OPS, choices=OPS)
    parser.add_argument("--state", choices=["dicts", "langchain"], default="dicts", help="what the messages are")
    parser.add_argument("--pairs", nargs="*", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument(
        "--durability",
        choices=["full", "normal"],
        default="full",
        help="SQLite, the same on both sides: full (SqliteSaver as shipped, synchronous=FULL; durastate "
        "durability='full') or normal (SqliteSaver's connection set to synchronous=NORMAL; durastate's default)",
    )
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: time.process_time")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("DURASTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    args = parser.parse_args()
    STATE[0] = args.state
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"# bench/langgraph.py {' '.join(sys.argv[1:])}")
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.platform()}")
    print(
        f"rounds={args.rounds} calls={args.calls} history={args.history} state={args.state} clock={args.clock} "
        f"sqlite durability={args.durability}; "
        "calls/s are medians over rounds\n"
    )
    print("| pair | op | durastate calls/s | langgraph calls/s | ratio (range) | target |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="durastate-bench-langgraph-") as tmp:
        folder = Path(tmp)
        if "sqlite" in args.pairs:
            print("\n".join(bench_sqlite(args, folder)), flush=True)
        if "sqlite-async" in args.pairs:
            print("\n".join(bench_sqlite_async(args, folder)), flush=True)
    if {"postgres", "postgres-async"} & set(args.pairs):
        print("\n".join(bench_postgres(args, args.postgres_url)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
