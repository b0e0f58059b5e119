"""The ``Events`` class: the events facet of a ``Store`` (rules: ``durastate.events``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from .._json import dump_json
from .._retention import BATCH
from .._validate import INT64_MAX, PAGE_SIZE, as_int64, as_list, fail, positive, prefix_successor, text
from .inputs import NewEvent, expiry, ids_unique, new_events
from .models import (
    AppendResult,
    Cause,
    ClaimResult,
    CompleteResult,
    DuplicateBatch,
    EventPage,
    FailResult,
    RenewResult,
    SessionPage,
    SessionSummary,
    Snapshot,
    SnapshotInfo,
    StateRead,
    StoredEvent,
    SupersededAttempt,
    UnknownEvent,
)
from .rows import EventColumn as C
from .rows import SessionColumn as S
from .rows import event_from_row, new_object
from .statements import (
    ATTEMPT_OF,
    CLAIM_ANY_CANDIDATES,
    CLAIM_CANDIDATES,
    CLAIM_ONE,
    CLAIM_SESSION,
    CREATE_SESSION,
    DEAD_ALL,
    DEAD_IN_SESSION,
    DELETE_SESSION_BATCH,
    DELETE_SESSION_EVENTS,
    DELETE_SESSION_ROW,
    DELETE_SESSION_SNAPSHOTS,
    EVENT_BY_ID,
    FAIL,
    GET_EVENT,
    GET_EVENT_LOCKED,
    HAS_PENDING,
    INSERT_EVENT,
    LAST_INDEX,
    LIST_SESSIONS,
    LIST_SNAPSHOTS,
    LOCK_SESSION,
    MARK_PROCESSED,
    PROMOTE_LANE,
    PRUNE,
    PUT_SNAPSHOT,
    READ_RANGE,
    READ_STATE,
    REDRIVE_ONE,
    REDRIVE_SESSION,
    RENEW,
    RETRY_AT,
    SET_LAST_INDEX,
    SETTLED_SESSIONS,
    SNAPSHOT_FLOORS,
    STILL_SETTLED,
)

if TYPE_CHECKING:
    from ..engines.base import Engine

POLL_INTERVAL = 0.05
PRUNE_BATCH = 256


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
        last_index, has_pending = row
        return int(last_index), has_pending is not None

    def _existing(self, ids: list[str]) -> list[StoredEvent]:
        found = []
        for event_id in ids:
            row = self._engine.one(self._event_by_id, (event_id,))
            if row is not None:
                found.append(event_from_row(row))
        return found

    def _insert(
        self, session: str, base: int, now: int, prepared: list[NewEvent], new_id: Callable[[], str]
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
            event = new_object(StoredEvent)  # see rows.event_from_row
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
        prepared = new_events("events", events, self.max_value_size, need_ids=False)
        if new_id is not None and not callable(new_id):
            fail("new_id must be callable")
        engine = self._engine
        if not prepared:
            return AppendResult((), engine.one(self._has_pending, (session,)) is not None)
        ids = ids_unique(prepared)
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
                if int(parent[C.attempt_count]) != e.cause.attempt or parent[C.failed_at] is not None:
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
        return [event_from_row(r) for r in rows]

    def get(self, session_id: str, index: int) -> StoredEvent | None:
        """One event, or ``None``."""
        row = self._engine.one(self._get_event, (text("session_id", session_id), as_int64("index", index)))
        return None if row is None else event_from_row(row)

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
        holder = text("holder", holder, limit=None)
        excluded: set[int] = (
            set()
            if type(exclude_indexes) is tuple and not exclude_indexes  # the default; skips as_list's ABC checks
            else {as_int64("exclude_indexes[]", i) for i in as_list("exclude_indexes", exclude_indexes)}
        )
        if limit is not None:
            limit = positive("limit", limit)
        engine = self._engine
        now = engine.now_ms()
        expires = expiry(now, ttl_ms, expires_at_ms)
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
                return ClaimResult("claimed", (event_from_row(rows[0]),))
            if rows:
                return ClaimResult("claimed", tuple(sorted((event_from_row(r) for r in rows), key=lambda e: e.index)))
            retry = engine.one(self._retry_at, (session, now))
        retry_at = None if retry is None else retry[0]  # MIN(claim_expires_at)
        if retry_at is None:
            return ClaimResult("settled")
        return ClaimResult("busy", retry_at=int(retry_at))

    def claim_any(
        self, holder: str, ttl_ms: int | None = None, *, expires_at_ms: int | None = None, limit: int = 1
    ) -> list[StoredEvent]:
        """Claim up to ``limit`` ready events across all sessions, oldest-ready first."""
        holder = text("holder", holder, limit=None)
        limit = positive("limit", limit)
        engine = self._engine
        now = engine.now_ms()
        expires = expiry(now, ttl_ms, expires_at_ms)
        with engine.transaction():
            rows = []
            for session, idx in engine.all(self._claim_any_candidates, (now, limit)):
                row = engine.one(self._claim_one, (now, now, holder, expires, expires, session, idx, now))
                if row is not None:
                    rows.append(row)
        return sorted((event_from_row(r) for r in rows), key=lambda e: (e.session_id, e.index))

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
        holder = text("holder", holder, limit=None)
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
        expires = expiry(now, ttl_ms, expires_at_ms)
        renewed: list[int] = []
        superseded: list[int] = []
        with engine.transaction():
            for index, attempt in wanted:
                row = engine.one(self._attempt_of, (session, index))
                if row is None:
                    continue
                (attempt_count,) = row
                if int(attempt_count) > attempt:
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
        prepared = new_events("events", events, self.max_value_size, need_ids=True)
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
            ids = ids_unique(prepared)
            if parent[C.processed_at] is not None:  # processed already
                by_attempt = parent[C.processed_by_attempt]
                if by_attempt is None or int(by_attempt) != attempt:
                    return CompleteResult("superseded")
                returned_ids = parent[C.returned_event_ids]
                returned = None if returned_ids is None else orjson.loads(returned_ids)
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
            if (
                int(parent[C.attempt_count]) != attempt
                or parent[C.claim_holder] is None
                or parent[C.failed_at] is not None
            ):
                return CompleteResult("superseded")
            if ids and self._existing(ids):
                raise DuplicateBatch("returned event batch contains an already-appended event id")
            last, _ = locked
            engine.execute(self._mark_processed, (now, attempt, orjson.dumps(ids).decode(), session, index))
            lane = parent[C.lane]
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
        error = text("error", error, limit=None)
        max_failures = as_int64("max_failures", max_failures)
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            row = engine.one(self._get_event_locked, (session, index))
            if row is None:
                raise UnknownEvent(f"no event at index {index} in session {session!r}")
            failures = int(row[C.failure_count])
            if row[C.processed_at] is not None or int(row[C.attempt_count]) != attempt:
                return FailResult("superseded", failures)
            if row[C.failed_at] is not None:
                return FailResult("dead_lettered", failures)
            if row[C.claim_holder] is None:
                failed_attempt = row[C.last_failed_attempt]
                if failed_attempt is not None and int(failed_attempt) == attempt:
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
            # row_kind 0: the snapshot, its up_to_index and state in the
            # idx and payload columns; row_kind 1: an event.
            if row[0] == 0:
                snapshot = Snapshot(int(row[1 + C.idx]), orjson.loads(row[1 + C.payload]))
            else:
                events.append(event_from_row(row, 1))
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
        limit = min(positive("limit", limit), INT64_MAX - 1)  # limit + 1 is bound below
        if cursor is not None:
            cursor = text("cursor", cursor)
        upper = prefix_successor(prefix)
        rows = self._engine.all(
            self._list_sessions,
            (prefix, 0 if upper is None else 1, upper or "", 0 if cursor is None else 1, cursor or "", limit + 1),
        )
        sessions = []
        for r in rows[:limit]:
            times = [int(t) for t in r[S.activity_first : S.activity_last + 1] if t is not None]
            sessions.append(
                SessionSummary(
                    session_id=r[S.session_id],
                    event_count=int(r[S.event_count]),
                    pending_count=int(r[S.pending_count]),
                    failed_count=int(r[S.failed_count]),
                    attempt_count=int(r[S.attempt_count]),
                    failure_count=int(r[S.failure_count]),
                    first_event_at=int(r[S.first_event_at]),
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
        return EventPage(tuple(event_from_row(r) for r in rows), through)

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        session = text("session_id", session_id)
        return [
            SnapshotInfo(reducer, int(up_to_index), int(updated_at))
            for reducer, up_to_index, updated_at in self._engine.all(self._list_snapshots, (session,))
        ]

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
                event = event_from_row(row)
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
        return [event_from_row(r) for r in rows]

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
