"""Event rows read by column name.

``EventColumn`` names the position of every column of ``COLUMNS`` (the
select list is built from it, so the two cannot disagree); the facet reads
``row[EventColumn.attempt_count]``, never ``row[15]``. ``event_from_row``
(the hot path: every event returned) unpacks a row into the column names
at once, the fastest named access CPython has. Other statements' rows are
few columns wide and are unpacked into names where they are read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from .models import Cause, StoredEvent

if TYPE_CHECKING:
    from ..engines.base import Row


class EventColumn:
    """Position of each column in a row selected with ``COLUMNS``."""

    session_id = 0
    idx = 1
    event_id = 2
    event_type = 3
    payload = 4
    created_at = 5
    cause_index = 6
    cause_attempt = 7
    cause_batch_size = 8
    lane = 9
    processed_at = 10
    processed_by_attempt = 11
    returned_event_ids = 12
    first_claimed_at = 13
    last_claimed_at = 14
    attempt_count = 15
    failure_count = 16
    last_failed_at = 17
    last_failed_attempt = 18
    last_error = 19
    failed_at = 20
    claim_holder = 21
    claim_expires_at = 22


def column_names(positions: type) -> tuple[str, ...]:
    """The column names of a positions class, in position order (checked to be 0, 1, 2, ...)."""
    named = [(value, name) for name, value in vars(positions).items() if not name.startswith("_")]
    named.sort()
    if [value for value, _ in named] != list(range(len(named))):
        raise RuntimeError(f"{positions.__name__}: positions must be 0..{len(named) - 1}, got {named}")
    return tuple(name for _, name in named)


EVENT_COLUMNS = column_names(EventColumn)
COLUMNS = ", ".join(EVENT_COLUMNS)


# The columns of an event in READ_STATE_BRIEF's rows (after row_kind), in
# the order Events._brief_state unpacks them.
BRIEF_COLUMNS = ("session_id", "idx", "event_id", "event_type", "payload", "created_at")


class SessionColumn:
    """Position of each column in a ``LIST_SESSIONS`` row (its select list, in order)."""

    session_id = 0
    event_count = 1
    pending_count = 2
    failed_count = 3
    attempt_count = 4
    failure_count = 5
    first_event_at = 6
    # 7..12: the latest created_at, first/last claim, failure, processing and
    # dead-lettering times; the session was last updated at the greatest.
    activity_first = 7
    activity_last = 12


# object.__new__ without __init__: see event_from_row.
new_object = object.__new__


def event_from_row(row: Row, offset: int = 0) -> StoredEvent:
    """The ``StoredEvent`` of a row selected with ``COLUMNS`` (starting at ``offset``)."""
    # One unpacking into the column names (in EVENT_COLUMNS order; a test
    # compares this target list with EVENT_COLUMNS), then the instance dict
    # filled directly: a frozen dataclass's __init__ goes through
    # object.__setattr__ once per field (23 here), which was the largest
    # single Python cost of a claim (measured with bench/events.py). Same
    # fields, same values, still frozen afterwards.
    (
        session_id,
        idx,
        event_id,
        event_type,
        payload,
        created_at,
        cause_index,
        cause_attempt,
        cause_batch_size,
        lane,
        processed_at,
        processed_by_attempt,
        returned_event_ids,
        first_claimed_at,
        last_claimed_at,
        attempt_count,
        failure_count,
        last_failed_at,
        last_failed_attempt,
        last_error,
        failed_at,
        claim_holder,
        claim_expires_at,
    ) = row[offset:] if offset else row
    event = new_object(StoredEvent)
    event.__dict__.update(
        id=event_id,
        type=event_type,
        payload=orjson.loads(payload),
        index=int(idx),
        session_id=session_id,
        created_at=int(created_at),
        cause=None
        if cause_index is None
        else Cause(int(cause_index), int(cause_attempt), None if cause_batch_size is None else int(cause_batch_size)),
        lane=lane,
        processed_at=processed_at,
        processed_by_attempt=processed_by_attempt,
        returned_event_ids=None if returned_event_ids is None else tuple(orjson.loads(returned_event_ids)),
        first_claimed_at=first_claimed_at,
        last_claimed_at=last_claimed_at,
        attempt_count=int(attempt_count),
        failure_count=int(failure_count),
        last_failed_at=last_failed_at,
        last_failed_attempt=last_failed_attempt,
        last_error=last_error,
        failed_at=failed_at,
        claim_holder=claim_holder,
        claim_expires_at=claim_expires_at,
    )
    return event
