"""A five-step LangGraph chain on DurastateSaver, run as a child process by test_graph.py.

``graph_app.py run URL THREAD LOG BLOCK_AT``: run the chain on THREAD; each
step appends its number to the state and a line to LOG; step BLOCK_AT
prints ``blocked`` and waits on stdin forever (the parent kills it there).

``graph_app.py resume URL THREAD LOG``: continue THREAD from its last
checkpoint; print the final state as JSON.

``graph_app.py many URL PREFIX COUNT``: print ``ready``, wait for a line on
stdin, run COUNT threads ``PREFIX-0`` ... to the end; print
``{thread: [checkpoint ids newest first]}`` as JSON.
"""

from __future__ import annotations

import json
import operator
import sys
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from durastate.integrations.langgraph import DurastateSaver

STEPS = 5


class State(TypedDict):
    steps: Annotated[list[int], operator.add]


def build(saver: DurastateSaver, log: str | None = None, block_at: int = 0) -> Any:
    def step(number: int) -> Any:
        def run(state: State) -> dict[str, list[int]]:
            if log:
                with open(log, "a") as f:
                    f.write(f"{number}\n")
            if number == block_at:
                print("blocked", flush=True)
                sys.stdin.read()  # the parent SIGKILLs us here
            return {"steps": [number]}

        return run

    builder = StateGraph(State)
    for number in range(1, STEPS + 1):
        builder.add_node(f"step{number}", step(number))
    builder.add_edge(START, "step1")
    for number in range(1, STEPS):
        builder.add_edge(f"step{number}", f"step{number + 1}")
    builder.add_edge(f"step{STEPS}", END)
    return builder.compile(checkpointer=saver)


def main(argv: list[str]) -> int:
    mode, url = argv[0], argv[1]
    with DurastateSaver.from_url(url) as saver:
        if mode == "run":
            thread, log, block_at = argv[2], argv[3], int(argv[4])
            # durability="sync": each step's checkpoint is committed before the
            # next step starts (LangGraph's default "async" saves in the
            # background, so a kill may lose the newest one or two).
            config = {"configurable": {"thread_id": thread}}
            build(saver, log, block_at).invoke({"steps": []}, config, durability="sync")
        elif mode == "resume":
            thread, log = argv[2], argv[3]
            state = build(saver, log).invoke(None, {"configurable": {"thread_id": thread}})
            print(json.dumps(state), flush=True)
        elif mode == "many":
            prefix, count = argv[2], int(argv[3])
            graph = build(saver)
            print("ready", flush=True)
            sys.stdin.readline()
            ids: dict[str, list[str]] = {}
            for i in range(count):
                config = {"configurable": {"thread_id": f"{prefix}-{i}"}}
                graph.invoke({"steps": []}, config)
                ids[f"{prefix}-{i}"] = [
                    s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)
                ]
            print(json.dumps(ids), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
