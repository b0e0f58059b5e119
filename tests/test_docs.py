"""The documentation site builds without a warning, and every example on every page runs, twice.

Each page's ``python`` blocks run in order in one namespace (see ``_docblocks``), in a fresh temporary
folder, and then a second time in the same folder: an example a reader runs again must work again (files
it created are still there the second time). ``mkdocs build --strict`` turns every warning (a broken
link, a page missing from the navigation) into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _docblocks import PageRunner, page_runner, postgres_url, runnable_blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if runnable_blocks(p))


def test_pages_with_examples_are_found() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert {"guide/kv.md", "guide/queues.md", "guide/opening.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_page_examples_run_twice_in_a_fresh_folder(page: Path, page_runner: PageRunner) -> None:
    page_runner(page)
    page_runner(page)


def test_the_opening_page_uses_the_default_path_and_postgres_when_there_is_one(
    tmp_path: Path, page_runner: PageRunner, postgres_url: str | None
) -> None:
    namespace = page_runner(DOCS / "guide" / "opening.md")
    assert (tmp_path / ".durastate" / "state.db").exists(), "durastate.open() did not use the default path"
    assert namespace.get("pg_url") == postgres_url


def test_site_builds_strict(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "guide" / "kv" / "index.html").exists()


__all__ = ["page_runner", "postgres_url"]  # the fixtures, imported for pytest to find
