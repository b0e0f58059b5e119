"""CPU of one push + claim + ack on a SQLite file, against the same statements run raw (issue 26, pain 10).

    .venv/bin/python bench/queue_cpu.py [--ops 10000] [--rounds 7] [--src DIR ...]
    valgrind --tool=callgrind ... bench/queue_cpu.py --only PATH --ops N   (instructions: see below)

One process, no contention: the CPU an operation costs bounds the
throughput of many writer processes on few cores (``bench/writers.py
--workload queue``), so this is the load-independent figure behind it.
Per path, the CPU time (``time.process_time``) of ``--ops`` rounds of
push one 100-byte item, claim it (30 s lease), ack it, on a fresh file:

* ``queue``: ``store.queues.push`` / ``claim`` / ``Claim.ack``;
* ``push``, ``claim``, ``ack``: the same loop, one step through the facet
  and the other two raw on the store's connection (``step - raw-ds`` is
  that step's cost above its statement);
* ``engine``: the three statements through ``store.engine`` (``execute``,
  ``one``, ``execute``), bound as the facet binds them;
* ``raw-ds``: durastate's three statements (``PUSH``, ``CLAIM``, ``ACK``,
  as the facet binds them) on the store's own table, through
  ``sqlite3`` directly;
* ``raw``: bench/writers.py's raw statements on its own table (what the
  writers benchmark races; its claim never redelivers an expired lease);
* ``raw-leased``: bench/writers.py's ``raw-leased`` statements (the
  cheapest we know for a queue that does) on their own table.

Each ``--src`` (a folder holding ``durastate/``; default: this checkout's
``src``) runs in its own worker process; the workers take turns round by
round, so load elsewhere lands on all of them. Reported: the median and
range over rounds of microseconds per push+claim+ack, and ``raw / queue``.

``--only PATH`` runs one path once in this process and prints nothing but
its time: for ``valgrind --tool=callgrind`` (run it with two ``--ops``
counts; the difference of the total instruction counts over the
difference of the counts is the instructions per operation, free of
start-up).
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _cpu_turns import arguments, serve, take_turns  # noqa: E402  (bench/_cpu_turns.py)

VALUE = b"v" * 100
LEASE_MS = 30_000
PATHS = ("queue", "push", "claim", "ack", "engine", "raw-ds", "raw", "raw-leased")


def _one_path(path_name: str, ops: int, wal_limit: float | None = None) -> float:
    """CPU seconds of ``ops`` push+claim+ack through ``path_name`` on a fresh store file."""
    import durastate
    from durastate.engines import sqlite_wal
    from durastate.queues.statements import ACK, CLAIM, PUSH

    # bench/writers.py's raw statements (it imports durastate from DURASTATE_BENCH_SRC: _use_src).
    from writers import (
        RAW_ACK,
        RAW_CLAIM,
        RAW_LEASED_ACK,
        RAW_LEASED_CLAIM,
        RAW_LEASED_DDL,
        RAW_LEASED_PUSH,
        RAW_PUSH,
        RAW_QUEUE_DDL,
    )

    if wal_limit is not None:
        sqlite_wal.LIMIT = int(wal_limit * 2**20)

    with tempfile.TemporaryDirectory() as folder:
        file = os.path.join(folder, "queue.db")
        store = durastate.open(file)
        queues = store.queues
        try:
            if path_name in ("raw", "raw-leased"):
                conn = sqlite3.connect(os.path.join(folder, "raw.db"), isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                for ddl in RAW_QUEUE_DDL if path_name == "raw" else RAW_LEASED_DDL:
                    conn.execute(ddl)
                start = time.process_time()
                if path_name == "raw":
                    for _ in range(ops):
                        now = int(time.time() * 1000)
                        conn.execute(RAW_PUSH, ("jobs", VALUE, now))
                        row = conn.execute(RAW_CLAIM, (now + LEASE_MS, "jobs", now)).fetchone()
                        if row is not None:
                            conn.execute(RAW_ACK, (row[0],))
                else:  # writers.py's raw-leased loop
                    for _ in range(ops):
                        now = int(time.time() * 1000)
                        conn.execute(RAW_LEASED_PUSH, ("jobs", VALUE, now))
                        row = conn.execute(RAW_LEASED_CLAIM, (now + LEASE_MS, "jobs", now)).fetchone()
                        if row is not None and conn.execute(RAW_LEASED_ACK, (row[0], row[2])).rowcount != 1:
                            raise AssertionError("raw-leased: an ack of a live lease deleted nothing")
                spent = time.process_time() - start
                conn.close()
                return spent
            # durastate's statements, as the engine compiles and binds them (bytes as bytearray).
            push_sql, claim_sql, ack_sql = (store.engine.sql(s) for s in (PUSH, CLAIM, ACK))
            if path_name == "raw-ds":
                # A plain connection, as raw's (SQLite's own checkpoints); the store's stays idle.
                conn = sqlite3.connect(file, isolation_level=None)
                conn.execute("PRAGMA synchronous=NORMAL")
            else:
                # The store's own connection (the thread's): a second one writing the same
                # file would make each reload the other's page cache; the facet's writes
                # among them bound the WAL.
                conn = store.engine._thread_connection()  # type: ignore[attr-defined]
            queue = bytearray(b"jobs")
            value = bytearray(VALUE)
            floor = int(time.time() * 1000) - 1000
            # The claim's (queue, now, floor) per range of the claim index it
            # searches: one before the lanes (docs/decisions.md "lanes"), two since.
            ranges = (claim_sql.count("?") - 2) // 3

            def raw_push() -> None:
                now = int(time.time() * 1000)
                conn.execute(push_sql, (queue, value, now, 5, now))

            def raw_claim() -> tuple[int, bytes]:
                now = int(time.time() * 1000)
                token = bytearray(os.urandom(16))
                row = conn.execute(claim_sql, (token, now + LEASE_MS, *(queue, now, floor) * ranges)).fetchone()
                return row[0], token

            def raw_ack(item: Any) -> None:
                if not isinstance(item, tuple):  # the facet's Claim ("claim"): its id and token
                    item = (item.id, bytearray(item._token))
                conn.execute(ack_sql, item)

            if path_name == "engine":
                engine = store.engine
                # Blobs as the facet hands them (a tree from before Engine.blob_binding: the bytes).
                blob = engine.blob_binding() if hasattr(engine, "blob_binding") else bytes
                jobs = blob(b"jobs")

                def raw_push() -> None:
                    now = int(time.time() * 1000)
                    engine.execute(push_sql, (jobs, blob(VALUE), now, 5, now))

                def raw_claim() -> tuple[int, bytes]:
                    now = int(time.time() * 1000)
                    token = blob(os.urandom(16))
                    row = engine.one(claim_sql, (token, now + LEASE_MS, *(jobs, now, floor) * ranges))
                    assert row is not None
                    return row[0], token

                def raw_ack(item: Any) -> None:
                    engine.execute(ack_sql, item)

            push = (lambda: queues.push("jobs", [VALUE])) if path_name in ("queue", "push") else raw_push
            claim: Any = (lambda: queues.claim("jobs", lease=30)) if path_name in ("queue", "claim") else raw_claim
            ack: Any = (lambda c: c.ack()) if path_name in ("queue", "ack") else raw_ack
            if path_name == "ack":
                # The facet's ack of a raw claim: a Claim carrying the raw claim's token.
                from durastate.queues.facet import Claim

                def claim() -> Claim:
                    item_id, token = raw_claim()
                    return Claim(queues, b"jobs", item_id, VALUE, 1, bytes(token), 0, LEASE_MS)

            # warm: the statements compiled, the floor read
            push()
            ack(claim())
            start = time.process_time()
            for _ in range(ops):
                push()
                ack(claim())
            return time.process_time() - start
        finally:
            store.close()


def _use_src(src: str) -> None:
    """Import durastate from ``src`` (and bench/writers.py, which imports it too)."""
    os.environ["DURASTATE_BENCH_SRC"] = src
    sys.path.insert(0, src)
    import durastate

    assert Path(durastate.__file__).resolve().is_relative_to(Path(src).resolve()), durastate.__file__


def _worker(src: str, wal_limit: float | None) -> None:
    """Serve ``{"path": ..., "count": ...}`` lines on stdin (push+claim+ack) with CPU seconds on stdout."""
    _use_src(src)
    serve(src, lambda path_name, ops: _one_path(path_name, ops, wal_limit))


def main() -> None:
    parser = arguments(__doc__, "ops", 10000, PATHS)
    parser.add_argument("--paths", default=",".join(PATHS), help="the paths to run (comma-separated)")
    parser.add_argument("--wal-limit", type=float, help="durastate's WAL limit in MiB (engines/sqlite_wal.LIMIT)")
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.wal_limit)
        return
    sources = args.src or [str(HERE.parent / "src")]
    if args.only:
        _use_src(sources[0])
        print(f"{_one_path(args.only, args.ops, args.wal_limit):.6f}")
        return
    paths = [p for p in args.paths.split(",") if p]
    limit = ["--wal-limit", str(args.wal_limit)] if args.wal_limit else []
    spent = take_turns(__file__, sources, paths, args.ops, args.rounds, limit)
    print(
        f"SQLite {sqlite3.sqlite_version}, {args.ops} push+claim+ack x {args.rounds} rounds,"
        f" CPU us per push+claim+ack (median, range), load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    for w, src in enumerate(sources):
        for path_name in paths:
            values = spent[(w, path_name)]
            median = statistics.median(values)
            print(f"  {src:40s} {path_name:10s} {median:6.2f}  ({min(values):.2f}-{max(values):.2f})")
        for raw in ("raw", "raw-leased"):
            if raw in paths and "queue" in paths:
                ratios = [r / k for r, k in zip(spent[(w, raw)], spent[(w, "queue")], strict=True)]
                print(f"  {src:40s} {raw}/queue {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
