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
* **One row per session** (``{p}event_session``): its creation time and
  ``index_floor``, the highest index retention has deleted past; the last
  index is the greater of it and the session's highest stored index (an
  append writes no session row). Every operation that assigns indexes
  (append, complete with children) locks that row first (``FOR UPDATE`` on
  PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises writers anyway), so
  indexes are dense and commit in index order: a reader tailing
  ``idx > last_seen`` never skips a late commit. Operations that act on one
  event (fail, the append fence, complete) lock that event's row; claims
  are conditional ``UPDATE``s (``WHERE`` the event is still ready and
  unleased), so no event is ever held by two live leases.
* **The common operations are one statement each**, their own commit: an
  append of one event without id, lane or cause (``APPEND_ALONE``, which
  takes the session lock in its ``SELECT``), a claim that claims something
  (``CLAIM_SESSION[_ALL]``), the completion without children of an event in
  no lane (``COMPLETE_ALONE``, the checks in its ``WHERE``). When such a
  statement changes nothing the full path runs, in a transaction, and gives
  the answer. Fewer statements and fewer indexes touched (an unsettled
  event without a lane enters four of them, see migration 2) are what made
  these calls cheaper than the a2 seed's own (``bench/RESULTS.md``).
* **On PostgreSQL each write costs the round trips it must wait for**
  (``capabilities.deferred_answers`` and ``write_ctes``; the statements'
  section "writes in as few round trips as they need", compiled only
  there). An append outside a transaction of up to ``APPEND_AT_ONCE``
  events (and
  ``_chunks.STATEMENT_BYTES`` of payloads) without a cause (new session,
  ids, lanes and settled events included) and ``put_snapshot`` are one
  statement each, their own commit: one round trip. Where a read decides
  what to write, two: ``complete_attempt`` with children (the parent's row,
  read with BEGIN and the session lock; then its writes, unawaited, with the
  COMMIT, the children's inserts required to have gone in) and
  ``fail_attempt`` (the event's row; then the write with the COMMIT);
  ``renew_claims`` (up to ``RENEW_AT_ONCE`` distinct claims) is one statement
  read in a transaction, then its COMMIT. Whenever one of these finds
  anything unusual (an id taken, a stale read, an index past the session's
  end), nothing of it stays and the path every engine runs gives the answer,
  in its own order. SQLite answers at once and keeps the shapes above; so
  does the Citus mode (its answers are never deferred).
* **One scheduling column**, ``due_at``: when the event became claimable
  (append, lane promotion, failure, re-drive) or, while leased, the lease
  expiry. Claims select ``due_at <= now``; an expired lease needs no reaper.
* **Refusals never come from constraint violations** (they would doom a
  surrounding transaction): ids are checked first, and inserts use
  ``ON CONFLICT DO NOTHING``, so even a concurrent duplicate is a
  ``DuplicateBatch`` raised by us (and an index found taken, which only a
  stale locked read on PostgreSQL causes, is read again and retried).
  The one-statement append on PostgreSQL runs outside any transaction:
  there a race's constraint violation fails only that statement, nothing
  is applied, and the full path (the one above) runs and answers.
* **Valid ranges** (each refused with ``InvalidRequest`` outside them;
  ``compat.a2`` takes the seed's wider ranges, see ``Events(seed_rules=)``):
  ``max_failures >= 1``; a snapshot index from 1 to the session's last
  index; a claim's lease live when handed out (``ttl_ms >= 1`` or
  ``expires_at_ms`` after now; a renewal may end a lease with
  ``ttl_ms=0``), given by ``ttl_ms`` or ``expires_at_ms``, not both; a
  session id or event id that names something new (``append``, a
  completion's children, ``channel``), an event type, a lane, a claim
  holder and a reducer name not empty. Methods acting on existing
  sessions take any id a store may hold (compat.a2 stores empty ones, as
  its seed does).
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

The package's modules, along the facet's seams: ``statements`` (schema and
SQL), ``models`` (results and errors), ``rows`` (rows read by column name),
``inputs`` (argument checks) and ``facet`` (the ``Events`` class). Every
name is re-exported here, so ``from durastate.events import X`` is the
import to use.
"""

from __future__ import annotations

# Re-exported names beyond __all__ (statements, limits, COLUMNS) stay module
# attributes (``durastate.events.CLAIM_ONE``) for the plan checks and benchmarks.
from .._validate import MAX_DURATION_MS as MAX_DURATION_MS
from .._validate import MAX_NAME_SIZE as MAX_NAME_SIZE
from .._validate import PAGE_SIZE as PAGE_SIZE
from .facet import POLL_INTERVAL as POLL_INTERVAL
from .facet import Events as Events
from .models import AppendResult as AppendResult
from .models import Cause as Cause
from .models import ClaimResult as ClaimResult
from .models import CompleteResult as CompleteResult
from .models import DuplicateBatch as DuplicateBatch
from .models import EventPage as EventPage
from .models import FailResult as FailResult
from .models import LaneBacklog as LaneBacklog
from .models import RenewResult as RenewResult
from .models import SessionPage as SessionPage
from .models import SessionSummary as SessionSummary
from .models import Snapshot as Snapshot
from .models import SnapshotInfo as SnapshotInfo
from .models import StateRead as StateRead
from .models import StoredEvent as StoredEvent
from .models import SupersededAttempt as SupersededAttempt
from .models import UnknownEvent as UnknownEvent
from .rows import BRIEF_COLUMNS as BRIEF_COLUMNS
from .rows import COLUMNS as COLUMNS
from .statements import APPEND_ALONE as APPEND_ALONE
from .statements import APPEND_AT_ONCE as APPEND_AT_ONCE
from .statements import ATTEMPT_OF as ATTEMPT_OF
from .statements import CLAIM_ANY_CANDIDATES as CLAIM_ANY_CANDIDATES
from .statements import CLAIM_CANDIDATES as CLAIM_CANDIDATES
from .statements import CLAIM_ONE as CLAIM_ONE
from .statements import CLAIM_SESSION as CLAIM_SESSION
from .statements import CLAIM_SESSION_ALL as CLAIM_SESSION_ALL
from .statements import COMPLETE_ALONE as COMPLETE_ALONE
from .statements import CREATE_SESSION as CREATE_SESSION
from .statements import DEAD_ALL as DEAD_ALL
from .statements import DEAD_IN_SESSION as DEAD_IN_SESSION
from .statements import DELETE_SESSION_BATCH as DELETE_SESSION_BATCH
from .statements import DELETE_SESSION_EVENTS as DELETE_SESSION_EVENTS
from .statements import DELETE_SESSION_ROW as DELETE_SESSION_ROW
from .statements import DELETE_SESSION_SNAPSHOTS as DELETE_SESSION_SNAPSHOTS
from .statements import EVENT_BY_ID as EVENT_BY_ID
from .statements import FAIL as FAIL
from .statements import GET_EVENT as GET_EVENT
from .statements import GET_EVENT_LOCKED as GET_EVENT_LOCKED
from .statements import HAS_PENDING as HAS_PENDING
from .statements import INSERT_EVENT as INSERT_EVENT
from .statements import INSERTED as INSERTED
from .statements import LANE_DEAD as LANE_DEAD
from .statements import LANE_READY as LANE_READY
from .statements import LAST_INDEX as LAST_INDEX
from .statements import LAST_OF_SESSION as LAST_OF_SESSION
from .statements import LIST_SESSIONS as LIST_SESSIONS
from .statements import LIST_SNAPSHOTS as LIST_SNAPSHOTS
from .statements import LOCK_PARENT as LOCK_PARENT
from .statements import LOCK_SESSION as LOCK_SESSION
from .statements import LOCK_SESSION_ROW as LOCK_SESSION_ROW
from .statements import MARK_PROCESSED as MARK_PROCESSED
from .statements import PENDING_OF_SESSION as PENDING_OF_SESSION
from .statements import PROMOTE_LANE as PROMOTE_LANE
from .statements import PRUNE as PRUNE
from .statements import PUT_SNAPSHOT as PUT_SNAPSHOT
from .statements import PUT_SNAPSHOT_CHECKED as PUT_SNAPSHOT_CHECKED
from .statements import RAISE_FLOOR as RAISE_FLOOR
from .statements import READ_RANGE as READ_RANGE
from .statements import READ_STATE as READ_STATE
from .statements import READ_STATE_BRIEF as READ_STATE_BRIEF
from .statements import REDRIVE_ONE as REDRIVE_ONE
from .statements import REDRIVE_SESSION as REDRIVE_SESSION
from .statements import RENEW as RENEW
from .statements import RENEW_AT_ONCE as RENEW_AT_ONCE
from .statements import RETRY_AT as RETRY_AT
from .statements import SCHEMA as SCHEMA
from .statements import SETTLED_SESSIONS as SETTLED_SESSIONS
from .statements import SNAPSHOT_FLOORS as SNAPSHOT_FLOORS
from .statements import STILL_SETTLED as STILL_SETTLED
from .statements import append_statement as append_statement
from .statements import renew_all as renew_all
from .upkeep import PRUNE_BATCH as PRUNE_BATCH

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
