"""eventsourcing (9.5) persistence on durastate: recorders and an infrastructure factory.

Use it from an application's environment::

    PERSISTENCE_MODULE=durastate.integrations.eventsourcing
    DURASTATE_URL=sqlite:///var/lib/app/state.db      # or postgresql://..., memory:, a path

``DURASTATE_URL`` is read through eventsourcing's ``Environment``, so
``MYAPP_DURASTATE_URL`` overrides it for the application named ``MyApp``.
``DURASTATE_PREFIX`` (optional) is the store's table prefix (default
``ds_``). ``CREATE_TABLE`` is accepted and has no effect: durastate creates
and migrates its tables when the store opens.

Where the data lives (the ``kv`` facet; why kv and not events/records below).
Every recorder of one application shares the kv scope
``b"eventsourcing/" + application name``:

* ``ns=b"events/<purpose>"`` (purpose ``events`` or ``snapshots``): one
  value per stored event, keyed by ``originator key + version`` (the
  originator key is ``b"u"`` + the 16 UUID bytes, or ``b"s"`` + a 2-byte
  length + UTF-8 for string ids, so UUID and str ids round-trip as given;
  versions are signed 64-bit, encoded so bytes order equals numeric order),
  holding the event's notification id, topic and state; on SQLite an
  application's event row holds only the notification id (layout 3, see
  "Layouts" below). ``select_events`` is one ordered range scan (on SQLite
  plus one read of the notification rows).
* ``ns=b"notifications"``: one value per notification id (8 bytes, big
  endian) holding the whole event (its event key, topic and state), so a
  page of notifications is one ordered range scan (see "Layouts" below).
* counters ``(b"sequence", purpose)``: the last notification id handed out;
  ``(b"tracking", upstream application name)``: the highest tracked id.

Notification ids are gap-free and in commit order on both engines. An
insert is one ``store.transaction()`` whose first statement adds the batch
size to the sequence counter. That is an ``UPDATE`` of one row, whose lock
(PostgreSQL) or the write lock (SQLite) is held until commit: the next
writer of the same application cannot take ids before this one commits,
and a rolled-back insert also rolls back its increment, so no id is lost.
A reader tailing ``select_notifications(start=last + 1)`` therefore never
skips an id that commits late. The duplicate check (``IntegrityError`` for
an existing ``(originator_id, version)``) is the event rows' own insert: it
stores each event only where its key is free (``put_many(if_absent=True)``)
and counts; one short of the batch rolls the whole insert back, and only
then (outside the transaction, where the batch's own rows are gone) a
range scan finds which events were there, for the message. A unique key
sees every insert committed before it, and waits for one in flight, on
either engine; no read of the events precedes the write (there was one,
a range scan per originator, before 2026-12-06).
Tracking rows use the same pattern: a zero increment locks the upstream
application's counter before the "is this id higher?" check.

Layouts of a notification row. Since 2026-12-05 (layout 2) its value is
``b"\\x00\\x00"`` (the marker), the event key's length (2 bytes), the
event key, the topic's length (4 bytes), the topic and the state. Before,
(layout 1) it was the event key's length, the event key and the topic: a
pointer, whose state a page read from the event row in a second statement
(``get_many``). An event key is never empty, so a layout-1 row never starts
with two zero bytes. Both layouts are read, also mixed in one page (a
store written before keeps working and needs no migration; its old rows
cost the second statement, new ones do not). Layout 2 doubles the bytes
stored per event for one statement per page instead of two: on PostgreSQL
a page was 0.53x of eventsourcing's own recorder with two round trips
(bench/RESULTS-integrations.md, Stop 14).

Layout 3 of an event row (since 2026-12-06, written by application and
process recorders on engines that run statements in this process,
``capabilities.local``: SQLite): its value is the
8-byte notification id alone, and the layout-2 notification row holds the
event once. ``select_events`` then reads the notification rows too, a
second statement that costs no round trip there: one range scan where the
ids run consecutively (the events of one insert), else one ``get_many``.
An event row of 8 bytes is a pointer (a layout-1/2 event row has at least
the id and the topic's 4-byte length). Why: ``ds_kv`` is ``WITHOUT
ROWID``, whose interior cells are whole rows, and each event's ~260 bytes
went into the b-tree twice (at a random place among the events, at the end
of the notifications); with the state once, an insert of 10 events
commits 11.4 WAL frames instead of 14.3 (eventsourcing's own recorder:
5.6; ``bench/es_wal_pages.py``, docs/decisions.md "esrows"). On a server
(PostgreSQL, its Citus mode included) the event row keeps the event: the
second statement would be a round trip on every load of an aggregate. Snapshots
(no notification rows) keep the event in their row everywhere. Layouts
1-3 are read on every engine, mixed in one result; a store written by
this version on SQLite is not readable by earlier ones (as layout 2 was
not by the ones before it).

Why kv: the ``events`` facet is a2's session model (claims, leases, JSON
payloads, idempotent replay of duplicate ids: a duplicate must be an error
here) and ``records`` is pi-durable's typed JSON records with one global
sequence per store; eventsourcing needs opaque bytes, caller-chosen
versions that conflict, and one gap-free sequence *per application*. kv's
ordered bytes keys and atomic counters give exactly that with no facet
change and no second storage layer.

Edge cases and decisions:

* ``insert_events([])`` returns ``None`` (aggregate recorder) or ``[]``.
  A batch that repeats one ``(originator_id, version)`` is refused with
  ``IntegrityError`` before touching the database.
* Tracking ids must be ints >= 1 (notification ids start at 1); anything
  else is refused with ``durastate.InvalidRequest``, as are wrongly typed
  stored events and originator ids longer than the store's key limit.
* ``subscribe()`` waits on the store's change channel for the application
  (``Engine.watch``; every insert notifies it in its transaction, as
  eventsourcing's own PostgreSQL recorder does): on PostgreSQL a
  subscriber in any process wakes on the commit's NOTIFY and an idle one
  sends no statement; on SQLite inserts in this process wake it at once
  and other processes' are found by polling every
  ``SUBSCRIPTION_POLL_INTERVAL`` seconds. ``stop()`` ends a waiting
  iteration within that interval.
* durastate's ``StoreUnavailable`` / ``StoreClosed`` surface as
  eventsourcing's ``OperationalError`` / ``InterfaceError`` (the durastate
  error is the ``__cause__``), so code written for eventsourcing's own
  recorders catches them unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, cast
from uuid import UUID

try:
    from eventsourcing.persistence import (
        AggregateRecorder,
        ApplicationRecorder,
        InfrastructureFactory,
        IntegrityError,
        InterfaceError,
        Notification,
        OperationalError,
        ProcessRecorder,
        StoredEvent,
        Subscription,
        Tracking,
        TrackingRecorder,
    )
    from eventsourcing.utils import Environment, EnvType, resolve_topic
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "durastate.integrations.eventsourcing needs the eventsourcing package: "
        f"pip install 'durastate[eventsourcing]' ({exc})"
    ) from exc

import durastate

from .._validate import INT64_MAX, INT64_MIN, PAGE_SIZE
from ..errors import InvalidRequest, StoreClosed, StoreUnavailable
from ._common import borrowed

__all__ = [
    "DurastateAggregateRecorder",
    "DurastateApplicationRecorder",
    "DurastateProcessRecorder",
    "DurastateSubscription",
    "DurastateTrackingRecorder",
    "Factory",
    "SUBSCRIPTION_POLL_INTERVAL",
]

SUBSCRIPTION_POLL_INTERVAL = 0.1
_SCOPE_PREFIX = b"eventsourcing/"
_NOTIFICATIONS = b"notifications"
_SEQUENCE = b"sequence"
_TRACKING = b"tracking"
_ID = struct.Struct(">Q")
_TOPIC_LENGTH = struct.Struct(">I")
_POINTER_HEAD = struct.Struct(">H")  # event key length
# A layout-2 notification row starts with this (see "Layouts" in the module docstring).
_INLINE = b"\x00\x00"
_INLINE_HEAD = len(_INLINE) + _POINTER_HEAD.size
_VERSION_BIAS = 2**63
# A str id's bytes: its event key (b"s", 2-byte length, id, 8-byte version) must fit a 2-byte length.
_MAX_STR_ID = 0xFFFF - 11
# Greater than any 8-byte version suffix: the exclusive end of one originator's keys.
_AFTER_ALL_VERSIONS = b"\xff" * 9
_SELECT_PAGE = 500
# "No previous event" in _rows: no originator id or topic is this object.
_UNSET: Any = object()


class _Duplicate(Exception):
    """An event of the batch is stored already: ends the insert's transaction (rolled back), inside ``_insert``."""


