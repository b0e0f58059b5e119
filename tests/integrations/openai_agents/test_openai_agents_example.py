"""``python -m durastate.examples.openai_agents`` runs, offline, on each shared engine."""

from __future__ import annotations

import subprocess
import sys


def test_the_example_resumes_the_conversation_in_a_second_process(shared_url: str) -> None:
    command = [sys.executable, "-m", "durastate.examples.openai_agents", "--url", shared_url]
    for _ in range(2):  # a rerun on the same URL starts the conversation over
        result = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr
        assert "[process 1] 4 items stored" in result.stdout
        assert "[process 2] the model was given 5 items" in result.stdout
        assert "[process 2] agent: You asked about the weather in Oslo." in result.stdout
