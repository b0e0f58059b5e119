"""``python -m durastate.examples.<name> [--url URL]`` runs end to end and reports success, on both engines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_runs_and_its_checks_hold(example: str, shared_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"durastate.examples.{example}", "--url", shared_url],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"example failed:\n{result.stdout}\n{result.stderr}"
    assert result.stdout.splitlines()[-1].startswith("OK:")


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_without_arguments_uses_a_fresh_file(example: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"durastate.examples.{example}"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
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
    result = subprocess.run(
        [sys.executable, "-m", f"durastate.examples.{example}", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "--url" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_refuses_a_bare_positional_argument(example: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"durastate.examples.{example}", "sqlite:///x.db"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr
    assert list(tmp_path.iterdir()) == []