class _Translated:
    """durastate's availability errors as the ones eventsourcing code catches (``with _TRANSLATED:``).

    A stateless class, one shared instance: entering it is two method
    calls, where a ``contextlib.contextmanager`` builds a generator and its
    wrapper on every use (a measurable share of an insert's CPU).
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: Any) -> None:
        if isinstance(exc, StoreUnavailable):
            raise OperationalError(str(exc)) from exc
        if isinstance(exc, StoreClosed):
            raise InterfaceError(str(exc)) from exc


_TRANSLATED = _Translated()


def _originator_key(originator_id: Any) -> bytes:
    if isinstance(originator_id, UUID):
        return b"u" + originator_id.bytes
    if isinstance(originator_id, str):
        raw = originator_id.encode("utf-8")
        if len(raw) > _MAX_STR_ID:
            raise InvalidRequest(f"originator_id is {len(raw)} bytes of UTF-8; at most {_MAX_STR_ID} are stored")
        return b"s" + _POINTER_HEAD.pack(len(raw)) + raw
    raise InvalidRequest(f"originator_id must be a UUID or str, got {type(originator_id).__name__}")


def _originator_id(key: bytes) -> tuple[UUID | str, int]:
    """The originator id at the start of an event key, and where its version starts."""
    if key[:1] == b"u":
        return UUID(bytes=key[1:17]), 17
    (length,) = _POINTER_HEAD.unpack_from(key, 1)
    return key[3 : 3 + length].decode("utf-8"), 3 + length


def _version_bytes(version: int) -> bytes:
    return _ID.pack(version + _VERSION_BIAS)


def _int64(name: str, value: Any) -> int:
    if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest(f"{name} must be an int, got {type(value).__name__}")
        raise InvalidRequest(f"{name}={value} is outside the signed 64-bit range")
    return int(value)


def _limit(limit: Any) -> int | None:
    """A select's ``limit`` as eventsourcing's SQLite recorder reads it: an int; negative is no limit (``None``).

    Its ``LIMIT -1`` (and the POPO recorder) returns every row; 0 returns
    none (as SQLite's and PostgreSQL's ``LIMIT 0``; the POPO recorder alone
    returns every row then). PostgreSQL's recorder errors on a negative one.
    """
    limit = _int64("limit", limit)
    return None if limit < 0 else limit


def _key_fields(key: bytes, originators: dict[bytes, UUID | str]) -> tuple[UUID | str, int]:
    """``(originator_id, version)`` of an event key.

    ``originators`` memoises decoded ids by key prefix: a page of events
    usually repeats a few originators, and building a UUID is the costliest
    step of decoding.
    """
    prefix = key[:-8]
    originator_id = originators.get(prefix)
    if originator_id is None:
        originator_id = originators[prefix] = _originator_id(key)[0]
    (version,) = _ID.unpack_from(key, len(prefix))
    return originator_id, version - _VERSION_BIAS


def _topic_and_state(value: bytes, at: int) -> tuple[str, bytes]:
    """The topic (its 4-byte length at ``at``) and the state after it, to the value's end."""
    (topic_length,) = _TOPIC_LENGTH.unpack_from(value, at)
    start = at + _TOPIC_LENGTH.size
    return value[start : start + topic_length].decode("utf-8"), value[start + topic_length :]


