"""``python -m durastate.examples.agent_framework`` runs, offline, on each shared engine, twice on one URL."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_workflow_and_the_chat_in_a_second_process(shared_url: str) -> None:
    command = [sys.executable, "-m", "durastate.examples.agent_framework", "--url", shared_url]
    for _ in range(2):  # a rerun on the same URL starts over
        result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "[process 1] 4 checkpoints stored" in result.stdout
        assert "[process 2] resumed after the writer: writer called 0 times" in result.stdout
        assert "[process 2] workflow output: 'rejected: draft: durable state'" in result.stdout
        assert "[process 2] chat model was handed 3 messages; 4 stored" in result.stdout
        assert result.stdout.splitlines()[-1].startswith("OK:")
