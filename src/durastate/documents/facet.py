"""The ``Documents`` class: the documents facet of a ``Store`` (the model: ``durastate.documents``)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, overload

import orjson

from .._json import JSON_OPTIONS, bad_json_value, has_non_finite, int64_overflow
from .._retention import BATCH, as_age_ms, as_keep
from .._validate import INT64_MAX, as_int64, as_limit, fail, json_sized, positive, prefix_successor, text
from ..engines.base import READ, WRITE, WRITE_ROWS, Migration, Schema, Statement
from ..errors import Conflict, DurastateError, InvalidRequest, WrongType
from . import history as history_sql
from .lock import LOCK_NAME, DocumentLock, LockHolder

if TYPE_CHECKING:
    from ..engines.base import Engine

# The public names are the package's (durastate.documents.__all__).

# Longest key in UTF-8 bytes. Keys lead the primary key index; PostgreSQL
# refuses btree entries over ~2.7 kB, and ``clear`` appends a backup suffix
# (".bak.<n>") that must still fit.
MAX_KEY_SIZE = 2048
DEFAULT_LIST_LIMIT = 1000
DEFAULT_HISTORY_LIMIT = 100

SCHEMA = Schema(
    facet="documents",
    migrations=(
        Migration(
            statements=(
                # Not {without_rowid}: documents can be large, and SQLite
                # advises WITHOUT ROWID only for small rows. {key_text}: keys
                # compare by code point (prefix ranges and cursors need it).
                "CREATE TABLE {p}documents ("
                " key {key_text} PRIMARY KEY, payload {blob} NOT NULL, revision {int64} NOT NULL)",
            ),
        ),
        # 2: stored revision history (empty until a store records).
        Migration(statements=(history_sql.CREATE_TABLE,)),
    ),
)

# -- statements ---------------------------------------------------------------

READ_DOCUMENT = READ("SELECT payload, revision FROM {p}documents WHERE key = ?")
UPSERT = WRITE_ROWS(
    "INSERT INTO {p}documents (key, payload, revision) VALUES (?, ?, 1)"
    " ON CONFLICT (key) DO UPDATE SET payload = excluded.payload, revision = {p}documents.revision + 1"
    " RETURNING revision"
)
CREATE = WRITE_ROWS(
    "INSERT INTO {p}documents (key, payload, revision) VALUES (?, ?, 1) ON CONFLICT (key) DO NOTHING RETURNING revision"
)
CAS = WRITE_ROWS(
    "UPDATE {p}documents SET payload = ?, revision = revision + 1 WHERE key = ? AND revision = ? RETURNING revision"
)
DELETE = WRITE("DELETE FROM {p}documents WHERE key = ?")
DELETE_AT = WRITE("DELETE FROM {p}documents WHERE key = ? AND revision = ?")
DESCRIBE = READ("SELECT revision, length(payload) FROM {p}documents WHERE key = ?")
# Backups of one key: a primary key range, like every prefix query here.
BACKUP_KEYS = READ("SELECT key FROM {p}documents WHERE key >= ? AND key < ?")
# A backup key made by clear(): the base key, then ".bak", then a slot number > 0.
_BACKUP_KEY = re.compile(r"\A(.*)\.bak(?:\.([1-9][0-9]{0,8}))?\Z", re.DOTALL)
# Moves a backup down one slot when a capped clear() rotates them.
RENAME = WRITE("UPDATE {p}documents SET key = ? WHERE key = ?")
# Copies the payload inside the database: clear never decodes it.
COPY_TO = WRITE(
    "INSERT INTO {p}documents (key, payload, revision) SELECT ?, payload, 1 FROM {p}documents WHERE key = ?"
)


def describe_prefix_sql(bounded: bool) -> Statement:
    upper = " AND key < ?" if bounded else ""
    return READ(f"SELECT count(*), COALESCE(sum(length(payload)), 0) FROM {{p}}documents WHERE key >= ?{upper}")


def list_sql(after: bool, bounded: bool) -> Statement:
    """One page of ``list``: keys from the lower bound (exclusive after a cursor)."""
    lower = "key > ?" if after else "key >= ?"
    upper = " AND key < ?" if bounded else ""
    return READ(f"SELECT key, revision, length(payload) FROM {{p}}documents WHERE {lower}{upper} ORDER BY key LIMIT ?")


# -- values ------------------------------------------------------------------


# What ``Documents.read_as`` builds: the caller's own result type.
_Built = TypeVar("_Built")


class Document(NamedTuple):
    """A decoded document and its revision."""

    data: dict[str, Any]
    revision: int


class RawDocument(NamedTuple):
    """A document's stored bytes (compact UTF-8 JSON when written by us) and revision."""

    payload: bytes
    revision: int