def _event_fields(key: bytes, value: bytes, originators: dict[bytes, UUID | str]) -> tuple[UUID | str, int, str, bytes]:
    """``(originator_id, version, topic, state)`` of a layout-1/2 event row (see ``_key_fields``)."""
    originator_id, version = _key_fields(key, originators)
    return (originator_id, version, *_topic_and_state(value, _ID.size))


class _DurastateRecorder:
    """The store, the application's kv scope and the translation of errors."""

    def __init__(self, store: durastate.Store, *, application: str = "") -> None:
        borrowed(store)
        if not isinstance(application, str):
            raise InvalidRequest(f"application must be a str, got {type(application).__name__}")
        self.store = store
        self.application = application
        self._scope = _SCOPE_PREFIX + application.encode("utf-8")


class DurastateAggregateRecorder(_DurastateRecorder, AggregateRecorder):
    """Stored events of one purpose (``"events"``, ``"snapshots"``) of one application."""

    _with_notifications = False

    def __init__(self, store: durastate.Store, *, application: str = "", purpose: str = "events") -> None:
        super().__init__(store, application=application)
        if not isinstance(purpose, str) or not purpose:
            raise InvalidRequest(f"purpose must be a non-empty str, got {purpose!r}")
        self.purpose = purpose
        self._events_ns = b"events/" + purpose.encode("utf-8")
        self._sequence_key = purpose.encode("utf-8")
        # The engine channel every insert notifies and subscriptions watch.
        self.channel = "eventsourcing:" + (self._scope + b"\x00" + self._sequence_key).hex()
        # Event rows written as pointers (layout 3, see "Layouts" in the module docstring): where a
        # second statement costs no round trip of its own (SQLite), and only beside notification rows.
        self._pointers = self._with_notifications and store.engine.capabilities.local

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        ids = self._insert(stored_events, None)
        return ids if self._with_notifications else None

    def _rows(self, stored_events: Sequence[StoredEvent]) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """The batch's event keys and bodies (topic length, topic, state), parallel, and its originators' key
        prefixes (distinct, in order of appearance); validated.

        An originator id or topic that is the same object as the previous
        event's (an aggregate's batch) is not encoded again: building a
        UUID's bytes and the topic's UTF-8 per event was a measurable share
        of an insert's CPU (docs/decisions.md "escpu").
        """
        if not isinstance(stored_events, (list, tuple)):
            raise InvalidRequest(f"stored_events must be a list, got {type(stored_events).__name__}")
        keys: list[bytes] = []
        bodies: list[bytes] = []
        prefixes: dict[bytes, None] = {}
        originator_id: Any = _UNSET
        prefix = b""
        topic: Any = _UNSET
        topic_head = b""
        for i, event in enumerate(stored_events):
            if not isinstance(event, StoredEvent):
                raise InvalidRequest(f"stored_events[{i}] must be a StoredEvent, got {type(event).__name__}")
            if event.topic is not topic:
                if not isinstance(event.topic, str):
                    raise InvalidRequest(f"stored_events[{i}].topic must be a str, got {type(event.topic).__name__}")
                topic = event.topic
                raw_topic = topic.encode("utf-8")
                topic_head = _TOPIC_LENGTH.pack(len(raw_topic)) + raw_topic
            state = event.state
            if not isinstance(state, bytes):
                raise InvalidRequest(f"stored_events[{i}].state must be bytes, got {type(state).__name__}")
            version = event.originator_version
            if type(version) is not int or not INT64_MIN <= version < INT64_MAX:
                version = _int64(f"stored_events[{i}].originator_version", version)
                if version == INT64_MAX:
                    raise InvalidRequest(f"stored_events[{i}].originator_version may be at most {INT64_MAX - 1}")
            if event.originator_id is not originator_id:
                prefix = _originator_key(event.originator_id)
                originator_id = event.originator_id
                prefixes[prefix] = None
            keys.append(prefix + _ID.pack(version + _VERSION_BIAS))
            bodies.append(topic_head + state)
        return keys, bodies, list(prefixes)

    def _insert(self, stored_events: Sequence[StoredEvent], tracking: Tracking | None) -> list[int]:
        keys, bodies, prefixes = self._rows(stored_events)
        wanted = set(keys)
        if len(wanted) != len(keys):
            raise IntegrityError("the batch holds the same (originator_id, originator_version) twice")
        kv = self.store.kv
        scope = self._scope
        try:
            with _TRANSLATED, self.store.transaction():
                if tracking is not None:
                    _record_tracking(kv, scope, tracking)
                if not keys:
                    return []
                # First: lock the sequence (see the module docstring); then the events, each stored only where its
                # key is free: one short of the batch is a duplicate, and the whole insert rolls back.
                last = kv.incr(scope, _SEQUENCE, self._sequence_key, len(keys))
                ids = list(range(last - len(keys) + 1, last + 1))
                id_keys = list(map(_ID.pack, ids))
                # Layout 3 (self._pointers): the notification row holds the event, the event row only its id.
                # keys, bodies and ids are parallel by construction: zip() without strict=, whose keyword
                # parsing costs more instructions than the zip itself.
                if self._pointers:
                    events = list(zip(keys, id_keys))  # noqa: B905
                else:
                    events = list(zip(keys, map(bytes.__add__, id_keys, bodies)))  # noqa: B905
                if not self._with_notifications:
                    if kv.put_many(scope, self._events_ns, events, if_absent=True) != len(events):
                        raise _Duplicate
                    return ids
                self.store.engine.notify(self.channel)  # delivered at the commit, never after a rollback
                # Layout-2 notification rows: marker, key length (one head per length), event key, body.
                heads = {length: _INLINE + _POINTER_HEAD.pack(length) for length in set(map(len, keys))}
                notes = [heads[len(key)] + key + body for key, body in zip(keys, bodies)]  # noqa: B905
                # The event rows and the notification rows in one statement, each stored only where its address
                # is free: one short of them all is a duplicate event (or, were the sequence behind, a taken
                # notification id: the message below tells which), and the whole insert rolls back.
                groups = ((self._events_ns, events), (_NOTIFICATIONS, list(zip(id_keys, notes))))  # noqa: B905
                if kv._put_groups(scope, groups) != 2 * len(events):
                    raise _Duplicate
        except _Duplicate:
            # Rolled back: nothing was written. Which events were there, for the message (read after the
            # rollback: inside, the batch's own new rows would be found too).
            with _TRANSLATED:
                taken = self._existing(keys, prefixes, wanted)
            detail = ""
            if taken:
                originator_id, at = _originator_id(taken[0])
                (version,) = _ID.unpack_from(taken[0], at)
                more = f" (and {len(taken) - 1} more of the batch)" if len(taken) > 1 else ""
                detail = f" ({originator_id}, version {version - _VERSION_BIAS}){more}"
            elif self._with_notifications:
                # No event of the batch is stored: a notification row held one of the ids the sequence gave.
                raise IntegrityError(
                    f"notification ids {ids[0]}..{ids[-1]} are taken already (the store's notification sequence"
                    " is behind its notifications); nothing was written"
                ) from None
            raise IntegrityError(f"stored event{detail} already exists; nothing was written") from None
        return ids

    def _existing(self, keys: list[bytes], prefixes: list[bytes], wanted: set[bytes]) -> list[bytes]:
        """The event keys of ``keys`` (whose originators' key prefixes are ``prefixes``, as a set ``wanted``)
        already stored, in batch order: what an insert that found a duplicate names, read after its rollback.

        One range scan per originator over the batch's versions (index
        bounds on the whole key), not a key list: PostgreSQL's generic plan
        for ``key IN (...)`` on a table without statistics reads the whole
        namespace. Its ``limit`` is the number of
        versions in the range (every key there is the originator's prefix
        and 8 version bytes: a prefix starts no other originator's key), so
        a range of up to a page is read in one statement without the pager.
        """
        if len(prefixes) == 1:
            ranges = [(min(keys), max(keys))]
        else:
            by_originator: dict[bytes, list[bytes]] = {prefix: [] for prefix in prefixes}
            for key in keys:
                by_originator[key[:-8]].append(key)
            ranges = [(min(batch_keys), max(batch_keys)) for batch_keys in by_originator.values()]
        found: set[bytes] = set()
        for low, high in ranges:
            versions = _ID.unpack_from(high, len(high) - 8)[0] - _ID.unpack_from(low, len(low) - 8)[0] + 1
            pairs = self.store.kv.scan(
                self._scope,
                self._events_ns,
                start=low,
                end=high + b"\x00",
                limit=versions if versions <= PAGE_SIZE else None,
            )
            found.update(key for key, _ in pairs if key in wanted)
        return [key for key in keys if key in found] if found else []

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        prefix = _originator_key(originator_id)
        start = prefix
        end = prefix + _AFTER_ALL_VERSIONS
        if gt is not None:
            gt = _int64("gt", gt)
            if gt == INT64_MAX:
                return []
            start = prefix + _version_bytes(gt + 1)
        if lte is not None:
            lte = _int64("lte", lte)
            if lte < INT64_MAX:
                end = prefix + _version_bytes(lte + 1)
        if limit is not None:
            limit = _limit(limit)
        at = len(prefix)  # every key is prefix + version; the originator id is the caller's
        with _TRANSLATED:
            pairs = list(
                self.store.kv.scan(self._scope, self._events_ns, start=start, end=end, reverse=desc, limit=limit)
            )
            # Layout-3 event rows (module docstring) hold a notification id; that row holds topic and state.
            pointer_ids = [value for _, value in pairs if len(value) == _ID.size]
            rows = iter(self._notification_rows(pointer_ids) if pointer_ids else ())
        topic_at = _INLINE_HEAD + at + _ID.size  # past a notification row's event key
        return [
            StoredEvent(
                originator_id,
                _ID.unpack_from(key, at)[0] - _VERSION_BIAS,
                *(
                    _topic_and_state(next(rows), topic_at)
                    if len(value) == _ID.size
                    else _topic_and_state(value, _ID.size)
                ),
            )
            for key, value in pairs
        ]

    def _notification_rows(self, ids: list[bytes]) -> list[bytes]:
        """The notification rows of ``ids`` (distinct), in their order.

        Ids that run consecutively (the events of one insert) are one range
        scan, cheaper than a key lookup; any others one ``get_many``.
        """
        kv = self.store.kv
        low, high = min(ids), max(ids)
        (last,) = _ID.unpack(high)
        if last - _ID.unpack(low)[0] + 1 == len(ids) <= _SELECT_PAGE:
            found = dict(kv.scan(self._scope, _NOTIFICATIONS, start=low, end=_ID.pack(last + 1), limit=len(ids)))
            rows = [found.get(id_bytes) for id_bytes in ids]
        else:
            rows = kv.get_many(self._scope, _NOTIFICATIONS, ids)
        if None in rows:  # pragma: no cover - an event row and its notification row commit together
            missing = ids[rows.index(None)]
            raise OperationalError(f"an event row points at notification {_ID.unpack(missing)[0]}, which is missing")
        return cast(list[bytes], rows)


