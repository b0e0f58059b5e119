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
from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# `print(...)   # expected output` (the comment is the whole printed line).
PRINT_WITH_OUTPUT = re.compile(r"^\s*print\(.*\)\s+#\s?(.*?)\s*$")
# Repository paths the README names, in backticks.
NAMED_PATH = re.compile(r"`((?:src|tests|bench|docs|durastate)/[\w./]*)`")


def code_blocks() -> list[tuple[str, int, str]]:
    """``(language, first line number of the code, code)`` of every fenced block."""
    text = README.read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in FENCE.finditer(text)]


@pytest.fixture
def postgres_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str | None]:
    """``POSTGRES_URL`` for the README: a throwaway schema, or unset without a server."""
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


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first = FENCE.search(text)
    assert first is not None
    before = text[: first.start()].strip().splitlines()
    assert len(before) == 1 and before[0].startswith("# "), "only the title may come before the commands"
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


def test_readme_python_blocks_run_in_order(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    postgres_url: str | None,
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [(line, code) for language, line, code in code_blocks() if language == "python"]
    assert len(blocks) >= 10, "the README's tour lost its examples"
    namespace: dict[str, object] = {"__name__": "readme"}
    try:
        for line, code in blocks:
            expected = [m.group(1) for row in code.splitlines() if (m := PRINT_WITH_OUTPUT.match(row))]
            # Padding keeps line numbers in tracebacks equal to README lines.
            exec(compile("\n" * (line - 1) + code, str(README), "exec"), namespace)
            printed = capsys.readouterr().out.splitlines()
            assert printed == expected, f"README block at line {line} printed something else"
    finally:
        for value in namespace.values():
            if isinstance(value, durastate.Store):
                value.close()
    assert (tmp_path / ".durastate" / "state.db").exists(), "durastate.open() did not use the default path"
    # The PostgreSQL example ran against the server when there is one.
    assert namespace.get("pg_url") == postgres_url
