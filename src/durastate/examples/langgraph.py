"""A LangGraph graph on durastate: human approval, a restart, time travel, long-term memory.

Run it: ``python -m durastate.examples.langgraph`` (needs ``pip install
'durastate[langgraph]'``); ``--url postgresql://...`` runs the same on
PostgreSQL. Copy what you need: switching a LangGraph app to durastate is
the one ``checkpointer=`` line in ``main`` (and ``store=`` for memory).

1. A support bot drafts a reply and stops at ``interrupt`` for a human.
2. The process "restarts" (the saver is closed; a new one opens the same
   URL) and the human's answer resumes the thread where it stopped.
3. Time travel: the history is listed, the draft is edited at an earlier
   checkpoint with ``update_state`` and the graph continues from the fork.
4. A ``DurastateStore`` remembers the customer across threads.
"""

from __future__ import annotations

import argparse
import operator
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, interrupt

from durastate.integrations.langgraph import DurastateSaver, DurastateStore


class Ticket(TypedDict):
    customer: str
    question: str
    draft: str
    log: Annotated[list[str], operator.add]


def build(checkpointer: DurastateSaver, store: DurastateStore) -> Any:
    """draft -> approve (a human, through interrupt) -> send."""

    def draft(state: Ticket, *, store: BaseStore) -> dict[str, Any]:
        known = store.get(("customers",), state["customer"])
        visits = known.value["visits"] if known else 0
        greeting = "Welcome back" if visits else "Hello"
        return {
            "draft": f"{greeting} {state['customer']}, about '{state['question']}': we are on it.",
            "log": ["draft"],
        }

    def approve(state: Ticket) -> dict[str, Any]:
        verdict = interrupt({"draft": state["draft"], "ask": "send this reply? (yes/no)"})
        return {"log": [f"human said {verdict}"]}

    def send(state: Ticket, *, store: BaseStore) -> dict[str, Any]:
        known = store.get(("customers",), state["customer"])
        visits = (known.value["visits"] if known else 0) + 1
        store.put(("customers",), state["customer"], {"visits": visits})
        return {"log": [f"sent: {state['draft']}"]}

    builder = StateGraph(Ticket)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_node("send", send)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", "send")
    builder.add_edge("send", END)
    return builder.compile(checkpointer=checkpointer, store=store)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=str(Path(".durastate") / "langgraph.db"), help="any durastate URL")
    args = parser.parse_args(argv)
    config = {"configurable": {"thread_id": f"ticket-{uuid.uuid4().hex[:8]}"}}
    ticket = {"customer": "ada", "question": "where is my order?", "draft": "", "log": []}

    # 1. Run until the human is asked. The one line that makes it durable:
    with DurastateSaver.from_url(args.url) as checkpointer, DurastateStore.from_url(args.url) as store:
        graph = build(checkpointer, store)
        first = graph.invoke(ticket, config)
        [question] = first["__interrupt__"]
        print(f"1. waiting for a human: {question.value['ask']}")
        print(f"   draft: {question.value['draft']}")

    # 2. A new process would do exactly this: open the URL, resume the thread.
    with DurastateSaver.from_url(args.url) as checkpointer, DurastateStore.from_url(args.url) as store:
        graph = build(checkpointer, store)
        print(f"2. after a restart the thread is still at: {graph.get_state(config).next}")
        done = graph.invoke(Command(resume="yes"), config)
        print(f"   resumed and finished: {done['log'][-1]}")

        # 3. Time travel: back to the checkpoint before the human answered, edit, continue.
        history = list(graph.get_state_history(config))
        print(f"3. {len(history)} checkpoints in this thread, newest first: {[s.next for s in history]}")
        before_approval = next(s for s in history if s.next == ("approve",))
        fork = graph.update_state(before_approval.config, {"draft": "Hello ada, your order ships today."})
        graph.invoke(None, fork)  # runs up to the interrupt again, on the fork
        forked = graph.invoke(Command(resume="yes, the edited one"), fork)
        print(f"   the fork sent: {forked['log'][-1]}")

        # 4. Long-term memory outlives threads.
        print(f"4. the store remembers ada: {store.get(('customers',), 'ada').value}")  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    sys.exit(main())
