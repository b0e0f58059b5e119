"""``info``/``doctor`` warnings and problems, and the overview's bounded counts."""

from __future__ import annotations

from pathlib import Path

import pytest

import durastate
from durastate.cli import inspect
from durastate.engines import postgres_tools, sqlite_tools
from durastate.engines.base import DDL
from durastate.testing.sample import fill

from .conftest import run_cli


def test_bounded_count_is_exact_below_the_cap_and_marked_above(
    shared_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with durastate.open(shared_url) as store:
        tools = store.engine.tools
        monkeypatch.setattr(type(tools), "count_cap", 10)
        store.kv.put_many(b"s", b"n", [(b"%03d" % i, b"v") for i in range(50)])
        store.kv.put(b"t", b"n", b"k", b"v")
        assert tools.bounded_count("kv_counter") == (0, True)
        store.kv.incr(b"s", b"n", b"c")
        assert tools.bounded_count("kv_counter") == (1, True)
        assert tools.bounded_count("kv") == (10, False)  # a lower bound (no estimate yet)
        if store.engine.dialect.name == "postgresql":
            store.engine.execute(store.engine.sql(DDL("ANALYZE {p}kv")))
            assert tools.bounded_count("kv") == (51, False)  # the planner's estimate
        tables = {t["table"]: t for t in inspect.table_stats(store, scan=False)}
        assert tables["kv"]["exact"] is False and tables["kv_counter"]["exact"] is True
        assert {t["table"]: t["rows"] for t in inspect.table_stats(store)}["kv"] == 51  # stats counts exactly


def test_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with durastate.open(tmp_path / "s.db") as store:
        fill(store)
        assert inspect.health(store).warnings == []
        monkeypatch.setattr(sqlite_tools, "filesystem_type", lambda path: "nfs4")
        monkeypatch.setattr(sqlite_tools, "WAL_WARN_BYTES", -1)
        warnings = inspect.health(store).warnings
    assert any("network filesystem (nfs4)" in w for w in warnings)
    assert any("checkpoints are not keeping up" in w for w in warnings)


def test_attempt_table_warning_on_postgres(shared_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with durastate.open(shared_url) as store:
        fill(store)
        if store.engine.dialect.name != "postgresql":
            pytest.skip("the attempt table exists on PostgreSQL only")
        monkeypatch.setattr(postgres_tools, "ATTEMPT_WARN_ROWS", 0)
        h = inspect.health(store)
    assert h.facts["attempt_rows"] > 0
    assert any("attempt table" in w for w in h.warnings)


def test_doctor_exits_1_on_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with durastate.open(path) as store:
        fill(store, bulk=5_000)
    data = bytearray(path.read_bytes())
    page = 4096
    for at in range(page * 5, len(data) - page, page * 3):  # scribble over b-tree pages, not the header
        data[at + 100 : at + 400] = b"\xa5" * 300
    path.write_bytes(bytes(data))
    done = run_cli(f"sqlite://{path}", "doctor")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "problem" in done.stdout and "integrity check failed" in done.stdout
    assert done.stdout.rstrip().endswith("verdict: PROBLEM found")
    assert done.stdout.count("\n") < 60  # the error list is cut short
