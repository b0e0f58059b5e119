"""Real LangGraph graphs on DurastateSaver, on both engines.

Interrupt and resume (sync and async), SIGKILL in the middle of a run and
resumption in a new process, time travel (history, update_state, a fork
that continues), and several processes running threads against one store.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import signal
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.graph")

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from durastate.integrations.langgraph import DurastateSaver

APP = Path(__file__).with_name("graph_app.py")


class Draft(TypedDict):
    messages: Annotated[list[str], operator.add]


def linear(saver: DurastateSaver, *nodes: tuple[str, Any]) -> Any:
    """START -> nodes in order -> END, compiled with the saver."""
    builder = StateGraph(Draft)
    for name, run in nodes:
        builder.add_node(name, run)
    names = [START, *(name for name, _ in nodes), END]
    for here, there in pairwise(names):
        builder.add_edge(here, there)
    return builder.compile(checkpointer=saver)


def review_graph(saver: DurastateSaver) -> Any:
    """draft -> review (asks a human through interrupt) -> publish."""

    def draft(state: Draft) -> dict[str, list[str]]:
        return {"messages": ["draft"]}

    def review(state: Draft) -> dict[str, list[str]]:
        verdict = interrupt({"question": "publish this?", "seen": list(state["messages"])})
        return {"messages": [f"review:{verdict}"]}

    def publish(state: Draft) -> dict[str, list[str]]:
        return {"messages": ["published"]}

    return linear(saver, ("draft", draft), ("review", review), ("publish", publish))


def test_interrupt_and_resume_survive_a_new_saver(shared_url: str) -> None:
    config = {"configurable": {"thread_id": "review-1"}}
    with DurastateSaver.from_url(shared_url) as saver:
        graph = review_graph(saver)
        first = graph.invoke({"messages": []}, config)
        assert first["messages"] == ["draft"]
        [pending] = first["__interrupt__"]
        assert pending.value == {"question": "publish this?", "seen": ["draft"]}
        assert graph.get_state(config).next == ("review",)
    # Another saver on the same URL (another process would do the same) resumes it.
    with DurastateSaver.from_url(shared_url) as saver:
        graph = review_graph(saver)
        assert graph.get_state(config).next == ("review",)
        final = graph.invoke(Command(resume="yes"), config)
        assert final["messages"] == ["draft", "review:yes", "published"]
        assert graph.get_state(config).next == ()


def test_async_interrupt_and_resume(shared_url: str) -> None:
    async def scenario() -> list[str]:
        async with DurastateSaver.from_url(shared_url) as saver:
            graph = review_graph(saver)
            config = {"configurable": {"thread_id": "review-async"}}
            first = await graph.ainvoke({"messages": []}, config)
            assert "__interrupt__" in first
            assert (await graph.aget_state(config)).next == ("review",)
            final = await graph.ainvoke(Command(resume="no"), config)
            history = [s async for s in graph.aget_state_history(config)]
            assert history[0].values["messages"] == final["messages"]
            messages: list[str] = final["messages"]
            return messages

    assert asyncio.run(scenario()) == ["draft", "review:no", "published"]


def chain_graph(saver: DurastateSaver) -> Any:
    def node(name: str) -> Any:
        return lambda state: {"messages": [name]}

    return linear(saver, *((name, node(name)) for name in "abc"))


def test_time_travel_fork_continues_and_keeps_the_original(shared_url: str) -> None:
    config = {"configurable": {"thread_id": "travel"}}
    with DurastateSaver.from_url(shared_url) as saver:
        graph = chain_graph(saver)
        assert graph.invoke({"messages": []}, config)["messages"] == ["a", "b", "c"]
        history = list(graph.get_state_history(config))
        # Newest first: after c, after b, after a, after input, the input itself.
        assert [s.next for s in history] == [(), ("c",), ("b",), ("a",), ("__start__",)]
        original_final = history[0].config
        before_b = history[2]
        assert before_b.values["messages"] == ["a"]

        fork = graph.update_state(before_b.config, {"messages": ["edited"]})
        assert graph.get_state(fork).values["messages"] == ["a", "edited"]
        assert graph.get_state(fork).next == ("b",)
        assert graph.invoke(None, fork)["messages"] == ["a", "edited", "b", "c"]

        # The thread's head is the fork's end; the first branch is still there, intact.
        assert graph.get_state(config).values["messages"] == ["a", "edited", "b", "c"]
        assert graph.get_state(original_final).values["messages"] == ["a", "b", "c"]
        forked_history = list(graph.get_state_history(config))
        assert len(forked_history) == len(history) + 3  # the update, then after b and after c
        assert (
            forked_history[2].parent_config["configurable"]["checkpoint_id"]
            == (before_b.config["configurable"]["checkpoint_id"])
        )


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_run_then_resume_in_a_new_process(shared_url: str, tmp_path: Path) -> None:
    log = tmp_path / "executions.log"
    child = _child("run", shared_url, "killed", str(log), "3")
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "blocked", child.stderr.read() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
    assert child.returncode == -signal.SIGKILL
    assert log.read_text().split() == ["1", "2", "3"]

    with DurastateSaver.from_url(shared_url) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": "killed", "checkpoint_ns": ""}})
        assert latest is not None
        assert latest.checkpoint["channel_values"]["steps"] == [1, 2]  # the last checkpoint: after step 2

    resumed = subprocess.run(
        [sys.executable, str(APP), "resume", shared_url, "killed", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"steps": [1, 2, 3, 4, 5]}
    # Steps 1 and 2 were never run again; step 3 ran again because it had not finished.
    assert log.read_text().split() == ["1", "2", "3", "3", "4", "5"]


@pytest.mark.multiprocess
def test_processes_running_threads_on_one_store(shared_url: str) -> None:
    processes, threads_each = 4, 5
    children = [_child("many", shared_url, f"p{n}", str(threads_each)) for n in range(processes)]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
        for child in children:  # all start together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=240) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    reported: dict[str, list[str]] = {}
    for child, (out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
        assert "database is locked" not in err
        reported.update(json.loads(out))
    assert len(reported) == processes * threads_each
    with DurastateSaver.from_url(shared_url) as saver:
        for thread_id, ids in reported.items():
            stored = [
                t.config["configurable"]["checkpoint_id"]
                for t in saver.list({"configurable": {"thread_id": thread_id}})
            ]
            assert stored == ids
            assert len(ids) == 7  # input, after the input, after each of the five steps
            final = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
            assert final is not None and final.checkpoint["channel_values"]["steps"] == [1, 2, 3, 4, 5]
        assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == set(reported)
