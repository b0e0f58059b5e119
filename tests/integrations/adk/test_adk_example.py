"""``python -m durastate.examples.adk`` runs, offline, on each shared engine."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_session_in_a_second_process(shared_url: str) -> None:
    command = [sys.executable, "-m", "durastate.examples.adk", "--url", shared_url]
    for _ in range(2):  # a rerun on the same URL starts the session over
        result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        assert result.returncode == 0, result.stderr
        assert "[process 1] 4 events stored, state {'answer': 'Sunny in Oslo.', 'user:name': 'Ann'}" in result.stdout
        assert "[process 2] the model was given 5 contents" in result.stdout
        assert "[process 2] agent: You asked about the weather in Oslo, Ann." in result.stdout
        assert "StaleSessionError" in result.stdout
        assert "[process 2] 7 events stored" in result.stdout
