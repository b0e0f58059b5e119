"""``python -m durastate.examples.openai_agents`` runs, offline, on each shared engine."""

from __future__ import annotations

from .._examples import example_output


def test_the_example_resumes_the_conversation_in_a_second_process(shared_url: str) -> None:
    for _ in range(2):  # a rerun on the same URL starts the conversation over
        stdout = example_output("openai_agents", shared_url)
        assert "[process 1] 4 items stored" in stdout
        assert "[process 2] the model was given 5 items" in stdout
        assert "[process 2] agent: You asked about the weather in Oslo." in stdout
