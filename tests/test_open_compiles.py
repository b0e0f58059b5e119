"""Opening a store compiles statements lazily and shares them (issue 27 item 5; the timing is bench/open.py).

Counted, not timed: ``Dialect.compile`` calls. A store compiles a facet's
statements at the facet's first use, not when it opens; stores of one
engine class and prefix share compiled statements, so a second store
compiles nothing; another prefix compiles its own. Only the stores open and the
last prefixes opened keep their compiled statements.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from durastate.engines import statements
from durastate.engines.statements import Dialect


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The templates ``Dialect.compile`` compiles while the test runs."""
    calls: list[str] = []
    compile_ = Dialect.compile

    def counting(self: Dialect, template: str, prefix: str) -> str:
        calls.append(template)
        return compile_(self, template, prefix)

    monkeypatch.setattr(Dialect, "compile", counting)
    yield calls


def fresh_prefix() -> str:
    # A prefix no other test used starts with nothing compiled.
    return f"t{uuid.uuid4().hex[:12]}_"


def test_opening_compiles_no_facet_statement_and_facets_compile_at_first_use(
    tmp_path: Path, compiles: list[str]
) -> None:
    path, prefix = tmp_path / "lazy.db", fresh_prefix()
    durastate.open(path, prefix=prefix).close()  # creates and migrates
    compiles.clear()
    with durastate.open(path, prefix=prefix) as store:
        assert compiles == []  # the migration check's statements were compiled by the first open
        store.kv.get(b"s", b"n", b"k")
        kv_statements = len(compiles)
        assert 0 < kv_statements < 100  # kv's own, not its 2 x 128 key-count lookups
        store.kv.get_many(b"s", b"n", [b"a", b"b", b"c"])
        assert len(compiles) == kv_statements + 1  # the lookup of 3 keys, at its first use
        assert not any("event" in template for template in compiles)  # no other facet compiled


def test_a_second_store_of_the_same_prefix_compiles_nothing(tmp_path: Path, compiles: list[str]) -> None:
    path, prefix = tmp_path / "shared.db", fresh_prefix()
    with durastate.open(path, prefix=prefix) as first:
        for facet in ("kv", "queues", "documents", "records", "events", "presence"):
            getattr(first, facet)
        first.kv.get_many(b"s", b"n", [b"a", b"b"])
    compiled_by_first = len(compiles)
    assert compiled_by_first > 200
    with durastate.open(path, prefix=prefix) as second:
        for facet in ("kv", "queues", "documents", "records", "events", "presence"):
            getattr(second, facet)
        second.kv.get_many(b"s", b"n", [b"a", b"b"])
        assert second.kv.get(b"s", b"n", b"a") is None
    assert len(compiles) == compiled_by_first  # shared: nothing compiled again
    with durastate.open(path, prefix=fresh_prefix()) as other:
        other.kv.get(b"s", b"n", b"k")
    assert len(compiles) > compiled_by_first  # another prefix compiles its own texts


def test_only_open_stores_and_the_last_prefixes_keep_their_compiled_statements(
    compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process going through ever new prefixes (one per tenant) must not keep every prefix's statements.
    monkeypatch.setattr(statements, "COMPILED_KEPT", 2)

    def compiled_by_opening(prefix: str) -> int:
        compiles.clear()
        with durastate.open("memory:", prefix=prefix) as store:
            store.kv.get(b"s", b"n", b"k")
        return len(compiles)

    kept_open = durastate.open("memory:", prefix=(open_prefix := fresh_prefix()))
    try:
        kept_open.kv.get(b"s", b"n", b"k")
        first, second, third = fresh_prefix(), fresh_prefix(), fresh_prefix()
        assert compiled_by_opening(first) > 0
        assert compiled_by_opening(second) > 0
        assert compiled_by_opening(second) == 0  # among the last two: kept
        assert compiled_by_opening(third) > 0
        gc.collect()
        assert compiled_by_opening(first) > 0  # past the last two, no store open: forgotten, compiled again
        assert compiled_by_opening(open_prefix) == 0  # a store of it is open: its statements live with it
    finally:
        kept_open.close()


def test_a_new_file_gets_incremental_auto_vacuum_and_a_reopen_keeps_it(tmp_path: Path) -> None:
    # The engine sets it only while the file is empty (setting it later changes nothing and
    # costs a synced header write on every open).
    import sqlite3

    path = tmp_path / "vacuum.db"
    durastate.open(path).close()
    durastate.open(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # INCREMENTAL
