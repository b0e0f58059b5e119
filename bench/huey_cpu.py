"""CPU per task of huey's leased cycle on PostgreSQL: durastate against huey's own PostgresStorage.

    .venv/bin/python bench/huey_cpu.py [--runs 3] [--blocks 40] [--block 10] [--url URL]

One task is what ``bench/integrations.py`` times as "huey enqueue+dequeue+ack
(lease)": ``enqueue``, ``dequeue``, and the ack ``DurastateHuey.execute``
hands to ``ack_later`` (committed by the next dequeue). Contenders, each on
a schema of its own, one connection each (durastate's pool of 1):

* ``durastate``: ``DurastateStorage`` as shipped (on PostgreSQL the ack and
  the next claim are one statement, ``Queues._ack_then_claim``);
* ``durastate-tx``: the same with the facet's other path forced (the ack
  and the claim in a transaction: BEGIN with the attempt row, the ack, the
  claim, COMMIT), what every dequeue with a waiting ack sent before;
* ``huey``: huey's ``PostgresStorage`` (``blocking=False``: INSERT and
  ``pg_notify`` to enqueue, a destructive DELETE to dequeue).

The contenders alternate every ``--block`` tasks (so both see the same load
on a busy machine), ``--blocks`` blocks each per run. CPU per task: this
process's CPU time (``time.process_time``) and the contender's server
backend's (``/proc/<pid>/schedstat``, found by ``application_name``), and
the wall time, all summed over its blocks; ratios are huey's over
durastate's (> 1: durastate cheaper or faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from huey.storage import PostgresStorage

import durastate
from _postgres import postgres_url
from durastate.integrations.huey import DurastateStorage
from pg_cpu import ServerCPU, spent_ns, with_application_name

PAYLOAD = b"x" * 200


def durastate_cycle(storage: DurastateStorage) -> Callable[[], None]:
    def task() -> None:
        storage.enqueue(PAYLOAD)
        assert storage.dequeue() == PAYLOAD
        claim = storage.take_claim()
        assert claim is not None
        storage.ack_later(claim)

    return task


def huey_cycle(storage: Any) -> Callable[[], None]:
    def task() -> None:
        storage.enqueue(PAYLOAD)
        assert storage.dequeue() == PAYLOAD

    return task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    url = args.url or postgres_url()
    tag = uuid.uuid4().hex[:8]
    schemas = {name: f"bench_hc_{name.replace('-', '_')}_{tag}" for name in ("durastate", "durastate-tx", "huey")}
    admin = psycopg.connect(url, autocommit=True)
    for schema in schemas.values():
        admin.execute(f"CREATE SCHEMA {schema}")
    server = ServerCPU(url)
    stores = []
    try:
        contenders: dict[str, Callable[[], None]] = {}
        for name in ("durastate", "durastate-tx"):
            app = f"bench-hc-{name}"
            store = durastate.open(
                with_application_name(url, app) + f"&options=-csearch_path%3D{schemas[name]}",
                min_connections=1,
                max_connections=1,
            )
            stores.append(store)
            storage = DurastateStorage("bench", store=store)
            if name == "durastate-tx":
                store.queues._ack_then_claim_sql = None  # the transaction path, as on an engine without write_ctes
            contenders[name] = durastate_cycle(storage)
        peer = PostgresStorage(
            "bench",
            dsn=with_application_name(url, "bench-hc-huey") + f"&options=-csearch_path%3D{schemas['huey']}",
            blocking=False,
        )
        contenders["huey"] = huey_cycle(peer)
        for fn in contenders.values():  # warm: tables, prepared statements, the priority registry
            for _ in range(20):
                fn()
        print(f"# python {platform_line()}, {args.runs} runs x {args.blocks} blocks x {args.block} tasks")
        print(f"{'run':>3} {'contender':<13}{'client us':>10}{'server us':>10}{'total us':>10}{'wall us':>9}")
        ratios: dict[str, list[tuple[float, float, float, float]]] = {"durastate": [], "durastate-tx": []}
        for run in range(args.runs):
            spent = {name: [0.0, 0.0, 0.0] for name in contenders}
            pids = {name: server.pids(f"bench-hc-{name}") for name in contenders}
            order = list(contenders)
            for block in range(args.blocks):
                for name in order if block % 2 == 0 else reversed(order):
                    fn = contenders[name]
                    before_server = server.ns_of(pids[name])
                    before_cpu, before_wall = time.process_time(), time.perf_counter()
                    for _ in range(args.block):
                        fn()
                    wall = time.perf_counter() - before_wall
                    cpu = time.process_time() - before_cpu
                    spent[name][0] += cpu
                    spent[name][1] += spent_ns(before_server, server.ns_of(pids[name])) / 1e9
                    spent[name][2] += wall
            tasks = args.blocks * args.block
            per = {name: [v / tasks * 1e6 for v in values] for name, values in spent.items()}
            for name, (client, backend, wall) in per.items():
                print(f"{run + 1:>3} {name:<13}{client:>10.0f}{backend:>10.0f}{client + backend:>10.0f}{wall:>9.0f}")
            h = per["huey"]
            for name in ratios:
                d = per[name]
                ratios[name].append((h[0] / d[0], h[1] / d[1], (h[0] + h[1]) / (d[0] + d[1]), h[2] / d[2]))
        if not server.available:
            print("(server CPU not readable here: client CPU only)")
        print("\nhuey / contender per task (median over runs, range): client, server, client+server, wall")
        for name, values in ratios.items():
            cells = []
            for i in range(4):
                column = [v[i] for v in values]
                cells.append(f"{statistics.median(column):.2f} ({min(column):.2f}-{max(column):.2f})")
            print(f"{name:<13}" + "  ".join(cells))
    finally:
        for store in stores:
            store.close()
        server.close()
        for schema in schemas.values():
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()


def platform_line() -> str:
    return f"{sys.version.split()[0]}, durastate {durastate.__version__}"


if __name__ == "__main__":
    main()
