"""README.md tells the truth: its commands exist, its paths exist, its code runs.

Every ```python block is executed, in order, in one namespace (later blocks
use names defined by earlier ones), in a temporary working directory. A
``print(...)`` line whose comment follows it states the output: the test
compares what each block printed with those comments. When a PostgreSQL
server is available (see ``durastate.testing.postgres_server``), the README's
``POSTGRES_URL`` block runs against a throwaway schema on it.
"""

from __future__ import annotations

import re
from pathlib import Path

from _docblocks import FENCE, PageRunner, page_runner, postgres_url, runnable_blocks

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Repository paths the README names, in backticks.
NAMED_PATH = re.compile(r"`((?:src|tests|bench|docs|durastate)/[\w./]*)`")


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first = FENCE.search(text)
    assert first is not None
    title, *tagline = text[: first.start()].strip().split("\n\n")
    assert title.startswith("# ") and "\n" not in title
    assert len(tagline) <= 1 and len(" ".join(tagline)) <= 200, "only the title and one sentence come first"
    commands = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test", "bench", "bench-postgres"):
        assert re.search(rf"^{target}:", makefile, re.M), f"README mentions `make {target}`; the Makefile lacks it"


def test_paths_named_in_the_readme_exist() -> None:
    named = set(NAMED_PATH.findall(README.read_text(encoding="utf-8")))
    assert named, "the README names no paths; did the pattern break?"
    missing = [p for p in sorted(named) if not (ROOT / p).exists() and not (ROOT / "src" / p).exists()]
    assert missing == []


def test_readme_python_blocks_run_in_order(page_runner: PageRunner) -> None:
    assert runnable_blocks(README), "the README lost its example"
    page_runner(README)


__all__ = ["page_runner", "postgres_url"]  # the fixtures, imported for pytest to find
