"""A Strands agent whose conversation survives its process.

    python -m durastate.examples.strands [--url URL]

Turn 1 runs here: a Strands ``Agent`` with ``DurastateSessionManager``
answers, and the session manager stores the session, the agent and every
message in durastate. Turn 2 runs in a NEW Python process on the same store:
the agent is restored from durastate (its messages and state) and the model
is handed turn 1 as history. ``DurastateStorage``, Strands' bytes-under-keys
storage, keeps a note next to it. No network and no API key: the model is a
``Model`` that answers from a script (a real one is ``BedrockModel()`` or any
other). ``--url`` takes any durastate URL (a PostgreSQL one too); by default a
fresh SQLite file in a temporary folder. Needs ``pip install 'durastate[strands]'``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from strands import Agent
from strands.models.model import Model

import durastate
from durastate.integrations.strands import DurastateSessionManager, DurastateSessionRepository, DurastateStorage

from ._url import two_processes

SESSION, AGENT = "chat-1", "helper"


class ScriptedModel(Model):
    """A model that answers from a script and records how many messages each call was handed (no network)."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.given: list[int] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model answers in text only")

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        self.given.append(len(messages))
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": self.answers.pop(0)}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


async def first_turn(url: str) -> None:
    with durastate.open(url) as store:
        repository = DurastateSessionRepository(store=store)
        if repository.read_session(SESSION) is not None:
            repository.delete_session(SESSION)  # a rerun starts the conversation over
        manager = DurastateSessionManager(SESSION, store=store)
        agent = Agent(model=ScriptedModel(["Nice to meet you, Ann."]), session_manager=manager, agent_id=AGENT,
                      callback_handler=None)  # fmt: skip
        agent.state.set("name", "Ann")
        answer = await agent.invoke_async("Hi, I am Ann.")
        print(f"[process 1] user: Hi, I am Ann.\n[process 1] agent: {str(answer).strip()}")
        async with DurastateStorage(store=store) as storage:
            await storage.write("notes/ann.md", b"Ann prefers short answers.")
        print(f"[process 1] {len(manager.repository.list_messages(SESSION, AGENT))} messages stored")


async def second_turn(url: str) -> None:
    with durastate.open(url) as store:
        manager = DurastateSessionManager(SESSION, store=store)
        model = ScriptedModel(["You are Ann."])
        agent = Agent(model=model, session_manager=manager, agent_id=AGENT, callback_handler=None)
        print(f"[process 2] restored {len(agent.messages)} messages, state name={agent.state.get('name')!r}")
        answer = await agent.invoke_async("Who am I?")
        print(f"[process 2] the model was handed {model.given[0]} messages: turn 1 from the store, then the question")
        print(f"[process 2] agent: {str(answer).strip()}")
        async with DurastateStorage(store=store) as storage:
            found = [result.key for result in await storage.search("short answers")]
        print(f"[process 2] storage search for 'short answers': {found}")
        stored = len(manager.repository.list_messages(SESSION, AGENT))
        assert model.given[0] == 3 and stored == 4 and found == ["notes/ann.md"]
        print("OK: the agent resumed from durastate in a new process")


def main(argv: list[str] | None = None) -> None:
    two_processes(argv, "strands", "A Strands agent whose conversation survives its process.", first_turn, second_turn)


if __name__ == "__main__":
    main()
