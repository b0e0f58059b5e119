"""``python -m durastate.examples.pydantic_ai`` runs offline on both shared engines: an agent killed, then resumed."""

from __future__ import annotations

import pytest

from .._examples import example_output

pytestmark = pytest.mark.multiprocess


def test_the_conversation_survives_a_killed_process(shared_url: str) -> None:
    lines = example_output("pydantic_ai", shared_url).splitlines()
    assert "[process 1] turn 1: 'Sunny in Oslo (answer 1).'; 4 messages saved" in lines
    assert "[process 1] killed in the middle of turn 2" in lines
    assert "[process 1] never reached" not in lines
    # Turn 1 whole, nothing of the killed turn; the model of the new process is handed turn 1 as history.
    assert "[process 2] loaded 4 messages, usage 2 requests" in lines
    assert lines.count("[model] handed 5 messages") == 2
    assert "[process 2] turn 2: 'Sunny in Oslo (answer 2).'" in lines
    assert "[process 2] the copy loaded first is refused: ConversationConflict" in lines
    assert "[process 2] 10 messages stored" in lines
    assert lines[-1].startswith("OK:")
