"""Agent Framework on durastate vs the framework's own file backends, side by side.

    .venv/bin/python bench/agent_framework_storage.py [--rounds 7] [--calls 200] [--postgres-url URL]
        [--durability normal|full] [--pg-synchronous-commit on|off] [--baseline-src DIR]

(Not ``bench/agent_framework.py``: a script named after the package shadows
it when run, and ruff's isort would count the package as first-party.)

Contenders, in one temporary folder, driven through the framework's async
methods from one event loop:

* ``durastate``: ``DurastateCheckpointStorage`` / ``DurastateHistoryProvider``
  on a SQLite file, ``--durability normal`` by default (WAL, no fsync per
  commit: the file backends do not fsync either); ``full`` fsyncs each commit;
* ``file``: the framework's ``FileCheckpointStorage`` (a JSON file per
  checkpoint, written to a temporary file and renamed, no fsync) and
  ``FileHistoryProvider`` (a JSON Lines file per session, no fsync);
* with ``--baseline-src DIR`` (say, main's ``src`` in a ``git worktree``),
  ``durastate-base`` (and ``durastate-pg-base``): the same classes from that
  tree (``_baseline``), on a store of their own: a change against what it
  replaces, in one run;
* with ``--postgres-url``, ``durastate-pg``: the same classes on that server
  (a fresh schema). The framework ships no SQL backend (its Azure PostgreSQL
  sample pickles checkpoints), so its file backends are the peer there too.
  ``--pg-synchronous-commit off`` sets that session option: a commit returns
  before its WAL is flushed, the durability of a file written without fsync
  (``on``, the server's default, waits for the flush).

The checkpoint is a real one: the latest of a two-agent workflow
(writer -> reviewer with scripted clients), about 4 KB of JSON holding
``Message`` objects and the agents' sessions. Ops: ``save`` (a new id each
call), ``load`` (one of 50 stored), ``get_latest`` (of a workflow with 50
checkpoints), history ``save_messages`` (a user and an assistant message
appended to a session) and ``get_messages`` (of a 40-message session).

Method: one untimed warm-up round, then ``--rounds`` rounds; in each round
every op runs ``--calls`` times per contender, back to back, in an order that
alternates from round to round. Reported, in wall time and in the process's
CPU time (all its threads: the file backends read and write on
``asyncio.to_thread`` workers): median time per call, and per peer the median
of the per-round ratios peer / durastate (> 1: durastate faster) with their
range. The machine is shared and noisy: read ratios.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import tempfile
import uuid
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    FileCheckpointStorage,
    FileHistoryProvider,
    InMemoryCheckpointStorage,
    Message,
    WorkflowBuilder,
    WorkflowCheckpoint,
)

import durastate
from _baseline import baseline_module, load_baseline
from _race import arace, arguments, postgres_schema
from durastate.integrations.agent_framework import DurastateCheckpointStorage, DurastateHistoryProvider

STORED = 50


class _Scripted(BaseChatClient):  # type: ignore[misc]
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    async def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        return ChatResponse(messages=[Message(role="assistant", contents=[f"{self.name}: {messages[-1].text}" * 4])])


async def _real_checkpoint() -> WorkflowCheckpoint:
    storage = InMemoryCheckpointStorage()
    writer, reviewer = Agent(client=_Scripted("writer"), name="w"), Agent(client=_Scripted("reviewer"), name="r")
    workflow = WorkflowBuilder(start_executor=writer, checkpoint_storage=storage, name="bench").add_edge(
        writer, reviewer
    )
    await workflow.build().run("a topic to write about, with a few words more")
    latest = await storage.get_latest(workflow_name="bench")
    assert latest is not None
    return latest


async def _ops(checkpoints: Any, history: Any, template: WorkflowCheckpoint) -> dict[str, Callable[[], Awaitable[Any]]]:
    def fresh(workflow: str) -> WorkflowCheckpoint:
        return dataclasses.replace(template, workflow_name=workflow, checkpoint_id=str(uuid.uuid4()))

    stored = [await checkpoints.save(fresh("stored")) for _ in range(STORED)]
    cycle = itertools.cycle(stored)
    session = f"s-{uuid.uuid4()}"
    for n in range(20):
        await history.save_messages(
            session, [Message(role="user", contents=[f"q{n}"]), Message(role="assistant", contents=[f"a{n}"])]
        )
    counter = itertools.count()

    async def save() -> None:
        await checkpoints.save(fresh("saved"))

    async def load() -> None:
        await checkpoints.load(next(cycle))

    async def latest() -> None:
        await checkpoints.get_latest(workflow_name="stored")

    async def append() -> None:
        n = next(counter)
        turn = [Message(role="user", contents=[f"question {n}"]), Message(role="assistant", contents=[f"answer {n}"])]
        await history.save_messages("appended", turn)

    async def read() -> None:
        await history.get_messages(session)

    return {
        "checkpoint save": save,
        "checkpoint load": load,
        "checkpoint get_latest (50)": latest,
        "history save_messages (2)": append,
        "history get_messages (40)": read,
    }


async def race(
    title: str, contenders: dict[str, tuple[Any, Any]], template: WorkflowCheckpoint, rounds: int, calls: int
) -> None:
    await arace(title, {label: await _ops(c, h, template) for label, (c, h) in contenders.items()}, rounds, calls)


def _baseline_classes(src: str | None) -> tuple[Any, Any, Any] | None:
    """(``open``, checkpoint storage class, history class) of the baseline tree, or None without one."""
    if src is None:
        return None
    package = load_baseline(src)
    classes = baseline_module("integrations.agent_framework")
    return package.open, classes.DurastateCheckpointStorage, classes.DurastateHistoryProvider


async def main(
    rounds: int,
    calls: int,
    postgres_url: str | None,
    durability: str,
    synchronous_commit: str = "on",
    baseline_src: str | None = None,
) -> None:
    warnings.filterwarnings("ignore")
    logging.getLogger("agent_framework").setLevel(logging.ERROR)
    template = await _real_checkpoint()
    with tempfile.TemporaryDirectory() as folder:
        store = durastate.open(Path(folder, "durastate.db"), durability=durability)
        file_contenders = (
            FileCheckpointStorage(Path(folder, "checkpoints")),
            FileHistoryProvider(Path(folder, "history")),
        )
        base = _baseline_classes(baseline_src)
        stores = [store]
        contenders = {
            "durastate": (DurastateCheckpointStorage(store=store), DurastateHistoryProvider(store=store)),
            "file": file_contenders,
        }
        if base is not None:
            stores.append(base[0](Path(folder, "base.db"), durability=durability))
            contenders["durastate-base"] = (base[1](store=stores[-1]), base[2](store=stores[-1]))
        try:
            await race(
                f"SQLite file (durability={durability!r}) vs the framework's files", contenders, template, rounds, calls
            )
        finally:
            await _close(contenders, stores)
        if postgres_url is None:
            return
        with (
            postgres_schema(postgres_url, synchronous_commit=synchronous_commit) as (url, _),
            postgres_schema(postgres_url, synchronous_commit=synchronous_commit) as (base_url, _),
        ):
            stores = [durastate.open(url)]
            contenders = {
                "durastate-pg": (
                    DurastateCheckpointStorage(store=stores[0]),
                    DurastateHistoryProvider(store=stores[0]),
                ),
                "file": file_contenders,
            }
            if base is not None:
                stores.append(base[0](base_url))
                contenders["durastate-pg-base"] = (base[1](store=stores[-1]), base[2](store=stores[-1]))
            try:
                await race(
                    f"PostgreSQL (synchronous_commit={synchronous_commit}) vs the framework's files",
                    contenders,
                    template,
                    rounds,
                    calls,
                )
            finally:
                await _close(contenders, stores)


async def _close(contenders: dict[str, tuple[Any, Any]], stores: list[Any]) -> None:
    for label, storages in contenders.items():
        if label != "file":
            for storage in storages:
                await storage.aclose()
    for opened in stores:
        opened.close()


if __name__ == "__main__":
    args = arguments(__doc__, synchronous_commit=True, baseline=True)
    asyncio.run(
        main(args.rounds, args.calls, args.postgres_url, args.durability, args.pg_synchronous_commit, args.baseline_src)
    )
