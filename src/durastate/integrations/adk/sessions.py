"""ADK sessions on durastate: ``DurastateSessionService`` (a ``BaseSessionService``).

Storage, and why there:

* A session is a **document** (the documents facet) at
  ``adk/s/<app>/<user>/<session id>``: its session-scoped state, creation
  and update times, its event count, the id of its newest event and a random
  ``uid`` naming its event log. The document's *revision* is the session's
  storage revision: every ``append_event`` writes the document with
  ``expect=<the revision the caller's session object was read at>``, a
  compare-and-swap in one statement. That statement *is* the staleness
  check: a caller whose session object is older than the stored session is
  refused by it (``StaleSessionError``) and nothing of the append is
  written. ADK's own SQL services read ``update_time`` and write in a
  separate statement (two writers can both pass the read), and compare float
  timestamps (an event with an older timestamp hides a newer write).
* App state (``app:`` keys) and user state (``user:`` keys) are documents
  at ``adk/a/<app>`` and ``adk/u/<app>/<user>``, merged key by key
  (``dict.update``) by the append that carries a delta for them, in the same
  transaction, after the session's compare-and-swap (which, on PostgreSQL,
  holds the documents facet's lock: two merges of one app state never
  interleave). ``temp:`` keys are applied to the caller's session object
  and never stored, as ADK's services do.
* Events are **kv** values (scope ``b"adk"``, namespace = the session's
  ``uid``, key = the event's ordinal as 8 big-endian bytes, value = the
  event as ADK's JSON). Ordinals come from the session document's count,
  which only the compare-and-swap winner can advance, so the log is dense
  and in commit order. A reverse key scan reads the newest N events off the
  primary-key index (``GetSessionConfig.num_recent_events``), which the
  events facet (forward pages of a claim/lease log with global event ids)
  would not; records (pi-durable's model) fits nothing here. A new ``uid``
  per created session means a deleted and re-created id never sees the
  old log.

One append is one transaction (``store.transaction()``): the compare-and-
swap of the session document, the event, the app and user merges. So a
reader (``get_session`` reads in one read transaction: a snapshot) sees an
event together with the state delta it carried, or neither.

Which session object is stale. Sessions this service returns carry their
revision in ADK's private ``Session._storage_update_marker`` (``ds:<uid>:
<revision>``, as ``DatabaseSessionService`` keeps its own marker there), and
each successful append moves it on. A session object without a marker of
ours (built by hand, or from another service) falls back to
``SqliteSessionService``'s rule, stale when the stored ``last_update_time``
is later than the object's; the compare-and-swap then runs against the
revision just read, so even that check is one atomic step.

Where it follows ADK's services (``InMemorySessionService`` and
``SqliteSessionService``; a differential test checks every call's result
against both, and ``DatabaseSessionService``'s):

* ``create_session``: a ``session_id`` is stripped, an empty or missing one
  is replaced by ``platform.uuid.new_uuid()``; a taken id raises ADK's
  ``AlreadyExistsError`` (here ``SessionExists``, also a
  ``durastate.Conflict``) and changes nothing, app and user state included.
  ``last_update_time`` is ``platform.time.get_time()``.
* ``get_session``: ``None`` when absent; events in append order; with
  ``GetSessionConfig``, ``num_recent_events=0`` gives no events, ``n`` the
  newest ``n``, and ``after_timestamp=t`` the newest events back to (not
  including) the newest one older than ``t`` (``InMemorySessionService``'s
  rule; for timestamps that grow with the log, as ADK's runner makes them,
  it is SQL's ``timestamp >= t``). State is session state with ``app:`` and
  ``user:`` keys merged in.
* ``list_sessions``: without events, state merged, ordered by
  ``(last_update_time, user_id, id)``.
* ``delete_session``: removes the session and its events; absent is fine.
  App and user state stay.
* ``append_event``: a ``partial`` event is returned untouched, unstored. An
  append to a session that is not stored raises ADK's
  ``SessionNotFoundError`` (``SessionNotFound``, also ``durastate.NotFound``).
  An equal re-delivery of the session's newest event (same id, equal
  fields: a retried call) is a no-op, as in ``InMemorySessionService``.
  Success sets ``session.last_update_time`` to the event's timestamp and
  appends the event to ``session.events``.
* ``get_user_state``: the user's state without the prefix (``{}`` if none).

  ``temp:`` keys of the event's state delta are set on the session object
  and removed from the event before the store is asked (so also when the
  append is then refused as stale), as ADK's base class does.

Where it differs, on purpose: a value with no JSON form (ADK's SQL services
store its ``str()``), NaN, infinities and integers beyond 64 bits are
refused with ``durastate.InvalidRequest`` before anything happens: the
event is not stored, and the event and session objects are left as they
were; so are arguments of the wrong type
(``InvalidRequest``: ADK raises ``AttributeError``/``TypeError`` or stores
them). Events keep append order even when their timestamps do not grow
(``SqliteSessionService`` sorts by timestamp). Two different events with one
id in one session are both kept (ADK's SQL services raise the driver's
``IntegrityError``).

Async, as ADK calls it: every method is a coroutine running the synchronous
implementation through the service's ``AsyncCalls``
(``durastate.integrations._common``): inline on the event loop's thread on
a SQLite file (handed to a worker only while another connection holds the
write lock), on worker threads on PostgreSQL. Each is one read transaction
or one write transaction with nothing changed before it. ``close()`` /
``await aclose()`` end the service (and its store, if it opened it).
"""

