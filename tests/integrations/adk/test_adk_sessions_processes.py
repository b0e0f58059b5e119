"""DurastateSessionService across processes: four writers on one session, and a run killed and resumed.

* Four processes append to ONE ADK session on one store. In lockstep
  rounds (all four load the session, then all four append through what they
  loaded) exactly one append per round is stored and the three others get
  ``StaleSessionError`` (the revision compare-and-swap decides, not a
  timestamp read before the write). Then all four append freely, reloading
  after each refusal: every accepted event is stored once, the log has one
  order that every reader sees, each writer's events in the order it wrote
  them, and the session state holds each writer's last value.
* An ADK agent (``LlmAgent`` in a resumable ``App``) with a scripted model
  (a ``BaseLlm`` subclass returning canned responses; no network) runs in
  a process that is killed with SIGKILL while its tool runs; a new process
  resumes the invocation from durastate alone, and its model is handed the
  whole history.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncGenerator
from multiprocessing.synchronize import Barrier
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field

from durastate.integrations.adk import DurastateSessionService

from .._processes import SPAWN, WORKER_TIMEOUT, in_processes, killed_in_a_process

pytestmark = [pytest.mark.multiprocess, pytest.mark.filterwarnings("ignore::UserWarning")]

WRITERS = 4
ROUNDS = 4
FREE = 8
APP, USER, SESSION = "app", "user", "shared"


def _event(writer: int, label: str, n: int) -> Event:
    return Event(
        invocation_id=f"w{writer}", author=f"writer-{writer}",
        content=types.Content(role="user", parts=[types.Part(text=f"{label}-{writer}-{n}")]),
        actions=EventActions(state_delta={f"last-{writer}": n, "user:writer": writer}),
    )  # fmt: skip


def _writer(url: str, writer: int, barrier: Barrier) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        won: list[int] = []
        stale = 0
        service = DurastateSessionService(url=url)
        try:
            for n in range(ROUNDS):  # lockstep: everyone loads, then everyone appends
                barrier.wait(WORKER_TIMEOUT)
                session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
                assert session is not None
                barrier.wait(WORKER_TIMEOUT)
                try:
                    await service.append_event(session, _event(writer, "round", n))
                    won.append(n)
                except StaleSessionError:
                    stale += 1
            refused = 0
            session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            for n in range(FREE):  # free for all: reload after each refusal
                while True:
                    assert session is not None
                    try:
                        await service.append_event(session, _event(writer, "free", n))
                        break
                    except StaleSessionError:
                        refused += 1
                        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        finally:
            await service.aclose()
        return {"won": won, "stale": stale, "refused": refused}

    return asyncio.run(main())


def test_four_processes_append_to_one_session(shared_url: str) -> None:
    async def setup() -> None:
        async with DurastateSessionService(url=shared_url) as service:
            await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={"start": 1})

    asyncio.run(setup())
    barrier = SPAWN.Barrier(WRITERS)
    results = in_processes(*((_writer, (shared_url, w, barrier)) for w in range(WRITERS)))

    # Each lockstep round: one winner, three stale writers refused.
    winners = sorted(n for result in results for n in result["won"])
    assert winners == list(range(ROUNDS))
    assert sum(result["stale"] for result in results) == ROUNDS * (WRITERS - 1)

    async def read() -> tuple[Any, Any]:
        async with DurastateSessionService(url=shared_url) as service:
            first = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            again = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            return first, again

    session, again = asyncio.run(read())
    texts = [e.content.parts[0].text for e in session.events]
    assert texts == [e.content.parts[0].text for e in again.events]  # one order
    assert len(texts) == len(set(texts)) == ROUNDS + WRITERS * FREE  # every accepted event, once
    assert [t.split("-")[1] for t in texts if t.startswith("round-")] == [
        str(next(w for w, r in enumerate(results) if n in r["won"])) for n in range(ROUNDS)
    ]
    for writer in range(WRITERS):  # each writer's own events in its order
        assert [t for t in texts if t.startswith(f"free-{writer}-")] == [f"free-{writer}-{n}" for n in range(FREE)]
        assert session.state[f"last-{writer}"] == FREE - 1
    assert session.state["user:writer"] == session.events[-1].actions.state_delta["user:writer"]
    assert session.state["start"] == 1
    assert session.last_update_time == session.events[-1].timestamp


# -- an agent run killed and resumed ----------------------------------------------


class ScriptedModel(BaseLlm):
    """A model that answers from a script and records what it was given (no network)."""

    model: str = "scripted"
    script: list[LlmResponse] = Field(default_factory=list)
    seen: list[list[dict[str, Any]]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append([content.model_dump(mode="json", exclude_none=True) for content in llm_request.contents])
        yield self.script.pop(0)


def weather(city: str) -> str:
    """Today's weather in a city."""
    if os.environ.get("ADK_TEST_KILL_IN_TOOL") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies mid-invocation
    return f"sunny in {city}"


