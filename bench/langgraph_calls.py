"""Per-call cost of one LangGraph saver op on SQLite, for profiling: CPU time, or instructions under callgrind.

``python bench/langgraph_calls.py OP --calls N [--side durastate|langgraph] [--profile]`` preloads a thread
like ``bench/langgraph.py`` (its ``Chat``), then makes N calls of OP (``put``, ``put_writes``,
``get_tuple``), FULL durability on both sides, and prints the CPU microseconds per call
(``time.process_time``) and the user part of it (``getrusage``: the system part is mostly fsync).
Instructions per call: run it under ``valgrind --tool=callgrind`` twice,
with two values of ``--calls`` and the same ``--build`` (the larger count), and divide the difference
of the totals by the difference of the counts (setup cancels out; callgrind's counts do not depend on
load). Faster and exact: ``--callgrind-lib`` names a shared library (built from the C below with
``gcc -O2 -shared -fPIC -o cgtoggle.so cgtoggle.c``) whose client requests switch callgrind on for the
calls only; run ``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`` and read the
last dump's ``Collected`` over ``--calls``::

    #include <valgrind/callgrind.h>
    void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; CALLGRIND_TOGGLE_COLLECT; }
    void cg_stop(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }

``--profile``: cProfile of the calls, top 25 by own time.

``--paired [--baseline-src DIR] [--rounds R]``: this tree's saver, ``DIR``'s (say main's ``src``) and
SqliteSaver in one process, taking turns ``--calls`` calls at a time (the order rotating), each side's
thread CPU time taken around its calls only; prints the median CPU a call and the ratios (see ``paired``).

``--writer``: where the written thread's rows (``put``: a thread of its own; ``put_writes``: the tasks
thread) sort among the other threads' (``middle``, the default: before a tail thread's, as in
``bench/langgraph.py`` once its graph runs have added threads; ``last``: after every other; ``random``:
uuid4 thread ids, as before). On ``durastate``'s
``WITHOUT ROWID`` kv table a put appended in the middle of the b-tree writes ~4.6 WAL frames, one at its
end ~3.2 (SqliteSaver: 3.4 / 2.9), so with ``random`` the SQL part of ``put`` moved between two values
from run to run (bench/RESULTS.md, "lgput").
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import importlib.util
import pstats
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_here = Path(__file__).resolve().parent
# This folder's langgraph.py would shadow the package: import the package first, then load it by path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from durastate.integrations.langgraph import DurastateSaver  # noqa: E402


def _graph_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_langgraph", _here / "langgraph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def placed_chats(bench: Any, saver: Any, op: str, writer_place: str, history: int) -> tuple[Any, Any, Any]:
    """(reader, writer, tasks): ``bench/langgraph.py``'s chats on ``saver``, placed as ``--writer`` says, preloaded."""
    reader, writer, tasks = bench.Chat(saver), bench.Chat(saver), bench.Chat(saver)
    if writer_place != "random":
        # Thread ids pinned by their first digit: the written thread's rows before a tail thread's or last.
        written, other = (writer, tasks) if op == "put" else (tasks, writer)
        tail = bench.Chat(saver) if writer_place == "middle" else None
        for chat, first in ((reader, "1"), (other, "2"), (written, "5" if tail else "f"), (tail, "f")):
            if chat is not None:
                chat.thread_id = first + chat.thread_id[1:]
                chat.config = {"configurable": {"thread_id": chat.thread_id, "checkpoint_ns": ""}}
        if tail is not None:
            tail.preload(10)
    reader.preload(history)
    tasks.preload(1)
    return reader, writer, tasks


def calls_of(saver: Any, op: str, chats: tuple[Any, Any, Any], calls: int, build: int = 0) -> Callable[[], None]:
    """``calls`` calls of ``op``, their arguments built now (for ``max(calls, build)``), as one function to time."""
    reader, writer, tasks = chats
    if op == "put":
        puts = [writer.next_put() for _ in range(max(calls, build))][:calls]

        def run() -> None:
            config = writer.config
            for _, checkpoint, metadata, versions in puts:
                config = saver.put(config, checkpoint, metadata, versions)
            writer.config = config

        return run
    if op == "put_writes":
        batches = [tasks.writes() for _ in range(max(calls, build))][:calls]

        def run_writes() -> None:
            for batch in batches:
                saver.put_writes(*batch)

        return run_writes
    latest = reader.latest()

    def run_reads() -> None:
        for _ in range(calls):
            saver.get_tuple(latest)

    return run_reads


