"""``python -m durastate.examples.strands`` runs, offline, on each shared engine, twice on one URL."""

from __future__ import annotations

import pytest

from .._examples import example_output

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_agent_in_a_second_process(shared_url: str) -> None:
    for _ in range(2):  # a rerun on the same URL starts over
        stdout = example_output("strands", shared_url)
        assert "[process 1] 2 messages stored" in stdout
        assert "[process 2] restored 2 messages, state name='Ann'" in stdout
        assert "[process 2] the model was handed 3 messages" in stdout
        assert "[process 2] storage search for 'short answers': ['notes/ann.md']" in stdout
        assert stdout.splitlines()[-1].startswith("OK:")
