"""Side-by-side benchmark of ``store.documents``: durastate vs raw sqlite3 vs the seed's style.

Run it with ``make bench-documents`` (or ``.venv/bin/python bench/documents.py --help``).

Contenders, each on its own fresh database file in one temporary folder:

* ``durastate``: ``durastate.open(<file>)`` with default options (WAL,
  ``synchronous=NORMAL``), driven through ``store.documents``.
* ``sqlite3``: the physical limit. A second file created by
  ``durastate.open()`` (identical schema), driven through a plain
  ``sqlite3`` connection configured as durastate configures its own (WAL,
  ``synchronous=NORMAL``, autocommit, statement cache, one reused cursor),
  running *the very statement texts* the facet compiled (read from
  ``store.documents.statements``), encoding with ``orjson.dumps`` and
  decoding with ``orjson.loads`` like the facet, with no validation and
  minimal result shaping; ``BEGIN IMMEDIATE``/``COMMIT`` around the locked
  read+write.
* ``seed-style``: functualize-state-sqlite's approach re-created here (a
  connection per thread, a TEXT payload of ``json.dumps(indent=2,
  sort_keys=True)``, ``json.loads`` on read, the build's default
  ``synchronous`` (FULL: an fsync per commit), ``BEGIN IMMEDIATE`` lock).
  Reference only.

Ops (random keys among ``PRELOAD`` documents of about 300 bytes):
``read``, ``write`` (unconditional), ``cas write`` (``expect=`` the current
revision, always succeeding), ``lock(read+write)`` (read then write one key
inside the lock).

Method: one untimed warm-up round (which sizes each timed batch to about
``--batch-ms`` of sqlite3 time), then ``--rounds`` rounds; in every round
each op runs once per contender, back to back, in an order that rotates
from round to round. The table shows median calls/s and the median of the
per-round ratios against sqlite3 (paired, so drift cancels) with their
range. Targets: read, write and cas write >= 0.80x sqlite3.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import durastate

PRELOAD = 10_000
TARGETS = {"read": 0.80, "write": 0.80, "cas write": 0.80, "lock(read+write)": None}
OPS = list(TARGETS)


def key_of(i: int) -> str:
    return f"scope-state/run-{i:06d}"


def doc_of(i: int, step: int) -> dict[str, Any]:
    return {
        "run": i,
        "step": step,
        "status": "running",
        "vars": {"attempt": step % 3, "user": "alice", "ratio": 0.25, "flags": [True, False, None]},
        "history": [{"step": s, "ok": True} for s in range(max(0, step - 3), step)],
        "note": "ünïcødé text " * 4,
    }


Runner = Callable[[list[int]], None]


class Durastate:
    name = "durastate"

    def __init__(self, path: Path) -> None:
        self.store = durastate.open(path)
        self.docs = self.store.documents
        self.revisions: dict[int, int] = {}

    def preload(self) -> None:
        with self.store.transaction():
            for i in range(PRELOAD):
                self.revisions[i] = self.docs.write(key_of(i), doc_of(i, 0))

    def runner(self, op: str) -> Runner:
        docs, revisions = self.docs, self.revisions
        if op == "read":

            def run(keys: list[int]) -> None:
                for i in keys:
                    docs.read(key_of(i))

        elif op == "write":

            def run(keys: list[int]) -> None:
                for i in keys:
                    revisions[i] = docs.write(key_of(i), doc_of(i, 1))

        elif op == "cas write":

            def run(keys: list[int]) -> None:
                for i in keys:
                    revisions[i] = docs.write(key_of(i), doc_of(i, 2), expect=revisions[i])

        else:

            def run(keys: list[int]) -> None:
                for i in keys:
                    key = key_of(i)
                    with docs.lock(key):
                        got = docs.read(key)
                        assert got is not None
                        revisions[i] = docs.write(key, doc_of(i, got.data["step"] + 1))

        return run

    def close(self) -> None:
        self.store.close()


class RawSqlite:
    name = "sqlite3"

    def __init__(self, path: Path) -> None:
        with durastate.open(path) as store:  # same schema, same statement texts
            self.sql = store.documents.statements
        self.conn = sqlite3.connect(str(path), isolation_level=None, cached_statements=512)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.cur = self.conn.cursor()
        self.revisions: dict[int, int] = {}

    def preload(self) -> None:
        cur, upsert = self.cur, self.sql["upsert"]
        cur.execute("BEGIN IMMEDIATE")
        for i in range(PRELOAD):
            self.revisions[i] = cur.execute(upsert, (key_of(i), orjson.dumps(doc_of(i, 0)))).fetchall()[0][0]
        cur.execute("COMMIT")

    def runner(self, op: str) -> Runner:
        cur, revisions = self.cur, self.revisions
        read, upsert, cas = self.sql["read"], self.sql["upsert"], self.sql["cas"]
        dumps, loads = orjson.dumps, orjson.loads
        if op == "read":

            def run(keys: list[int]) -> None:
                for i in keys:
                    row = cur.execute(read, (key_of(i),)).fetchone()
                    (loads(row[0]), row[1])

        elif op == "write":

            def run(keys: list[int]) -> None:
                for i in keys:
                    revisions[i] = cur.execute(upsert, (key_of(i), dumps(doc_of(i, 1)))).fetchall()[0][0]

        elif op == "cas write":

            def run(keys: list[int]) -> None:
                for i in keys:
                    revisions[i] = cur.execute(cas, (dumps(doc_of(i, 2)), key_of(i), revisions[i])).fetchall()[0][0]

        else:

            def run(keys: list[int]) -> None:
                for i in keys:
                    key = key_of(i)
                    cur.execute("BEGIN IMMEDIATE")
                    row = cur.execute(read, (key,)).fetchone()
                    data = loads(row[0])
                    revisions[i] = cur.execute(upsert, (key, dumps(doc_of(i, data["step"] + 1)))).fetchall()[0][0]
                    cur.execute("COMMIT")

        return run

    def close(self) -> None:
        self.conn.close()


class SeedStyle:
    """functualize-state-sqlite's way of doing it (see the module docstring)."""

    name = "seed-style"

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.local = threading.local()
        self.conn().execute(
            "CREATE TABLE IF NOT EXISTS documents"
            " (key TEXT PRIMARY KEY, payload TEXT NOT NULL, revision INTEGER NOT NULL)"
        )
        self.revisions: dict[int, int] = {}

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=10000")
            self.local.conn = conn
        return conn

    def read(self, key: str) -> tuple[dict[str, Any], int] | None:
        row = self.conn().execute("SELECT payload, revision FROM documents WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return json.loads(row[0]), int(row[1])

    def write(self, key: str, payload: dict[str, Any], expect: int | None = None) -> bool:
        text = json.dumps(payload, indent=2, sort_keys=True)
        if expect is None:
            self.conn().execute(
                "INSERT INTO documents (key, payload, revision) VALUES (?, ?, 1) ON CONFLICT(key) DO UPDATE"
                " SET payload = excluded.payload, revision = documents.revision + 1",
                (key, text),
            )
            return True
        cur = self.conn().execute(
            "UPDATE documents SET payload = ?, revision = revision + 1 WHERE key = ? AND revision = ?",
            (text, key, expect),
        )
        return cur.rowcount == 1

    def preload(self) -> None:
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        for i in range(PRELOAD):
            self.write(key_of(i), doc_of(i, 0))
            self.revisions[i] = 1
        conn.execute("COMMIT")

    def runner(self, op: str) -> Runner:
        revisions = self.revisions
        if op == "read":

            def run(keys: list[int]) -> None:
                for i in keys:
                    self.read(key_of(i))

        elif op == "write":

            def run(keys: list[int]) -> None:
                for i in keys:
                    self.write(key_of(i), doc_of(i, 1))
                    revisions[i] += 1

        elif op == "cas write":

            def run(keys: list[int]) -> None:
                for i in keys:
                    assert self.write(key_of(i), doc_of(i, 2), expect=revisions[i])
                    revisions[i] += 1

        else:

            def run(keys: list[int]) -> None:
                for i in keys:
                    key = key_of(i)
                    conn = self.conn()
                    conn.execute("BEGIN IMMEDIATE")
                    got = self.read(key)
                    assert got is not None
                    self.write(key, doc_of(i, got[0]["step"] + 1))
                    conn.execute("COMMIT")
                    revisions[i] += 1

        return run

    def close(self) -> None:
        self.conn().close()


def timed(run: Runner, keys: list[int]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        run(keys)
        return time.perf_counter() - start
    finally:
        gc.enable()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch-ms", type=float, default=150.0, help="sqlite3 time per timed batch")
    parser.add_argument("--no-seed", action="store_true", help="leave out the seed-style contender")
    parser.add_argument("--ops", nargs="*", default=OPS, choices=OPS)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="durastate-bench-documents-") as folder:
        base = Path(folder)
        contenders: list[Any] = [Durastate(base / "durastate.db"), RawSqlite(base / "raw.db")]
        if not args.no_seed:
            contenders.append(SeedStyle(base / "seed.db"))
        for c in contenders:
            c.preload()
        rng = random.Random(20240601)
        raw = contenders[1]

        # Warm-up: size each op's batch to about --batch-ms of sqlite3 time.
        sizes: dict[str, int] = {}
        for op in args.ops:
            trial = [rng.randrange(PRELOAD) for _ in range(300)]
            for c in contenders:
                timed(c.runner(op), trial)
            per_call = timed(raw.runner(op), trial) / len(trial)
            sizes[op] = max(200, int(args.batch_ms / 1000 / per_call))

        rates: dict[tuple[str, str], list[float]] = {}
        ratios: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            for op in args.ops:
                keys = [rng.randrange(PRELOAD) for _ in range(sizes[op])]
                order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
                got: dict[str, float] = {}
                for c in order:
                    got[c.name] = len(keys) / timed(c.runner(op), keys)
                    rates.setdefault((op, c.name), []).append(got[c.name])
                for c in contenders:
                    ratios.setdefault((op, c.name), []).append(got[c.name] / got[raw.name])
        for c in contenders:
            c.close()

    print(f"durastate {durastate.__version__ if hasattr(durastate, '__version__') else ''} documents benchmark")
    compact = len(orjson.dumps(doc_of(1, 1)))
    indented = len(json.dumps(doc_of(1, 1), indent=2, sort_keys=True))
    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.machine()}, "
        f"{os.cpu_count()} cpus; {args.rounds} rounds, {PRELOAD} documents of "
        f"~{compact} B (compact) / ~{indented} B (seed's indent=2)"
    )
    names = [c.name for c in contenders]
    header = f"{'op':<18}" + "".join(f"{n + ' /s':>16}" for n in names)
    header += "".join(f"{n + ' / sqlite3':>30}" for n in names if n != "sqlite3") + f"{'target':>9}  verdict"
    print(header)
    failed = False
    for op in args.ops:
        line = f"{op:<18}"
        for n in names:
            line += f"{statistics.median(rates[(op, n)]):>16,.0f}"
        for n in names:
            if n == "sqlite3":
                continue
            rs = ratios[(op, n)]
            line += f"{statistics.median(rs):>12.2f}x ({min(rs):.2f}-{max(rs):.2f})".rjust(30)
        target = TARGETS[op]
        ratio = statistics.median(ratios[(op, "durastate")])
        if target is None:
            line += f"{'-':>9}  (reference)"
        else:
            ok = ratio >= target
            failed |= not ok
            line += f"{target:>8.2f}x  {'PASS' if ok else 'FAIL'}"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