from __future__ import annotations

import copy
import secrets
import threading
from collections import OrderedDict
from typing import Any

from google.adk.events.event import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from ... import store as _store
from ..._validate import fail, fail_type
from ...documents import Document
from ...errors import Conflict
from .._common import StoreHolder
from ._common import PREFIX, SessionExists, SessionNotFound, StaleSession, dump_model, json_safe, name, segment

__all__ = ["DurastateSessionService", "SCOPE"]

SCOPE = b"adk"  # kv scope of the event logs
MARKER = "ds:"  # our revision markers in Session._storage_update_marker
APP = State.APP_PREFIX
USER = State.USER_PREFIX
TEMP = State.TEMP_PREFIX


def _ordinal(n: int) -> bytes:
    return n.to_bytes(8, "big")  # big-endian: keys sort in ordinal order


def _split(delta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(session, app, user) parts of a state delta, prefixes removed; ``temp:`` keys dropped."""
    session: dict[str, Any] = {}
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(APP):
            app[key[len(APP) :]] = value
        elif key.startswith(USER):
            user[key[len(USER) :]] = value
        elif not key.startswith(TEMP):
            session[key] = value
    return session, app, user


def _merged(session_state: dict[str, Any], app: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    merged = dict(session_state)
    for key, value in app.items():
        merged[APP + key] = value
    for key, value in user.items():
        merged[USER + key] = value
    return merged


class _Decoded:
    """Events this service decoded, by (log, ordinal): at most ``size``, least recently used out first.

    Sound because a stored event never changes: an ordinal is written once
    per log and a log's ``uid`` is never reused, so the bytes under a key
    decode to the same event for as long as they exist (and a log that is
    gone is never read again). ``get_session`` hands out deep copies
    (``copy.deepcopy`` of ADK's events costs about 40 % of decoding their
    JSON), so a caller's changes never reach the cache or another caller.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._events: OrderedDict[tuple[bytes, bytes], Event] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ns: bytes, key: bytes, blob: bytes) -> Event:
        """The event stored as ``blob`` under ``key`` of log ``ns`` (shared: do not change it)."""
        address = (ns, key)
        with self._lock:
            event = self._events.get(address)
            if event is not None:
                self._events.move_to_end(address)
                return event
        event = Event.model_validate_json(blob)
        if self.size:
            with self._lock:
                self._events[address] = event
                if len(self._events) > self.size:
                    self._events.popitem(last=False)
        return event

    def copy_of(self, ns: bytes, key: bytes, blob: bytes) -> Event:
        """A private copy of that event."""
        return copy.deepcopy(self.get(ns, key, blob))


class DurastateSessionService(StoreHolder, BaseSessionService):
    """ADK's ``BaseSessionService`` on a durastate store (see the module docstring).

    ``DurastateSessionService(url=...)`` opens (and on ``close()`` closes) its
    own store; ``store=`` borrows one you opened (one set of connections for
    everything on it; ``close()`` leaves it open). With neither, durastate's
    default store ``./.durastate/state.db``. ``decoded_events``: how many
    decoded events the service keeps to copy instead of decoding again (0:
    none; see ``_Decoded``). Task-, thread- and
    process-safe: any number of services in any number of processes may
    share one SQLite file or PostgreSQL database.
    """

    def __init__(
        self, *, url: str | None = None, store: _store.Store | None = None, decoded_events: int = 10_000
    ) -> None:
        if isinstance(decoded_events, bool) or not isinstance(decoded_events, int) or decoded_events < 0:
            fail(f"decoded_events must be an int >= 0, got {decoded_events!r}")
        super().__init__(url, store, name="durastate-adk-sessions")
        self._decoded = _Decoded(decoded_events)

    # -- ADK's BaseSessionService ------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session (``AlreadyExistsError`` if ``session_id`` is taken; nothing changes then)."""
        # ADK's clock and id source are context variables: read them here, in
        # the caller's context, not on a worker thread.
        needs_id = not (isinstance(session_id, str) and session_id.strip())
        made_id = platform_uuid.new_uuid() if needs_id else None
        now = platform_time.get_time()
        return await self._aio.call(self._create, app_name, user_id, state, session_id, made_id, now)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (filtered by ``config``) and merged state; ``None`` if absent."""
        return await self._aio.read(self._get, app_name, user_id, session_id, config)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """The app's sessions (one user's, if given), without events, oldest update first."""
        return await self._aio.read(self._list, app_name, user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Remove the session and its events (nothing happens if it is absent)."""
        await self._aio.call(self._delete, app_name, user_id, session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user-scoped state, keys without the ``user:`` prefix (``{}`` when there is none)."""
        return await self._aio.read(self._user_state, app_name, user_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` in ``session`` (``StaleSessionError`` if ``session`` is older than the stored one)."""
        return await self._aio.call(self._append, session, event)

    # -- lifecycle -------------------------------------------------------------------
    # close() / aclose() (and async with) come from StoreHolder: they end the
    # service's AsyncCalls, after which every call raises StoreClosed.

    def __repr__(self) -> str:
        return f"<DurastateSessionService on {self.store.url}{' (closed)' if self._aio.runner.closed else ''}>"

    # -- addresses -----------------------------------------------------------------------

    @staticmethod
    def _key(app: str, user: str, session_id: str) -> str:
        return f"{PREFIX}s/{segment(app)}/{segment(user)}/{segment(session_id)}"

    @staticmethod
    def _app_key(app: str) -> str:
        return f"{PREFIX}a/{segment(app)}"

    @staticmethod
    def _user_key(app: str, user: str) -> str:
        return f"{PREFIX}u/{segment(app)}/{segment(user)}"

    def _read_scoped(self, key: str) -> dict[str, Any]:
        found = self.store.documents.read(key)
        return {} if found is None else found.data

    def _merge_into(self, key: str, delta: dict[str, Any]) -> None:
        """``dict.update`` of the state document at ``key`` (inside the caller's transaction)."""
        if delta:
            state = self._read_scoped(key)
            state.update(delta)
            self.store.documents.write(key, state)

    # -- the synchronous implementation ------------------------------------------------

    def _create(
        self, app_name: Any, user_id: Any, state: Any, session_id: Any, made_id: str | None, now: float
    ) -> Session:
        app = name("app_name", app_name)
        user = name("user_id", user_id)
        if state is not None and not isinstance(state, dict):
            fail_type("state", "a dict or None", state)
        if session_id is not None:
            session_id = name("session_id", session_id).strip()
        sid = session_id or made_id
        if not sid:
            fail("session_id is empty and no id was made for it")
        session_state, app_delta, user_delta = _split(json_safe("state", state or {}))
        uid = secrets.token_hex(12)
        doc = {"app": app, "user": user, "id": sid, "uid": uid, "state": session_state, "created": now, "updated": now}
        documents = self.store.documents
        with self.store.transaction():
            try:
                revision = documents.write(self._key(app, user, sid), doc, expect=0)
            except Conflict:
                raise SessionExists(f"Session with id {sid} already exists.") from None
            self._merge_into(self._app_key(app), app_delta)
            self._merge_into(self._user_key(app, user), user_delta)
            merged = _merged(
                session_state, self._read_scoped(self._app_key(app)), self._read_scoped(self._user_key(app, user))
            )
        return self._session(doc, revision, merged, [])

    def _session(self, doc: dict[str, Any], revision: int, state: dict[str, Any], events: list[Event]) -> Session:
        session = Session(
            id=doc["id"], app_name=doc["app"], user_id=doc["user"], state=state, events=events,
            last_update_time=doc["updated"],
        )  # fmt: skip
        session._storage_update_marker = f"{MARKER}{doc['uid']}:{revision}"
        return session

    def _get(self, app_name: Any, user_id: Any, session_id: Any, config: Any) -> Session | None:
        app = name("app_name", app_name)
        user = name("user_id", user_id)
        sid = name("session_id", session_id).strip()
        if config is not None and not isinstance(config, GetSessionConfig):
            fail_type("config", "a GetSessionConfig or None", config)
        documents = self.store.documents
        with self.store.engine.read_transaction():
            found = documents.read(self._key(app, user, sid))
            if found is None:
                return None
            doc = found.data
            events = self._events(doc, config)
            merged = _merged(
                doc["state"], self._read_scoped(self._app_key(app)), self._read_scoped(self._user_key(app, user))
            )
        return self._session(doc, found.revision, merged, events)

    def _events(self, doc: dict[str, Any], config: GetSessionConfig | None) -> list[Event]:
        """The session's events as ``config`` filters them, oldest first (inside a read transaction)."""
        ns = doc["uid"].encode()
        newest = None if config is None else config.num_recent_events
        after = None if config is None else config.after_timestamp
        if newest == 0:
            return []
        decoded = self._decoded
        if newest is None and after is None:
            return [decoded.copy_of(ns, key, blob) for key, blob in self.store.kv.scan(SCOPE, ns)]
        # Newest first, back to the limit or to the first event older than `after`.
        events: list[Event] = []
        for key, blob in self.store.kv.scan(SCOPE, ns, reverse=True, limit=newest):
            event = decoded.get(ns, key, blob)
            if after is not None and event.timestamp < after:
                break
            events.append(copy.deepcopy(event))
        events.reverse()
        return events

    def _list(self, app_name: Any, user_id: Any) -> ListSessionsResponse:
        app = name("app_name", app_name)
        user = None if user_id is None else name("user_id", user_id)
        prefix = f"{PREFIX}s/{segment(app)}/" + ("" if user is None else f"{segment(user)}/")
        documents = self.store.documents
        found: list[tuple[dict[str, Any], int]] = []
        with self.store.engine.read_transaction():
            for key in list(documents.iter_keys(prefix)):
                document = documents.read(key)
                if document is not None:
                    found.append((document.data, document.revision))
            app_state = self._read_scoped(self._app_key(app))
            users = {doc["user"] for doc, _ in found}
            user_states = {u: self._read_scoped(self._user_key(app, u)) for u in users}
        sessions = [
            self._session(doc, rev, _merged(doc["state"], app_state, user_states[doc["user"]]), [])
            for doc, rev in found
        ]
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    def _delete(self, app_name: Any, user_id: Any, session_id: Any) -> None:
        key = self._key(name("app_name", app_name), name("user_id", user_id), name("session_id", session_id).strip())
        with self.store.transaction():
            found = self.store.documents.read(key)
            if found is None:
                return
            self.store.documents.delete(key)
            self.store.kv.delete(SCOPE, found.data["uid"].encode(), all=True)

    def _user_state(self, app_name: Any, user_id: Any) -> dict[str, Any]:
        return self._read_scoped(self._user_key(name("app_name", app_name), name("user_id", user_id)))

    def _append(self, session: Any, event: Any) -> Event:
        if not isinstance(session, Session):
            fail_type("session", "a google.adk.sessions.Session", session)
        if not isinstance(event, Event):
            fail_type("event", "a google.adk.events.Event", event)
        if event.partial:
            return event
        key = self._key(name("session.app_name", session.app_name), name("session.user_id", session.user_id),
                        name("session.id", session.id))  # fmt: skip
        # The event as stored: without its temp: keys (ADK trims them in place;
        # put back if the event is refused, so a refused call changes nothing).
        full_delta = event.actions.state_delta if event.actions else None
        persisted = {k: v for k, v in full_delta.items() if not k.startswith(TEMP)} if full_delta else full_delta
        if persisted is not None and full_delta is not None and len(persisted) != len(full_delta):
            event.actions.state_delta = persisted
        try:
            blob = dump_model("event", event)
            session_delta, app_delta, user_delta = _split(json_safe("event.actions.state_delta", persisted or {}))
        except BaseException:
            if full_delta is not None:
                event.actions.state_delta = full_delta
            raise
        # temp: keys reach the caller's session object before the store is
        # asked, stale or not, as in ADK's base class and SQL services.
        if full_delta:
            for k, v in full_delta.items():
                if k.startswith(TEMP):
                    session.state[k] = v
        outcome = self._store_event(session, event, key, blob, session_delta, app_delta, user_delta)
        if outcome is None:  # an equal re-delivery of the newest event
            return event
        session.last_update_time = event.timestamp
        session._storage_update_marker = outcome
        return self._commit_event_to_session(session, event)

    def _store_event(
        self,
        session: Session,
        event: Event,
        key: str,
        blob: bytes,
        session_delta: dict[str, Any],
        app_delta: dict[str, Any],
        user_delta: dict[str, Any],
    ) -> str | None:
        """One transaction: the session's compare-and-swap, the event, the merges; the new marker.

        ``None``: ``event`` equals the stored newest event (nothing written).
        """
        documents = self.store.documents
        with self.store.transaction():
            found = documents.read(key)
            if found is None:
                raise SessionNotFound(f"Session {session.id} not found.")
            doc = found.data
            count = doc.get("n", 0)
            if count and doc.get("last") == event.id and self._newest_equals(doc, count, event):
                return None
            expect = self._expected_revision(session, found)
            doc["state"].update(session_delta)
            doc["updated"] = event.timestamp
            doc["n"] = count + 1
            doc["last"] = event.id
            try:
                revision = documents.write(key, doc, expect=expect)  # the staleness check, one statement
            except Conflict:
                raise StaleSession(self._stale_message()) from None
            self.store.kv.put(SCOPE, doc["uid"].encode(), _ordinal(count + 1), blob)
            self._merge_into(self._app_key(session.app_name), app_delta)
            self._merge_into(self._user_key(session.app_name, session.user_id), user_delta)
        return f"{MARKER}{doc['uid']}:{revision}"

    def _newest_equals(self, doc: dict[str, Any], count: int, event: Event) -> bool:
        ns, key = doc["uid"].encode(), _ordinal(count)
        stored = self.store.kv.get(SCOPE, ns, key)
        return stored is not None and self._decoded.get(ns, key, stored) == event

    @staticmethod
    def _stale_message() -> str:
        return (
            "The session has been modified in storage since it was loaded. "
            "Please reload the session before appending more events."
        )

    def _expected_revision(self, session: Session, found: Document) -> int:
        """The revision the caller's session object was read at (see "Which session object is stale")."""
        marker = session._storage_update_marker
        if isinstance(marker, str) and marker.startswith(MARKER):
            uid, _, revision = marker[len(MARKER) :].rpartition(":")
            if uid != found.data["uid"] or not revision.isdigit():
                # Another life of this session id (deleted and created again).
                raise StaleSession(self._stale_message())
            return int(revision)
        if found.data["updated"] > session.last_update_time:
            raise StaleSession(self._stale_message())
        return found.revision
