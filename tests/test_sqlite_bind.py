"""The SQLite engine binds ``bytes`` as ``bytearray`` (``engines.sqlite.bindable``): same BLOBs, no adapter probe."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from durastate.engines.sqlite import bindable


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    opened = durastate.open(tmp_path / "bind.db")
    try:
        yield opened
    finally:
        opened.close()


def test_bindable_converts_only_bytes() -> None:
    params = bindable([b"k", b"", 3, 1.5, "text", None, bytearray(b"b")])
    assert [type(p) for p in params] == [bytearray, bytearray, int, float, str, type(None), bytearray]
    assert params == [b"k", b"", 3, 1.5, "text", None, b"b"]


def test_bytes_never_reach_sqlite3_adapters(store: durastate.Store) -> None:
    """A bytes adapter registered in sqlite3 is never called: the engine hands the driver bytearrays."""
    called: list[bytes] = []

    def spy(value: bytes) -> bytes:
        called.append(value)
        return value

    sqlite3.register_adapter(bytes, spy)
    try:
        store.kv.put(b"s", b"n", b"k", b"v")
        store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")], if_absent=True)
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert store.kv.get_many(b"s", b"n", [b"a", b"b"]) == [b"1", b"2"]
        assert list(store.kv.scan(b"s", b"n", start=b"a", end=b"c")) == [(b"a", b"1"), (b"b", b"2")]
    finally:
        del sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)]
    assert called == []


def test_values_stay_blobs(store: durastate.Store, tmp_path: Path) -> None:
    """Empty values are empty BLOBs (not NULL), keys match rows bound as bytes, reads give bytes."""
    store.kv.put(b"s", b"n", b"empty", b"")
    store.kv.put_many(b"s", b"n", [(b"k\x00\xff", b"\x00v")])
    assert store.kv.get(b"s", b"n", b"empty") == b""
    got = store.kv.get_many(b"s", b"n", [b"empty", b"k\x00\xff"])
    assert got == [b"", b"\x00v"] and all(type(value) is bytes for value in got)
    raw = sqlite3.connect(tmp_path / "bind.db")
    try:
        rows = raw.execute(
            "SELECT key, typeof(key), typeof(value), value IS NULL FROM ds_kv WHERE scope = ? AND ns = ? ORDER BY key",
            (b"s", b"n"),
        ).fetchall()
    finally:
        raw.close()
    assert rows == [(b"empty", "blob", "blob", 0), (b"k\x00\xff", "blob", "blob", 0)]
