"""Side-by-side benchmark: durastate vs raw sqlite3 vs vgi's approach.

Run it with ``make bench`` (or ``.venv/bin/python bench/run.py --help``).

Contenders, each on its own fresh database file in one temporary folder:

* ``durastate``: ``durastate.open(<file>)`` with default options, driven
  through its public API (``store.kv``, ``store.queues``).
* ``sqlite3``: the physical limit. A second file created by
  ``durastate.open()`` (so the schema is identical), then driven through a
  plain ``sqlite3`` connection configured as durastate configures its own
  (WAL, ``synchronous=NORMAL``, autocommit via ``isolation_level=None``,
  statement cache; one reused cursor) running *the very statement texts* durastate compiled
  (read from the facet objects), with the same parameters, and
  ``BEGIN IMMEDIATE``/``COMMIT`` around a batch where durastate opens a
  transaction. It does no validation and shapes results minimally (a value,
  a list, a parallel list for get-many): whatever durastate does beyond
  that is the cost of its contract.
* ``vgi-style``: vgi's own approach re-created in ``bench/vgi_style.py``
  (reference only; no target).

Method: one untimed warm-up round (which also sizes each timed batch to
about ``--batch-ms`` of sqlite3 time unless ``--ops`` fixes the count), then
``--rounds`` rounds. In every round each op runs once per contender,
back to back, in an order that rotates from round to round, so a noisy
moment on the machine hits the contenders alike. Each contender performs the
same calls with the same arguments (precomputed, outside the timing). The
table shows the median calls/s of each contender, and the median over rounds
of the per-round ratio durastate/sqlite3 (paired, so drift cancels) with its
range across rounds. PASS when the median ratio meets the op's target.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import durastate
from vgi_style import VgiStyleStorage

# -- the workload --------------------------------------------------------------

SCOPE = b"bench-scope"
NS = b"bench-ns"
PRELOAD_KEYS = 10_000
PRELOAD_LOG = 10_000
VALUE_SIZE = 100
BATCH = 100
COUNTER_KEYS = 100
LOG_KEY = b"log"
APPEND_KEY = b"appended"
LEASE_SECONDS = 30.0
MAX_ATTEMPTS = 5  # durastate's default, bound explicitly by the raw contender
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

SINGLE_TARGET = 0.85
BATCH_TARGET = 0.90


@dataclass(frozen=True)
class Op:
    name: str
    target: float
    # Relative cost of one call, used to size the warm-up trial.
    weight: int = 1


OPS = (
    Op("put 1", SINGLE_TARGET),
    Op("put 100", BATCH_TARGET, weight=20),
    Op("get 1", SINGLE_TARGET),
    Op("get 100", BATCH_TARGET, weight=20),
    Op("scan 100", BATCH_TARGET, weight=10),
    Op("append", SINGLE_TARGET),
    Op("log scan 100", BATCH_TARGET, weight=10),
    Op("counter add", SINGLE_TARGET),
    Op("queue push 1", SINGLE_TARGET),
    Op("pop", SINGLE_TARGET),
    Op("claim+ack", SINGLE_TARGET, weight=2),
)
OPS_BY_NAME = {op.name: op for op in OPS}


def key_of(i: int) -> bytes:
    return b"key:%08d" % i


@dataclass
class Workload:
    """Arguments of every call, generated once per (op, round) and shared."""

    rng: random.Random = field(default_factory=lambda: random.Random(20240601))
    value: bytes = b"v" * VALUE_SIZE

    def args(self, op: str, calls: int) -> list[Any]:
        rng = self.rng
        if op == "put 1":
            return [key_of(rng.randrange(PRELOAD_KEYS)) for _ in range(calls)]
        if op == "put 100":
            return [[(key_of(i), self.value) for i in rng.sample(range(PRELOAD_KEYS), BATCH)] for _ in range(calls)]
        if op == "get 1":
            return [key_of(rng.randrange(PRELOAD_KEYS)) for _ in range(calls)]
        if op == "get 100":
            return [[key_of(i) for i in rng.sample(range(PRELOAD_KEYS), BATCH)] for _ in range(calls)]
        if op == "scan 100":
            return [key_of(rng.randrange(PRELOAD_KEYS - BATCH)) for _ in range(calls)]
        if op == "log scan 100":
            # Ordinals 1..PRELOAD_LOG belong to LOG_KEY (it is filled first).
            return [rng.randrange(PRELOAD_LOG - BATCH) for _ in range(calls)]
        if op == "counter add":
            return [b"counter:%03d" % rng.randrange(COUNTER_KEYS) for _ in range(calls)]
        # append, queue push 1, pop, claim+ack: identical calls.
        return [None] * calls


def now_ms() -> int:
    return int(time.time() * 1000)


# -- contenders ----------------------------------------------------------------

Runner = Callable[[list[Any]], None]


class Contender:
    name = ""

    def preload(self, value: bytes) -> None:
        raise NotImplementedError

    def prepare(self, op: str, calls: int) -> Runner | None:
        """Do the op's untimed setup for ``calls`` calls; return the timed part."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Durastate(Contender):
    name = "durastate"

    def __init__(self, path: Path) -> None:
        self.store = durastate.open(path)

    def run_recording(self, run: Runner, args: list[Any]) -> set[str]:
        """Run once (untimed), returning every statement text the engine was given."""
        engine: Any = self.store.engine
        seen: set[str] = set()

        def recording(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(sql: str, *rest: Any) -> Any:
                seen.add(sql)
                return method(sql, *rest)

            return call

        methods = ("one", "all", "execute", "executemany")
        for name in methods:  # instance attributes shadow the methods for this run
            setattr(engine, name, recording(getattr(engine, name)))
        try:
            run(args)
        finally:
            for name in methods:
                delattr(engine, name)
        return seen

    def preload(self, value: bytes) -> None:
        kv = self.store.kv
        with self.store.transaction():
            for _ in range(PRELOAD_LOG):
                kv.append(SCOPE, NS, LOG_KEY, value)
        for start in range(0, PRELOAD_KEYS, 1000):
            kv.put_many(SCOPE, NS, [(key_of(i), value) for i in range(start, start + 1000)])

    def prepare(self, op: str, calls: int) -> Runner | None:
        kv = self.store.kv
        queues = self.store.queues
        value = b"v" * VALUE_SIZE

        if op == "put 1":

            def run(args: list[Any]) -> None:
                put = kv.put
                for key in args:
                    put(SCOPE, NS, key, value)

        elif op == "put 100":

            def run(args: list[Any]) -> None:
                put_many = kv.put_many
                for items in args:
                    put_many(SCOPE, NS, items)

        elif op == "get 1":

            def run(args: list[Any]) -> None:
                get = kv.get
                for key in args:
                    get(SCOPE, NS, key)

        elif op == "get 100":

            def run(args: list[Any]) -> None:
                get_many = kv.get_many
                for keys in args:
                    get_many(SCOPE, NS, keys)

        elif op == "scan 100":

            def run(args: list[Any]) -> None:
                scan = kv.scan
                for start in args:
                    list(scan(SCOPE, NS, start=start, limit=BATCH))

        elif op == "append":

            def run(args: list[Any]) -> None:
                append = kv.append
                for _ in args:
                    append(SCOPE, NS, APPEND_KEY, value)

        elif op == "log scan 100":

            def run(args: list[Any]) -> None:
                log = kv.log
                for after in args:
                    list(log(SCOPE, NS, LOG_KEY, after=after, limit=BATCH))

        elif op == "counter add":

            def run(args: list[Any]) -> None:
                incr = kv.incr
                for key in args:
                    incr(SCOPE, NS, key, 1)

        elif op == "queue push 1":

            def run(args: list[Any]) -> None:
                push = queues.push
                items = [value]
                for _ in args:
                    push("bench-push", items)

        elif op == "pop":
            queues.push("bench-pop", [value] * calls)

            def run(args: list[Any]) -> None:
                pop = queues.pop
                for _ in args:
                    pop("bench-pop")

        elif op == "claim+ack":
            queues.push("bench-claim", [value] * calls)

            def run(args: list[Any]) -> None:
                claim = queues.claim
                for _ in args:
                    claim("bench-claim", lease=LEASE_SECONDS).ack()  # type: ignore[union-attr]

        else:
            return None
        return run

    def close(self) -> None:
        self.store.close()


class RawSqlite(Contender):
    """The same statements on a plain sqlite3 connection (see module docstring)."""

    name = "sqlite3"
    # The statements (keys of ``statement_texts``) each op runs here; the
    # warm-up checks that durastate runs them too for the same op.
    STATEMENTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "put 1": ("put",),
        "put 100": ("put",),
        "get 1": ("get",),
        "get 100": ("get 100",),
        "scan 100": ("scan",),
        "append": ("append",),
        "log scan 100": ("log",),
        "counter add": ("incr",),
        "queue push 1": ("push",),
        "pop": ("pop",),
        "claim+ack": ("claim", "ack"),
    }

    def __init__(self, path: Path, statements: dict[str, str]) -> None:
        durastate.open(path).close()  # creates the same schema, in WAL mode
        self.sql = statements
        # durastate's put without ttl binds expires_at (5 placeholders) or,
        # with a dedicated no-ttl statement, writes a literal NULL (4).
        self.put_binds_deadline = statements["put"].count("?") == 5
        self.conn = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False, cached_statements=512
        )
        self.conn.execute("PRAGMA synchronous=NORMAL")
        # One cursor reused for every statement: the cheapest way to drive
        # sqlite3 (no cursor object per call), cheaper than what durastate
        # does for one-row reads, so the ratios are, if anything, pessimistic.
        self.cursor = self.conn.cursor()
        mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            raise SystemExit(f"raw sqlite3 file is in journal_mode={mode}, expected wal")

    def _push_many(self, queue: bytes, payloads: list[bytes]) -> None:
        now = now_ms()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(self.sql["push"], [(queue, p, now, MAX_ATTEMPTS, now) for p in payloads])
        self.conn.execute("COMMIT")

    def preload(self, value: bytes) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(PRELOAD_LOG):
            conn.execute(self.sql["append"], (SCOPE, NS, LOG_KEY, value)).fetchone()
        conn.execute("COMMIT")
        for start in range(0, PRELOAD_KEYS, 1000):
            conn.execute("BEGIN IMMEDIATE")
            tail = (None,) if self.put_binds_deadline else ()
            conn.executemany(
                self.sql["put"], [(SCOPE, NS, key_of(i), value, *tail) for i in range(start, start + 1000)]
            )
            conn.execute("COMMIT")

    def prepare(self, op: str, calls: int) -> Runner | None:
        cursor = self.cursor
        sql = self.sql
        value = b"v" * VALUE_SIZE

        if op == "put 1":
            put_sql = sql["put"]
            if self.put_binds_deadline:

                def run(args: list[Any]) -> None:
                    execute = cursor.execute
                    for key in args:
                        execute(put_sql, (SCOPE, NS, key, value, None))

            else:

                def run(args: list[Any]) -> None:
                    execute = cursor.execute
                    for key in args:
                        execute(put_sql, (SCOPE, NS, key, value))

        elif op == "put 100":
            put_sql = sql["put"]
            if self.put_binds_deadline:

                def run(args: list[Any]) -> None:
                    execute = cursor.execute
                    executemany = cursor.executemany
                    for items in args:
                        execute("BEGIN IMMEDIATE")
                        executemany(put_sql, [(SCOPE, NS, k, v, None) for k, v in items])
                        execute("COMMIT")

            else:

                def run(args: list[Any]) -> None:
                    execute = cursor.execute
                    executemany = cursor.executemany
                    for items in args:
                        execute("BEGIN IMMEDIATE")
                        executemany(put_sql, [(SCOPE, NS, k, v) for k, v in items])
                        execute("COMMIT")

        elif op == "get 1":
            get_sql = sql["get"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for key in args:
                    row = execute(get_sql, (SCOPE, NS, key)).fetchone()
                    _value = None if row is None else row[0]

        elif op == "get 100":
            get_many_sql = sql["get 100"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for keys in args:
                    found = {k: v for k, v, _ in execute(get_many_sql, (SCOPE, NS, *keys)).fetchall()}
                    _values = [found.get(k) for k in keys]

        elif op == "scan 100":
            scan_sql = sql["scan"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for start in args:
                    execute(scan_sql, (SCOPE, NS, start, now_ms(), BATCH)).fetchall()

        elif op == "append":
            append_sql = sql["append"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for _ in args:
                    _ordinal = execute(append_sql, (SCOPE, NS, APPEND_KEY, value)).fetchone()[0]

        elif op == "log scan 100":
            log_sql = sql["log"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for after in args:
                    execute(log_sql, (SCOPE, NS, LOG_KEY, after, BATCH)).fetchall()

        elif op == "counter add":
            add_sql = sql["incr"]
            if add_sql.count("?") == 6:
                # The overflow guard: the old value must lie in [low, high]
                # for old + 1 to fit in int64 (bounds durastate computes too).
                def run(args: list[Any]) -> None:
                    execute = cursor.execute
                    low, high = INT64_MIN, INT64_MAX - 1
                    for key in args:
                        _total = execute(add_sql, (SCOPE, NS, key, 1, low, high)).fetchone()[0]

            else:

                def run(args: list[Any]) -> None:
                    execute = cursor.execute
                    for key in args:
                        _total = execute(add_sql, (SCOPE, NS, key, 1)).fetchone()[0]

        elif op == "queue push 1":
            push_sql = sql["push"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for _ in args:
                    now = now_ms()
                    execute(push_sql, (b"bench-push", value, now, MAX_ATTEMPTS, now))

        elif op == "pop":
            self._push_many(b"bench-pop", [value] * calls)
            pop_sql = sql["pop"]

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                for _ in args:
                    _payload = execute(pop_sql, (b"bench-pop", now_ms())).fetchone()[0]

        elif op == "claim+ack":
            self._push_many(b"bench-claim", [value] * calls)
            claim_sql = sql["claim"]
            ack_sql = sql["ack"]
            lease_ms = int(LEASE_SECONDS * 1000)

            def run(args: list[Any]) -> None:
                execute = cursor.execute
                urandom = os.urandom
                for _ in args:
                    token = urandom(16)
                    now = now_ms()
                    item_id = execute(claim_sql, (token, now + lease_ms, b"bench-claim", now)).fetchone()[0]
                    execute(ack_sql, (item_id, token))

        else:
            return None
        return run

    def close(self) -> None:
        self.conn.close()


class VgiShaped(Contender):
    """A storage with vgi's ``FunctionStorageSqlite`` methods, called as vgi calls them.

    Single-key ops go through the batch methods, as vgi's ``BoundStorage``
    routes them (``state_get`` is ``state_get_many([key])[0]``).
    """

    storage: Any

    def preload(self, value: bytes) -> None:
        # Same rows as the others; the log first so its ordinals are 1..N.
        for _ in range(PRELOAD_LOG):
            self.storage.state_append(SCOPE, NS, LOG_KEY, value)
        for start in range(0, PRELOAD_KEYS, 1000):
            self.storage.state_put_many(SCOPE, NS, [(key_of(i), value) for i in range(start, start + 1000)])

    def prepare(self, op: str, calls: int) -> Runner | None:
        st = self.storage
        value = b"v" * VALUE_SIZE

        if op == "put 1":

            def run(args: list[Any]) -> None:
                put_many = st.state_put_many
                for key in args:
                    put_many(SCOPE, NS, [(key, value)])

        elif op == "put 100":

            def run(args: list[Any]) -> None:
                put_many = st.state_put_many
                for items in args:
                    put_many(SCOPE, NS, items)

        elif op == "get 1":

            def run(args: list[Any]) -> None:
                get_many = st.state_get_many
                for key in args:
                    get_many(SCOPE, NS, [key])[0]

        elif op == "get 100":

            def run(args: list[Any]) -> None:
                get_many = st.state_get_many
                for keys in args:
                    get_many(SCOPE, NS, keys)

        elif op == "scan 100":

            def run(args: list[Any]) -> None:
                scan = st.state_scan
                for start in args:
                    list(scan(SCOPE, NS, start=start, limit=BATCH))

        elif op == "append":

            def run(args: list[Any]) -> None:
                append = st.state_append
                for _ in args:
                    append(SCOPE, NS, APPEND_KEY, value)

        elif op == "log scan 100":

            def run(args: list[Any]) -> None:
                log = st.state_log_scan
                for after in args:
                    list(log(SCOPE, NS, LOG_KEY, after_id=after, limit=BATCH))

        elif op == "counter add":

            def run(args: list[Any]) -> None:
                add = st.state_counter_add
                for key in args:
                    add(SCOPE, NS, key, 1)

        elif op == "queue push 1":

            def run(args: list[Any]) -> None:
                push = st.queue_push
                items = [value]
                for _ in args:
                    push(b"bench-push", items)

        elif op == "pop":
            st.queue_push(b"bench-pop", [value] * calls)

            def run(args: list[Any]) -> None:
                pop = st.queue_pop
                for _ in args:
                    pop(b"bench-pop")

        else:
            return None  # vgi has no claim/ack
        return run

    def close(self) -> None:
        self.storage.close()


class VgiStyle(VgiShaped):
    name = "vgi-style"

    def __init__(self, path: Path) -> None:
        self.storage = VgiStyleStorage(str(path))


class CompatVgi(VgiShaped):
    """durastate's drop-in for vgi (``durastate.compat.vgi.FunctionStorage``)."""

    name = "compat.vgi"

    def __init__(self, path: Path) -> None:
        from durastate.compat.vgi import FunctionStorage

        self.storage = FunctionStorage(str(path))


# Placeholders the raw contender binds for each statement. Checked against the
# texts, so a changed statement stops the run instead of timing a mismatch.
PLACEHOLDERS = {
    "put": (4, 5),
    "get": (3,),
    "get 100": (2 + BATCH,),
    "scan": (5,),
    "append": (4,),
    "log": (5,),
    "incr": (4, 6),
    "push": (5,),
    "pop": (2,),
    "claim": (4,),
    "ack": (2,),
}


def statement_texts(store: durastate.Store) -> dict[str, str]:
    """The compiled SQL durastate runs for each op, read from its facets."""
    kv: Any = store.kv
    queues: Any = store.queues
    try:
        texts: dict[str, str] = {
            # A put without ttl: its own statement when the facet has one.
            "put": getattr(kv, "_put_persistent", None) or kv._put,
            "get": kv._get,
            "get 100": kv._get_many[BATCH],
            "scan": kv._scan[(True, False, False)],
            "append": kv._append,
            "log": kv._log_page,
            "incr": kv._counter_add,
            "push": queues._push,
            "pop": queues._pop,
            "claim": queues._claim,
            "ack": queues._ack_sql,
        }
    except (AttributeError, KeyError, IndexError) as exc:
        raise SystemExit(
            f"bench/run.py: durastate's facets no longer expose a statement text it reads: {exc!r}"
        ) from None
    for name, text in texts.items():
        if text.count("?") not in PLACEHOLDERS[name]:
            raise SystemExit(
                f"bench/run.py: durastate's {name!r} statement now has {text.count('?')} placeholders "
                f"(the raw sqlite3 contender binds {PLACEHOLDERS[name]}); update RawSqlite: {text}"
            )
    return texts


# -- measuring -----------------------------------------------------------------


@dataclass
class Samples:
    rate: dict[str, list[float]] = field(default_factory=dict)  # contender -> calls/s (wall), per round
    ratio: list[float] = field(default_factory=list)  # durastate / sqlite3 by wall time, per round
    cpu_ratio: list[float] = field(default_factory=list)  # the same by this thread's CPU time


@dataclass
class Elapsed:
    wall: float = 0.0
    cpu: float = 0.0


def timed(run: Runner, args: list[Any], into: Elapsed) -> None:
    """Run and add the wall time and this thread's CPU time to ``into``."""
    cpu = time.thread_time()
    wall = time.perf_counter()
    run(args)
    into.wall += time.perf_counter() - wall
    into.cpu += time.thread_time() - cpu


def measure(
    contenders: list[Contender],
    ops: list[Op],
    rounds: int,
    slices: int,
    fixed_calls: int | None,
    batch_seconds: float,
) -> tuple[dict[str, Samples], dict[str, int]]:
    """Time every op on every contender, ``rounds`` times (see module docstring).

    A round's batch of an op is cut into ``slices`` slices; the contenders
    take turns slice by slice, starting with a different one each slice, so
    each contender's time is spread over the same stretch of wall-clock.
    """
    workload = Workload()
    calls: dict[str, int] = {}
    # Warm-up round: caches, statement caches, WAL; and sizing of the batches.
    # durastate's first run records the statements it executes, so the raw
    # contender provably times the same ones.
    ds = next(c for c in contenders if isinstance(c, Durastate))
    raw = next(c for c in contenders if isinstance(c, RawSqlite))
    for op in ops:
        trial = fixed_calls if fixed_calls is not None else max(20, 400 // op.weight)
        run = ds.prepare(op.name, trial)
        assert run is not None
        executed = ds.run_recording(run, workload.args(op.name, trial))
        for name in RawSqlite.STATEMENTS[op.name]:
            if raw.sql[name] not in executed:
                raise SystemExit(
                    f"bench/run.py: for {op.name!r} durastate no longer runs the statement the raw sqlite3 "
                    f"contender times ({raw.sql[name]!r}); it ran: {sorted(executed)}"
                )
        per_call = 0.0
        for contender in contenders:
            run = contender.prepare(op.name, trial)
            if run is None:
                continue
            warm = Elapsed()
            timed(run, workload.args(op.name, trial), warm)
            if contender.name == "sqlite3":
                per_call = warm.wall / trial
        if fixed_calls is not None:
            calls[op.name] = fixed_calls
        else:
            calls[op.name] = max(slices, min(200_000, round(batch_seconds / max(per_call, 1e-9))))
    results = {op.name: Samples() for op in ops}
    turn = 0
    for r in range(rounds):
        for op in ops:
            n = calls[op.name]
            args = workload.args(op.name, n)
            elapsed: dict[str, Elapsed] = {}
            step = -(-n // slices)
            for start in range(0, n, step):
                chunk = args[start : start + step]
                turn += 1
                shift = turn % len(contenders)
                for contender in contenders[shift:] + contenders[:shift]:
                    run = contender.prepare(op.name, len(chunk))
                    if run is None:
                        continue
                    gc.collect()
                    timed(run, chunk, elapsed.setdefault(contender.name, Elapsed()))
            samples = results[op.name]
            for name, spent in elapsed.items():
                samples.rate.setdefault(name, []).append(n / spent.wall)
            samples.ratio.append(elapsed["sqlite3"].wall / elapsed["durastate"].wall)
            samples.cpu_ratio.append(elapsed["sqlite3"].cpu / elapsed["durastate"].cpu)
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return results, calls


# -- reporting -----------------------------------------------------------------


def fmt_rate(values: list[float] | None) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):,.0f}"


def report(
    results: dict[str, Samples], ops: list[Op], calls: dict[str, int], contenders: list[Contender], clock: str
) -> bool:
    names = [c.name for c in contenders]
    references = [n for n in names if n not in ("durastate", "sqlite3")]
    header = [
        "op",
        "calls/batch",
        *[f"{n} /s" for n in names],
        "durastate/sqlite3 wall (range)",
        "cpu (range)",
        "target",
        "verdict",
        *[f"{n}/sqlite3" for n in references],
    ]
    rows: list[list[str]] = []
    all_pass = True
    for op in ops:
        s = results[op.name]
        ratio = statistics.median(s.ratio if clock == "wall" else s.cpu_ratio)
        ok = ratio >= op.target
        all_pass &= ok
        reference_ratios = []
        for name in references:
            rates = s.rate.get(name)
            paired = zip(rates or (), s.rate["sqlite3"], strict=False)
            reference_ratios.append(f"{statistics.median(r / raw for r, raw in paired):.2f}" if rates else "n/a")
        rows.append(
            [
                op.name,
                str(calls[op.name]),
                *[fmt_rate(s.rate.get(n)) for n in names],
                f"{statistics.median(s.ratio):.2f} ({min(s.ratio):.2f}-{max(s.ratio):.2f})",
                f"{statistics.median(s.cpu_ratio):.2f} ({min(s.cpu_ratio):.2f}-{max(s.cpu_ratio):.2f})",
                f">= {op.target:.2f}",
                "PASS" if ok else "MISS",
                *reference_ratios,
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    print(line(header))
    print("|" + "|".join(("-" * (w + 1) + ":") if i else (":" + "-" * (w + 1)) for i, w in enumerate(widths)) + "|")
    for r in rows:
        print(line(r))
    return all_pass


def profile(ops: list[Op], calls: int, folder: Path | None) -> int:
    """cProfile durastate's side of each op (``--profile``)."""
    import cProfile
    import pstats

    workload = Workload()
    with tempfile.TemporaryDirectory(prefix="durastate-bench-", dir=folder) as tmp:
        ds = Durastate(Path(tmp) / "durastate.db")
        try:
            ds.preload(b"v" * VALUE_SIZE)
            for op in ops:
                n = max(1, calls // op.weight)
                warm = ds.prepare(op.name, n)
                assert warm is not None
                warm(workload.args(op.name, n))
                run = ds.prepare(op.name, n)
                assert run is not None
                args = workload.args(op.name, n)
                profiler = cProfile.Profile()
                profiler.runcall(run, args)
                print(f"== {op.name}: {n} calls (cProfile adds overhead to every Python call; read it as shares)")
                pstats.Stats(profiler, stream=sys.stdout).strip_dirs().sort_stats("tottime").print_stats(14)
        finally:
            ds.close()
    return 0


def machine() -> str:
    return (
        f"{platform.system()} {platform.machine()}, nproc={os.cpu_count()}, "
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"SQLite {sqlite3.sqlite_version}, durastate {durastate.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds (default 9; medians are taken over them)")
    parser.add_argument(
        "--ops",
        type=int,
        default=None,
        metavar="N",
        help="calls per timed batch, every op (default: sized to --batch-ms)",
    )
    parser.add_argument(
        "--batch-ms",
        type=float,
        default=120.0,
        help="target duration of one sqlite3 batch when --ops is not given (default 120)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[op.name for op in OPS],
        metavar="OP",
        help="run only this op (repeatable): " + ", ".join(repr(o.name) for o in OPS),
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds of ~30 ms batches: a smoke run, noisy")
    parser.add_argument("--no-vgi", action="store_true", help="leave out the vgi-style reference column")
    parser.add_argument(
        "--with-compat",
        action="store_true",
        help="add a column for durastate.compat.vgi (the drop-in for vgi), called as vgi-style is",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="folder for the database files (default: a temporary folder)"
    )
    parser.add_argument("--slices", type=int, default=4, help="turns the contenders take within each batch (default 4)")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="which ratio the verdict uses: wall-clock (default) or this thread's CPU time, which other "
        "processes on a busy machine disturb far less (both are printed)",
    )
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when an op misses its target")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of the table: run durastate alone on the chosen ops (--only) under cProfile, "
        "one batch each after a warm-up, and print where the time goes",
    )
    args = parser.parse_args(argv)
    rounds = 3 if args.quick and args.rounds == parser.get_default("rounds") else args.rounds
    batch_ms = 30.0 if args.quick and args.batch_ms == parser.get_default("batch_ms") else args.batch_ms
    if rounds < 1 or args.slices < 1 or (args.ops is not None and args.ops < 1) or batch_ms <= 0:
        parser.error("--rounds, --slices, --ops and --batch-ms must be positive")
    ops = [OPS_BY_NAME[name] for name in args.only] if args.only else list(OPS)

    if args.profile:
        return profile(ops, args.ops or 5000, args.dir)

    print(f"durastate bench: {' '.join(sys.argv)}")
    print(f"machine: {machine()}")
    sizing = f"{args.ops} calls per batch" if args.ops else f"batches sized to ~{batch_ms:g} ms of sqlite3 time"
    print(
        f"{rounds} rounds after 1 warm-up round; {sizing}, taken in {args.slices} interleaved slices; "
        f"{PRELOAD_KEYS} keys / {PRELOAD_LOG} log entries preloaded; verdict by {args.clock} time"
    )
    sys.stdout.flush()  # the progress lines go to stderr
    with tempfile.TemporaryDirectory(prefix="durastate-bench-", dir=args.dir) as folder:
        base = Path(folder)
        ds = Durastate(base / "durastate.db")
        contenders: list[Contender] = [ds, RawSqlite(base / "raw.db", statement_texts(ds.store))]
        if not args.no_vgi:
            contenders.append(VgiStyle(base / "vgi.db"))
        if args.with_compat:
            contenders.append(CompatVgi(base / "compat.db"))
        try:
            value = b"v" * VALUE_SIZE
            for contender in contenders:
                contender.preload(value)
            results, calls = measure(contenders, ops, rounds, args.slices, args.ops, batch_ms / 1000.0)
        finally:
            for contender in contenders:
                contender.close()
    print()
    all_pass = report(results, ops, calls, contenders, args.clock)
    print()
    print(
        f"targets: single ops >= {SINGLE_TARGET} x sqlite3, batch and scan ops >= {BATCH_TARGET} x sqlite3; "
        f"ratio = median over rounds of the paired per-round ratio (min-max in brackets), by wall-clock "
        f"and by this thread's CPU time"
    )
    print("ALL PASS" if all_pass else "SOME MISS")
    return 1 if args.strict and not all_pass else 0


if __name__ == "__main__":
    sys.exit(main())
