"""``python -m durastate.examples.agent_framework`` runs, offline, on each shared engine, twice on one URL."""

from __future__ import annotations

import pytest

from .._examples import example_output

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_workflow_and_the_chat_in_a_second_process(shared_url: str) -> None:
    for _ in range(2):  # a rerun on the same URL starts over
        stdout = example_output("agent_framework", shared_url)
        assert "[process 1] 4 checkpoints stored" in stdout
        assert "[process 2] resumed after the writer: writer called 0 times" in stdout
        assert "[process 2] workflow output: 'rejected: draft: durable state'" in stdout
        assert "[process 2] chat model was handed 3 messages; 4 stored" in stdout
        assert stdout.splitlines()[-1].startswith("OK:")
