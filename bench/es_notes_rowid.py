"""Would eventsourcing's notification rows in a rowid table close the SQLite insert gap? A probe, side by side.

    .venv/bin/python bench/es_notes_rowid.py [--rounds 7] [--inserts 200] [--size 1 --size 10]

bench/RESULTS.md "esrows" found an insert of 10 events committing ~11.4 WAL
frames against eventsourcing's own SQLite recorder's ~5.7: the notification
rows, appended at the tail of the ``WITHOUT ROWID`` kv b-tree, rebalance
three leaves at each split, where the peer's rowid table appends with
``balance_quick``. Before any layout change, this measures what one would
buy, with everything else of durastate's insert unchanged. Contenders, each
on a fresh file at ``synchronous=FULL`` (``durability="full"``), the same
warm-up as bench/es_cpu.py:

* ``durastate``: ``DurastateApplicationRecorder`` as it is;
* ``rowid+index``: the same recorder with its last step, the notification
  rows' ``kv.put_many``, replaced by one multi-row INSERT into a rowid table
  ``(rowid, scope, n, value)`` with a unique index on ``(scope, n)`` (what a
  store shared by several applications would need), in the same transaction;
* ``rowid=n``: the same into ``(n INTEGER PRIMARY KEY, value)`` (one
  application per table: the ceiling of the idea);
* ``peer``: eventsourcing's ``SQLiteApplicationRecorder``.

Reported per contender and batch size: WAL frames a commit (read back from
the WAL of a separate run of ``--inserts`` inserts, checkpoints held off by
an open reader) and the median wall microseconds an insert, with the median
of the per-round ratios peer / contender (> 1: faster than the peer). The
probe's tables are not durastate's: nothing reads them back.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import struct
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import InfrastructureFactory, StoredEvent, Tracking

import durastate
from durastate.engines.base import DDL, WRITE
from durastate.integrations import eventsourcing as es

PAYLOAD = b"x" * 200
WARM_UP = 200


class _RowidNotes(es.DurastateApplicationRecorder):
    """The recorder with its notification rows written to a probe rowid table instead of the kv tree."""

    keyed = True  # rowid + unique (scope, n); False: n is the rowid

    def __init__(self, store: durastate.Store) -> None:
        super().__init__(store)
        engine = store.engine
        if self.keyed:
            engine.execute(engine.sql(DDL("CREATE TABLE {p}probe_notes (scope BLOB, n INTEGER, value BLOB)")))
            engine.execute(engine.sql(DDL("CREATE UNIQUE INDEX {p}probe_notes_n ON {p}probe_notes (scope, n)")))
        else:
            engine.execute(engine.sql(DDL("CREATE TABLE {p}probe_notes (n INTEGER PRIMARY KEY, value BLOB)")))
        self._statements: dict[int, Any] = {}

    def _notes_sql(self, count: int) -> Any:
        statement = self._statements.get(count)
        if statement is None:
            row = "(?, ?, ?)" if self.keyed else "(?, ?)"
            columns = "(scope, n, value)" if self.keyed else "(n, value)"
            text = f"INSERT INTO {{p}}probe_notes {columns} VALUES " + ", ".join([row] * count)
            statement = self._statements[count] = self.store.engine.sql(WRITE(text))
        return statement

    def _insert(self, stored_events: Sequence[StoredEvent], tracking: Tracking | None) -> list[int]:
        # es.DurastateApplicationRecorder._insert's steps, the last one replaced (no tracking, no duplicates
        # check beyond its scan: the probe's batches are all new).
        keys, bodies, prefixes = self._rows(stored_events)
        wanted = set(keys)
        kv = self.store.kv
        scope = self._scope
        with self.store.transaction():
            last = kv.incr(scope, es._SEQUENCE, self._sequence_key, len(keys))
            assert not self._existing(keys, prefixes, wanted)
            ids = list(range(last - len(keys) + 1, last + 1))
            id_keys = list(map(es._ID.pack, ids))
            kv.put_many(scope, self._events_ns, list(zip(keys, id_keys, strict=True)))
            heads = {length: es._INLINE + es._POINTER_HEAD.pack(length) for length in set(map(len, keys))}
            params: list[Any] = []
            for n, key, body in zip(ids, keys, bodies, strict=True):
                if self.keyed:
                    params += (scope, n, heads[len(key)] + key + body)
                else:
                    params += (n, heads[len(key)] + key + body)
            self.store.engine.execute(self._notes_sql(len(ids)), params)
        return ids


class _RowidIsN(_RowidNotes):
    keyed = False


def _open(name: str, folder: str) -> tuple[Any, Callable[[], None], str]:
    """(recorder, close, database path) of contender ``name`` on a fresh file in ``folder``."""
    path = f"{folder}/{name.replace('+', '_').replace('=', '_')}.db"
    if name == "peer":
        factory = InfrastructureFactory.construct({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": path})
        return factory.application_recorder(), factory.close, path
    store = durastate.open(path, durability="full")
    kind = {"durastate": es.DurastateApplicationRecorder, "rowid+index": _RowidNotes, "rowid=n": _RowidIsN}[name]
    return kind(store), store.close, path


def _batches(count: int, size: int) -> list[list[StoredEvent]]:
    return [
        [StoredEvent(originator, v, "topic", PAYLOAD) for v in range(1, size + 1)]
        for originator in (uuid.uuid4() for _ in range(count))
    ]


def _warm(recorder: Any, size: int) -> None:
    for _ in range(20):
        originator = uuid.uuid4()
        recorder.insert_events([StoredEvent(originator, v, "topic", PAYLOAD) for v in range(10)])
    for batch in _batches(WARM_UP, size):
        recorder.insert_events(batch)


def frames_per_commit(name: str, size: int, inserts: int) -> float:
    """WAL frames a commit over ``inserts`` inserts of ``size`` events (checkpoints held off by a reader)."""
    with tempfile.TemporaryDirectory() as folder:
        recorder, close, path = _open(name, folder)
        try:
            _warm(recorder, size)
            reader = sqlite3.connect(path, isolation_level=None)
            try:
                reader.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM sqlite_schema").fetchone()  # holds its snapshot: no checkpoint
                for batch in _batches(inserts, size):
                    recorder.insert_events(batch)
                with open(f"{path}-wal", "rb") as wal_file:
                    wal = wal_file.read()
            finally:
                reader.close()
        finally:
            close()
    (page_size,) = struct.unpack(">I", wal[8:12])
    frames = commits = 0
    for offset in range(32, len(wal) - 24 - page_size + 1, 24 + page_size):
        frames += 1
        commits += struct.unpack(">I", wal[offset + 4 : offset + 8])[0] != 0
    return frames / max(commits, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--inserts", type=int, default=200)
    parser.add_argument("--size", type=int, action="append", help="events an insert (default: 1 and 10)")
    args = parser.parse_args()
    names = ["durastate", "rowid+index", "rowid=n", "peer"]
    print(f"# sqlite {sqlite3.sqlite_version}, {args.rounds} rounds x {args.inserts} inserts, synchronous=FULL")
    for size in args.size or [1, 10]:
        frames = {name: frames_per_commit(name, size, args.inserts) for name in names}
        with tempfile.TemporaryDirectory() as folder:
            opened = {name: _open(name, folder) for name in names}
            try:
                for recorder, _close, _path in opened.values():
                    _warm(recorder, size)
                spent: dict[str, list[float]] = {name: [] for name in names}
                for _ in range(args.rounds):
                    for name in names:
                        insert = opened[name][0].insert_events
                        batches = _batches(args.inserts, size)
                        start = time.perf_counter()
                        for batch in batches:
                            insert(batch)
                        spent[name].append((time.perf_counter() - start) / args.inserts * 1e6)
            finally:
                for _recorder, close, _path in opened.values():
                    close()
        for name in names:
            ratios = [p / v for p, v in zip(spent["peer"], spent[name], strict=True)]
            median = statistics.median(spent[name])
            print(
                f"insert {size:2d}  {name:12s} {frames[name]:6.2f} frames a commit  {median:7.0f} us an insert"
                f"   peer/this {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            )


if __name__ == "__main__":
    main()
