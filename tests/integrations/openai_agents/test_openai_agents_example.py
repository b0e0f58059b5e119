"""``python -m durastate.examples.openai_agents`` runs, offline, on each shared engine."""

from __future__ import annotations

from .._examples import rerun_example


def test_the_example_resumes_the_conversation_in_a_second_process(shared_url: str) -> None:
    rerun_example(
        "openai_agents",
        shared_url,
        "[process 1] 4 items stored",
        "[process 2] the model was given 5 items",
        "[process 2] agent: You asked about the weather in Oslo.",
    )