def _runner(url: str, script: list[LlmResponse]) -> tuple[Runner, ScriptedModel, DurastateSessionService]:
    model = ScriptedModel(script=script)
    agent = LlmAgent(name="assistant", model=model, tools=[weather], instruction="Be brief.", output_key="answer")
    app = App(name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
    service = DurastateSessionService(url=url)
    return Runner(app=app, session_service=service), model, service


def _first_turn(url: str) -> None:
    """Runs in a process that is killed while the tool runs."""
    os.environ["ADK_TEST_KILL_IN_TOOL"] = "1"
    call = types.Part(function_call=types.FunctionCall(name="weather", args={"city": "Oslo"}))
    runner, _model, service = _runner(url, [LlmResponse(content=types.Content(role="model", parts=[call]))])

    async def main() -> None:
        await service.create_session(app_name=APP, user_id=USER, session_id="chat", state={"user:name": "Ann"})
        message = types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])
        async for _event in runner.run_async(user_id=USER, session_id="chat", new_message=message):
            pass

    asyncio.run(main())


def _resume(url: str) -> dict[str, Any]:
    """Runs in a new process: resumes the killed invocation from the store."""
    answer = LlmResponse(content=types.Content(role="model", parts=[types.Part(text="It is sunny in Oslo.")]))
    runner, model, service = _runner(url, [answer])

    async def main() -> dict[str, Any]:
        before = await service.get_session(app_name=APP, user_id=USER, session_id="chat")
        assert before is not None
        invocation = before.events[-1].invocation_id
        async for _event in runner.run_async(user_id=USER, session_id="chat", invocation_id=invocation):
            pass
        after = await service.get_session(app_name=APP, user_id=USER, session_id="chat")
        assert after is not None
        await service.aclose()
        return {
            "before": [e.model_dump(mode="json", exclude_none=True) for e in before.events],
            "after": [e.model_dump(mode="json", exclude_none=True) for e in after.events],
            "state": after.state,
            "seen": model.seen,
            "invocation": invocation,
        }

    return asyncio.run(main())


def test_an_agent_run_killed_mid_invocation_resumes_in_a_new_process(shared_url: str) -> None:
    killed_in_a_process(_first_turn, shared_url)

    [resumed] = in_processes((_resume, (shared_url,)))

    before = resumed["before"]  # what the killed process had stored: the question and the call
    assert before[0]["content"]["parts"][0]["text"] == "Weather in Oslo?"
    assert before[-1]["content"]["parts"][0]["function_call"]["name"] == "weather"
    after = resumed["after"]
    assert after[: len(before)] == before
    kinds = [next(iter(p for p in e["content"]["parts"])) for e in after[len(before) :] if "content" in e]
    assert [next(k for k in ("function_response", "text") if k in part) for part in kinds] == [
        "function_response",
        "text",
    ]
    assert all(e["invocation_id"] == resumed["invocation"] for e in after)
    # The resumed model was handed the whole invocation, from the store.
    [contents] = resumed["seen"]
    assert contents[0]["parts"][0]["text"] == "Weather in Oslo?"
    assert contents[1]["parts"][0]["function_call"]["args"] == {"city": "Oslo"}
    assert contents[2]["parts"][0]["function_response"]["response"] == {"result": "sunny in Oslo"}
    assert resumed["state"]["answer"] == "It is sunny in Oslo."
    assert resumed["state"]["user:name"] == "Ann"