class DurastateApplicationRecorder(DurastateAggregateRecorder, ApplicationRecorder):
    """Stored events plus the application's notification log (ids 1, 2, 3, ...)."""

    _with_notifications = True

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        return self._insert(stored_events, None)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        wanted_count = _limit(limit)
        if wanted_count == 0:
            return []
        low = 1 if start is None else _int64("start", start) + (0 if inclusive_of_start else 1)
        end = None
        if stop is not None:
            stop = _int64("stop", stop)
            if stop < low:
                return []
            end = _ID.pack(stop + 1)
        wanted = frozenset(topics)
        kv = self.store.kv
        notifications: list[Notification | None] = []
        # Layout-1 rows (module docstring): (position in the page, id, event key).
        pointers: list[tuple[int, int, bytes]] = []
        originators: dict[bytes, UUID | str] = {}
        topic_names: dict[bytes, str] = {}  # a page repeats a few topics: decode each once
        with _TRANSLATED:
            pairs = kv.scan(
                self._scope,
                _NOTIFICATIONS,
                start=_ID.pack(max(low, 0)),
                end=end,
                limit=None if wanted else wanted_count,
            )
            for id_bytes, value in pairs:
                if value[:2] == _INLINE:
                    (key_length,) = _POINTER_HEAD.unpack_from(value, len(_INLINE))
                    key_end = _INLINE_HEAD + key_length
                    (topic_length,) = _TOPIC_LENGTH.unpack_from(value, key_end)
                    topic_start = key_end + _TOPIC_LENGTH.size
                    state_start = topic_start + topic_length
                    raw_topic = value[topic_start:state_start]
                else:
                    (key_length,) = _POINTER_HEAD.unpack_from(value)
                    key_end = _POINTER_HEAD.size + key_length
                    raw_topic = value[key_end:]
                    state_start = 0
                topic = topic_names.get(raw_topic)
                if topic is None:
                    topic = topic_names[raw_topic] = raw_topic.decode("utf-8")
                if wanted and topic not in wanted:
                    continue
                key = value[key_end - key_length : key_end]
                (notification_id,) = _ID.unpack(id_bytes)
                if state_start:
                    originator_id, version = _key_fields(key, originators)
                    notifications.append(
                        Notification(originator_id, version, topic, value[state_start:], notification_id)
                    )
                else:
                    pointers.append((len(notifications), notification_id, key))
                    notifications.append(None)
                if len(notifications) == wanted_count:
                    break
            if pointers:
                rows = kv.get_many(self._scope, self._events_ns, [key for _, _, key in pointers])
                for (position, notification_id, key), row in zip(pointers, rows, strict=True):
                    if row is None:  # pragma: no cover - both rows commit together
                        raise OperationalError(f"notification {notification_id} points at a missing event row")
                    notifications[position] = Notification(*_event_fields(key, row, originators), id=notification_id)
        return cast(list[Notification], notifications)

    def max_notification_id(self) -> int | None:
        with _TRANSLATED:
            last = self.store.kv.counter(self._scope, _SEQUENCE, self._sequence_key)
        return last or None

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> DurastateSubscription:
        return DurastateSubscription(self, gt=gt, topics=topics)


