"""On SQLite (WAL), reads never wait for a writer.

Found while benchmarking: ``kv.get_many`` of more keys than fit one statement
(``kv.KEY_CHUNK``) wraps its chunks in ``engine.transaction()`` for one
snapshot, and on SQLite that is ``BEGIN IMMEDIATE``: the write lock, taken
for a read. Such a read then waits behind every writer (and fails with
``StoreUnavailable`` after ``busy_timeout``), where a WAL reader should
simply read its snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from durastate.kv import KEY_CHUNK


@pytest.fixture
def writer_and_reader(tmp_path: Path) -> Iterator[tuple[durastate.Store, durastate.Store, list[bytes]]]:
    path = tmp_path / "shared.db"
    writer = durastate.open(path)
    reader = durastate.open(path, busy_timeout=0)  # a wait shows as StoreUnavailable, at once
    keys = [b"k%05d" % i for i in range(KEY_CHUNK + 1)]
    writer.kv.put_many(b"s", b"n", [(k, k) for k in keys])
    yield writer, reader, keys
    reader.close()
    writer.close()


def test_a_one_statement_get_many_reads_while_a_writer_holds_the_lock(
    writer_and_reader: tuple[durastate.Store, durastate.Store, list[bytes]],
) -> None:
    writer, reader, keys = writer_and_reader
    with writer.transaction():
        writer.kv.put(b"s", b"n", b"other", b"x")
        assert reader.kv.get_many(b"s", b"n", keys[:KEY_CHUNK]) == keys[:KEY_CHUNK]


@pytest.mark.xfail(
    reason="BUG (kv.py get_many): more than KEY_CHUNK keys read inside engine.transaction(), which on SQLite "
    "is BEGIN IMMEDIATE, so the read takes the write lock and waits for (or fails behind) any writer",
    strict=True,
)
def test_a_chunked_get_many_reads_while_a_writer_holds_the_lock(
    writer_and_reader: tuple[durastate.Store, durastate.Store, list[bytes]],
) -> None:
    writer, reader, keys = writer_and_reader
    with writer.transaction():
        writer.kv.put(b"s", b"n", b"other", b"x")
        assert reader.kv.get_many(b"s", b"n", keys) == keys
