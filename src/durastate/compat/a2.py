"""``durastate.compat.a2``: experimental-a2's store (``store-sqlite.ts``) in Python.

A drop-in for the seed's ``A2Store``: the same operations, outcomes and
error codes, snake_case, on any durastate engine::

    from durastate.compat import a2

    store = a2.sqlite()                          # .a2/dev.db, like the seed
    store = a2.open_store("postgresql://...")    # or any durastate URL
    result = await store.append("s1", [{"type": "hello", "payload": {"n": 1}}])
    claim = await store.claim_available(session_id="s1", holder="w1", ttl_ms=30_000)

Every method is ``async`` and runs the synchronous ``store.events`` /
``store.presence`` code through the store's ``AsyncRunner`` (see
``durastate._aio``: inline on the loop's thread for a SQLite file, as the
seed calls SQLite; on a worker when the file is locked or for other
engines; no transaction spans an ``await``). There is no second copy of the
logic: the rules are those of ``durastate.events``. A cancelled
``claim_available`` that took its claim anyway releases it at once (the
attempt counts, as a crashed worker's would); every other cancelled call
completes (it is one atomic commit) or never started. ``close()`` waits
until no worker is inside a call before closing the store.

Shapes: results are frozen dataclasses with the seed's fields in snake_case
(``StoredEvent``, ``Event``, ``AppendResult``, ``ClaimResult``, ...); times
are aware UTC ``datetime`` objects (millisecond precision, as stored);
sequences are tuples. Input events are dicts ``{"type", "payload", "id"?,
"cause"?: {"index", "attempt", "batch_size"?}, "lane"?, "settled"?}``.

Errors, as in the seed: ``A2Error(code, message)`` with ``code``
``"PARTIAL_DUPLICATE_BATCH"`` (a batch repeats an id, mixes stored and new
ids, reuses another session's id, or a completion retry does not match),
``"SUPERSEDED_ATTEMPT"`` (an append caused by a stale attempt) or
``"STORE_UNAVAILABLE"`` (anything the store could not do: the original
error is the ``__cause__``); ``TypeError`` where the seed throws one (no
event at the index named) and for arguments of the wrong type or value.

Where the seed's types let a caller send something it cannot store as
sent, this adapter refuses it with ``TypeError`` (and changes nothing)
instead of storing a corrupted or unreadable value. These are its only
deliberate refusals:

* a payload, state or presence value holding NaN or an infinity (the
  seed's ``JSON.stringify`` writes ``null`` in their place), an integer
  outside 64 bits, a non-string key, nesting deeper than orjson's 254
  levels, or more than the store's ``max_value_size`` bytes of JSON;
* ``settled`` that is not a bool (the seed treats any truthy value as true);
* ``type: None`` (the seed stores ``null`` in a ``NOT NULL`` column's place
  and fails with a driver error);
* strings with lone surrogates (ids, types, lanes, session ids: SQLite's
  UTF-8 cannot hold them) or NUL characters;
* session ids, event ids, lanes and reducer names over 1024 UTF-8 bytes
  (PostgreSQL cannot index longer keys; durastate refuses them on every
  engine alike);
* ids (event, session, holder, cursor) that are not strings;
* a claim or presence expiry outside ``datetime``'s years 1 to 9999
  (``expires_at_ms``, or ``ttl_ms`` from now; the seed's ``Date`` would be
  an Invalid Date, and every later read of the row would fail here);
* a ``cause`` without ``attempt`` (or without ``index``), or with
  ``attempt``/``index``/``batch_size`` 0 or negative (the seed's own reader
  throws on such a stored cause);
* a negative ``limit`` for ``inspect.read_events``/``inspect.list_sessions``
  (SQLite's ``LIMIT -1`` would make it "no limit" in the seed);
* a ``ttl_ms`` beyond about 146 million years either way (``now + ttl``
  must stay a 64-bit millisecond time).

Where the seed answers, this adapter answers the same: a stale
``complete_attempt`` reports ``superseded`` even when its returned events
are malformed (the seed checks the attempt first), and
``inspect.list_sessions(limit=0)`` returns an empty page with no cursor.
Values ``store.events`` refuses as meaningless are taken as the seed takes
them (the facet runs with ``seed_rules``, and the seed's arithmetic where
that is enough):

* ``fail_attempt(max_failures=0 or less)`` dead-letters at the first
  failure, as ``max_failures=1`` does;
* ``claim_available`` with ``ttl_ms=0``, a negative ``ttl_ms`` or an
  ``expires_at_ms`` not in the future hands out a lease that has already
  expired (claimable again at once, not renewable, still completable by
  its attempt); ``renew_claims`` takes a negative ``ttl_ms`` likewise;
* ``put_snapshot`` stores any index (0, negative, past the session's last
  event, for a session without events): ``read_state`` returns the events
  after it;
* empty session ids and event ids are ids like any other.

Clock and ids are injectable: ``clock.now() -> datetime`` (aware) is the
store's clock for every stored time; ``ids() -> str`` names events appended
without an ``id``, called only for events actually inserted.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

from .. import events as _events
from .. import store as _store
from .._aio import AsyncRunner, Undo
from ..aio._build import FollowedTail
from ..aio._facades import release_event_claims
from ..errors import DurastateError, InvalidRequest
from ..events import FailResult, RenewResult, Snapshot  # the same shape here: no times, no events
from ..presence import PresenceEntry

__all__ = [
    "A2Error",
    "A2Store",
    "AppendResult",
    "ClaimResult",
    "Clock",
    "CompleteResult",
    "Event",
    "EventCause",
    "EventPage",
    "FailResult",
    "PresenceRow",
    "RenewResult",
    "SessionList",
    "SessionSummary",
    "Snapshot",
    "SnapshotInfo",
    "StateRead",
    "StoredEvent",
    "open_store",
    "sqlite",
]

T = TypeVar("T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
# The times a datetime can hold (years 1 to 9999), in epoch milliseconds.
_DT_MIN_MS = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _MS
_DT_MAX_MS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _MS
# A TTL at least this long is checked against the clock: it could end past year 9999.
_LONG_TTL_MS = 10 * 365 * 86_400_000


class A2Error(Exception):
    """The seed's error: ``code`` is one of the seed's codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _raise_as_seed(exc: DurastateError) -> NoReturn:
    """Raise ``exc`` as the seed would (see the module docstring's "Errors")."""
    if isinstance(exc, _events.DuplicateBatch):
        raise A2Error("PARTIAL_DUPLICATE_BATCH", str(exc)) from None
    if isinstance(exc, _events.SupersededAttempt):
        raise A2Error("SUPERSEDED_ATTEMPT", str(exc)) from None
    if isinstance(exc, (_events.UnknownEvent, InvalidRequest)):
        raise TypeError(str(exc)) from None
    raise A2Error("STORE_UNAVAILABLE", "store operation failed") from exc


