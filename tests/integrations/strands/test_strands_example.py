"""``python -m durastate.examples.strands`` runs, offline, on each shared engine, twice on one URL."""

from __future__ import annotations

import pytest

from .._examples import rerun_example

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_agent_in_a_second_process(shared_url: str) -> None:
    for stdout in rerun_example(
        "strands",
        shared_url,
        "[process 1] 2 messages stored",
        "[process 2] restored 2 messages, state name='Ann'",
        "[process 2] the model was handed 3 messages",
        "[process 2] storage search for 'short answers': ['notes/ann.md']",
    ):
        assert stdout.splitlines()[-1].startswith("OK:")
