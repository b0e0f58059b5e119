"""Benchmark of store.events against the raw driver running the same statements.

    .venv/bin/python bench/events.py [--postgres URL] [--rounds 21] [--ops 40] [--no-postgres]

Operations (median time per call):

* append: one event (no id) to a session: durastate vs raw sqlite3 /
  psycopg executing ``APPEND_ALONE`` as the facet compiled it (read from
  the facet object), one statement with its own commit. On SQLite that is
  the statement durastate runs; on PostgreSQL durastate runs its
  one-statement append (``append_statement``: it also creates a session
  and takes a batch, and a retry after a lost connection re-reads it), so
  there the raw side is the cheapest statement for this one case, not the
  same statement.
* claim+complete: claim one ready event (``claim_available(limit=1)``) and
  complete it without children.
* claim latency flatness: the claim+complete cycle in a session that also
  holds 1e3 versus 1e5 processed events (target: at most 1.5x).
* control: the raw append against itself (another session, same
  connection), which shows how far two identical contenders drift apart.

SQLite: the raw contender runs on durastate's own sqlite3 connection
(``store.engine._thread_connection()``), so both sides share the page cache
and the file's change counter. With a second connection, a switch between
contenders makes the next call re-read the pages the other connection
changed, work neither side's statements do (raw against the very same raw
on two connections measured 0.84x, in blocks of 40 calls).

--rounds rounds of --ops calls per contender; the contenders of one
comparison take turns call by call (order reversed every call); every call
is timed on its own and the median call is reported. Wall time and this
thread's CPU time are both shown: on SQLite all the work runs in the calling
thread; on PostgreSQL the server's work is elsewhere, so only wall time
compares.
Before timing, the SQLite run traces one claim+complete cycle on each side
(``set_trace_callback``, on the thread's and the shared writer connection;
the WAL bound's checkpoints left out) and stops if the statement sequences
differ.

SQLite runs on a file in a temporary folder; PostgreSQL on --postgres (or
DURASTATE_BENCH_POSTGRES_URL / postgresql://postgres@127.0.0.1:5432/postgres
when reachable) in a throwaway schema.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import durastate
from durastate.events.facet import random_id

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


class Raw:
    """The facet's compiled statements, executed by the bare driver."""

    def __init__(self, store: durastate.Store, conn: Any, begin: str) -> None:
        self.ev = store.events
        self.conn = conn
        self.begin = begin
        self.clock = store.engine.now_ms
        self.no_limit = store.engine.dialect.no_limit
        # PostgreSQL: the engine records an attempt row at the first write of
        # every transaction (retry safety); the raw cycle executes it too, at
        # the same place, so both sides run the same statements.
        self.attempt_sql: str | None = getattr(store.engine, "_attempt_insert", None)

    def _once(self, sql: Any, params: tuple[Any, ...]) -> list[Any]:
        """One statement with its own commit, as the engine runs it outside a transaction.

        PostgreSQL: the engine's attempt-recording variant of the write
        (``sql.companion``: the statement and its attempt row in one).
        """
        cur = self.conn.cursor()
        variant = getattr(sql, "companion", None) if self.attempt_sql is not None else None
        if variant is not None:
            cur.execute(variant, (*params, os.urandom(16), self.clock()))
        else:
            cur.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []

    def append(self, session: str) -> None:
        """What ``append`` of one event (no id, lane, cause) executes: APPEND_ALONE, one statement."""
        now = self.clock()
        self._once(self.ev._append_alone, (random_id(), "t", b'{"n":1}', now, now, session))

    def claim_complete(self, session: str) -> None:
        """What ``claim_available(limit=1)`` + ``complete_attempt`` (no children) execute.

        Two statements, each its own commit and its own clock reading, like the facet.
        """
        ev = self.ev
        now = self.clock()
        (row,) = self._once(
            ev._claim_session, (session, now, 1, now, now, "raw", now + 60_000, now + 60_000, session, now)
        )
        done = self.clock()
        self._once(ev._complete_alone, (done, row[15], "[]", session, row[1], row[15]))


def ds_append(store: durastate.Store, session: str) -> None:
    store.events.append(session, [{"type": "t", "payload": {"n": 1}}])


def ds_claim_complete(store: durastate.Store, session: str) -> None:
    (e,) = store.events.claim_available(session, "ds", ttl_ms=60_000, limit=1).events
    store.events.complete_attempt(session, e.index, e.attempt_count)


def fill(store: durastate.Store, session: str, processed: int, pending: int) -> None:
    for start in range(0, processed, 1000):
        store.events.append(
            session, [{"type": "old", "payload": i, "settled": True} for i in range(min(1000, processed - start))]
        )
    for start in range(0, pending, 1000):
        store.events.append(session, [{"type": "t", "payload": i} for i in range(min(1000, pending - start))])


def _normalised(statements: list[str]) -> list[str]:
    """Traced statement texts with literals replaced (sessions, holders and times differ by design)."""
    return [re.sub(r"\d+", "N", re.sub(r"'[^']*'", "S", sql)) for sql in statements]


# The WAL bound's checkpoints (engines.sqlite_wal), run after a write when the WAL is past its limit: upkeep,
# not the cycle's statements.
_UPKEEP = re.compile(r"PRAGMA (wal_checkpoint|busy_timeout)")


