"""Running the ``python`` blocks of a Markdown page, as a reader would paste them (README and docs/).

A page's ```python blocks run in order, in one namespace (later blocks use names earlier ones defined),
in the caller's working directory. A ``print(...)`` line whose comment follows it states the output: what
each block printed is compared with those comments. A block whose first line is ``# file: NAME`` is a
file to save, not code to run (docs/third-party-engine.md; its own test runs those).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durastate

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# `print(...)   # expected output` (the comment is the whole printed line).
PRINT_WITH_OUTPUT = re.compile(r"^\s*print\(.*\)\s+#\s?(.*?)\s*$")
PageRunner = Callable[[Path], dict[str, object]]  # what the page_runner fixture gives


def code_blocks(page: Path) -> list[tuple[str, int, str]]:
    """``(language, first line number of the code, code)`` of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in FENCE.finditer(text)]


def runnable_blocks(page: Path) -> list[tuple[int, str]]:
    """``(line, code)`` of the blocks a reader runs: ``python`` ones that are not files to save."""
    return [
        (line, code)
        for language, line, code in code_blocks(page)
        if language == "python" and not code.startswith("# file:")
    ]


def run_page(page: Path, read_output: object) -> dict[str, object]:
    """Run ``page``'s blocks in one namespace; ``read_output()`` returns what was printed since its last call.

    Raises ``AssertionError`` naming the block's line when a block printed something other than its
    comments say. Every ``durastate.Store`` the page left open is closed. Returns the namespace.
    """
    namespace: dict[str, object] = {"__name__": f"docs:{page.name}"}
    try:
        for line, code in runnable_blocks(page):
            expected = [m.group(1) for row in code.splitlines() if (m := PRINT_WITH_OUTPUT.match(row))]
            # Padding keeps line numbers in tracebacks equal to the page's lines.
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)
            printed = read_output().splitlines()  # type: ignore[operator]
            assert printed == expected, f"{page.name}: the block at line {line} printed something else"
    finally:
        for value in namespace.values():
            if isinstance(value, durastate.Store):
                value.close()
    return namespace


@pytest.fixture
def postgres_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str | None]:
    """``POSTGRES_URL`` for a page's PostgreSQL example: a throwaway schema, or unset without a server."""
    monkeypatch.delenv("POSTGRES_URL", raising=False)
    try:
        from durastate.testing import postgres_server

        base, _reason = postgres_server.server_url()
    except ImportError:  # no psycopg
        base = None
    if base is None:
        yield None
        return
    url, schema = postgres_server.create_schema(base)
    monkeypatch.setenv("POSTGRES_URL", url)
    try:
        yield url
    finally:
        postgres_server.drop_schema(base, schema)


@pytest.fixture
def page_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], postgres_url: str | None
) -> PageRunner:
    """``run(page)`` runs a page as a reader would and returns its namespace (see ``run_page``).

    In a fresh folder (``tmp_path``, made the working directory), with
    ``POSTGRES_URL`` set when there is a server (``postgres_url``).
    """
    monkeypatch.chdir(tmp_path)
    return lambda page: run_page(page, lambda: capsys.readouterr().out)
