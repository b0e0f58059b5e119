"""What a graph run's saver calls cost on one thread and alternating between two, durastate vs SqliteSaver.

Run it with ``.venv/bin/python bench/langgraph_threads.py --help``.

LangGraph's sync loop puts checkpoints on a background thread while the
tasks' writes come from other threads. This records the ``put`` and
``put_writes`` calls of one run of ``bench/langgraph.py``'s agent graph
(against LangGraph's ``InMemorySaver``), then replays them on fresh threads
ids against ``DurastateSaver`` and ``SqliteSaver`` (both files at
``synchronous=NORMAL``), each call handed to a worker thread: all calls to
one worker (``one thread``), or puts to one and writes to another (``two
threads``, the graph run's shape). Figures are CPU microseconds per call
measured inside the call (``time.thread_time``), medians over rounds; the
modes and savers alternate within each round.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_here = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from durastate.integrations.langgraph import DurastateSaver  # noqa: E402

Call = tuple[str, tuple[Any, ...]]


def _bench_module() -> Any:
    """bench/langgraph.py, for its agent graph (a script, not a package: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("bench_langgraph", _here / "langgraph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_langgraph"] = module
    spec.loader.exec_module(module)
    return module


def record_run() -> list[Call]:
    """The put/put_writes calls one run of the agent graph makes, in order."""
    calls: list[Call] = []

    class Recorder(InMemorySaver):
        def put(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(("put", copy.deepcopy(args)))
            return super().put(*args, **kwargs)

        def put_writes(self, *args: Any, **kwargs: Any) -> None:
            calls.append(("put_writes", copy.deepcopy(args)))
            super().put_writes(*args, **kwargs)

    graph = _bench_module().agent_graph(Recorder())
    config = {"configurable": {"thread_id": "recorded"}}
    graph.invoke({"messages": []}, config)
    graph.invoke(Command(resume=True), config)
    return calls


def on_thread(value: Any, thread_id: str) -> Any:
    """``value`` with every config's thread_id replaced."""
    if isinstance(value, dict):
        return {k: thread_id if k == "thread_id" else on_thread(v, thread_id) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(on_thread(v, thread_id) for v in value)
    return value


def timed_call(saver: BaseCheckpointSaver[Any], method: str, args: tuple[Any, ...]) -> float:
    start = time.thread_time()
    getattr(saver, method)(*args)
    return time.thread_time() - start


def replay(
    saver: BaseCheckpointSaver[Any], calls: list[Call], runs: int, workers: list[ThreadPoolExecutor], two: bool
) -> float:
    """CPU microseconds per call over ``runs`` replays, each on a new thread id."""
    total, count = 0.0, 0
    for _ in range(runs):
        thread_id = str(uuid.uuid4())
        for method, args in calls:
            worker = workers[1] if two and method == "put" else workers[0]
            total += worker.submit(timed_call, saver, method, on_thread(args, thread_id)).result()
            count += 1
    return total / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=10, help="replayed graph runs per saver, mode and round")
    args = parser.parse_args()
    calls = record_run()
    with tempfile.TemporaryDirectory(prefix="durastate-bench-langgraph-threads-") as tmp:
        ours = DurastateSaver.from_url(Path(tmp) / "durastate.db")
        conn = sqlite3.connect(Path(tmp) / "langgraph.db", check_same_thread=False)
        theirs = SqliteSaver(conn)
        theirs.setup()
        conn.execute("PRAGMA synchronous=NORMAL")
        workers = [ThreadPoolExecutor(1), ThreadPoolExecutor(1)]
        savers = {"durastate": ours, "SqliteSaver": theirs}
        try:
            for saver in savers.values():
                replay(saver, calls, 3, workers, True)  # warm-up
            figures: dict[tuple[str, bool], list[float]] = defaultdict(list)
            for round_no in range(args.rounds):
                order = list(savers.items())
                if round_no % 2:
                    order.reverse()
                for two in (False, True):
                    for name, saver in order:
                        figures[(name, two)].append(replay(saver, calls, args.runs, workers, two))
        finally:
            for worker in workers:
                worker.shutdown()
            ours.close()
            conn.close()
    print(f"# bench/langgraph_threads.py {' '.join(sys.argv[1:])}: {len(calls)} calls per replayed run\n")
    print("| saver | one thread (us CPU/call) | two threads (us CPU/call) | two / one |")
    print("|---|---|---|---|")
    for name in savers:
        one, two = statistics.median(figures[(name, False)]), statistics.median(figures[(name, True)])
        print(f"| {name} | {one:.1f} | {two:.1f} | {two / one:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