class DurastateSubscription(Subscription[DurastateApplicationRecorder]):
    """Notifications after ``gt``, then new ones as they commit (see the module docstring)."""

    def __init__(self, recorder: DurastateApplicationRecorder, gt: int | None = None, topics: Sequence[str] = ()):
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._buffer: list[Notification] = []
        self._position = 0
        # Registered before the first read: a commit between a read and the wait wakes the wait.
        with _TRANSLATED:
            self._watch = recorder.store.engine.watch(recorder.channel, SUBSCRIPTION_POLL_INTERVAL)

    def stop(self) -> None:
        super().stop()
        self._watch.close()  # a wait in progress returns within SUBSCRIPTION_POLL_INTERVAL

    def __next__(self) -> Notification:
        recorder = self._recorder
        while not self._has_been_stopped:
            if self._position < len(self._buffer):
                notification = self._buffer[self._position]
                self._position += 1
                return notification
            page = recorder.select_notifications(
                start=self._last_notification_id or 0,
                limit=_SELECT_PAGE,
                topics=self._topics,
                inclusive_of_start=False,
            )
            if page:
                self._buffer, self._position = list(page), 0
                self._last_notification_id = page[-1].id
                continue
            # False: nothing was notified (a listening watch): wait on without reading again.
            while not self._has_been_stopped and not self._watch.wait(SUBSCRIPTION_POLL_INTERVAL):
                pass
        self._watch.close()
        raise StopIteration


