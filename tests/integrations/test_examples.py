"""``python -m durastate.examples.<name> [--url URL]`` runs end to end and reports success, on both engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._examples import example_output, run_example

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_runs_and_its_checks_hold(example: str, shared_url: str) -> None:
    assert example_output(example, shared_url).splitlines()[-1].startswith("OK:")


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_without_arguments_uses_a_fresh_file(example: str) -> None:
    result = run_example(example)
    assert result.returncode == 0, f"example failed:\n{result.stdout}\n{result.stderr}"
    assert "sqlite:///" in result.stdout.splitlines()[0]


EXAMPLES = [
    "eventsourcing",
    "huey",
    "langchain",
    "langgraph",
    "openai_agents",
    "pydantic_ai",
    "agent_framework",
    "strands",
]


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_help_prints_usage_and_creates_nothing(example: str, tmp_path: Path) -> None:
    """``--help`` is read as a flag by every example (it once became a store URL and a file named ``--help``)."""
    result = run_example(example, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--url" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_refuses_a_bare_positional_argument(example: str, tmp_path: Path) -> None:
    result = run_example(example, "sqlite:///x.db", cwd=tmp_path)
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr
    assert list(tmp_path.iterdir()) == []
