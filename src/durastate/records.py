"""``store.records``: a durable agent's records and versioned documents.

The data model is pi-durable's storage contract (DESIGN 5.3): conversations
(with fork chains and owners), entries (with head markers), tasks,
submissions (idempotent by request id) and versioned documents, all written
by ``commit(writes)``: one atomic batch that returns a global commit
sequence number. Records are JSON objects with the seed's camelCase keys;
the facet takes and returns them as ``dict``s, so ``durastate.compat.
pi_durable`` is only an async, error-mapping front end over this module.

Writes (each a dict with a ``type``):

* ``{"type": "conversation"|"entry"|"task"|"submission", "value": {...}}``;
  conversations and entries are insert-only, tasks and submissions upsert;
* ``{"type": "document.create", "record": {...}, "content": content}``;
* ``{"type": "document.copy", "record": {...}, "source": {"id", "at"}}``
  (fork-copy: the new document starts from the source's value at ``at``);
* ``{"type": "document.change", "id": id, "content": content}``;
* ``{"type": "document.retire", "id": id}``.

Content is ``{"kind": "base", "version": int, "value": {...}}`` or
``{"kind": "delta", "version": int, "ops": [op, ...]}`` with ops in Chord's
tuple vocabulary, pi-durable's delta format (``durastate._chord`` states
every rule: ``["s", ["path", 0], value]``, ``["a", path, text]``, ...).

Every validation rule of the seed holds (one id belongs to one record type;
conversations, entries and documents are written once; a document has at
most one content command and one retire per batch; a delta needs a base of
the same version; change/retire of unknown or retired documents; one live
incarnation per address; the fork-copy checks). A rejected batch leaves no
trace: checks run inside the commit's transaction before any write, and the
transaction rolls back on any error.

Decisions where the seed is silent (listed for docs/decisions.md):

* **Errors.** Malformed input (wrong types, unknown write types, unsafe
  integers, delta ops pi-durable's ``assert_valid_op`` refuses, reserved
  path segments) is ``InvalidRequest``;
  a well-formed batch that collides with stored state (an id of another
  type, a document that exists / is unknown / is retired, a delta whose ops
  do not apply to the current value, or would make it something other than
  an object) is ``Conflict``; a read naming an unknown conversation is
  ``NotFound``. Delta ops are applied at commit (to refuse ops that do not
  apply), not only at read. A delta of more than ``MAX_DELTA_OPERATIONS``
  ops is stored folded into one root replacement by its result (as
  pi-durable's writer folds), so replaying a stored delta is bounded too.
* **Commit sequence.** Gap-free and in commit order on both engines: taken
  from the ``records`` row of ``{p}sequence`` as the first statement of the
  commit's transaction, so record commits serialise on that row (which also
  makes the validation race-free). The first commit is 1; ``last_seq()``
  is the latest committed one.
* **Ids.** Integers in ``[0, 2**53 - 1]`` (JavaScript-safe, as the seed).
  ``mint_id()`` is persistent and shared by every process: one statement
  that returns one more than both the last minted id and the largest id
  ever committed, so minted ids never collide across processes (the seed
  keeps the counter in memory, which only works for one process). It
  never returns an id below ``FIRST_MINTED_ID`` (2): pi-durable reserves 1
  for its root conversation, and its own storages start minting at 2.
* **Bounded document reads.** Every revision row carries the number of
  deltas since its logical base (``depth``); the newest row of a document
  always carries the materialised value (``state``), and so does every
  ``CHECKPOINT_EVERY``-th delta. A read at any point starts from the
  nearest row at or before it that has a value (a base or a state) and
  applies at most ``CHECKPOINT_EVERY - 1`` deltas; a current read applies
  none. These checkpoints are invisible: ``version`` and
  ``deltasSinceBase`` are the logical ones.
* **Retention.** Current-only documents (non-conversation scope, or
  ``history: "latest"``) keep exactly one revision row: each new revision
  replaces the previous ones, and retiring drops them. Full-history
  documents keep every revision (point-in-time reads need them) but drop
  the stored value of rows that are neither the newest nor a checkpoint.
* **Strings.** Record JSON is stored as compact UTF-8 bytes; NaN/infinity
  and non-string keys are refused. Lone surrogates are kept exactly
  (pi-durable stores them; ``durastate._json_lossless`` says how: the
  record's bytes keep each surrogate as its own three bytes, and an
  indexed string gets an ASCII ``\\uXXXX`` JSON escape). Indexed strings
  (kinds, keys, statuses, request ids) are stored JSON-encoded (so NUL
  characters work on PostgreSQL, and equal strings have equal encodings)
  and limited to ``MAX_TEXT`` bytes.
* **Fork chains** are read with one recursive query; a chain deeper than
  ``MAX_CHAIN_DEPTH`` (only possible with a cycle of parent pointers) is
  refused with ``Conflict`` instead of looping.
* **Cursors** are ``{"after": id, "order": "ascending"|"descending"}``; a
  cursor whose order contradicts the query's is refused. Document scans are
  always ascending by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from . import _chord
from ._json import JSON_OPTIONS, has_non_finite
from ._json_lossless import dump_lossless, load_lossless, text_lossless
from .engines.base import READ, WRITE, WRITE_ROWS, Migration, Schema, Statement
from .errors import Conflict, DurastateError, InvalidRequest, NotFound

if TYPE_CHECKING:
    from .engines.base import Engine

__all__ = ["CHECKPOINT_EVERY", "FIRST_MINTED_ID", "MAX_SAFE_INTEGER", "Records", "SCHEMA"]

MAX_SAFE_INTEGER = 2**53 - 1
# mint_id() never hands out an id below this one (pi-durable: ROOT_CONVERSATION_ID = 1).
FIRST_MINTED_ID = 2
CHECKPOINT_EVERY = 16
MAX_CHAIN_DEPTH = 1000
MAX_TEXT = 1024
# Ids per lookup statement; batches are padded to a power of two (few texts).
ID_CHUNK = 128

SCHEMA = Schema(
    facet="records",
    migrations=(
        Migration(
            sequences=("records", "records_id"),
            statements=(
                "CREATE TABLE {p}rec_id (id {int64} PRIMARY KEY, type {text} NOT NULL)",
                "CREATE TABLE {p}rec_conversation ("
                " id {int64} PRIMARY KEY, owner_conversation_id {int64}, owner_task_id {int64},"
                " parent_id {int64}, parent_at {int64}, record {blob} NOT NULL)",
                "CREATE INDEX {p}rec_conversation_owner_c ON {p}rec_conversation (owner_conversation_id, id)",
                "CREATE INDEX {p}rec_conversation_owner_t ON {p}rec_conversation (owner_task_id, id)",
                "CREATE TABLE {p}rec_entry ("
                " id {int64} PRIMARY KEY, conversation_id {int64} NOT NULL, head {int64} NOT NULL,"
                " commit_seq {int64} NOT NULL, record {blob} NOT NULL)",
                "CREATE INDEX {p}rec_entry_conversation ON {p}rec_entry (conversation_id, id)",
                "CREATE INDEX {p}rec_entry_head ON {p}rec_entry (conversation_id, id) WHERE head = 1",
                "CREATE TABLE {p}rec_task ("
                " id {int64} PRIMARY KEY, conversation_id {int64} NOT NULL, kind {text} NOT NULL,"
                " status {text} NOT NULL, abort_requested {int64} NOT NULL, background {int64} NOT NULL,"
                " record {blob} NOT NULL)",
                "CREATE INDEX {p}rec_task_conversation ON {p}rec_task (conversation_id, id)",
                "CREATE INDEX {p}rec_task_status ON {p}rec_task (status, id)",
                "CREATE TABLE {p}rec_submission ("
                " id {int64} PRIMARY KEY, conversation_id {int64} NOT NULL, request_id {text},"
                " status {text} NOT NULL, record {blob} NOT NULL)",
                "CREATE INDEX {p}rec_submission_conversation ON {p}rec_submission (conversation_id, id)",
                "CREATE INDEX {p}rec_submission_request ON {p}rec_submission (conversation_id, request_id, id)",
                "CREATE TABLE {p}rec_document ("
                " id {int64} PRIMARY KEY, kind {text} NOT NULL, scope_kind {text} NOT NULL,"
                " owner_id {int64} NOT NULL, family {int64} NOT NULL, key_value {text} NOT NULL,"
                " created_at {int64} NOT NULL, retired_at {int64}, record {blob} NOT NULL)",
                "CREATE INDEX {p}rec_document_address ON {p}rec_document"
                " (kind, scope_kind, owner_id, family, key_value, created_at)",
                "CREATE INDEX {p}rec_document_scope ON {p}rec_document (scope_kind, owner_id, id)",
                "CREATE TABLE {p}rec_revision ("
                " document_id {int64} NOT NULL, seq {int64} NOT NULL, kind {text} NOT NULL,"
                " version {int64} NOT NULL, depth {int64} NOT NULL, content {blob} NOT NULL, state {blob},"
                " PRIMARY KEY (document_id, seq)){without_rowid}",
            ),
        ),
    ),
)

# -- statements ---------------------------------------------------------------

# The commit sequence: engine.next_value(COMMIT_SEQUENCE), the first
# statement of every commit.
COMMIT_SEQUENCE = "records"
LAST_SEQ = READ("SELECT value FROM {p}sequence WHERE name = 'records'")
# One more than both the last minted id and the largest id ever committed
# (max(id) of the primary key is an index lookup).
MINT_ID = WRITE_ROWS(
    "UPDATE {p}sequence SET value = {greatest}(value, COALESCE((SELECT max(id) FROM {p}rec_id), -1)) + 1"
    " WHERE name = 'records_id' RETURNING value"
)

CLAIM_ID = WRITE("INSERT INTO {p}rec_id (id, type) VALUES (?, ?) ON CONFLICT (id) DO NOTHING")
INSERT_CONVERSATION = WRITE(
    "INSERT INTO {p}rec_conversation (id, owner_conversation_id, owner_task_id, parent_id, parent_at, record)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_ENTRY = WRITE("INSERT INTO {p}rec_entry (id, conversation_id, head, commit_seq, record) VALUES (?, ?, ?, ?, ?)")
UPSERT_TASK = WRITE(
    "INSERT INTO {p}rec_task (id, conversation_id, kind, status, abort_requested, background, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET conversation_id = excluded.conversation_id,"
    " kind = excluded.kind, status = excluded.status, abort_requested = excluded.abort_requested,"
    " background = excluded.background, record = excluded.record"
)
UPSERT_SUBMISSION = WRITE(
    "INSERT INTO {p}rec_submission (id, conversation_id, request_id, status, record) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET conversation_id = excluded.conversation_id,"
    " request_id = excluded.request_id, status = excluded.status, record = excluded.record"
)
INSERT_DOCUMENT = WRITE(
    "INSERT INTO {p}rec_document (id, kind, scope_kind, owner_id, family, key_value, created_at, retired_at, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
RETIRE_DOCUMENT = WRITE("UPDATE {p}rec_document SET retired_at = ?, record = ? WHERE id = ?")
INSERT_REVISION = WRITE(
    "INSERT INTO {p}rec_revision (document_id, seq, kind, version, depth, content, state) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
DROP_REVISIONS = WRITE("DELETE FROM {p}rec_revision WHERE document_id = ?")
DROP_STATE = WRITE("UPDATE {p}rec_revision SET state = NULL WHERE document_id = ? AND seq = ?")
LATEST_REVISION = READ(
    "SELECT seq, kind, version, depth, content, state FROM {p}rec_revision WHERE document_id = ?"
    " ORDER BY seq DESC LIMIT 1"
)
CURRENT_DOCUMENT_ID = READ(
    "SELECT id FROM {p}rec_document WHERE kind = ? AND scope_kind = ? AND owner_id = ? AND family = ?"
    " AND key_value = ? AND retired_at IS NULL LIMIT 1"
)

GET_CONVERSATION = READ("SELECT record FROM {p}rec_conversation WHERE id = ?")
# The fork chain of a conversation, child first, in one statement.
CHAIN = READ(
    "WITH RECURSIVE chain (id, parent_id, parent_at, depth) AS ("
    " SELECT id, parent_id, parent_at, 0 FROM {p}rec_conversation WHERE id = ?"
    " UNION ALL SELECT c.id, c.parent_id, c.parent_at, chain.depth + 1"
    " FROM {p}rec_conversation c JOIN chain ON c.id = chain.parent_id WHERE chain.depth < ?)"
    " SELECT id, parent_id, parent_at FROM chain ORDER BY depth"
)
GET_ENTRY = READ("SELECT record, commit_seq FROM {p}rec_entry WHERE id = ?")
HEAD_MARKER = READ(
    "SELECT record FROM {p}rec_entry WHERE conversation_id = ? AND head = 1 AND id <= ? ORDER BY id DESC LIMIT 1"
)
ENTRIES = {
    order: READ(
        "SELECT id, record FROM {p}rec_entry WHERE conversation_id = ? AND id >= ? AND id <= ?"
        f" ORDER BY id {order} LIMIT ?"
    )
    for order in ("ASC", "DESC")
}
GET_TASK = READ("SELECT record FROM {p}rec_task WHERE id = ?")
GET_SUBMISSION = READ("SELECT record FROM {p}rec_submission WHERE id = ?")
SUBMISSION_BY_REQUEST = READ(
    "SELECT record FROM {p}rec_submission WHERE conversation_id = ? AND request_id = ? ORDER BY id LIMIT 1"
)
GET_DOCUMENT_RECORD = READ("SELECT record FROM {p}rec_document WHERE id = ?")
FIND_DOCUMENT = {
    "current": READ(
        "SELECT record FROM {p}rec_document WHERE kind = ? AND scope_kind = ? AND owner_id = ? AND family = ?"
        " AND key_value = ? AND retired_at IS NULL ORDER BY created_at DESC LIMIT 1"
    ),
    "at": READ(
        "SELECT record FROM {p}rec_document WHERE kind = ? AND scope_kind = ? AND owner_id = ? AND family = ?"
        " AND key_value = ? AND created_at <= ? AND (retired_at IS NULL OR retired_at > ?)"
        " ORDER BY created_at DESC LIMIT 1"
    ),
}
# A document and the revisions a read at seq <= ? needs, in one statement
# (one snapshot on both engines): the nearest row at or before the point
# that holds a whole value (a base, or a delta with its state), and the
# deltas after it. The anchor is found by walking the primary key backwards,
# which stops within CHECKPOINT_EVERY rows by construction.
MATERIALIZE = READ(
    "SELECT d.record, r.seq, r.kind, r.version, r.depth, r.content, r.state"
    " FROM {p}rec_document d LEFT JOIN {p}rec_revision r ON r.document_id = d.id AND r.seq <= ?"
    " AND r.seq >= COALESCE((SELECT a.seq FROM {p}rec_revision a WHERE a.document_id = d.id AND a.seq <= ?"
    " AND (a.kind = 'base' OR a.state IS NOT NULL) ORDER BY a.seq DESC LIMIT 1), ?)"
    " WHERE d.id = ? ORDER BY r.seq"
)


def _ids_sql(table: str, columns: str, count: int) -> Statement:
    return READ(f"SELECT {columns} FROM {{p}}{table} WHERE id IN (" + ", ".join("?" * count) + ")")


def _claim_sql(count: int) -> Statement:
    """Claim ``count`` ids in one statement; RETURNING names the ids it took.

    An id it does not return was claimed before (by an earlier commit): only
    those are looked up, to tell an upsert of the same type from a conflict.
    Padding repeats the last row, which DO NOTHING skips on both engines.
    """
    return WRITE_ROWS(
        "INSERT INTO {p}rec_id (id, type) VALUES "
        + ", ".join(["(?, ?)"] * count)
        + " ON CONFLICT (id) DO NOTHING RETURNING id"
    )


def _scan_sql(table: str, filters: Sequence[str], descending: bool) -> Statement:
    where = " AND ".join(["id < ?" if descending else "id > ?", *(f"{f} = ?" for f in filters)])
    order = "DESC" if descending else "ASC"
    return READ(f"SELECT id, record FROM {{p}}{table} WHERE {where} ORDER BY id {order} LIMIT ?")


CONVERSATION_FILTERS = ("owner_conversation_id", "owner_task_id")
TASK_FILTERS = ("conversation_id", "kind", "status", "abort_requested", "background")
SUBMISSION_FILTERS = ("conversation_id", "status")
DOCUMENT_SCAN = {
    (has_kind, current): READ(
        "SELECT id, record FROM {p}rec_document WHERE scope_kind = ? AND owner_id = ? AND id > ?"
        + (" AND kind = ?" if has_kind else "")
        + (" AND retired_at IS NULL" if current else " AND created_at <= ? AND (retired_at IS NULL OR retired_at > ?)")
        + " ORDER BY id LIMIT ?"
    )
    for has_kind in (False, True)
    for current in (False, True)
}

# -- validation helpers -------------------------------------------------------


def fail(message: str) -> NoReturn:
    raise InvalidRequest(message)


def reject(message: str) -> NoReturn:
    raise Conflict(message)


def dumps(name: str, value: Any) -> bytes:
    """Compact JSON bytes of ``value`` (lone surrogates escaped); InvalidRequest for what JSON cannot hold."""
    return dump_lossless(name, value)


loads = load_lossless


def _text(name: str, value: Any) -> str:
    """An indexed string, stored JSON-encoded (NUL-safe on PostgreSQL)."""
    if not isinstance(value, str):
        fail(f"{name} must be a str, got {type(value).__name__}")
    text = text_lossless(name, value)
    size = len(text.encode())
    if size > MAX_TEXT:
        fail(f"{name} is {size} bytes JSON-encoded; the limit is {MAX_TEXT}")
    return text


def _safe_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(f"{name} must be an integer, got {type(value).__name__}")
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        fail(f"{name} must be a safe integer (|n| <= 2**53 - 1), got {value}")
    return int(value)


def _id(name: str, value: Any) -> int:
    n = _safe_int(name, value)
    if n < 0:
        fail(f"{name} must be >= 0, got {n}")
    return n


def _obj(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        fail(f"{name} must be an object (dict), got {type(value).__name__}")
    return dict(value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        fail(f"{name} must be a bool, got {type(value).__name__}")
    return value


def _point(name: str, value: Any) -> int | None:
    """A point in commit time: ``"current"`` (None) or a commit sequence."""
    if value == "current" and isinstance(value, str):
        return None
    if isinstance(value, str):
        fail(f"{name} must be 'current' or a commit sequence number, got {value!r}")
    return _id(name, value)


def _limit(value: Any) -> int:
    n = _safe_int("limit", value)
    if n < 1:
        fail(f"limit must be >= 1, got {n}")
    return n


@dataclass(frozen=True, slots=True)
class _Address:
    kind: str
    scope_kind: str
    owner_id: int
    family: int
    key_value: str

    def params(self) -> tuple[Any, ...]:
        return (self.kind, self.scope_kind, self.owner_id, self.family, self.key_value)


def _scope(name: str, value: Any) -> tuple[str, int]:
    scope = _obj(name, value)
    kind = scope.get("kind")
    if kind == "session":
        return "session", 0
    if kind == "conversation":
        return "conversation", _id(f"{name}.conversationId", scope.get("conversationId"))
    if kind == "task":
        return "task", _id(f"{name}.taskId", scope.get("taskId"))
    fail(f"{name}.kind must be 'session', 'conversation' or 'task', got {kind!r}")


def _address(name: str, value: Any) -> _Address:
    address = _obj(name, value)
    kind = _text(f"{name}.kind", address.get("kind"))
    scope_kind, owner_id = _scope(f"{name}.scope", address.get("scope"))
    key = address.get("key")
    return _Address(
        kind=kind,
        scope_kind=scope_kind,
        owner_id=owner_id,
        family=0 if key is None else 1,
        key_value=_text(f"{name}.key", "" if key is None else key),
    )


def _is_current_only(record: Mapping[str, Any]) -> bool:
    return bool(record["scope"]["kind"] != "conversation" or record.get("history") == "latest")


@dataclass(frozen=True, slots=True)
class _Content:
    kind: str  # "base" | "delta"
    version: int
    value: dict[str, Any] | None  # base
    ops: list[Any] | None  # delta: checked Chord ops
    data: bytes  # the value (base) or the ops (delta), as JSON


def _content(name: str, value: Any) -> _Content:
    content = _obj(name, value)
    kind = content.get("kind")
    version = _safe_int(f"{name}.version", content.get("version"))
    if kind == "base":
        body = content.get("value")
        if not isinstance(body, dict):
            fail(f"{name}.value must be a JSON object, got {type(body).__name__}")
        return _Content("base", version, body, None, dumps(f"{name}.value", body))
    if kind == "delta":
        ops = _chord.check_ops(f"{name}.ops", content.get("ops"))
        return _Content("delta", version, None, ops, dumps(f"{name}.ops", ops))
    fail(f"{name}.kind must be 'base' or 'delta', got {kind!r}")


def _apply(ops: list[Any], value: dict[str, Any], what: str, copy: bool = True) -> dict[str, Any]:
    """``value`` (owned by the caller) changed by checked ``ops``; Conflict if they do not apply."""
    try:
        result = _chord.apply(value, ops, copy=copy)
    except _chord.DeltaPathError as exc:
        reject(f"{what}: the delta's ops do not apply to the current value: {exc}")
    if not isinstance(result, dict):
        reject(f"{what}: the delta would make the value a {type(result).__name__}, not an object")
    return result


# -- commit plan --------------------------------------------------------------


@dataclass(slots=True)
class _DocAction:
    id: int
    create: dict[str, Any] | None = None  # the record to create (without createdAt)
    address: _Address | None = None  # of create
    copy: tuple[int, int | None] | None = None  # (source id, at)
    content: _Content | None = None
    retire: bool = False


@dataclass(slots=True)
class _Plan:
    claims: list[tuple[int, str]] = field(default_factory=list)  # (id, table) in write order
    conversations: list[tuple[Any, ...]] = field(default_factory=list)
    entries: list[tuple[Any, ...]] = field(default_factory=list)  # without commit_seq (index 3)
    tasks: list[tuple[Any, ...]] = field(default_factory=list)
    submissions: list[tuple[Any, ...]] = field(default_factory=list)
    documents: dict[int, _DocAction] = field(default_factory=dict)


def _plan(writes: Any) -> _Plan:
    """Validate the batch's shape and the seed's per-batch document rules."""
    if isinstance(writes, (str, bytes, Mapping)) or not isinstance(writes, Iterable):
        fail(f"writes must be a list of write objects, got {type(writes).__name__}")
    plan = _Plan()
    claims, entries = plan.claims, plan.entries
    for i, raw in enumerate(writes):
        # Fast path for the most common write, a plain well-formed entry:
        # the same checks without building names or copies. Anything it
        # does not accept takes the general path, which words the error.
        if type(raw) is dict and raw.get("type") == "entry":
            value = raw.get("value")
            if type(value) is dict:
                id, conversation = value.get("id"), value.get("conversationId")
                if (
                    type(id) is int
                    and type(conversation) is int
                    and 0 <= id <= MAX_SAFE_INTEGER
                    and 0 <= conversation <= MAX_SAFE_INTEGER
                ):
                    try:
                        data = orjson.dumps(value, option=JSON_OPTIONS)
                    except (TypeError, orjson.JSONEncodeError):
                        pass
                    else:
                        if b"null" not in data or not has_non_finite(value):
                            claims.append((id, "entry"))
                            entries.append((id, conversation, 0 if value.get("head") is None else 1, data))
                            continue
        name = f"writes[{i}]"
        write = _obj(name, raw)
        kind = write.get("type")
        if kind in ("conversation", "entry", "task", "submission"):
            value = _obj(f"{name}.value", write.get("value"))
            id = _id(f"{name}.value.id", value.get("id"))
            data = dumps(f"{name}.value", value)
            plan.claims.append((id, kind))
            if kind == "conversation":
                owner = value.get("owner")
                owner_c = owner_t = parent_id = parent_at = None
                if owner is not None:
                    owner = _obj(f"{name}.value.owner", owner)
                    owner_c = _id(f"{name}.value.owner.conversationId", owner.get("conversationId"))
                    owner_t = _id(f"{name}.value.owner.taskId", owner.get("taskId"))
                parent = value.get("parent")
                if parent is not None:
                    parent = _obj(f"{name}.value.parent", parent)
                    parent_id = _id(f"{name}.value.parent.conversationId", parent.get("conversationId"))
                    parent_at = _id(f"{name}.value.parent.at", parent.get("at"))
                plan.conversations.append((id, owner_c, owner_t, parent_id, parent_at, data))
            elif kind == "entry":
                conversation = _id(f"{name}.value.conversationId", value.get("conversationId"))
                head = 0 if value.get("head") is None else 1
                plan.entries.append((id, conversation, head, data))
            elif kind == "task":
                state = _obj(f"{name}.value.state", value.get("state"))
                plan.tasks.append(
                    (
                        id,
                        _id(f"{name}.value.conversationId", value.get("conversationId")),
                        _text(f"{name}.value.kind", value.get("kind")),
                        _text(f"{name}.value.state.status", state.get("status")),
                        int(_bool(f"{name}.value.abortRequested", value.get("abortRequested"))),
                        int(_bool(f"{name}.value.background", value.get("background"))),
                        data,
                    )
                )
            else:
                request_id = value.get("requestId")
                plan.submissions.append(
                    (
                        id,
                        _id(f"{name}.value.conversationId", value.get("conversationId")),
                        None if request_id is None else _text(f"{name}.value.requestId", request_id),
                        _text(f"{name}.value.status", value.get("status")),
                        data,
                    )
                )
        elif kind in ("document.create", "document.copy"):
            record = _obj(f"{name}.record", write.get("record"))
            id = _id(f"{name}.record.id", record.get("id"))
            address = _address(f"{name}.record", record)
            for reserved in ("createdAt", "retiredAt"):
                if reserved in record:
                    fail(f"{name}.record.{reserved} is set by the commit, not by the writer")
            dumps(f"{name}.record", record)
            action = plan.documents.setdefault(id, _DocAction(id))
            if action.create is not None or action.content is not None or action.copy is not None:
                fail(f"Document {id} has more than one content command")
            action.create = record
            action.address = address
            plan.claims.append((id, "document"))
            if kind == "document.create":
                action.content = _content(f"{name}.content", write.get("content"))
            else:
                source = _obj(f"{name}.source", write.get("source"))
                action.copy = (
                    _id(f"{name}.source.id", source.get("id")),
                    _point(f"{name}.source.at", source.get("at")),
                )
        elif kind in ("document.change", "document.retire"):
            id = _id(f"{name}.id", write.get("id"))
            action = plan.documents.setdefault(id, _DocAction(id))
            if kind == "document.change":
                content = _content(f"{name}.content", write.get("content"))
                if action.content is not None or action.copy is not None:
                    fail(f"Document {id} has more than one content command")
                action.content = content
            else:
                if action.retire:
                    fail(f"Document {id} is retired more than once")
                action.retire = True
        else:
            fail(
                f"{name}.type must be one of conversation, entry, task, submission, document.create,"
                f" document.copy, document.change, document.retire; got {kind!r}"
            )
    for action in plan.documents.values():
        if action.copy is not None and action.copy[0] in plan.documents:
            fail(f"Document copy {action.id} source is changed in the copy batch")
    return plan


# -- cursors and pages --------------------------------------------------------


def _order(query: Mapping[str, Any], cursor: Any, default: str) -> tuple[str, int | None]:
    """The scan order and the id to continue after (None: from the start)."""
    order = query.get("order")
    if order is not None and order not in ("ascending", "descending"):
        fail(f"order must be 'ascending' or 'descending', got {order!r}")
    if cursor is None:
        return order or default, None
    if not isinstance(cursor, Mapping):
        fail(f"Invalid storage cursor: expected an object, got {type(cursor).__name__}")
    after = cursor.get("after")
    if isinstance(after, bool) or not isinstance(after, int) or not -1 <= after <= MAX_SAFE_INTEGER:
        fail("Invalid storage cursor: 'after' must be a safe integer id")
    cursor_order = cursor.get("order", order or default)
    if cursor_order not in ("ascending", "descending"):
        fail(f"Invalid storage cursor: order {cursor_order!r}")
    if order is not None and cursor_order != order:
        fail(f"Invalid storage cursor: it continues a {cursor_order} scan, the query asks for {order}")
    return cursor_order, int(after)


def _page(rows: Sequence[tuple[int, Any]], limit: int, order: str) -> dict[str, Any]:
    items = [loads(record) for _, record in rows[:limit]]
    if len(rows) <= limit:
        return {"items": items}
    return {"items": items, "next": {"after": rows[limit - 1][0], "order": order}}


def _optional_filters(
    query: Mapping[str, Any], spec: Sequence[tuple[str, str, Any]]
) -> tuple[tuple[str, ...], list[Any]]:
    used: list[str] = []
    params: list[Any] = []
    for key, column, convert in spec:
        if key in query:
            used.append(column)
            params.append(convert(key, query[key]))
    return tuple(used), params


def _combos(filters: Sequence[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [()]
    for f in filters:
        out += [(*c, f) for c in out]
    return out


class Records:
    """The records facet of a ``Store`` (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        sql = engine.sql
        self._last_seq = sql(LAST_SEQ)
        self._mint = sql(MINT_ID)
        self._claim = sql(CLAIM_ID)
        self._insert_conversation = sql(INSERT_CONVERSATION)
        self._insert_entry = sql(INSERT_ENTRY)
        self._upsert_task = sql(UPSERT_TASK)
        self._upsert_submission = sql(UPSERT_SUBMISSION)
        self._insert_document = sql(INSERT_DOCUMENT)
        self._retire_document = sql(RETIRE_DOCUMENT)
        self._insert_revision = sql(INSERT_REVISION)
        self._drop_revisions = sql(DROP_REVISIONS)
        self._drop_state = sql(DROP_STATE)
        self._latest_revision = sql(LATEST_REVISION)
        self._current_document_id = sql(CURRENT_DOCUMENT_ID)
        self._get_conversation = sql(GET_CONVERSATION)
        self._chain = sql(CHAIN)
        self._get_entry = sql(GET_ENTRY)
        self._head_marker = sql(HEAD_MARKER)
        self._entries = {order: sql(statement) for order, statement in ENTRIES.items()}
        self._get_task = sql(GET_TASK)
        self._get_submission = sql(GET_SUBMISSION)
        self._submission_by_request = sql(SUBMISSION_BY_REQUEST)
        self._get_document_record = sql(GET_DOCUMENT_RECORD)
        self._find_document = {k: sql(v) for k, v in FIND_DOCUMENT.items()}
        self._materialize_sql = sql(MATERIALIZE)
        self._document_scan = {k: sql(v) for k, v in DOCUMENT_SCAN.items()}
        sizes = [1 << n for n in range(ID_CHUNK.bit_length()) if 1 << n <= ID_CHUNK]
        self._id_types = {n: sql(_ids_sql("rec_id", "id, type", n)) for n in sizes}
        self._claim_ids = {n: sql(_claim_sql(n)) for n in sizes}
        self._document_records = {n: sql(_ids_sql("rec_document", "id, record", n)) for n in sizes}
        self._scans = {
            table: {
                (combo, desc): sql(_scan_sql(table, combo, desc))
                for combo in _combos(filters)
                for desc in (False, True)
            }
            for table, filters in (
                ("rec_conversation", CONVERSATION_FILTERS),
                ("rec_task", TASK_FILTERS),
                ("rec_submission", SUBMISSION_FILTERS),
            )
        }

    # -- commits ---------------------------------------------------------------

    def commit(self, writes: Sequence[Mapping[str, Any]]) -> int:
        """Apply ``writes`` atomically; return the batch's commit sequence.

        Sequences are global, gap-free and increasing in commit order.
        ``InvalidRequest`` for a malformed batch, ``Conflict`` for one that
        collides with stored state; either way nothing is written.
        """
        plan = _plan(writes)
        engine = self._engine
        with engine.transaction():
            seq = engine.next_value(COMMIT_SEQUENCE)
            if plan.claims:
                self._claim_and_check_ids(plan.claims)
            revisions = self._check_documents(plan.documents) if plan.documents else []
            if plan.conversations:
                engine.executemany(self._insert_conversation, plan.conversations)
            if plan.entries:
                engine.executemany(self._insert_entry, [(i, c, h, seq, d) for i, c, h, d in plan.entries])
            if plan.tasks:
                engine.executemany(self._upsert_task, plan.tasks)
            if plan.submissions:
                engine.executemany(self._upsert_submission, plan.submissions)
            if plan.documents:
                self._apply_documents(revisions, seq)
        return seq

    def mint_id(self) -> int:
        """A fresh id: above every id minted or committed so far, in any process.

        Never below ``FIRST_MINTED_ID``: the ids under it are reserved for
        well-known records (pi-durable's root conversation is 1, and its
        own storages start minting at 2).
        """
        value = 0
        while value < FIRST_MINTED_ID:  # at most FIRST_MINTED_ID rounds, once per store
            row = self._engine.one(self._mint)
            assert row is not None
            value = int(row[0])
        if value > MAX_SAFE_INTEGER:
            reject("ID space is exhausted")
        return value

    def last_seq(self) -> int:
        """The commit sequence of the latest commit (0 before the first)."""
        row = self._engine.one(self._last_seq)
        return 0 if row is None else int(row[0])

    def _lookup(self, statements: Mapping[int, str], ids: Sequence[int]) -> list[Any]:
        rows: list[Any] = []
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), ID_CHUNK):
            chunk = unique[start : start + ID_CHUNK]
            size = 1 << (len(chunk) - 1).bit_length()
            rows.extend(self._engine.all(statements[size], chunk + [chunk[-1]] * (size - len(chunk))))
        return rows

    def _claim_and_check_ids(self, claims: list[tuple[int, str]]) -> None:
        """Claim the batch's ids and apply the seed's ``_check_global_ids``.

        One id, one record type. The claim and the check are one statement
        per ``ID_CHUNK`` ids (``INSERT ... ON CONFLICT DO NOTHING
        RETURNING id``): ids it took were free; only the others are looked
        up. A refusal raises inside the commit's transaction, which rolls
        the claims back (no statement fails, so nothing is doomed).
        """
        first: dict[int, str] = {}
        for id, table in claims:
            first.setdefault(id, table)
        unique = list(first.items())
        taken: set[int] = set()
        engine = self._engine
        for start in range(0, len(unique), ID_CHUNK):
            chunk = unique[start : start + ID_CHUNK]
            size = 1 << (len(chunk) - 1).bit_length()
            params: list[Any] = []
            for pair in chunk:
                params += pair
            params += chunk[-1] * (size - len(chunk))
            taken.update(int(r[0]) for r in engine.all(self._claim_ids[size], params))
        if len(taken) == len(claims):
            return  # every id new and written once: nothing to check
        before = [id for id in first if id not in taken]
        existing: dict[int, str] = {int(i): str(t) for i, t in self._lookup(self._id_types, before)} if before else {}
        claimed: dict[int, str] = {}
        for id, table in claims:
            have = existing.get(id)
            earlier = claimed.get(id)
            if table in ("conversation", "entry", "document"):
                if have is not None:
                    reject(f"ID {id} already belongs to {have}")
                if earlier is not None:
                    reject(f"ID {id} is written more than once")
            else:
                if have is not None and have != table:
                    reject(f"ID {id} already belongs to {have}")
                if earlier is not None and earlier != table:
                    reject(f"ID {id} is written as two record types")
            claimed[id] = table

    def _check_documents(self, actions: dict[int, _DocAction]) -> list[tuple[_DocAction, Any, Any]]:
        """The seed's ``_check_document_actions`` and copy checks, before any write.

        Returns, per action, its stored record (or None) and its latest
        revision row (or None), for ``_apply_documents``.
        """
        engine = self._engine
        stored = {int(i): loads(r) for i, r in self._lookup(self._document_records, list(actions))}
        live_counts: dict[_Address, int] = {}
        out: list[tuple[_DocAction, Any, Any]] = []
        for id, action in actions.items():
            existing = stored.get(id)
            if action.create is None and existing is None:
                reject(f"Unknown document: {id}")
            if action.create is not None and existing is not None:
                reject(f"Document {id} already exists")
            if existing is not None and "retiredAt" in existing:
                reject(f"Document {id} is retired")
            latest = None
            if existing is not None and action.content is not None:
                latest = engine.one(self._latest_revision, (id,))
            if action.content is not None and action.content.kind == "delta":
                if latest is None:
                    reject(f"Document {id} delta has no base")
                if latest[2] != action.content.version:
                    reject(f"Document {id} version transition requires a base")
            if action.create is not None:
                assert action.address is not None
                address = action.address
            else:
                address = _address(f"document {id}", existing)
            live = live_counts.get(address)
            if live is None:
                live = 0 if engine.one(self._current_document_id, address.params()) is None else 1
            if action.retire and existing is not None:
                live -= 1
            if action.create is not None and not action.retire:
                live += 1
            live_counts[address] = live
            out.append((action, existing, latest))
        if any(live > 1 for live in live_counts.values()):
            reject("Document address already has a current incarnation")
        for action, _existing, _latest in out:
            if action.copy is not None:
                self._check_copy(action)
        return out

    def _check_copy(self, action: _DocAction) -> None:
        """Resolve a fork-copy to a base of the source's value at the point."""
        assert action.copy is not None and action.create is not None
        source_id, at = action.copy
        try:
            source = self._materialize(source_id, at)
        except DurastateError as exc:
            reject(f"Document copy {action.id} was rejected: {exc}")
        if source is None:
            reject(f"Document copy {action.id} was rejected: fork source document {source_id} cannot be read")
        record, create = source["record"], action.create
        if (
            record["scope"]["kind"] != "conversation"
            or create["scope"]["kind"] != "conversation"
            or record["kind"] != create["kind"]
            or record.get("key") != create.get("key")
            or record.get("history") != create.get("history")
            or record.get("fork") != create.get("fork")
        ):
            reject(
                f"Document copy {action.id} was rejected: fork source document {source_id}"
                " does not match the copied record"
            )
        value = source["value"]
        action.content = _Content("base", source["version"], value, None, dumps("the copied value", value))

    def _apply_documents(self, checked: list[tuple[_DocAction, Any, Any]], seq: int) -> None:
        engine = self._engine
        for action, existing, latest in checked:
            id = action.id
            if action.create is not None:
                record: dict[str, Any] = {**action.create, "createdAt": seq}
                if action.retire:
                    record["retiredAt"] = seq
                a = action.address
                assert a is not None
                engine.execute(
                    self._insert_document,
                    (
                        id,
                        a.kind,
                        a.scope_kind,
                        a.owner_id,
                        a.family,
                        a.key_value,
                        seq,
                        seq if action.retire else None,
                        dumps("record", record),
                    ),
                )
            else:
                record = existing
            current_only = _is_current_only(record)
            content = action.content
            if content is not None:
                row: tuple[Any, ...]
                if content.kind == "base":
                    row = (id, seq, "base", content.version, 0, content.data, None)
                else:
                    assert latest is not None and content.ops is not None
                    _seq, kind, _version, depth, body, state = latest
                    value = loads(body if kind == "base" else state)
                    value = _apply(content.ops, value, f"Document {id}")
                    state = dumps("the document value", value)
                    folded = _chord.fold(content.ops, value)
                    data = content.data if folded is content.ops else dumps("the folded delta", folded)
                    row = (id, seq, "delta", content.version, int(depth) + 1, data, state)
                if current_only:
                    if latest is not None:
                        engine.execute(self._drop_revisions, (id,))
                elif latest is not None and latest[1] == "delta" and int(latest[3]) % CHECKPOINT_EVERY != 0:
                    # The previous row is no longer the newest and is not a checkpoint.
                    engine.execute(self._drop_state, (id, latest[0]))
                engine.execute(self._insert_revision, row)
            if action.retire:
                if action.create is None:
                    record = {**record, "retiredAt": seq}
                    engine.execute(self._retire_document, (seq, dumps("record", record), id))
                if current_only:
                    engine.execute(self._drop_revisions, (id,))

    # -- table reads -------------------------------------------------------------

    def _record(self, sql: str, id: Any, name: str = "id") -> Any:
        row = self._engine.one(sql, (_id(name, id),))
        return None if row is None else loads(row[0])

    def conversation(self, id: int) -> dict[str, Any] | None:
        return self._record(self._get_conversation, id)  # type: ignore[no-any-return]

    def scan_conversations(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        query = _obj("query", query)
        limit = _limit(limit)
        order, after = _order(query, cursor, "ascending")
        combo, params = _optional_filters(
            query, (("ownerConversationId", "owner_conversation_id", _id), ("ownerTaskId", "owner_task_id", _id))
        )
        return self._scan("rec_conversation", combo, params, order, after, limit)

    def _scan(
        self, table: str, combo: tuple[str, ...], params: list[Any], order: str, after: int | None, limit: int
    ) -> dict[str, Any]:
        desc = order == "descending"
        start = (MAX_SAFE_INTEGER + 1 if desc else -1) if after is None else after
        rows = self._engine.all(self._scans[table][(combo, desc)], (start, *params, limit + 1))
        return _page(rows, limit, order)

    def _fork_chain(self, conversation_id: int) -> list[tuple[int, Any, Any]]:
        """The fork chain, child first: (id, parent id, parent at) per conversation."""
        rows = self._engine.all(self._chain, (conversation_id, MAX_CHAIN_DEPTH))
        if not rows:
            raise NotFound(f"Unknown conversation: {conversation_id}")
        if len(rows) > MAX_CHAIN_DEPTH:
            reject(f"the fork chain of conversation {conversation_id} is deeper than {MAX_CHAIN_DEPTH} (a cycle?)")
        return [(int(i), None if p is None else int(p), None if a is None else int(a)) for i, p, a in rows]

    def entry(self, id: int, conversation_id: int | None = None) -> dict[str, Any] | None:
        """``{"entry": record, "commitSeq": seq}`` or None.

        With ``conversation_id``, only an entry visible from that
        conversation through its fork chain (at or before each fork point).
        """
        id = _id("id", id)
        chain = None if conversation_id is None else self._fork_chain(_id("conversation_id", conversation_id))
        row = self._engine.one(self._get_entry, (id,))
        if row is None:
            return None
        entry = loads(row[0])
        if chain is not None:
            upper = MAX_SAFE_INTEGER
            owner = entry["conversationId"]
            for conv_id, parent_id, parent_at in chain:
                if conv_id == owner:
                    break
                if parent_id is None:
                    return None
                upper = min(upper, int(parent_at))
            else:
                return None
            if entry["id"] > upper:
                return None
        return {"entry": entry, "commitSeq": int(row[1])}

    def find_latest_head_marker(self, conversation_id: int, at_or_before_entry_id: int | None = None) -> Any:
        """The newest entry with a head marker visible from the conversation."""
        chain = self._fork_chain(_id("conversation_id", conversation_id))
        upper = (
            MAX_SAFE_INTEGER if at_or_before_entry_id is None else _id("at_or_before_entry_id", at_or_before_entry_id)
        )
        for conv_id, parent_id, parent_at in chain:
            row = self._engine.one(self._head_marker, (conv_id, upper))
            if row is not None:
                return loads(row[0])
            if parent_id is None:
                return None
            upper = min(upper, int(parent_at))
        return None

    def scan_entries(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Entries visible from ``query["conversationId"]`` through its fork chain.

        Newest first by default; ``minEntryId``/``maxEntryId`` bound ids.
        """
        query = _obj("query", query)
        limit = _limit(limit)
        order, after = _order(query, cursor, "descending")
        conversation_id = _id("conversationId", query.get("conversationId"))
        lower = _id("minEntryId", query["minEntryId"]) if "minEntryId" in query else None
        upper = _id("maxEntryId", query["maxEntryId"]) if "maxEntryId" in query else None
        chain = self._fork_chain(conversation_id)
        # Segments child first: (conversation, the highest id visible in it).
        segments: list[tuple[int, int | None]] = []
        seg_upper = upper
        if order == "descending" and after is not None:
            seg_upper = min(MAX_SAFE_INTEGER if seg_upper is None else seg_upper, after - 1)
        for conv_id, parent_id, parent_at in chain:
            segments.append((conv_id, seg_upper))
            if parent_id is None:
                break
            seg_upper = int(parent_at) if seg_upper is None else min(seg_upper, int(parent_at))
            if lower is not None and seg_upper < lower:
                break
        if order == "ascending":
            if after is not None:
                lower = after + 1 if lower is None else max(lower, after + 1)
            segments.reverse()
        sql = self._entries["ASC" if order == "ascending" else "DESC"]
        rows: list[Any] = []
        for conv_id, seg in segments:
            rows.extend(
                self._engine.all(
                    sql,
                    (
                        conv_id,
                        -1 if lower is None else lower,
                        MAX_SAFE_INTEGER if seg is None else seg,
                        limit + 1 - len(rows),
                    ),
                )
            )
            if len(rows) > limit:
                break
        return _page(rows, limit, order)

    def task(self, id: int) -> dict[str, Any] | None:
        return self._record(self._get_task, id)  # type: ignore[no-any-return]

    def scan_tasks(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        query = _obj("query", query)
        limit = _limit(limit)
        order, after = _order(query, cursor, "ascending")
        combo, params = _optional_filters(
            query,
            (
                ("conversationId", "conversation_id", _id),
                ("kind", "kind", _text),
                ("status", "status", _text),
                ("abortRequested", "abort_requested", lambda n, v: int(_bool(n, v))),
                ("background", "background", lambda n, v: int(_bool(n, v))),
            ),
        )
        return self._scan("rec_task", combo, params, order, after, limit)

    def submission(self, id: int) -> dict[str, Any] | None:
        return self._record(self._get_submission, id)  # type: ignore[no-any-return]

    def scan_submissions(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        query = _obj("query", query)
        limit = _limit(limit)
        order, after = _order(query, cursor, "ascending")
        combo, params = _optional_filters(
            query, (("conversationId", "conversation_id", _id), ("status", "status", _text))
        )
        return self._scan("rec_submission", combo, params, order, after, limit)

    def submission_by_request(self, conversation_id: int, request_id: str) -> dict[str, Any] | None:
        row = self._engine.one(
            self._submission_by_request,
            (_id("conversation_id", conversation_id), _text("request_id", request_id)),
        )
        return None if row is None else loads(row[0])

    # -- document reads ----------------------------------------------------------

    def find_document(self, address: Mapping[str, Any], at: int | str = "current") -> dict[str, Any] | None:
        """The document record alive at ``address`` at point ``at``, or None."""
        a = _address("address", address)
        point = _point("at", at)
        if point is None:
            row = self._engine.one(self._find_document["current"], a.params())
        else:
            row = self._engine.one(self._find_document["at"], (*a.params(), point, point))
        return None if row is None else loads(row[0])

    def document(self, id: int, at: int | str = "current") -> dict[str, Any] | None:
        """``{"record", "version", "value", "deltasSinceBase"}`` at ``at``, or None.

        None when the document does not exist or is not alive at the point.
        ``InvalidRequest`` for a point-in-time read of a current-only document.
        """
        return self._materialize(_id("id", id), _point("at", at))

    def _materialize(self, id: int, at: int | None) -> dict[str, Any] | None:
        upper = MAX_SAFE_INTEGER if at is None else at
        rows = self._engine.all(self._materialize_sql, (upper, upper, MAX_SAFE_INTEGER + 1, id))
        if not rows:
            return None
        record = loads(rows[0][0])
        if at is not None and _is_current_only(record):
            fail(f"Document {id} does not retain historical content")
        if at is None:
            if "retiredAt" in record:
                return None
        elif not (record["createdAt"] <= at and ("retiredAt" not in record or at < record["retiredAt"])):
            return None
        if rows[0][1] is None:
            raise DurastateError(f"Document {id} is missing a required base")
        _seq, kind, version, depth, content, state = rows[0][1:]
        value = loads(content if kind == "base" else state)
        for _r, _s, kind, v, _depth, content, _state in rows[1:]:
            if kind != "delta" or v != version:
                raise DurastateError(f"Document {id} crosses a stored version boundary without a base")
            try:
                value = _apply(loads(content), value, f"Document {id}", copy=False)
            except Conflict as exc:  # checked at commit: only a corrupt row gets here
                raise DurastateError(f"Document {id}: a stored delta does not apply: {exc}") from exc
        depth = rows[-1][4]  # the newest row read counts the deltas since the base
        return {"record": record, "version": int(version), "value": value, "deltasSinceBase": int(depth)}

    def scan_documents(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Documents of one scope (optionally one kind) alive at ``query["at"]``, by id."""
        query = _obj("query", query)
        limit = _limit(limit)
        scope_kind, owner_id = _scope("query.scope", query.get("scope"))
        _order_ignored, after = _order({}, cursor, "ascending") if cursor is not None else ("ascending", None)
        point = _point("query.at", query.get("at"))
        params: list[Any] = [scope_kind, owner_id, -1 if after is None else after]
        has_kind = "kind" in query
        if has_kind:
            params.append(_text("query.kind", query["kind"]))
        if point is not None:
            params += [point, point]
        rows = self._engine.all(self._document_scan[(has_kind, point is None)], (*params, limit + 1))
        return _page(rows, limit, "ascending")

    # -- listing (read-only, for inspectors) -------------------------------------

    def document_revisions(self, id: int) -> list[dict[str, Any]]:
        """The stored revisions of document ``id``, oldest first.

        Each is ``{"seq", "kind", "version", "depth"}``: the commit sequence
        that wrote it, ``"base"`` or ``"delta"``, the content version and the
        deltas since its base. ``document(id, at=seq)`` reads the value as of
        one of them. ``[]`` for an unknown document.
        """
        id = _id("id", id)
        rows = self._engine.all(self._engine.sql(LIST_REVISIONS), (id,))
        return [{"seq": int(r[0]), "kind": r[1], "version": int(r[2]), "depth": int(r[3])} for r in rows]


LIST_REVISIONS = "SELECT seq, kind, version, depth FROM {p}rec_revision WHERE document_id = ? ORDER BY seq"
