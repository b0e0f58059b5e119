"""``store.events``: event-sourced sessions (the experimental-a2 store).

A *session* is an append-only log of JSON events with dense indexes 1, 2,
3, ... Work is driven by the events themselves: an unprocessed event is
*claimed* by a worker (a lease with a holder and an expiry), and the worker
either *completes* it (atomically appending the child events it produced)
or *fails* it (dead-lettered after ``max_failures``). Every claim bumps the
event's attempt number; the attempt number fences everything a worker does
afterwards, so a worker whose lease ran out and whose event was claimed
again can neither complete, fail, nor append events caused by it.

Rules (the a2 seed's, clause by clause):

* ``append(session, events)``: each event is a mapping ``{"type": str,
  "payload": JSON, "id"?: str, "cause"?: {"index", "attempt",
  "batch_size"?}, "lane"?: str, "settled"?: bool}``. Indexes continue the
  session densely. Idempotent: a batch whose ids *all* exist returns the
  stored events of the first append (in index order; the ids are the
  idempotency key, the content is not compared). A batch that mixes existing
  and new ids, repeats an id, or reuses an id of another session is refused
  whole (``DuplicateBatch``). An event with a ``cause`` is accepted only
  while the cause's attempt is still the parent's latest and the parent is
  not dead-lettered (``SupersededAttempt``); a cause naming no event raises
  ``UnknownEvent``. ``settled`` events are stored processed.
* Lanes: of the unprocessed events sharing a ``lane``, only the first (by
  index) is ready; completing it promotes the next. A dead-lettered head
  blocks its lane until it is re-driven.
* ``claim_available(session, holder, ttl_ms=|expires_at_ms=,
  exclude_indexes=)`` claims every ready, unclaimed (or lease-expired)
  event of the session: outcome ``claimed`` with the events (attempt number
  bumped), else ``busy`` with ``retry_at`` (the earliest live lease
  expiry), else ``settled``.
* ``renew_claims``: extends live leases the holder still owns (``renewed``);
  claims whose event was claimed again are ``superseded``; others neither.
* ``complete_attempt(session, index, attempt, events)``: marks the event
  processed by that attempt and appends the child events (each needs an
  ``id``; their cause is ``{index, attempt}``) in one commit. A retry with
  the same ids returns the stored children; a different batch is refused.
  A stale attempt gets outcome ``superseded`` and changes nothing.
* ``fail_attempt(..., error, max_failures)``: ``failed`` (the event is
  claimable again at once) or ``dead_lettered`` once ``failure_count``
  reaches ``max_failures``; a retry of the same failure answers the same
  outcome; a stale attempt gets ``superseded``.
* Reducer snapshots: ``put_snapshot`` never moves a snapshot backwards;
  ``read_state`` returns the snapshot and the events after it, read in one
  statement (consistent).
* Inspection: ``list_sessions`` (prefix, counts, cursor), ``read_events``
  (pages bounded by a frontier), ``list_snapshots``.
* ``stream(session, start_after)``: existing events, then new ones as they
  commit, forever (close the generator, or pass ``stop=threading.Event``).

Beyond the seed:

* ``claim_any(holder, ttl_ms=, limit=)`` claims ready events across all
  sessions, oldest-ready first (``FOR UPDATE SKIP LOCKED`` on PostgreSQL,
  so concurrent workers take different events without waiting).
* ``dead_letters(session=None)`` lists dead-lettered events;
  ``redrive(session, indexes=None)`` makes them claimable again with a fresh
  failure count (their attempt numbers keep counting, so old attempts stay
  fenced).
* ``prune(older_than_ms=, keep_last=)`` deletes processed events that every
  snapshot of their session already covers, in small batches (see its
  docstring for what a pruned event no longer supports).
* Everything takes part in ``store.transaction()``.

Design decisions (where the seed and DESIGN are silent):

* **Times are integer epoch milliseconds** throughout this facet (as in the
  seed's ``ttlMs``/``expiresAtMs`` and its storage), taken from the store's
  clock (``engine.now_ms()``), never from SQL ``now()``. The a2 adapter
  turns them into aware datetimes.
* **One row per session** (``{p}event_session``) holds the last index. Every
  operation that assigns indexes (append, complete) locks it first
  (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
  serialises writers anyway), so indexes are dense and commit in index
  order: a reader tailing ``idx > last_seen`` never skips a late commit.
  Operations that act on one event (fail, the append fence, complete) lock
  that event's row; claims are conditional ``UPDATE``s (``WHERE`` the event
  is still ready and unleased), so no event is ever held by two live leases.
* **One scheduling column**, ``due_at``: when the event became claimable
  (append, lane promotion, failure, re-drive) or, while leased, the lease
  expiry. Claims select ``due_at <= now``; an expired lease needs no reaper.
* **Refusals never come from constraint violations** (they would doom a
  surrounding transaction): ids are checked first, and inserts use
  ``ON CONFLICT (event_id) DO NOTHING`` so even a concurrent duplicate is a
  ``DuplicateBatch`` raised by us.
* **Strings** (session ids, event ids, types, lanes, holders, reducer
  names) are ``str`` without NUL or lone surrogates; the indexed ones are at
  most ``MAX_NAME_SIZE`` UTF-8 bytes (PostgreSQL's btree entry limit).
  Sessions sort by code point on both engines (``COLLATE "C"``).
* **Payloads and snapshot states** are any JSON value (orjson, compact,
  stored as bytes): NaN/infinity, non-str keys and lone surrogates are
  refused with ``InvalidRequest``; at most the store's ``max_value_size``.
* **Results are frozen dataclasses with tuples** (never shared mutable
  lists).
* **Streams** wake at once for appends made by this process (SQLite) or any
  client (PostgreSQL ``LISTEN/NOTIFY``, sent by a trigger at commit);
  otherwise they re-check every ``POLL_INTERVAL`` (50 ms) with one indexed
  read. On PostgreSQL a waiting stream borrows a pool connection for up to
  one poll interval.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ._json import dump_json
from ._retention import BATCH
from ._validate import as_int64, as_list, fail
from .documents import prefix_successor
from .engines.base import READ, WRITE, WRITE_ROWS, Announce, Migration, Schema
from .errors import Conflict, NotFound

if TYPE_CHECKING:
    from .engines.base import Engine, Row

__all__ = [
    "SCHEMA",
    "AppendResult",
    "Cause",
    "ClaimResult",
    "CompleteResult",
    "DuplicateBatch",
    "EventPage",
    "Events",
    "FailResult",
    "RenewResult",
    "SessionPage",
    "SessionSummary",
    "Snapshot",
    "SnapshotInfo",
    "StateRead",
    "StoredEvent",
    "SupersededAttempt",
    "UnknownEvent",
]

MAX_NAME_SIZE = 1024
POLL_INTERVAL = 0.05
PAGE_SIZE = 512
PRUNE_BATCH = 256
INT64_MAX = 2**63 - 1
# Longest TTL in ms: "now + ttl" must still fit the int64 columns.
MAX_DURATION_MS = 2**62

_INDEXES = (
    "CREATE UNIQUE INDEX {p}event_id ON {p}event (event_id)",
    "CREATE INDEX {p}event_unprocessed ON {p}event (session_id, idx) WHERE processed_at IS NULL",
    "CREATE INDEX {p}event_lane ON {p}event (session_id, lane, idx) WHERE processed_at IS NULL",
    "CREATE INDEX {p}event_ready ON {p}event (session_id, idx)"
    " WHERE lane_ready = 1 AND processed_at IS NULL AND failed_at IS NULL",
    "CREATE INDEX {p}event_due ON {p}event (due_at, session_id, idx)"
    " WHERE lane_ready = 1 AND processed_at IS NULL AND failed_at IS NULL",
    "CREATE INDEX {p}event_dead ON {p}event (session_id, idx) WHERE failed_at IS NOT NULL",
)

SCHEMA = Schema(
    facet="events",
    migrations=(
        Migration(
            # Rowid tables (not {without_rowid}): payloads can be large.
            # {key_text}: session ids and reducer names compare by code point
            # (prefix ranges and cursors need it).
            statements=(
                "CREATE TABLE {p}event_session ("
                " session_id {key_text} PRIMARY KEY, last_index {int64} NOT NULL, created_at {int64} NOT NULL)",
                "CREATE TABLE {p}event ("
                " session_id {key_text} NOT NULL, idx {int64} NOT NULL, event_id {text} NOT NULL,"
                " event_type {text} NOT NULL, payload {blob} NOT NULL, created_at {int64} NOT NULL,"
                " cause_index {int64}, cause_attempt {int64}, cause_batch_size {int64}, lane {text},"
                " lane_ready {int64} NOT NULL DEFAULT 0, due_at {int64} NOT NULL DEFAULT 0,"
                " processed_at {int64}, processed_by_attempt {int64}, returned_event_ids {text},"
                " first_claimed_at {int64}, last_claimed_at {int64},"
                " attempt_count {int64} NOT NULL DEFAULT 0, failure_count {int64} NOT NULL DEFAULT 0,"
                " last_failed_at {int64}, last_failed_attempt {int64}, last_error {text}, failed_at {int64},"
                " claim_holder {text}, claim_expires_at {int64},"
                " PRIMARY KEY (session_id, idx))",
                "CREATE TABLE {p}event_snapshot ("
                " session_id {key_text} NOT NULL, reducer_name {key_text} NOT NULL, up_to_index {int64} NOT NULL,"
                " state {blob} NOT NULL, updated_at {int64} NOT NULL, PRIMARY KEY (session_id, reducer_name))",
                *_INDEXES,
            ),
            # New events wake waiters on channel("events:" + session) by
            # themselves where the engine can (one announcement per session
            # and statement, at commit): an append costs no extra round trip.
            announce=(Announce(table="event", key="session_id", channel="events:"),),
        ),
    ),
)

# -- statements ---------------------------------------------------------------

COLUMNS = (
    "session_id, idx, event_id, event_type, payload, created_at, cause_index, cause_attempt,"
    " cause_batch_size, lane, processed_at, processed_by_attempt, returned_event_ids, first_claimed_at,"
    " last_claimed_at, attempt_count, failure_count, last_failed_at, last_failed_attempt, last_error,"
    " failed_at, claim_holder, claim_expires_at"
)
_READY = "lane_ready = 1 AND processed_at IS NULL AND failed_at IS NULL"

# The session row is the lock every index-assigning operation takes first.
# PostgreSQL: a row lock held to commit; SQLite: BEGIN IMMEDIATE already
# serialises writers (and has no FOR UPDATE). The second column says whether
# the session has an unprocessed event (read under the same lock).
_LOCK_SESSION_BODY = (
    "SELECT s.last_index,"
    " (SELECT 1 FROM {p}event e WHERE e.session_id = s.session_id AND e.processed_at IS NULL LIMIT 1)"
    " FROM {p}event_session s WHERE s.session_id = ?"
)
LOCK_SESSION = READ(_LOCK_SESSION_BODY + "{for_update_of:s}")
CREATE_SESSION = WRITE_ROWS(
    "INSERT INTO {p}event_session (session_id, last_index, created_at) VALUES (?, 0, ?)"
    " ON CONFLICT (session_id) DO NOTHING RETURNING last_index"
)
SET_LAST_INDEX = WRITE("UPDATE {p}event_session SET last_index = ? WHERE session_id = ?")
LAST_INDEX = READ("SELECT last_index FROM {p}event_session WHERE session_id = ?")
HAS_PENDING = READ("SELECT 1 FROM {p}event WHERE session_id = ? AND processed_at IS NULL LIMIT 1")
EVENT_BY_ID = READ("SELECT " + COLUMNS + " FROM {p}event WHERE event_id = ?")
_GET_EVENT = "SELECT " + COLUMNS + " FROM {p}event WHERE session_id = ? AND idx = ?"
GET_EVENT = READ(_GET_EVENT)
# The event row stays locked until commit on PostgreSQL, so a concurrent
# claim (which does not take the session lock) cannot bump its attempt
# between our check and our write.
GET_EVENT_LOCKED = READ(_GET_EVENT + "{for_update}")
# lane_ready: ready unless an unprocessed event of the same lane exists
# (earlier in this batch included: rows are inserted one by one).
# "WHERE 1 = 1": SQLite needs a WHERE before ON CONFLICT in INSERT ... SELECT.
INSERT_EVENT = WRITE_ROWS(
    "INSERT INTO {p}event (session_id, idx, event_id, event_type, payload, created_at, cause_index,"
    " cause_attempt, cause_batch_size, lane, lane_ready, due_at, processed_at)"
    " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " CASE WHEN CAST(? AS TEXT) IS NULL THEN 1"
    " WHEN NOT EXISTS (SELECT 1 FROM {p}event WHERE session_id = ? AND lane = ? AND processed_at IS NULL)"
    " THEN 1 ELSE 0 END, ?, ?"
    " WHERE 1 = 1 ON CONFLICT (event_id) DO NOTHING RETURNING idx"
)
MARK_PROCESSED = WRITE(
    "UPDATE {p}event SET processed_at = ?, processed_by_attempt = ?, returned_event_ids = ?,"
    " lane_ready = 0, claim_holder = NULL, claim_expires_at = NULL WHERE session_id = ? AND idx = ?"
)
PROMOTE_LANE = WRITE(
    "UPDATE {p}event SET lane_ready = 1, due_at = ? WHERE session_id = ? AND lane_ready = 0 AND idx = ("
    "SELECT idx FROM {p}event WHERE session_id = ? AND lane = ? AND processed_at IS NULL ORDER BY idx LIMIT 1)"
)
_CLAIM_SET = (
    "UPDATE {p}event SET attempt_count = attempt_count + 1, first_claimed_at = COALESCE(first_claimed_at, ?),"
    " last_claimed_at = ?, claim_holder = ?, claim_expires_at = ?, due_at = ?"
)
# Every claim re-checks readiness in the UPDATE's own WHERE: on PostgreSQL
# a row another transaction claimed meanwhile is re-evaluated after its lock
# is released and no longer matches.
CLAIM_SESSION = WRITE_ROWS(
    _CLAIM_SET + " WHERE session_id = ? AND " + _READY + " AND due_at <= ? AND idx IN ("
    "SELECT idx FROM {p}event WHERE session_id = ? AND " + _READY + " AND due_at <= ? ORDER BY idx LIMIT ?)"
    " RETURNING " + COLUMNS
)
CLAIM_CANDIDATES = READ("SELECT idx FROM {p}event WHERE session_id = ? AND " + _READY + " AND due_at <= ? ORDER BY idx")
CLAIM_ONE = WRITE_ROWS(
    _CLAIM_SET + " WHERE session_id = ? AND idx = ? AND " + _READY + " AND due_at <= ? RETURNING " + COLUMNS
)
# Across sessions, oldest-ready first; concurrent PostgreSQL claimers skip
# each other's rows instead of queueing behind them. The rows are then
# claimed one by one with CLAIM_ONE: an "UPDATE ... WHERE key IN (SELECT
# ... LIMIT n FOR UPDATE SKIP LOCKED)" may re-run its subquery on
# PostgreSQL, which then skips the rows the UPDATE itself just changed and
# hands out more than n.
CLAIM_ANY_CANDIDATES = READ(
    "SELECT session_id, idx FROM {p}event WHERE " + _READY + " AND due_at <= ?"
    " ORDER BY due_at, session_id, idx LIMIT ?{skip_locked}"
)
RETRY_AT = READ(
    "SELECT MIN(claim_expires_at) FROM {p}event WHERE session_id = ? AND " + _READY + " AND claim_expires_at > ?"
)
ATTEMPT_OF = READ("SELECT attempt_count FROM {p}event WHERE session_id = ? AND idx = ?")
RENEW = WRITE(
    "UPDATE {p}event SET claim_expires_at = ?, due_at = ? WHERE session_id = ? AND idx = ? AND attempt_count = ?"
    " AND processed_at IS NULL AND failed_at IS NULL AND claim_holder = ? AND claim_expires_at > ?"
)
FAIL = WRITE(
    "UPDATE {p}event SET failure_count = ?, last_error = ?, last_failed_at = ?, last_failed_attempt = ?,"
    " failed_at = ?, claim_holder = NULL, claim_expires_at = NULL, due_at = ? WHERE session_id = ? AND idx = ?"
)
READ_RANGE = READ(
    "SELECT " + COLUMNS + " FROM {p}event WHERE session_id = ? AND idx > ? AND idx <= ? ORDER BY idx LIMIT ?"
)
_NULL_COLUMNS = ", ".join(
    "NULL" if c.strip() not in ("idx", "payload") else ("up_to_index" if c.strip() == "idx" else "state")
    for c in COLUMNS.split(",")
)
# One statement: the snapshot and the events after it are one consistent
# read (a snapshot moving on, or a prune, between two reads could not tear it).
READ_STATE = READ(
    "SELECT 0 AS row_kind, " + _NULL_COLUMNS + " FROM {p}event_snapshot WHERE session_id = ? AND reducer_name = ?"
    " UNION ALL SELECT 1 AS row_kind, " + COLUMNS + " FROM {p}event WHERE session_id = ? AND idx > COALESCE("
    "(SELECT up_to_index FROM {p}event_snapshot WHERE session_id = ? AND reducer_name = ?), 0)"
    " ORDER BY 1, 3"
)
PUT_SNAPSHOT = WRITE(
    "INSERT INTO {p}event_snapshot (session_id, reducer_name, up_to_index, state, updated_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, reducer_name) DO UPDATE SET"
    " up_to_index = excluded.up_to_index, state = excluded.state, updated_at = excluded.updated_at"
    " WHERE excluded.up_to_index > {p}event_snapshot.up_to_index"
)
LIST_SNAPSHOTS = READ(
    "SELECT reducer_name, up_to_index, updated_at FROM {p}event_snapshot WHERE session_id = ? ORDER BY reducer_name"
)
# Flags (? = 0 OR ...) switch the optional bounds on and off, so one text
# serves every combination of prefix upper bound and cursor.
LIST_SESSIONS = READ(
    "SELECT session_id, COUNT(*),"
    " SUM(CASE WHEN processed_at IS NULL AND failed_at IS NULL THEN 1 ELSE 0 END),"
    " SUM(CASE WHEN failed_at IS NOT NULL THEN 1 ELSE 0 END), SUM(attempt_count), SUM(failure_count),"
    " MIN(created_at), MAX(created_at), MAX(first_claimed_at), MAX(last_claimed_at), MAX(last_failed_at),"
    " MAX(processed_at), MAX(failed_at)"
    " FROM {p}event WHERE session_id >= ? AND (? = 0 OR session_id < ?) AND (? = 0 OR session_id > ?)"
    " GROUP BY session_id ORDER BY session_id LIMIT ?"
)
DEAD_IN_SESSION = READ(
    "SELECT " + COLUMNS + " FROM {p}event WHERE session_id = ? AND failed_at IS NOT NULL AND idx > ?"
    " ORDER BY idx LIMIT ?"
)
DEAD_ALL = READ(
    "SELECT " + COLUMNS + " FROM {p}event WHERE failed_at IS NOT NULL"
    " AND (session_id > ? OR (session_id = ? AND idx > ?)) ORDER BY session_id, idx LIMIT ?"
)
REDRIVE_ONE = WRITE(
    "UPDATE {p}event SET failed_at = NULL, failure_count = 0, due_at = ?"
    " WHERE session_id = ? AND idx = ? AND failed_at IS NOT NULL"
)
REDRIVE_SESSION = WRITE(
    "UPDATE {p}event SET failed_at = NULL, failure_count = 0, due_at = ? WHERE session_id = ? AND failed_at IS NOT NULL"
)
SNAPSHOT_FLOORS = READ(
    "SELECT s.session_id, MIN(s.up_to_index), MAX(x.last_index) FROM {p}event_snapshot s"
    " JOIN {p}event_session x ON x.session_id = s.session_id GROUP BY s.session_id ORDER BY s.session_id"
)
PRUNE = WRITE(
    "DELETE FROM {p}event WHERE session_id = ? AND idx IN (SELECT idx FROM {p}event WHERE session_id = ?"
    " AND processed_at IS NOT NULL AND processed_at <= ? AND idx <= ? ORDER BY idx LIMIT ?)"
)

# Retention: a session goes oldest events first, up to the index it had when
# the deletion began (readers meanwhile see a shrinking suffix), then, under
# the session lock, whatever is left with its snapshots and its row.
DELETE_SESSION_BATCH = WRITE(
    "DELETE FROM {p}event WHERE session_id = ? AND idx IN (SELECT idx FROM {p}event WHERE session_id = ?"
    " AND idx <= ? ORDER BY idx LIMIT ?)"
)
DELETE_SESSION_EVENTS = WRITE("DELETE FROM {p}event WHERE session_id = ?")
DELETE_SESSION_SNAPSHOTS = WRITE("DELETE FROM {p}event_snapshot WHERE session_id = ?")
DELETE_SESSION_ROW = WRITE("DELETE FROM {p}event_session WHERE session_id = ?")
# Settled: nothing unprocessed (no pending, claimed or dead-lettered event) and
# no activity since the cutoff (the last processing, or the session's creation).
_SETTLED = (
    " NOT EXISTS (SELECT 1 FROM {p}event e WHERE e.session_id = s.session_id AND e.processed_at IS NULL)"
    " AND COALESCE((SELECT MAX(e.processed_at) FROM {p}event e WHERE e.session_id = s.session_id), s.created_at) < ?"
)
SETTLED_SESSIONS = READ(
    "SELECT s.session_id FROM {p}event_session s WHERE s.session_id > ? AND"
    + _SETTLED
    + " ORDER BY s.session_id LIMIT ?"
)
STILL_SETTLED = READ("SELECT 1 FROM {p}event_session s WHERE s.session_id = ? AND" + _SETTLED)


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
class SessionPage:
    sessions: tuple[SessionSummary, ...]
    cursor: str | None  # pass back for the next page; None at the end


@dataclass(frozen=True)
class EventPage:
    events: tuple[StoredEvent, ...]
    through_index: int


# -- validation ---------------------------------------------------------------


def text(name: str, value: Any, *, indexed: bool = True) -> str:
    """A ``str`` without NUL or lone surrogates (indexed: at most MAX_NAME_SIZE bytes)."""
    if not isinstance(value, str):
        fail(f"{name} must be a str, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        fail(f"{name} must be valid unicode (no lone surrogates), got {value!r:.80}")
    if "\x00" in value:
        fail(f"{name} must not contain NUL characters")
    if indexed and size > MAX_NAME_SIZE:
        fail(f"{name} is {size} bytes; the limit is {MAX_NAME_SIZE}")
    return str(value)


def positive(name: str, value: Any) -> int:
    n = as_int64(name, value)
    if n < 1:
        fail(f"{name} must be >= 1, got {n}")
    return n


def _expiry(now: int, ttl_ms: Any, expires_at_ms: Any) -> int:
    if expires_at_ms is not None:
        return as_int64("expires_at_ms", expires_at_ms)
    if ttl_ms is None:
        fail("pass ttl_ms= or expires_at_ms=")
    ttl = as_int64("ttl_ms", ttl_ms)
    if not 0 <= ttl <= MAX_DURATION_MS:
        fail(f"ttl_ms must be between 0 and {MAX_DURATION_MS}, got {ttl}")
    return now + ttl


_EVENT_KEYS = frozenset(("type", "payload", "id", "cause", "lane", "settled"))


@dataclass
class _NewEvent:
    id: str | None
    type: str
    blob: bytes
    cause: Cause | None
    lane: str | None
    settled: bool


def _cause(name: str, value: Any) -> Cause | None:
    if value is None:
        return None
    if isinstance(value, Cause):
        value = {"index": value.index, "attempt": value.attempt, "batch_size": value.batch_size}
    if not isinstance(value, Mapping):
        fail(f"{name} must be a mapping {{'index', 'attempt', 'batch_size'?}}, got {type(value).__name__}")
    unknown = set(value) - {"index", "attempt", "batch_size"}
    if unknown:
        fail(f"{name} has unknown keys {sorted(map(str, unknown))}")
    if "index" not in value or "attempt" not in value:
        fail(f"{name} needs 'index' and 'attempt'")
    batch = value.get("batch_size")
    return Cause(
        positive(f"{name}.index", value["index"]),
        positive(f"{name}.attempt", value["attempt"]),
        None if batch is None else positive(f"{name}.batch_size", batch),
    )


def _new_events(name: str, events: Any, max_size: int, *, need_ids: bool) -> list[_NewEvent]:
    if type(events) is tuple and not events:  # the default; skips as_list's ABC checks
        return []
    prepared: list[_NewEvent] = []
    # Fast paths (exact list / dict types skip ABC isinstance checks; the
    # key check runs as a subset test) keep an append's validation a small
    # part of its cost; the checks and messages are the same.
    for i, event in enumerate(events if type(events) is list else as_list(name, events)):
        where = f"{name}[{i}]"
        if type(event) is not dict and not isinstance(event, Mapping):
            fail(f"{where} must be a mapping with 'type' and 'payload', got {type(event).__name__}")
        if not event.keys() <= _EVENT_KEYS:
            unknown = set(event) - _EVENT_KEYS
            fail(f"{where} has unknown keys {sorted(map(str, unknown))}")
        if "type" not in event:
            fail(f"{where} needs a 'type'")
        event_id = event.get("id")
        if event_id is not None:
            event_id = text(f"{where}.id", event_id)
        elif need_ids:
            fail(f"{where} needs an 'id' (returned events are matched by id on retry)")
        lane = event.get("lane")
        settled = event.get("settled", False)
        if settled is None:
            settled = False
        if not isinstance(settled, bool):
            fail(f"{where}.settled must be a bool, got {type(settled).__name__}")
        prepared.append(
            _NewEvent(
                event_id,
                text(f"{where}.type", event["type"], indexed=False),
                dump_json(f"{where}.payload", event.get("payload"), max_size),
                None if (cause := event.get("cause")) is None else _cause(f"{where}.cause", cause),
                None if lane is None else text(f"{where}.lane", lane),
                settled,
            )
        )
    return prepared


def _ids_unique(prepared: list[_NewEvent]) -> list[str]:
    ids = [e.id for e in prepared if e.id is not None]
    if len(set(ids)) != len(ids):
        raise DuplicateBatch("batch contains the same event id more than once")
    return ids


def _event(row: Row, offset: int = 0) -> StoredEvent:
    # Built by filling the instance dict directly: a frozen dataclass's
    # __init__ goes through object.__setattr__ once per field (23 here),
    # which was the largest single Python cost of a claim (measured with
    # bench/events.py). Same fields, same values, still frozen afterwards.
    r = row[offset:] if offset else row
    returned = r[12]
    event = _new_object(StoredEvent)
    event.__dict__.update(
        id=r[2],
        type=r[3],
        payload=orjson.loads(r[4]),
        index=int(r[1]),
        session_id=r[0],
        created_at=int(r[5]),
        cause=None if r[6] is None else Cause(int(r[6]), int(r[7]), None if r[8] is None else int(r[8])),
        lane=r[9],
        processed_at=r[10],
        processed_by_attempt=r[11],
        returned_event_ids=None if returned is None else tuple(orjson.loads(returned)),
        first_claimed_at=r[13],
        last_claimed_at=r[14],
        attempt_count=int(r[15]),
        failure_count=int(r[16]),
        last_failed_at=r[17],
        last_failed_attempt=r[18],
        last_error=r[19],
        failed_at=r[20],
        claim_holder=r[21],
        claim_expires_at=r[22],
    )
    return event


_new_object = object.__new__


def _default_id() -> str:
    return str(uuid.uuid4())


class Events:
    """The events facet of a ``Store`` (see the module docstring)."""

    def __init__(self, engine: Engine, *, max_value_size: int) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        sql = engine.sql
        self._lock_session = sql(LOCK_SESSION)
        self._create_session = sql(CREATE_SESSION)
        self._set_last_index = sql(SET_LAST_INDEX)
        self._last_index = sql(LAST_INDEX)
        self._has_pending = sql(HAS_PENDING)
        self._event_by_id = sql(EVENT_BY_ID)
        self._get_event = sql(GET_EVENT)
        self._get_event_locked = sql(GET_EVENT_LOCKED)
        self._insert_event = sql(INSERT_EVENT)
        self._mark_processed = sql(MARK_PROCESSED)
        self._promote_lane = sql(PROMOTE_LANE)
        self._claim_session = sql(CLAIM_SESSION)
        self._claim_candidates = sql(CLAIM_CANDIDATES)
        self._claim_one = sql(CLAIM_ONE)
        self._claim_any_candidates = sql(CLAIM_ANY_CANDIDATES)
        self._retry_at = sql(RETRY_AT)
        self._attempt_of = sql(ATTEMPT_OF)
        self._renew = sql(RENEW)
        self._fail = sql(FAIL)
        self._read_range = sql(READ_RANGE)
        self._read_state = sql(READ_STATE)
        self._put_snapshot = sql(PUT_SNAPSHOT)
        self._list_snapshots = sql(LIST_SNAPSHOTS)
        self._list_sessions = sql(LIST_SESSIONS)
        self._dead_in_session = sql(DEAD_IN_SESSION)
        self._dead_all = sql(DEAD_ALL)
        self._redrive_one = sql(REDRIVE_ONE)
        self._redrive_session = sql(REDRIVE_SESSION)
        self._snapshot_floors = sql(SNAPSHOT_FLOORS)
        self._prune = sql(PRUNE)
        self._delete_session_batch = sql(DELETE_SESSION_BATCH)
        self._delete_session_final = (
            sql(DELETE_SESSION_EVENTS),
            sql(DELETE_SESSION_SNAPSHOTS),
            sql(DELETE_SESSION_ROW),
        )
        self._settled_sessions = sql(SETTLED_SESSIONS)
        self._still_settled = sql(STILL_SETTLED)

    @staticmethod
    def channel(session_id: str) -> str:
        """The ``Engine.wait_for_change`` channel woken by appends to ``session_id``."""
        return "events:" + session_id

    # -- session lock ----------------------------------------------------------

    def _lock(self, session: str, now: int, *, create: bool) -> tuple[int, bool] | None:
        """Lock the session row (creating it if asked): (last_index, has_pending)."""
        engine = self._engine
        row = engine.one(self._lock_session, (session,))
        if row is None:
            if not create:
                return None
            if engine.one(self._create_session, (session, now)) is not None:
                return 0, False
            row = engine.one(self._lock_session, (session,))  # created concurrently
            assert row is not None
        return int(row[0]), row[1] is not None

    def _existing(self, ids: list[str]) -> list[StoredEvent]:
        found = []
        for event_id in ids:
            row = self._engine.one(self._event_by_id, (event_id,))
            if row is not None:
                found.append(_event(row))
        return found

    def _insert(
        self, session: str, base: int, now: int, prepared: list[_NewEvent], new_id: Callable[[], str]
    ) -> list[StoredEvent]:
        engine = self._engine
        stored = []
        for offset, e in enumerate(prepared):
            index = base + 1 + offset
            event_id = e.id if e.id is not None else text("generated id", new_id())
            cause = e.cause
            params = (
                session,
                index,
                event_id,
                e.type,
                e.blob,
                now,
                None if cause is None else cause.index,
                None if cause is None else cause.attempt,
                None if cause is None else cause.batch_size,
                e.lane,
                e.lane,
                session,
                e.lane,
                now,
                now if e.settled else None,
            )
            if engine.one(self._insert_event, params) is None:
                raise DuplicateBatch(f"event id {event_id!r} already exists")
            event = _new_object(StoredEvent)  # see _event
            event.__dict__.update(
                id=event_id,
                type=e.type,
                payload=orjson.loads(e.blob),
                index=index,
                session_id=session,
                created_at=now,
                cause=cause,
                lane=e.lane,
                processed_at=now if e.settled else None,
                processed_by_attempt=None,
                returned_event_ids=None,
                first_claimed_at=None,
                last_claimed_at=None,
                attempt_count=0,
                failure_count=0,
                last_failed_at=None,
                last_failed_attempt=None,
                last_error=None,
                failed_at=None,
                claim_holder=None,
                claim_expires_at=None,
            )
            stored.append(event)
        engine.execute(self._set_last_index, (base + len(prepared), session))
        return stored

    # -- append / read ---------------------------------------------------------

    def append(
        self, session_id: str, events: Iterable[Mapping[str, Any]], *, new_id: Callable[[], str] | None = None
    ) -> AppendResult:
        """Append ``events`` to the session atomically (see the module docstring).

        ``new_id`` makes ids for events without one (default: random UUIDs).
        """
        session = text("session_id", session_id)
        prepared = _new_events("events", events, self.max_value_size, need_ids=False)
        if new_id is not None and not callable(new_id):
            fail("new_id must be callable")
        engine = self._engine
        if not prepared:
            return AppendResult((), engine.one(self._has_pending, (session,)) is not None)
        ids = _ids_unique(prepared)
        now = engine.now_ms()
        with engine.transaction():
            locked = self._lock(session, now, create=True)
            assert locked is not None
            last, pending = locked
            if ids:
                existing = self._existing(ids)
                if existing:
                    foreign = next((e for e in existing if e.session_id != session), None)
                    if foreign is not None:
                        raise DuplicateBatch(f"event id {foreign.id!r} already exists in another session")
                    if len(existing) == len(prepared):
                        return AppendResult(tuple(sorted(existing, key=lambda e: e.index)), pending)
                    raise DuplicateBatch(
                        f"batch mixes {len(existing)} already-appended and {len(prepared) - len(existing)} fresh events"
                    )
            # Attempt-currency fence: an event caused by an attempt commits
            # only while that attempt is still its parent's latest.
            for e in prepared:
                if e.cause is None:
                    continue
                parent = engine.one(self._get_event_locked, (session, e.cause.index))
                if parent is None:
                    raise UnknownEvent(f"no event at index {e.cause.index} in session {session!r}")
                if int(parent[15]) != e.cause.attempt or parent[20] is not None:
                    raise SupersededAttempt(
                        f"attempt {e.cause.attempt} no longer owns event {e.cause.index} in session {session!r}"
                    )
            stored = self._insert(session, last, now, prepared, new_id or _default_id)
        engine.notify(self.channel(session), announced=True)
        return AppendResult(tuple(stored), pending or any(not e.settled for e in prepared))

    def read(
        self,
        session_id: str,
        after_index: int | None = None,
        through_index: int | None = None,
        *,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Events of the session with ``after_index < index <= through_index``, in order."""
        session = text("session_id", session_id)
        after = 0 if after_index is None else as_int64("after_index", after_index)
        through = INT64_MAX if through_index is None else as_int64("through_index", through_index)
        if limit is not None:
            limit = as_int64("limit", limit)
            if limit < 0:
                fail(f"limit must be >= 0, got {limit}")
        engine = self._engine
        rows = engine.all(self._read_range, (session, after, through, engine.no_limit if limit is None else limit))
        return [_event(r) for r in rows]

    def get(self, session_id: str, index: int) -> StoredEvent | None:
        """One event, or ``None``."""
        row = self._engine.one(self._get_event, (text("session_id", session_id), as_int64("index", index)))
        return None if row is None else _event(row)

    # -- claims ----------------------------------------------------------------

    def claim_available(
        self,
        session_id: str,
        holder: str,
        ttl_ms: int | None = None,
        expires_at_ms: int | None = None,
        exclude_indexes: Iterable[int] = (),
        *,
        limit: int | None = None,
    ) -> ClaimResult:
        """Claim every ready event of the session (at most ``limit``), see the module docstring."""
        session = text("session_id", session_id)
        holder = text("holder", holder, indexed=False)
        excluded: set[int] = (
            set()
            if type(exclude_indexes) is tuple and not exclude_indexes  # the default; skips as_list's ABC checks
            else {as_int64("exclude_indexes[]", i) for i in as_list("exclude_indexes", exclude_indexes)}
        )
        if limit is not None:
            limit = positive("limit", limit)
        engine = self._engine
        now = engine.now_ms()
        expires = _expiry(now, ttl_ms, expires_at_ms)
        claim_set = (now, now, holder, expires, expires)
        with engine.transaction():
            if not excluded:
                rows = engine.all(
                    self._claim_session,
                    (*claim_set, session, now, session, now, engine.no_limit if limit is None else limit),
                )
            else:
                rows = []
                for (idx,) in engine.all(self._claim_candidates, (session, now)):
                    if idx in excluded:
                        continue
                    row = engine.one(self._claim_one, (*claim_set, session, idx, now))
                    if row is not None:
                        rows.append(row)
                        if limit is not None and len(rows) >= limit:
                            break
            if len(rows) == 1:
                return ClaimResult("claimed", (_event(rows[0]),))
            if rows:
                return ClaimResult("claimed", tuple(sorted((_event(r) for r in rows), key=lambda e: e.index)))
            retry = engine.one(self._retry_at, (session, now))
        if retry is None or retry[0] is None:
            return ClaimResult("settled")
        return ClaimResult("busy", retry_at=int(retry[0]))

    def claim_any(
        self, holder: str, ttl_ms: int | None = None, *, expires_at_ms: int | None = None, limit: int = 1
    ) -> list[StoredEvent]:
        """Claim up to ``limit`` ready events across all sessions, oldest-ready first."""
        holder = text("holder", holder, indexed=False)
        limit = positive("limit", limit)
        engine = self._engine
        now = engine.now_ms()
        expires = _expiry(now, ttl_ms, expires_at_ms)
        with engine.transaction():
            rows = []
            for session, idx in engine.all(self._claim_any_candidates, (now, limit)):
                row = engine.one(self._claim_one, (now, now, holder, expires, expires, session, idx, now))
                if row is not None:
                    rows.append(row)
        return sorted((_event(r) for r in rows), key=lambda e: (e.session_id, e.index))

    def renew_claims(
        self,
        session_id: str,
        holder: str,
        claims: Iterable[Mapping[str, int]],
        ttl_ms: int | None = None,
        expires_at_ms: int | None = None,
    ) -> RenewResult:
        """Extend the holder's live leases; report the ones claimed again since."""
        session = text("session_id", session_id)
        holder = text("holder", holder, indexed=False)
        wanted = []
        for i, claim in enumerate(as_list("claims", claims)):
            if not isinstance(claim, Mapping) or "index" not in claim or "attempt" not in claim:
                fail(f"claims[{i}] must be a mapping with 'index' and 'attempt'")
            wanted.append(
                (as_int64(f"claims[{i}].index", claim["index"]), as_int64(f"claims[{i}].attempt", claim["attempt"]))
            )
        if not wanted:
            return RenewResult((), ())
        engine = self._engine
        now = engine.now_ms()
        expires = _expiry(now, ttl_ms, expires_at_ms)
        renewed: list[int] = []
        superseded: list[int] = []
        with engine.transaction():
            for index, attempt in wanted:
                row = engine.one(self._attempt_of, (session, index))
                if row is None:
                    continue
                if int(row[0]) > attempt:
                    superseded.append(index)
                    continue
                if engine.execute(self._renew, (expires, expires, session, index, attempt, holder, now)) == 1:
                    renewed.append(index)
        return RenewResult(tuple(sorted(renewed)), tuple(sorted(superseded)))

    def complete_attempt(
        self, session_id: str, index: int, attempt: int, events: Iterable[Mapping[str, Any]] = ()
    ) -> CompleteResult:
        """Mark the event processed by ``attempt`` and append its child events, atomically."""
        session = text("session_id", session_id)
        index = as_int64("index", index)
        attempt = as_int64("attempt", attempt)
        prepared = _new_events("events", events, self.max_value_size, need_ids=True)
        for i, e in enumerate(prepared):
            if e.cause is not None:
                fail(f"events[{i}] must not carry a cause: a returned event's cause is the completed attempt")
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            locked = self._lock(session, now, create=False)
            parent = None if locked is None else engine.one(self._get_event_locked, (session, index))
            if locked is None or parent is None:
                raise UnknownEvent(f"no event at index {index} in session {session!r}")
            ids = _ids_unique(prepared)
            if parent[10] is not None:  # processed already
                if parent[11] is None or int(parent[11]) != attempt:
                    return CompleteResult("superseded")
                returned = None if parent[12] is None else orjson.loads(parent[12])
                if returned != ids:
                    raise DuplicateBatch("completed attempt does not match the returned event batch")
                existing = {e.id: e for e in self._existing(ids)}
                ordered = [existing.get(i) for i in ids]
                for child in ordered:
                    if (
                        child is None
                        or child.session_id != session
                        or child.cause is None
                        or child.cause.index != index
                        or child.cause.attempt != attempt
                    ):
                        raise DuplicateBatch("returned event retry does not match the committed batch")
                return CompleteResult("completed", tuple(c for c in ordered if c is not None))
            if int(parent[15]) != attempt or parent[21] is None or parent[20] is not None:
                return CompleteResult("superseded")
            if ids and self._existing(ids):
                raise DuplicateBatch("returned event batch contains an already-appended event id")
            last = locked[0]
            engine.execute(self._mark_processed, (now, attempt, orjson.dumps(ids).decode(), session, index))
            lane = parent[9]
            if lane is not None:
                engine.execute(self._promote_lane, (now, session, session, lane))
            for e in prepared:
                e.cause = Cause(index, attempt)
            stored = self._insert(session, last, now, prepared, _default_id) if prepared else []
        if stored:
            engine.notify(self.channel(session), announced=True)
        return CompleteResult("completed", tuple(stored))

    def fail_attempt(self, session_id: str, index: int, attempt: int, error: str, max_failures: int) -> FailResult:
        """Record a failed attempt; dead-letter the event at ``max_failures`` failures."""
        session = text("session_id", session_id)
        index = as_int64("index", index)
        attempt = as_int64("attempt", attempt)
        error = text("error", error, indexed=False)
        max_failures = as_int64("max_failures", max_failures)
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            row = engine.one(self._get_event_locked, (session, index))
            if row is None:
                raise UnknownEvent(f"no event at index {index} in session {session!r}")
            failures = int(row[16])
            if row[10] is not None or int(row[15]) != attempt:
                return FailResult("superseded", failures)
            if row[20] is not None:
                return FailResult("dead_lettered", failures)
            if row[21] is None:
                if row[18] is not None and int(row[18]) == attempt:
                    return FailResult("failed", failures)
                return FailResult("superseded", failures)
            failures += 1
            dead = failures >= max_failures
            engine.execute(self._fail, (failures, error, now, attempt, now if dead else None, now, session, index))
        return FailResult("dead_lettered" if dead else "failed", failures)

    # -- snapshots -------------------------------------------------------------

    def read_state(self, session_id: str, reducer_name: str) -> StateRead:
        """The reducer's snapshot (or ``None``) and every event after it."""
        session = text("session_id", session_id)
        reducer = text("reducer_name", reducer_name)
        rows = self._engine.all(self._read_state, (session, reducer, session, session, reducer))
        snapshot = None
        events = []
        for row in rows:
            if row[0] == 0:
                snapshot = Snapshot(int(row[2]), orjson.loads(row[5]))
            else:
                events.append(_event(row, 1))
        return StateRead(snapshot, tuple(events))

    def put_snapshot(self, session_id: str, reducer_name: str, index: int, state: Any) -> bool:
        """Store the reducer's state as of ``index`` unless a later one is stored; True if stored."""
        session = text("session_id", session_id)
        reducer = text("reducer_name", reducer_name)
        index = as_int64("index", index)
        blob = dump_json("state", state, self.max_value_size)
        engine = self._engine
        return engine.execute(self._put_snapshot, (session, reducer, index, blob, engine.now_ms())) == 1

    # -- inspection ------------------------------------------------------------

    def list_sessions(self, prefix: str = "", limit: int = 100, cursor: str | None = None) -> SessionPage:
        """Sessions whose id starts with ``prefix``, in id order, with counts."""
        prefix = text("prefix", prefix)
        limit = positive("limit", limit)
        if cursor is not None:
            cursor = text("cursor", cursor)
        upper = prefix_successor(prefix)
        rows = self._engine.all(
            self._list_sessions,
            (prefix, 0 if upper is None else 1, upper or "", 0 if cursor is None else 1, cursor or "", limit + 1),
        )
        sessions = []
        for r in rows[:limit]:
            times = [int(t) for t in r[7:13] if t is not None]
            sessions.append(
                SessionSummary(
                    session_id=r[0],
                    event_count=int(r[1]),
                    pending_count=int(r[2]),
                    failed_count=int(r[3]),
                    attempt_count=int(r[4]),
                    failure_count=int(r[5]),
                    first_event_at=int(r[6]),
                    updated_at=max(times),
                )
            )
        more = len(rows) > limit
        return SessionPage(tuple(sessions), sessions[-1].session_id if more else None)

    def read_events(
        self, session_id: str, after_index: int = 0, limit: int = 100, through_index: int | None = None
    ) -> EventPage:
        """A page of events after ``after_index``, bounded by a frontier.

        ``through_index`` is the given bound capped at the session's last
        index (then, by default): pass it back with the next page so the
        walk covers a fixed range while appends go on.
        """
        session = text("session_id", session_id)
        after = as_int64("after_index", after_index)
        limit = as_int64("limit", limit)
        if limit < 0:
            fail(f"limit must be >= 0, got {limit}")
        engine = self._engine
        row = engine.one(self._last_index, (session,))
        frontier = 0 if row is None else int(row[0])
        through = frontier if through_index is None else min(as_int64("through_index", through_index), frontier)
        rows = engine.all(self._read_range, (session, after, through, limit))
        return EventPage(tuple(_event(r) for r in rows), through)

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        session = text("session_id", session_id)
        return [SnapshotInfo(r[0], int(r[1]), int(r[2])) for r in self._engine.all(self._list_snapshots, (session,))]

    # -- streaming -------------------------------------------------------------

    def stream(
        self,
        session_id: str,
        start_after: int | None = None,
        *,
        stop: threading.Event | None = None,
        poll_interval: float = POLL_INTERVAL,
    ) -> Generator[StoredEvent, None, None]:
        """Every event after ``start_after``, then new ones as they commit.

        Runs until the generator is closed (``close()``, or leaving a
        ``for`` loop) or ``stop`` is set. Raises ``StoreClosed`` once the
        store is closed.
        """
        session = text("session_id", session_id)
        after = 0 if start_after is None else as_int64("start_after", start_after)
        if (
            isinstance(poll_interval, bool)
            or not isinstance(poll_interval, (int, float))
            or not (0 < poll_interval <= POLL_INTERVAL)
        ):
            fail(f"poll_interval must be > 0 and <= {POLL_INTERVAL} seconds, got {poll_interval!r}")
        return self._stream(session, after, stop, float(poll_interval))

    def _stream(
        self, session: str, after: int, stop: threading.Event | None, poll_interval: float
    ) -> Generator[StoredEvent, None, None]:
        engine = self._engine
        channel = self.channel(session)
        while True:
            rows = engine.all(self._read_range, (session, after, INT64_MAX, PAGE_SIZE))
            for row in rows:
                event = _event(row)
                after = event.index
                yield event
            if rows:
                continue
            if stop is not None and stop.is_set():
                return
            engine.wait_for_change(channel, poll_interval)
            if stop is not None and stop.is_set():
                return

    def read_after(self, session_id: str, after_index: int, limit: int = PAGE_SIZE) -> list[StoredEvent]:
        """One page of a stream: up to ``limit`` events after ``after_index``."""
        return self.read(session_id, after_index, limit=limit)

    # -- dead letters, retention -------------------------------------------------

    def dead_letters(
        self, session_id: str | None = None, *, after: tuple[str, int] | int | None = None, limit: int = 100
    ) -> list[StoredEvent]:
        """Dead-lettered events of one session (``after`` = an index) or of all
        sessions (``after`` = ``(session_id, index)``), in order."""
        limit = as_int64("limit", limit)
        if limit < 0:
            fail(f"limit must be >= 0, got {limit}")
        engine = self._engine
        if session_id is not None:
            session = text("session_id", session_id)
            start = 0 if after is None else as_int64("after", after)
            rows = engine.all(self._dead_in_session, (session, start, limit))
        else:
            if after is None:
                rows = engine.all(self._dead_all, ("", "", -1, limit))
            else:
                if not isinstance(after, tuple) or len(after) != 2:
                    fail("after must be (session_id, index) when listing every session")
                s, i = text("after[0]", after[0]), as_int64("after[1]", after[1])
                rows = engine.all(self._dead_all, (s, s, i, limit))
        return [_event(r) for r in rows]

    def redrive(self, session_id: str, indexes: Iterable[int] | None = None) -> int:
        """Make dead-lettered events claimable again (fresh failure count); return how many."""
        session = text("session_id", session_id)
        wanted = None if indexes is None else [as_int64("indexes[]", i) for i in as_list("indexes", indexes)]
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            if wanted is None:
                moved = engine.execute(self._redrive_session, (now, session))
            else:
                moved = sum(engine.execute(self._redrive_one, (now, session, i)) for i in dict.fromkeys(wanted))
        return moved

    def delete_session(self, session_id: str) -> int:
        """Delete the session: its events (dead letters included) and snapshots; return how many events went.

        Outside a transaction, events go in batches of
        ``durastate._retention.BATCH``, oldest first, each its own short
        commit (a reader meanwhile sees a shrinking suffix); the last step,
        under the session lock, removes what is left (appends that came in
        meanwhile too) with the snapshots and the session itself. An append
        after that starts a new session at index 1; one retrying the id of a
        deleted event is taken as new. Unknown sessions: 0.
        """
        return self._delete_session(text("session_id", session_id), settled_before=None)

    def prune_sessions(self, settled_for_ms: int, *, limit: int | None = None) -> int:
        """Delete sessions settled for at least ``settled_for_ms``; return how many sessions went.

        Settled: no event waits, is claimed or is dead-lettered, and nothing
        was processed (or, for a session without events, created) in the
        last ``settled_for_ms`` ms of the store's clock. Each goes as in
        ``delete_session``, and the last step checks again under the session
        lock: a session that an append revived meanwhile keeps its new
        events (its settled history is gone). At most ``limit`` sessions.
        """
        settled_for = as_int64("settled_for_ms", settled_for_ms)
        if settled_for < 0:
            fail(f"settled_for_ms must be >= 0, got {settled_for}")
        limit = None if limit is None else positive("limit", limit)
        engine = self._engine
        cutoff = engine.now_ms() - settled_for
        after = ""
        done = 0
        while limit is None or done < limit:
            want = BATCH if limit is None else min(BATCH, limit - done)
            sessions = [str(r[0]) for r in engine.all(self._settled_sessions, (after, cutoff, want))]
            for session in sessions:
                self._delete_session(session, settled_before=cutoff)
            done += len(sessions)
            if len(sessions) < want:
                break
            after = sessions[-1]
        return done

    def _delete_session(self, session: str, *, settled_before: int | None) -> int:
        engine = self._engine
        removed = 0
        if not engine.in_transaction():  # inside a caller's transaction: all in it, at once
            row = engine.one(self._last_index, (session,))
            through = 0 if row is None else int(row[0])
            while True:
                n = engine.execute(self._delete_session_batch, (session, session, through, BATCH))
                removed += n
                if n < BATCH:
                    break
        with engine.transaction():
            engine.one(self._lock_session, (session,))
            if settled_before is not None and engine.one(self._still_settled, (session, settled_before)) is None:
                return removed
            events, snapshots, session_row = self._delete_session_final
            removed += engine.execute(events, (session,))
            engine.execute(snapshots, (session,))
            engine.execute(session_row, (session,))
        return removed

    def prune(
        self,
        *,
        older_than_ms: int | None = None,
        keep_last: int | None = None,
        batch_size: int = PRUNE_BATCH,
    ) -> int:
        """Delete processed events that every snapshot of their session covers.

        An event goes when it is processed, its index is at most the lowest
        ``up_to_index`` of its session's snapshots, it was processed at least
        ``older_than_ms`` ago (if given) and at least ``keep_last`` later
        events exist (if given). Sessions without a snapshot keep all their
        events. Deletes ``batch_size`` rows per statement (each its own short
        commit) and returns the total.

        A pruned event is gone for ``read``/``stream``/``read_events``; an
        append retrying its id would be taken as new, and a
        ``complete_attempt`` retry whose children were pruned is refused.
        Prune only what no client can still retry.
        """
        batch = positive("batch_size", batch_size)
        engine = self._engine
        now = engine.now_ms()
        cutoff = now if older_than_ms is None else now - as_int64("older_than_ms", older_than_ms)
        keep = 0 if keep_last is None else as_int64("keep_last", keep_last)
        if keep < 0:
            fail(f"keep_last must be >= 0, got {keep}")
        total = 0
        for session, floor, last in engine.all(self._snapshot_floors):
            bound = min(int(floor), int(last) - keep)
            while bound >= 1:
                deleted = engine.execute(self._prune, (session, session, cutoff, bound, batch))
                total += deleted
                if deleted < batch:
                    break
        return total
