"""Backup while writers run, progress on a terminal, interrupts, and the demo through the CLI."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import durastate
from durastate.cli import app as cli_app
from durastate.engines import sqlite_tools
from durastate.testing.sample import fill

from .conftest import run_cli


def test_backup_while_a_writer_commits_is_consistent(tmp_path: Path) -> None:
    source = tmp_path / "live.db"
    with durastate.open(source) as store:
        fill(store, bulk=20_000)
        stop = threading.Event()
        written = [0]

        def writer() -> None:
            with durastate.open(source) as w:
                while not stop.is_set():
                    with w.transaction():  # a value and the counter that counts values, in one commit
                        w.kv.put(b"live", b"rows", b"%08d" % written[0], b"x" * 200)
                        w.kv.incr(b"live", b"stats", b"rows")
                    written[0] += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            while written[0] < 50:  # the writer is running before the backup starts
                threading.Event().wait(0.01)
            done = run_cli(f"sqlite://{source}", "backup", str(tmp_path / "copy.db"), "--json")
        finally:
            stop.set()
            thread.join()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pages"] > 0
    with durastate.open(tmp_path / "copy.db") as copy:
        rows = sum(1 for _ in copy.kv.scan(b"live", b"rows"))
        assert copy.kv.counter(b"live", b"stats", b"rows") == rows > 0  # one snapshot, never half a commit
        assert copy.kv.get(b"bulk", b"rows", b"row-00019999") == b"value 19999"
    assert sorted(p.name for p in tmp_path.iterdir() if ".partial-" in p.name) == []


def test_writes_during_the_copy_restart_it_then_it_finishes_in_one_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "live.db"
    with durastate.open(source) as store, durastate.open(source) as writer:
        fill(store, bulk=20_000)
        writes = [0]
        advance = cli_app.Progress.advance

        def write_between_steps(self: cli_app.Progress, rows: int, nbytes: int = 0) -> None:
            advance(self, rows, nbytes)
            with writer.transaction():  # another connection commits after every step: SQLite restarts the copy
                writer.kv.put(b"live", b"rows", b"%08d" % writes[0], b"x")
                writer.kv.incr(b"live", b"stats", b"rows")
            writes[0] += 1

        monkeypatch.setattr(sqlite_tools, "BACKUP_STEP", 8)
        monkeypatch.setattr(cli_app.Progress, "advance", write_between_steps)
        result = cli_app.file_backup(store, tmp_path / "copy.db", quiet=True)
    assert result.restarts > sqlite_tools.BACKUP_RESTARTS and result.one_step
    with durastate.open(tmp_path / "copy.db") as copy:
        rows = sum(1 for _ in copy.kv.scan(b"live", b"rows"))
        assert copy.kv.counter(b"live", b"stats", b"rows") == rows
        assert copy.kv.get(b"bulk", b"rows", b"row-00019999") == b"value 19999"


def test_interrupted_backup_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "live.db"
    with durastate.open(source) as store:
        fill(store, bulk=20_000)

    def interrupt(self: object, rows: int, nbytes: int = 0) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_app.Progress, "advance", interrupt)
    with pytest.raises(KeyboardInterrupt), durastate.open(source, read_only=True) as store:
        cli_app.file_backup(store, tmp_path / "copy.db", quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in tmp_path.iterdir() if p.name.startswith("live.db")
    )


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    source = tmp_path / "a.db"
    with durastate.open(source) as store:
        fill(store, bulk=5_000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")}
    env["COLUMNS"] = "160"
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "durastate.cli", "export", str(tmp_path / "out.jsonl"), "--url", str(source)],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0
    assert "export" in shown and "rows/s" in shown and "B/s" in shown  # rich bar: rows and bytes per second


def test_demo_runs_through_the_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "durastate.cli", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DURASTATE_")},
            "DURASTATE_URL": "elsewhere.db",
        },
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ignores DURASTATE_URL" in done.stderr
    assert (tmp_path / ".durastate" / "state.db").exists() and not (tmp_path / "elsewhere.db").exists()
