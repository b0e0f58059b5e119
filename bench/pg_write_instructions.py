"""Server instructions per single write on PostgreSQL, by statement shape (callgrind: no load, no noise).

CPU time on the shared 2-core machine moves by 30 % from run to run; the
instructions a backend executes do not. This script runs each shape of a
write (counter add, push, pop) on its own connection to a server whose
backends run under callgrind, twice (``--calls`` and 4x as many), and
reports the difference of the two backends' instruction totals per call:
the statement alone, without connecting or the first executions
(prepared at once, ``prepare_threshold = 0``).

Shapes: ``plain`` (the bare statement, what raw psycopg runs), ``recorded``
(this tree's attempt-recording variant, ``postgres_attempts``, with the
tree's attempt ids), and the
per-client slot row that was measured instead of built (branch pgslot,
docs/decisions.md): ``slot``, the write then a HOT update of the slot from
the attempt id last seen to the new one, recording the rows, and an insert
that fails on the slot's key when the update matched nothing (the fence);
``slot bare``, the update alone recording nothing (the floor of the shape).

Start the server first (a scratch cluster; as the ``postgres`` user)::

    initdb -D /tmp/cg/data -A trust -U postgres
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/out/cg.%p \\
        postgres -D /tmp/cg/data -p 5499 -k /tmp/cg -c fsync=off -c autovacuum=off

then ``PYTHONPATH=src python bench/pg_write_instructions.py --url
postgresql://postgres@127.0.0.1:5499/postgres --out /tmp/cg/out``. Run it
with another tree's ``src`` on ``PYTHONPATH`` to measure that tree's
``recorded`` shapes.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import time
from collections.abc import Callable
from typing import Any

import psycopg

import durastate
from durastate.engines import postgres_attempts

# A tree before branch pgslot has no OneRowInsert (an isinstance of () is False).
OneRowInsert: Any = getattr(postgres_attempts, "OneRowInsert", ())
# The tree's attempt ids: led by their time since branch pgattempt, 16 random bytes before.
_attempt_id: Any = getattr(postgres_attempts, "attempt_id", None)


def new_attempt(at: int) -> bytes:
    """An attempt id as the measured tree makes it at ``at`` (ms)."""
    return os.urandom(16) if _attempt_id is None else bytes(_attempt_id(at))


Call = Callable[[psycopg.Connection[Any]], Any]
Shape = Callable[[], Call]  # a fresh connection's setup, returning its call

SLOT_TABLE = (
    "CREATE TABLE IF NOT EXISTS {p}bench_slot (id BYTEA PRIMARY KEY, attempt BYTEA NOT NULL, at BIGINT NOT NULL,"
    " rows BYTEA) WITH (fillfactor = 20)"
)
SLOT_NEW = "INSERT INTO {p}bench_slot (id, attempt, at) VALUES (%s, %s, 0)"
SLOT_UPDATE = "UPDATE {p}bench_slot SET attempt = %s, at = %s{rows} WHERE id = %s AND attempt = %s"
SLOT_FENCE = (
    ", _ds_f AS (INSERT INTO {p}bench_slot (id, attempt, at) SELECT %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM _ds_s))"
)
SLOT_ROWS = ", rows = (SELECT array_send(array_agg(_ds_r)) FROM _ds_r)"
QUEUE_FILL = (
    "INSERT INTO {p}queue (queue, payload, available_at, max_attempts, created_at)"
    " SELECT %s, %s, %s, 5, %s FROM generate_series(1, %s)"
)


def now() -> int:
    return int(time.time() * 1000)


def shapes(store: durastate.Store, admin: psycopg.Connection[Any], calls: int) -> dict[str, Shape]:
    p, kv, queues = store.engine.prefix, store.kv, store.queues
    admin.execute(SLOT_TABLE.format(p=p))
    queue_names = itertools.count()

    def counter() -> tuple[Any, ...]:
        return (b"s", b"n", b"c", 1, -(2**63), 2**63 - 2)

    def push() -> tuple[Any, ...]:
        return (b"bench-push", b"v" * 100, now(), 5, now())

    def fresh_queue() -> Callable[[], tuple[Any, ...]]:
        name = f"bench-pop-{next(queue_names)}".encode()
        admin.execute(QUEUE_FILL.format(p=p), (name, b"v" * 100, now(), now(), calls * 4 + 50))
        return lambda: (name, now(), 0)

    def plain(sql: str, make: Callable[[], Callable[[], tuple[Any, ...]]]) -> Shape:
        def setup() -> Call:
            params = make()
            return lambda c: c.execute(sql, params()).rowcount

        return setup

    def recorded(sql: str, make: Callable[[], Callable[[], tuple[Any, ...]]]) -> Shape:
        variant = sql.companion  # type: ignore[attr-defined]

        def setup() -> Call:
            params = make()
            if isinstance(variant, OneRowInsert):
                return lambda c: c.execute(variant.sql, (new_attempt(at := now()), at, *params())).rowcount
            return lambda c: c.execute(variant, (*params(), new_attempt(at := now()), at)).fetchall()

        return setup

    def slot(sql: str, make: Callable[[], Callable[[], tuple[Any, ...]]], *, bare: bool) -> Shape:
        data = sql if " RETURNING " in sql else sql + " RETURNING 1"
        update = SLOT_UPDATE.format(p=p, rows="" if bare else SLOT_ROWS)
        text = f"WITH _ds_r AS ({data}), _ds_s AS ({update}{'' if bare else ' RETURNING 1'})"
        text += ("" if bare else SLOT_FENCE.format(p=p)) + " SELECT * FROM _ds_r"

        def setup() -> Call:
            params, slot_id, last = make(), os.urandom(16), [b"-"]
            admin.execute(SLOT_NEW.format(p=p), (slot_id, last[0]))

            def call(c: psycopg.Connection[Any]) -> Any:
                new, at = os.urandom(16), now()
                fence = () if bare else (slot_id, new, at)
                rows = c.execute(text, (*params(), new, at, slot_id, last[0], *fence)).fetchall()
                last[0] = new
                return rows

            return call

        return setup

    ops = {
        "counter add": (kv._counter_add, lambda: counter),
        "push": (queues._push, lambda: push),
        "pop": (queues._pop, fresh_queue),
    }
    out: dict[str, Shape] = {}
    for name, (sql, make) in ops.items():
        out[f"{name}: plain"] = plain(sql, make)
        out[f"{name}: recorded"] = recorded(sql, make)
        out[f"{name}: slot"] = slot(sql, make, bare=False)
        out[f"{name}: slot bare"] = slot(sql, make, bare=True)
    return out


def instructions(out: str, pid: int) -> int:
    """The callgrind total of the backend ``pid`` (written when it exits)."""
    path = f"{out}/cg.{pid}"
    for _ in range(600):
        if os.path.exists(path):
            with open(path) as f:
                found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
            if found:
                return int(found.group(1))
        time.sleep(0.2)
    raise SystemExit(f"no callgrind output for backend {pid} in {out}")


def backend_total(url: str, out: str, shape: Shape, calls: int) -> int:
    call = shape()
    conn = psycopg.connect(url, autocommit=True)
    conn.prepare_threshold = 0
    for _ in range(5):  # prepared, caches warm
        call(conn)
    for _ in range(calls):
        call(conn)
    pid = conn.info.backend_pid
    conn.close()
    return instructions(out, pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="a server whose backends run under callgrind")
    parser.add_argument("--out", required=True, help="its --callgrind-out-file directory (files cg.<pid>)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--prefix", default="bench_cg_")
    parser.add_argument("--only", action="append", help="run the shapes whose name contains this (repeatable)")
    args = parser.parse_args()
    store = durastate.open(args.url, prefix=args.prefix)
    admin = psycopg.connect(args.url, autocommit=True)
    print(f"{'shape':<24}{'instructions per call':>24}")
    for name, shape in shapes(store, admin, args.calls).items():
        if args.only and not any(part in name for part in args.only):
            continue
        short = backend_total(args.url, args.out, shape, args.calls)
        long = backend_total(args.url, args.out, shape, args.calls * 4)
        print(f"{name:<24}{(long - short) / (args.calls * 3):>24,.0f}", flush=True)
    admin.close()
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
