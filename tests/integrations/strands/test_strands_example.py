"""``python -m durastate.examples.strands`` runs, offline, on each shared engine, twice on one URL."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_agent_in_a_second_process(shared_url: str) -> None:
    command = [sys.executable, "-m", "durastate.examples.strands", "--url", shared_url]
    for _ in range(2):  # a rerun on the same URL starts over
        result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "[process 1] 2 messages stored" in result.stdout
        assert "[process 2] restored 2 messages, state name='Ann'" in result.stdout
        assert "[process 2] the model was handed 3 messages" in result.stdout
        assert "[process 2] storage search for 'short answers': ['notes/ann.md']" in result.stdout
        assert result.stdout.splitlines()[-1].startswith("OK:")
