"""Python bytecodes an operation executes, by function: where a doorway's Python goes, exactly and without valgrind.

    .venv/bin/python bench/bytecodes.py WORKLOAD [--ops 200] [--top 25]

WORKLOAD is one of:

* ``queue``: ``store.queues`` push one 100-byte item, claim it, ack it
  (bench/writers.py's queue workload, one process);
* ``huey`` / ``huey-peer``: huey's leased cycle (enqueue, dequeue with the
  last task's ack) through ``DurastateStorage`` / huey's own
  ``SqliteStorage`` (enqueue, destructive dequeue), 1,400 tasks waiting
  (bench/huey_leased_ceiling.py's cycle);
* ``put``: ``store.kv.put`` of one of 1,000 keys, 100-byte values;
* ``es1`` / ``es10`` and ``es1-peer`` / ``es10-peer``: an eventsourcing
  insert of 1 or 10 events through ``DurastateApplicationRecorder`` /
  eventsourcing's ``SQLiteApplicationRecorder`` (bench/es_cpu.py's).

Each runs on a fresh file at ``durability="full"`` (the peers at SQLite's
default, ``synchronous=FULL``), warms up, then runs ``--ops`` operations
under ``sys.settrace`` with opcode events on and counts the bytecodes each
Python function executes (C code, SQLite's included, is not counted).
Printed: the bytecodes per operation in all and the ``--top`` functions.
Counts do not depend on load; CPython 3.11 spends ~30 instructions a
bytecode on average, so a difference between two contenders here is most
of their difference in interpreter work (callgrind gives the whole count).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

PAYLOAD = b"x" * 100
HUEY_PAYLOAD = b"x" * 200
ES_STATE = b"x" * 200
HUEY_DEPTH = 1400
WARM_UP = 200


def queue_op(folder: Path) -> Callable[[], None]:
    import durastate

    queues = durastate.open(folder / "queue.db", durability="full").queues

    def op() -> None:
        queues.push("work", [PAYLOAD])
        claim = queues.claim("work", lease=30.0)
        assert claim is not None
        claim.ack()

    return op


def put_op(folder: Path) -> Callable[[], None]:
    import durastate

    kv = durastate.open(folder / "kv.db", durability="full").kv
    keys = [b"key%04d" % i for i in range(1000)]
    turn = iter(range(1 << 62))

    def op() -> None:
        kv.put(b"scope", b"ns", keys[next(turn) % 1000], PAYLOAD)

    return op


def huey_op(folder: Path) -> Callable[[], None]:
    import durastate
    from durastate.integrations.huey import DurastateStorage

    storage = DurastateStorage("bench", store=durastate.open(folder / "huey.db", durability="full"))
    for _ in range(HUEY_DEPTH):
        storage.enqueue(HUEY_PAYLOAD)

    def op() -> None:
        storage.enqueue(HUEY_PAYLOAD)
        assert storage.dequeue() == HUEY_PAYLOAD
        claim = storage.take_claim()
        assert claim is not None
        storage.ack_later(claim)

    return op


def huey_peer_op(folder: Path) -> Callable[[], None]:
    from huey.storage import SqliteStorage

    storage = SqliteStorage("bench", filename=str(folder / "peer.db"))
    for _ in range(HUEY_DEPTH):
        storage.enqueue(HUEY_PAYLOAD)

    def op() -> None:
        storage.enqueue(HUEY_PAYLOAD)
        assert storage.dequeue() == HUEY_PAYLOAD

    return op


def es_op(folder: Path, events: int, peer: bool) -> Callable[[], None]:
    from eventsourcing.persistence import StoredEvent

    recorder: Any
    if peer:
        from eventsourcing.persistence import InfrastructureFactory

        factory = InfrastructureFactory.construct(
            {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(folder / "es-peer.db")}
        )
        recorder = factory.application_recorder()
    else:
        import durastate
        from durastate.integrations.eventsourcing import DurastateApplicationRecorder

        recorder = DurastateApplicationRecorder(durastate.open(folder / "es.db", durability="full"))

    def op() -> None:
        originator = uuid.uuid4()
        recorder.insert_events([StoredEvent(originator, v, "topic", ES_STATE) for v in range(1, events + 1)])

    return op


WORKLOADS: dict[str, Callable[[Path], Callable[[], None]]] = {
    "queue": queue_op,
    "put": put_op,
    "huey": huey_op,
    "huey-peer": huey_peer_op,
    "es1": lambda folder: es_op(folder, 1, peer=False),
    "es10": lambda folder: es_op(folder, 10, peer=False),
    "es1-peer": lambda folder: es_op(folder, 1, peer=True),
    "es10-peer": lambda folder: es_op(folder, 10, peer=True),
}


def count_bytecodes(op: Callable[[], None], ops: int) -> collections.Counter[tuple[str, str]]:
    """Bytecodes executed by ``ops`` calls of ``op``, by (file, function)."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_qualname)] += 1
        return tracer

    sys.settrace(tracer)
    try:
        for _ in range(ops):
            op()
    finally:
        sys.settrace(None)
    return counts


def short(filename: str) -> str:
    """``filename`` from its package folder on (``durastate/...``, ``huey/...``), or its last two parts."""
    parts = Path(filename).parts
    for anchor in ("site-packages", "src"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1 :])
    return "/".join(parts[-2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if args.ops < 1:
        parser.error("--ops must be >= 1")
    op = WORKLOADS[args.workload](Path(tempfile.mkdtemp(prefix="bytecodes_")))
    for _ in range(WARM_UP):
        op()
    counts = count_bytecodes(op, args.ops)
    print(f"# {args.workload}: {sum(counts.values()) / args.ops:,.0f} bytecodes an operation ({args.ops} operations)")
    for (filename, name), count in counts.most_common(args.top):
        print(f"{count / args.ops:9.1f}  {short(filename)}:{name}")


if __name__ == "__main__":
    main()
