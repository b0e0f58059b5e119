"""The sync ``DurastateSaver`` on PostgreSQL, this tree against another, per call: client CPU, server CPU, wall.

``python bench/langgraph_sync_trees.py --baseline-src DIR [--calls 200] [--rounds 7]`` makes ``put``,
``put_writes`` and ``get_tuple`` calls (``bench/langgraph.py``'s ``Chat``) with this tree's saver and with
``DIR``'s (``bench/_baseline.py``: say main's ``src``), each on a fresh schema of its own, taking turns
op by op within each round (the one going first alternating), and prints per op the medians over rounds
of: client CPU per call (``time.thread_time``: a sync call runs on the calling thread), the CPU of the
side's server processes (``bench/pg_cpu.py``), wall per call, and this tree's / the other's ratio of
each (> 1: this tree is slower). Round 0 warms up and is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_here = Path(__file__).resolve().parent
# This folder's langgraph.py would shadow the package: import the package first, then this folder's helpers.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from durastate.integrations.langgraph import DurastateSaver  # noqa: E402
from durastate.testing import postgres_server  # noqa: E402

sys.path.append(str(_here))
import _postgres  # noqa: E402
import pg_cpu  # noqa: E402
from _baseline import baseline_module, load_baseline  # noqa: E402
from langgraph_profile import _load_graph_bench  # noqa: E402


def ops(saver: Any, chat_cls: Any) -> dict[str, Callable[[], object]]:
    reader, writer, tasks = chat_cls(saver), chat_cls(saver), chat_cls(saver)
    reader.preload(20)
    tasks.preload(1)

    def put() -> None:
        writer.config = saver.put(*writer.next_put())

    return {
        "put": put,
        "put_writes": lambda: saver.put_writes(*tasks.writes()),
        "get_tuple": lambda: saver.get_tuple(reader.latest()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-src", required=True, help="another durastate tree's src")
    parser.add_argument("--calls", type=int, default=200, help="calls per op, side and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--postgres-url", default=_postgres.postgres_url())
    args = parser.parse_args()
    print(f"# bench/langgraph_sync_trees.py {' '.join(sys.argv[1:])}\n")
    bench = _load_graph_bench()
    load_baseline(args.baseline_src)
    other_saver = baseline_module("integrations.langgraph").DurastateSaver
    base = args.postgres_url
    server = pg_cpu.ServerCPU(base)
    schemas: list[str] = []
    sides: list[tuple[str, Any, str]] = []
    try:
        for name, cls in (("this tree", DurastateSaver), ("baseline", other_saver)):
            url, schema = postgres_server.create_schema(base)
            schemas.append(schema)
            app = f"bench-{name.replace(' ', '-')}"
            sides.append((name, cls.from_url(pg_cpu.with_application_name(url, app)), app))
        calls = {name: ops(saver, bench.Chat) for name, saver, _ in sides}
        got: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for round_no in range(args.rounds + 1):
            order = sides if round_no % 2 == 0 else sides[::-1]
            for op in calls[sides[0][0]]:
                for name, _, app in order:
                    run = calls[name][op]
                    before_server = server.ns(app)
                    cpu0, wall0 = time.thread_time(), time.perf_counter()
                    for _ in range(args.calls):
                        run()
                    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
                    server_s = pg_cpu.spent_ns(before_server, server.ns(app)) / 1e9
                    if round_no:
                        got.setdefault((op, name), []).append(
                            (cpu * 1e6 / args.calls, server_s * 1e6 / args.calls, wall * 1e6 / args.calls)
                        )
        print("| op | side | client CPU us | server CPU us | wall us |")
        print("|---|---|---|---|---|")
        for (op, name), rows in got.items():
            cols = [statistics.median(r[i] for r in rows) for i in range(3)]
            print(f"| {op} | {name} | {cols[0]:.0f} | {cols[1]:.0f} | {cols[2]:.0f} |")
        print("\n| op | this tree / baseline: client CPU, median (range) | server CPU | wall |")
        print("|---|---|---|---|")
        for op in calls[sides[0][0]]:
            mine, theirs = got[(op, sides[0][0])], got[(op, sides[1][0])]
            cells = []
            for i in range(3):
                ratios = [a[i] / b[i] for a, b in zip(mine, theirs, strict=True) if b[i]]
                cells.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
            print(f"| {op} | {' | '.join(cells)} |")
    finally:
        for _, saver, _ in sides:
            saver.close()
        server.close()
        for schema in schemas:
            postgres_server.drop_schema(base, schema)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
