"""On SQLite a ``kv.put_many`` batch is one statement, with no transaction of its own.

A transaction (BEGIN IMMEDIATE, a statement per pair, COMMIT) cost a third
of a small batch's CPU (LangGraph's ``put_writes``, bench/RESULTS.md,
"lgsqlite2"); one multi-row upsert is atomic on its own. Batches longer than
``PUT_CHUNK`` pairs are several statements in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from _sqlite_statements import statements_run
from durastate.kv.statements import PUT_CHUNK


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(tmp_path / "batch.db") as opened:
        opened.kv.put(b"s", b"n", b"warm", b"up")  # schema created, statements compiled
        yield opened


@pytest.mark.parametrize("options", [{}, {"ttl": 60}, {"if_absent": True}, {"ttl": 60, "if_absent": True}], ids=str)
def test_a_batch_is_one_insert_without_a_transaction(store: durastate.Store, options: dict[str, object]) -> None:
    pairs = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    assert statements_run(store, lambda: store.kv.put_many(b"s", b"n", pairs, **options)) == ["INSERT"]  # type: ignore[arg-type]
    assert store.kv.get_many(b"s", b"n", [b"a", b"b", b"c"]) == [b"1", b"2", b"3"]


def test_duplicates_are_one_row_of_the_statement(store: durastate.Store) -> None:
    pairs = [(b"k", b"1"), (b"k", b"2"), (b"j", b"x")]
    assert statements_run(store, lambda: store.kv.put_many(b"s", b"n", pairs)) == ["INSERT"]
    assert store.kv.get_many(b"s", b"n", [b"k", b"j"]) == [b"2", b"x"]


def test_a_batch_past_the_chunk_is_one_transaction_of_chunks(store: durastate.Store) -> None:
    pairs = [(b"k%04d" % i, b"v") for i in range(2 * PUT_CHUNK + 1)]
    statements = statements_run(store, lambda: store.kv.put_many(b"s", b"n", pairs))
    assert statements == ["BEGIN IMMEDIATE", "INSERT", "INSERT", "INSERT", "COMMIT"]
    assert len(list(store.kv.scan(b"s", b"n", start=b"k", end=b"l"))) == len(pairs)


def test_a_batch_is_cut_at_put_chunk_bytes_of_values_too(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 128 values of up to max_value_size (64 MiB) in one statement could pass PostgreSQL's 1 GB message limit,
    # which closed the connection: StoreUnavailable after the busy timeout for a call that could never work.
    from durastate.kv import facet

    monkeypatch.setattr(facet, "PUT_CHUNK_BYTES", 10)
    pairs = [(b"a", b"1234"), (b"b", b"5678"), (b"c", b"9" * 25), (b"d", b"0")]  # (a, b), (c) alone, (d)
    assert statements_run(store, lambda: store.kv.put_many(b"s", b"n", pairs)) == [
        "BEGIN IMMEDIATE",
        "INSERT",
        "INSERT",
        "INSERT",
        "COMMIT",
    ]
    assert store.kv.get_many(b"s", b"n", [b"a", b"b", b"c", b"d"]) == [b"1234", b"5678", b"9" * 25, b"0"]
    assert statements_run(store, lambda: store.kv.put_many(b"s", b"n", pairs[:2])) == ["INSERT"]  # 8 bytes: one
