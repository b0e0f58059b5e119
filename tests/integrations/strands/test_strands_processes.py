"""Strands on durastate across processes: concurrent writers, racing creators, and an agent killed and resumed.

* Four processes create the same session at once: exactly one succeeds, the
  others get ``SessionExists`` (a ``SessionException``); the file manager's
  exists-check and ``makedirs`` are two steps, so several can "succeed".
  Then they write messages into ONE session at once (each its own agent, and
  all of them into one shared agent under distinct message ids): every
  message is kept, and listings come back in message-id order.
* A Strands ``Agent`` with a scripted model (a ``Model`` subclass, no network)
  and ``DurastateSessionManager`` answers turn 1, then is killed with SIGKILL
  while its model runs turn 2; a new process restores the agent from
  durastate alone (turn 1 and the unanswered question) and answers it.
* Strands' own ``SnapshotSessionManager`` persisting through
  ``DurastateStorage``: an agent snapshotted in one process is restored in
  another.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import AsyncGenerator
from multiprocessing.synchronize import Barrier
from typing import Any

import pytest
from strands import Agent
from strands.models.model import Model
from strands.session import SnapshotSessionManager
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

import durastate
from durastate.integrations.strands import (
    DurastateSessionManager,
    DurastateSessionRepository,
    DurastateStorage,
    SessionExists,
)

from .._processes import SPAWN, WORKER_TIMEOUT, in_processes, killed_in_a_process

pytestmark = pytest.mark.multiprocess

WRITERS = 4
PER_WRITER = 6


def _message(text: str, message_id: int) -> SessionMessage:
    return SessionMessage(message={"role": "user", "content": [{"text": text}]}, message_id=message_id)


def _worker(url: str, writer: int, barrier: Barrier) -> str:
    """Race the others to create one session, then write messages into another one."""
    with DurastateSessionRepository(url) as repo:  # opened (and migrated) before the race
        barrier.wait(WORKER_TIMEOUT)
        try:
            repo.create_session(Session(session_id="raced", session_type=SessionType.AGENT))
            outcome = "created"
        except SessionExists:
            outcome = "exists"
        repo.create_agent("shared", SessionAgent(agent_id=f"own-{writer}", state={}, conversation_manager_state={}))
        for n in range(PER_WRITER):
            repo.create_message("shared", f"own-{writer}", _message(f"{writer}-{n}", n))
            repo.create_message("shared", "common", _message(f"{writer}-{n}", n * WRITERS + writer))
    return outcome


def test_racing_creators_and_writers_from_several_processes(shared_url: str) -> None:
    with DurastateSessionRepository(shared_url) as repo:
        repo.create_session(Session(session_id="shared", session_type=SessionType.AGENT))
        repo.create_agent("shared", SessionAgent(agent_id="common", state={}, conversation_manager_state={}))
    barrier = SPAWN.Barrier(WRITERS)
    outcomes = in_processes(*[(_worker, (shared_url, w, barrier)) for w in range(WRITERS)])
    assert sorted(outcomes) == ["created"] + ["exists"] * (WRITERS - 1)
    with DurastateSessionRepository(shared_url) as repo:
        common = repo.list_messages("shared", "common")
        assert [m.message_id for m in common] == list(range(WRITERS * PER_WRITER))
        assert [m.message["content"][0]["text"] for m in common[:WRITERS]] == [f"{w}-0" for w in range(WRITERS)]
        last = list(range(PER_WRITER - 3, PER_WRITER))
        for writer in range(WRITERS):
            own = repo.list_messages("shared", f"own-{writer}", limit=3, offset=PER_WRITER - 3)
            assert [m.message["content"][0]["text"] for m in own] == [f"{writer}-{n}" for n in last]


class ScriptedModel(Model):
    """Answers from a script; ``kill_on`` (a 1-based call number) SIGKILLs its own process instead."""

    def __init__(self, answers: list[str], kill_on: int | None = None) -> None:
        self.answers = list(answers)
        self.kill_on = kill_on
        self.seen: list[list[str]] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        self.seen.append([block.get("text", "") for m in messages for block in m["content"]])
        if self.kill_on == len(self.seen):
            os.kill(os.getpid(), signal.SIGKILL)
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": self.answers.pop(0)}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def _killed_agent(url: str) -> None:
    manager = DurastateSessionManager("chat", url=url)
    agent = Agent(model=ScriptedModel(["Hello Ann.", "unused"], kill_on=2), session_manager=manager,
                  agent_id="helper", callback_handler=None)  # fmt: skip
    agent("My name is Ann.")
    agent("What is my name?")  # killed inside the model call


def _resumed_agent(url: str) -> dict[str, Any]:
    manager = DurastateSessionManager("chat", url=url)
    model = ScriptedModel(["Your name is Ann."])
    agent = Agent(model=model, session_manager=manager, agent_id="helper", callback_handler=None)
    restored = [block["text"] for m in agent.messages for block in m["content"]]
    answer = agent("Please answer my last question.")
    stored = manager.repository.list_messages("chat", "helper")
    manager.close()
    return {"restored": restored, "seen": model.seen, "answer": str(answer).strip(), "stored": len(stored)}


def test_a_killed_agent_resumes_in_a_new_process(shared_url: str) -> None:
    killed_in_a_process(_killed_agent, shared_url)

    [resumed] = in_processes((_resumed_agent, (shared_url,)))
    assert resumed["restored"] == ["My name is Ann.", "Hello Ann.", "What is my name?"]
    assert resumed["seen"][0][:3] == ["My name is Ann.", "Hello Ann.", "What is my name?"]
    assert resumed["answer"] == "Your name is Ann."
    assert resumed["stored"] == 5


def test_a_call_from_an_event_loop_waits_for_another_writer(tmp_path: Any) -> None:
    """Strands calls the repository from its loop's thread; another connection's write lock is waited out."""
    url = f"sqlite://{tmp_path}/state.db"
    holder = durastate.open(url)
    repo = DurastateSessionRepository(url)
    repo.create_session(Session(session_id="busy", session_type=SessionType.AGENT))
    held, done = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        with holder.transaction():
            holder.kv.put(b"elsewhere", b"n", b"k", b"v")
            held.set()
            # Released once the repository's call went to its waiting worker (so it had found the lock taken).
            while not any(t.name.startswith("durastate-strands-wait") for t in threading.enumerate()):
                if done.wait(0.001):
                    break

    thread = threading.Thread(target=hold_the_write_lock)
    thread.start()
    held.wait(WORKER_TIMEOUT)

    async def on_the_loop() -> None:
        repo.create_message("busy", "a", _message("hi", 0))

    try:
        asyncio.run(on_the_loop())
    finally:
        done.set()
        thread.join(WORKER_TIMEOUT)
    assert [m.message_id for m in repo.list_messages("busy", "a")] == [0]
    repo.close()
    holder.close()


def _snapshot_turn(url: str, answer: str, question: str) -> dict[str, Any]:
    storage = DurastateStorage(url)
    model = ScriptedModel([answer])
    agent = Agent(model=model, session_manager=SnapshotSessionManager("snap", storage=storage), agent_id="helper",
                  callback_handler=None)  # fmt: skip
    restored = len(agent.messages)
    agent(question)
    storage.close()
    return {"restored": restored, "seen": model.seen}


def test_the_snapshot_session_manager_restores_an_agent_from_durastate_storage(shared_url: str) -> None:
    """Strands' own SnapshotSessionManager, persisting through DurastateStorage, across two processes."""
    first = _snapshot_turn(shared_url, "Hello Ann.", "My name is Ann.")
    assert first["restored"] == 0
    [second] = in_processes((_snapshot_turn, (shared_url, "You are Ann.", "Who am I?")))
    assert second["restored"] == 2
    assert second["seen"] == [["My name is Ann.", "Hello Ann.", "Who am I?"]]
