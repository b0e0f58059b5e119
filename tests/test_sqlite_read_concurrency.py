"""On SQLite (WAL), reads never wait for a writer.

Found while benchmarking: ``kv.get_many`` of more keys than fit one statement
(``kv.KEY_CHUNK``) needs one snapshot across its statements. It once took
``engine.transaction()`` for that, which on SQLite is ``BEGIN IMMEDIATE``:
the write lock, taken for a read, so the read waited behind every writer.
It now uses ``engine.read_transaction()`` (a deferred ``BEGIN``).
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


def test_a_chunked_get_many_reads_while_a_writer_holds_the_lock(
    writer_and_reader: tuple[durastate.Store, durastate.Store, list[bytes]],
) -> None:
    writer, reader, keys = writer_and_reader
    with writer.transaction():
        writer.kv.put(b"s", b"n", b"other", b"x")
        assert reader.kv.get_many(b"s", b"n", keys) == keys
