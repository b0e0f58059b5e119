"""What a leased huey cycle can cost at all on SQLite: raw sqlite3 running the cheapest leased statements, side by side.

    .venv/bin/python bench/huey_leased_ceiling.py [--rounds 9] [--cycles 200] [--durability normal]

One cycle is bench/integrations.py's "huey enqueue+dequeue+ack (lease)": an
enqueue, then a dequeue that acks the previous task in one transaction with
its claim. Contenders, each on a fresh file of its own with 1,400 tasks
waiting (the bench's depth), all at ``synchronous=FULL`` (the peer's
default; durastate ``durability="full"``; ``--durability normal``: every
contender at ``synchronous=NORMAL``, the peer's connection set so too,
which shows the CPU each spends without an fsync a commit):

* ``raw leased``: raw ``sqlite3`` (autocommit, WAL) running the cheapest
  statements we know for a queue that redelivers (an INSERT; then BEGIN
  IMMEDIATE, a DELETE of the acked item by id and lease token, an UPDATE
  taking the head with a new token RETURNING it, COMMIT): the ceiling of
  any leased implementation driven from Python;
* ``raw destructive``: the same table, huey's at-most-once dequeue (INSERT;
  DELETE of the head RETURNING its payload);
* ``SqliteHuey``: huey's own ``SqliteStorage`` (enqueue, destructive
  dequeue);
* ``raw ds-statements``: raw ``sqlite3`` on a file durastate made (its
  queue table and claim index; SQLite's own checkpoints) running the
  statements ``DurastateStorage`` runs (the queues facet's PUSH; BEGIN
  IMMEDIATE, ACK, CLAIM with a floor, COMMIT) with the same parameters:
  what durastate's schema and SQL cost without its Python;
* ``durastate leased``: ``DurastateStorage`` (enqueue, dequeue, the ack
  handed to ``ack_later`` as ``DurastateHuey.execute`` does).

Each round runs ``--cycles`` cycles of each contender in turn (after 10
unmeasured); reported: the median microseconds a cycle, the process CPU
a cycle (``time.process_time`` over the contender's blocks: user and
kernel) and the median of the per-round ratios SqliteHuey / contender
(> 1: faster than the peer).
"""

from __future__ import annotations

import argparse
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from huey.storage import SqliteStorage

import durastate
from durastate.integrations.huey import DurastateStorage
from durastate.queues import statements as queue_statements

PAYLOAD = b"x" * 200  # bench/integrations.py's
DEPTH = 1400  # its 7 rounds x 200 enqueues
LEASE_MS = 300_000
QUEUE = b"bench"
TABLE = (
    "CREATE TABLE q (id INTEGER PRIMARY KEY, queue BLOB NOT NULL, payload BLOB NOT NULL,"
    " available_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, lease BLOB)"
)
INDEX = "CREATE INDEX q_next ON q (queue, available_at, id)"
PUSH = "INSERT INTO q (queue, payload, available_at) VALUES (?, ?, ?)"
ACK = "DELETE FROM q WHERE id = ? AND lease = ?"
CLAIM = (
    "UPDATE q SET lease = ?, attempts = attempts + 1, available_at = ? WHERE id = (SELECT id FROM q"
    " WHERE queue = ? AND available_at <= ? ORDER BY available_at, id LIMIT 1) RETURNING id, payload"
)
POP = (
    "DELETE FROM q WHERE id = (SELECT id FROM q WHERE queue = ? AND available_at <= ?"
    " ORDER BY available_at, id LIMIT 1) RETURNING payload"
)


