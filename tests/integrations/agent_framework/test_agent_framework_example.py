"""``python -m durastate.examples.agent_framework`` runs, offline, on each shared engine, twice on one URL."""

from __future__ import annotations

import pytest

from .._examples import rerun_example

pytestmark = pytest.mark.multiprocess


def test_the_example_resumes_the_workflow_and_the_chat_in_a_second_process(shared_url: str) -> None:
    for stdout in rerun_example(
        "agent_framework",
        shared_url,
        "[process 1] 4 checkpoints stored",
        "[process 2] resumed after the writer: writer called 0 times",
        "[process 2] workflow output: 'rejected: draft: durable state'",
        "[process 2] chat model was handed 3 messages; 4 stored",
    ):
        assert stdout.splitlines()[-1].startswith("OK:")
