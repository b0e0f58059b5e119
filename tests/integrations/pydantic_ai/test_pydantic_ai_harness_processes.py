"""A pydantic-ai agent with the harness's StepPersistence and Memory on durastate, SIGKILLed mid-run, resumed.

The agent (a scripted ``FunctionModel``; no network) writes a memory file
through the harness's ``write_memory`` tool, then calls ``charge`` twice; a
charge appends a line to a side-effect log. The process kills itself with
SIGKILL inside the second charge. A new process then reads the run back
from durastate alone and continues it as the harness documents
(``inspect_recovery``, ``continue_run``, ``Agent.run(message_history=...)``).

What resumption must guarantee, and is asserted:

* the settled work is not redone: the memory write and the first charge
  ran once (the log, the memory file's version and receipt), because the
  latest ``complete`` snapshot holds their tool returns;
* the killed tool call is the one the ledger reports unresolved (``started``,
  the harness's ``unknown_after_crash``), the completed ones are
  ``completed``;
* the killed run's events are kept, each once (no idempotency key twice), in
  the order the run appended them, and the resumed run leaves them as they
  were; its own events are a whole run;
* the resumed model is handed the history and the memory from the store.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai_harness")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.memory import Memory
from pydantic_ai_harness.step_persistence import StepPersistence, continue_run
from pydantic_ai_harness.step_persistence.recovery import inspect_recovery

from durastate.integrations.pydantic_ai_harness import DurastateMemoryStore, DurastateStepStore

from .._processes import in_processes, killed_in_a_process

pytestmark = pytest.mark.multiprocess

KILLED, RESUMED = "run-1", "run-2"
MEMORY = "main/MEMORY.md"  # the Memory capability's default scope and file


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Remember a preference, charge 1, charge 2, answer: the next step the tool returns so far call for."""
    returned = [
        part.tool_name
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if "write_memory" not in returned:
        return ModelResponse(parts=[ToolCallPart("write_memory", {"content": "prefers email"}, tool_call_id="m1")])
    charges = returned.count("charge")
    if charges < 2:
        return ModelResponse(parts=[ToolCallPart("charge", {"amount": charges + 1}, tool_call_id=f"c{charges + 1}")])
    return ModelResponse(parts=[TextPart("charged twice")])


def _injected(messages: list[ModelMessage]) -> list[str]:
    """The texts the Memory capability put into the request (``TextContent`` items of its prompt part)."""
    return [
        item.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, TextContent)
    ]


def _agent(url: str, run_id: str, log: str, seen: list[tuple[str, list[str]]] | None = None) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append((repr(messages), _injected(messages)))
        return _script(messages, info)

    steps, memory = DurastateStepStore(url=url), DurastateMemoryStore(url=url)
    capabilities: list[Any] = [StepPersistence(store=steps, run_id=run_id), Memory(store=memory)]
    agent = Agent(FunctionModel(model), capabilities=capabilities)

    @agent.tool_plain
    def charge(amount: int) -> str:
        """Charge the customer ``amount``: a side effect, logged."""
        with open(log, "a") as file:
            file.write(f"charge {amount}\n")
        if amount == 2 and os.environ.get("HARNESS_TEST_KILL_IN_TOOL") == "1":
            os.kill(os.getpid(), signal.SIGKILL)  # the process dies mid-run, inside the second charge
        return f"charged {amount}"

    return agent


def _first_run(url: str, log: str) -> None:
    """Runs in a process that is killed inside the second charge."""
    os.environ["HARNESS_TEST_KILL_IN_TOOL"] = "1"
    asyncio.run(_agent(url, KILLED, log).run("Remember that I prefer email, then charge me twice."))


