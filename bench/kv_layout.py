"""CPU of kv calls on the SQLite file layouts a store could have, side by side in one process (kvlayout).

    .venv/bin/python bench/kv_layout.py [--calls 1000] [--rounds 5] [--sizes 100,600,1105,2000,3500]
    .venv/bin/python bench/kv_layout.py --pages [--calls 1000] [--rounds 5]   (page sizes, raw sqlite3)

Layouts: the ``ds_kv`` table ``WITHOUT ROWID`` (what the engine creates) or
a rowid table (the same columns and primary key, so also its index), each
on a file with ``auto_vacuum=INCREMENTAL`` (what the engine sets on a new
file) or without it. Each layout is built from a file the engine created:
the table rebuilt in place (``_rebuild``), the auto-vacuum mode chosen
before the engine's first open. Ops, per layout and value size:
``kv.put`` of a new key (keys ~40 bytes, as a checkpoint's), ``kv.get`` of
a random stored key, and ``kv.put_many`` of 3 rows of ~140-byte keys and
100-byte values (LangGraph's ``put_writes``). CPU time per call
(``time.process_time``; everything runs on this thread), one untimed warm-up
round, then ``--rounds`` rounds with the cells in a new random order each
round; reported: median (range) over rounds. A row of a ``WITHOUT ROWID``
table past ~1,000 bytes spills its tail to an overflow page on 4 KiB
pages; a rowid table keeps ~4 KB inline.

``--pages``: no durastate, plain ``sqlite3``: the same upsert text
(autocommit, WAL, ``synchronous=NORMAL``) into a ``WITHOUT ROWID`` table of
``ds_kv``'s shape on files of 4, 8 and 16 KiB pages (incremental
auto-vacuum), by value size: what a larger page does to the inline limit
(~2 KB at 8 KiB, ~4 KB at 16) and to small writes (a WAL frame is a page).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import durastate

LAYOUTS = (("without rowid", True), ("without rowid", False), ("rowid", True), ("rowid", False))
TABLE = (
    "CREATE TABLE ds_kv_new (scope BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL,"
    " value BLOB NOT NULL, expires_at INTEGER, PRIMARY KEY (scope, ns, key)){option}"
)


def _rebuild(path: Path, without_rowid: bool) -> None:
    """Rebuild ds_kv in place as the layout asks (its rows, its expiry index)."""
    conn = sqlite3.connect(path, isolation_level=None)
    option = " WITHOUT ROWID" if without_rowid else ""
    conn.executescript(
        "BEGIN;"
        + TABLE.format(option=option)
        + "; INSERT INTO ds_kv_new SELECT scope, ns, key, value, expires_at FROM ds_kv; DROP TABLE ds_kv;"
        " ALTER TABLE ds_kv_new RENAME TO ds_kv;"
        " CREATE INDEX ds_kv_expiry ON ds_kv (expires_at) WHERE expires_at IS NOT NULL; COMMIT"
    )
    conn.close()


def _store(folder: Path, name: str, without_rowid: bool, incremental: bool) -> durastate.Store:
    path = folder / f"{name}.db"
    if not incremental:
        # A file that already has a page when the engine first opens it keeps auto_vacuum=NONE.
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()
    durastate.open(path).close()
    _rebuild(path, without_rowid)
    store = durastate.open(path)
    assert store.engine.one("PRAGMA auto_vacuum") == ((2,) if incremental else (0,))
    return store


PAGE_SIZES = (4096, 8192, 16384)
RAW_PUT = (
    "INSERT INTO ds_kv (scope, ns, key, value, expires_at) VALUES (?, ?, ?, ?, NULL)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = NULL"
)


def _raw(folder: Path, page_size: int, size: int) -> sqlite3.Connection:
    conn = sqlite3.connect(folder / f"raw_{page_size}_{size}.db", isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(TABLE.format(option=" WITHOUT ROWID").replace("ds_kv_new", "ds_kv"))
    return conn


class RawCell:
    """Raw upserts of one value size on one page size."""

    def __init__(self, conn: sqlite3.Connection, size: int) -> None:
        self.conn = conn
        self.size = size
        self.next = 0

    def round(self, calls: int) -> tuple[float, float]:
        cursor = self.conn.cursor()
        values = [os.urandom(self.size) for _ in range(16)]
        first = self.next
        self.next += calls
        started = time.process_time()
        for i in range(first, first + calls):
            cursor.execute(RAW_PUT, (b"langgraph", b"threads", b"thread-1\x00\x00%012d" % i, values[i & 15]))
        return (time.process_time() - started) / calls, 0.0


def pages(calls: int, rounds: int, sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-kv-pages-") as name:
        folder = Path(name)
        cells = {(page, size): RawCell(_raw(folder, page, size), size) for page in PAGE_SIZES for size in sizes}
        for cell in cells.values():
            cell.round(calls)  # warm-up
        times: dict[tuple[int, int], list[float]] = {key: [] for key in cells}
        for _ in range(rounds):
            order = list(cells)
            random.shuffle(order)
            for key in order:
                times[key].append(cells[key].round(calls)[0] * 1e6)
        for cell in cells.values():
            cell.conn.close()
    print(f"# bench/kv_layout.py --pages --calls {calls} --rounds {rounds}; sqlite {sqlite3.sqlite_version}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; raw upsert, CPU us per put, median (range)")
    print("| value | " + " | ".join(f"{page // 1024} KiB pages" for page in PAGE_SIZES) + " |")
    print("|---|" + "---|" * len(PAGE_SIZES))
    for size in sizes:
        row = [times[(page, size)] for page in PAGE_SIZES]
        print(
            f"| {size} B | " + " | ".join(f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})" for t in row) + " |"
        )


class Cell:
    """One layout and value size: its store and its next key."""

    def __init__(self, store: durastate.Store, size: int) -> None:
        self.store = store
        self.size = size
        self.next = 0

    def round(self, calls: int) -> tuple[float, float]:
        kv = self.store.kv
        values = [os.urandom(self.size) for _ in range(16)]
        first = self.next
        self.next += calls
        started = time.process_time()
        for i in range(first, first + calls):
            kv.put(b"langgraph", b"threads", b"thread-1\x00\x00%012d" % i, values[i & 15])
        put = (time.process_time() - started) / calls
        keys = [b"thread-1\x00\x00%012d" % random.randrange(self.next) for _ in range(calls)]
        started = time.process_time()
        for key in keys:
            kv.get(b"langgraph", b"threads", key)
        return put, (time.process_time() - started) / calls


class Batch:
    """put_many of 3 small rows with long keys, on one layout."""

    VALUE = b"w" * 100

    def __init__(self, store: durastate.Store) -> None:
        self.store = store
        self.next = 0

    def round(self, calls: int) -> tuple[float, float]:
        kv = self.store.kv
        first = self.next
        self.next += calls
        started = time.process_time()
        for i in range(first, first + calls):
            base = b"6c9f0e1a-3b2d-4c5e-8f7a-1b2c3d4e5f60\x00\x001ef8e2b4-5c6d-6e7f-8a9b-%012d\x00" % i
            kv.put_many(b"langgraph", b"writes", [(base + b"task\x00%d" % j, self.VALUE) for j in range(3)])
        return (time.process_time() - started) / calls, 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="100,600,1105,2000,3500")
    parser.add_argument("--pages", action="store_true", help="raw sqlite3 on 4, 8 and 16 KiB pages")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.pages:
        pages(args.calls, args.rounds, sizes)
        return
    with tempfile.TemporaryDirectory(prefix="bench-kv-layout-") as name:
        folder = Path(name)
        cells: dict[tuple[str, bool, int], Cell | Batch] = {}
        for layout, incremental in LAYOUTS:
            tag = f"{layout.replace(' ', '_')}_{int(incremental)}"
            for size in sizes:
                cells[(layout, incremental, size)] = Cell(
                    _store(folder, f"{tag}_{size}", layout != "rowid", incremental), size
                )
            cells[(layout, incremental, 0)] = Batch(_store(folder, f"{tag}_batch", layout != "rowid", incremental))
        for cell in cells.values():
            cell.round(args.calls)  # warm-up
        times: dict[tuple[str, bool, int], list[tuple[float, float]]] = {key: [] for key in cells}
        for _ in range(args.rounds):
            order = list(cells)
            random.shuffle(order)
            for key in order:
                times[key].append(cells[key].round(args.calls))
        for cell in cells.values():
            cell.store.close()

    def shown(values: list[float]) -> str:
        us = [value * 1e6 for value in values]
        return f"{statistics.median(us):.1f} ({min(us):.1f}-{max(us):.1f})"

    print(f"# bench/kv_layout.py --calls {args.calls} --rounds {args.rounds}; sqlite {sqlite3.sqlite_version}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; CPU us per call, median (range) over rounds")
    heads = [f"{layout}, {'incremental' if incremental else 'no'} auto-vacuum" for layout, incremental in LAYOUTS]
    print("| op | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for size in sizes:
        for index, op in enumerate(("put", "get")):
            row = [shown([t[index] for t in times[(layout, inc, size)]]) for layout, inc in LAYOUTS]
            print(f"| {op} {size} B | " + " | ".join(row) + " |")
    row = [shown([t[0] for t in times[(layout, inc, 0)]]) for layout, inc in LAYOUTS]
    print("| put_many 3 x 100 B | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
