"""Benchmark of ``store.records`` on both engines (``make bench-records``).

Contenders per engine, each on its own fresh, identically migrated database:

* ``durastate``: ``store.records`` through its public API;
* ``raw``: a plain driver connection (``sqlite3`` configured as durastate
  configures its own: WAL, ``synchronous=NORMAL``, autocommit with explicit
  ``BEGIN IMMEDIATE``; ``psycopg`` in autocommit with one transaction per
  batch) running *the very statement texts* the facet compiled (read from
  the facet object) with the same rows. It does no validation, no id or
  sequence bookkeeping: whatever durastate does beyond that is the cost of
  the contract (one atomic, validated batch with a gap-free sequence).

Ops:

* ``commit-1`` / ``commit-10``: a batch of 1 / 10 new entries. Raw runs
  the one statement durastate runs for them (since records schema 3 the
  entry rows claim their own ids: ``insert_entries_sql``, one multi-row
  ``INSERT ... RETURNING`` that skips ids another type holds) in one
  transaction. Target: durastate >= 0.8x raw.
* ``commit-1+seq`` / ``commit-10+seq`` (informational, no target): the same
  against ``raw+seq``, which also takes the batch's commit sequence from
  the ``records`` row of ``{p}sequence`` (the facet's compiled ``UPDATE ...
  RETURNING``) and stores it in the entry rows, as the contract requires
  (a gap-free, commit-ordered sequence). Plain raw skips that work, and on
  SQLite it is one more page written to the WAL per commit.
* ``scan-fork-10``: the newest 50 entries seen from a conversation at the
  end of a 10-deep fork chain (5 entries per conversation). Raw runs the
  same chain query and per-segment entry queries.
* ``doc-read-0/10/1000``: a current read of a document with 0, 10 and
  1,000 deltas written since its creation, each compared with the 0-delta
  read (target: within 2x, i.e. ratio >= 0.5).

Method: one untimed warm-up, then ``--rounds`` rounds; in each round every
contender runs the op ``--calls`` times, in an order that alternates from
round to round. Reported: median calls/s and the median of the per-round
ratios (paired, so drift on the machine cancels). On SQLite the clock is
the thread's CPU time (``time.thread_time``: every contender's work runs in
this thread, and a machine shared with other work makes wall time noisy);
on PostgreSQL it is wall time (the server's work is elsewhere).
``--clock wall`` times SQLite by the wall clock too.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import durastate
from _records_common import entry_value, fork_chain, fork_scan
from durastate.engines.base import NEXT_VALUE, READ
from durastate.records import COMMIT_SEQUENCE, INSERT_ENTRY, Records

SEQUENCE = (COMMIT_SEQUENCE,)

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
COMMIT_TARGET = 0.8
DOC_TARGET = 0.5  # within 2x of the 0-delta read


class Ids:
    def __init__(self, start: int) -> None:
        self.next = start

    def take(self, n: int) -> list[int]:
        out = list(range(self.next, self.next + n))
        self.next += n
        return out


# -- raw contenders -------------------------------------------------------------


def run_to_end(cur: Any, sql: str, params: Any) -> None:
    """Run one statement on a sqlite3 or psycopg cursor, reading its RETURNING rows if it has any."""
    if cur.execute(sql, params).description is not None:
        cur.fetchall()


class RawSqlite:
    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, cached_statements=512)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.cur = self.conn.cursor()

    def batch(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        cur = self.cur
        cur.execute("BEGIN IMMEDIATE")
        for sql, rows in statements:
            cur.executemany(sql, rows)
        cur.execute("COMMIT")

    def seq_batch(self, next_seq: str, make: Callable[[int], list[tuple[str, list[Any]]]]) -> None:
        """One transaction: the commit sequence, then each (statement, params) once."""
        cur = self.cur
        cur.execute("BEGIN IMMEDIATE")
        seq = cur.execute(next_seq, SEQUENCE).fetchone()[0]
        for sql, params in make(seq):
            run_to_end(cur, sql, params)
        cur.execute("COMMIT")

    def once(self, statements: list[tuple[str, list[Any]]]) -> None:
        """One transaction running each (statement, params) once (multi-row writes, RETURNING rows read)."""
        cur = self.cur
        cur.execute("BEGIN IMMEDIATE")
        for sql, params in statements:
            run_to_end(cur, sql, params)
        cur.execute("COMMIT")

    def all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self.cur.execute(sql, params).fetchall()

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=2)

    def batch(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            for sql, rows in statements:
                cur.executemany(sql, rows)

    def seq_batch(self, next_seq: str, make: Callable[[int], list[tuple[str, list[Any]]]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            row = cur.execute(next_seq, SEQUENCE).fetchone()
            assert row is not None
            for sql, params in make(row[0]):
                run_to_end(cur, sql, params)

    def once(self, statements: list[tuple[str, list[Any]]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            for sql, params in statements:
                run_to_end(cur, sql, params)

    def all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self.conn.execute(sql, params).fetchall()

    def close(self) -> None:
        self.conn.close()


# -- setups -------------------------------------------------------------------------


@contextmanager
def engines(pg_url: str | None) -> Iterator[list[tuple[str, str, str]]]:
    """(engine name, durastate URL, raw URL-or-path) pairs of fresh databases."""
    made: list[tuple[str, str, str]] = []
    cleanups: list[Callable[[], None]] = []
    with tempfile.TemporaryDirectory() as folder:
        made.append(("sqlite", str(Path(folder) / "durastate.db"), str(Path(folder) / "raw.db")))
        if pg_url:
            try:
                from durastate.testing import postgres_server

                a, schema_a = postgres_server.create_schema(pg_url)
                b, schema_b = postgres_server.create_schema(pg_url)
                cleanups.append(lambda: postgres_server.drop_schema(pg_url, schema_a))
                cleanups.append(lambda: postgres_server.drop_schema(pg_url, schema_b))
                made.append(("postgres", a, b))
            except Exception as exc:
                print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        try:
            yield made
        finally:
            for cleanup in cleanups:
                cleanup()


def timed(fn: Callable[[], None], calls: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(calls):
        fn()
    return calls / (clock() - start)


def compare(
    name: str, pair: dict[str, Callable[[], None]], calls: int, rounds: int, clock: Callable[[], float]
) -> dict[str, Any]:
    """Median calls/s (by ``clock``) per contender and the median per-round ratio first/second."""
    names = list(pair)
    for fn in pair.values():
        fn()  # warm-up
    rates: dict[str, list[float]] = {n: [] for n in names}
    ratios: list[float] = []
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        got = {n: timed(pair[n], calls, clock) for n in order}
        for n in names:
            rates[n].append(got[n])
        ratios.append(got[names[0]] / got[names[1]])
    return {
        "op": name,
        "rates": {n: statistics.median(v) for n, v in rates.items()},
        "ratio": statistics.median(ratios),
        "range": (min(ratios), max(ratios)),
    }


def bench_engine(
    engine: str, ds_url: str, raw_url: str, calls: int, rounds: int, clock: Callable[[], float]
) -> list[dict[str, Any]]:
    store = durastate.open(ds_url)
    durastate.open(raw_url).close()  # the same schema for the raw contender
    raw: RawSqlite | RawPostgres = RawSqlite(raw_url) if engine == "sqlite" else RawPostgres(raw_url)
    r: Records = store.records
    # The commit sequence, taken as durastate takes it (engine.next_value).
    next_seq = store.engine.sql(NEXT_VALUE)
    results = []
    try:
        r.commit([{"type": "conversation", "value": {"id": 1}}])
        raw.once([(r._commits.claim_ids[1], [1, "conversation"])])
        # raw and raw+seq share one table and one id counter, so both append
        # at its end (as durastate does): disjoint ranges made the lower one
        # insert mid-tree once the other had written above it.
        ds_ids = Ids(1_000_000)
        raw_ids = raw_seq_ids = Ids(1_000_000)

        for size in (1, 10):

            def ds_commit(size: int = size) -> None:
                r.commit([{"type": "entry", "value": entry_value(i, 1)} for i in ds_ids.take(size)])

            def raw_commit(size: int = size) -> None:
                ids = raw_ids.take(size)
                values = [entry_value(i, 1) for i in ids]
                import orjson

                params = [x for v in values for x in (v["id"], 1, 0, 1, orjson.dumps(v))]
                raw.once([(r._commits.insert_entries[size], params)])

            def raw_seq_commit(size: int = size) -> None:
                ids = raw_seq_ids.take(size)
                values = [entry_value(i, 1) for i in ids]
                import orjson

                raw.seq_batch(
                    next_seq,
                    lambda seq: [
                        (
                            r._commits.insert_entries[size],
                            [x for v in values for x in (v["id"], 1, 0, seq, orjson.dumps(v))],
                        )
                    ],
                )

            results.append(compare(f"commit-{size}", {"durastate": ds_commit, "raw": raw_commit}, calls, rounds, clock))
            results.append(
                compare(f"commit-{size}+seq", {"durastate": ds_commit, "raw+seq": raw_seq_commit}, calls, rounds, clock)
            )

        # A 10-deep fork chain, 5 entries per conversation, forked at each last entry.
        leaf = fork_chain(r)
        # The raw contender reads the same data: copy the chain's rows.
        conv_rows = store.engine.all(
            store.engine.sql(
                READ(
                    "SELECT id, owner_conversation_id, owner_task_id, parent_id, parent_at, record"
                    " FROM {p}rec_conversation WHERE id >= ?"
                )
            ),
            (10_000_000,),
        )
        entry_rows = store.engine.all(
            store.engine.sql(
                READ("SELECT id, conversation_id, head, commit_seq, record FROM {p}rec_entry WHERE id >= ?")
            ),
            (10_000_000,),
        )
        raw.batch(
            [
                (r._insert_conversation, [tuple(x) for x in conv_rows]),
                (store.engine.sql(INSERT_ENTRY), [tuple(x) for x in entry_rows]),
            ]
        )
        assert len(r.scan_entries({"conversationId": leaf}, 50)["items"]) == 50

        def ds_scan() -> None:
            r.scan_entries({"conversationId": leaf}, 50)

        def raw_scan() -> None:
            fork_scan(raw, r, leaf)

        results.append(
            compare("scan-fork-10", {"durastate": ds_scan, "raw": raw_scan}, max(1, calls // 4), rounds, clock)
        )

        # Documents with 0, 10 and 1,000 deltas since creation (full history).
        doc_ids = Ids(20_000_000)
        docs: dict[int, int] = {}
        body = {f"field{i}": {"n": i, "text": "y" * 40} for i in range(20)}
        for deltas in (0, 10, 1000):
            (doc,) = doc_ids.take(1)
            r.commit(
                [
                    {
                        "type": "document.create",
                        "record": {
                            "id": doc,
                            "kind": f"bench{deltas}",
                            "scope": {"kind": "conversation", "conversationId": 1},
                        },
                        "content": {"kind": "base", "version": 1, "value": body},
                    }
                ]
            )
            for i in range(deltas):
                op = ["s", [f"field{i % 20}", "n"], i]
                r.commit(
                    [{"type": "document.change", "id": doc, "content": {"kind": "delta", "version": 1, "ops": [op]}}]
                )
            docs[deltas] = doc
        for deltas in (0, 10, 1000):
            got = r.document(docs[deltas])
            assert got is not None and got["deltasSinceBase"] == deltas

            def read(deltas: int = deltas) -> None:
                r.document(docs[deltas])

            def read_zero() -> None:
                r.document(docs[0])

            res = compare(
                f"doc-read-{deltas}",
                {f"{deltas}-delta doc": read, "0-delta doc (again)": read_zero},
                calls,
                rounds,
                clock,
            )
            results.append(res)
    finally:
        raw.close()
        store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per contender per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--postgres-url", default=os.environ.get("DURASTATE_BENCH_POSTGRES_URL", PG_DEFAULT))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="SQLite's clock (PostgreSQL: wall)")
    args = parser.parse_args()
    print(
        f"durastate records bench: {args.rounds} rounds x {args.calls} calls; python {sys.version.split()[0]},"
        f" sqlite {sqlite3.sqlite_version}"
    )
    with engines(None if args.no_postgres else args.postgres_url) as pairs:
        for engine, ds_url, raw_url in pairs:
            cpu = engine == "sqlite" and args.clock == "cpu"
            clock = time.thread_time if cpu else time.perf_counter
            print(f"\n== {engine} ({'thread CPU' if cpu else 'wall'} time) ==")
            print(f"{'op':<14} {'durastate/s':>12} {'reference/s':>12} {'ratio':>7} {'range':>13}  target")
            for res in bench_engine(engine, ds_url, raw_url, args.calls, args.rounds, clock):
                (a, ra), (b, rb) = res["rates"].items()
                target = (
                    COMMIT_TARGET
                    if res["op"].startswith("commit") and not res["op"].endswith("+seq")
                    else DOC_TARGET
                    if res["op"].startswith("doc-read") and res["op"] != "doc-read-0"
                    else None
                )
                verdict = "" if target is None else (f">= {target}: " + ("PASS" if res["ratio"] >= target else "MISS"))
                lo, hi = res["range"]
                print(
                    f"{res['op']:<14} {ra:>12.0f} {rb:>12.0f} {res['ratio']:>7.2f} {lo:>6.2f}-{hi:<6.2f}  {verdict}"
                    f"   ({a} vs {b})"
                )


if __name__ == "__main__":
    main()