class Clock(Protocol):
    def now(self) -> datetime: ...


class _SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def _check_expiry(store: _store.Store, ttl_ms: Any, expires_at_ms: Any) -> None:
    """``TypeError`` for a claim or presence expiry no ``datetime`` can hold, before anything is written.

    The seed's ``Date`` turns such a time into an Invalid Date; stored, it
    would make every later read of the event or presence row fail. Other
    wrong values are left to the facet's checks.
    """
    if expires_at_ms is not None:
        if type(expires_at_ms) is int and not _DT_MIN_MS <= expires_at_ms <= _DT_MAX_MS:
            raise TypeError(f"expires_at_ms must be a time from year 1 to 9999, got {expires_at_ms}")
    elif type(ttl_ms) is int and ttl_ms >= _LONG_TTL_MS and store.engine.now_ms() + ttl_ms > _DT_MAX_MS:
        raise TypeError(f"ttl_ms={ttl_ms} ends past year 9999")


def _dt(ms: int) -> datetime:
    return _EPOCH + ms * _MS


def _to_ms(name: str, value: Any) -> int:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        raise TypeError(f"{name} must be an aware datetime (with a timezone)")
    return (value - _EPOCH) // _MS


# -- result shapes --------------------------------------------------------------


@dataclass(frozen=True)
class EventCause:
    index: int
    attempt: int
    batch_size: int | None = None


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    payload: Any
    index: int
    session_id: str
    created_at: datetime


@dataclass(frozen=True)
class StoredEvent:
    id: str
    type: str
    payload: Any
    index: int
    session_id: str
    created_at: datetime
    cause: EventCause | None
    lane: str | None
    processed_at: datetime | None
    processed_by_attempt: int | None
    returned_event_ids: tuple[str, ...] | None
    first_claimed_at: datetime | None
    last_claimed_at: datetime | None
    attempt_count: int
    failure_count: int
    last_failed_at: datetime | None
    last_failed_attempt: int | None
    last_error: str | None
    failed_at: datetime | None
    claim_holder: str | None
    claim_expires_at: datetime | None


@dataclass(frozen=True)
class AppendResult:
    events: tuple[StoredEvent, ...]
    has_pending: bool