def _resume(url: str, log: str) -> dict[str, Any]:
    """Runs in a new process: reads the killed run back from durastate and continues it."""

    async def main() -> dict[str, Any]:
        steps, memory = DurastateStepStore(url=url), DurastateMemoryStore(url=url)
        try:
            recovery = await inspect_recovery(store=steps, run_id=KILLED)
            events = await steps.list_events(run_id=KILLED)
            history = await continue_run(steps, run_id=KILLED)
            file = await memory.read(MEMORY, max_chars=1000)
            seen: list[tuple[str, list[str]]] = []
            result = await _agent(url, RESUMED, log, seen).run(message_history=history)
            return {
                "unresolved": [(r.tool_call_id, r.tool_name, r.status) for r in recovery.unresolved],
                "completed_tools": list(recovery.completed_tools),
                "effects": [
                    (await steps.get_tool_effect(run_id=KILLED, tool_call_id=call)).status  # type: ignore[union-attr]
                    for call in ("m1", "c1", "c2")
                ],
                "events": [(e.kind, e.tool_name, e.idempotency_key) for e in events],
                "history": repr(history),
                "memory": (file.content, file.version) if file else None,
                "output": result.output,
                "seen": seen,
                "events_after": [
                    (e.kind, e.tool_name, e.idempotency_key) for e in await steps.list_events(run_id=KILLED)
                ],
                "resumed_events": [(e.kind, e.tool_name) for e in await steps.list_events(run_id=RESUMED)],
                "memory_after": (await memory.read(MEMORY, max_chars=1000)),
                "runs": [r.run_id for r in await steps.list_runs()],
            }
        finally:
            await steps.aclose()
            await memory.aclose()

    return asyncio.run(main())


def test_an_agent_run_killed_mid_tool_resumes_in_a_new_process(shared_url: str, tmp_path: Path) -> None:
    log = str(tmp_path / "side-effects.log")
    killed_in_a_process(_first_run, shared_url, log)
    [resumed] = in_processes((_resume, (shared_url, log)))

    # Settled work is not redone: each charge once before the kill; the resume redoes only the killed call.
    assert Path(log).read_text().splitlines() == ["charge 1", "charge 2", "charge 2"]
    assert resumed["output"] == "charged twice"
    content, version = resumed["memory"]
    assert content == "prefers email\n"
    after = resumed["memory_after"]
    assert (after.content, after.version) == (content, version)  # written once, by the killed run

    # The ledger: the killed call unresolved (unknown_after_crash), the settled ones completed.
    assert resumed["unresolved"] == [("c2", "charge", "started")]
    assert resumed["effects"] == ["completed", "completed", "started"]
    assert resumed["completed_tools"] == ["write_memory", "charge"]

    # The killed run's events, each once and in order, up to the call it died in; untouched by the resume.
    events = resumed["events"]
    assert [(kind, tool) for kind, tool, _ in events] == [
        ("run_started", None),
        *[("model_request_started", None), ("model_request_completed", None)],
        *[("tool_call_started", "write_memory"), ("tool_call_completed", "write_memory")],
        *[("model_request_started", None), ("model_request_completed", None)],
        *[("tool_call_started", "charge"), ("tool_call_completed", "charge")],
        *[("model_request_started", None), ("model_request_completed", None)],
        ("tool_call_started", "charge"),
    ]
    keys = [key for _, _, key in events]
    assert None not in keys and len(set(keys)) == len(keys)
    assert resumed["events_after"] == events

    # Resumed from the latest complete snapshot: the prompt, two settled tool cycles; the model got them and the memory.
    history = resumed["history"]
    assert "charged 1" in history and "charged 2" not in history
    (first_seen, injected), _ = resumed["seen"]  # two model calls: charge 2, then the answer
    assert "Remember that I prefer email" in first_seen and "charged 1" in first_seen
    assert any("prefers email" in text for text in injected)  # the memory file, read from the store
    assert resumed["resumed_events"] == [
        ("run_started", None),
        *[("model_request_started", None), ("model_request_completed", None)],
        *[("tool_call_started", "charge"), ("tool_call_completed", "charge")],
        *[("model_request_started", None), ("model_request_completed", None)],
        ("run_completed", None),
    ]
    assert sorted(resumed["runs"]) == [KILLED, RESUMED]
