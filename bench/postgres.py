"""Side-by-side benchmark on PostgreSQL: durastate vs raw psycopg.

Run it with ``make bench-postgres`` (or ``.venv/bin/python bench/postgres.py
--help``). The server comes from ``--url``, else
``DURASTATE_BENCH_POSTGRES_URL``, else ``DURASTATE_TEST_POSTGRES_URL``,
else ``postgresql://postgres@127.0.0.1:5432/postgres``; everything happens
in a fresh schema that is dropped at the end.

Contenders, on one schema created by ``durastate.open()``:

* ``durastate``: one ``Store`` per worker count, shared by that many
  worker threads, its pool exactly that size (psycopg gets one connection
  per worker), driven through the public API. A last section measures what
  a pool bigger than the number of threads using it costs ("pool
  rotation"; ``--rotation-only`` runs just that): psycopg_pool alone hands
  out idle connections first in, first out, so one thread's calls would go
  round every connection; the engine's pool takes the newest idle one
  (``durastate.engines.postgres_pool``).
* ``psycopg``: one plain psycopg connection per worker thread, autocommit,
  the same prepare threshold, running *the very statement texts* durastate
  runs, with the same parameters. For writes those texts are durastate's
  attempt-recording variants (see ``durastate.engines.postgres_attempts``), and every
  ``ATTEMPT_PRUNE_EVERY`` writes it runs the engine's prune of expired attempt rows,
  as the engine does, so the ratio measures the cost of the library around the
  statement (before, durastate's prunes deleted this contender's rows too, once a
  run outlasted the 300 s retention window).
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
ratio 4/1 is the scaling target), for durastate and for raw psycopg
running the same claim and ack texts (so a limit of the server, such as
commit flushes, shows in both), all four interleaved round by round.
``--scaling-only`` runs just that section.

CPU-normalised figures: wall-clock throughput on a machine shared with
other work measures the machine as much as the library, so every run also
records the CPU it cost: this process's CPU time (``time.process_time``,
all threads) plus the server CPU of the contender's own backends (each
contender connects with its own ``application_name``; their pids come from
``pg_stat_activity`` and their CPU from ``/proc/<pid>/schedstat``, in ns,
which needs the server on this machine; without it only client CPU is
counted and the report says so). ``cpu ds/x`` is x's CPU per call over
durastate's: the throughput ratio a machine with nothing else to do would
show if both were CPU-bound (waits, such as commit flushes, are not
counted). Connections are opened before timing (the durastate pool at its
maximum size, one psycopg connection per worker index).
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
from _baseline import load_baseline
from _postgres import postgres_url
from durastate.engines.postgres import ATTEMPT_PRUNE_BATCH, ATTEMPT_PRUNE_EVERY, PREPARE_THRESHOLD, PostgresEngine
from durastate.engines.postgres_attempts import MarkedWrite, OneRowInsert, attempt_id, attempt_id_floor
from durastate.testing.postgres_server import create_schema, drop_schema
from pg_cpu import ServerCPU, WaitSampler, spent_ns, with_application_name

SCOPE = b"bench"
NS = b"ns"
VALUE = b"v" * 100
PRELOAD = 2_000
SINGLE_TARGET = 0.9
SCALING_TARGET = 3.0
WORKER_COUNTS = (1, 4, 16)
OPS = ("put 1", "get 1", "put 100", "get 100", "scan 100", "append", "log scan 100", "counter add", "push 1", "pop")

Worker = Callable[[int, int], None]  # (worker index, call index) -> None


def now_ms() -> int:
    """The time as the engine stamps attempt rows (``now_ms``: milliseconds)."""
    return int(time.time() * 1000)


class RawPsycopg:
    """Per-thread psycopg connections running durastate's statement texts."""

    def __init__(self, url: str, store: durastate.Store, *, with_attempts: bool, name: str) -> None:
        self.name = name
        self.url = with_application_name(url, name)
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
        self.writes = 0

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

    def open_all(self, workers: int) -> None:
        """Open every worker's connection now, so no run pays for a connect."""
        for w in range(workers):
            self.bind(w)
            self.conn()

    def write(self, sql: str, params: tuple[Any, ...]) -> Any:
        if self.with_attempts:
            variant = sql.companion  # type: ignore[attr-defined]  # the engine's attempt-recording variant
            assert variant is not None
            if isinstance(variant, MarkedWrite):  # an append carrying its attempt id in its row
                return self.conn().execute(variant.sql, (*params, attempt_id(now_ms()))).fetchall()
            if isinstance(variant, OneRowInsert):  # a push: its attempt row goes in ahead, its parameters first
                self.prune_in_passing()
                now = now_ms()
                return self.conn().execute(variant.sql, (attempt_id(now), now, *params)).rowcount
            if not isinstance(variant, str):  # a claim re-read by its lease token, an idempotent put: as it is
                cur = self.conn().execute(sql, params)
                return cur.fetchall() if cur.description is not None else cur.rowcount
            self.prune_in_passing()
            now = now_ms()
            return self.conn().execute(variant, (*params, attempt_id(now), now)).fetchall()
        cur = self.conn().execute(sql, params)
        return cur.fetchall() if " RETURNING " in sql else cur.rowcount

    def prune_in_passing(self) -> None:
        """What the engine does every ATTEMPT_PRUNE_EVERY writes: delete a batch of expired attempt rows.

        Without it this contender's attempt rows would be deleted by
        durastate's prunes (the table is shared), on durastate's bill,
        once a run outlasts the retention window (300 s).
        """
        self.writes += 1  # a race between threads only shifts a prune by a write
        if self.writes % ATTEMPT_PRUNE_EVERY == 0:
            cutoff = now_ms() - int(self.engine.attempt_retention * 1000)
            self.conn().execute(self.engine._attempt_prune, (attempt_id_floor(cutoff), cutoff, ATTEMPT_PRUNE_BATCH))

    def read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self.conn().execute(sql, params).fetchall()

    def batch(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        conn = self.conn()
        with conn.transaction():
            if self.with_attempts:
                now = now_ms()
                conn.execute(self.engine._attempt_insert, (attempt_id(now), now))
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

    def pop(w: int, i: int) -> None:
        # The queue's floor as the facet reads it (Queues._floor: a bound below its earliest item).
        queue, now = f"pre{w}".encode(), int(time.time() * 1000)
        raw.write(queues._pop, (queue, now, queues._floor(queue, now)))

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
        "pop": pop,
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
    # Enough items for every pop of every contender (APPS, the baseline among them) at every worker count in every
    # round. It was rounds * 3 * calls + calls, a quarter of what the four contenders of one run pop: those running
    # last in a round popped an empty queue, which a plain DELETE answers with a look at the index and durastate
    # with an attempt row too (pop's ds/best of 0.43-0.71 at 1 and 4 workers, pgwrite3 and before; branch pgslot).
    per_queue = rounds * len(APPS) * len(WORKER_COUNTS) * calls + calls
    for w in range(max(WORKER_COUNTS)):
        for start in range(0, per_queue, 500):
            store.queues.push(f"pre{w}", [VALUE] * min(500, per_queue - start))


def claim_ack_throughput(store: durastate.Store, consumers: int, items: int, meter: Meter) -> Measured:
    name = f"claims-{uuid.uuid4().hex[:8]}"
    for start in range(0, items, 500):
        store.queues.push(name, [VALUE] * min(500, items - start), max_attempts=None)
    per = items // consumers

    def consume(w: int, i: int) -> None:
        claim = store.queues.claim(name, lease=60)
        assert claim is not None
        claim.ack()

    return meter.run(DS_APP, consumers, per, consume)


def raw_claim_ack_throughput(
    raw: RawPsycopg, store: durastate.Store, consumers: int, items: int, meter: Meter
) -> Measured:
    """``claim_ack_throughput`` for raw psycopg: durastate's claim and ack texts (attempt-recording) on own connections.

    If raw psycopg scales no better than durastate on the same server,
    what limits the scaling is the server (commit flushes), not the library.
    """
    name = f"claims-{uuid.uuid4().hex[:8]}"
    for start in range(0, items, 500):
        store.queues.push(name, [VALUE] * min(500, items - start), max_attempts=None)
    per = items // consumers
    queues, queue = store.queues, name.encode()

    def consume(w: int, i: int) -> None:
        if i == 0:
            raw.bind(w)
        token = os.urandom(16)
        now = int(time.time() * 1000)
        rows = raw.write(queues._claim, (token, now + 60_000, queue, now, queues._floor(queue, now)))
        assert rows, "the queue ran dry"
        raw.write(queues._ack_sql, (rows[0][0], token))

    return meter.run(raw.name, consumers, per, consume)


def _backend_pids(store: durastate.Store, connections: int) -> list[int]:
    """The server processes of the store's pool (all ``connections`` of it, borrowed at once)."""
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    held = [engine._borrow() for _ in range(connections)]
    try:
        return [conn.info.backend_pid for conn in held]
    finally:
        for conn in held:
            engine._give_back(conn)


def claim_ack_scaling(
    meter: Meter, stores: dict[int, durastate.Store], raw: RawPsycopg, rounds: int, items: int
) -> None:
    """claim+ack throughput, 1 -> 4 consumers: durastate against raw psycopg running the same texts."""
    # durastate and raw psycopg (the same claim and ack texts), 1 and 4 consumers, all interleaved,
    # the order rotating from round to round.
    scaling_runs: dict[tuple[str, int], list[Measured]] = {}
    plan = [("durastate", 1), ("durastate", 4), ("psycopg", 1), ("psycopg", 4)]
    waits: dict[int, WaitSampler] = {}  # durastate's backends, by consumer count, over every round
    for r in range(rounds):
        for who, consumers in plan[r % len(plan) :] + plan[: r % len(plan)]:
            if who == "durastate":
                if consumers not in waits:
                    waits[consumers] = WaitSampler(meter.server.url, _backend_pids(stores[consumers], consumers))
                sampler = waits[consumers]
                sampler.resume()
                try:
                    got = claim_ack_throughput(stores[consumers], consumers, items, meter)
                finally:
                    sampler.pause()
            else:
                got = raw_claim_ack_throughput(raw, stores[consumers], consumers, items, meter)
            scaling_runs.setdefault((who, consumers), []).append(got)
    print()
    for who in ("durastate", "psycopg"):
        one = [m.rate for m in scaling_runs[(who, 1)]]
        four = [m.rate for m in scaling_runs[(who, 4)]]
        scaling, lo, hi = _ratios(four, one)
        verdict = f"  target >={SCALING_TARGET} {'PASS' if scaling >= SCALING_TARGET else 'MISS'}"
        cpu_one = statistics.median(m.cpu_us for m in scaling_runs[(who, 1)])
        cpu_four = statistics.median(m.cpu_us for m in scaling_runs[(who, 4)])
        print(f"claim+ack {who:<9} 1 consumer : {statistics.median(one):8.0f}/s   CPU {cpu_one:.0f} us per claim+ack")
        print(
            f"claim+ack {who:<9} 4 consumers: {statistics.median(four):8.0f}/s   CPU {cpu_four:.0f} us per"
            f" claim+ack   scaling {scaling:.2f}x (rounds {lo:.2f}-{hi:.2f})" + (verdict if who == "durastate" else "")
        )
    for consumers, sampler in sorted(waits.items()):
        sampler.close()
        top = ", ".join(f"{share * 100:.0f}% {key}" for share, key in sampler.shares()[:5])
        print(f"durastate's backends, {consumers} consumer(s), sampled every 5 ms: {top}")


# Suffixed with this process's id: backends are found by application_name, and two runs at once
# (another checkout's) must not count each other's server CPU.
DS_APP = f"bench-durastate-{os.getpid()}"
APPS = {
    "durastate": DS_APP,
    "psycopg": f"bench-psycopg-{os.getpid()}",
    "psycopg-plain": f"bench-plain-{os.getpid()}",
    "psycopg-best": f"bench-best-{os.getpid()}",
    "baseline": f"bench-baseline-{os.getpid()}",
}


class Measured:
    """One run: calls/s (wall) and CPU per call (client + the contender's server backends), in us."""

    __slots__ = ("cpu_us", "rate")

    def __init__(self, rate: float, cpu_us: float) -> None:
        self.rate = rate
        self.cpu_us = cpu_us


class Meter:
    def __init__(self, server: ServerCPU) -> None:
        self.server = server

    def run(self, app: str, workers: int, calls: int, fn: Worker) -> Measured:
        before = self.server.ns(app)
        cpu = time.process_time()
        rate = run_threads(workers, calls, fn)
        client = time.process_time() - cpu
        server = spent_ns(before, self.server.ns(app)) / 1e9
        return Measured(rate, (client + server) / (workers * calls) * 1e6)


def _ratios(a: list[float], b: list[float]) -> tuple[float, float, float]:
    per_round = [x / y for x, y in zip(a, b, strict=True)]
    return statistics.median(per_round), min(per_round), max(per_round)


def durastate_by_workers(stores: dict[int, durastate.Store]) -> dict[int, dict[str, Worker]]:
    return {w: durastate_ops(each) for w, each in stores.items()}


def pool_rotation(meter: Meter, by_workers: dict[int, dict[str, Worker]], top: int, rounds: int, calls: int) -> None:
    """One worker on a pool of 1 against the same worker on a pool of ``top`` (the two interleaved)."""
    print(f"## pool rotation: 1 worker on a pool of 1 vs the same on a pool of {top} (median over rounds)")
    for op in ("get 1", "put 1"):
        runs: dict[int, list[Measured]] = {1: [], top: []}
        for r in range(rounds):
            for size in (1, top) if r % 2 == 0 else (top, 1):
                runs[size].append(meter.run(DS_APP, 1, calls, by_workers[size][op]))
        wall = _ratios([m.rate for m in runs[top]], [m.rate for m in runs[1]])
        cpu_ratio = _ratios([m.cpu_us for m in runs[1]], [m.cpu_us for m in runs[top]])
        print(
            f"{op:<8} pool 1: {statistics.median(m.rate for m in runs[1]):6.0f}/s"
            f" {statistics.median(m.cpu_us for m in runs[1]):5.0f} us CPU;"
            f" pool {top}: {statistics.median(m.rate for m in runs[top]):6.0f}/s"
            f" {statistics.median(m.cpu_us for m in runs[top]):5.0f} us CPU;"
            f" pool {top} / pool 1: wall {wall[0]:.2f} ({wall[1]:.2f}-{wall[2]:.2f}),"
            f" CPU-normalised {cpu_ratio[0]:.2f} ({cpu_ratio[1]:.2f}-{cpu_ratio[2]:.2f})"
        )


def race_baseline(
    meter: Meter, stores: dict[int, Any], baseline_stores: dict[int, Any], ops: list[str], rounds: int, calls: int
) -> None:
    """This tree against ``--baseline-src``'s, op by op, round by round, the order alternating; CPU per call."""
    mine, theirs = durastate_by_workers(stores), durastate_by_workers(baseline_stores)
    results: dict[tuple[str, int, str], list[Measured]] = {}
    for r in range(rounds):
        for op in ops:
            for workers in WORKER_COUNTS:
                for who in ("durastate", "baseline") if r % 2 == 0 else ("baseline", "durastate"):
                    fn = (mine if who == "durastate" else theirs)[workers][op]
                    results.setdefault((op, workers, who), []).append(meter.run(APPS[who], workers, calls, fn))
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    print("## this tree against --baseline-src: CPU per call (us, client + own backends; median over rounds);")
    print("## base/ds = the baseline's CPU per call over this tree's (median and range of the per-round ratios)")
    print(f"{'op':<14}{'workers':>8}{'ds us':>10}{'base us':>10}{'base/ds':>9}{'range':>12}")
    for op in ops:
        for workers in WORKER_COUNTS:
            ds = [m.cpu_us for m in results[(op, workers, "durastate")]]
            base = [m.cpu_us for m in results[(op, workers, "baseline")]]
            ratio, lo, hi = _ratios(base, ds)
            print(
                f"{op:<14}{workers:>8}{statistics.median(ds):>10.0f}{statistics.median(base):>10.0f}"
                f"{ratio:>9.2f}{lo:>6.2f}-{hi:<5.2f}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=postgres_url())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ops", type=int, default=200, help="calls per worker per run")
    parser.add_argument("--only", action="append", help="run only these ops (repeatable)")
    parser.add_argument("--quick", action="store_true", help="1 round, 60 calls per worker")
    parser.add_argument("--rotation-only", action="store_true", help="only the last section, pool rotation")
    parser.add_argument("--scaling-only", action="store_true", help="only the claim+ack scaling section")
    parser.add_argument(
        "--baseline-src",
        help="another durastate tree's src/ (e.g. main's): race only it against this tree, on a schema of its own",
    )
    parser.add_argument(
        "--attempt-retention",
        type=float,
        default=None,
        help="durastate's stores opened with this attempt_retention (0: no attempt rows, a write whose answer is"
        " lost raises OutcomeUnknown; the psycopg contender then runs the plain statements durastate sends)",
    )
    parser.add_argument(
        "--fifo-pool",
        action="store_true",
        help="durastate's stores on psycopg_pool's own first-in-first-out pool (the engine before postgres_pool)",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.ops = 1, 60
    ops = [op for op in OPS if not args.only or op in args.only]

    if args.fifo_pool:  # for comparison only: the engine opens its pool through this name
        import psycopg_pool

        import durastate.engines.postgres as pg_engine

        pg_engine.LifoPool = psycopg_pool.ConnectionPool  # type: ignore[misc]
    url, schema = create_schema(args.url)
    top = max(WORKER_COUNTS)
    # One store per worker count, its pool exactly that size (as psycopg gets one connection per
    # worker); what a pool bigger than the number of threads using it costs is measured at the
    # end ("pool rotation").
    stores = {
        w: durastate.open(
            with_application_name(url, DS_APP),
            min_connections=w,
            max_connections=w,
            attempt_retention=args.attempt_retention,
        )
        for w in WORKER_COUNTS
    }
    store = stores[top]
    baseline_stores: dict[int, Any] = {}
    baseline_schema = None
    if args.baseline_src:
        base = load_baseline(args.baseline_src)
        baseline_url, baseline_schema = create_schema(args.url)
        baseline_stores = {
            w: base.open(with_application_name(baseline_url, APPS["baseline"]), min_connections=w, max_connections=w)
            for w in WORKER_COUNTS
        }
        preload(baseline_stores[top], args.rounds, args.ops)
    raw = RawPsycopg(url, store, with_attempts=True, name=APPS["psycopg"])
    plain = RawPsycopg(url, store, with_attempts=False, name=APPS["psycopg-plain"])
    best = RawPsycopg(url, store, with_attempts=False, name=APPS["psycopg-best"])
    server_cpu = ServerCPU(args.url)
    meter = Meter(server_cpu)
    try:
        with psycopg.connect(args.url) as c:
            server = c.execute("SHOW server_version").fetchone()
        print(
            f"# durastate PostgreSQL bench: python {platform.python_version()}, psycopg {psycopg.__version__}, "
            f"server {server[0] if server else '?'}, {os.cpu_count()} cpus, {args.rounds} rounds x {args.ops} "
            f"calls/worker, load average {os.getloadavg()[0]:.1f} at start"
        )
        preload(store, args.rounds, args.ops)
        if baseline_stores:  # only the race against the other tree (the raw contenders' connections would not fit)
            for each in [*stores.values(), *baseline_stores.values()]:
                each.kv.get(SCOPE, NS, b"warm")
            race_baseline(meter, stores, baseline_stores, ops, args.rounds, args.ops)
            return 0
        if args.rotation_only:
            for each in stores.values():
                each.kv.get(SCOPE, NS, b"warm")
            pool_rotation(meter, durastate_by_workers(stores), top, args.rounds, args.ops)
            return 0
        for contender in (raw, plain, best):
            contender.open_all(top)
        if args.scaling_only:
            for each in stores.values():
                each.kv.get(SCOPE, NS, b"warm")
            claim_ack_scaling(meter, stores, raw, args.rounds, max(400, args.ops * 4))
            return 0
        for each in stores.values():
            each.kv.get(SCOPE, NS, b"warm")  # the pool filled to its size
        by_workers = durastate_by_workers(stores)
        contenders = {
            "durastate": by_workers[top],
            "psycopg": raw_ops(raw, store),
            "psycopg-plain": raw_ops(plain, store),
            "psycopg-best": best_ops(best, store),
        }
        results: dict[tuple[str, int, str], list[Measured]] = {}
        names = list(contenders)
        for r in range(args.rounds):
            for op in ops:
                for workers in WORKER_COUNTS:
                    order = names[r % len(names) :] + names[: r % len(names)]
                    for who in order:
                        fn = by_workers[workers][op] if who == "durastate" else contenders[who][op]
                        got = meter.run(APPS[who], workers, args.ops, fn)
                        results.setdefault((op, workers, who), []).append(got)
            print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        if not server_cpu.available:
            print("# server processes not readable here: CPU figures are client CPU only")
        print()
        print("## wall clock: calls/s (median over rounds) and per-round ratios (median, range of ds/psycopg)")
        print(
            f"{'op':<14}{'workers':>8}{'durastate/s':>13}{'psycopg/s':>12}{'plain/s':>10}"
            f"{'best/s':>9}{'ds/psycopg':>12}{'range':>12}{'ds/plain':>10}{'ds/best':>9}  target (ds/psycopg)"
        )
        cpu_lines = []
        for op in ops:
            for workers in WORKER_COUNTS:
                runs = {who: results[(op, workers, who)] for who in names}
                rates = {who: [m.rate for m in v] for who, v in runs.items()}
                cpus = {who: [m.cpu_us for m in v] for who, v in runs.items()}
                ratio, lo, hi = _ratios(rates["durastate"], rates["psycopg"])
                ratio_plain = _ratios(rates["durastate"], rates["psycopg-plain"])[0]
                ratio_best = _ratios(rates["durastate"], rates["psycopg-best"])[0]
                verdict = "PASS" if ratio >= SINGLE_TARGET else "MISS"
                print(
                    f"{op:<14}{workers:>8}{statistics.median(rates['durastate']):>13.0f}"
                    f"{statistics.median(rates['psycopg']):>12.0f}{statistics.median(rates['psycopg-plain']):>10.0f}"
                    f"{statistics.median(rates['psycopg-best']):>9.0f}{ratio:>12.2f}{lo:>6.2f}-{hi:<5.2f}"
                    f"{ratio_plain:>10.2f}{ratio_best:>9.2f}  >={SINGLE_TARGET} {verdict}"
                )
                # CPU-normalised throughput ratio: x's CPU per call over durastate's.
                c_ratio, c_lo, c_hi = _ratios(cpus["psycopg"], cpus["durastate"])
                c_plain = _ratios(cpus["psycopg-plain"], cpus["durastate"])[0]
                c_best = _ratios(cpus["psycopg-best"], cpus["durastate"])[0]
                c_verdict = "PASS" if c_ratio >= SINGLE_TARGET else "MISS"
                cpu_lines.append(
                    f"{op:<14}{workers:>8}{statistics.median(cpus['durastate']):>10.0f}"
                    f"{statistics.median(cpus['psycopg']):>10.0f}{statistics.median(cpus['psycopg-plain']):>10.0f}"
                    f"{statistics.median(cpus['psycopg-best']):>10.0f}{c_ratio:>12.2f}{c_lo:>6.2f}-{c_hi:<5.2f}"
                    f"{c_plain:>10.2f}{c_best:>9.2f}  >={SINGLE_TARGET} {c_verdict}"
                )
        print()
        print(
            "## CPU per call (us, client process + the contender's server backends; median over rounds);"
            " cpu ds/x = x's CPU per call / durastate's (median, range of ds/psycopg)"
        )
        print(
            f"{'op':<14}{'workers':>8}{'ds us':>10}{'psycopg':>10}{'plain':>10}{'best':>10}"
            f"{'ds/psycopg':>12}{'range':>12}{'ds/plain':>10}{'ds/best':>9}  target (ds/psycopg)"
        )
        for line in cpu_lines:
            print(line)
        claim_ack_scaling(meter, stores, raw, args.rounds, max(400, args.ops * 4))
        print()
        pool_rotation(meter, by_workers, top, args.rounds, args.ops)
        return 0
    finally:
        raw.close()
        plain.close()
        best.close()
        server_cpu.close()
        for each in [*stores.values(), *baseline_stores.values()]:
            each.close()
        drop_schema(args.url, schema)
        if baseline_schema is not None:
            drop_schema(args.url, baseline_schema)


if __name__ == "__main__":
    sys.exit(main())