@dataclass(frozen=True)
class ClaimResult:
    outcome: str  # "claimed" | "busy" | "settled"
    events: tuple[StoredEvent, ...] = ()
    retry_at: datetime | None = None


@dataclass(frozen=True)
class CompleteResult:
    outcome: str  # "completed" | "superseded"
    events: tuple[StoredEvent, ...] = ()


@dataclass(frozen=True)
class StateRead:
    snapshot: Snapshot | None
    events: tuple[Event, ...]


@dataclass(frozen=True)
class PresenceRow:
    participant: str
    field: str
    value: Any
    seen: int
    at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    event_count: int
    pending_count: int
    failed_count: int
    attempt_count: int
    failure_count: int
    first_event_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SessionList:
    sessions: tuple[SessionSummary, ...]
    cursor: str | None


@dataclass(frozen=True)
class EventPage:
    events: tuple[StoredEvent, ...]
    through_index: int


@dataclass(frozen=True)
class SnapshotInfo:
    reducer_name: str
    index: int
    updated_at: datetime


_new_object = object.__new__


def _stored(e: _events.StoredEvent) -> StoredEvent:
    # Built by filling the instance dict, as durastate.events builds its
    # own: a frozen dataclass's __init__ pays one object.__setattr__ per
    # field (21 here), a large share of an append's Python time.
    cause = e.cause
    stored = _new_object(StoredEvent)
    stored.__dict__.update(
        id=e.id,
        type=e.type,
        payload=e.payload,
        index=e.index,
        session_id=e.session_id,
        created_at=_EPOCH + e.created_at * _MS,
        cause=None if cause is None else EventCause(cause.index, cause.attempt, cause.batch_size),
        lane=e.lane,
        processed_at=None if e.processed_at is None else _EPOCH + e.processed_at * _MS,
        processed_by_attempt=e.processed_by_attempt,
        returned_event_ids=e.returned_event_ids,
        first_claimed_at=None if e.first_claimed_at is None else _EPOCH + e.first_claimed_at * _MS,
        last_claimed_at=None if e.last_claimed_at is None else _EPOCH + e.last_claimed_at * _MS,
        attempt_count=e.attempt_count,
        failure_count=e.failure_count,
        last_failed_at=None if e.last_failed_at is None else _EPOCH + e.last_failed_at * _MS,
        last_failed_attempt=e.last_failed_attempt,
        last_error=e.last_error,
        failed_at=None if e.failed_at is None else _EPOCH + e.failed_at * _MS,
        claim_holder=e.claim_holder,
        claim_expires_at=None if e.claim_expires_at is None else _EPOCH + e.claim_expires_at * _MS,
    )
    return stored


def _brief_event(id: str, type: str, payload: Any, index: int, session_id: str, created_at: int) -> Event:
    """The seed's ``Event`` (what ``read_state`` returns), from ``Events._brief_state``."""
    event = _new_object(Event)  # as _stored builds its StoredEvent
    event.__dict__.update(
        id=id, type=type, payload=payload, index=index, session_id=session_id, created_at=_EPOCH + created_at * _MS
    )
    return event


def _presence_row(e: PresenceEntry) -> PresenceRow:
    return PresenceRow(e.participant, e.field, e.value, e.seen, _dt(e.at), _dt(e.expires_at))


# -- the store ----------------------------------------------------------------------


