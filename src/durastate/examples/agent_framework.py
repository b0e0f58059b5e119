"""A Microsoft Agent Framework workflow and agent whose state survives the process.

    python -m durastate.examples.agent_framework [--url URL]

Process 1 runs a two-agent workflow (a writer, then a reviewer) that
checkpoints every superstep to ``DurastateCheckpointStorage`` (JSON, never
pickled), and a chat agent whose conversation goes to
``DurastateHistoryProvider``. Process 2, a NEW Python process on the same
store, resumes the workflow from the checkpoint taken after the writer (the
writer is not called again, the reviewer gets the writer's draft from the
store) and continues the chat (the model is handed turn 1 from the store).
No network and no API key: the chat clients answer from a script (a real one
is ``OpenAIChatClient()`` or any other). ``--url`` takes any durastate URL (a
PostgreSQL one too); by default a fresh SQLite file in a temporary folder.
Needs ``pip install 'durastate[agent-framework]'``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from agent_framework import Agent, BaseChatClient, ChatResponse, Message, Workflow, WorkflowBuilder

from durastate.integrations.agent_framework import DurastateCheckpointStorage, DurastateHistoryProvider

from ._url import two_processes

WORKFLOW = "draft-and-review"
SESSION = "chat-1"


class ScriptedClient(BaseChatClient):
    """A chat client that answers ``<name>: <last message>`` and counts its calls (no network)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.given: list[int] = []  # how many messages each call was handed

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> ChatResponse:
        self.given.append(len(messages))
        return ChatResponse(messages=[Message(role="assistant", contents=[f"{self.name}: {messages[-1].text}"])])


def _workflow(storage: DurastateCheckpointStorage, writer: ScriptedClient, reviewer: ScriptedClient) -> Workflow:
    writing = Agent(client=writer, name="writer")
    reviewing = Agent(client=reviewer, name="reviewer")
    builder = WorkflowBuilder(start_executor=writing, checkpoint_storage=storage, name=WORKFLOW)
    return builder.add_edge(writing, reviewing).build()


async def first_process(url: str) -> None:
    async with DurastateCheckpointStorage(url) as storage:
        for old in await storage.list_checkpoint_ids(workflow_name=WORKFLOW):  # a rerun starts over
            await storage.delete(old)
        writer, reviewer = ScriptedClient("draft"), ScriptedClient("approved")
        result = await _workflow(storage, writer, reviewer).run("durable state")
        print(f"[process 1] workflow output: {result.get_outputs()[-1].text!r}")
        ids = await storage.list_checkpoint_ids(workflow_name=WORKFLOW)
        print(f"[process 1] {len(ids)} checkpoints stored")

        history = DurastateHistoryProvider(store=storage.store)
        chat = Agent(client=ScriptedClient("bot"), name="chat", context_providers=[history])
        await history.clear(SESSION)  # a rerun starts the conversation over
        answer = await chat.run("My name is Ann.", session=chat.create_session(session_id=SESSION))
        print(f"[process 1] chat: {answer.text!r}")
        await history.aclose()


async def second_process(url: str) -> None:
    async with DurastateCheckpointStorage(url) as storage:
        after_writer = [c for c in await storage.list_checkpoints(workflow_name=WORKFLOW) if c.iteration_count == 1]
        writer, reviewer = ScriptedClient("draft"), ScriptedClient("rejected")
        result = await _workflow(storage, writer, reviewer).run(checkpoint_id=after_writer[0].checkpoint_id)
        print(f"[process 2] resumed after the writer: writer called {len(writer.given)} times")
        print(f"[process 2] workflow output: {result.get_outputs()[-1].text!r}")

        async with DurastateHistoryProvider(store=storage.store) as history:
            client = ScriptedClient("bot")
            chat = Agent(client=client, name="chat", context_providers=[history])
            await chat.run("What is my name?", session=chat.create_session(session_id=SESSION))
            stored = await history.get_messages(SESSION)
        print(f"[process 2] chat model was handed {client.given[0]} messages; {len(stored)} stored")
        assert len(writer.given) == 0 and client.given[0] == 3 and len(stored) == 4
        print("OK: the workflow resumed from a durastate checkpoint and the chat from its stored history")


def main(argv: list[str] | None = None) -> None:
    warnings.filterwarnings("ignore", category=UserWarning)
    logging.getLogger("agent_framework").setLevel(logging.ERROR)  # "does not support function invoking"
    two_processes(
        argv,
        "agent_framework",
        "A Microsoft Agent Framework workflow and agent whose state survives the process.",
        first_process,
        second_process,
    )


if __name__ == "__main__":
    main()
