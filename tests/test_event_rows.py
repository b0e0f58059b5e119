"""Event rows are read by column name, and the names match the select list."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from durastate.events import COLUMNS, READ_STATE, READ_STATE_BRIEF, Cause, Events
from durastate.events.rows import BRIEF_COLUMNS, EVENT_COLUMNS, EventColumn, column_names, event_from_row


def test_columns_is_built_from_the_positions() -> None:
    assert ", ".join(EVENT_COLUMNS) == COLUMNS
    assert [getattr(EventColumn, name) for name in EVENT_COLUMNS] == list(range(len(EVENT_COLUMNS)))


def test_positions_must_be_dense() -> None:
    class Gappy:
        a = 0
        b = 2

    with pytest.raises(RuntimeError, match=r"positions must be 0\.\.1"):
        column_names(Gappy)


def test_event_from_row_unpacks_into_the_select_list_names() -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(event_from_row)))
    unpacks = [
        node.targets[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)
    ]
    assert len(unpacks) == 1
    names = tuple(element.id for element in unpacks[0].elts if isinstance(element, ast.Name))
    assert names == EVENT_COLUMNS


def test_each_column_lands_in_its_field() -> None:
    # A distinct value per column: a swapped pair would show.
    values = {name: 1000 + position for position, name in enumerate(EVENT_COLUMNS)}
    values.update(session_id="s", event_id="e", event_type="t", payload=b'{"p": 1}', lane="l")
    values.update(returned_event_ids='["r"]', last_error="boom", claim_holder="w")
    event = event_from_row(("row_kind", *(values[name] for name in EVENT_COLUMNS)), 1)
    assert (event.session_id, event.index, event.id, event.type, event.payload) == ("s", 1001, "e", "t", {"p": 1})
    assert event.cause == Cause(values["cause_index"], values["cause_attempt"], values["cause_batch_size"])
    assert event.returned_event_ids == ("r",)
    for name in (
        "created_at",
        "processed_at",
        "processed_by_attempt",
        "first_claimed_at",
        "last_claimed_at",
        "attempt_count",
        "failure_count",
        "last_failed_at",
        "last_failed_attempt",
        "failed_at",
        "claim_expires_at",
    ):
        assert getattr(event, name) == values[name], name
    assert (event.lane, event.last_error, event.claim_holder) == ("l", "boom", "w")


def test_the_state_read_puts_the_snapshot_in_the_idx_and_payload_columns() -> None:
    # read_state reads a snapshot row at 1 + EventColumn.idx / .payload.
    select = READ_STATE.template.split(" FROM ")[0]
    snapshot_columns = [c.strip() for c in select.split("SELECT", 1)[1].split(",")]
    assert snapshot_columns[1 + EventColumn.idx] == "up_to_index"
    assert snapshot_columns[1 + EventColumn.payload] == "state"


def test_the_brief_state_read_unpacks_into_its_select_list_names() -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(Events._brief_state)))
    (loop,) = [node for node in ast.walk(tree) if isinstance(node, ast.For)]
    assert isinstance(loop.target, ast.Tuple)
    names = tuple(element.id for element in loop.target.elts if isinstance(element, ast.Name))
    assert names == ("row_kind", *BRIEF_COLUMNS)
    select = READ_STATE_BRIEF.template.split(" UNION ALL ")[1].split(" FROM ")[0]
    assert select == "SELECT 1 AS row_kind, " + ", ".join(BRIEF_COLUMNS)
    snapshot_columns = [c.strip() for c in READ_STATE_BRIEF.template.split(" FROM ")[0].split(",")]
    assert snapshot_columns[1 + BRIEF_COLUMNS.index("idx")] == "up_to_index"
    assert snapshot_columns[1 + BRIEF_COLUMNS.index("payload")] == "state"
