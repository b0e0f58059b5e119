"""A Google ADK agent whose session survives its process.

    python -m durastate.examples.adk [--url URL]

Turn 1 runs here: the agent calls a tool and answers, and ADK's runner
stores every event and state change in ``DurastateSessionService``. Turn 2
runs in a NEW Python process on the same store: the runner loads the session
from durastate and the model is handed the whole of turn 1 as history. Then
two copies of the session object race to append: the one loaded first is
refused with ADK's ``StaleSessionError``. No network and no API key: the
model is a ``BaseLlm`` that answers from a script (a real model is one line:
``model="gemini-..."``). ``--url`` takes any durastate URL (a PostgreSQL one
too); by default a fresh SQLite file in a temporary folder. Needs
``pip install 'durastate[adk]'``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field

from durastate.integrations.adk import DurastateSessionService

from ._url import two_processes

APP, USER, SESSION = "weather-app", "user-42", "chat-1"


class ScriptedModel(BaseLlm):
    """Answers from a script, in order; remembers how many contents each request carried."""

    model: str = "scripted"
    script: list[LlmResponse] = Field(default_factory=list)
    seen: list[int] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(len(llm_request.contents))
        yield self.script.pop(0)


def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny, 21 C in {city}"


def _say(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def _runner(service: DurastateSessionService, model: ScriptedModel) -> Runner:
    agent = LlmAgent(name="assistant", model=model, tools=[weather], instruction="Answer briefly.", output_key="answer")
    return Runner(app_name=APP, agent=agent, session_service=service)


async def _turn(runner: Runner, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            answer = event.content.parts[0].text
    return answer


async def first_turn(url: str) -> None:
    call = types.Part(function_call=types.FunctionCall(name="weather", args={"city": "Oslo"}))
    model = ScriptedModel(
        script=[LlmResponse(content=types.Content(role="model", parts=[call])), _say("Sunny in Oslo.")]
    )
    async with DurastateSessionService(url=url) as service:
        await service.delete_session(app_name=APP, user_id=USER, session_id=SESSION)  # a rerun starts over
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={"user:name": "Ann"})
        answer = await _turn(_runner(service, model), "What's the weather in Oslo?")
        print(f"[process 1] user: What's the weather in Oslo?\n[process 1] agent: {answer}")
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        print(f"[process 1] {len(session.events)} events stored, state {session.state}")


async def second_turn(url: str) -> None:
    model = ScriptedModel(script=[_say("You asked about the weather in Oslo, Ann.")])
    async with DurastateSessionService(url=url) as service:
        answer = await _turn(_runner(service, model), "What did I just ask you?")
        print(f"[process 2] the model was given {model.seen[0]} contents: turn 1 from the store, then the question")
        print(f"[process 2] user: What did I just ask you?\n[process 2] agent: {answer}")
        first = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        second = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert first is not None and second is not None
        await service.append_event(second, Event(author="user", invocation_id="note"))
        try:
            await service.append_event(first, Event(author="user", invocation_id="late"))
        except StaleSessionError:
            print("[process 2] an append through a session object loaded before the last append: StaleSessionError")
        final = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert final is not None
        print(f"[process 2] {len(final.events)} events stored, answer in state: {final.state['answer']!r}")


def main(argv: list[str] | None = None) -> None:
    warnings.filterwarnings("ignore", category=UserWarning)  # ADK's experimental-feature notices
    logging.getLogger("google_adk").setLevel(logging.ERROR)  # "missing token usage": the model is scripted
    two_processes(argv, "adk", "A Google ADK agent whose session survives its process.", first_turn, second_turn)


if __name__ == "__main__":
    main()
