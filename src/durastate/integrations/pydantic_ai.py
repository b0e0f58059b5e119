"""pydantic-ai conversations on durastate: ``DurastateConversationStore`` (extra ``[pydantic-ai]``).

A ``pydantic_ai.conversation_store.ConversationStore`` on any durastate URL
(one SQLite file shared by several processes, or PostgreSQL), built and
tested against ``pydantic-ai-slim`` 2.78.0 (pinned in the ``test`` extra)::

    from pydantic_ai.conversation import Conversation
    from durastate.integrations.pydantic_ai import DurastateConversationStore

    store = DurastateConversationStore(url="sqlite:agents.db")
    conversation = await store.load("c1") or Conversation(conversation_id="c1")
    result = await agent.run("hello", conversation=conversation)
    await store.save(result)

pydantic-ai's ``ConversationStore`` does the thinking (which messages are
new, where a rewritten history branches, what a fork shares); a backend
implements its storage primitives, all coroutines: ``read_record``,
``read_records``, ``write_record`` (compare-and-swap on the record's
``revision``, raising ``ConversationConflict``), ``write_details`` (title
and metadata), ``delete_record``, ``read_entry`` and ``read_history`` (a
history in a few statements instead of one ``read_entry`` per message).
The framework's API is async only, so this class is too: each primitive
runs its synchronous implementation through the store's ``AsyncCalls``
(``durastate.integrations._common``), one read transaction or one write
transaction with nothing changed before it.

Storage, and why there. The issue pointed at the records facet (pi-durable's
conversations, fork chains and entries), and the shape is close, but it
does not fit: its ids are integers it mints while pydantic-ai mints
``uuid7`` strings, its conversations and entries are insert-only (a
pydantic-ai record is replaced on every save and deleted with
``delete_record``, which should erase the messages no other conversation
uses), and its commits serialise on one global sequence row, which
pydantic-ai does not need. So:

* A conversation's **record** is a document (the documents facet) at
  ``pydantic-ai/c/<conversation_id>``: the ``ConversationRecord`` as
  pydantic's JSON, plus the bookkeeping below. The compare-and-swap on the
  record's ``revision`` is the documents facet's ``expect=`` on the
  document's own revision, inside the write's transaction, so two writers
  of one conversation cannot both pass the check (on PostgreSQL the
  conditional ``UPDATE`` re-checks the row after the other writer's
  commit): one wins, the other gets ``ConversationConflict`` and nothing of
  its write is stored.
* **Entries** are kv values (scope ``b"pydantic-ai"``, namespace ``b"e"``)
  laid out in *lines*: a line is a run of entries, each the parent of the
  next, under keys ``b"l"`` + the line's name + ``b"/"`` + its position (8
  bytes, big-endian; position 0 holds where the line hangs off: the
  location of its first entry's parent, empty for a root). A save that
  extends a conversation's own line at its tip appends to it; a save after
  a branch point, or after an entry of another conversation (a fork),
  starts a new line. So a history is a reverse key scan per line it crosses
  (one for a conversation never branched or forked), not one read per
  message. An index in the same namespace (``b"i"`` + entry id -> location)
  serves ``read_entry`` and finds a history's head; sharing the namespace
  lets one ``put_many`` write a save's entries and their index rows.
  References live in namespace ``b"r"`` + the used conversation's ``uid``.
* A line belongs to the conversation that wrote it (its name starts with
  the conversation's ``uid``, a random id minted when the record is created,
  so a conversation deleted and created again never shares the old lines).

Deleting. ``delete_record`` deletes the record and, when no other
conversation's history uses them, its lines and their index rows, in the
same transaction: the messages are gone. A conversation whose entries
another one uses (a fork, or a fork's fork, through its head, a branch it
left or a line hanging off them) is *referenced*: then its lines stay,
under a tombstone (``pydantic-ai/o/<uid>``), until the last conversation
referencing it is deleted, which deletes them too (and so on up the fork
chain). Deleted conversations using each other in a cycle (a fork, then the
original saved onto one of the fork's entries) go together, once no live
conversation uses any of them. ``InMemoryConversationStore`` is finer: it keeps only the entries
still reachable. pydantic-ai leaves this to the backend ("each backend
documents what it does"): here, the entries a deleted conversation wrote are
deleted at once if nothing shares them, else all of them with the last
conversation that shares any. References are taken, and lines released,
under one lock (the documents facet's ``documents.lock()``, held to the
end of the transaction), so a fork of a conversation being deleted either
keeps its entries or gets ``ConversationConflict``.

Statements per call. A save (``write_record``) is one transaction: the
record's compare-and-swap, then one ``put_many`` of the new entries, their
index rows and a new line's header (references, rarely, besides). The
record document is not read first when this store object remembers it
(from the ``read_record`` pydantic-ai's ``save`` makes first, or its own
last write): the compare-and-swap on the remembered revision is the check,
and a stale memo only costs a read and a second try, nothing written by the
first. ``read_history`` is one reverse scan per line crossed, plus an index
lookup unless the head's location is remembered (it is after
``read_record``); it needs no snapshot, since a line only grows past what is
read or is released whole, which reads as missing (``EntryNotFound``, the
``LookupError`` pydantic-ai retries on). Memos are per object and bounded
(``PLACES``, ``RECORDS_KEPT``). ``read_records`` (``list_conversations``)
reads every record of the store, one read each, and sorts them: fine for
hundreds of conversations, not for millions (no index by ``updated_at`` or
``scope`` yet).

JSON, no pickle: records through pydantic (``TypeAdapter`` of
``ConversationRecord``), entries as pydantic-ai's own JSON for
``ConversationEntry`` (messages as ``ModelMessagesTypeAdapter`` writes
them). What cannot be encoded (a tool argument or metadata value pydantic
cannot serialise, NaN and infinities, which pydantic would write as
``null``) is refused with ``durastate.InvalidRequest`` before anything is
written.

Where it follows ``InMemoryConversationStore`` (a differential test runs
both through the same calls): every result, ``ConversationConflict`` for a
stale or missing ``expected_revision``, a record that exists when it is
``None``, or a ``head_id`` no entry has; ``write_record`` keeps the stored
``title`` and ``metadata``; ``write_details`` keeps ``revision`` and
``updated_at``; ``read_records`` newest ``updated_at`` first; a missing
entry raises ``KeyError`` (here ``EntryNotFound``, also ``durastate.NotFound``).
Where it differs, on purpose: the entries kept after a delete (above); a
save whose first new entry's parent is gone (released by a concurrent
delete) raises ``ConversationConflict`` (InMemory stores it dangling);
arguments of the wrong type or a negative ``limit`` raise
``durastate.InvalidRequest``.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

import orjson

from .. import store as _store
from .._validate import fail, fail_type
from ..errors import Conflict, NotFound
from ._common import StoreHolder
from .pydantic_ai_messages import JSON_CONFIG, messages_json, refuse

try:
    from pydantic import TypeAdapter
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationDetails,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.run import AgentRunResult
    from pydantic_core import PydanticSerializationError, SchemaSerializer
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        f"durastate.integrations.pydantic_ai needs pydantic-ai: pip install 'durastate[pydantic-ai]' ({exc})"
    ) from exc

__all__ = ["DurastateConversationStore", "EntryNotFound", "RevisionConflict", "SCOPE"]

SCOPE = b"pydantic-ai"  # kv scope of the entries, the index and the references
ENTRIES = b"e"  # the namespace of the index and the lines (one put_many writes both)
INDEX = b"i"  # key prefix: + entry id -> the entry's location
LINE = b"l"  # key prefix: + line name + b"/" + position -> entry JSON; position 0: the line's parent location
REFS = b"r"  # + uid: the uids of conversations using that conversation's lines -> b""
RECORDS = "pydantic-ai/c/"  # + conversation id: the record document
TOMBSTONES = "pydantic-ai/o/"  # + uid: a deleted conversation whose lines others still use

_RECORD = TypeAdapter(ConversationRecord)
_RECORD_JSON = SchemaSerializer(_RECORD.core_schema, JSON_CONFIG)
# The layout of the record documents and entry rows; a later layout reads this one or migrates it.
FORMAT = 1
# Entries per store whose location is remembered (a location never changes).
PLACES = 4096
# Record documents per store remembered as the revision to expect on the next write.
RECORDS_KEPT = 1024


class EntryNotFound(NotFound, KeyError):
    """``read_entry`` / ``read_history`` of an entry id the store does not have.

    A ``KeyError`` (as ``InMemoryConversationStore`` raises, and the
    ``LookupError`` pydantic-ai's ``ConversationStore`` catches) and a
    ``durastate.NotFound``.
    """

    def __str__(self) -> str:  # KeyError's str() is the repr of its argument
        return str(self.args[0]) if self.args else ""


class RevisionConflict(ConversationConflict, Conflict):
    """pydantic-ai's ``ConversationConflict`` that is also a ``durastate.Conflict``.

    The conversation was saved, replaced or deleted since it was read (or
    exists, when ``expected_revision`` is ``None``), or the entry a write
    names was released by a concurrent delete. Nothing was written: load it
    again and decide.
    """


def _position(n: int) -> bytes:
    return n.to_bytes(8, "big")  # big-endian: keys sort in position order


def _line_prefix(line: str) -> bytes:
    # A line name is hex, "." and digits: never "/", so one line's keys are no other line's prefix.
    return LINE + line.encode() + b"/"


def _line_key(line: str, position: int) -> bytes:
    return _line_prefix(line) + _position(position)


def _index_key(entry_id: str) -> bytes:
    return INDEX + entry_id.encode()


def _location(line: str, position: int) -> bytes:
    return f"{line}/{position}".encode()


def _split(location: bytes) -> tuple[str, int]:
    line, _, position = location.decode().rpartition("/")
    return line, int(position)


def _owner(line: str) -> str:
    return line.partition(".")[0]


def _record_data(record: ConversationRecord) -> dict[str, Any]:
    """The record as JSON values; ``InvalidRequest`` for what JSON cannot hold (nothing is written then)."""
    try:
        blob = _RECORD_JSON.to_json(record)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise refuse("the conversation record", exc) from None
    try:
        data: dict[str, Any] = orjson.loads(blob)
    except orjson.JSONDecodeError:
        raise refuse("the conversation record", "it contains NaN or an infinity") from None
    return data


def _entry_json(entry: ConversationEntry, position: int, count: int) -> bytes:
    """The entry as stored: its id, parent and kind as JSON, a newline, its message as pydantic-ai's JSON.

    The message is written as ``ModelMessagesTypeAdapter`` writes it (bytes
    in base64), so a history decodes in one call (``_entries``). Compact
    JSON holds no raw newline, so the first one splits the two. Refusals as
    for records, naming the message by its place among the ``count`` new
    ones (``position`` from 0), not by its entry id (a UUID pydantic-ai made
    up: ``save`` callers never see it).
    """
    message = messages_json([entry.message], lambda: f"new message {position + 1} of {count}")[1:-1]
    meta = orjson.dumps({"id": entry.id, "parent_id": entry.parent_id, "kind": entry.kind})
    return meta + b"\n" + message


def _entries(blobs: Sequence[bytes]) -> list[ConversationEntry]:
    """Stored entries back, their messages decoded in one ``ModelMessagesTypeAdapter`` call."""
    metas: list[Any] = []
    messages: list[bytes] = []
    for blob in blobs:
        meta, _, message = blob.partition(b"\n")
        metas.append(orjson.loads(meta))
        messages.append(message)
    decoded = ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(messages) + b"]")
    return [
        ConversationEntry(id=meta["id"], parent_id=meta["parent_id"], message=message, kind=meta["kind"])
        for meta, message in zip(metas, decoded, strict=True)
    ]


def _entry_id(blob: bytes) -> str:
    return str(orjson.loads(blob.partition(b"\n")[0])["id"])


def _text(label: str, value: Any) -> str:
    if not isinstance(value, str):
        fail_type(label, "a str", value)
    return str.__str__(value)


def _limit(limit: Any) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        fail_type("limit", "an int or None", limit)
    if limit < 0:
        fail(f"limit must be >= 0, got {limit}")
    return int(limit)


K = TypeVar("K")
V = TypeVar("V")


class _Remembered(Generic[K, V]):
    """A bounded, thread-safe memo (least recently stored first out), for facts re-checked where they matter.

    Two are kept per store (see "Statements per call" in the module docstring):
    entry locations (a location never changes; a line released by a delete
    reads as missing) and record documents with their revision, the
    revision a write expects (its compare-and-swap finds it stale, and the
    write then reads the record and starts over).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        self.put_all(((key, value),))

    def put_all(self, pairs: Iterable[tuple[K, V]]) -> None:
        """``put`` each pair, under one taking of the lock (a save remembers its entries and its head together)."""
        items = self._items
        with self._lock:
            for key, value in pairs:
                items[key] = value
                items.move_to_end(key)
            while len(items) > self._size:
                items.popitem(last=False)

    def drop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)