class DocumentInfo(NamedTuple):
    """What ``describe``/``list`` say about one document (``size`` in bytes)."""

    key: str
    revision: int
    size: int


_make_tuple = tuple.__new__  # DocumentInfo rows without the NamedTuple's Python __new__ (see ``list``)


@dataclass(frozen=True, slots=True)
class PrefixInfo:
    """``describe(prefix=...)``: how many documents and their total bytes."""

    count: int
    size: int


class Revision(NamedTuple):
    """One recorded revision: its number, when it was written (seconds since the epoch) and its data."""

    revision: int
    written_at: float
    data: dict[str, Any]


class HistoryInfo(NamedTuple):
    """How much of a document's history is recorded: ``recorded`` revisions, ``oldest``..``newest`` (``None``: none)."""

    recorded: int
    oldest: int | None
    newest: int | None


class RevisionPage(NamedTuple):
    """One page of ``history``, newest first; pass ``cursor`` as ``before=`` for the next (``None``: last)."""

    items: list[Revision]
    cursor: int | None


class DocumentPage(NamedTuple):
    """One page of ``list``; ``cursor`` is ``None`` on the last page."""

    items: list[DocumentInfo]
    cursor: str | None


class UnreadableDocument(DurastateError):
    """A stored payload is not valid JSON, or not a JSON object.

    ``key``, ``reason`` and ``revision`` say which and why. The document can
    still be read with ``read_raw``, moved aside with ``clear`` or deleted.
    """

    def __init__(self, key: str, reason: str, revision: int) -> None:
        super().__init__(f"document {key!r} (revision {revision}) is unreadable: {reason}")
        self.key = key
        self.reason = reason
        self.revision = revision


class InvalidDocument(WrongType):
    """``data`` is not a dict, or holds a type JSON cannot represent (bytes, a set, a non-``str`` key).

    A ``WrongType`` (so an ``InvalidRequest``, a ``ValueError``, and a
    ``TypeError``, which is what ``json.dumps`` raises for the same input).
    A value of a JSON type that JSON still cannot hold (NaN, an integer
    outside signed 64 bits, a lone surrogate, nesting too deep, too large)
    is a plain ``InvalidRequest``.
    """


# -- encoding ----------------------------------------------------------------


def _refuse(value: Any) -> Any:
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


# The first try of ``encode_document``: orjson refuses integers of 53 bits or more.
_NARROW_OPTIONS = JSON_OPTIONS | orjson.OPT_STRICT_INTEGER


def _encode_wide(data: dict[str, Any]) -> bytes:
    """``data`` as JSON with every integer orjson writes (up to 64 bits unsigned), or the refusal."""
    try:
        return orjson.dumps(data, default=_refuse, option=JSON_OPTIONS)
    except orjson.JSONEncodeError as exc:
        message = str(exc)
        if bad_json_value(message):
            raise InvalidRequest(f"document cannot be stored as JSON: {message}") from None
        raise InvalidDocument(f"document cannot be stored as JSON: {message}") from None


def encode_document(data: Any, max_size: int | None = None) -> bytes:
    """``data`` (a dict) as compact UTF-8 JSON bytes, or ``InvalidRequest``."""
    if not isinstance(data, dict):
        raise InvalidDocument(f"a document must be a dict (a JSON object), got {type(data).__name__}")
    # Encoded first with integers limited to 53 bits: a document that has
    # none wider (nearly every one) cannot hold one outside signed 64 bits,
    # so it skips that check (a copy and a scan of the whole text, ~7,000
    # instructions on a 400-byte document: "docwrite"). One that has a wider
    # integer, or that orjson refuses, is encoded again without the limit:
    # the same bytes, the same refusals and messages as before.
    try:
        blob = orjson.dumps(data, default=_refuse, option=_NARROW_OPTIONS)
        wide = False
    except orjson.JSONEncodeError:
        blob = _encode_wide(data)
        wide = True
    # orjson writes NaN and infinities as null; JSON has no way to say them,
    # so refuse rather than change the value. Only a payload with a null in
    # it can hide one. Then decoding it back (C speed) and comparing tells
    # whether anything changed on the way; only when it did (a NaN, or just
    # a tuple that became a list, a UUID that became a string) does the
    # slower walk decide.
    if b"null" in blob and orjson.loads(blob) != data and has_non_finite(data):
        raise InvalidRequest("document cannot be stored as JSON: it contains NaN or an infinity")
    if wide and int64_overflow(blob, data):
        raise InvalidRequest("document cannot be stored as JSON: it holds an integer outside signed 64 bits")
    return json_sized("document", blob, max_size)