def _record_tracking(kv: Any, scope: bytes, tracking: Tracking) -> None:
    """Raise the upstream application's tracked position to ``tracking``'s id, or refuse."""
    if not isinstance(tracking, Tracking):
        raise InvalidRequest(f"tracking must be a Tracking, got {type(tracking).__name__}")
    if not isinstance(tracking.application_name, str):
        raise InvalidRequest(f"tracking.application_name must be a str, got {tracking.application_name!r:.80}")
    notification_id = _int64("tracking.notification_id", tracking.notification_id)
    if notification_id < 1:
        raise InvalidRequest(f"tracking.notification_id must be >= 1, got {notification_id}")
    name = tracking.application_name.encode("utf-8")
    current: int = kv.incr(scope, _TRACKING, name, 0)  # locks the row until commit
    if notification_id <= current:
        raise IntegrityError(
            f"tracking {tracking.application_name!r} is at notification {current}; "
            f"{notification_id} was already processed or is out of order"
        )
    kv.incr(scope, _TRACKING, name, notification_id - current)


class DurastateTrackingRecorder(_DurastateRecorder, TrackingRecorder):
    """The highest processed notification id of each upstream application."""

    def insert_tracking(self, tracking: Tracking) -> None:
        with _TRANSLATED, self.store.transaction():
            _record_tracking(self.store.kv, self._scope, tracking)

    def max_tracking_id(self, application_name: str) -> int | None:
        if not isinstance(application_name, str):
            raise InvalidRequest(f"application_name must be a str, got {type(application_name).__name__}")
        with _TRANSLATED:
            position = self.store.kv.counter(self._scope, _TRACKING, application_name.encode("utf-8"))
        return position or None


