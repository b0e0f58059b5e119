"""Large kv values in a rowid side table instead of the ``WITHOUT ROWID`` kv b-tree: raw ``sqlite3``, measured.

    .venv/bin/python bench/kv_side_table.py [--puts 3000] [--value 930] [--synchronous NORMAL|FULL] [--rounds 3]

A question left open by docs/decisions.md "lgput" and "SQLite storage layout
for new files" (kvlayout): LangGraph's ``put`` on SQLite writes ~1 WAL frame
more than SqliteSaver's because its ~930-byte rows sit whole in the
``WITHOUT ROWID`` b-tree's interior pages. Two layouts, each on a fresh
file shaped like durastate's (4 KiB pages, incremental auto-vacuum, WAL, no
automatic checkpoint, so the WAL's size counts the frames):

* ``plain``: the value in the kv row (durastate's layout), one upsert;
* ``side``: the value in a rowid table ``kv_blob``, the kv row holding its
  id: an insert there, then the kv upsert, in one ``BEGIN IMMEDIATE``
  transaction.

Six threads of 200 rows each are loaded; then ``--puts`` rows are appended
to the fourth thread's key range (before the others': the placement
``bench/langgraph_calls.py --writer middle`` uses). Reported per put: wall
and process CPU microseconds, WAL frames; and the CPU of reading the
thread's latest row (a join for ``side``).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

TABLES = (
    "CREATE TABLE kv (scope BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL, value BLOB, blob INTEGER,"
    " expires INTEGER, PRIMARY KEY (scope, ns, key)) WITHOUT ROWID",
    "CREATE TABLE kv_blob (id INTEGER PRIMARY KEY, value BLOB NOT NULL)",
)
PUT_PLAIN = (
    "INSERT INTO kv (scope, ns, key, value) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET value = excluded.value"
)
PUT_BLOB = "INSERT INTO kv_blob (value) VALUES (?)"
PUT_POINTER = (
    "INSERT INTO kv (scope, ns, key, value, blob) VALUES (?, ?, ?, NULL, ?)"
    " ON CONFLICT DO UPDATE SET value = excluded.value, blob = excluded.blob"
)
LATEST_PLAIN = "SELECT value FROM kv WHERE scope = ? AND ns = ? AND key >= ? AND key < ? ORDER BY key DESC LIMIT 1"
LATEST_SIDE = (
    "SELECT coalesce(k.value, b.value) FROM kv k LEFT JOIN kv_blob b ON b.id = k.blob"
    " WHERE k.scope = ? AND k.ns = ? AND k.key >= ? AND k.key < ? ORDER BY k.key DESC LIMIT 1"
)
FRAME = 4096 + 24


def measure(folder: Path, side: bool, puts: int, value: bytes, synchronous: str) -> tuple[float, float, float, float]:
    """(wall us, CPU us, WAL frames) a put, and the CPU us of a read of the latest row."""
    path = folder / ("side.db" if side else "plain.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    for statement in TABLES:
        conn.execute(statement)
    threads = [b"%d" % i + uuid.uuid4().hex.encode() for i in range(6)]

    def put(thread: bytes, n: int) -> None:
        key = thread + b"/%012d" % n
        if side:
            conn.execute("BEGIN IMMEDIATE")
            blob = conn.execute(PUT_BLOB, (value,)).lastrowid
            conn.execute(PUT_POINTER, (b"lg", b"t", key, blob))
            conn.execute("COMMIT")
        else:
            conn.execute(PUT_PLAIN, (b"lg", b"t", key, value))

    for thread in threads:
        for n in range(200):
            put(thread, n)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    written = threads[3]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for n in range(200, 200 + puts):
        put(written, n)
    wall = (time.perf_counter() - wall0) / puts * 1e6
    cpu = (time.process_time() - cpu0) / puts * 1e6
    frames = (os.path.getsize(f"{path}-wal") - 32) / FRAME / puts
    bounds = (b"lg", b"t", written + b"/", written + b"0")
    cpu0 = time.process_time()
    for _ in range(2000):
        conn.execute(LATEST_SIDE if side else LATEST_PLAIN, bounds).fetchone()
    read = (time.process_time() - cpu0) / 2000 * 1e6
    conn.close()
    return wall, cpu, frames, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--puts", type=int, default=3000)
    parser.add_argument("--value", type=int, default=930, help="bytes a value")
    parser.add_argument("--synchronous", choices=("NORMAL", "FULL"), default="NORMAL")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    value = os.urandom(args.value)
    print(f"{args.puts} puts of {args.value}-byte values, synchronous={args.synchronous}")
    for round_no in range(args.rounds):
        for side in (False, True):
            with tempfile.TemporaryDirectory() as folder:
                wall, cpu, frames, read = measure(Path(folder), side, args.puts, value, args.synchronous)
            name = "side " if side else "plain"
            print(
                f"round {round_no + 1} {name}: put {wall:6.1f} us wall, {cpu:6.1f} us CPU, {frames:4.2f} WAL frames;"
                f" read latest {read:4.1f} us CPU"
            )


if __name__ == "__main__":
    main()
