"""``python -m durastate.examples.langgraph`` runs and tells the story it promises, on both engines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph")


def test_example_runs(shared_url: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "durastate.examples.langgraph", "--url", shared_url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "1. waiting for a human: send this reply? (yes/no)"
    assert "2. after a restart the thread is still at: ('approve',)" in lines
    assert "   resumed and finished: sent: Hello ada, about 'where is my order?': we are on it." in lines
    assert "   the fork sent: sent: Hello ada, your order ships today." in lines
    assert lines[-1] == "4. the store remembers ada: {'visits': 2}"
