"""Where a LangGraph graph run's time goes on async PostgreSQL: ``DurastateSaver`` against ``AsyncPostgresSaver``.

``python bench/langgraph_profile.py --runs 20`` runs ``bench/langgraph.py``'s agent graph (two
``ainvoke``s per run: up to the ``interrupt()``, then the resume) on each side, alternating side by
side, each side on its own fresh schema, and reports per graph run (medians over ``--rounds`` rounds):

* wall time, and CPU split by thread: the event loop's thread, durastate's worker threads, other
  threads (LangGraph's executor running the sync nodes, ``asyncio.to_thread``), and the server
  processes of the side's connections (``/proc/<pid>/schedstat``, ``bench/pg_cpu.py``);
* context switches of the process (voluntary + involuntary, every thread);
* saver calls (``aput``, ``aput_writes``, ``aget_tuple``, ``alist``) and each one's wall time, awaited
  from the loop (median, microseconds);
* with ``--wire`` instead: round trips and statements on the wire per saver call and per graph run,
  each side's connections run through a counting relay (``Relay``); the calls then run one at a time
  (``--calls`` each, outside a graph) so each one's traffic is its own;
* with ``--alone`` instead: each call alone, back to back from one coroutine: wall, CPU by thread,
  server CPU and context switches per call;
* with ``--busy MS`` instead: wall per call while another coroutine keeps the loop's thread busy in
  Python, MS at a time, as LangGraph's own work does during a graph run (what a worker thread's GIL
  hand-offs cost then; ``--switch-interval`` changes the interpreter's switch interval to test that).

``--baseline-src DIR`` adds a third side (to the graph runs, ``--busy`` and ``--alone``):
``DurastateSaver`` of another durastate tree (say main's ``src``, ``bench/_baseline.py``) on a schema of
its own, in the same rounds (the order rotates each round), and its ratio against this tree's.

``--nice -20`` (root) runs this process, its autogroup (put back at exit) and its connections' server
processes at that niceness: on a loaded machine, nearer a quiet one's scheduling (not the same).
Threads are told apart by their Python name: durastate's workers are ``durastate-*``; the loop runs on
the main thread.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import socket
import statistics
import struct
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_here = Path(__file__).resolve().parent
# This folder's langgraph.py would shadow the package: import the package first, then this folder's helpers.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from durastate.integrations.langgraph import DurastateSaver  # noqa: E402
from durastate.testing import postgres_server  # noqa: E402

sys.path.append(str(_here))
import _postgres  # noqa: E402
import pg_cpu  # noqa: E402
from _baseline import baseline_module, load_baseline  # noqa: E402

SAVER_CALLS = ("aput", "aput_writes", "aget_tuple", "alist")


def _load_graph_bench() -> Any:
    """``bench/langgraph.py`` as a module (its name shadows the package, so it is loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_langgraph", _here / "langgraph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the graph's state TypedDict resolves its annotations there
    spec.loader.exec_module(module)
    return module


# -- per-thread CPU and context switches ---------------------------------------


def threads() -> dict[int, tuple[str, int, int]]:
    """tid -> (name, CPU ns, context switches) for every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            switches = 0
            with open(f"/proc/self/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
        except (OSError, ValueError):
            continue
        out[int(tid)] = (name, ns, switches)
    return out


def classify(tid: int, names: dict[int | None, str], main: int | None) -> str:
    """Which class a thread is in, by its Python name (the OS name is "python" for every thread)."""
    if tid == main:
        return "loop"
    if names.get(tid, "").startswith("durastate-"):
        return "durastate workers"
    return "other threads"


def thread_delta(before: dict[int, tuple[str, int, int]], after: dict[int, tuple[str, int, int]]) -> dict[str, float]:
    """CPU ns per thread class and switches, between two readings (threads that ended meanwhile are lost)."""
    main = threading.main_thread().native_id
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {"loop": 0, "durastate workers": 0, "other threads": 0, "switches": 0}
    for kind in ("loop", "durastate workers", "other threads"):
        out[f"switches, {kind}"] = 0
    for tid, (name, ns, sw) in after.items():
        _, ns0, sw0 = before.get(tid, (name, 0, 0))
        kind = classify(tid, names, main)
        out[kind] += ns - ns0
        out["switches"] += sw - sw0
        out[f"switches, {kind}"] += sw - sw0
    return out


# -- saver call timing -----------------------------------------------------------


class CallLog:
    """Wraps a saver's async methods (on the instance) to count them and time each, awaited from the loop."""

    def __init__(self, saver: Any) -> None:
        self.times: dict[str, list[float]] = {name: [] for name in SAVER_CALLS}
        for name in ("aput", "aput_writes", "aget_tuple"):
            self._wrap(saver, name)
        original = saver.alist
        times = self.times["alist"]

        async def alist(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            async for item in original(*args, **kwargs):
                yield item
            times.append(time.perf_counter() - start)

        saver.alist = alist

    def _wrap(self, saver: Any, name: str) -> None:
        original = getattr(saver, name)
        times = self.times[name]

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                times.append(time.perf_counter() - start)

        setattr(saver, name, timed)

    def reset(self) -> None:
        for times in self.times.values():
            times.clear()


# -- a counting relay --------------------------------------------------------------


class Relay:
    """A TCP relay in front of PostgreSQL counting round trips and statements (each connection's stream parsed).

    A round trip: a client message after an answer from the server (as ``tests/postgres/proxy.py`` counts
    them). Statements: extended-protocol ``Execute`` messages plus simple-protocol ``Query`` messages.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.flights = 0
        self.statements = 0
        self.parses = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0] + "@" if len(netloc) == 2 else ""
        query = (parts.query + "&" if parts.query else "") + "sslmode=disable"
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}", query=query))

    def counts(self) -> tuple[int, int, int]:
        with self.lock:
            return self.flights, self.statements, self.parses

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            answered = [True]
            threading.Thread(target=self._up, args=(client, server, answered), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, answered), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, answered: list[bool]) -> None:
        buffer = b""
        started = False  # past the (untyped) startup message
        try:
            while chunk := client.recv(65536):
                if answered[0]:
                    answered[0] = False
                    with self.lock:
                        self.flights += 1
                buffer += chunk
                while True:
                    if not started:
                        if len(buffer) < 8:
                            break
                        (length,) = struct.unpack("!i", buffer[:4])
                        if len(buffer) < length:
                            break
                        started = struct.unpack("!i", buffer[4:8])[0] == 196608
                        buffer = buffer[length:]
                        continue
                    if len(buffer) < 5:
                        break
                    (length,) = struct.unpack("!i", buffer[1:5])
                    if len(buffer) < 1 + length:
                        break
                    kind = buffer[:1]
                    buffer = buffer[1 + length :]
                    if kind in (b"E", b"Q"):
                        with self.lock:
                            self.statements += 1
                    elif kind == b"P":
                        with self.lock:
                            self.parses += 1
                server.sendall(chunk)
        except OSError:
            pass
        for s in (client, server):
            try:
                s.close()
            except OSError:
                pass

    def _down(self, server: socket.socket, client: socket.socket, answered: list[bool]) -> None:
        try:
            while chunk := server.recv(65536):
                answered[0] = True
                client.sendall(chunk)
        except OSError:
            pass


# -- the runs ------------------------------------------------------------------------


class Side:
    def __init__(self, name: str, saver: Any, app: str, graph: Any) -> None:
        self.name, self.saver, self.app, self.graph = name, saver, app, graph
        self.log = CallLog(saver)
        self.rows: list[dict[str, float]] = []


async def one_run(graph: Any, check: Callable[[Any], None]) -> None:
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    assert "__interrupt__" in await graph.ainvoke({"messages": []}, config)
    check(await graph.ainvoke(Command(resume=True), config))


# --nice: the niceness given to this process and to the server processes of its connections (None: left alone).
NICE: list[int | None] = [None]


def set_autogroup_nice(nice: int) -> None:
    try:
        with open(f"/proc/{os.getpid()}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass


def renice(pids: list[int]) -> None:
    """Give the server processes ``pids`` this process's ``--nice`` (a loaded machine then hinders both sides less)."""
    if NICE[0] is not None:
        for pid in pids:
            try:
                os.setpriority(os.PRIO_PROCESS, pid, NICE[0])
            except OSError:
                pass


def sampled(server: pg_cpu.ServerCPU, app: str, work: Callable[[], object], n: int) -> dict[str, float]:
    """Run ``work``; wall, CPU by thread class, server CPU (of ``app``'s sessions) and switches, each over ``n``."""
    pids = server.pids(app)
    renice(pids)
    s0, t0, w0 = server.ns_of(pids), threads(), time.perf_counter()
    work()
    w1, t1, s1 = time.perf_counter(), threads(), server.ns_of(server.pids(app))
    row = {k: v / n for k, v in thread_delta(t0, t1).items()}
    row["server"] = pg_cpu.spent_ns(s0, s1) / n
    row["wall"] = (w1 - w0) * 1e9 / n
    return row


def measure(loop: asyncio.AbstractEventLoop, side: Side, runs: int, server: pg_cpu.ServerCPU, check: Any) -> None:
    side.log.reset()

    def work() -> None:
        for _ in range(runs):
            loop.run_until_complete(one_run(side.graph, check))

    row = sampled(server, side.app, work, runs)
    for name, times in side.log.times.items():
        row[f"n {name}"] = len(times) / runs
        row[f"us {name}"] = statistics.median(times) * 1e6 if times else 0.0
    side.rows.append(row)


def report(sides: list[Side]) -> None:
    keys = ["wall", "loop", "durastate workers", "other threads", "server", "switches"]
    keys += [f"switches, {k}" for k in ("loop", "durastate workers", "other threads")]
    keys += [f"{p} {c}" for c in SAVER_CALLS for p in ("n", "us")]
    print("| per graph run (median over rounds) | " + " | ".join(s.name for s in sides) + " |")
    print("|---|" + "---|" * len(sides))
    for key in keys:
        cells = []
        for s in sides:
            values = [r[key] for r in s.rows]
            med = statistics.median(values)
            if key in ("wall", "loop", "durastate workers", "other threads", "server"):
                cells.append(f"{med / 1e6:.2f} ms ({min(values) / 1e6:.2f}-{max(values) / 1e6:.2f})")
            elif key.startswith("us "):
                cells.append(f"{med:.0f} us ({min(values):.0f}-{max(values):.0f})")
            else:
                cells.append(f"{med:.1f}")
        label = {"loop": "CPU, loop thread", "durastate workers": "CPU, durastate workers"}.get(key, key)
        label = {"other threads": "CPU, other threads", "server": "CPU, server processes"}.get(label, label)
        print(f"| {label} | " + " | ".join(cells) + " |")


async def call_ops(saver: Any, chat_cls: Any) -> dict[str, Callable[[], Awaitable[None]]]:
    """One saver call per op, as bench/langgraph.py makes them (reads on a thread nobody writes any more)."""
    reader, writer, tasks = chat_cls(saver), chat_cls(saver), chat_cls(saver)
    await reader.apreload(20)
    await tasks.apreload(1)

    async def put() -> None:
        writer.config = await saver.aput(*writer.next_put())

    async def put_writes() -> None:
        await saver.aput_writes(*tasks.writes())

    async def get_tuple() -> None:
        await saver.aget_tuple(reader.latest())

    async def list10() -> None:
        [t async for t in saver.alist(reader.latest(), limit=10)]

    return {"aput": put, "aput_writes": put_writes, "aget_tuple": get_tuple, "alist(limit 10)": list10}


async def wire_counts(saver: Any, relay: Relay, calls: int, chat_cls: Any) -> dict[str, tuple[float, float]]:
    """Round trips and statements per call, each call alone (after a warm-up that prepares statements)."""
    out: dict[str, tuple[float, float]] = {}
    for name, op in (await call_ops(saver, chat_cls)).items():
        for _ in range(3):
            await op()
        f0, s0, _ = relay.counts()
        for _ in range(calls):
            await op()
        f1, s1, _ = relay.counts()
        out[name] = ((f1 - f0) / calls, (s1 - s0) / calls)
    return out


async def busy_loop(stop: asyncio.Event, slice_s: float) -> int:
    """Keep the loop's thread busy in Python, ``slice_s`` at a time, yielding to the loop between slices.

    What a graph run does to its loop between saver calls (LangGraph's own Python), made steady.
    """
    slices = 0
    while not stop.is_set():
        end = time.perf_counter() + slice_s
        while time.perf_counter() < end:
            pass
        slices += 1
        await asyncio.sleep(0)
    return slices


def side_by_side(
    args: argparse.Namespace, bench: Any, loop: asyncio.AbstractEventLoop, savers: list[tuple[str, Any, str]]
) -> Iterator[tuple[int, str, str, str, Callable[[], Awaitable[None]]]]:
    """(round, op, side, application name, one call) for every op and side, the side order alternating by round."""
    ops = {name: loop.run_until_complete(call_ops(saver, bench.Chat)) for name, saver, _ in savers}
    for round_no in range(args.rounds + 1):
        for op in ops[savers[0][0]]:
            shift = round_no % len(savers)
            for name, _, app in savers[shift:] + savers[:shift]:
                yield round_no, op, name, app, ops[name][op]


def busy(
    args: argparse.Namespace, bench: Any, loop: asyncio.AbstractEventLoop, savers: list[tuple[str, Any, str]]
) -> None:
    """Each call, back to back from one coroutine, while another keeps the loop busy: wall per call."""
    walls: dict[tuple[str, str], list[float]] = {}
    for round_no, op, name, _, run in side_by_side(args, bench, loop, savers):

        async def many(run: Callable[[], Awaitable[None]] = run) -> float:
            stop = asyncio.Event()
            burner = asyncio.ensure_future(busy_loop(stop, args.busy / 1e3))
            await asyncio.sleep(0)
            start = time.perf_counter()
            for _ in range(args.calls):
                await run()
            took = time.perf_counter() - start
            stop.set()
            await burner
            return took

        took = loop.run_until_complete(many())
        if round_no:  # round 0 warms up
            walls.setdefault((op, name), []).append(took * 1e6 / args.calls)
    print(f"\n| each call, the loop busy in {args.busy:g} ms slices | side | wall us per call, median (range) |")
    print("|---|---|---|")
    for (op, name), found in walls.items():
        print(f"| {op} | {name} | {statistics.median(found):.0f} ({min(found):.0f}-{max(found):.0f}) |")


def alone(
    args: argparse.Namespace,
    bench: Any,
    loop: asyncio.AbstractEventLoop,
    savers: list[tuple[str, Any, str]],
    server: pg_cpu.ServerCPU,
) -> None:
    """Each call alone, back to back from one coroutine: wall and CPU per call, by thread, and switches."""
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    for round_no, op, name, app, run in side_by_side(args, bench, loop, savers):

        async def many(run: Callable[[], Awaitable[None]] = run) -> None:
            for _ in range(args.calls):
                await run()

        row = sampled(server, app, lambda many=many: loop.run_until_complete(many()), args.calls)
        if round_no:  # round 0 warms up
            rows.setdefault((op, name), []).append(row)
    keys = ["wall", "loop", "durastate workers", "other threads", "server", "switches"]
    keys += [f"switches, {k}" for k in ("loop", "durastate workers", "other threads")]
    print("\n| each call alone, per call (median of rounds) | side | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for (op, name), found in rows.items():
        cells = []
        for key in keys:
            med = statistics.median(r[key] for r in found)
            cells.append(f"{med:.1f}" if key.startswith("switches") else f"{med / 1e3:.0f} us")
        print(f"| {op} | {name} | " + " | ".join(cells) + " |")


def wire(args: argparse.Namespace, bench: Any) -> None:
    base = args.postgres_url
    parts = urlsplit(base)
    relay = Relay((parts.hostname or "127.0.0.1", parts.port or 5432))
    loop = asyncio.new_event_loop()
    ours_url, ours_schema = postgres_server.create_schema(base)
    theirs_url, theirs_schema = postgres_server.create_schema(base)
    DurastateSaver.from_url(ours_url).close()  # migrate without the relay
    ours = DurastateSaver.from_url(relay.url(ours_url), min_connections=1, max_connections=1)
    cm = AsyncPostgresSaver.from_conn_string(relay.url(theirs_url))
    theirs = loop.run_until_complete(cm.__aenter__())
    try:
        loop.run_until_complete(theirs.setup())
        results = {
            name: loop.run_until_complete(wire_counts(s, relay, args.calls, bench.Chat))
            for name, s in (("durastate", ours), ("AsyncPostgresSaver", theirs))
        }
        for name, s in (("durastate", ours), ("AsyncPostgresSaver", theirs)):
            graph = bench.agent_graph(s)
            loop.run_until_complete(one_run(graph, bench.check_run))  # statements prepared
            f0, s0, _ = relay.counts()
            runs = 3
            for _ in range(runs):
                loop.run_until_complete(one_run(graph, bench.check_run))
            f1, s1, _ = relay.counts()
            results[name]["graph run"] = ((f1 - f0) / runs, (s1 - s0) / runs)
    finally:
        loop.run_until_complete(cm.__aexit__(None, None, None))
        ours.close()
        loop.close()
        postgres_server.drop_schema(base, ours_schema)
        postgres_server.drop_schema(base, theirs_schema)
    print(
        "\n| per call (graph run: per run), steady state | durastate round trips | statements "
        "| AsyncPostgresSaver round trips | statements |"
    )
    print("|---|---|---|---|---|")
    for op in results["durastate"]:
        d, t = results["durastate"][op], results["AsyncPostgresSaver"][op]
        print(f"| {op} | {d[0]:.2f} | {d[1]:.2f} | {t[0]:.2f} | {t[1]:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="graph runs per side and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50, help="--wire: calls per op")
    parser.add_argument("--wire", action="store_true", help="count round trips and statements per call instead")
    parser.add_argument("--alone", action="store_true", help="time each saver call alone instead of graph runs")
    parser.add_argument(
        "--busy",
        type=float,
        help="time each saver call while another coroutine keeps the loop busy in slices of this many ms",
    )
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval (seconds) for the whole run")
    parser.add_argument(
        "--nice",
        type=int,
        help="run this process (every thread) and its connections' server processes at this niceness "
        "(e.g. -20 as root: nearer a quiet machine's scheduling on a loaded one)",
    )
    parser.add_argument("--postgres-url", default=_postgres.postgres_url())
    parser.add_argument("--baseline-src", help="another durastate tree's src: its DurastateSaver as a third side")
    args = parser.parse_args()
    bench = _load_graph_bench()
    if args.nice is not None:  # before any thread starts: threads inherit it
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
        NICE[0] = args.nice
        # With autogroups (CONFIG_SCHED_AUTOGROUP) niceness counts within a group: the group's too (the
        # session's: put back at exit).
        set_autogroup_nice(args.nice)
        atexit.register(set_autogroup_nice, 0)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    print(f"# bench/langgraph_profile.py {' '.join(sys.argv[1:])}\n")
    if args.wire:
        wire(args, bench)
        return 0
    base = args.postgres_url
    server = pg_cpu.ServerCPU(base)
    loop = asyncio.new_event_loop()
    ours_url, ours_schema = postgres_server.create_schema(base)
    theirs_url, theirs_schema = postgres_server.create_schema(base)
    ours = DurastateSaver.from_url(pg_cpu.with_application_name(ours_url, "bench-durastate"))
    cm = AsyncPostgresSaver.from_conn_string(pg_cpu.with_application_name(theirs_url, "bench-langgraph"))
    theirs = loop.run_until_complete(cm.__aenter__())
    schemas: list[str] = []  # --baseline-src's
    closing: list[Any] = []
    try:
        loop.run_until_complete(theirs.setup())
        savers = [("durastate", ours, "bench-durastate"), ("AsyncPostgresSaver", theirs, "bench-langgraph")]
        baseline = None
        if args.baseline_src:
            load_baseline(args.baseline_src)
            base_url, base_schema = postgres_server.create_schema(base)
            schemas.append(base_schema)
            baseline = baseline_module("integrations.langgraph").DurastateSaver.from_url(
                pg_cpu.with_application_name(base_url, "bench-baseline")
            )
            closing.append(baseline)
            savers.append(("durastate baseline", baseline, "bench-baseline"))
        if args.busy is not None:
            busy(args, bench, loop, savers)
            return 0
        if args.alone:
            alone(args, bench, loop, savers, server)
            return 0
        sides = [
            Side("durastate", ours, "bench-durastate", bench.agent_graph(ours)),
            Side("AsyncPostgresSaver", theirs, "bench-langgraph", bench.agent_graph(theirs)),
        ]
        if baseline is not None:
            sides.append(Side("durastate baseline", baseline, "bench-baseline", bench.agent_graph(baseline)))
        for side in sides:  # warm-up: connections, prepared statements, executor threads
            for _ in range(3):
                loop.run_until_complete(one_run(side.graph, bench.check_run))
        for round_no in range(args.rounds):
            shift = round_no % len(sides)
            for side in sides[shift:] + sides[:shift]:
                measure(loop, side, args.runs, server, bench.check_run)
        report(sides)
        for other in sides[1:]:
            ratios = [t["wall"] / d["wall"] for d, t in zip(sides[0].rows, other.rows, strict=True)]
            print(
                f"\ngraph runs/s durastate / {other.name} (wall, per round): {statistics.median(ratios):.2f}x "
                f"({min(ratios):.2f}-{max(ratios):.2f})"
            )
    finally:
        for saver in closing:
            saver.close()
        for schema in schemas:
            postgres_server.drop_schema(base, schema)
        loop.run_until_complete(cm.__aexit__(None, None, None))
        ours.close()
        loop.close()
        server.close()
        postgres_server.drop_schema(base, ours_schema)
        postgres_server.drop_schema(base, theirs_schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
