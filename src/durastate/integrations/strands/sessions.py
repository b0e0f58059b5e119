"""Strands Agents sessions on durastate: ``DurastateSessionRepository`` and ``DurastateSessionManager``.

``DurastateSessionRepository`` implements Strands' ``SessionRepository``
(``strands-agents`` 1.62): sessions, agents, messages and multi-agent state,
with the results of the framework's ``FileSessionManager`` (its repository
half) for every sequence of calls (a differential test checks that).
``DurastateSessionManager`` is ``FileSessionManager``'s counterpart: a
``RepositorySessionManager`` on that repository, what an ``Agent`` takes::

    from strands import Agent
    from durastate.integrations.strands import DurastateSessionManager

    agent = Agent(session_manager=DurastateSessionManager("user-42", url="sqlite:agents.db"))

The repository is synchronous, as Strands calls it (from its agent hooks).

Storage: the kv facet, scope ``b"strands"``, one namespace per session (the
session id, UTF-8), keys by record kind:

* ``b"s"``: the session (``Session.to_dict()`` as compact JSON);
* ``b"a" + <agent id>``: an agent (``SessionAgent.to_dict()``);
* ``b"m" + <agent id length, 2 bytes> + <agent id> + <message id, 8 bytes>``:
  a message (``SessionMessage.to_dict()``); the id is stored offset by 2**63
  big-endian so keys sort as the integers do, and an agent's messages are
  one key range, read in order off the primary key;
* ``b"x" + <multi-agent id>``: a multi-agent state (``serialize_state()``).

kv rather than documents: every record is read and replaced whole, messages
want ordered range reads with limit and offset (a key scan), and a session is
deleted with one statement (its namespace); the two read-then-write updates
(``update_agent``, ``update_message`` keep the stored ``created_at``) are one
transaction each, so no revision is needed to keep them atomic.

Where it follows ``FileSessionManager`` exactly: ``create_session`` of an id
that already holds anything (the file manager's session directory exists
once any record was written under it) raises ``SessionExists`` (a
``SessionException``); ``read_*`` of a missing record returns ``None``;
``update_agent`` / ``update_message`` / ``update_multi_agent`` of a missing
record raise ``SessionRecordNotFound`` (a ``SessionException``) and copy the
stored ``created_at`` into the object passed in; ``create_*`` of an existing
agent, message or multi-agent state replaces it; ``list_messages`` returns
messages in message-id order, ``[offset:offset + limit]``, and raises
``SessionRecordNotFound`` when the agent was never created and has no
messages (the file manager's missing ``messages`` directory);
``delete_session`` of a missing session raises ``SessionRecordNotFound``.
Session and agent ids go through Strands' own identifier check (no path
separators: ``ValueError``, here ``durastate.InvalidRequest``, also a
``ValueError``), as every shipped backend applies it.

Stricter (``durastate.InvalidRequest``, nothing written): ids that are not
``str`` or too long for ``max_key_size``; a ``message_id`` that is not an
``int``; a negative ``limit`` or ``offset``; a record whose ``to_dict()`` is
not JSON (NaN, integers past 64 bits; the file manager writes NaN as
Python's non-standard token).

Several processes: each call is one statement or one transaction, so a
reader never sees half a record, and a deleted session leaves nothing
behind (the file manager's ``rmtree`` can race a writer recreating files).
``create_session`` takes a lock on the id first: of several creators of one
id exactly one succeeds. Strands calls the repository synchronously, from its
event loop's thread: on SQLite, a call that finds another connection writing
waits for it on a worker thread of the repository (durastate refuses to wait
on a loop's own thread), as a call from plain sync code waits.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from strands import _identifier
from strands.session.repository_session_manager import RepositorySessionManager
from strands.session.session_repository import SessionRepository
from strands.types.session import Session, SessionAgent, SessionMessage

from ... import store as _store
from ..._json import dump_json
from ..._validate import fail, fail_type
from ...engines.loop import inline_site, running_loop
from ...engines.sqlite import LockBusy
from ...errors import InvalidRequest, StoreClosed
from .._common import StoreHolder
from ._errors import SessionExists, SessionRecordNotFound

if TYPE_CHECKING:
    from strands.multiagent.base import MultiAgentBase

__all__ = ["SCOPE", "DurastateSessionManager", "DurastateSessionRepository"]

SCOPE = b"strands"
SESSION_KEY = b"s"
AGENT_PREFIX = b"a"
MESSAGE_PREFIX = b"m"
MULTI_AGENT_PREFIX = b"x"
_ID_OFFSET = 2**63  # message ids are Python ints; stored offset so negative ones sort first
_ID_MIN, _ID_MAX = -(2**63), 2**63 - 1


T = TypeVar("T")


def _under_another(frame: FrameType) -> bool:
    """Whether a frame of ``frame``'s code (a ``_waits`` wrapper's: one code for them all) is up its stack."""
    code, up = frame.f_code, frame.f_back
    while up is not None:
        if up.f_code is code:
            return True
        up = up.f_back
    return False


def _waits(method: Callable[..., T]) -> Callable[..., T]:
    """Run ``method`` here; if SQLite refused it because another connection holds the write lock and this
    thread runs an event loop, run it again on the repository's worker thread and wait for it there.

    A sync call on an event loop's thread waits for a lock only briefly (``engines.loop``); Strands
    calls its repository synchronously from its loop, as ``FileSessionManager`` blocks it with file
    I/O, so waiting (on a worker, up to the store's busy timeout) is the contract. ``wrapper`` is an
    inline site (``engines.loop.inline_site``), so a held lock refuses the call at once, nothing
    changed. Every method below is one statement or one transaction, refused before it changed
    anything, so running it again is safe; a wrapped method called by another goes to the worker
    with its caller, whole.
    """

    @functools.wraps(method)
    def wrapper(self: DurastateSessionRepository, /, *args: Any, **kwargs: Any) -> T:
        try:
            return method(self, *args, **kwargs)
        except LockBusy:
            if running_loop() is None or _under_another(sys._getframe()):
                raise  # off a loop it waited already; under another wrapped call, that one moves
        return self._worker().submit(method, self, *args, **kwargs).result()

    inline_site(wrapper)
    return wrapper


class DurastateSessionRepository(StoreHolder, SessionRepository):
    """Strands ``SessionRepository`` on a durastate store (see the module docstring).

    ``url`` opens (and ``close()`` closes) a store; ``store=`` borrows one
    (left open); neither opens the default store.
    """

    def __init__(self, url: str | None = None, *, store: _store.Store | None = None) -> None:
        super().__init__(url, store, name="durastate-strands")
        self._closed = False
        self._waiter: ThreadPoolExecutor | None = None

    def _worker(self) -> ThreadPoolExecutor:
        if self._waiter is None:
            self._waiter = ThreadPoolExecutor(1, thread_name_prefix="durastate-strands-wait")
        return self._waiter

    def close(self) -> None:
        """Refuse further calls; close the store if this repository opened it. Idempotent."""
        self._closed = True
        if self._waiter is not None:
            self._waiter.shutdown(wait=True)
        super().close()

    def __repr__(self) -> str:
        return f"<DurastateSessionRepository on {self.store.url}{' (closed)' if self._closed else ''}>"

    # -- addresses ---------------------------------------------------------------

    def _session(self, session_id: Any) -> bytes:
        if self._closed:
            raise StoreClosed("DurastateSessionRepository is closed")
        return self._id("session_id", session_id, _identifier.Identifier.SESSION)

    def _id(self, name: str, value: Any, kind: _identifier.Identifier | None) -> bytes:
        if not isinstance(value, str):
            fail_type(name, "a str", value)
        if kind is not None:
            try:
                _identifier.validate(value, kind)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"{name} must be valid unicode (no lone surrogates), got {value!r}")

    def _fits(self, ns: bytes, key: bytes) -> bytes:
        room = self.store.kv.max_key_size - len(SCOPE)
        if len(ns) + len(key) > room:
            fail(f"session and record ids are {len(ns) + len(key)} bytes together; this store allows {room}")
        return key

    def _agent_key(self, ns: bytes, agent_id: Any) -> bytes:
        return self._fits(ns, AGENT_PREFIX + self._id("agent_id", agent_id, _identifier.Identifier.AGENT))

    def _messages_prefix(self, ns: bytes, agent_id: Any) -> bytes:
        agent = self._id("agent_id", agent_id, _identifier.Identifier.AGENT)
        if len(agent) > 0xFFFF:
            fail(f"agent_id is {len(agent)} bytes as UTF-8; the limit is 65535")
        return self._fits(ns, MESSAGE_PREFIX + len(agent).to_bytes(2, "big") + agent + bytes(8))[:-8]

    def _message_key(self, prefix: bytes, message_id: Any) -> bytes:
        if type(message_id) is not int:
            fail_type("message_id", "an int", message_id)
        if not _ID_MIN <= message_id <= _ID_MAX:
            fail(f"message_id must fit in signed 64 bits, got {message_id}")
        return prefix + (message_id + _ID_OFFSET).to_bytes(8, "big")

    def _multi_agent_key(self, ns: bytes, multi_agent_id: Any) -> bytes:
        return self._fits(
            ns, MULTI_AGENT_PREFIX + self._id("multi_agent_id", multi_agent_id, _identifier.Identifier.AGENT)
        )

    def _json(self, name: str, value: dict[str, Any]) -> bytes:
        return dump_json(name, value, self.store.kv.max_value_size)

    # -- sessions ------------------------------------------------------------------

    @_waits
    def create_session(self, session: Session, **kwargs: Any) -> Session:
        """Store a new session; ``SessionExists`` if anything is stored under its id already."""
        if not isinstance(session, Session):
            fail_type("session", "a strands Session", session)
        ns = self._session(session.session_id)
        data = self._json("session", session.to_dict())
        kv = self.store.kv
        with self.store.transaction():
            # Creators of one id one at a time; the check below then sees the previous one's commit.
            self.store.engine.lock(f"durastate-strands-session:{ns.hex()}")
            if next(iter(kv.scan(SCOPE, ns, limit=1)), None) is not None:
                raise SessionExists(f"Session {session.session_id} already exists")
            kv.put(SCOPE, ns, SESSION_KEY, data)
        return session

    @_waits
    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        """The session, or ``None``."""
        data = self.store.kv.get(SCOPE, self._session(session_id), SESSION_KEY)
        return None if data is None else Session.from_dict(orjson.loads(data))

    @_waits
    def delete_session(self, session_id: str, **kwargs: Any) -> None:
        """Remove the session and everything under it; ``SessionRecordNotFound`` if nothing is stored under it."""
        if self.store.kv.delete(SCOPE, self._session(session_id), all=True) == 0:
            raise SessionRecordNotFound(f"Session {session_id} does not exist")

    # -- agents ----------------------------------------------------------------------

    @_waits
    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Store the agent (replacing one with its id)."""
        if not isinstance(session_agent, SessionAgent):
            fail_type("session_agent", "a strands SessionAgent", session_agent)
        ns = self._session(session_id)
        key = self._agent_key(ns, session_agent.agent_id)
        self.store.kv.put(SCOPE, ns, key, self._json("session_agent", session_agent.to_dict()))

    @_waits
    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        """The agent, or ``None``."""
        ns = self._session(session_id)
        data = self.store.kv.get(SCOPE, ns, self._agent_key(ns, agent_id))
        return None if data is None else SessionAgent.from_dict(orjson.loads(data))

    @_waits
    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Replace a stored agent, keeping its ``created_at`` (also set on ``session_agent``)."""
        if not isinstance(session_agent, SessionAgent):
            fail_type("session_agent", "a strands SessionAgent", session_agent)
        ns = self._session(session_id)
        key = self._agent_key(ns, session_agent.agent_id)
        kv = self.store.kv
        with self.store.transaction():
            previous = kv.get(SCOPE, ns, key)
            if previous is None:
                raise SessionRecordNotFound(f"Agent {session_agent.agent_id} in session {session_id} does not exist")
            created_at = orjson.loads(previous)["created_at"]
            data = self._json("session_agent", {**session_agent.to_dict(), "created_at": created_at})
            kv.put(SCOPE, ns, key, data)
        session_agent.created_at = created_at

    # -- messages ----------------------------------------------------------------------

    @_waits
    def create_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        """Store the message under its ``message_id`` (replacing one with that id)."""
        if not isinstance(session_message, SessionMessage):
            fail_type("session_message", "a strands SessionMessage", session_message)
        ns = self._session(session_id)
        key = self._message_key(self._messages_prefix(ns, agent_id), session_message.message_id)
        self.store.kv.put(SCOPE, ns, key, self._json("session_message", session_message.to_dict()))

    @_waits
    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> SessionMessage | None:
        """The message, or ``None``."""
        ns = self._session(session_id)
        data = self.store.kv.get(SCOPE, ns, self._message_key(self._messages_prefix(ns, agent_id), message_id))
        return None if data is None else SessionMessage.from_dict(orjson.loads(data))

    @_waits
    def update_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        """Replace a stored message, keeping its ``created_at`` (also set on ``session_message``)."""
        if not isinstance(session_message, SessionMessage):
            fail_type("session_message", "a strands SessionMessage", session_message)
        ns = self._session(session_id)
        key = self._message_key(self._messages_prefix(ns, agent_id), session_message.message_id)
        kv = self.store.kv
        with self.store.transaction():
            previous = kv.get(SCOPE, ns, key)
            if previous is None:
                raise SessionRecordNotFound(f"Message {session_message.message_id} does not exist")
            created_at = orjson.loads(previous)["created_at"]
            kv.put(
                SCOPE, ns, key, self._json("session_message", {**session_message.to_dict(), "created_at": created_at})
            )
        session_message.created_at = created_at

    @_waits
    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kwargs: Any
    ) -> list[SessionMessage]:
        """The agent's messages by id, ``[offset:offset + limit]``; ``SessionRecordNotFound`` for an unknown agent."""
        ns = self._session(session_id)
        prefix = self._messages_prefix(ns, agent_id)
        if limit is not None and (type(limit) is not int or limit < 0):
            fail(f"limit must be a non-negative int or None, got {limit!r}")
        if type(offset) is not int or offset < 0:
            fail(f"offset must be a non-negative int, got {offset!r}")
        kv = self.store.kv
        wanted = None if limit is None else offset + limit
        end = prefix + b"\xff" * 9  # message keys are the prefix and 8 bytes
        with self.store.engine.read_transaction():  # the messages and the agent check from one snapshot
            rows = [] if wanted == 0 else list(kv.scan(SCOPE, ns, start=prefix, end=end, limit=wanted))
            if not rows:
                # The file manager's messages directory exists once the agent or a message was written.
                any_message = wanted == 0 and next(iter(kv.scan(SCOPE, ns, start=prefix, end=end, limit=1)), None)
                if not any_message and kv.get(SCOPE, ns, self._agent_key(ns, agent_id)) is None:
                    raise SessionRecordNotFound(
                        f"Messages directory missing from agent: {agent_id} in session {session_id}"
                    )
        return [SessionMessage.from_dict(orjson.loads(data)) for _, data in rows[offset:]]

    # -- multi-agent state -----------------------------------------------------------

    @_waits
    def create_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        """Store ``multi_agent.serialize_state()`` under its id (replacing it)."""
        ns = self._session(session_id)
        key = self._multi_agent_key(ns, getattr(multi_agent, "id", None))
        self.store.kv.put(SCOPE, ns, key, self._json("multi_agent state", multi_agent.serialize_state()))

    @_waits
    def read_multi_agent(self, session_id: str, multi_agent_id: str, **kwargs: Any) -> dict[str, Any] | None:
        """The stored state dict, or ``None``."""
        ns = self._session(session_id)
        data = self.store.kv.get(SCOPE, ns, self._multi_agent_key(ns, multi_agent_id))
        if data is None:
            return None
        state: dict[str, Any] = orjson.loads(data)
        return state

    @_waits
    def update_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        """Replace a stored multi-agent state; ``SessionRecordNotFound`` if there is none."""
        ns = self._session(session_id)
        key = self._multi_agent_key(ns, getattr(multi_agent, "id", None))
        data = self._json("multi_agent state", multi_agent.serialize_state())
        kv = self.store.kv
        with self.store.transaction():
            if kv.get(SCOPE, ns, key) is None:
                raise SessionRecordNotFound(f"MultiAgent state {multi_agent.id} in session {session_id} does not exist")
            kv.put(SCOPE, ns, key, data)


class DurastateSessionManager(RepositorySessionManager):
    """``FileSessionManager``'s counterpart: a ``RepositorySessionManager`` on a ``DurastateSessionRepository``.

    Creates the session if it does not exist. ``url`` / ``store=`` as for the
    repository; ``close()`` closes a store this manager opened.
    """

    def __init__(
        self, session_id: str, *, url: str | None = None, store: _store.Store | None = None, **kwargs: Any
    ) -> None:
        self.repository = DurastateSessionRepository(url, store=store)
        try:
            super().__init__(session_id=session_id, session_repository=self.repository, **kwargs)
        except BaseException:
            self.repository.close()
            raise

    def close(self) -> None:
        """Close the repository (and the store, if this manager opened it)."""
        self.repository.close()
