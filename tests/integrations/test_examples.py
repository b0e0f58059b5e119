"""``python -m durastate.examples.<name> [URL]`` runs end to end and reports success, on both engines."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("example", ["eventsourcing", "huey"])
def test_example_runs_and_its_checks_hold(example: str, shared_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"durastate.examples.{example}", shared_url],
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