def decode_document(key: str, payload: Any, revision: int) -> dict[str, Any]:
    """The object stored in ``payload``, or ``UnreadableDocument``."""
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise UnreadableDocument(key, str(exc), revision) from None
    if type(data) is not dict:
        raise UnreadableDocument(key, f"expected an object, found {type(data).__name__}", revision)
    return data


def check_key(key: Any, name: str = "key") -> str:
    """``key`` if it is a valid document key (``_validate.text`` rules, ``MAX_KEY_SIZE`` bytes)."""
    return text(name, key, limit=MAX_KEY_SIZE)


def _check_expect(expect: Any) -> int:
    value = as_int64("expect", expect)
    if value < 0:
        fail(f"expect must be a revision >= 1, 0 (create only) or None, got {value}")
    return value


# -- the facet -----------------------------------------------------------------


class Documents:
    """The documents facet of a ``Store`` (see the module docstring).

    Every method validates its arguments first and raises
    ``durastate.InvalidRequest`` naming the bad one; a rejected call writes
    nothing and never dooms the caller's transaction.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_value_size: int | None = None,
        max_backups: int | None = None,
        keep_revisions: int | None = None,
    ) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        # The retention cap on clear()'s backups per key (None: unbounded, as the seed).
        self.max_backups = None if max_backups is None else as_keep("max_backups", max_backups)
        # Revisions recorded per document, the current one included (None: record none).
        self.keep_revisions = None if keep_revisions is None else as_keep("keep_revisions", keep_revisions)
        sql = engine.sql
        self._read = sql(READ_DOCUMENT)
        self._upsert = sql(UPSERT)
        self._create = sql(CREATE)
        self._cas = sql(CAS)
        self._delete = sql(DELETE)
        self._delete_at = sql(DELETE_AT)
        self._describe = sql(DESCRIBE)
        self._backup_keys = sql(BACKUP_KEYS)
        self._copy_to = sql(COPY_TO)
        self._rename = sql(RENAME)
        self._describe_prefix = {b: sql(describe_prefix_sql(b)) for b in (False, True)}
        self._list = {(a, b): sql(list_sql(a, b)) for a in (False, True) for b in (False, True)}
        self._history = {name: sql(statement) for name, statement in history_sql.STATEMENTS.items()}
        self._holder = LockHolder()

    # -- the statement texts (benchmarks run the very same ones) --------------

    @property
    def statements(self) -> dict[str, str]:
        """The compiled texts of the hot statements, by operation name."""
        return {
            "read": self._read,
            "upsert": self._upsert,
            "create": self._create,
            "cas": self._cas,
            "delete": self._delete,
        }

    # -- helpers ---------------------------------------------------------------

    def _guard_write(self) -> None:
        """Take the facet lock before a write inside a transaction (see "The lock")."""
        if self._engine.in_transaction() and self._holder.taker is None:
            self._engine.lock(LOCK_NAME)

    def _atomic(self) -> AbstractContextManager[None]:
        """Make a recording write's statements one transaction.

        Inside the caller's transaction: that one, under the facet lock as
        any write there. Outside: a transaction of its own, without the
        facet lock: it touches one document's rows, always the document row
        first, so it cannot close a wait cycle (and PostgreSQL writers of
        other keys do not queue behind it).
        """
        if self._engine.in_transaction():
            self._guard_write()
            return nullcontext()
        return self._engine.transaction()

    # -- reads -------------------------------------------------------------------

    def read(self, key: str, *, revision: int | None = None) -> Document | None:
        """The document at ``key``, or ``None``; ``UnreadableDocument`` if it cannot be decoded.

        ``revision=n`` (>= 1): the document as it was at revision ``n``: the
        document itself when it is at ``n``, else its recorded revision
        ``n`` (see "Revision history"); ``None`` when neither exists (not
        recorded, pruned, above the current revision, or the key is absent).
        """
        if revision is None:
            return self.read_as(key, Document)
        key = check_key(key)
        revision = positive("revision", revision)
        row = self._engine.one(self._history["read_revision"], (key, revision, key, revision, key))
        if row is None:
            return None
        (payload,) = row
        return Document(decode_document(key, payload, revision), revision)

    def history(self, key: str, *, limit: int = DEFAULT_HISTORY_LIMIT, before: int | None = None) -> RevisionPage:
        """Up to ``limit`` recorded revisions of ``key``, newest first, below ``before`` if given.

        What was recorded (see "Revision history"), whatever this store's
        own setting: an empty page when nothing was, or the key is absent.
        Pass the page's ``cursor`` as ``before=`` for the next page. A page
        is one statement. ``UnreadableDocument`` for a recorded payload that
        does not decode (only another program can write one).
        """
        key = check_key(key)
        limit = min(positive("limit", limit), 2**31)
        if before is None:
            rows = self._engine.all(self._history["page"], (key, key, limit + 1))
        else:
            before = positive("before", before)
            rows = self._engine.all(self._history["page_before"], (key, key, before, limit + 1))
        items = [
            Revision(int(number), int(written_at) / 1000, decode_document(key, payload, int(number)))
            for number, written_at, payload in rows[:limit]
        ]
        return RevisionPage(items, items[-1].revision if len(rows) > limit else None)

    def describe_history(self, key: str) -> HistoryInfo:
        """How many revisions of ``key`` are recorded, and the oldest and newest (one statement, no payloads)."""
        key = check_key(key)
        row = self._engine.one(self._history["describe"], (key, key))
        assert row is not None
        recorded, oldest, newest = row
        return HistoryInfo(
            int(recorded), None if oldest is None else int(oldest), None if newest is None else int(newest)
        )

    def read_as(self, key: str, build: Callable[[dict[str, Any], int], _Built]) -> _Built | None:
        """``build(data, revision)`` of the document at ``key``, or ``None``; as ``read``.

        For adapters that return their own result type (``compat.functualize``'s
        ``Stored``): one object per read instead of a ``Document`` and a copy.
        ``build`` must be callable (``InvalidRequest`` otherwise).
        """
        if not callable(build):
            fail(f"build must be callable (data, revision) -> result, got {type(build).__name__}")
        if type(key) is not str or not key.isascii() or len(key) > MAX_KEY_SIZE or "\x00" in key:
            key = check_key(key)
        row = self._engine.one(self._read, (key,))
        if row is None:
            return None
        payload, revision = row
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise UnreadableDocument(key, str(exc), revision) from None
        if type(data) is not dict:
            raise UnreadableDocument(key, f"expected an object, found {type(data).__name__}", revision)
        if build is Document:  # read(): the tuple made in C, not by the NamedTuple's Python __new__ ("docwrite")
            return _make_tuple(Document, (data, revision))  # type: ignore[return-value]  # build is Document: _Built is it
        return build(data, revision)

    def read_raw(self, key: str) -> RawDocument | None:
        """The stored bytes and revision at ``key`` (never decoded), or ``None``."""
        key = check_key(key)
        row = self._engine.one(self._read, (key,))
        if row is None:
            return None
        return RawDocument(bytes(row[0]), row[1])

    @overload
    def describe(self, key: str) -> DocumentInfo | None: ...

    @overload
    def describe(self, *, prefix: str) -> PrefixInfo: ...

    def describe(self, key: str | None = None, *, prefix: str | None = None) -> DocumentInfo | PrefixInfo | None:
        """``describe(key)``: one document's revision and size (``None`` if absent);
        ``describe(prefix=p)``: count and total bytes of the keys starting with ``p``.
        """
        if (key is None) == (prefix is None):
            fail("describe() takes a key or prefix=, exactly one of them")
        if key is not None:
            key = check_key(key)
            row = self._engine.one(self._describe, (key,))
            if row is None:
                return None
            return DocumentInfo(key, int(row[0]), int(row[1]))
        assert prefix is not None
        prefix = check_key(prefix, "prefix")
        upper = prefix_successor(prefix)
        params = (prefix,) if upper is None else (prefix, upper)
        row = self._engine.one(self._describe_prefix[upper is not None], params)
        assert row is not None
        return PrefixInfo(int(row[0]), int(row[1]))

    def list(self, prefix: str = "", *, limit: int = DEFAULT_LIST_LIMIT, cursor: str | None = None) -> DocumentPage:
        """Up to ``limit`` documents whose key starts with ``prefix``, in key order, after ``cursor``."""
        prefix = check_key(prefix, "prefix")
        limit = positive("limit", limit)
        limit = min(int(limit), 2**31)
        if cursor is not None:
            cursor = check_key(cursor, "cursor")
        upper = prefix_successor(prefix)
        if upper is not None and cursor is not None and cursor >= upper:
            return DocumentPage([], None)
        after = cursor is not None and cursor >= prefix
        lower = cursor if after else prefix
        params: tuple[Any, ...] = (lower,) if upper is None else (lower, upper)
        rows = self._engine.all(self._list[(after, upper is not None)], (*params, limit + 1))
        # tuple.__new__ straight from the (key, revision, length) rows, both
        # int columns already ``int``: DocumentInfo(...) runs the NamedTuple's
        # Python __new__ per row, a quarter of a 100-document page.
        items: list[DocumentInfo] = list(map(_make_tuple, itertools.repeat(DocumentInfo, min(len(rows), limit)), rows))
        more = len(rows) > limit
        return DocumentPage(items, items[-1].key if more else None)

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with ``prefix``, in order, streamed page by page."""
        cursor: str | None = None
        while True:
            page = self.list(prefix, cursor=cursor)
            for item in page.items:
                yield item.key
            if page.cursor is None:
                return
            cursor = page.cursor

    # -- writes ------------------------------------------------------------------

    def write(self, key: str, data: dict[str, Any], *, expect: int | None = None) -> int:
        """Store ``data`` at ``key``; return the new revision.

        ``expect=None``: unconditional. ``expect=rev`` (>= 1): only if the
        document is at that revision. ``expect=0``: only if ``key`` is
        absent. A refused write raises ``Conflict`` and changes nothing.
        """
        if type(key) is not str or not key.isascii() or len(key) > MAX_KEY_SIZE or "\x00" in key:
            key = check_key(key)
        blob = encode_document(data, self.max_value_size)
        if self.keep_revisions is None:
            return self._put(key, blob, expect, True)
        with self._atomic():
            revision = self._put(key, blob, expect, False)
            history_sql.record(self._engine, self._history, key, revision, blob, self.keep_revisions)
        return revision

    def _put(self, key: str, blob: bytes, expect: Any, guard: bool) -> int:
        """The document row of ``write`` (``guard``: take the facet lock inside a transaction)."""
        engine = self._engine
        # ``taker`` (a thread-local read) only inside a transaction: no lock() block outside one.
        if guard and engine.in_transaction() and self._holder.taker is None:
            engine.lock(LOCK_NAME)
        if expect is None:
            row = engine.one(self._upsert, (key, blob))
        elif type(expect) is int and 0 < expect <= INT64_MAX:  # the common CAS, checked inline
            row = engine.one(self._cas, (blob, key, expect))
            if row is None:
                raise Conflict(f"document {key!r} is not at revision {expect} (changed or deleted meanwhile)")
        else:
            expect = _check_expect(expect)
            # expect=0: create only; else compare and swap. One statement each.
            row = engine.one(self._create, (key, blob)) if expect == 0 else engine.one(self._cas, (blob, key, expect))
            if row is None:
                if expect == 0:
                    raise Conflict(f"document {key!r} already exists (write with expect=0 creates only)")
                raise Conflict(f"document {key!r} is not at revision {expect} (changed or deleted meanwhile)")
        assert row is not None
        revision: int = row[0]
        return revision

    def delete(self, key: str, *, expect: int | None = None) -> bool:
        """Remove ``key``; whether a document was removed (``expect=rev``: only at that revision)."""
        key = check_key(key)
        if expect is not None:
            expect = _check_expect(expect)
        if self.keep_revisions is None:
            self._guard_write()
            return self._remove(key, expect)
        with self._atomic():
            removed = self._remove(key, expect)
            if removed:
                self._engine.execute(self._history["forget"], (key,))
        return removed

    def _remove(self, key: str, expect: int | None) -> bool:
        if expect is None:
            return self._engine.execute(self._delete, (key,)) > 0
        return self._engine.execute(self._delete_at, (key, expect)) > 0

    def clear(self, key: str) -> str | None:
        """Move ``key``'s payload, undecoded, to the first free backup key; return that key.

        Backup keys are ``key.bak``, ``key.bak.1``, ``key.bak.2``, ... ``None``
        when ``key`` is absent. The copy and the removal are one transaction
        under the facet lock. With ``max_backups=N`` (the store's retention
        policy) a key keeps at most N backups, in the slots ``key.bak`` ..
        ``key.bak.{N-1}``, newest in the highest: when all N are taken the
        oldest (``key.bak``) is dropped and the others move down one slot.
        """
        key = check_key(key)
        base = key + ".bak"
        engine = self._engine
        with self.lock(key):
            if engine.one(self._describe, (key,)) is None:
                return None
            upper = prefix_successor(base)
            taken = {row[0] for row in engine.all(self._backup_keys, (base, upper))}
            backup = base
            index = 1
            while backup in taken:
                backup = f"{base}.{index}"
                index += 1
            cap = self.max_backups
            slots: list[str] = []  # the backups a capped clear() rotates
            if cap is not None and index > cap:
                slots = [base, *(f"{base}.{i}" for i in range(1, cap))]
                engine.execute(self._delete, (slots[0],))
                for lower, higher in itertools.pairwise(slots):
                    engine.execute(self._rename, (lower, higher))
                backup = slots[-1]
            if len(backup.encode("utf-8")) > MAX_KEY_SIZE:
                # Raised inside the lock: the transaction rolls back, nothing changed.
                fail(
                    f"the backup key of {key!r:.100} would be {len(backup.encode('utf-8'))} bytes; "
                    f"keys are limited to {MAX_KEY_SIZE}: delete it instead, or read_raw it first"
                )
            engine.execute(self._copy_to, (backup, key))
            engine.execute(self._delete, (key,))
            if self.keep_revisions is not None:
                # The history ends with the document; the backups (moved, new or
                # dropped) start without one.
                for touched in dict.fromkeys([key, backup, *slots]):
                    engine.execute(self._history["forget"], (touched,))
            return backup

    def prune_backups(self, keep: int, *, limit: int | None = None) -> int:
        """Delete all but the newest ``keep`` backups of every key; return how many went.

        A backup is a key ``K.bak`` or ``K.bak.<n>`` (see ``clear``); the
        newest are the highest slots. Reads every key once (in pages, by key)
        and deletes in batches of ``durastate._retention.BATCH`` keys, each
        its own short commit; at most ``limit`` in all.
        """
        keep = as_keep("keep", keep)
        limit = as_limit("limit", limit)
        slots: dict[str, list[tuple[int, str]]] = {}
        for key in self.iter_keys():
            match = _BACKUP_KEY.match(key)
            if match is not None:
                slot = 0 if match.group(2) is None else int(match.group(2))
                slots.setdefault(match.group(1), []).append((slot, key))
        doomed = [key for found in slots.values() for _, key in sorted(found)[:-keep]]
        if limit is not None:
            doomed = doomed[:limit]
        engine = self._engine
        removed = 0
        for start in range(0, len(doomed), BATCH):
            with engine.transaction():
                removed += sum(engine.execute(self._delete, (key,)) for key in doomed[start : start + BATCH])
        return removed

    def prune_history(self, keep: int, *, older_than: float | None = None, limit: int | None = None) -> int:
        """Delete recorded revisions the history no longer keeps; return how many went.

        Deleted: revisions more than ``keep`` behind their document's
        current one; with ``older_than`` (seconds), revisions recorded longer
        ago than that, except each document's current revision; and rows
        that no longer belong to a document (it is gone, or they are above
        its current revision: left by an earlier life of the key that a
        store that does not record deleted). Works whatever this store's own
        setting. Reads the history table once, in primary-key pages, and
        deletes in batches of ``durastate._retention.BATCH`` rows, each its
        own short commit; at most ``limit`` in all.
        """
        keep = as_keep("keep", keep)
        age_ms = None if older_than is None else as_age_ms("older_than", older_than)
        limit = as_limit("limit", limit)
        cutoff = None if age_ms is None else self._engine.now_ms() - age_ms
        return history_sql.prune(self._engine, self._history, keep, cutoff, limit)

    # -- the lock ----------------------------------------------------------------

    def lock(self, *keys: str) -> DocumentLock:
        """Hold ONE transaction covering every key named (see "The lock"): a block, ``with documents.lock(...):``.

        Everything this thread does inside the block (on any facet) commits
        when the outermost block ends normally and rolls back on any
        exception. Nested blocks are savepoints of the same transaction. The
        object is one block at a time (``DocumentLock``: entering it twice,
        is refused with ``InvalidRequest``; ending it out of order rolls back).
        """
        for key in keys:
            check_key(key)
        return DocumentLock(self._engine, self._holder)