class A2Store:
    """The seed's ``A2Store`` over a durastate ``Store`` (see the module docstring)."""

    def __init__(self, store: _store.Store, ids: Callable[[], str] | None = None) -> None:
        self._store = store
        # The facet with the seed's ranges (empty ids, expired-at-once
        # claims, any snapshot index), on the store's engine and limits.
        self._events = _events.Events(store.engine, max_value_size=store.events.max_value_size, seed_rules=True)
        self._ids = ids
        self._runner = AsyncRunner(store.engine, name="a2")
        self.presence = _PresenceApi(self)
        self.inspect = _InspectApi(self)

    async def _call(
        self, fn: Callable[..., T], *args: Any, _undo: Undo | None = None, _reads: bool = False, **kwargs: Any
    ) -> T:
        """``fn(*args, **kwargs)`` through the runner; ``_reads``: ``fn`` never writes (inline at durability="full")."""
        try:
            return await self._runner.call(fn, args, kwargs, _undo, reads=_reads)
        except DurastateError as exc:
            _raise_as_seed(exc)

    # -- events ----------------------------------------------------------------

    async def append(self, session_id: str, events: Iterable[Mapping[str, Any]]) -> AppendResult:
        result = await self._call(self._events.append, session_id, events, new_id=self._ids)
        return AppendResult(tuple(_stored(e) for e in result.events), result.has_pending)

    async def read(
        self, session_id: str, after_index: int | None = None, through_index: int | None = None
    ) -> tuple[StoredEvent, ...]:
        rows = await self._call(self._events.read, session_id, after_index, through_index, _reads=True)
        return tuple(_stored(e) for e in rows)

    async def claim_available(
        self,
        *,
        session_id: str,
        holder: str,
        ttl_ms: int,
        expires_at_ms: int | None = None,
        exclude_indexes: Iterable[int] = (),
    ) -> ClaimResult:
        _check_expiry(self._store, ttl_ms, expires_at_ms)
        result = await self._call(
            self._events.claim_available,
            session_id,
            holder,
            ttl_ms=ttl_ms,
            expires_at_ms=expires_at_ms,
            exclude_indexes=exclude_indexes,
            _undo=self._release,
        )
        retry_at = None if result.retry_at is None else _dt(result.retry_at)
        return ClaimResult(result.outcome, tuple(_stored(e) for e in result.events), retry_at)

    def _release(self, result: _events.ClaimResult) -> None:
        """A claim whose caller was cancelled before receiving it: end its leases now."""
        release_event_claims(self._events, result)

    async def renew_claims(
        self,
        *,
        session_id: str,
        holder: str,
        claims: Iterable[Mapping[str, int]],
        ttl_ms: int,
        expires_at_ms: int | None = None,
    ) -> RenewResult:
        _check_expiry(self._store, ttl_ms, expires_at_ms)
        result = await self._call(
            self._events.renew_claims, session_id, holder, claims, ttl_ms=ttl_ms, expires_at_ms=expires_at_ms
        )
        return result

    async def complete_attempt(
        self, *, session_id: str, index: int, attempt: int, events: Iterable[Mapping[str, Any]]
    ) -> CompleteResult:
        try:
            result = await self._call(self._events.complete_attempt, session_id, index, attempt, events)
        except TypeError as refused:
            # The seed checks the attempt before it looks at the events: a
            # stale attempt is superseded even if its events are malformed.
            try:
                stale = await self._call(self._stale_attempt, session_id, index, attempt, _reads=True)
            except TypeError:
                stale = False
            if stale:
                return CompleteResult("superseded")
            raise refused from None
        return CompleteResult(result.outcome, tuple(_stored(e) for e in result.events))

    def _stale_attempt(self, session_id: str, index: int, attempt: int) -> bool:
        """The seed's ``superseded`` test of ``completeAttempt`` (false for an unknown event)."""
        event = self._events.get(session_id, index)
        if event is None:
            return False
        if event.processed_at is not None:
            return event.processed_by_attempt != attempt
        return event.attempt_count != attempt or event.claim_holder is None or event.failed_at is not None

    async def fail_attempt(
        self, *, session_id: str, index: int, attempt: int, error: str, max_failures: int
    ) -> FailResult:
        if type(max_failures) is int and max_failures < 1:
            # The seed dead-letters when failure_count + 1 >= max_failures:
            # for any max_failures <= 1 that is the first failure, which is
            # what the facet's smallest limit, 1, does.
            max_failures = 1
        result = await self._call(self._events.fail_attempt, session_id, index, attempt, error, max_failures)
        return result

    async def read_state(self, session_id: str, reducer_name: str) -> StateRead:
        snapshot, events = await self._call(
            self._events._brief_state, session_id, reducer_name, _brief_event, _reads=True
        )
        return StateRead(snapshot, tuple(events))

    async def put_snapshot(self, session_id: str, reducer_name: str, index: int, state: Any) -> None:
        await self._call(self._events.put_snapshot, session_id, reducer_name, index, state)

    def stream(self, session_id: str, start_after: int | None = None) -> AsyncIterator[StoredEvent]:
        """Existing events after ``start_after``, then new ones as they commit.

        Ends when the store is closed; stop early with ``aclose()`` (or by
        leaving an ``async for``).
        """
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
        if start_after is not None and (isinstance(start_after, bool) or not isinstance(start_after, int)):
            raise TypeError(f"start_after must be an int, got {type(start_after).__name__}")
        return self._stream(session_id, start_after or 0)

    async def _stream(self, session_id: str, after: int) -> AsyncIterator[StoredEvent]:
        # The async facade's stream (durastate.aio): reads on the runner, waits on the loop, no thread held.
        events = FollowedTail(self._runner, lambda: self._events._tail(session_id, after))
        try:
            while True:
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    return
                except DurastateError as exc:
                    _raise_as_seed(exc)
                yield _stored(event)
        finally:
            await events.aclose()

    def close(self) -> None:
        """Close the store (idempotent). Streams end; later calls raise ``A2Error``."""
        self._runner.close(wait=True)
        self._store.close()

    @property
    def closed(self) -> bool:
        return self._store.closed


