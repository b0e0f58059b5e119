"""``info``/``doctor`` warnings and problems, and the overview's bounded counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import durastate
from durastate.cli import inspect
from durastate.cli.app import VERDICT_SUMMARY
from durastate.engines import postgres_tools, sqlite_tools
from durastate.engines.base import DDL
from durastate.testing.sample import fill

from .conftest import Run, as_text, cli_here, run_cli


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


def test_doctor_and_info_report_a_damaged_page_the_check_cannot_walk_past(tmp_path: Path) -> None:
    """One page of junk in the middle of a store that still opens: SQLite's integrity check itself stops with
    SQLITE_CORRUPT; that is the finding (a problem row, exit 1), in the table and in JSON alike."""
    path = tmp_path / "s.db"
    with durastate.open(path) as store:
        fill(store, bulk=2_000)
    data = bytearray(path.read_bytes())
    page = 4096
    middle = (len(data) // page // 2) * page
    data[middle : middle + page] = b"\x5a" * page
    path.write_bytes(bytes(data))
    url = f"sqlite://{path}"

    table = as_text(cli_here(url, "doctor"))
    assert table.returncode == 1, table.stderr
    assert "integrity" in table.stdout and "problem" in table.stdout and "malformed" in table.stdout
    assert table.stdout.rstrip().endswith("verdict: PROBLEM found")

    as_json = cli_here(url, "doctor", "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["verdict"] == "problem"
    assert {"check": "integrity", "verdict": "problem"}.items() <= next(
        c for c in report["checks"] if c["check"] == "integrity"
    ).items()

    info = as_text(cli_here(url, "info"))
    assert info.returncode == 0 and "PROBLEM: integrity check failed" in info.stdout


def test_info_prints_a_failed_integrity_checks_findings_one_a_line(tmp_path: Path) -> None:
    """Twelve pages no b-tree uses added to a store (the header's page count with them): it opens, and SQLite's
    quick check finds each ("Page N is never used"). ``info`` prints the findings one a line under the first (it
    printed the Python list: ``['*** in database main ***', 'Page 55 is never used', ...]``); ``--json`` has them
    as a JSON list of strings."""
    path = tmp_path / "s.db"
    with durastate.open(path) as store:
        fill(store)
    data = bytearray(path.read_bytes())
    pages = int.from_bytes(data[28:32], "big")  # the header's database size in pages
    data[28:32] = (pages + 12).to_bytes(4, "big")
    path.write_bytes(bytes(data) + bytes(4096 * 12))
    url = f"sqlite://{path}"

    as_json = cli_here(url, "info", "--json")
    assert as_json.returncode == 0, as_json.stderr
    findings = json.loads(as_json.stdout)["integrity"]
    assert len(findings) > 2 and all(isinstance(f, str) for f in findings)
    assert findings[1] == f"Page {pages + 1} is never used" and findings[-1] == "... and 3 more"

    info = as_text(cli_here(url, "info"))
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("integrity "))
    column = len(lines[first]) - len(findings[0])
    assert lines[first] == "integrity".ljust(column) + findings[0]
    assert lines[first + 1 : first + len(findings)] == [" " * column + f for f in findings[1:]]
    assert "['" not in info.stdout
    assert "PROBLEM: integrity check failed" in info.stdout


def test_doctor_json_verdict_is_the_checks_word_and_the_table_line_says_it_in_words(run: Run) -> None:
    """The JSON verdict is one of the words each check has (ok, warning, problem); the table's line words it."""
    report = json.loads(run("doctor", "--json").stdout)
    shown = run("doctor").stdout.rstrip().splitlines()[-1]
    assert shown == f"verdict: {VERDICT_SUMMARY[report['verdict']]}"
    assert {c["verdict"] for c in report["checks"]} <= set(VERDICT_SUMMARY)
