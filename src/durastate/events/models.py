"""What the events facet returns and the errors it raises (plain frozen values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Conflict, NotFound

# -- errors -------------------------------------------------------------------


class DuplicateBatch(Conflict):
    """A batch repeats an id, mixes stored and new ids, or reuses another session's id."""


class SupersededAttempt(Conflict):
    """An append names a cause attempt that no longer owns its event."""


class UnknownEvent(NotFound):
    """No event at that index in that session."""


# -- results ------------------------------------------------------------------


@dataclass(frozen=True)
class Cause:
    """What produced an event: the parent's index and the attempt that ran it."""

    index: int
    attempt: int
    batch_size: int | None = None


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored, with its processing state. Times: epoch ms (int)."""

    id: str
    type: str
    payload: Any
    index: int
    session_id: str
    created_at: int
    cause: Cause | None
    lane: str | None
    processed_at: int | None
    processed_by_attempt: int | None
    returned_event_ids: tuple[str, ...] | None
    first_claimed_at: int | None
    last_claimed_at: int | None
    attempt_count: int
    failure_count: int
    last_failed_at: int | None
    last_failed_attempt: int | None
    last_error: str | None
    failed_at: int | None
    claim_holder: str | None
    claim_expires_at: int | None


@dataclass(frozen=True)
class AppendResult:
    events: tuple[StoredEvent, ...]
    has_pending: bool  # the session has an unprocessed event after this append


@dataclass(frozen=True)
class ClaimResult:
    outcome: str  # "claimed" | "busy" | "settled"
    events: tuple[StoredEvent, ...] = ()
    retry_at: int | None = None  # busy: earliest lease expiry (ms)


@dataclass(frozen=True)
class RenewResult:
    renewed: tuple[int, ...]
    superseded: tuple[int, ...]


@dataclass(frozen=True)
class CompleteResult:
    outcome: str  # "completed" | "superseded"
    events: tuple[StoredEvent, ...] = ()


@dataclass(frozen=True)
class FailResult:
    outcome: str  # "failed" | "dead_lettered" | "superseded"
    failure_count: int


@dataclass(frozen=True)
class Snapshot:
    index: int
    state: Any


@dataclass(frozen=True)
class StateRead:
    snapshot: Snapshot | None
    events: tuple[StoredEvent, ...]


@dataclass(frozen=True)
class SnapshotInfo:
    reducer_name: str
    index: int
    updated_at: int


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    event_count: int
    pending_count: int  # unprocessed and not dead-lettered
    failed_count: int  # dead-lettered
    attempt_count: int
    failure_count: int
    first_event_at: int
    updated_at: int


@dataclass(frozen=True)
class LaneBacklog:
    """What waits in one lane across every session (``Events.lane_backlog``); times: epoch ms.

    ``lane`` is ``None`` for events appended without one. ``ready``:
    claimable now (not processed, not dead-lettered, due, first of its lane
    in its session, unclaimed or its claim ran out); ``expired_claims``: of
    those, the ones claimed by a holder that never completed or failed them
    in time; ``oldest_ready_at``: when the longest-waiting ready event became
    claimable (``None`` when nothing is ready); ``dead``: dead-lettered.
    """

    lane: str | None
    ready: int
    expired_claims: int
    oldest_ready_at: int | None
    dead: int


@dataclass(frozen=True)
class SessionPage:
    sessions: tuple[SessionSummary, ...]
    cursor: str | None  # pass back for the next page; None at the end


@dataclass(frozen=True)
class EventPage:
    events: tuple[StoredEvent, ...]
    through_index: int


# -- validation ---------------------------------------------------------------
