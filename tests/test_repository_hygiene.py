"""What a bad merge or a stray test run can leave in the repository, caught before it lands.

Three things have happened here: a merge committed with its conflict markers in README.md, SQLite
files that a test created under names made from URLs (``citus:/postgres@...``) committed at the root,
and a worktree's ``.venv``, a link to another checkout's, committed (``.gitignore`` said ``.venv/``,
which a link is not); merged, it replaced that checkout's virtual environment with a link to itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".pyi", ".md", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".html", ".css", ".js", ".json"}
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.M)


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [name for name in done.stdout.decode().split("\0") if name]


def test_no_conflict_markers_in_tracked_text() -> None:
    marked = []
    for name in tracked_files():
        path = ROOT / name
        if path.suffix in TEXT_SUFFIXES and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            if MARKER.search(text):
                marked.append(name)
    assert marked == []


def test_no_tracked_file_is_named_like_a_url_or_a_database() -> None:
    odd = [
        name
        for name in tracked_files()
        if ":" in name or "?" in name or name.endswith((".db", ".db-wal", ".db-shm", ".sqlite"))
    ]
    assert odd == []


def test_no_tracked_link_leads_out_of_the_repository() -> None:
    """A link is kept only if it stays inside the checkout (a fresh clone must not reach into another one)."""
    outside = []
    for name in tracked_files():
        path = ROOT / name
        if path.is_symlink():
            target = (path.parent / path.readlink()).resolve()
            if not target.is_relative_to(ROOT.resolve()):
                outside.append(f"{name} -> {path.readlink()}")
    assert outside == []
    assert ".venv" not in tracked_files()