class DurastateConversationStore(StoreHolder, ConversationStore):
    """pydantic-ai's ``ConversationStore`` on a durastate store (contract: the module docstring).

    ``DurastateConversationStore(url=...)`` opens (and on ``close()`` closes)
    its own store; ``store=`` borrows one you opened (``close()`` leaves it
    open). With neither, durastate's default store ``./.durastate/state.db``.
    Task-, thread- and process-safe: any number of these, in any number of
    processes, may share one SQLite file or PostgreSQL database.
    """

    def __init__(self, *, url: str | None = None, store: _store.Store | None = None) -> None:
        super().__init__(url, store, name="durastate-pydantic-ai")
        self._places = _Remembered[str, bytes](PLACES)
        self._documents = _Remembered[str, tuple[int, dict[str, Any]]](RECORDS_KEPT)

    def __repr__(self) -> str:
        return f"<DurastateConversationStore on {self.store.url}{' (closed)' if self._aio.runner.closed else ''}>"

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """pydantic-ai's ``save`` (``ConversationStore.save``), its arguments checked first.

        A ``conversation`` that is neither a ``Conversation`` nor an
        ``AgentRunResult``, or a ``scope`` not a str, raises
        ``InvalidRequest`` before anything is read or written (pydantic-ai's
        ``save``, and so its ``InMemoryConversationStore``, raises an
        ``AttributeError`` from inside).
        """
        if not isinstance(conversation, (Conversation, AgentRunResult)):
            fail_type("conversation", "a pydantic_ai Conversation or AgentRunResult", conversation)
        if scope is not None:
            _text("scope", scope)
        return await super().save(conversation, scope=scope)

    # -- pydantic-ai's storage primitives ------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's record, or ``None`` if the store does not have it."""
        return await self._aio.read(self._read_record_sync, conversation_id)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        """The records (those with ``scope``, if given), newest ``updated_at`` first, at most ``limit``."""
        return await self._aio.read(self._read_records_sync, scope, limit)

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store ``record`` and ``new_entries`` together if the stored revision is ``expected_revision``.

        ``ConversationConflict`` (``RevisionConflict``) otherwise, or when
        ``record.head_id`` (or the parent of the first new entry) names an
        entry the store does not have; nothing is written then.
        """
        await self._aio.call(self._write_record_sync, record, new_entries, expected_revision)

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """Replace ``title`` / ``metadata`` if the record has ``expected_revision`` and the ``expected`` values."""
        return await self._aio.call(self._write_details_sync, conversation_id, details, expected_revision, expected)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the record (and its entries, unless another conversation uses them: module docstring)."""
        await self._aio.call(self._delete_record_sync, conversation_id, expected_revision)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id (``EntryNotFound``, a ``KeyError``, if there is none)."""
        return await self._aio.read(self._read_entry_sync, entry_id)

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """The entries from the first up to ``head_id``, oldest first; only the last ``limit`` if given."""
        return await self._aio.read(self._read_history_sync, head_id, limit)

    # -- reading ---------------------------------------------------------------------

    @staticmethod
    def _key(conversation_id: Any) -> str:
        return RECORDS + _text("conversation_id", conversation_id)

    def _read_record_sync(self, conversation_id: Any) -> ConversationRecord | None:
        key = self._key(conversation_id)
        found = self.store.documents.read(key)
        if found is None:
            self._documents.drop(key)
            return None
        self._remember(key, found.revision, found.data)
        return _RECORD.validate_python(found.data["record"])

    def _remember(
        self, key: str, revision: int, document: dict[str, Any], placed: dict[str, bytes] | None = None
    ) -> None:
        """A record document just read or written: the revision its next write expects, where its head is
        (and ``placed``: where a write put its entries)."""
        self._documents.put(key, (revision, document))
        places = [] if placed is None else list(placed.items())
        head = document["head"]
        if head is not None and (placed is None or head[0] not in placed):
            places.append((head[0], head[1].encode()))
        if places:
            self._places.put_all(places)

    def _read_records_sync(self, scope: Any, limit: Any) -> list[ConversationRecord]:
        if scope is not None:
            scope = _text("scope", scope)
        limit = _limit(limit)
        documents = self.store.documents
        records: list[ConversationRecord] = []
        with self.store.engine.read_transaction():
            for key in list(documents.iter_keys(RECORDS)):
                found = documents.read(key)
                if found is not None and (scope is None or found.data["record"]["scope"] == scope):
                    records.append(_RECORD.validate_python(found.data["record"]))
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records if limit is None else records[:limit]

    def _locate(self, entry_id: str) -> bytes | None:
        """Where the entry is (the index: not the memo), remembered."""
        location = self.store.kv.get(SCOPE, ENTRIES, _index_key(entry_id))
        if location is not None:
            self._places.put(entry_id, location)
        return location

    def _located(self, entry_id: str, conversation_id: str) -> bytes:
        """``_place`` of an entry a write of ``conversation_id`` points at; ``RevisionConflict`` if it is not stored."""
        location = self._places.get(entry_id) or self._locate(entry_id)
        if location is None:  # never stored, or released by a concurrent delete
            raise RevisionConflict(conversation_id)
        return location

    def _place(self, entry_id: str) -> bytes | None:
        """Where the entry is or was: the memo, else the index. Its line may since have been released."""
        return self._places.get(entry_id) or self._locate(entry_id)

    def _read_entry_sync(self, entry_id: Any) -> ConversationEntry:
        entry_id = _text("entry_id", entry_id)
        location = self._place(entry_id)
        blob = None
        if location is not None:
            line, position = _split(location)
            blob = self.store.kv.get(SCOPE, ENTRIES, _line_key(line, position))
        if blob is None:  # never stored, or its line was released by a delete
            raise EntryNotFound(entry_id)
        return _entries([blob])[0]

    def _read_history_sync(self, head_id: Any, limit: Any) -> list[ConversationEntry]:
        limit = _limit(limit)
        if head_id is None or limit == 0:
            return []
        head_id = _text("head_id", head_id)
        blobs: list[bytes] = []
        kv = self.store.kv
        # No snapshot needed: a line only grows past what is read here, or is
        # released whole (one statement), which reads as no rows at all.
        location: bytes | None = self._place(head_id)
        if location is None:
            raise EntryNotFound(head_id)
        while location and (limit is None or len(blobs) < limit):
            line, position = _split(location)
            want = None if limit is None else limit - len(blobs)
            # Newest first down to the line's header (one row more), which says where the line hangs off.
            header = _line_key(line, 0)
            rows = list(
                kv.scan(
                    SCOPE,
                    ENTRIES,
                    start=header,
                    end=_line_key(line, position + 1),
                    reverse=True,
                    limit=None if want is None else want + 1,
                )
            )
            reached = bool(rows) and rows[-1][0] == header
            if (
                not rows
                or rows[0][0] != _line_key(line, position)
                # no header, yet the scan was not cut short by the limit
                or (not reached and (want is None or len(rows) <= want))
            ):
                # Released since it was located (whole, or between two pages of a long line).
                raise EntryNotFound(head_id)
            location = rows[-1][1] if reached else None
            blobs.extend(blob for key, blob in rows[:want] if key != header)
        blobs.reverse()
        return _entries(blobs)

    # -- writing ---------------------------------------------------------------------

    def _write_record_sync(self, record: Any, new_entries: Any, expected_revision: Any) -> None:
        if not isinstance(record, ConversationRecord):
            fail_type("record", "a pydantic_ai ConversationRecord", record)
        conversation_id = _text("record.conversation_id", record.conversation_id)
        if expected_revision is not None:
            expected_revision = _text("expected_revision", expected_revision)
        # Exact types first, and labels built only for a refusal: this runs on every save.
        if (
            type(new_entries) is not list
            and type(new_entries) is not tuple
            and (isinstance(new_entries, (str, bytes)) or not isinstance(new_entries, Iterable))
        ):
            fail_type("new_entries", "a sequence of ConversationEntry", new_entries)
        entries = list(new_entries)
        previous = None
        for i, entry in enumerate(entries):
            if type(entry) is not ConversationEntry and not isinstance(entry, ConversationEntry):
                fail_type(f"new_entries[{i}]", "a ConversationEntry", entry)
            if type(entry.id) is not str:
                _text(f"new_entries[{i}].id", entry.id)
            if i and entry.parent_id != previous:
                fail(f"new_entries[{i}] must follow new_entries[{i - 1}] (its parent_id is {entry.parent_id!r})")
            previous = entry.id
        data = _record_data(record)
        count = len(entries)
        blobs = [_entry_json(entry, i, count) for i, entry in enumerate(entries)]

        key = RECORDS + conversation_id
        with self.store.transaction():
            guess = self._documents.get(key)
            done = None
            if guess is not None:
                try:
                    done = self._write_on(key, *guess, record, data, entries, blobs, expected_revision)
                except RevisionConflict:
                    pass  # maybe decided on a stale memo: nothing was written; read the record and decide again
            if done is None:
                found = self.store.documents.read(key)
                revision, stored = (0, None) if found is None else (found.revision, found.data)
                done = self._write_on(key, revision, stored, record, data, entries, blobs, expected_revision)
        # Committed: only now remembered (a rolled-back write must leave no memo behind).
        written, document, placed = done
        self._remember(key, written, document, placed)

    def _write_on(
        self,
        key: str,
        revision: int,
        stored: dict[str, Any] | None,
        record: ConversationRecord,
        data: dict[str, Any],
        entries: list[ConversationEntry],
        blobs: list[bytes],
        expected_revision: str | None,
    ) -> tuple[int, dict[str, Any], dict[str, bytes]]:
        """The write, on the record document ``stored`` at ``revision`` (0: absent), inside the caller's transaction.

        Writes nothing before the record's compare-and-swap succeeds, so a
        ``RevisionConflict`` leaves nothing behind. Returns what to remember
        once committed: the document's new revision, the document, where the
        new entries went.
        """
        conversation_id = record.conversation_id
        kv = self.store.kv
        if (None if stored is None else stored["record"]["revision"]) != expected_revision:
            raise RevisionConflict(conversation_id)
        if stored is None:
            uid, lines, refs, old_branches = secrets.token_hex(8), [], [], []
        else:
            stored_record = stored["record"]
            uid, lines, refs = stored["uid"], list(stored["lines"]), stored["refs"]
            old_branches = stored_record["branches"]
            # A save never changes what write_details set (pydantic-ai's contract).
            data["title"] = stored_record["title"]
            data["metadata"] = stored_record["metadata"]

        uses: set[str] = set()  # the other conversations whose lines this write starts to use
        placed: dict[str, bytes] = {}
        rows: list[tuple[bytes, bytes]] = []
        if entries:
            parent = entries[0].parent_id
            header = b""
            line = ""
            start = 1
            if parent is not None:
                parent_at = self._located(parent, conversation_id)
                parent_line, parent_position = _split(parent_at)
                owner, _, index = parent_line.partition(".")
                if owner == uid and lines[int(index)] == parent_position:
                    line, start = parent_line, parent_position + 1  # extend our own line at its tip
                else:
                    header = parent_at
                    if owner != uid:
                        uses.add(owner)
            if line:
                number = int(line.partition(".")[2])
            else:
                number = len(lines)
                line = f"{uid}.{number}"
                lines.append(0)
                rows.append((_line_key(line, 0), header))
            prefix = _line_prefix(line)  # made once for the entries' keys
            for i, (entry, blob) in enumerate(zip(entries, blobs, strict=True)):
                rows.append((prefix + _position(start + i), blob))
                placed[entry.id] = _location(line, start + i)
            lines[number] = start + len(entries) - 1
        head = record.head_id
        head_at = None
        if head is not None:
            head_at = placed.get(head)
            if head_at is None:  # else in this write's own line: no other conversation's
                head_at = self._located(_text("record.head_id", head), conversation_id)
                uses.add(_owner(_split(head_at)[0]))
        if record.branches:
            known = {*old_branches, *placed}
            for tip in record.branches:
                if tip not in known:
                    tip_at = self._place(_text("record.branches[]", tip))
                    if tip_at is not None:
                        uses.add(_owner(_split(tip_at)[0]))
        uses -= {uid, *refs}
        if uses:
            # Under the lock no delete releases lines: check (in the index,
            # not the memo) that what we point into is still there.
            self._lock()
            parent = entries[0].parent_id if entries else None
            for entry_id in (parent, None if head in placed else head):
                if entry_id is not None and self._locate(entry_id) is None:
                    raise RevisionConflict(conversation_id)
            refs = sorted({*refs, *uses})
        document = {
            "format": FORMAT,
            "record": data,
            "uid": uid,
            "lines": lines,
            "refs": refs,
            "head": None if head_at is None else [head, head_at.decode()],
        }
        try:
            written = self.store.documents.write(key, document, expect=revision)
        except Conflict:
            self._documents.drop(key)
            raise RevisionConflict(conversation_id) from None
        # The compare-and-swap passed: from here on this write is the record's.
        for owner in sorted(uses):
            kv.put(SCOPE, REFS + owner.encode(), uid.encode(), b"")
        if entries:
            rows.extend((_index_key(entry.id), placed[entry.id]) for entry in entries)
            kv.put_many(SCOPE, ENTRIES, rows)
        return written, document, placed

    def _write_details_sync(self, conversation_id: Any, details: Any, expected_revision: Any, expected: Any) -> Any:
        key = self._key(conversation_id)
        expected_revision = _text("expected_revision", expected_revision)
        for label, given in (("details", details), ("expected", expected)):
            if given is None and label == "expected":
                continue
            if not isinstance(given, dict):
                fail_type(label, "a dict", given)
            unknown = set(given) - {"title", "metadata"}
            if unknown:
                raise NotImplementedError(f"{label} has keys this store does not keep: {sorted(unknown)}")
        changed = dataclasses.replace(ConversationRecord(conversation_id="-", head_id=None), **details)
        data = _record_data(changed)
        documents = self.store.documents
        with self.store.transaction():
            found = documents.read(key)
            if found is None or found.data["record"]["revision"] != expected_revision:
                raise RevisionConflict(conversation_id)
            stored = _RECORD.validate_python(found.data["record"])
            if expected and any(getattr(stored, name) != value for name, value in expected.items()):
                raise RevisionConflict(conversation_id)
            document = found.data
            for name in details:
                document["record"][name] = data[name]
            try:
                written = documents.write(key, document, expect=found.revision)
            except Conflict:
                raise RevisionConflict(conversation_id) from None
        self._remember(key, written, document)
        return _RECORD.validate_python(document["record"])

    def _delete_record_sync(self, conversation_id: Any, expected_revision: Any) -> None:
        key = self._key(conversation_id)
        expected_revision = _text("expected_revision", expected_revision)
        documents = self.store.documents
        with self.store.transaction():
            # The documents facet's lock, which a write adding a reference takes
            # too (and every document write, on PostgreSQL): one lock, so no
            # order of taking two can deadlock.
            self._lock()
            found = documents.read(key)
            if found is None or found.data["record"]["revision"] != expected_revision:
                raise RevisionConflict(conversation_id)
            self._documents.drop(key)
            try:
                documents.delete(key, expect=found.revision)
            except Conflict:
                raise RevisionConflict(conversation_id) from None
            self._release(found.data["uid"], len(found.data["lines"]), found.data["refs"])

    def _lock(self) -> None:
        """Take the documents facet's lock until the caller's transaction ends (see "Deleting")."""
        with self.store.documents.lock():
            pass  # the lock is the transaction's: it outlives this block (a savepoint)

    def _release(self, uid: str, line_count: int, refs: list[str]) -> None:
        """Delete a dead conversation's lines unless a live one uses them; then those it used, if now unused.

        Under the lock, inside the delete's transaction. Dead conversations
        can use each other in a cycle (a fork, then a save of the original
        onto one of the fork's entries): counting users alone would keep both
        forever, so what is released is the whole group of dead conversations
        that no live one reaches (``_unreached``).
        """
        kv = self.store.kv
        documents = self.store.documents
        pending = [(uid, line_count, refs)]
        while pending:
            uid, line_count, refs = pending.pop()
            group = self._unreached(uid, line_count, refs)
            if group is None:
                documents.write(TOMBSTONES + uid, {"lines": line_count, "refs": refs})
                continue
            for dead, (count, _) in group.items():
                documents.delete(TOMBSTONES + dead)
                for index in range(count):
                    line = f"{dead}.{index}"
                    start, end = _line_key(line, 0), LINE + line.encode() + b"0"  # "0" follows "/"
                    ids = [_index_key(_entry_id(blob)) for key, blob in kv.scan(SCOPE, ENTRIES, start=start, end=end)
                           if key != start]  # fmt: skip
                    kv.delete(SCOPE, ENTRIES, start=start, end=end)
                    if ids:
                        kv.delete(SCOPE, ENTRIES, ids)
            for dead, (_, used_by_dead) in group.items():
                for used in used_by_dead:
                    kv.delete(SCOPE, REFS + used.encode(), [dead.encode()])
                    if used in group:
                        continue
                    tombstone = documents.read(TOMBSTONES + used)
                    if tombstone is not None:
                        pending.append((used, tombstone.data["lines"], tombstone.data["refs"]))

    def _unreached(self, uid: str, line_count: int, refs: list[str]) -> dict[str, tuple[int, list[str]]] | None:
        """``uid`` (dead) and every dead conversation using it, directly or through others, as uid -> (lines, refs);
        ``None`` if a live conversation is among those users (then they all stay)."""
        kv = self.store.kv
        documents = self.store.documents
        group = {uid: (line_count, refs)}
        frontier = [uid]
        while frontier:
            used = frontier.pop()
            for user, _ in kv.scan(SCOPE, REFS + used.encode()):
                name = user.decode()
                if name in group:
                    continue
                tombstone = documents.read(TOMBSTONES + name)
                if tombstone is None:
                    return None  # a live conversation's history reaches these lines
                group[name] = (tombstone.data["lines"], tombstone.data["refs"])
                frontier.append(name)
        return group
