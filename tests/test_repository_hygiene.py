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


def test_every_conformance_test_is_exported() -> None:
    # tests/conformance/test_*.py (and a third-party engine's suite) collect a conformance module by
    # ``import *``: a test class or function missing from its ``__all__`` never runs anywhere. Two presence
    # classes did not for many stops (the module assigned ``__all__`` twice), one of them failing.
    import importlib
    import inspect
    import pkgutil

    import durastate.testing.conformance as conformance

    hidden = []
    for info in pkgutil.iter_modules(conformance.__path__):
        module = importlib.import_module(f"{conformance.__name__}.{info.name}")
        exported = set(getattr(module, "__all__", ()))
        for name, value in vars(module).items():
            is_test = (inspect.isclass(value) and name.startswith("Test")) or (
                inspect.isfunction(value) and name.startswith("test_")
            )
            if is_test and value.__module__ == module.__name__ and name not in exported:
                hidden.append(f"{info.name}.{name}")
    assert hidden == []
