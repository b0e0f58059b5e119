"""What one LangGraph graph run costs on sync SQLite, durastate vs SqliteSaver: CPU, or instructions under callgrind.

    python bench/langgraph_graph_cost.py --side durastate|langgraph --runs N [--executor langgraph|one|kept]
        [--callgrind-lib cgtoggle.so] [--durability full|normal]

Runs ``bench/langgraph.py``'s agent graph (an ``invoke`` to its interrupt and the resume) ``--warmup`` times,
then ``--runs`` times measured: CPU seconds of the process (``time.process_time``) per graph run, and how many
distinct threads made saver calls. Under ``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no``
with ``--callgrind-lib`` (``bench/langgraph_calls.py`` has the C of ``cgtoggle.so``) only the measured runs are
counted: the last dump's ``Collected`` over ``--runs`` is the instructions per graph run, independent of the
machine's load; add ``--separate-threads=yes`` to split them by thread.

``--executor``: ``langgraph`` (as shipped: LangGraph's sync loop starts a thread pool per ``invoke`` and runs the
saver calls on its new threads); ``one`` (diagnostic: every ``invoke`` given the same one-thread pool, so every
saver call runs on one long-lived thread); ``kept`` (the same long-lived pool of LangGraph's default size for
every ``invoke``: threads that persist, several of them). These separate what a new thread costs from what
alternating threads cost.

``--paired``: this tree's saver, SqliteSaver and (``--baseline-src``, another tree's ``src``, imported beside
this one as ``durastate_baseline``) the baseline's saver in one process, graph run by graph run, the order
rotating: each graph run's CPU (``time.thread_time`` of the main thread plus the executor threads' through
``time.process_time``: the process's CPU) is set against the neighbouring runs of the others, so load that
drifts over seconds cancels. Prints the medians of the per-run CPU and of the paired ratios, with quartiles.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import resource
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_here = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

import langgraph.pregel._executor as lg_executor  # noqa: E402
from langchain_core.runnables.config import ContextThreadPoolExecutor  # noqa: E402
from langgraph.types import Command  # noqa: E402

from durastate.integrations.langgraph import DurastateSaver  # noqa: E402


def _graph_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_langgraph", _here / "langgraph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def keep_executor(workers: int | None) -> ContextThreadPoolExecutor:
    """Every ``invoke`` from now on runs its background calls on one pool of ``workers`` threads that persists."""
    pool = ContextThreadPoolExecutor(max_workers=workers)

    @contextlib.contextmanager
    def same_pool(config: Any) -> Iterator[ContextThreadPoolExecutor]:
        yield pool

    lg_executor.get_executor_for_config = same_pool  # type: ignore[assignment]
    return pool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=["durastate", "langgraph"], default="durastate")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--durability", choices=["full", "normal"], default="full")
    parser.add_argument("--executor", choices=["langgraph", "one", "kept"], default="langgraph")
    parser.add_argument("--callgrind-lib", help="cgtoggle.so: callgrind counts the measured runs only")
    parser.add_argument("--paired", action="store_true", help="the savers side by side, graph run by graph run")
    parser.add_argument("--baseline-src", help="with --paired: another durastate tree's src/ raced too")
    args = parser.parse_args()
    bench = _graph_bench()
    if args.paired:
        return paired(bench, args)
    pool = None
    if args.executor != "langgraph":
        pool = keep_executor(1 if args.executor == "one" else None)
    with tempfile.TemporaryDirectory(prefix="durastate-bench-graph-") as tmp:
        if args.side == "durastate":
            saver: Any = DurastateSaver.from_url(Path(tmp) / "d.db", durability=args.durability)
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(Path(tmp) / "l.db", check_same_thread=False)
            saver = SqliteSaver(conn)
            saver.setup()
            if args.durability == "normal":
                conn.execute("PRAGMA synchronous=NORMAL")
        threads: set[int] = set()
        calls = [0]
        for method in ("put", "put_writes", "get_tuple"):
            inner = getattr(saver, method)

            def counted(*a: Any, _inner: Any = inner, **kw: Any) -> Any:
                threads.add(threading.get_ident())
                calls[0] += 1
                return _inner(*a, **kw)

            setattr(saver, method, counted)
        graph = bench.agent_graph(saver)

        def run(n: int) -> None:
            for _ in range(n):
                config = {"configurable": {"thread_id": str(uuid.uuid4())}}
                assert "__interrupt__" in graph.invoke({"messages": []}, config)
                bench.check_run(graph.invoke(Command(resume=True), config))

        run(args.warmup)
        threads.clear()
        calls[0] = 0
        toggle = ctypes.CDLL(args.callgrind_lib) if args.callgrind_lib else None
        if toggle is not None:
            toggle.cg_start()
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.process_time()
        run(args.runs)
        cpu = time.process_time() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        if toggle is not None:
            toggle.cg_stop()
        print(
            f"{args.side} executor={args.executor}: {cpu / args.runs * 1e3:.2f} ms CPU a graph run, "
            f"{calls[0] / args.runs:.1f} saver calls a run from {len(threads)} distinct threads ({args.runs} runs); "
            f"a run: user {(after.ru_utime - before.ru_utime) / args.runs * 1e3:.2f} ms, "
            f"system {(after.ru_stime - before.ru_stime) / args.runs * 1e3:.2f} ms, "
            f"context switches {(after.ru_nvcsw - before.ru_nvcsw) / args.runs:.0f} voluntary, "
            f"{(after.ru_nivcsw - before.ru_nivcsw) / args.runs:.0f} involuntary, "
            f"page faults {(after.ru_minflt - before.ru_minflt) / args.runs:.0f}"
        )
        if pool is not None:
            pool.shutdown()
        if args.side == "durastate":
            saver.close()
    return 0


def paired(bench: Any, args: argparse.Namespace) -> int:
    """``--paired``: the savers' graph runs interleaved one by one in this process (see the docstring)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory(prefix="durastate-bench-graph-") as tmp:
        conn = sqlite3.connect(Path(tmp) / "l.db", check_same_thread=False)
        theirs = SqliteSaver(conn)
        theirs.setup()
        if args.durability == "normal":
            conn.execute("PRAGMA synchronous=NORMAL")
        savers: dict[str, Any] = {
            "durastate": DurastateSaver.from_url(Path(tmp) / "d.db", durability=args.durability),
            "SqliteSaver": theirs,
        }
        if args.baseline_src:
            spec = importlib.util.spec_from_file_location("_baseline", _here / "_baseline.py")
            assert spec is not None and spec.loader is not None
            baseline = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(baseline)
            baseline.load_baseline(args.baseline_src)
            saver_class = baseline.baseline_module("integrations.langgraph").DurastateSaver
            savers["baseline"] = saver_class.from_url(Path(tmp) / "b.db", durability=args.durability)
        graphs = {name: bench.agent_graph(saver) for name, saver in savers.items()}

        def one_run(graph: Any) -> float:
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            start = time.process_time()
            assert "__interrupt__" in graph.invoke({"messages": []}, config)
            bench.check_run(graph.invoke(Command(resume=True), config))
            return time.process_time() - start

        names = list(graphs)
        for _ in range(args.warmup):
            for name in names:
                one_run(graphs[name])
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for run_no in range(args.runs):
            shift = run_no % len(names)
            for name in names[shift:] + names[:shift]:
                cpu[name].append(one_run(graphs[name]))
        for name in names:
            print(f"{name}: {statistics.median(cpu[name]) * 1e3:.2f} ms CPU a graph run (median of {args.runs})")
        pairs = [("durastate", "SqliteSaver")]
        if "baseline" in cpu:
            pairs += [("baseline", "SqliteSaver"), ("durastate", "baseline")]
        for a, b in pairs:
            ratios = sorted(x / y for x, y in zip(cpu[a], cpu[b], strict=True))
            q1, q2, q3 = statistics.quantiles(ratios, n=4)
            print(f"{a} / {b} CPU per graph run: median {q2:.3f} (quartiles {q1:.3f}-{q3:.3f})")
        for name, saver in savers.items():
            if name != "SqliteSaver":
                saver.close()
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
