"""The ``Events`` class: the events facet of a ``Store`` (rules: ``durastate.events``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from .._chunks import STATEMENT_BYTES
from .._json import dump_json
from .._tail import Tail, follow
from .._validate import (
    INT64_MAX,
    MAX_NAME_SIZE,
    PAGE_SIZE,
    as_int64,
    as_list,
    fail,
    fail_type,
    nonempty_text,
    positive,
    text,
)
from ..engines.deferred import RequirementFailed
from ..errors import Conflict, StoreClosed
from .inputs import NewEvent, expiry, ids_unique, new_events, plain_name
from .models import (
    AppendResult,
    Cause,
    ClaimResult,
    CompleteResult,
    DuplicateBatch,
    FailResult,
    RenewResult,
    Snapshot,
    StateRead,
    StoredEvent,
    SupersededAttempt,
    UnknownEvent,
)
from .rows import EventColumn as C
from .rows import event_from_row, new_object
from .statements import (
    APPEND_ALONE,
    APPEND_AT_ONCE,
    ATTEMPT_OF,
    CLAIM_ANY_CANDIDATES,
    CLAIM_CANDIDATES,
    CLAIM_ONE,
    CLAIM_SESSION,
    CLAIM_SESSION_ALL,
    COMPLETE_ALONE,
    CREATE_SESSION,
    EVENT_BY_ID,
    FAIL,
    GET_EVENT,
    GET_EVENT_LOCKED,
    HAS_PENDING,
    INSERT_EVENT,
    INSERTED,
    LAST_INDEX,
    LOCK_PARENT,
    LOCK_PARENT_LAST,
    LOCK_SESSION,
    LOCK_SESSION_ROW,
    MARK_PROCESSED,
    PROMOTE_LANE,
    PUT_SNAPSHOT,
    PUT_SNAPSHOT_CHECKED,
    READ_RANGE,
    READ_STATE,
    READ_STATE_BRIEF,
    RENEW,
    RENEW_AT_ONCE,
    RETRY_AT,
    append_statement,
    renew_all,
)
from .upkeep import Upkeep

if TYPE_CHECKING:
    from ..engines.base import Engine, Row

T = TypeVar("T")

POLL_INTERVAL = 0.05
# The wait channel of a session is this followed by its id (``Events.channel``).
_CHANNEL = "events:"

# The fields of a StoredEvent that a new event never has set (_insert).
_NEVER_SET: dict[str, Any] = {
    "processed_by_attempt": None,
    "returned_event_ids": None,
    "first_claimed_at": None,
    "last_claimed_at": None,
    "attempt_count": 0,
    "failure_count": 0,
    "last_failed_at": None,
    "last_failed_attempt": None,
    "last_error": None,
    "failed_at": None,
    "claim_holder": None,
    "claim_expires_at": None,
}
# A frozen dataclass refuses attribute assignment; object's own does not.
set_dict = object.__setattr__


def _insert_params(session: str, index: int, event_id: str, e: NewEvent, now: int) -> tuple[Any, ...]:
    """INSERT_EVENT's parameters for ``e`` at ``index``."""
    cause = e.cause
    lane = e.lane
    return (
        session,
        index,
        event_id,
        e.type,
        e.blob,
        now,
        None if cause is None else cause.index,
        None if cause is None else cause.attempt,
        None if cause is None else cause.batch_size,
        lane,
        lane,
        session,
        lane,
        now,
        now if e.settled else None,
    )


def _fresh(event_id: str, e: NewEvent, index: int, session: str, now: int) -> StoredEvent:
    """The ``StoredEvent`` of ``e`` just inserted at ``index``.

    Built as ``rows.event_from_row`` builds events: the instance dict filled
    directly (the fields no new event has set, copied).
    """
    fields = _NEVER_SET.copy()
    fields.update(
        id=event_id,
        type=e.type,
        payload=orjson.loads(e.blob),
        index=index,
        session_id=session,
        created_at=now,
        cause=e.cause,
        lane=e.lane,
        processed_at=now if e.settled else None,
    )
    event = new_object(StoredEvent)
    set_dict(event, "__dict__", fields)
    return event