def sqlite_saver(path: Path) -> Any:
    """LangGraph's ``SqliteSaver`` on a new file, as ``bench/langgraph.py`` makes it (FULL durability)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    saver.setup()
    return saver


def paired(args: argparse.Namespace, bench: Any, folder: Path) -> None:
    """``--paired``: this tree's saver, ``--baseline-src``'s and SqliteSaver taking turns in one process.

    Each round every side makes ``--calls`` calls (arguments built first), the order rotating from round
    to round; its thread's CPU time (user + system: the WAL frames' ``pwrite`` calls count) is taken
    around the calls only, and the wall time of the same calls (fsyncs included: what a caller waits).
    Round 0 warms up. Printed: each side's median CPU and wall time a call and, per other side, the
    median, range and quartiles over rounds of its CPU over this tree's and of its wall time over this
    tree's (> 1: this tree is cheaper or faster).
    """
    sides: dict[str, Any] = {"durastate": DurastateSaver.from_url(folder / "d.db", durability="full")}
    if args.baseline_src:
        sys.path.append(str(_here))
        from _baseline import baseline_module, load_baseline

        load_baseline(args.baseline_src)
        baseline = baseline_module("integrations.langgraph").DurastateSaver
        sides["baseline"] = baseline.from_url(folder / "b.db", durability="full")
    sides["langgraph"] = sqlite_saver(folder / "l.db")
    chats = {name: placed_chats(bench, saver, args.op, args.writer, args.history) for name, saver in sides.items()}
    names = list(sides)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    for round_no in range(args.rounds + 1):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            run = calls_of(sides[name], args.op, chats[name], args.calls)
            start, started = time.thread_time(), time.perf_counter()
            run()
            if round_no:
                cpu[name].append((time.thread_time() - start) / args.calls)
                wall[name].append((time.perf_counter() - started) / args.calls)
    for name in names:
        print(
            f"{name} {args.op}: {statistics.median(cpu[name]) * 1e6:.1f} us CPU, "
            f"{statistics.median(wall[name]) * 1e6:.1f} us wall a call (medians of {args.rounds})"
        )
    for name in names[1:]:
        for label, spent in (("CPU", cpu), ("wall", wall)):
            ratios = sorted(theirs / ours for theirs, ours in zip(spent[name], spent["durastate"], strict=True))
            print(
                f"{name} / durastate {label}: {statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}), "
                f"quartiles {ratios[len(ratios) // 4]:.3f}-{ratios[(3 * len(ratios)) // 4]:.3f}"
            )
    for saver in sides.values():
        if isinstance(getattr(saver, "conn", None), sqlite3.Connection):
            saver.conn.close()
        else:
            saver.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("op", choices=["put", "put_writes", "get_tuple"])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--history", type=int, default=100)
    parser.add_argument(
        "--build", type=int, default=0, help="arguments built for this many calls (at least --calls): equal setup"
    )
    parser.add_argument("--side", choices=["durastate", "langgraph"], default="durastate")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--callgrind-lib", help="the cgtoggle.so above: callgrind counts the calls only")
    parser.add_argument("--writer", choices=["middle", "last", "random"], default="middle")
    parser.add_argument("--paired", action="store_true", help="all sides in one process, taking turns (see paired)")
    parser.add_argument("--baseline-src", help="--paired: another durastate tree's src as a third side")
    parser.add_argument("--rounds", type=int, default=20, help="--paired: rounds of --calls calls per side")
    args = parser.parse_args()
    bench = _graph_bench()
    with tempfile.TemporaryDirectory(prefix="durastate-bench-calls-") as tmp:
        if args.paired:
            paired(args, bench, Path(tmp))
            return 0
        if args.side == "durastate":
            saver: Any = DurastateSaver.from_url(Path(tmp) / "d.db", durability="full")
        else:
            saver = sqlite_saver(Path(tmp) / "l.db")
        run = calls_of(
            saver, args.op, placed_chats(bench, saver, args.op, args.writer, args.history), args.calls, args.build
        )
        profiler = cProfile.Profile() if args.profile else None
        toggle = ctypes.CDLL(args.callgrind_lib) if args.callgrind_lib else None
        if toggle is not None:
            toggle.cg_start()
        start, user = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
        if profiler is not None:
            profiler.runcall(run)
        else:
            run()
        cpu, user = time.process_time() - start, resource.getrusage(resource.RUSAGE_SELF).ru_utime - user
        if toggle is not None:
            toggle.cg_stop()
        calls = max(1, args.calls)
        print(
            f"{args.side} {args.op}: {cpu / calls * 1e6:.1f} us CPU a call, {user / calls * 1e6:.1f} us of it user "
            f"({args.calls} calls)"
        )
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
