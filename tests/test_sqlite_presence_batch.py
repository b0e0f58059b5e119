"""On SQLite a ``presence.set`` is one statement per ``FIELD_CHUNK`` fields, with no transaction for one.

A statement per field made a set's cost grow with its fields by a whole
statement each (100,000 fields: 100,000 statements; on PostgreSQL a round
trip each, bench/RESULTS.md "Presence: many fields on PostgreSQL"). Writes
and deletions (``None``) go in statements of their own kind; one statement
is atomic on its own, several run in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from _sqlite_statements import statements_run
from durastate.presence import FIELD_CHUNK
from durastate.presence import facet as presence_facet


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(tmp_path / "presence.db") as opened:
        opened.presence.read("warm")  # schema created
        yield opened


def test_a_set_of_a_few_fields_is_one_statement_without_a_transaction(store: durastate.Store) -> None:
    values = {"cursor": 12, "typing": True, "name": "alice"}
    set_ = store.presence.set
    assert statements_run(store, lambda: set_("room", "a", values, at_ms=1, seen=1, ttl_ms=60_000)) == ["INSERT"]
    gone = {"typing": None, "name": None}
    assert statements_run(store, lambda: set_("room", "a", gone, at_ms=2, seen=2, ttl_ms=60_000)) == ["DELETE"]
    assert [(e.field, e.value) for e in store.presence.read("room")] == [("cursor", 12)]


def test_many_fields_are_one_transaction_of_chunks(store: durastate.Store) -> None:
    values = {f"f{i:04d}": i for i in range(2 * FIELD_CHUNK + 1)}
    set_ = store.presence.set
    statements = statements_run(store, lambda: set_("room", "a", values, at_ms=1, seen=1, ttl_ms=60_000))
    assert statements == ["BEGIN IMMEDIATE", "INSERT", "INSERT", "INSERT", "COMMIT"]
    assert [(e.field, e.value) for e in store.presence.read("room")] == list(values.items())
    # Deletions and writes mixed: a chunk of each kind, in one transaction; last-writer-wins field by field.
    mixed = {field: None if i % 2 else -i for i, field in enumerate(values)}
    statements = statements_run(store, lambda: set_("room", "a", mixed, at_ms=2, seen=2, ttl_ms=60_000))
    assert statements == ["BEGIN IMMEDIATE", "INSERT", "INSERT", "DELETE", "COMMIT"]
    assert [(e.field, e.value) for e in store.presence.read("room")] == [
        (f, -i) for i, f in enumerate(values) if i % 2 == 0
    ]
    stale = dict.fromkeys(values, "stale")
    # Older than every stored field: those stay; the deleted ones come back (a deletion leaves no tombstone).
    set_("room", "a", stale, at_ms=1, seen=3, ttl_ms=60_000)
    assert [(e.field, e.value) for e in store.presence.read("room")] == [
        (f, "stale" if i % 2 else -i) for i, f in enumerate(values)
    ]


def test_a_chunk_ends_at_chunk_bytes_of_values(store: durastate.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # A statement carries at most CHUNK_BYTES of values (PostgreSQL refuses a message over 1 GB, which
    # FIELD_CHUNK values of up to max_value_size could make); one value larger than that goes alone.
    monkeypatch.setattr(presence_facet, "CHUNK_BYTES", 1000)
    big = "x" * 600
    values = {"a": 1, "b": big, "c": big, "d": 2, "e": "y" * 2000, "f": 3}
    set_ = store.presence.set
    statements = statements_run(store, lambda: set_("room", "a", values, at_ms=1, seen=1, ttl_ms=60_000))
    assert statements == ["BEGIN IMMEDIATE", "INSERT", "INSERT", "INSERT", "INSERT", "COMMIT"]  # ab, cd, e, f
    assert [(e.field, e.value) for e in store.presence.read("room")] == list(values.items())
