"""``python -m durastate.examples.adk`` runs, offline, on each shared engine."""

from __future__ import annotations

import pytest

from .._examples import example_output

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_session_in_a_second_process(shared_url: str) -> None:
    for _ in range(2):  # a rerun on the same URL starts the session over
        stdout = example_output("adk", shared_url)
        assert "[process 1] 4 events stored, state {'answer': 'Sunny in Oslo.', 'user:name': 'Ann'}" in stdout
        assert "[process 2] the model was given 5 contents" in stdout
        assert "[process 2] agent: You asked about the weather in Oslo, Ann." in stdout
        assert "StaleSessionError" in stdout
        assert "[process 2] 7 events stored" in stdout