def raw_cycles(folder: Path, synchronous: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """(leased cycle, destructive cycle) of raw sqlite3 on one file, the clock a counter in milliseconds."""
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(TABLE)
    conn.execute(INDEX)
    now = [int(time.time() * 1000)]
    for _ in range(DEPTH):
        conn.execute(PUSH, (QUEUE, PAYLOAD, now[0]))
    held: list[tuple[int, bytes]] = []

    def leased() -> None:
        now[0] += 1
        conn.execute(PUSH, (QUEUE, PAYLOAD, now[0]))
        conn.execute("BEGIN IMMEDIATE")
        if held:
            conn.execute(ACK, held.pop())
        token = secrets.token_bytes(16)
        row = conn.execute(CLAIM, (token, now[0] + LEASE_MS, QUEUE, now[0])).fetchone()
        conn.execute("COMMIT")
        assert row is not None and row[1] == PAYLOAD
        held.append((row[0], token))

    def destructive() -> None:
        now[0] += 1
        conn.execute(PUSH, (QUEUE, PAYLOAD, now[0]))
        row = conn.execute(POP, (QUEUE, now[0])).fetchone()
        assert row is not None and row[0] == PAYLOAD

    return leased, destructive


def ds_statements_cycle(folder: Path, durability: str) -> Callable[[], None]:
    """The leased cycle of raw sqlite3 running durastate's queue statements on a file durastate made."""
    path = folder / "ds_statements.db"
    made = durastate.open(path, durability=durability)
    made.queues.push(QUEUE, [PAYLOAD])  # makes the schema
    made.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA synchronous={durability.upper()}")
    push, ack, claim = (
        str(statement.template).format(p="ds_", skip_locked="")  # one text for every dialect (a str)
        for statement in (queue_statements.PUSH, queue_statements.ACK, queue_statements.CLAIM)
    )
    now = [int(time.time() * 1000)]
    for _ in range(DEPTH - 1):
        conn.execute(push, (QUEUE, PAYLOAD, now[0], 5, now[0]))
    floor = now[0] - 1000  # Queues._floor's: FLOOR_SLACK_MS below the earliest item
    held: list[tuple[int, bytes]] = []

    def leased() -> None:
        now[0] += 1
        conn.execute(push, (QUEUE, PAYLOAD, now[0], 5, now[0]))
        conn.execute("BEGIN IMMEDIATE")
        if held:
            conn.execute(ack, held.pop())
        token = secrets.token_bytes(16)
        row = conn.execute(claim, (token, now[0] + LEASE_MS, QUEUE, now[0], floor)).fetchone()
        conn.execute("COMMIT")
        assert row is not None and row[1] == PAYLOAD
        held.append((row[0], token))

    return leased


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="huey_ceiling_"))
    raw_leased, raw_destructive = raw_cycles(folder, args.durability.upper())
    peer = SqliteStorage("bench", filename=str(folder / "peer.db"))
    if args.durability == "normal":
        peer.conn.execute("PRAGMA synchronous=NORMAL")  # this thread's connection, the one the cycles use
    store = durastate.open(folder / "ds.db", durability=args.durability)
    leased = DurastateStorage("bench", store=store)
    for _ in range(DEPTH):
        peer.enqueue(PAYLOAD)
        leased.enqueue(PAYLOAD)

    def peer_cycle() -> None:
        peer.enqueue(PAYLOAD)
        assert peer.dequeue() == PAYLOAD

    def durastate_cycle() -> None:
        leased.enqueue(PAYLOAD)
        assert leased.dequeue() == PAYLOAD
        claim = leased.take_claim()
        assert claim is not None
        leased.ack_later(claim)

    contenders = {
        "raw leased": raw_leased,
        "raw destructive": raw_destructive,
        "SqliteHuey": peer_cycle,
        "raw ds-statements": ds_statements_cycle(folder, args.durability),
        "durastate leased": durastate_cycle,
    }
    spent: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, float] = dict.fromkeys(contenders, 0.0)
    for _ in range(args.rounds):
        for name, cycle in contenders.items():
            for _ in range(10):
                cycle()
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(args.cycles):
                cycle()
            spent[name].append((time.perf_counter() - start) / args.cycles * 1e6)
            cpu[name] += time.process_time() - cpu_start
    store.close()
    print(
        f"# sqlite {sqlite3.sqlite_version}, {args.rounds} rounds x {args.cycles} cycles,"
        f" synchronous={args.durability.upper()}"
    )
    for name, values in spent.items():
        ratios = [p / v for p, v in zip(spent["SqliteHuey"], values, strict=True)]
        cpu_us = cpu[name] / (args.rounds * args.cycles) * 1e6
        print(
            f"{name:18s} {statistics.median(values):7.0f} us a cycle  CPU {cpu_us:5.0f} us"
            f"   SqliteHuey/this {statistics.median(ratios):.2f}"
            f" ({min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
