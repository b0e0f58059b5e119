"""``engine.tools``: the operators' questions answered by the engine, for every engine and for one that answers few.

The CLI and the inspector ask an engine for table shapes, sizes, bounded
counts, health and sequences (``durastate.engines.tools``), never by
comparing dialect names; an engine that cannot answer says so with
``NotSupported``, and the tools that can go on without the answer do.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durastate
from durastate.cli import dump, inspect
from durastate.engines.tools import EngineTools
from durastate.errors import InvalidRequest, NotSupported
from durastate.facets import FACETS
from durastate.testing.sample import fill

CLI = Path(durastate.__file__).parent / "cli"


def test_every_facet_table_has_a_shape_with_a_key(store_url: str) -> None:
    with durastate.open(store_url) as store:
        for facet in FACETS:
            for table in facet.tables:
                shape = store.engine.tools.table_shape(table)
                assert shape.key and set(shape.key) <= set(shape.columns), table
        with pytest.raises(InvalidRequest, match="not found"):
            store.engine.tools.table_shape("no_such_table")
        with pytest.raises(InvalidRequest, match="not a durastate table name"):
            store.engine.tools.count_rows("kv; DROP TABLE x")


def test_counts_and_sizes_follow_the_data(store_url: str) -> None:
    with durastate.open(store_url) as store:
        tools = store.engine.tools
        assert tools.count_rows("kv") == 0
        store.kv.put_many(b"s", b"n", [(b"%03d" % i, b"x" * 100) for i in range(20)])
        assert tools.count_rows("kv") == 20
        assert tools.bounded_count("kv") == (20, True)
        sized = tools.table_bytes("kv")
        assert sized is not None and sized >= 2000


def test_sequences_follow_the_writes_and_restore_into_a_new_store(store_url: str, tmp_path: Path) -> None:
    with durastate.open(store_url) as store:
        for i in range(3):
            store.kv.append(b"s", b"n", b"log", b"entry %d" % i)
        values = store.engine.tools.sequences()
        assert values["kv_log"] == 3
    with durastate.open(tmp_path / "copy.db") as copy:
        with copy.engine.transaction():
            copy.engine.tools.restore_sequences(values)
        assert copy.engine.tools.sequences() == values
        with pytest.raises(InvalidRequest, match="unknown sequence"), copy.engine.transaction():
            copy.engine.tools.restore_sequences({"no_such_sequence": 5})
        assert copy.engine.tools.sequences() == values  # the refused call changed nothing


def test_an_engine_with_the_default_tools_says_what_it_cannot_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third-party engine without its own tools: NotSupported naming it, never a KeyError, and what
    standard SQL over durastate's tables can answer still answered."""
    with durastate.open(tmp_path / "s.db") as store:
        fill(store)
        engine = store.engine
        monkeypatch.setattr(type(engine), "tools", property(lambda self: EngineTools(self)))
        with pytest.raises(NotSupported, match="SqliteEngine does not report table shapes"):
            engine.tools.table_shape("kv")
        with pytest.raises(NotSupported, match="backup"):
            engine.tools.backup(tmp_path / "copy.db")
        assert engine.tools.count_rows("kv") > 0
        assert engine.tools.bounded_count("kv")[1] is True
        assert engine.tools.table_bytes("kv", scan=False) is None
        assert engine.tools.health(check="full").facts["integrity"] == "ok"
        overview = inspect.table_stats(store, scan=False)  # the inspector's overview still renders
        assert {t["table"] for t in overview} >= {"kv", "queue"}
        assert all(t["bytes"] is None for t in overview)
        with pytest.raises(NotSupported):
            inspect.table_stats(store, scan=True)  # stats would size tables by their columns
        with pytest.raises(InvalidRequest, match="check must be"):
            engine.tools.health(check="thorough")


def test_the_cli_asks_the_engine_and_never_branches_on_a_dialect_name() -> None:
    branching = re.compile(r"dialect\.name\s*(==|!=|\bin\b)|COUNT_CAP\[|import (sqlite3|psycopg)\b|CREATE TABLE")
    offending = [
        f"{path.relative_to(CLI)}:{n}: {line.strip()}"
        for path in sorted(CLI.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if branching.search(line) and path.name != "shards.py"  # shard placement prepares servers (see its note)
    ]
    assert offending == []


def test_a_store_made_with_some_facets_opens_read_only_with_those(tmp_path: Path) -> None:
    path = tmp_path / "kv-only.db"
    with durastate.open(path, facets=["kv"]) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
    with durastate.open(path, read_only=True) as store:
        assert store.facets == ("kv",)
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert dump.facet_tables(store) == ["kv", "kv_log", "kv_counter"]
        assert [t["table"] for t in inspect.table_stats(store)] == ["kv", "kv_log", "kv_counter"]
        with pytest.raises(durastate.ConfigurationError, match="facets"):
            store.queues  # noqa: B018
    with pytest.raises(durastate.ConfigurationError, match=r"older than|missing"):
        durastate.open(path, read_only=True, facets=["queues"])  # asked for by name: must be there