class _PresenceApi:
    def __init__(self, owner: A2Store) -> None:
        self._owner = owner

    async def set(
        self, ns: str, participant: str, values: Mapping[str, Any], *, at: datetime, seen: int, ttl_ms: int
    ) -> None:
        at_ms = _to_ms("at", at)
        _check_expiry(self._owner._store, ttl_ms, None)
        presence = self._owner._store.presence
        await self._owner._call(presence.set, ns, participant, values, at_ms=at_ms, seen=seen, ttl_ms=ttl_ms)

    async def read(self, ns: str) -> tuple[PresenceRow, ...]:
        rows = await self._owner._call(self._owner._store.presence.read, ns)
        return tuple(_presence_row(r) for r in rows)


class _InspectApi:
    def __init__(self, owner: A2Store) -> None:
        self._owner = owner

    async def list_sessions(self, *, prefix: str, limit: int, cursor: str | None = None) -> SessionList:
        if limit == 0 and type(limit) is int:
            # The seed answers an empty page (no cursor); the arguments are still checked.
            await self._owner._call(self._owner._events.list_sessions, prefix, 1, cursor, _reads=True)
            return SessionList((), None)
        page = await self._owner._call(self._owner._events.list_sessions, prefix, limit, cursor, _reads=True)
        return SessionList(
            tuple(
                SessionSummary(
                    s.session_id,
                    s.event_count,
                    s.pending_count,
                    s.failed_count,
                    s.attempt_count,
                    s.failure_count,
                    _dt(s.first_event_at),
                    _dt(s.updated_at),
                )
                for s in page.sessions
            ),
            page.cursor,
        )

    async def read_events(
        self, session_id: str, *, after_index: int, limit: int, through_index: int | None = None
    ) -> EventPage:
        page = await self._owner._call(
            self._owner._events.read_events, session_id, after_index, limit, through_index, _reads=True
        )
        return EventPage(tuple(_stored(e) for e in page.events), page.through_index)

    async def list_snapshots(self, session_id: str) -> tuple[SnapshotInfo, ...]:
        infos = await self._owner._call(self._owner._events.list_snapshots, session_id, _reads=True)
        return tuple(SnapshotInfo(i.reducer_name, i.index, _dt(i.updated_at)) for i in infos)


# -- opening ------------------------------------------------------------------------


def _store_clock(clock: Clock) -> Callable[[], float]:
    """``clock.now()`` as the seconds callable durastate takes.

    The engine truncates ``seconds * 1000`` to whole milliseconds; half a
    millisecond added here keeps float rounding from turning 123 ms into
    122.999... and so 122.
    """

    def seconds() -> float:
        return (_to_ms("clock.now()", clock.now()) + 0.5) / 1000.0

    return seconds


def open_store(
    url: str | os.PathLike[str], clock: Clock | None = None, ids: Callable[[], str] | None = None
) -> A2Store:
    """An a2 store on any durastate URL (path, ``sqlite:...``, ``memory:``, ``postgresql://...``)."""
    if clock is not None and not callable(getattr(clock, "now", None)):
        raise TypeError("clock must have a now() method returning a datetime")
    if ids is not None and not callable(ids):
        raise TypeError("ids must be a callable returning a str")
    try:
        store = _store.open(url, clock=None if clock is None else _store_clock(clock))
    except InvalidRequest as exc:
        raise TypeError(str(exc)) from None
    except DurastateError as exc:
        raise A2Error("STORE_UNAVAILABLE", "opening the store failed") from exc
    return A2Store(store, ids)  # None: random UUIDs (events.random_id)


def sqlite(path: str = ".a2/dev.db", clock: Clock | None = None, ids: Callable[[], str] | None = None) -> A2Store:
    """The seed's dev default: a SQLite file (``:memory:`` for a private in-memory store)."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, got {type(path).__name__}")
    if path == ":memory:":
        return open_store("memory:", clock, ids)
    Path(path).expanduser().absolute().parent.mkdir(parents=True, exist_ok=True)
    if path.startswith("sqlite:"):
        return open_store(path, clock, ids)
    # The file the path names, as the seed opens it, whatever characters it has ('#', '?', a colon): a Path is
    # never read as a URL. "" stays refused as an empty store path.
    return open_store(Path(path) if path else "sqlite:", clock, ids)
