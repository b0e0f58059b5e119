"""WAL bytes per single write on PostgreSQL after a checkpoint, with a window's worth of attempt rows in place.

Each write outside a transaction inserts an attempt row; where its primary
key lands decides what the first change of each index page after a
checkpoint costs: PostgreSQL writes the whole page to the WAL (a full-page
image, 8 KiB) the first time it changes after a checkpoint. A random key
(16 random bytes, before branch pgattempt) lands on a random leaf page of
the window's index; a key led by its time lands at the right edge.

Method, per op and round: the attempt table is filled with ``--window``
expired-free rows shaped as the measured tree makes its ids (random, or
led by a time within the last retention window), then ``CHECKPOINT``,
``pg_current_wal_lsn()``, ``--writes`` calls through ``durastate.open`` on
one thread, ``pg_current_wal_lsn()`` again: the difference over the calls.
With ``--waldir`` (the server's ``pg_wal``, readable here) ``pg_waldump
--stats`` of that range tells the full-page images' share. The WAL position
is the cluster's: run it on a scratch cluster nobody else writes to::

    initdb -D /tmp/w/data -A trust -U postgres      # as the postgres user
    postgres -D /tmp/w/data -p 5496 -k /tmp/w -c autovacuum=off -c checkpoint_timeout=1h -c max_wal_size=4GB

then, once per tree, alternated (``git archive main src`` for the other)::

    PYTHONPATH=src python bench/pg_attempt_wal.py --url postgresql://postgres@127.0.0.1:5496/postgres \\
        --waldir /tmp/w/data/pg_wal
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

import psycopg

import durastate
from durastate.engines import postgres_attempts

# Led by their time since branch pgattempt (postgres_attempts.attempt_id); 16 random bytes before.
TIME_LED = hasattr(postgres_attempts, "attempt_id")
# Row i made at start + i * step (ms): parameters start, step, rows.
FILL_TIME_LED = (
    "INSERT INTO {p}attempt (id, created_at, result)"
    " SELECT int8send(t) || substr(decode(md5(random()::text), 'hex'), 1, 8), t, '1'"
    " FROM (SELECT %s + i * %s AS t FROM generate_series(1, %s) AS i) AS made"
)
FILL_RANDOM = (
    "INSERT INTO {p}attempt (id, created_at, result)"
    " SELECT decode(md5(random()::text), 'hex'), t, '1'"
    " FROM (SELECT %s + i * %s AS t FROM generate_series(1, %s) AS i) AS made"
)
EMPTY = "TRUNCATE {p}attempt"
VACUUM = "VACUUM {p}attempt"
# pg_waldump --stats' last line: records, their bytes [share], full-page image bytes [share], all bytes.
FPI = re.compile(r"^Total\s+\d+\s+\d+ \[[\d.]+%\]\s+(\d+) \[", re.M)


def fill(admin: psycopg.Connection[Any], prefix: str, window: int, retention_ms: int) -> None:
    """``window`` attempt rows made within the last retention window, ids as this tree makes them."""
    admin.execute(EMPTY.format(p=prefix))
    start = int(time.time() * 1000) - retention_ms + 1000
    step = max(retention_ms // max(window, 1), 1)  # spread over the window
    admin.execute((FILL_TIME_LED if TIME_LED else FILL_RANDOM).format(p=prefix), (start, step, window))
    admin.execute(VACUUM.format(p=prefix))


def lsn(admin: psycopg.Connection[Any]) -> str:
    row = admin.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def wal_bytes(admin: psycopg.Connection[Any], start: str, end: str) -> int:
    row = admin.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", (end, start)).fetchone()
    assert row is not None
    return int(row[0])


def full_page_bytes(waldump: str, waldir: str, start: str, end: str) -> int | None:
    """The bytes of full-page images in the WAL from ``start`` to ``end`` (``pg_waldump --stats``)."""
    out = subprocess.run(
        [waldump, "-p", waldir, "-s", start, "-e", end, "--stats"], capture_output=True, text=True, check=False
    ).stdout
    found = FPI.search(out)
    return None if found is None else int(found.group(1))


def ops(store: durastate.Store) -> dict[str, Callable[[int], Any]]:
    return {
        "counter add": lambda i: store.kv.incr(b"s", b"n", b"c%d" % (i % 64), 1),
        "push": lambda i: store.queues.push("bench-wal", [b"v" * 100]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="a scratch cluster nobody else writes to")
    parser.add_argument("--window", type=int, default=50_000, help="attempt rows in place before the checkpoint")
    parser.add_argument("--writes", type=int, action="append", help="calls after the checkpoint (repeatable)")
    parser.add_argument("--op", action="append", choices=["counter add", "push"])
    parser.add_argument("--waldir", help="the server's pg_wal directory, to tell the full-page images' share")
    parser.add_argument("--waldump", default="pg_waldump", help="the pg_waldump matching the server")
    parser.add_argument("--prefix", default=f"walb_{os.getpid()}_")
    args = parser.parse_args()
    store = durastate.open(args.url, prefix=args.prefix)
    admin = psycopg.connect(args.url, autocommit=True)
    retention_ms = int(store.engine.attempt_retention * 1000)  # type: ignore[attr-defined]
    print(f"# ids {'led by their time' if TIME_LED else 'random'}; window {args.window:,} rows")
    print(f"{'op':<14}{'writes':>8}{'WAL bytes/write':>18}{'of it full pages':>18}")
    try:
        calls = ops(store)
        for name in args.op or list(calls):
            for writes in args.writes or [5_000]:
                fill(admin, args.prefix, args.window, retention_ms)
                call = calls[name]
                for i in range(50):  # prepared, caches warm
                    call(i)
                admin.execute("CHECKPOINT")
                start = lsn(admin)
                for i in range(writes):
                    call(i)
                end = lsn(admin)
                images = None if args.waldir is None else full_page_bytes(args.waldump, args.waldir, start, end)
                shown = "-" if images is None else f"{images / writes:,.0f}"
                print(f"{name:<14}{writes:>8,}{wal_bytes(admin, start, end) / writes:>18,.0f}{shown:>18}", flush=True)
    finally:
        admin.execute(EMPTY.format(p=args.prefix))
        admin.close()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
