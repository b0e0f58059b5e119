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
import sys
import tempfile
import time
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
    args = parser.parse_args()
    bench = _graph_bench()
    with tempfile.TemporaryDirectory(prefix="durastate-bench-calls-") as tmp:
        if args.side == "durastate":
            saver: Any = DurastateSaver.from_url(Path(tmp) / "d.db", durability="full")
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            saver = SqliteSaver(sqlite3.connect(Path(tmp) / "l.db", check_same_thread=False))
            saver.setup()
        reader, writer, tasks = bench.Chat(saver), bench.Chat(saver), bench.Chat(saver)
        if args.writer != "random":
            # Thread ids pinned by their first digit: the written thread's rows before a tail thread's or last.
            written, other = (writer, tasks) if args.op == "put" else (tasks, writer)
            tail = bench.Chat(saver) if args.writer == "middle" else None
            for chat, first in ((reader, "1"), (other, "2"), (written, "5" if tail else "f"), (tail, "f")):
                if chat is not None:
                    chat.thread_id = first + chat.thread_id[1:]
                    chat.config = {"configurable": {"thread_id": chat.thread_id, "checkpoint_ns": ""}}
            if tail is not None:
                tail.preload(10)
        reader.preload(args.history)
        tasks.preload(1)
        latest = reader.latest()
        # Arguments built before the clock starts: only the saver's call is measured.
        if args.op == "put":
            puts = []
            for _ in range(max(args.calls, args.build)):
                puts.append(writer.next_put())
            del puts[args.calls :]
            config = writer.config

            def run() -> None:
                nonlocal config
                for _, checkpoint, metadata, versions in puts:
                    config = saver.put(config, checkpoint, metadata, versions)

        elif args.op == "put_writes":
            batches = [tasks.writes() for _ in range(max(args.calls, args.build))][: args.calls]

            def run() -> None:
                for batch in batches:
                    saver.put_writes(*batch)

        else:

            def run() -> None:
                for _ in range(args.calls):
                    saver.get_tuple(latest)

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