class DurastateProcessRecorder(DurastateTrackingRecorder, DurastateApplicationRecorder, ProcessRecorder):
    """An application recorder whose inserts can carry a tracking record (one commit)."""

    def __init__(self, store: durastate.Store, *, application: str = "", purpose: str = "events") -> None:
        DurastateApplicationRecorder.__init__(self, store, application=application, purpose=purpose)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        return self._insert(stored_events, kwargs.get("tracking"))


class Factory(InfrastructureFactory[DurastateTrackingRecorder]):
    """``PERSISTENCE_MODULE=durastate.integrations.eventsourcing``: one store per factory."""

    DURASTATE_URL = "DURASTATE_URL"
    DURASTATE_PREFIX = "DURASTATE_PREFIX"
    CREATE_TABLE = "CREATE_TABLE"

    aggregate_recorder_class = DurastateAggregateRecorder
    application_recorder_class = DurastateApplicationRecorder
    tracking_recorder_class = DurastateTrackingRecorder
    process_recorder_class = DurastateProcessRecorder

    def __init__(self, env: Environment | EnvType | None):
        super().__init__(env)
        url = self.env.get(self.DURASTATE_URL)
        if not url:
            raise InvalidRequest(
                "no durastate URL in the application's environment: set one of "
                f"{', '.join(self.env.create_keys(self.DURASTATE_URL))} (a path, sqlite:///..., memory: or postgresql://...)"
            )
        prefix = self.env.get(self.DURASTATE_PREFIX) or "ds_"
        self.store = durastate.open(url, prefix=prefix)

    def _recorder_class(self, topic_key: str, default: type[Any], given: type[Any] | None = None) -> type[Any]:
        cls = given
        if cls is None:
            topic = self.env.get(topic_key)
            cls = resolve_topic(topic) if topic else default
        if not isinstance(cls, type) or not issubclass(cls, default):
            raise InvalidRequest(f"{topic_key}: {cls!r} is not a subclass of {default.__qualname__}")
        return cls

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return self.aggregate_recorder_class(self.store, application=self.env.name, purpose=purpose)

    def application_recorder(self) -> ApplicationRecorder:
        cls = self._recorder_class(self.APPLICATION_RECORDER_TOPIC, self.application_recorder_class)
        return cast(ApplicationRecorder, cls(self.store, application=self.env.name))

    def tracking_recorder(
        self, tracking_recorder_class: type[DurastateTrackingRecorder] | None = None
    ) -> DurastateTrackingRecorder:
        cls = self._recorder_class(self.TRACKING_RECORDER_TOPIC, self.tracking_recorder_class, tracking_recorder_class)
        return cast(DurastateTrackingRecorder, cls(self.store, application=self.env.name))

    def process_recorder(self) -> ProcessRecorder:
        cls = self._recorder_class(self.PROCESS_RECORDER_TOPIC, self.process_recorder_class)
        return cast(ProcessRecorder, cls(self.store, application=self.env.name))

    def close(self) -> None:
        self.store.close()
