"""``python -m durastate.examples.adk`` runs, offline, on each shared engine."""

from __future__ import annotations

import pytest

from .._examples import rerun_example

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_session_in_a_second_process(shared_url: str) -> None:
    rerun_example(
        "adk",
        shared_url,
        "[process 1] 4 events stored, state {'answer': 'Sunny in Oslo.', 'user:name': 'Ann'}",
        "[process 2] the model was given 5 contents",
        "[process 2] agent: You asked about the weather in Oslo, Ann.",
        "StaleSessionError",
        "[process 2] 7 events stored",
    )
