"""ADK memory on durastate: ``DurastateMemoryService`` (a ``BaseMemoryService``).

What ADK's ``InMemoryMemoryService`` (2.13.0) does, kept in a store:
keyword search over the events of a user's sessions.

* ``add_session_to_memory(session)``: the session's events that have
  content parts (minus the ids deleted from this user's memory) replace
  what memory held for that session; a session keeps the place it got when
  it was first added.
* ``add_events_to_memory(app_name=, user_id=, events=, session_id=)``: the
  events with content parts are appended to that session's memory
  (``session_id`` ``None`` or empty: ADK's ``"__unknown_session_id__"``),
  skipping ids it already holds and ids deleted. ``custom_metadata`` is
  accepted and unused, as in ADK's service.
* ``search_memory(app_name=, user_id=, query=)``: at most ten
  ``MemoryEntry`` (the event's id, content, author and its timestamp as a
  local ISO string), the events sharing the most words with the query
  first, equal counts in memory order (sessions in the order they were first
  added, events in their order). Words: ``\\w+`` runs of the NFC-normalized,
  lower-cased text of the event's text parts; an event word mixing Latin and
  other scripts also counts as each single-script run (``私はPythonを使う``
  holds ``python``); a query word with a non-ASCII character also matches
  inside the event's text.
* ``delete_memory(app_name=, user_id=, memory_id=)``: removes the event
  with that id from every session of the user's memory and keeps later adds
  from bringing it back; an id memory does not hold is not remembered, and
  ``None`` or ``""`` does nothing.
* ``add_memory(app_name=, user_id=, memories=)`` (ADK's in-memory service
  has none; Vertex AI's Memory Bank has): explicit ``MemoryEntry`` items,
  searched with the events by the words of their text parts and returned
  as given (content, author, timestamp string, custom metadata). An entry
  without an id gets one (ADK's ``platform.uuid``); adding an id the user's
  explicit memories hold replaces that entry in place. Explicit memories
  rank, on equal counts, after the sessions added before the first of them
  and before those added after (they are one more "session" of the user);
  ``delete_memory`` removes them too. An explicit add is never skipped for
  a deleted id (the caller asked for it); events with that id still are.

Storage: the kv facet, scope ``b"adk-memory"``, one namespace per user
(``<app>/<user>``, segments escaped as in ``_common``). A session's memory is
one row (key ``s/<session>``): its place and its entries as JSON, each entry
the event's id, author, timestamp, content (ADK's JSON, ``exclude_none``) and
its words, computed once when stored. A deleted id is a row ``d/<id>``; the
next place is a counter (``kv.incr``). Each call is one transaction (search:
one read snapshot); the search reads the user's rows and ranks them in
Python, as ADK's service does in memory.

Refused with ``durastate.InvalidRequest`` before anything changes: names
that are not strings, a ``session`` that is not ADK's ``Session``, events
that are not ADK ``Event``s, a query that is not a string, content JSON
cannot hold.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.platform.uuid import new_uuid
from google.adk.sessions.session import Session
from google.genai import types

from ... import store as _store
from ..._validate import fail_type
from .._common import StoreHolder
from ._common import dump_model, json_safe, name, segment

__all__ = ["SCOPE", "DurastateMemoryService"]

SCOPE = b"adk-memory"
SESSION = b"s/"
DELETED = b"d/"
EXPLICIT = b"s0"  # add_memory's entries: a row placed as a session is, listed with them (just past b"s/...")
NEXT = b"next"  # the next session place; session and deletion keys hold a "/" so never meet it
UNKNOWN_SESSION = "__unknown_session_id__"  # ADK's name for events added without a session id
MAX_RESULTS = 10  # what ADK's in-memory service returns at most
WORD = re.compile(r"\w+")


# -- words --------------------------------------------------------------------


def _words(text: str) -> set[str]:
    """The lower-cased ``\\w+`` runs of ``text`` in NFC."""
    return {match.lower() for match in WORD.findall(unicodedata.normalize("NFC", text))}


def _latin(char: str) -> bool:
    if char.isascii():
        return char.isalnum() or char == "_"
    return unicodedata.name(char, "").startswith("LATIN")


def _event_words(text: str) -> set[str]:
    """``_words``, plus each single-script run of a word mixing Latin and other scripts."""
    words = _words(text)
    runs = {
        "".join(run)
        for word in words
        if not word.isascii()
        for _, run in itertools.groupby(word, key=_latin)  # Latin / not Latin runs
    }
    return words | runs


def _matches(query_words: set[str], entry: Mapping[str, Any]) -> int:
    """How many query words the stored entry matches."""
    words = entry["words"]
    lower = entry.get("lower")  # stored only for a text with non-ASCII characters
    return sum(
        1 for word in query_words if word in words or (lower is not None and not word.isascii() and word in lower)
    )


# -- the service ---------------------------------------------------------------


class DurastateMemoryService(StoreHolder, BaseMemoryService):
    """ADK's ``BaseMemoryService`` on a durastate store (see the module docstring).

    ``url=`` opens (and ``close()`` closes) its own store, ``store=`` borrows
    one; neither: durastate's default store.
    """

    def __init__(self, *, url: str | None = None, store: _store.Store | None = None) -> None:
        super().__init__(url, store, name="durastate-adk-memory")

    async def add_session_to_memory(self, session: Session) -> None:
        """Make the session's events with content what memory holds for it (see the module docstring)."""
        if not isinstance(session, Session):
            fail_type("session", "a google.adk.sessions.Session", session)
        ns = self._namespace(session.app_name, session.user_id)
        entries = self._entries(session.events)
        await self._aio.call(self._put_session, ns, name("session.id", session.id), entries, True)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Append the events with content the session's memory lacks (see the module docstring)."""
        ns = self._namespace(app_name, user_id)
        if session_id is not None:
            name("session_id", session_id)
        if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
            fail_type("custom_metadata", "a mapping or None", custom_metadata)
        if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
            fail_type("events", "a sequence of google.adk.events.Event", events)
        entries = self._entries(events)
        await self._aio.call(self._put_session, ns, session_id or UNKNOWN_SESSION, entries, False)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Store explicit memories, searchable with the events (see the module docstring)."""
        ns = self._namespace(app_name, user_id)
        if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
            fail_type("custom_metadata", "a mapping or None", custom_metadata)
        if isinstance(memories, (str, bytes)) or not isinstance(memories, Sequence):
            fail_type("memories", "a sequence of google.adk.memory.MemoryEntry", memories)
        entries = []
        for memory in memories:
            if not isinstance(memory, MemoryEntry):
                fail_type("memories", "google.adk.memory.MemoryEntry objects", memory)
            memory_id = new_uuid() if memory.id is None else name("MemoryEntry.id", memory.id)
            if memory.timestamp is not None:
                name("MemoryEntry.timestamp", memory.timestamp)
            entry = self._entry(memory_id, memory.author, memory.content)
            entry["at"] = memory.timestamp
            if memory.custom_metadata:
                entry["metadata"] = json_safe(f"the custom_metadata of memory {memory_id!r}", memory.custom_metadata)
            entries.append(entry)
        await self._aio.call(self._put_explicit, ns, entries)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """At most ten memories, those sharing the most words with ``query`` first."""
        ns = self._namespace(app_name, user_id)
        query_words = _words(name("query", query))
        found = await self._aio.read(self._search, ns, query_words)
        return SearchMemoryResponse(
            memories=[
                MemoryEntry(
                    id=entry["id"],
                    content=types.Content.model_validate(entry["content"]),
                    author=entry["author"],
                    # ADK formats an event's time when it searches (local time, as there).
                    timestamp=entry["at"] if "at" in entry else datetime.fromtimestamp(entry["timestamp"]).isoformat(),
                    custom_metadata=entry.get("metadata", {}),
                )
                for entry in found
            ]
        )

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Remove the event ``memory_id`` from the user's memory, for good (see the module docstring)."""
        ns = self._namespace(app_name, user_id)
        if memory_id is not None:
            name("memory_id", memory_id)
        if not memory_id:
            return
        await self._aio.call(self._delete, ns, memory_id)

    # -- entries -------------------------------------------------------------------

    @staticmethod
    def _namespace(app: Any, user: Any) -> bytes:
        return f"{segment(name('app_name', app))}/{segment(name('user_id', user))}".encode()

    @classmethod
    def _entries(cls, events: Sequence[Any]) -> list[dict[str, Any]]:
        """The stored form of the events memory keeps (those with content parts), checked before any write."""
        entries = []
        for event in events:
            if not isinstance(event, Event):
                fail_type("events", "google.adk.events.Event objects", event)
            if event.content and event.content.parts:
                entry = cls._entry(event.id, event.author, event.content)
                entry["timestamp"] = event.timestamp
                entries.append(entry)
        return entries

    @staticmethod
    def _entry(memory_id: str, author: str | None, content: types.Content) -> dict[str, Any]:
        """An entry's id, author, content (ADK's JSON) and the words it is searched by."""
        text = " ".join(part.text for part in content.parts or () if part.text)
        entry: dict[str, Any] = {
            "id": memory_id,
            "author": author,
            "content": orjson.loads(dump_model(f"the content of memory {memory_id!r}", content)),
            "words": sorted(_event_words(text)),
        }
        if not text.isascii():
            entry["lower"] = unicodedata.normalize("NFC", text).lower()
        return entry

    # -- one transaction each ---------------------------------------------------------

    def _put_session(self, ns: bytes, session_id: str, entries: list[dict[str, Any]], replace: bool) -> None:
        kv, key = self.store.kv, SESSION + segment(session_id).encode()
        ids = list(dict.fromkeys(entry["id"] for entry in entries))
        with self.store.transaction():
            flags = kv.get_many(SCOPE, ns, [DELETED + i.encode() for i in ids])
            deleted = {i for i, flag in zip(ids, flags, strict=True) if flag is not None}
            raw = kv.get(SCOPE, ns, key)
            stored: dict[str, Any] = (
                {"place": kv.incr(SCOPE, ns, NEXT), "entries": []} if raw is None else orjson.loads(raw)
            )
            kept = [entry for entry in entries if entry["id"] not in deleted]
            if replace:
                stored["entries"] = kept
            else:
                listed: list[dict[str, Any]] = stored["entries"]
                held = {entry["id"] for entry in listed}
                for entry in kept:
                    if entry["id"] not in held:
                        listed.append(entry)
                        held.add(entry["id"])
            kv.put(SCOPE, ns, key, orjson.dumps(stored))

    def _put_explicit(self, ns: bytes, entries: list[dict[str, Any]]) -> None:
        kv = self.store.kv
        with self.store.transaction():
            raw = kv.get(SCOPE, ns, EXPLICIT)
            stored: dict[str, Any] = (
                {"place": kv.incr(SCOPE, ns, NEXT), "entries": []} if raw is None else orjson.loads(raw)
            )
            listed: list[dict[str, Any]] = stored["entries"]
            where = {entry["id"]: i for i, entry in enumerate(listed)}
            for entry in entries:
                if entry["id"] in where:
                    listed[where[entry["id"]]] = entry
                else:
                    where[entry["id"]] = len(listed)
                    listed.append(entry)
            kv.put(SCOPE, ns, EXPLICIT, orjson.dumps(stored))

    def _sessions(self, ns: bytes) -> list[tuple[bytes, dict[str, Any]]]:
        """The user's session rows, in the order they were first added."""
        rows = [(key, orjson.loads(raw)) for key, raw in self.store.kv.scan(SCOPE, ns, start=SESSION, end=b"s1")]
        rows.sort(key=lambda row: int(row[1]["place"]))
        return rows

    def _search(self, ns: bytes, query_words: set[str]) -> list[dict[str, Any]]:
        with self.store.engine.read_transaction():
            sessions = self._sessions(ns)
        scored: list[tuple[int, dict[str, Any]]] = []
        for _, stored in sessions:
            for entry in stored["entries"]:
                if not entry["words"]:
                    continue
                matched = _matches(query_words, entry)
                if matched:
                    scored.append((matched, entry))
        scored.sort(key=lambda pair: -pair[0])  # stable: equal counts stay in memory order
        return [entry for _, entry in scored[:MAX_RESULTS]]

    def _delete(self, ns: bytes, memory_id: str) -> None:
        kv = self.store.kv
        with self.store.transaction():
            found = False
            for key, stored in self._sessions(ns):
                kept = [entry for entry in stored["entries"] if entry["id"] != memory_id]
                if len(kept) != len(stored["entries"]):
                    found = True
                    stored["entries"] = kept
                    kv.put(SCOPE, ns, key, orjson.dumps(stored))
            if found:
                kv.put(SCOPE, ns, DELETED + memory_id.encode(), b"")
