"""A pydantic-ai agent whose conversation survives its process being killed.

    python -m durastate.examples.pydantic_ai [--url URL]

Process 1 (a child of this one) runs turn 1 (the agent calls a tool, then answers) and saves the
conversation to ``DurastateConversationStore``; then it starts turn 2 and is
killed (SIGKILL) in the middle of it, after the tool ran and before the
save. Process 2 (this one, which never ran the agent before) loads the
conversation from the same store: turn 1 is all there, nothing of the killed turn is, so it runs
turn 2 again and the model is handed the whole of turn 1 as history. Then
two copies of the conversation race to save: the one loaded first is
refused with pydantic-ai's ``ConversationConflict``. No network and no API
key: the model is pydantic-ai's ``FunctionModel`` answering from a script
(a real model is one line: ``Agent("openai:gpt-5")``). ``--url`` takes any
durastate URL (a PostgreSQL one too); by default a fresh SQLite file in a
temporary folder. Needs ``pip install 'durastate[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from durastate.integrations.pydantic_ai import DurastateConversationStore

from ._url import store_url

NAME = "pydantic_ai"
DESCRIPTION = "A pydantic-ai agent whose conversation is killed mid-turn and resumed in a new process."
CONVERSATION = "chat-1"
PHASE = "--phase"


def _script(die_after_tool: bool) -> FunctionModel:
    """A model that calls ``weather`` for each new question, then answers; seen history lengths go to stdout."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if any(isinstance(part, ToolReturnPart) for part in last.parts):
            if die_after_tool:
                print("[process 1] killed in the middle of turn 2", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            turns = sum(
                1 for message in messages if message.kind == "response" and message.parts[0].part_kind == "text"
            )
            return ModelResponse(parts=[TextPart(f"Sunny in Oslo (answer {turns + 1}).")])
        print(f"[model] handed {len(messages)} messages", flush=True)
        return ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"})])

    return FunctionModel(answer)


def _agent(die_after_tool: bool) -> Agent[None, str]:
    agent = Agent(_script(die_after_tool))

    @agent.tool_plain
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"sunny, 21 C in {city}"

    return agent


async def _first(url: str) -> None:
    async with DurastateConversationStore(url=url) as store:
        existing = await store.load(CONVERSATION)
        if existing is not None:  # a rerun on the same URL starts the conversation over
            await store.delete(CONVERSATION)
        conversation = Conversation(conversation_id=CONVERSATION)
        result = await _agent(die_after_tool=False).run("Weather in Oslo?", conversation=conversation)
        stored = await store.save(result)
        print(f"[process 1] turn 1: {result.output!r}; {len(stored)} messages saved", flush=True)
        reloaded = await store.load(CONVERSATION)
        assert reloaded is not None
        await _agent(die_after_tool=True).run("And tomorrow?", conversation=reloaded)
        print("[process 1] never reached")


async def _second(url: str) -> None:
    async with DurastateConversationStore(url=url) as store:
        conversation = await store.load(CONVERSATION)
        assert conversation is not None
        print(f"[process 2] loaded {len(conversation.messages)} messages, usage {conversation.usage.requests} requests")
        result = await _agent(die_after_tool=False).run("And tomorrow?", conversation=conversation)
        await store.save(result)
        print(f"[process 2] turn 2: {result.output!r}")
        first = await store.load(CONVERSATION)
        second = await store.load(CONVERSATION)
        assert first is not None and second is not None
        second.messages.extend(first.messages[-2:])
        await store.save(second)
        first.messages.extend(first.messages[-2:])
        try:
            await store.save(first)
        except ConversationConflict as exc:
            print(f"[process 2] the copy loaded first is refused: {type(exc).__name__}")
        entries = await store.load_entries(CONVERSATION)
        assert entries is not None
        print(f"[process 2] {len(entries)} messages stored")


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    phase = None
    if PHASE in args:
        at = args.index(PHASE)
        phase = args[at + 1] if at + 1 < len(args) else None
        del args[at : at + 2]
    with store_url(args, NAME, DESCRIPTION) as url:
        if phase == "first":
            asyncio.run(_first(url))
            return
        print(f"store: {url}", flush=True)
        me = [sys.executable, "-m", f"durastate.examples.{NAME}", "--url", url, PHASE]
        killed = subprocess.run([*me, "first"], check=False)
        if killed.returncode != -signal.SIGKILL:
            sys.exit(f"process 1 ended with {killed.returncode}, not killed")
        asyncio.run(_second(url))  # this process never ran turn 1: all it has is the store
        print("OK: turn 1 survived the kill, turn 2 ran again in a new process, the stale save was refused")


if __name__ == "__main__":
    main()
