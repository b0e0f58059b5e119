"""Side-by-side benchmark on PostgreSQL: durastate vs raw psycopg.

Run it with ``make bench-postgres`` (or ``.venv/bin/python bench/postgres.py
--help``). The server comes from ``--url``, else
``DURASTATE_BENCH_POSTGRES_URL``, else ``DURASTATE_TEST_POSTGRES_URL``,
else ``postgresql://postgres@127.0.0.1:5432/postgres``; everything happens
in a fresh schema that is dropped at the end.

Contenders, on one schema created by ``durastate.open()``:

* ``durastate``: one ``Store`` shared by all worker threads (its pool sized
  to the worker count), driven through the public API.
* ``psycopg``: one plain psycopg connection per worker thread, autocommit,
  the same prepare threshold, running *the very statement texts* durastate
  runs, with the same parameters. For writes those texts are durastate's
  attempt-recording variants (see ``durastate.engines.postgres_attempts``), so the
  ratio measures the cost of the library around the statement.
* ``psycopg-plain``: the same, but writes run the plain statement without
  the attempt record: what a hand-written layer without retry safety would
  send. ``durastate/plain`` is the whole price of durastate, retry safety
  included.
* ``psycopg-best``: like ``psycopg-plain``, but each op runs the best
  statement known for it, written by hand (``BEST_STATEMENTS``): a key
  list as one array parameter (``= ANY``), a batch of puts as one
  ``INSERT ... SELECT FROM unnest(...)``. A ratio against our own
  statement text cannot see a bad statement; this one can.

Method: ``--rounds`` rounds; in each, every op runs for each contender
with 1, 4 and 16 worker threads, back to back, in an order that rotates
from round to round. A run is ``--ops`` calls per worker. Reported: the
median total calls/s per contender and the median of the per-round ratios.
Then claim+ack throughput of 1 and 4 consumers on a pre-filled queue (the
ratio 4/1 is the scaling target).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

import durastate
from durastate.engines.postgres import PREPARE_THRESHOLD, PostgresEngine
from durastate.testing.postgres_server import create_schema, drop_schema

SCOPE = b"bench"
NS = b"ns"
VALUE = b"v" * 100
PRELOAD = 2_000
SINGLE_TARGET = 0.9
SCALING_TARGET = 3.0
WORKER_COUNTS = (1, 4, 16)
OPS = ("put 1", "get 1", "put 100", "get 100", "scan 100", "append", "log scan 100", "counter add", "push 1", "pop")

Worker = Callable[[int, int], None]  # (worker index, call index) -> None


def _default_url() -> str:
    return (
        os.environ.get("DURASTATE_BENCH_POSTGRES_URL")
        or os.environ.get("DURASTATE_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres"
    )


class RawPsycopg:
    """Per-thread psycopg connections running durastate's statement texts."""

    def __init__(self, url: str, store: durastate.Store, *, with_attempts: bool) -> None:
        self.url = url
        self.store = store
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        self.engine = engine
        self.with_attempts = with_attempts
        # One connection per worker index, reused by every run (threads are
        # new each run; connections are not).
        self.by_worker: dict[int, psycopg.Connection[Any]] = {}
        self.local = threading.local()
        self.lock = threading.Lock()

    def conn(self) -> psycopg.Connection[Any]:
        worker: int = self.local.worker
        c = self.by_worker.get(worker)
        if c is None:
            c = psycopg.connect(self.url, autocommit=True)
            c.prepare_threshold = PREPARE_THRESHOLD
            with self.lock:
                self.by_worker[worker] = c
        return c

    def bind(self, worker: int) -> None:
        self.local.worker = worker

    def write(self, sql: str, params: tuple[Any, ...]) -> Any:
        if self.with_attempts:
            variant = sql.companion  # type: ignore[attr-defined]  # the engine's attempt-recording variant
            assert variant is not None
            return self.conn().execute(variant, (*params, os.urandom(16), int(time.time() * 1000))).fetchall()
        cur = self.conn().execute(sql, params)
        return cur.fetchall() if " RETURNING " in sql else cur.rowcount

    def read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self.conn().execute(sql, params).fetchall()

    def batch(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        conn = self.conn()
        with conn.transaction():
            if self.with_attempts:
                conn.execute(self.engine._attempt_insert, (os.urandom(16), int(time.time() * 1000)))
            with conn.cursor() as cur:
                cur.executemany(sql, rows)

    def close(self) -> None:
        for c in self.by_worker.values():
            c.close()


def durastate_ops(store: durastate.Store) -> dict[str, Worker]:
    kv, queues = store.kv, store.queues
    keys = [f"k{i:06d}".encode() for i in range(PRELOAD)]
    return {
        "put 1": lambda w, i: kv.put(SCOPE, NS, f"w{w}-{i % 500}".encode(), VALUE),
        "get 1": lambda w, i: kv.get(SCOPE, NS, keys[(w * 7919 + i) % PRELOAD]),
        "put 100": lambda w, i: kv.put_many(SCOPE, NS, [(f"w{w}-b{j}".encode(), VALUE) for j in range(100)]),
        "get 100": lambda w, i: kv.get_many(SCOPE, NS, keys[(i * 100) % (PRELOAD - 100) :][:100]),
        "scan 100": lambda w, i: list(kv.scan(SCOPE, NS, start=keys[(i * 13) % (PRELOAD - 100)], limit=100)),
        "append": lambda w, i: kv.append(SCOPE, NS, f"log{w}".encode(), VALUE),
        "log scan 100": lambda w, i: list(kv.log(SCOPE, NS, b"preloaded", after=(i * 17) % 1000, limit=100)),
        "counter add": lambda w, i: kv.incr(SCOPE, NS, f"c{w}".encode(), 1),
        "push 1": lambda w, i: queues.push(f"q{w}", [VALUE]),
        "pop": lambda w, i: queues.pop(f"pre{w}"),
    }


def raw_ops(raw: RawPsycopg, store: durastate.Store) -> dict[str, Worker]:
    """Every op bound to this worker's own connection (``raw.bind``)."""
    ops = _raw_ops(raw, store)
    return {name: _bound(raw, fn) for name, fn in ops.items()}


def _bound(raw: RawPsycopg, fn: Worker) -> Worker:
    def call(w: int, i: int) -> None:
        if i == 0:
            raw.bind(w)
        fn(w, i)

    return call


def _raw_ops(raw: RawPsycopg, store: durastate.Store) -> dict[str, Worker]:
    kv, queues = store.kv, store.queues
    keys = [f"k{i:06d}".encode() for i in range(PRELOAD)]
    no_limit = None

    def get_many(w: int, i: int) -> None:
        chunk = keys[(i * 100) % (PRELOAD - 100) :][:100]
        rows = raw.read(kv._get_many[100], (SCOPE, NS, *chunk))
        found = {k: v for k, v, _ in rows}
        [found.get(k) for k in chunk]

    def push(w: int, i: int) -> None:
        now = int(time.time() * 1000)
        raw.write(queues._push, (f"q{w}".encode(), VALUE, now, 5, now))

    _ = no_limit
    # incr binds the int64 overflow guard (old value range) when its
    # statement has one; bind the same values as durastate does for +1.
    counter_bounds: tuple[int, ...] = (-(2**63), 2**63 - 2) if kv._counter_add.count("%s") == 6 else ()
    return {
        "put 1": lambda w, i: raw.write(kv._put, (SCOPE, NS, f"w{w}-{i % 500}".encode(), VALUE, None)),
        "get 1": lambda w, i: raw.read(kv._get, (SCOPE, NS, keys[(w * 7919 + i) % PRELOAD])),
        "put 100": lambda w, i: raw.batch(
            kv._put, [(SCOPE, NS, f"w{w}-b{j}".encode(), VALUE, None) for j in range(100)]
        ),
        "get 100": get_many,
        "scan 100": lambda w, i: raw.read(
            kv._scan[(True, False, False)],
            (SCOPE, NS, keys[(i * 13) % (PRELOAD - 100)], int(time.time() * 1000), 100),
        ),
        "append": lambda w, i: raw.write(kv._append, (SCOPE, NS, f"log{w}".encode(), VALUE, int(time.time() * 1000))),
        "log scan 100": lambda w, i: raw.read(kv._log_page, (SCOPE, NS, b"preloaded", (i * 17) % 1000, 100)),
        "counter add": lambda w, i: raw.write(kv._counter_add, (SCOPE, NS, f"c{w}".encode(), 1, *counter_bounds)),
        "push 1": push,
        "pop": lambda w, i: raw.write(queues._pop, (f"pre{w}".encode(), int(time.time() * 1000))),
    }


# Hand-written statements for the ops where one exists that differs from
# durastate's text ({p}: the store's table prefix).
BEST_STATEMENTS = {
    "get 100": "SELECT key, value FROM {p}kv WHERE scope = %s AND ns = %s AND key = ANY(%s)",
    "put 100": (
        "INSERT INTO {p}kv (scope, ns, key, value)"
        " SELECT %s, %s, k, v FROM unnest(%s::bytea[], %s::bytea[]) AS t (k, v)"
        " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = NULL"
    ),
}


def best_ops(raw: RawPsycopg, store: durastate.Store) -> dict[str, Worker]:
    """``psycopg-plain``'s ops, with ``BEST_STATEMENTS`` where there is a better one."""
    prefix = store.engine.prefix
    get_many = BEST_STATEMENTS["get 100"].replace("{p}", prefix)
    put_many = BEST_STATEMENTS["put 100"].replace("{p}", prefix)
    keys = [f"k{i:06d}".encode() for i in range(PRELOAD)]

    def get_100(w: int, i: int) -> None:
        chunk = keys[(i * 100) % (PRELOAD - 100) :][:100]
        found = {k: v for k, v in raw.read(get_many, (SCOPE, NS, chunk))}
        [found.get(k) for k in chunk]

    def put_100(w: int, i: int) -> None:
        batch = [f"w{w}-b{j}".encode() for j in range(100)]
        raw.conn().execute(put_many, (SCOPE, NS, batch, [VALUE] * 100))

    ops = _raw_ops(raw, store)
    ops.update({"get 100": get_100, "put 100": put_100})
    return {name: _bound(raw, fn) for name, fn in ops.items()}


def run_threads(workers: int, calls: int, fn: Worker) -> float:
    """Calls per second of ``workers`` threads each making ``calls`` calls."""
    barrier = threading.Barrier(workers + 1)
    errors: list[BaseException] = []

    def body(w: int) -> None:
        barrier.wait()
        try:
            for i in range(calls):
                fn(w, i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return workers * calls / elapsed


def preload(store: durastate.Store, rounds: int, calls: int) -> None:
    store.kv.put_many(SCOPE, NS, [(f"k{i:06d}".encode(), VALUE) for i in range(PRELOAD)])
    for _ in range(1100):
        store.kv.append(SCOPE, NS, b"preloaded", VALUE)
    # Enough items for every pop of every contender in every round.
    per_queue = rounds * 3 * calls + calls
    for w in range(max(WORKER_COUNTS)):
        for start in range(0, per_queue, 500):
            store.queues.push(f"pre{w}", [VALUE] * min(500, per_queue - start))


def claim_ack_throughput(store: durastate.Store, consumers: int, items: int) -> float:
    name = f"claims-{uuid.uuid4().hex[:8]}"
    for start in range(0, items, 500):
        store.queues.push(name, [VALUE] * min(500, items - start), max_attempts=None)
    per = items // consumers

    def consume(w: int, i: int) -> None:
        claim = store.queues.claim(name, lease=60)
        assert claim is not None
        claim.ack()

    return run_threads(consumers, per, consume)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=_default_url())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ops", type=int, default=200, help="calls per worker per run")
    parser.add_argument("--only", action="append", help="run only these ops (repeatable)")
    parser.add_argument("--quick", action="store_true", help="1 round, 60 calls per worker")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.ops = 1, 60
    ops = [op for op in OPS if not args.only or op in args.only]

    url, schema = create_schema(args.url)
    store = durastate.open(url, min_connections=1, max_connections=max(WORKER_COUNTS))
    raw = RawPsycopg(url, store, with_attempts=True)
    plain = RawPsycopg(url, store, with_attempts=False)
    best = RawPsycopg(url, store, with_attempts=False)
    try:
        with psycopg.connect(args.url) as c:
            server = c.execute("SHOW server_version").fetchone()
        print(
            f"# durastate PostgreSQL bench: python {platform.python_version()}, psycopg {psycopg.__version__}, "
            f"server {server[0] if server else '?'}, {os.cpu_count()} cpus, {args.rounds} rounds x {args.ops} "
            f"calls/worker"
        )
        preload(store, args.rounds, args.ops)
        contenders = {
            "durastate": durastate_ops(store),
            "psycopg": raw_ops(raw, store),
            "psycopg-plain": raw_ops(plain, store),
            "psycopg-best": best_ops(best, store),
        }
        results: dict[tuple[str, int, str], list[float]] = {}
        names = list(contenders)
        for r in range(args.rounds):
            for op in ops:
                for workers in WORKER_COUNTS:
                    order = names[r % len(names) :] + names[: r % len(names)]
                    for who in order:
                        fn = contenders[who][op]
                        results.setdefault((op, workers, who), []).append(run_threads(workers, args.ops, fn))
        print()
        print(
            f"{'op':<14}{'workers':>8}{'durastate/s':>13}{'psycopg/s':>12}{'plain/s':>10}"
            f"{'best/s':>9}{'ds/psycopg':>12}{'ds/plain':>10}{'ds/best':>9}  target (ds/psycopg)"
        )
        misses = 0
        for op in ops:
            for workers in WORKER_COUNTS:
                ds = results[(op, workers, "durastate")]
                ps = results[(op, workers, "psycopg")]
                pl = results[(op, workers, "psycopg-plain")]
                ratio = statistics.median(a / b for a, b in zip(ds, ps, strict=True))
                ratio_plain = statistics.median(a / b for a, b in zip(ds, pl, strict=True))
                bs = results[(op, workers, "psycopg-best")]
                ratio_best = statistics.median(a / b for a, b in zip(ds, bs, strict=True))
                verdict = "PASS" if ratio >= SINGLE_TARGET else "MISS"
                misses += verdict == "MISS"
                print(
                    f"{op:<14}{workers:>8}{statistics.median(ds):>13.0f}{statistics.median(ps):>12.0f}"
                    f"{statistics.median(pl):>10.0f}{statistics.median(bs):>9.0f}{ratio:>12.2f}{ratio_plain:>10.2f}"
                    f"{ratio_best:>9.2f}  "
                    f">={SINGLE_TARGET} {verdict}"
                )
        items = max(400, args.ops * 4)
        one = statistics.median(claim_ack_throughput(store, 1, items) for _ in range(args.rounds))
        four = statistics.median(claim_ack_throughput(store, 4, items) for _ in range(args.rounds))
        scaling = four / one
        verdict = "PASS" if scaling >= SCALING_TARGET else "MISS"
        print()
        print(f"claim+ack, 1 consumer : {one:8.0f}/s")
        print(f"claim+ack, 4 consumers: {four:8.0f}/s   scaling {scaling:.2f}x  target >={SCALING_TARGET} {verdict}")
        return 0
    finally:
        raw.close()
        plain.close()
        best.close()
        store.close()
        drop_schema(args.url, schema)


if __name__ == "__main__":
    sys.exit(main())