# The RFC 4122 variant digit of a version 4 UUID, by the random hex digit it replaces.
_VARIANT_DIGIT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def random_id() -> str:
    """A random (version 4) UUID string, as ``str(uuid.uuid4())`` makes, in a quarter of its time.

    The id of an event appended without one. ``uuid.uuid4()`` builds a
    ``UUID`` object only to print it; this formats the same 122 random bits
    (``os.urandom``) with the version and variant digits set.
    """
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT_DIGIT[h[16]]}{h[17:20]}-{h[20:]}"


class Events(Upkeep):
    """The events facet of a ``Store`` (see the module docstring).

    ``seed_rules``: accept what the a2 seed accepts where this facet refuses
    it as meaningless (empty session and event ids, claims whose lease has
    expired already, any snapshot index): for ``durastate.compat.a2`` only,
    which must keep the seed's behaviour. Each method's docstring says which
    of its checks this lifts.
    """

    def __init__(self, engine: Engine, *, max_value_size: int, seed_rules: bool = False) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        self._seed_rules = seed_rules
        sql = engine.sql
        self._lock_session = sql(LOCK_SESSION)
        self._create_session = sql(CREATE_SESSION)
        self._lock_parent = sql(LOCK_PARENT)
        self._last_index = sql(LAST_INDEX)
        self._has_pending = sql(HAS_PENDING)
        self._event_by_id = sql(EVENT_BY_ID)
        self._get_event = sql(GET_EVENT)
        self._get_event_locked = sql(GET_EVENT_LOCKED)
        self._insert_event = sql(INSERT_EVENT)
        self._append_alone = sql(APPEND_ALONE)
        # The one-statement append runs outside a transaction unless the engine sends notifications after the
        # commit itself (PostgreSQL's Citus mode), where a transaction of its own lets its notification ride the
        # COMMIT's round trip instead of one more (as Queues.push).
        self._append_alone_outside = engine.capabilities.notify_in_transaction
        self._mark_processed = sql(MARK_PROCESSED)
        self._complete_alone = sql(COMPLETE_ALONE)
        self._promote_lane = sql(PROMOTE_LANE)
        self._claim_session = sql(CLAIM_SESSION)
        self._claim_session_all = sql(CLAIM_SESSION_ALL)
        self._claim_candidates = sql(CLAIM_CANDIDATES)
        self._claim_one = sql(CLAIM_ONE)
        self._claim_any_candidates = sql(CLAIM_ANY_CANDIDATES)
        self._retry_at = sql(RETRY_AT)
        self._attempt_of = sql(ATTEMPT_OF)
        self._renew = sql(RENEW)
        self._fail = sql(FAIL)
        self._read_range = sql(READ_RANGE)
        self._read_state = sql(READ_STATE)
        self._read_state_brief = sql(READ_STATE_BRIEF)
        self._put_snapshot = sql(PUT_SNAPSHOT)
        # Where each answer read costs a round trip and a WITH may hold writes (plain PostgreSQL), the writes
        # take the shapes of the statements' section "writes in as few round trips as they need": one
        # statement where the facet needs its answer, statements nobody awaits (``send``, ``require``) where
        # it does not. Elsewhere not compiled.
        capabilities = engine.capabilities
        self._flights = capabilities.deferred_answers and capabilities.write_ctes
        if self._flights:
            self._append_statement = {
                (n, checked): sql(append_statement(n, checked))
                for n in range(1, APPEND_AT_ONCE + 1)
                for checked in (False, True)
            }
            self._lock_session_row = sql(LOCK_SESSION_ROW)
            self._inserted = sql(INSERTED)
            self._put_snapshot_checked = sql(PUT_SNAPSHOT_CHECKED)
            self._renew_all = {n: sql(renew_all(n)) for n in range(1, RENEW_AT_ONCE + 1)}
        self._init_upkeep(sql)

    def channel(self, session_id: str) -> str:
        """The ``Engine.wait_for_change`` channel woken by appends to ``session_id``.

        ``session_id`` is checked as ``append`` checks it; ``StoreClosed``
        once the store is closed (no statement is run either way).
        """
        session = self._new_id_text("session_id", session_id)
        engine = self._engine
        if engine.closed:
            raise StoreClosed(f"{engine.url}: store is closed")
        return _CHANNEL + session

    def _new_id_text(self, name: str, value: Any) -> str:
        """A session or event id that names something new (not empty, unless ``seed_rules``)."""
        return text(name, value) if self._seed_rules else nonempty_text(name, value)

    def _name(self, name: str, value: Any, *, limit: int | None = MAX_NAME_SIZE) -> str:
        """A name that identifies something (a holder, a reducer): not empty, unless ``seed_rules``."""
        return text(name, value, limit=limit) if self._seed_rules else nonempty_text(name, value, limit=limit)

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

    def _made_id(self, new_id: Callable[[], str] | None) -> str:
        """The id of an event appended without one: ``new_id()`` checked, or ``random_id()`` (needs no check)."""
        return random_id() if new_id is None else self._new_id_text("generated id", new_id())

    def _insert(
        self,
        session: str,
        last: int,
        now: int,
        prepared: list[NewEvent],
        new_id: Callable[[], str] | None,
        made: list[str] | None = None,
    ) -> list[StoredEvent]:
        """Insert ``prepared`` after index ``last`` (the session lock held) and return them as stored.

        ``new_id`` names events without an id (see ``_made_id``); ``made``:
        the ids already made for the first of them, in order.
        """
        engine = self._engine
        insert = self._insert_event
        stored = []
        index = last
        made_ids = iter(made or ())
        for e in prepared:
            index += 1
            event_id = e.id
            if event_id is None:
                event_id = next(made_ids, None)
                if event_id is None:
                    event_id = random_id() if new_id is None else self._made_id(new_id)
            params = _insert_params(session, index, event_id, e, now)
            if not engine.execute(insert, params):
                index = self._taken(session, event_id)
                params = (session, index, *params[2:])
                if not engine.execute(insert, params):
                    raise DuplicateBatch(f"event id {event_id!r} already exists")
            stored.append(_fresh(event_id, e, index, session, now))
        return stored

    def _send_inserts(self, session: str, last: int, now: int, prepared: list[NewEvent]) -> list[StoredEvent]:
        """``_insert`` of events with ids, sent unawaited: they ride the next round trip (``deferred_answers``).

        The session lock must be held since before ``last`` was read
        (``LOCK_SESSION_ROW`` sent first), so the indexes after it are free;
        an insert that finds its id taken inserts nothing, and the
        requirement sent after them (``INSERTED``) then fails the
        transaction: ``RequirementFailed``, for the caller's precise path.
        """
        engine = self._engine
        insert = self._insert_event
        stored = []
        index = last
        for e in prepared:
            index += 1
            assert e.id is not None
            engine.send(insert, _insert_params(session, index, e.id, e, now))
            stored.append(_fresh(e.id, e, index, session, now))
        engine.require(self._inserted, (len(prepared), session, last, index), "every event went in")
        return stored

    def _taken(self, session: str, event_id: str) -> int:
        """An insert found its row taken: ``DuplicateBatch`` if by its id, else the index to use instead.

        The index is taken only where the session lock's read was stale
        (PostgreSQL, after waiting for the lock: see ``LOCK_SESSION``); this
        read, a new statement under the lock, sees every commit.
        """
        engine = self._engine
        if engine.one(self._event_by_id, (event_id,)) is not None:
            raise DuplicateBatch(f"event id {event_id!r} already exists")
        row = engine.one(self._last_index, (session,))
        assert row is not None  # the session row is locked
        return int(row[0]) + 1

    # -- append / read ---------------------------------------------------------

    def append(
        self, session_id: str, events: Iterable[Mapping[str, Any]], *, new_id: Callable[[], str] | None = None
    ) -> AppendResult:
        """Append ``events`` to the session atomically (see the module docstring).

        ``new_id`` makes ids for events without one (default: random UUIDs).
        ``session_id`` and every event id (given or made) name something new:
        not empty (``seed_rules``: empty allowed, as in the seed).
        """
        session = session_id if plain_name(session_id) else self._new_id_text("session_id", session_id)
        prepared = new_events("events", events, self.max_value_size, need_ids=False, empty_ids=self._seed_rules)
        if new_id is not None and not callable(new_id):
            fail("new_id must be callable")
        engine = self._engine
        if not prepared:
            row = engine.one(self._has_pending, (session,))  # no row: no session; NULL: nothing pending
            return AppendResult((), row is not None and row[0] is not None)
        ids = ids_unique(prepared)
        now = engine.now_ms()
        made = None
        if (
            self._flights
            and len(prepared) <= APPEND_AT_ONCE
            and (not ids or len(ids) == len(prepared))
            and not engine.in_transaction()
            # durastate._chunks's rule: at most STATEMENT_BYTES of values in one statement, unless one value
            and (len(prepared) == 1 or sum(len(e.blob) for e in prepared) <= STATEMENT_BYTES)
        ):
            appended = self._append_statement_run(session, prepared, ids, new_id, now)
            if isinstance(appended, AppendResult):
                return appended
            made = appended  # the ids it made, the full path's too
        elif len(prepared) == 1 and not ids:
            e = prepared[0]
            if e.cause is None and e.lane is None and not e.settled:
                # The common append in one statement (see APPEND_ALONE);
                # no row: the full path below, with the same id.
                made_id = self._made_id(new_id)
                made = [made_id]
                alone = (made_id, e.type, e.blob, now, now, session)
                if self._append_alone_outside:
                    row = engine.one(self._append_alone, alone)
                    if row is not None:
                        engine.notify("events:" + session, announced=True)
                else:
                    with engine.transaction():
                        row = engine.one(self._append_alone, alone)
                        if row is not None:
                            engine.notify("events:" + session, announced=True)
                if row is not None:
                    return AppendResult((_fresh(made_id, e, int(row[0]), session, now),), True)
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
            stored = self._insert(session, last, now, prepared, new_id, made)
            # Inside: delivered at the commit either way; an engine that sends it itself sends it with the COMMIT.
            engine.notify(_CHANNEL + session, announced=True)  # self.channel(session), unchecked
        return AppendResult(tuple(stored), pending or any(not e.settled for e in prepared))

    def _append_statement_run(
        self,
        session: str,
        prepared: list[NewEvent],
        ids: list[str],
        new_id: Callable[[], str] | None,
        now: int,
    ) -> AppendResult | list[str] | None:
        """``append`` as one statement (``append_statement``: PostgreSQL, outside a transaction); one round trip.

        Events without a cause, every one with an id of its own (``ids``)
        or none (made here, in order, as the full path would make them).
        The result; else the ids it made (None: none), with which the full
        path runs: a cause, an id taken, a race (see the statement).
        """
        if any(e.cause is not None for e in prepared):
            return None
        made = None if ids else [self._made_id(new_id) for _ in prepared]
        every_id = made or ids
        params: list[Any] = []
        waiting: set[str] = set()  # lanes with an unsettled event earlier in the batch
        for event_id, e in zip(every_id, prepared, strict=True):
            lane = e.lane
            params += (event_id, e.type, e.blob, lane, 1 if lane in waiting else 0, now if e.settled else None)
            if lane is not None and not e.settled:
                waiting.add(lane)
        unsettled = any(not e.settled for e in prepared)
        params += (not unsettled, session, session, now, now, now)
        engine = self._engine
        try:
            # Ids given or made by new_id may be taken: looked up first (random ones need not be).
            statement = self._append_statement[len(prepared), made is None or new_id is not None]
            rows = engine.all(statement, params)
        except Conflict:  # an index or id found taken: nothing applied by this run
            return self._appended_before(session, made, unsettled, now) or made
        if len(rows) != len(prepared):  # an id taken, or a session created meanwhile
            return self._appended_before(session, made, unsettled, now) or made
        engine.notify(_CHANNEL + session, announced=True)
        stored = tuple(
            _fresh(i, e, int(row[0]), session, now) for i, e, row in zip(every_id, prepared, rows, strict=True)
        )
        return AppendResult(stored, unsettled or rows[0][1] is not None)

    def _appended_before(self, session: str, made: list[str] | None, unsettled: bool, now: int) -> AppendResult | None:
        """The events of ``made`` ids if an earlier run of this very append committed them, else None.

        A retry after a lost connection that found nothing to re-read runs
        the statement again; when the first run was still going on the lost
        backend and commits meanwhile, the retry finds its ids or index
        taken (``Conflict``), or the session row it would create made (no
        row): by the first run, whose rows carry this call's ids and time
        (the full path would refuse the ids it made).
        Explicit ids need no such care: the full path answers an append
        whose ids all exist with the stored events.
        """
        if made is None:
            return None
        found = self._existing(made)
        if len(found) != len(made) or any(e.session_id != session or e.created_at != now for e in found):
            return None
        row = self._engine.one(self._has_pending, (session,))
        pending = unsettled or (row is not None and row[0] is not None)
        return AppendResult(tuple(sorted(found, key=lambda e: e.index)), pending)

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
        """Claim every ready event of the session (at most ``limit``), see the module docstring.

        The lease ends at ``expires_at_ms`` if given, else ``ttl_ms`` from
        now: it must be live when handed out (``ttl_ms >= 1``, or
        ``expires_at_ms`` later than now by the store's clock), else
        ``InvalidRequest`` (``seed_rules``: any, as in the seed, where a
        claim with ``ttl_ms=0`` is expired at once but still completes).
        """
        session = text("session_id", session_id)
        holder = self._name("holder", holder, limit=None)
        excluded: set[int] = (
            set()
            if type(exclude_indexes) is tuple and not exclude_indexes  # the default; skips as_list's ABC checks
            else {as_int64("exclude_indexes[]", i) for i in as_list("exclude_indexes", exclude_indexes)}
        )
        if limit is not None:
            limit = positive("limit", limit)
        engine = self._engine
        now = engine.now_ms()
        expires = expiry(now, ttl_ms, expires_at_ms, claim=True, seed_rules=self._seed_rules)
        claim_set = (now, now, holder, expires, expires)
        claim_params: tuple[Any, ...]
        if limit is None:
            claim, claim_params = self._claim_session_all, (*claim_set, session, now)
        else:
            claim, claim_params = self._claim_session, (session, now, limit, *claim_set, session, now)
        if not excluded:
            # One statement (its own commit) when it claims something; when
            # it claims nothing, the busy/settled answer must come from the
            # same snapshot as the claim: the transaction below tries again.
            # Where a transaction's statements each read a snapshot of their
            # own anyway (PostgreSQL's READ COMMITTED, where answers cost a
            # round trip each), the lease read follows at once: two round
            # trips, not four (BEGIN and the claim again, the read, COMMIT).
            rows = engine.all(claim, claim_params)
            if rows:
                return self._claimed(rows)
            if self._flights:
                return self._busy_or_settled(engine.one(self._retry_at, (session, now)))
        with engine.transaction():
            if not excluded:
                rows = engine.all(claim, claim_params)
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
            if rows:
                return self._claimed(rows)
            retry = engine.one(self._retry_at, (session, now))
        return self._busy_or_settled(retry)

    @staticmethod
    def _busy_or_settled(retry: Row | None) -> ClaimResult:
        """A claim that took nothing: busy until the earliest lease expiry (``RETRY_AT``'s row), else settled."""
        retry_at = None if retry is None else retry[0]  # MIN(claim_expires_at)
        if retry_at is None:
            return ClaimResult("settled")
        return ClaimResult("busy", retry_at=int(retry_at))

    @staticmethod
    def _claimed(rows: list[Row]) -> ClaimResult:
        if len(rows) == 1:
            return ClaimResult("claimed", (event_from_row(rows[0]),))
        return ClaimResult("claimed", tuple(sorted((event_from_row(r) for r in rows), key=lambda e: e.index)))

    def claim_any(
        self, holder: str, ttl_ms: int | None = None, *, expires_at_ms: int | None = None, limit: int = 1
    ) -> list[StoredEvent]:
        """Claim up to ``limit`` ready events across all sessions, oldest-ready first.

        The lease must be live when handed out, as in ``claim_available``.
        """
        holder = self._name("holder", holder, limit=None)
        limit = positive("limit", limit)
        engine = self._engine
        now = engine.now_ms()
        expires = expiry(now, ttl_ms, expires_at_ms, claim=True, seed_rules=self._seed_rules)
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
        """Extend the holder's live leases; report the ones claimed again since.

        The new expiry is ``expires_at_ms`` if given, else ``ttl_ms`` (>= 0)
        from now: ``ttl_ms=0`` ends the leases at once (the events are
        claimable again), the way a cancelled claim is given back.
        ``seed_rules``: a negative ``ttl_ms`` too, as in the seed.
        """
        session = text("session_id", session_id)
        holder = self._name("holder", holder, limit=None)
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
        expires = expiry(now, ttl_ms, expires_at_ms, claim=False, seed_rules=self._seed_rules)
        renewed: list[int] = []
        superseded: list[int] = []
        if self._flights and len(wanted) <= RENEW_AT_ONCE and len({index for index, _ in wanted}) == len(wanted):
            # Every claim in one statement (renew_all): its answer, then the COMMIT, two round trips (a
            # transaction because its retry after a lost connection needs the transaction's attempt row).
            attempts = dict(wanted)
            params: list[Any] = []
            for index, attempt in wanted:
                params += (expires, expires, session, index, attempt, holder, now)
            for index, _ in wanted:
                params += (session, index)
            with engine.transaction():
                rows = engine.all(self._renew_all[len(wanted)], params)
            for index, attempt_count, was_renewed in rows:
                if int(attempt_count) > attempts[int(index)]:
                    superseded.append(int(index))
                elif was_renewed:
                    renewed.append(int(index))
            return RenewResult(tuple(sorted(renewed)), tuple(sorted(superseded)))
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
        """Mark the event processed by ``attempt`` and append its child events, atomically.

        Each child needs a (non-empty, unless ``seed_rules``) ``id`` and no ``cause``.
        """
        session = text("session_id", session_id)
        index = as_int64("index", index)
        attempt = as_int64("attempt", attempt)
        prepared = new_events("events", events, self.max_value_size, need_ids=True, empty_ids=self._seed_rules)
        for i, e in enumerate(prepared):
            if e.cause is not None:
                fail(f"events[{i}] must not carry a cause: a returned event's cause is the completed attempt")
        engine = self._engine
        now = engine.now_ms()
        if not prepared and engine.execute(self._complete_alone, (now, attempt, "[]", session, index, attempt)):
            return CompleteResult("completed")  # the common case in one statement (see COMPLETE_ALONE)
        if self._flights and prepared:
            try:
                return self._complete(session, index, attempt, prepared, now, flight=True)
            except RequirementFailed:
                pass  # a child's id is taken: nothing applied, the precise path says so
        return self._complete(session, index, attempt, prepared, now, flight=False)

    def _complete(
        self, session: str, index: int, attempt: int, prepared: list[NewEvent], now: int, *, flight: bool
    ) -> CompleteResult:
        """``complete_attempt``'s transaction; ``flight`` (PostgreSQL, with children): two round trips.

        The parent's row decides what to write (processed already, by which
        attempt; still claimed by this one), so it is read first: with BEGIN
        and the session lock sent ahead of it, one round trip. The writes go
        unawaited with the COMMIT (the second): the children's ids are not
        looked up, their inserts are required to have gone in
        (``_send_inserts``), and ``RequirementFailed`` sends the caller to
        the precise path (``flight`` off), which words the refusal.
        """
        engine = self._engine
        with engine.transaction():
            if flight:
                engine.send(self._lock_session_row, (session,))
            parent = engine.one(self._lock_parent, (session, index))
            if parent is None:
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
            if ids and not flight and self._existing(ids):
                raise DuplicateBatch("returned event batch contains an already-appended event id")
            engine.send(self._mark_processed, (now, attempt, orjson.dumps(ids).decode(), session, index))
            lane = parent[C.lane]
            if lane is not None:
                engine.send(self._promote_lane, (now, session, session, lane))
            for e in prepared:
                e.cause = Cause(index, attempt)
            last = int(parent[LOCK_PARENT_LAST])
            if flight:
                stored = self._send_inserts(session, last, now, prepared)
            else:
                stored = self._insert(session, last, now, prepared, None) if prepared else []
            if stored:  # inside: with the COMMIT (see append)
                engine.notify(_CHANNEL + session, announced=True)
        return CompleteResult("completed", tuple(stored))

    def fail_attempt(self, session_id: str, index: int, attempt: int, error: str, max_failures: int) -> FailResult:
        """Record a failed attempt; dead-letter the event at ``max_failures`` failures.

        ``max_failures`` >= 1: the failure that brings the event's
        ``failure_count`` to it dead-letters the event (1: its first
        failure). 0 or less would dead-letter at once: ``InvalidRequest``.
        """
        session = text("session_id", session_id)
        index = as_int64("index", index)
        attempt = as_int64("attempt", attempt)
        error = text("error", error, limit=self.max_value_size)  # as Claim.nack's
        max_failures = positive("max_failures", max_failures)
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
            # Its answer decides nothing: it rides the COMMIT (PostgreSQL: the row read decides what to write, so
            # two round trips, the read's and the COMMIT's).
            engine.send(self._fail, (failures, error, now, attempt, now if dead else None, now, session, index))
        return FailResult("dead_lettered" if dead else "failed", failures)

    # -- snapshots -------------------------------------------------------------

    def read_state(self, session_id: str, reducer_name: str) -> StateRead:
        """The reducer's snapshot (or ``None``) and every event after it."""
        session = text("session_id", session_id)
        reducer = self._name("reducer_name", reducer_name)
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

    def _brief_state(
        self, session_id: str, reducer_name: str, make: Callable[[str, str, Any, int, str, int], T]
    ) -> tuple[Snapshot | None, list[T]]:
        """``read_state`` with only the events' id, type, payload, index, session and creation time.

        For ``compat.a2``, whose seed returns just those (its ``Event``):
        ``make(id, type, payload, index, session_id, created_at)`` builds
        each one. Reading 6 columns instead of 23 costs about half as much.
        """
        session = text("session_id", session_id)
        reducer = self._name("reducer_name", reducer_name)
        snapshot = None
        events = []
        rows = self._engine.all(self._read_state_brief, (session, reducer, session, session, reducer))
        # The unpacking names BRIEF_COLUMNS, in order (a test compares them).
        for row_kind, session_id, idx, event_id, event_type, payload, created_at in rows:
            if row_kind == 0:
                snapshot = Snapshot(int(idx), orjson.loads(payload))
            else:
                events.append(make(event_id, event_type, orjson.loads(payload), int(idx), session_id, int(created_at)))
        return snapshot, events

    def put_snapshot(self, session_id: str, reducer_name: str, index: int, state: Any) -> bool:
        """Store the reducer's state as of ``index`` unless one as far or further is stored; True if stored.

        ``index`` is the last event the state has folded in: from 1 (the
        first event) to the session's last index. ``read_state`` then
        returns the events after it. Index 0 would be a state that folds in
        nothing (what no snapshot already means) and an index past the
        session's end would hide the events appended there later: both are
        ``InvalidRequest``, as is any index for a session without events.
        The check and the write hold the session lock, so a concurrent
        ``delete_session`` never leaves the snapshot behind. ``seed_rules``:
        any index, one statement, as in the seed.
        """
        session = text("session_id", session_id)
        reducer = self._name("reducer_name", reducer_name)
        index = as_int64("index", index) if self._seed_rules else positive("index", index)
        blob = dump_json("state", state, self.max_value_size)
        engine = self._engine
        now = engine.now_ms()
        if self._seed_rules:
            return engine.execute(self._put_snapshot, (session, reducer, index, blob, now)) == 1
        if self._flights:
            # The lock, the check and the write in one statement (PUT_SNAPSHOT_CHECKED): one round trip. An index
            # past the last it read (which may be stale) takes the path below, which checks again and refuses.
            row = engine.one(self._put_snapshot_checked, (session, session, reducer, index, blob, now, index))
            if row is not None and row[0] is not None and index <= int(row[0]):
                return bool(row[1])
        with engine.transaction():
            locked = self._lock(session, now, create=False)
            last = 0 if locked is None else locked[0]
            if index > last:
                fail(
                    f"index {index} is past the last event of session {session!r} ({last}):"
                    " a snapshot covers events that exist"
                )
            return engine.execute(self._put_snapshot, (session, reducer, index, blob, now)) == 1

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
        store is closed. While caught up it waits for the session's appends
        (``engines.watch``): ``stop`` is looked at every ``poll_interval``
        seconds; the session is read again then too where the engine cannot
        hear other processes' appends (SQLite, a PostgreSQL pooler), and
        only when woken where it can (PostgreSQL's listener).
        """
        return follow(self._tail(session_id, start_after, poll_interval), stop)

    def _tail(
        self, session_id: str, start_after: int | None = None, poll_interval: float = POLL_INTERVAL
    ) -> Tail[StoredEvent, int]:
        """``stream``'s arguments checked, as a ``Tail`` (``durastate._tail``): the async facade follows it too."""
        session = text("session_id", session_id)
        after = 0 if start_after is None else as_int64("start_after", start_after)
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)):
            fail_type("poll_interval", f"a number of seconds > 0 and <= {POLL_INTERVAL}", poll_interval)
        if not 0 < poll_interval <= POLL_INTERVAL:
            fail(f"poll_interval must be > 0 and <= {POLL_INTERVAL} seconds, got {poll_interval!r}")
        engine, read_range = self._engine, self._read_range

        def read_after(cursor: int) -> tuple[list[StoredEvent], int]:
            events = [event_from_row(row) for row in engine.all(read_range, (session, cursor, INT64_MAX, PAGE_SIZE))]
            return events, (events[-1].index if events else cursor)

        channel = _CHANNEL + session
        interval = float(poll_interval)
        return Tail(lambda: engine.watch(channel, interval), read_after, after, interval)

    def read_after(self, session_id: str, after_index: int, limit: int = PAGE_SIZE) -> list[StoredEvent]:
        """One page of a stream: up to ``limit`` events after ``after_index``."""
        return self.read(session_id, after_index, limit=limit)
