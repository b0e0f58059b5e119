"""An OpenAI Agents SDK conversation that survives its process.

    python -m durastate.examples.openai_agents [--url URL]

Turn 1 runs here: the agent calls a tool and answers. Turn 2 runs in a NEW
Python process on the same store, and the agent there is handed the whole of
turn 1 as history by ``DurastateSession``. No network and no API key: the
model is the SDK's own ``agents.testing.ScriptedModel`` (a real model is one
line: drop ``model=``), and tracing is off. ``--url`` takes any durastate URL
(a PostgreSQL one too); by default a fresh SQLite file in a temporary folder.
Needs ``pip install 'durastate[openai-agents]'``.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from durastate.integrations.openai_agents import DurastateSession

from ._url import two_processes

SESSION_ID = "example-user-42"


@function_tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny, 21 C in {city}"


def _agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="assistant", instructions="Answer briefly.", model=model, tools=[weather])


async def first_turn(url: str) -> None:
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Oslo"}, call_id="call-1")],
            [assistant_message("It is sunny and 21 C in Oslo.", item_id="msg-1")],
        ]
    )
    with DurastateSession(SESSION_ID, url=url) as session:
        await session.clear_session()  # a rerun on the same URL starts over
        result = await Runner.run(_agent(model), "What's the weather in Oslo?", session=session)
        print(f"[process 1] user: What's the weather in Oslo?\n[process 1] agent: {result.final_output}")
        print(f"[process 1] {len(await session.get_items())} items stored")


async def second_turn(url: str) -> None:
    model = ScriptedModel([[assistant_message("You asked about the weather in Oslo.", item_id="msg-2")]])
    with DurastateSession(SESSION_ID, url=url) as session:
        result = await Runner.run(_agent(model), "What did I just ask you?", session=session)
        assert model.last_call is not None
        seen = model.last_call.input
        print(f"[process 2] the model was given {len(seen)} items: turn 1 from the store, then the new question")
        print(f"[process 2] user: What did I just ask you?\n[process 2] agent: {result.final_output}")
        history = await session.get_items()
        print(f"[process 2] history now: {[item.get('type', 'message') for item in history]}")


def main(argv: list[str] | None = None) -> None:
    set_tracing_disabled(True)
    two_processes(
        argv, "openai_agents", "An OpenAI Agents SDK conversation that survives its process.", first_turn, second_turn
    )


if __name__ == "__main__":
    main()