def check_same_statements(store: durastate.Store, raw: Raw) -> str:
    """SQLite: trace one cycle on each side; the statement sequences must be identical.

    durastate runs a write outside a transaction on the engine's shared
    writer connection, the rest on the thread's: both are traced.
    """
    traced: list[str] = []
    shared = store.engine._connections.shared  # type: ignore[attr-defined]
    if shared.conn is None:
        store.events.append("c-warm", [{"type": "t", "payload": 0}])  # opens the shared writer connection
    connections = {id(c): c for c in (raw.conn, shared.conn) if c is not None}.values()
    for conn in connections:
        conn.set_trace_callback(traced.append)
    try:
        ds_claim_complete(store, "c-ds")
        ds = _normalised([sql for sql in traced if not _UPKEEP.match(sql)])
        traced.clear()
        raw.claim_complete("c-raw")
        rw = _normalised([sql for sql in traced if not _UPKEEP.match(sql)])
    finally:
        for conn in connections:
            conn.set_trace_callback(None)
    if ds != rw:
        raise SystemExit("raw and durastate cycles differ:\n  " + "\n  ".join(ds) + "\nvs\n  " + "\n  ".join(rw))
    return f"the {len(ds)} statements of one claim+complete cycle are identical on both sides (traced)"


def run_engine(
    name: str, url: str, raw_conn: Callable[[durastate.Store], Any], begin: str, rounds: int, ops: int
) -> list[str]:
    store = durastate.open(url)
    raw = Raw(store, raw_conn(store), begin)
    control = Raw(store, raw.conn, begin)  # the same bare statements again: the noise floor
    results: dict[str, list[tuple[float, float]]] = {}
    for session in ("a-ds", "a-raw", "a-raw2"):
        store.events.append(session, [{"type": "seed", "payload": 0}])
    # Claim sessions: enough pending events for every round, the same for both sides.
    need = rounds * ops + 20
    fill(store, "c-ds", 0, need)
    fill(store, "c-raw", 0, need)
    fill(store, "small", 1_000, need)
    fill(store, "large", 100_000, need)
    if name == "sqlite":
        print(f"sqlite: {check_same_statements(store, raw)}", file=sys.stderr)
    groups: list[list[tuple[str, Callable[[], None]]]] = [
        [
            ("append ds", lambda: ds_append(store, "a-ds")),
            ("append raw", lambda: raw.append("a-raw")),
            ("append raw2", lambda: control.append("a-raw2")),
        ],
        [("cycle ds", lambda: ds_claim_complete(store, "c-ds")), ("cycle raw", lambda: raw.claim_complete("c-raw"))],
        [
            ("cycle 1e3", lambda: ds_claim_complete(store, "small")),
            ("cycle 1e5", lambda: ds_claim_complete(store, "large")),
        ],
    ]
    clock, cpu_clock = time.perf_counter, time.thread_time
    for _ in range(rounds):
        for group in groups:
            # The contenders of a group take turns call by call, the order
            # reversed every call, so a burst of load from elsewhere on the
            # machine hits all of them alike. Each call is timed on its own
            # and the median call is reported: the occasional call that
            # pays a WAL checkpoint or a scheduler stall (the same for
            # identical statements, but landing on whichever contender
            # commits at that moment) does not decide the ratio.
            for j in range(ops):
                for key, fn in group if j % 2 == 0 else group[::-1]:
                    start, cpu = clock(), cpu_clock()
                    fn()
                    results.setdefault(key, []).append((clock() - start, cpu_clock() - cpu))
    store.close()
    wall = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in results.items()}
    # CPU time of this thread: all of SQLite's work runs in it, so on SQLite
    # it is the load-independent measure; on PostgreSQL the server's work is
    # elsewhere and only wall time compares.
    with_cpu = name == "sqlite"

    def row(op: str, ds: str, other: str, label: str = "x") -> str:
        line = (
            f"| {name} | {op} | {wall[ds] * 1e6:.0f} us | {wall[other] * 1e6:.0f} us |"
            f" {wall[other] / wall[ds]:.2f}{label} |"
        )
        if with_cpu:
            line += f" {cpu[ds] * 1e6:.0f} us | {cpu[other] * 1e6:.0f} us | {cpu[other] / cpu[ds]:.2f}{label} |"
        else:
            line += " - | - | - |"
        return line

    return [
        row("append (durastate vs raw)", "append ds", "append raw"),
        row("claim+complete (durastate vs raw)", "cycle ds", "cycle raw"),
        row("control: append, raw vs the same raw again (noise floor)", "append raw", "append raw2"),
        row("claim+complete, session with 1e3 vs 1e5 events (both durastate)", "cycle 1e3", "cycle 1e5", "x (1e5/1e3)"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", default=os.environ.get("DURASTATE_BENCH_POSTGRES_URL", PG_DEFAULT))
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--ops", type=int, default=40, help="calls per contender and round")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(
        "| engine | operation | wall A | wall B | wall ratio B/A | CPU A | CPU B | CPU ratio B/A |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.db")

        def sqlite_conn(store: durastate.Store) -> Any:
            # durastate's own connection (WAL, synchronous=NORMAL, same caches): see the module docstring.
            return store.engine._thread_connection()  # type: ignore[attr-defined]

        for line in run_engine("sqlite", path, sqlite_conn, "BEGIN IMMEDIATE", args.rounds, args.ops):
            print(line, flush=True)
    if args.no_postgres:
        return
    try:
        import psycopg

        from durastate.testing import postgres_server

        schema_url, schema = postgres_server.create_schema(args.postgres)
    except Exception as exc:
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        return
    try:

        def pg_conn(store: durastate.Store) -> Any:
            return psycopg.connect(schema_url, autocommit=True, prepare_threshold=2)

        for line in run_engine("postgresql", schema_url, pg_conn, "BEGIN", args.rounds, max(10, args.ops // 2)):
            print(line, flush=True)
    finally:
        postgres_server.drop_schema(args.postgres, schema)


if __name__ == "__main__":
    main()
