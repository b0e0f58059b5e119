"""records.commit of batches with documents on PostgreSQL: microseconds per commit, and round trips.

    DURASTATE_BENCH_POSTGRES_URL=postgresql://... PYTHONPATH=<tree>/src .venv/bin/python \\
        bench/records_document_commits.py [--rounds 5] [--turns 200]

The commits a pi-durable agent turn makes (its Harness through ``compat.pi_durable``), written directly:
a conversation opened with five documents, then per turn an entry + task + document change, a change of
the live-output document alone (a tool's progress), a task update alone. Each round takes a fresh store
(a random table prefix, left behind: use a throwaway database) and times every commit after the first
turn (statements prepared); reported per kind: median microseconds of the round medians, with the spread,
and the round trips of one commit counted on the wire by a relay (``tests/postgres/proxy.py``).
PYTHONPATH picks the tree measured: run two trees one after the other, alternating, for a ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durastate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))
from proxy import CuttingProxy

URL = os.environ["DURASTATE_BENCH_POSTGRES_URL"]
SCOPE = {"kind": "conversation", "conversationId": 1}
DOCUMENTS = 5  # ids 2..6, as pi-durable's conversation opens


def _create(id: int) -> dict[str, Any]:
    record = {"id": id, "kind": f"pi.doc{id}", "scope": SCOPE, "history": "latest", "fork": "initial"}
    return {"type": "document.create", "record": record, "content": {"version": 1, "kind": "base", "value": {}}}


def _change(id: int, n: int) -> dict[str, Any]:
    return {"type": "document.change", "id": id, "content": {"version": 1, "kind": "delta", "ops": [["s", ["n"], n]]}}


def _task(id: int, status: str) -> dict[str, Any]:
    value = {"id": id, "conversationId": 1, "kind": "tool", "state": {"status": status}}
    return {"type": "task", "value": {**value, "abortRequested": False, "background": False}}


def _entry(id: int) -> dict[str, Any]:
    return {"type": "entry", "value": {"id": id, "conversationId": 1, "kind": "pi.message"}}


class Turns:
    """The commits of successive turns, on one store."""

    def __init__(self, store: durastate.Store) -> None:
        self.records = store.records
        self.records.commit([{"type": "conversation", "value": {"id": 1}}, *map(_create, range(2, 2 + DOCUMENTS))])
        self.next_id = 100
        self.n = 0

    def kinds(self) -> dict[str, Callable[[], object]]:
        def entry_task_change() -> object:
            self.next_id += 2
            self.n += 1
            writes = [_entry(self.next_id), _task(self.next_id + 1, "running"), _change(2, self.n)]
            return self.records.commit(writes)

        def change() -> object:
            self.n += 1
            return self.records.commit([_change(3, self.n)])

        def task() -> object:
            return self.records.commit([_task(self.next_id + 1, "done")])

        return {"entry+task+change": entry_task_change, "change": change, "task": task}


def _round_trips() -> dict[str, int]:
    relay = CuttingProxy(("127.0.0.1", 5432) if "127.0.0.1" in URL else _host_port())
    relayed = URL.replace(URL.split("@", 1)[1].split("/", 1)[0], f"127.0.0.1:{relay.port}")
    prefix = "b" + uuid.uuid4().hex[:8] + "_"
    durastate.open(URL, prefix=prefix).close()
    counts = {}
    with durastate.open(relayed, prefix=prefix, min_connections=1, max_connections=1) as store:
        for name, commit in Turns(store).kinds().items():
            commit()
            commit()  # prepared
            before = relay.flights
            commit()
            counts[name] = relay.flights - before
    relay.close()
    return counts


def _host_port() -> tuple[str, int]:
    host = URL.split("@", 1)[1].split("/", 1)[0]
    name, _, port = host.partition(":")
    return name, int(port or 5432)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    print(f"durastate from {Path(durastate.__file__).parent}")
    medians: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        with durastate.open(URL, prefix="b" + uuid.uuid4().hex[:8] + "_") as store:
            kinds = Turns(store).kinds()
            for commit in kinds.values():
                commit()
            times: dict[str, list[float]] = {name: [] for name in kinds}
            for _turn in range(args.turns):
                for name, commit in kinds.items():
                    start = time.perf_counter()
                    commit()
                    times[name].append((time.perf_counter() - start) * 1e6)
            for name, values in times.items():
                medians.setdefault(name, []).append(statistics.median(values))
    trips = _round_trips()
    for name, values in medians.items():
        print(
            f"{name:18} {statistics.median(values):8.0f} us  ({min(values):.0f}-{max(values):.0f})"
            f"  round trips {trips[name]}"
        )


if __name__ == "__main__":
    main()
