"""What a checkpoint may hold, as JSON: the classes the framework puts there, and what is refused.

The differential test covers JSON values, tuples, datetimes, UUIDs,
``Message`` and an allowed dataclass against the framework's storages; this
one covers the rest of the codec's rules: ``WorkflowMessage`` (a dataclass
holding an enum), pending request-info ``WorkflowEvent`` objects (what a
human-in-the-loop pause leaves in a checkpoint), pydantic models, enums, and
the refusals (classes not allowed, local classes, functions, classes not
imported when loading).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from agent_framework import WorkflowCheckpoint, WorkflowCheckpointException
from agent_framework._workflows._events import WorkflowEvent
from agent_framework._workflows._runner_context import MessageType, WorkflowMessage

import durastate
from durastate.errors import InvalidRequest
from durastate.integrations.agent_framework import DurastateCheckpointStorage, InvalidCheckpoint


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Order(pydantic.BaseModel):
    item: str
    quantity: int


@dataclasses.dataclass(frozen=True)
class Approval:
    question: str
    color: Color = Color.RED


ALLOWED = [f"{__name__}:{name}" for name in ("Color", "Order", "Approval")]


@pytest.fixture
def storage(store_url: str) -> Iterator[DurastateCheckpointStorage]:
    with durastate.open(store_url) as store:
        yield DurastateCheckpointStorage(store=store, allowed_checkpoint_types=ALLOWED)


def _round_trip(storage: DurastateCheckpointStorage, **fields: Any) -> WorkflowCheckpoint:
    async def main() -> WorkflowCheckpoint:
        checkpoint = WorkflowCheckpoint(workflow_name="codec", graph_signature_hash="h", **fields)
        await storage.save(checkpoint)
        return await storage.load(checkpoint.checkpoint_id)

    return asyncio.run(main())


def test_workflow_messages_events_models_and_enums_round_trip(storage: DurastateCheckpointStorage) -> None:
    request = WorkflowEvent.request_info(
        request_id="r1", source_executor_id="reviewer", request_data=Approval("ship it?"), response_type=bool
    )
    message = WorkflowMessage(
        data=Order(item="tea", quantity=2), source_id="a", target_id="b", type=MessageType.RESPONSE,
        original_request_info_event=request,
    )  # fmt: skip
    loaded = _round_trip(
        storage,
        messages={"a": [message]},
        pending_request_info_events={"r1": request},
        state={"color": Color.BLUE, "approval": Approval("ok?", Color.BLUE)},
    )
    [restored] = loaded.messages["a"]
    assert isinstance(restored, WorkflowMessage)
    assert restored.data == Order(item="tea", quantity=2)
    assert restored.type is MessageType.RESPONSE
    event = loaded.pending_request_info_events["r1"]
    assert isinstance(event, WorkflowEvent)
    assert event.request_id == "r1" and event.data == Approval("ship it?") and event.response_type is bool
    assert restored.original_request_info_event.data == Approval("ship it?")  # type: ignore[union-attr]
    assert loaded.state == {"color": Color.BLUE, "approval": Approval("ok?", Color.BLUE)}


class NotAllowed(pydantic.BaseModel):
    x: int


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (NotAllowed(x=1), "class"),
        (lambda: None, "builtins:function"),
        (object(), "builtins:object"),
        ({"deep": [1, {"x": open}]}, "['deep'][1]['x']"),
    ],
)
def test_what_json_cannot_hold_is_refused_with_where_it_is(
    storage: DurastateCheckpointStorage, value: Any, where: str
) -> None:
    checkpoint = WorkflowCheckpoint(workflow_name="refused", graph_signature_hash="h", state={"v": value})

    async def main() -> None:
        with pytest.raises(InvalidCheckpoint) as caught:
            await storage.save(checkpoint)
        assert isinstance(caught.value, WorkflowCheckpointException) and isinstance(caught.value, InvalidRequest)
        assert "state['v']" in str(caught.value) and where in str(caught.value)
        assert await storage.list_checkpoint_ids(workflow_name="refused") == []

    asyncio.run(main())


def test_a_class_that_is_not_imported_is_not_imported_by_a_load(tmp_path: Any) -> None:
    """A stored class name never makes the loading process import a module."""
    url = f"sqlite://{tmp_path}/state.db"
    (tmp_path / "appmodels.py").write_text("import dataclasses\n@dataclasses.dataclass\nclass Note:\n    text: str\n")
    save = (
        "import asyncio, appmodels\n"
        "from agent_framework import WorkflowCheckpoint\n"
        "from durastate.integrations.agent_framework import DurastateCheckpointStorage\n"
        f"s = DurastateCheckpointStorage({url!r}, allowed_checkpoint_types=['appmodels:Note'])\n"
        "cp = WorkflowCheckpoint(workflow_name='w', graph_signature_hash='h', checkpoint_id='c',"
        " state={'n': appmodels.Note('hi')})\n"
        "asyncio.run(s.save(cp)); s.close()\n"
    )
    load = (
        "import asyncio, sys\n"
        "from durastate.integrations.agent_framework import DurastateCheckpointStorage, UndecodableCheckpoint\n"
        f"s = DurastateCheckpointStorage({url!r}, allowed_checkpoint_types=['appmodels:Note'])\n"
        "try:\n    asyncio.run(s.load('c'))\nexcept UndecodableCheckpoint as exc:\n    print('refused:', exc)\n"
        "print('imported' if 'appmodels' in sys.modules else 'not imported')\n"
        "print(asyncio.run(s.list_checkpoint_ids(workflow_name='w')))\n"
    )
    for code in (save, load):
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("refused:") and "import appmodels" in lines[0]
    assert lines[1:] == ["not imported", "[]"]  # and the listing skips it, as the file storage skips such files
