"""WAL frames each eventsourcing insert of bench/integrations.py commits, by b-tree: durastate against the peer.

    PYTHONPATH=src .venv/bin/python bench/es_wal_pages.py [--ops 1400]

Both sides get a fresh file of their own and bench/integrations.py's setup
(20 originators of 10 events), then run its two insert ops in its order:
``--ops`` inserts of 1 event (a new originator each), then as many of 10
events (a new originator each; 1,400: the bench's 7 rounds x 200 calls).
durastate is ``DurastateApplicationRecorder`` on a store opened with
``durability="full"``, the peer eventsourcing's ``SQLiteApplicationRecorder``.

After each call the frames it appended to the WAL are read back from the
file (a WAL that started over meanwhile is read from its start) and each
frame's page is named by what owns it at the end of the run (``dbstat``:
a table's or index's leaf, interior or overflow page; page 1; a pointer-map
page; anything else ``other``, e.g. a freelist page), and the file's size
at the end is printed (checkpointed). Deterministic but for where the
random originator ids land (runs differ by a few hundredths): no timing. A
page that changed owner during the run is counted under its last owner.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import struct
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eventsourcing.persistence import InfrastructureFactory, StoredEvent

import durastate
from durastate.integrations.eventsourcing import DurastateApplicationRecorder

PAYLOAD = b"x" * 200  # bench/integrations.py's
_FRAME_HEAD = struct.Struct(">II8x8x")  # page number, database size after a commit (else 0)


class WalReader:
    """The frames appended to one WAL since the last call (https://www.sqlite.org/walformat.html)."""

    def __init__(self, wal: Path) -> None:
        self.wal = wal
        self.salts = b""
        self.offset = 32

    def new_pages(self) -> list[list[int]]:
        """The pages of each commit appended since the last call, in order."""
        data = self.wal.read_bytes()
        if len(data) < 32:
            return []
        page_size = struct.unpack(">I", data[8:12])[0]
        salts = data[16:24]
        if salts != self.salts:  # a new generation: its frames start at the file's start
            self.salts, self.offset = salts, 32
        commits: list[list[int]] = []
        pages: list[int] = []
        offset = self.offset
        while offset + 24 + page_size <= len(data) and data[offset + 8 : offset + 16] == salts:
            page, size_after = _FRAME_HEAD.unpack_from(data, offset)
            pages.append(page)
            offset += 24 + page_size
            if size_after:
                commits.append(pages)
                pages = []
                self.offset = offset
        return commits


def owners(db: Path) -> dict[int, str]:
    """Page number -> ``name kind`` for every b-tree page; page 1 and pointer-map pages named too."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        named = {
            page: f"{name} {kind}"
            for name, page, kind in conn.execute("SELECT name, pageno, pagetype FROM dbstat WHERE pageno > 1")
        }
        usable = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        auto_vacuum = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    finally:
        conn.close()
    named[1] = "page 1"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    image = db.read_bytes()
    for page, name in list(named.items()):
        if name.startswith("ds_kv ") and not name.endswith("overflow"):
            ns = _first_ns(image[(page - 1) * usable : page * usable])
            named[page] = f"{name} [{ns}]"
    if auto_vacuum:
        per_map = usable // 5 + 1
        for page in range(2, pages + 1, per_map):
            named[page] = "pointer map"
    return named


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    raise AssertionError


def _first_ns(page: bytes) -> str:
    """The ``ns`` column of a ``ds_kv`` b-tree page's first cell (its record: scope, ns, key, ...)."""
    kind = page[0]
    head = 12 if kind in (2, 5) else 8  # interior pages carry a right-child pointer
    if page[3:5] == b"\x00\x00":
        return "empty"
    (cell,) = struct.unpack_from(">H", page, head)
    if kind == 2:
        cell += 4  # the child page number
    _, at = _varint(page, cell)  # payload size
    start = at
    header, at = _varint(page, at)
    types = []
    while at < start + header:
        serial, at = _varint(page, at)
        types.append(serial)
    at = start + header
    scope_length = (types[0] - 12) // 2
    ns_length = (types[1] - 12) // 2
    return page[at + scope_length : at + scope_length + ns_length].decode("utf-8", "replace")


def run(side: str, folder: str, ops: int) -> dict[str, tuple[int, Counter[int]]]:
    """{op: (calls, Counter of page numbers written)}."""
    db = Path(folder, f"{side}.db")
    closing: Any
    if side == "durastate":
        closing = durastate.open(db, durability="full")
        recorder: Any = DurastateApplicationRecorder(closing)
    else:
        closing = InfrastructureFactory.construct(
            {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(db)}
        )
        recorder = closing.application_recorder()
    for _ in range(20):
        originator = uuid.uuid4()
        recorder.insert_events([StoredEvent(originator, v, "topic", PAYLOAD) for v in range(10)])
    reader = WalReader(Path(f"{db}-wal"))
    reader.new_pages()

    def insert(count: int) -> Callable[[], None]:
        def op() -> None:
            originator = uuid.uuid4()
            recorder.insert_events([StoredEvent(originator, v, "topic", PAYLOAD) for v in range(count)])

        return op

    result: dict[str, tuple[int, Counter[int]]] = {}
    for name, op in (("insert 1", insert(1)), ("insert 10", insert(10))):
        written: Counter[int] = Counter()
        for _ in range(ops):
            op()
            commits = reader.new_pages()
            if len(commits) != 1:
                raise SystemExit(f"{side} {name}: {len(commits)} commits after one call")
            written.update(commits[0])
        result[name] = (ops, written)
    closing.close()
    return _by_owner(result, owners(db))


def _by_owner(
    result: dict[str, tuple[int, Counter[int]]], named: dict[int, str]
) -> dict[str, tuple[int, Counter[int]]]:
    out: dict[str, tuple[int, Counter[Any]]] = {}
    for op, (calls, written) in result.items():
        by: Counter[Any] = Counter()
        for page, n in written.items():
            by[named.get(page, "other")] += n
        out[op] = (calls, by)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=1400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="durastate-bench-") as folder:
        for side in ("durastate", "peer"):
            for op, (calls, by) in run(side, folder, args.ops).items():
                total = sum(by.values())
                parts = ", ".join(f"{owner} {n / calls:.2f}" for owner, n in by.most_common())
                print(f"{side:<10} {op:<10} {total / calls:6.2f} frames a call: {parts}")
            pages = os.path.getsize(Path(folder, f"{side}.db")) // 4096
            print(f"{side:<10} file at the end: {pages} pages of 4 KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
