"""Agent Framework on durastate across processes: concurrent writers, and a workflow killed and resumed.

* Four processes save checkpoints of one workflow at once, and re-save a
  shared set of ids under two workflows: every checkpoint is kept, each id
  is listed under exactly one workflow (the one its last committed save
  named) and loads whole. Meanwhile they append to ONE conversation history
  through ``DurastateHistoryProvider``: every message is stored once, each
  turn in one piece, each writer's turns in the order it wrote them.
* A two-agent workflow (writer -> reviewer, scripted chat clients, no
  network) checkpointing to durastate is killed with SIGKILL while the
  reviewer runs; a new process resumes it from the latest checkpoint alone:
  the writer is not called again and the reviewer is handed the writer's
  output.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from agent_framework import Agent, BaseChatClient, ChatResponse, Message, WorkflowBuilder, WorkflowCheckpoint

import durastate
from durastate.integrations.agent_framework import DurastateCheckpointStorage, DurastateHistoryProvider

from .._processes import in_processes, killed_in_a_process

pytestmark = [pytest.mark.multiprocess, pytest.mark.filterwarnings("ignore::UserWarning")]

WRITERS = 4
PER_WRITER = 8
SHARED_IDS = [f"shared-{n}" for n in range(6)]


# Each worker opens its store before its event loop runs: opening migrates, and migrating waits for
# the write lock, which durastate refuses to do on an event loop's thread (four processes open at once).


def _writer(url: str, writer: int) -> list[str]:
    """Save checkpoints (new ids, and shared ids under alternating workflows) and append history turns."""
    storage, history = DurastateCheckpointStorage(url), DurastateHistoryProvider(url)

    async def main() -> list[str]:
        async with storage, history:
            saved = []
            for n in range(PER_WRITER):
                checkpoint = WorkflowCheckpoint(
                    workflow_name="busy", graph_signature_hash="h", state={"writer": writer, "n": n}
                )
                saved.append(await storage.save(checkpoint))
                shared = WorkflowCheckpoint(
                    workflow_name=f"flip-{(writer + n) % 2}",
                    graph_signature_hash="h",
                    checkpoint_id=SHARED_IDS[n % len(SHARED_IDS)],
                    state={"writer": writer, "n": n},
                )
                await storage.save(shared)
                turn = [
                    Message(role="user", contents=[f"q{writer}-{n}"], message_id=f"q{writer}-{n}"),
                    Message(role="assistant", contents=[f"a{writer}-{n}"], message_id=f"a{writer}-{n}"),
                ]
                await history.save_messages("shared", turn)
            return saved

    return asyncio.run(main())


def test_checkpoints_and_history_from_several_processes_are_all_kept(shared_url: str) -> None:
    saved = in_processes(*[(_writer, (shared_url, w)) for w in range(WRITERS)])

    async def check() -> None:
        async with DurastateCheckpointStorage(shared_url) as storage, DurastateHistoryProvider(shared_url) as history:
            ids = await storage.list_checkpoint_ids(workflow_name="busy")
            assert sorted(ids) == sorted(i for batch in saved for i in batch)
            for checkpoint in await storage.list_checkpoints(workflow_name="busy"):
                assert checkpoint.checkpoint_id in saved[checkpoint.state["writer"]]
            listed = [
                *await storage.list_checkpoints(workflow_name="flip-0"),
                *await storage.list_checkpoints(workflow_name="flip-1"),
            ]
            assert sorted(c.checkpoint_id for c in listed) == sorted(SHARED_IDS)  # each under one workflow only
            for checkpoint in listed:
                assert await storage.load(checkpoint.checkpoint_id) == checkpoint
                assert checkpoint.workflow_name == f"flip-{sum(checkpoint.state.values()) % 2}"
            messages = [m.message_id for m in await history.get_messages("shared")]
        assert len(messages) == WRITERS * PER_WRITER * 2
        assert len(set(messages)) == len(messages)
        for i in range(0, len(messages), 2):  # a turn is never split by another writer's
            assert messages[i] is not None and messages[i + 1] == "a" + messages[i][1:]
        for writer in range(WRITERS):
            mine = [i for i in messages if i is not None and i.startswith(f"q{writer}-")]
            assert mine == [f"q{writer}-{n}" for n in range(PER_WRITER)]

    asyncio.run(check())


class ScriptedClient(BaseChatClient):  # type: ignore[misc]
    """Answers ``<name>(<last message>)``; with ``crash=True`` kills its own process instead."""

    def __init__(self, name: str, crash: bool = False) -> None:
        super().__init__()
        self.name = name
        self.crash = crash
        self.seen: list[list[str]] = []

    async def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        self.seen.append([m.text for m in messages])
        if self.crash:
            os.kill(os.getpid(), signal.SIGKILL)
        return ChatResponse(messages=[Message(role="assistant", contents=[f"{self.name}({messages[-1].text})"])])


def _workflow(url: str, crash: bool) -> tuple[Any, DurastateCheckpointStorage, ScriptedClient, ScriptedClient]:
    storage = DurastateCheckpointStorage(url)
    writer_client, reviewer_client = ScriptedClient("write"), ScriptedClient("review", crash=crash)
    writer = Agent(client=writer_client, name="writer")
    reviewer = Agent(client=reviewer_client, name="reviewer")
    workflow = (
        WorkflowBuilder(start_executor=writer, checkpoint_storage=storage, name="pair")
        .add_edge(writer, reviewer)
        .build()
    )
    return workflow, storage, writer_client, reviewer_client


def _run_until_killed(url: str) -> None:
    workflow, _storage, _writer, _reviewer = _workflow(url, crash=True)
    asyncio.run(workflow.run("topic"))


def _resume(url: str) -> dict[str, Any]:
    workflow, storage, writer, reviewer = _workflow(url, crash=False)

    async def main() -> dict[str, Any]:
        async with storage:
            latest = await storage.get_latest(workflow_name="pair")
            assert latest is not None
            result = await workflow.run(checkpoint_id=latest.checkpoint_id)
            outputs = [o.text for o in result.get_outputs()]
            return {"outputs": outputs, "writer_calls": len(writer.seen), "reviewer_saw": reviewer.seen}

    return asyncio.run(main())


def test_a_killed_workflow_resumes_in_a_new_process(shared_url: str) -> None:
    killed_in_a_process(_run_until_killed, shared_url)

    with durastate.open(shared_url) as store:  # the killed run left its checkpoints, whole
        assert list(store.kv.scan(b"agent-framework", b"wpair"))

    [resumed] = in_processes((_resume, (shared_url,)))
    assert resumed["writer_calls"] == 0
    assert resumed["reviewer_saw"] == [["topic", "write(topic)"]]
    assert resumed["outputs"][-1] == "review(write(topic))"
