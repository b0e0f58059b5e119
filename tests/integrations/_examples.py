"""Run ``python -m durastate.examples.<name>`` in a subprocess (the examples' tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_example(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the example ``name`` with ``args``; the completed process, whatever its exit code."""
    return subprocess.run(
        [sys.executable, "-m", f"durastate.examples.{name}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=cwd,
    )


def example_output(name: str, url: str) -> str:
    """Run the example ``name`` on the store at ``url``; its stdout, failing the test when it exits non-zero."""
    result = run_example(name, "--url", url)
    assert result.returncode == 0, f"example {name} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def rerun_example(name: str, url: str, *expected: str) -> list[str]:
    """Run the example ``name`` twice on the store at ``url`` (a rerun starts over); both stdouts.

    Each run must exit 0 and print every line of ``expected`` (as a substring of its output).
    """
    outputs = []
    for _ in range(2):
        stdout = example_output(name, url)
        for line in expected:
            assert line in stdout, f"example {name} did not print {line!r}:\n{stdout}"
        outputs.append(stdout)
    return outputs
