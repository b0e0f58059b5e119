"""The kv table's layout on SQLite: new files keep values of a few KB in the table's own pages.

A store made from 2026-12-05 on creates ``ds_kv`` as a rowid table, where a
row keeps up to ~4 KB inline on a 4 KiB page; earlier stores made it
``WITHOUT ROWID``, where a row past ~1,000 bytes spills its tail to an
overflow page (a new page per put, a second page per read). Old files keep
their table and are read and written as before (docs/decisions.md, "kv rows
in a rowid table", kvlayout).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import durastate

VALUE = bytes(range(256)) * 12  # 3,072 bytes: past WITHOUT ROWID's inline limit, within a rowid table's
KEYS = 40

# ds_kv as stores made before 2026-12-05 created it.
_OLD_KV = (
    "CREATE TABLE ds_kv_old (scope BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL,"
    " value BLOB NOT NULL, expires_at INTEGER, PRIMARY KEY (scope, ns, key)) WITHOUT ROWID"
)


def _overflow_pages(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(
            conn.execute("SELECT count(*) FROM dbstat WHERE name = 'ds_kv' AND pagetype = 'overflow'").fetchone()[0]
        )


def _kv_sql(store: durastate.Store) -> str:
    return str(store.engine.one("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'ds_kv'")[0])


def _make_old_file(path: Path) -> None:
    """A store whose ds_kv is the earlier WITHOUT ROWID table (rebuilt in place, as such a file has it)."""
    with durastate.open(path) as store:
        store.kv.put(b"s", b"n", b"before", b"kept")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        "BEGIN;"
        f"{_OLD_KV};"
        "INSERT INTO ds_kv_old SELECT scope, ns, key, value, expires_at FROM ds_kv;"
        "DROP TABLE ds_kv;"
        "ALTER TABLE ds_kv_old RENAME TO ds_kv;"
        "CREATE INDEX ds_kv_expiry ON ds_kv (expires_at) WHERE expires_at IS NOT NULL;"
        "COMMIT"
    )
    conn.close()


def _put_large_values(store: durastate.Store) -> None:
    for i in range(KEYS):
        store.kv.put(b"s", b"n", b"k%03d" % i, VALUE + b"%03d" % i)


def test_a_new_file_keeps_values_of_a_few_kb_without_overflow_pages(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with durastate.open(path) as store:
        _put_large_values(store)
        assert "WITHOUT ROWID" not in _kv_sql(store).upper()
        assert store.kv.get(b"s", b"n", b"k007") == VALUE + b"007"
    assert _overflow_pages(path) == 0


def test_an_old_file_keeps_its_without_rowid_table_and_works_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _make_old_file(path)
    with durastate.open(path) as store:
        assert "WITHOUT ROWID" in _kv_sql(store).upper()  # opening it migrates nothing
        assert store.kv.get(b"s", b"n", b"before") == b"kept"
        _put_large_values(store)
        store.kv.put(b"s", b"n", b"k001", b"replaced")
        store.kv.put_many(b"s", b"m", [(b"a", b"1"), (b"b", b"2")])
        assert store.kv.put_if_absent(b"s", b"m", b"a", b"x") is False
        assert store.kv.take(b"s", b"m", b"b") == b"2"
        store.kv.put(b"s", b"t", b"gone", b"v", ttl=0.001)
        store.kv.delete(b"s", b"n", [b"k002"])
        assert [k for k, _ in store.kv.scan(b"s", b"n", limit=4)] == [b"before", b"k000", b"k001", b"k003"]
        assert store.kv.get(b"s", b"n", b"k001") == b"replaced"
        assert store.kv.get(b"s", b"n", b"k039") == VALUE + b"039"
        assert store.kv.get(b"s", b"m", b"a") == b"1"
        assert store.engine.integrity_errors() == []
        assert "WITHOUT ROWID" in _kv_sql(store).upper()
    assert _overflow_pages(path) == KEYS - 2  # the old layout, as it was: an overflow page per large value left
