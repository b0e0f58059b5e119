"""Event rows read by column name.

``EventColumn`` names the position of every column of ``COLUMNS`` (the
select list is built from it, so the two cannot disagree); the facet reads
``row[EventColumn.attempt_count]``, never ``row[15]``. Other statements'
rows are few columns wide and are unpacked into names where they are read.
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
        raise AssertionError(f"{positions.__name__}: positions must be 0..{len(named) - 1}, got {named}")
    return tuple(name for _, name in named)


EVENT_COLUMNS = column_names(EventColumn)
COLUMNS = ", ".join(EVENT_COLUMNS)


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


C = EventColumn

# object.__new__ without __init__: see event_from_row.
new_object = object.__new__


def event_from_row(row: Row, offset: int = 0) -> StoredEvent:
    """The ``StoredEvent`` of a row selected with ``COLUMNS`` (starting at ``offset``)."""
    # Built by filling the instance dict directly: a frozen dataclass's
    # __init__ goes through object.__setattr__ once per field (23 here),
    # which was the largest single Python cost of a claim (measured with
    # bench/events.py). Same fields, same values, still frozen afterwards.
    r = row[offset:] if offset else row
    returned = r[C.returned_event_ids]
    cause_index = r[C.cause_index]
    batch_size = r[C.cause_batch_size]
    event = new_object(StoredEvent)
    event.__dict__.update(
        id=r[C.event_id],
        type=r[C.event_type],
        payload=orjson.loads(r[C.payload]),
        index=int(r[C.idx]),
        session_id=r[C.session_id],
        created_at=int(r[C.created_at]),
        cause=None
        if cause_index is None
        else Cause(int(cause_index), int(r[C.cause_attempt]), None if batch_size is None else int(batch_size)),
        lane=r[C.lane],
        processed_at=r[C.processed_at],
        processed_by_attempt=r[C.processed_by_attempt],
        returned_event_ids=None if returned is None else tuple(orjson.loads(returned)),
        first_claimed_at=r[C.first_claimed_at],
        last_claimed_at=r[C.last_claimed_at],
        attempt_count=int(r[C.attempt_count]),
        failure_count=int(r[C.failure_count]),
        last_failed_at=r[C.last_failed_at],
        last_failed_attempt=r[C.last_failed_attempt],
        last_error=r[C.last_error],
        failed_at=r[C.failed_at],
        claim_holder=r[C.claim_holder],
        claim_expires_at=r[C.claim_expires_at],
    )
    return event
