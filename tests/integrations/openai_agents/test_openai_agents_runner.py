"""DurastateSession under the SDK's Runner, across processes.

* End to end (plain and streamed runs): the SDK's ``Runner`` with its shipped ``agents.testing.ScriptedModel``
  (no network, tracing off) runs a turn with a tool call; a second turn runs
  in a NEW process (spawn) on the same URL, and the model there is handed the
  whole first turn as history.
* Several processes add to (and one pops from) one session on one store at
  once: no error (no "database is locked"), nothing lost, duplicated or
  reordered, every batch contiguous.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from multiprocessing.synchronize import Barrier
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from durastate.integrations.openai_agents import DurastateSession

from .._processes import SPAWN, WORKER_TIMEOUT, in_processes


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather])


def _second_turn(url: str, session_id: str) -> dict[str, Any]:
    """Runs in a fresh process: resume the session and take one more turn."""
    set_tracing_disabled(True)
    model = ScriptedModel([[assistant_message("You asked about Oslo.", item_id="msg-2")]])

    async def main() -> dict[str, Any]:
        with DurastateSession(session_id, url=url) as session:
            result = await Runner.run(_agent(model), "What did I ask?", session=session)
            assert model.last_call is not None
            return {"model_input": model.last_call.input, "output": result.final_output}

    return asyncio.run(main())


def test_history_persists_and_resumes_in_a_new_process(shared_url: str) -> None:
    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Oslo"}, call_id="call-1")],
            [assistant_message("It is sunny in Oslo.", item_id="msg-1")],
        ]
    )

    async def first_turn() -> list[Any]:
        with DurastateSession("chat-1", url=shared_url) as session:
            result = await Runner.run(_agent(model), "Weather in Oslo?", session=session)
            assert result.final_output == "It is sunny in Oslo."
            return await session.get_items()

    first = asyncio.run(first_turn())
    model.assert_complete()
    assert [item.get("type", "message") for item in first] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert first[0] == {"role": "user", "content": "Weather in Oslo?"}
    assert first[2]["output"] == "sunny in Oslo"

    [second] = in_processes((_second_turn, (shared_url, "chat-1")))

    assert second["output"] == "You asked about Oslo."
    # The new process's model saw the whole first turn, then the new question.
    assert second["model_input"] == [*first, {"role": "user", "content": "What did I ask?"}]

    async def history() -> list[Any]:
        with DurastateSession("chat-1", url=shared_url) as session:
            return await session.get_items()

    final = asyncio.run(history())
    assert final[:5] == second["model_input"]
    assert len(final) == 6 and final[5]["content"][0]["text"] == "You asked about Oslo."


def test_a_streamed_run_persists_like_a_plain_one(shared_url: str) -> None:
    set_tracing_disabled(True)
    model = ScriptedModel([[assistant_message("Hello Ann.", item_id="msg-1")], [assistant_message("Ann.")]])

    async def main() -> None:
        with DurastateSession("streamed", url=shared_url) as session:
            streamed = Runner.run_streamed(_agent(model), "I am Ann", session=session)
            async for _event in streamed.stream_events():
                pass
            assert streamed.final_output == "Hello Ann."
            first = await session.get_items()
            assert [item.get("role") for item in first] == ["user", "assistant"]
            await Runner.run(_agent(model), "Who am I?", session=session)
            assert model.last_call is not None
            assert model.last_call.input == [*first, {"role": "user", "content": "Who am I?"}]

    asyncio.run(main())


# -- several processes on one session -------------------------------------------

WRITERS = 3
BATCHES = 20
POPS = 15


def _batch(writer: int, n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"w{writer}-b{n}-p{part}"} for part in range(1 + (n + writer) % 3)]


def _write(url: str, writer: int, start: Barrier) -> None:
    async def main() -> None:
        with DurastateSession("shared", url=url) as session:
            start.wait(WORKER_TIMEOUT)
            for n in range(BATCHES):
                await session.add_items(_batch(writer, n))

    asyncio.run(main())


def _pop(url: str, start: Barrier) -> list[Any]:
    async def main() -> list[Any]:
        popped: list[Any] = []
        with DurastateSession("shared", url=url) as session:
            start.wait(WORKER_TIMEOUT)
            deadline = time.monotonic() + WORKER_TIMEOUT
            while len(popped) < POPS:
                item = await session.pop_item()
                if item is not None:
                    popped.append(item)
                assert time.monotonic() < deadline, f"popped only {len(popped)} items"
        return popped

    return asyncio.run(main())


def _parse(item: dict[str, Any]) -> tuple[int, int, int]:
    writer, batch, part = item["content"].split("-")
    return int(writer[1:]), int(batch[1:]), int(part[1:])


def test_concurrent_writers_and_a_popper_lose_nothing(shared_url: str) -> None:
    # Create the schema once before the workers race.
    DurastateSession("shared", url=shared_url).close()
    start = SPAWN.Barrier(WRITERS + 1)
    # A worker's error (a lock timeout, say) fails the test with its traceback.
    *_, popped = in_processes(*[(_write, (shared_url, w, start)) for w in range(WRITERS)], (_pop, (shared_url, start)))

    async def history() -> list[Any]:
        with DurastateSession("shared", url=shared_url) as session:
            return await session.get_items()

    remaining = asyncio.run(history())
    written = [item for w in range(WRITERS) for n in range(BATCHES) for item in _batch(w, n)]
    assert len(popped) == POPS
    # Nothing lost, nothing duplicated: what was popped plus what is left is what was written.
    assert Counter(i["content"] for i in popped + remaining) == Counter(i["content"] for i in written)

    parsed = [_parse(item) for item in remaining]
    for w in range(WRITERS):
        mine = [(n, part) for writer, n, part in parsed if writer == w]
        assert mine == sorted(mine), f"writer {w}'s items are out of order"
    # A batch is contiguous: no other item ever lands between two of its parts.
    positions: dict[tuple[int, int], list[int]] = {}
    for index, (writer, n, _part) in enumerate(parsed):
        positions.setdefault((writer, n), []).append(index)
    for batch, where in positions.items():
        assert where == list(range(where[0], where[0] + len(where))), f"batch {batch} was interleaved"
