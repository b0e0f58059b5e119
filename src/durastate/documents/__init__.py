"""``store.documents``: JSON documents with a revision per key.

The storage model of a workflow engine's documents (functualize's
``StoreSubstrate``): one JSON object per string key, and an integer
*revision* that every write bumps (1 for a new key, +1 for each later
write), so a reader can write back "only if nobody wrote meanwhile"::

    doc = store.documents.read("run/42")           # Document(data, revision) or None
    store.documents.write("run/42", {"step": 3}, expect=doc.revision)   # CAS, one statement
    store.documents.write("run/43", {"step": 0}, expect=0)              # create-only

    with store.documents.lock("run/42", "scope/7"):   # one transaction over both keys
        ...read, decide, write...

Operations:

* ``read(key)`` -> ``Document(data, revision)`` or ``None``. A stored payload
  that is not valid JSON, or is JSON but not an object, raises
  ``UnreadableDocument`` (it can still be ``read_raw``, ``clear``-ed or
  ``delete``-d). ``read_raw(key)`` -> ``RawDocument(payload, revision)``.
* ``write(key, data, expect=None)`` -> the new revision. ``expect=None``
  writes unconditionally; ``expect=rev`` writes only if the document is at
  revision ``rev`` (compare and swap in ONE statement, so it is exact
  without holding any lock); ``expect=0`` writes only if the key is absent.
  A refused write raises ``durastate.Conflict`` and changes nothing.
* ``lock(*keys)``: a context manager holding ONE transaction that covers every
  key it names (and in fact every document of this store prefix: see "The
  lock"). Re-entrant: a nested ``lock`` (any keys) is a savepoint of the
  same transaction and takes no second lock.
* ``clear(key)``: copies the payload byte for byte to the first free backup
  key (``key.bak``, then ``key.bak.1``, ``key.bak.2``, ...; revision 1) and
  removes the original, atomically, without decoding it: the escape hatch
  for exactly the payloads ``read`` refuses. Returns the backup key, or
  ``None`` if ``key`` was absent. A key so long that its backup key would
  pass ``MAX_KEY_SIZE`` is refused (``InvalidRequest``; nothing changes).
* ``delete(key, expect=None)`` -> whether a document was removed
  (``expect=rev``: only at that revision).
* ``describe(key)`` -> ``DocumentInfo(key, revision, size)`` or ``None``;
  ``describe(prefix=p)`` -> ``PrefixInfo(count, size)`` over every key that
  starts with ``p``. ``size`` is the stored payload's length in bytes.
* ``history(key, limit=100, before=None)`` -> ``RevisionPage(items,
  cursor)``: the key's recorded revisions (``Revision(revision, written_at,
  data)``), newest first; ``read(key, revision=n)`` -> ``Document`` or
  ``None``; ``describe_history(key)`` -> ``HistoryInfo(recorded, oldest,
  newest)``. See "Revision history".
* ``list(prefix="", limit=1000, cursor=None)`` -> ``DocumentPage(items,
  cursor)``: ``DocumentInfo`` of keys starting with ``prefix`` in key order
  (Unicode code point order, the same on every engine); pass the returned
  ``cursor`` (the last key, or ``None`` at the end) to get the next page.
  ``iter_keys(prefix)`` streams every matching key page by page. A page is
  read by one statement; paging is not a snapshot (keys written between
  pages after the cursor are seen, keys before it are not).

All of it takes part in ``store.transaction()``: a document write lands or
rolls back together with kv, queue and other writes of the block.

Design decisions (where the seed and DESIGN are silent):

* **Encoding.** ``data`` must be a ``dict`` (subclasses accepted) and is
  stored as compact UTF-8 JSON (orjson) in a BLOB/BYTEA column: the exact
  bytes, so ``clear`` moves a payload without decoding it and ``read``
  reports an undecodable one instead of failing inside the driver. Refused
  before anything is written. A wrong *type* is ``InvalidDocument`` (a
  ``WrongType``: ``InvalidRequest`` and ``TypeError``): ``data`` that is not
  a dict, values JSON cannot represent (sets, bytes, datetimes,
  dataclasses, arbitrary objects), dict keys that are not ``str``. A bad
  *value* of a JSON type is a plain ``InvalidRequest``: NaN and infinities
  (orjson would quietly write ``null``), strings with lone surrogates,
  integers outside 64 bits, nesting deeper than 255, and payloads over
  ``max_value_size`` (the store option).
  ``uuid.UUID`` and ``enum.Enum`` members are written as orjson writes them
  (the string / the member's value).
* **Keys** are ``str``, may be empty, at most ``MAX_KEY_SIZE`` UTF-8 bytes,
  with no lone surrogates and no NUL (PostgreSQL's TEXT cannot hold NUL; the
  contract is the same on both engines). Keys sort by code point on both
  engines (PostgreSQL: the column is ``COLLATE "C"``), which is what makes
  prefix ranges and ``list`` cursors exact.
* **Prefix queries use the primary key range** ``key >= prefix AND key <
  successor(prefix)`` (the successor bumps the last code point), never
  ``LIKE``: no wildcard surprises with ``_`` or ``%`` in keys, and the cost
  follows the number of matching keys, not the table.
* **Revisions** start at 1 and never repeat for a live key; a deleted and
  re-created key starts again at 1 (a revision compares states of one
  document, it is not a global clock). A backup made by ``clear`` starts at 1.

Revision history (off unless the store's ``Retention(document_history=N)``
turns it on; ``durastate.documents.history`` has the table and statements):

* A recording store writes every revision it makes twice: the document row,
  and a history row ``(key, revision, written_at, payload)`` in the same
  transaction (a write outside one gets its own). ``written_at`` is the
  store clock (seconds since the epoch in ``Revision``).
* Bounded in passing: each recording write deletes its document's history
  more than ``N`` revisions behind, so a document keeps at most its last
  ``N`` revisions, the current one included. ``delete`` and ``clear``
  delete the document's history with it (a re-created key starts a new
  history at revision 1; a backup starts without one). ``prune_history``
  (run by ``store.maintain()``, with ``Retention(document_history_max_age=)``
  also by age, never a document's current revision) removes the rest.
* ``history`` and ``read(revision=)`` read what was recorded, whatever this
  store's setting: rows that belong to the document as it exists now (a
  revision at or below its current one). A store that does not record
  writes no history rows and takes no extra statement (the default path is
  unchanged): turn it on in every process that writes the documents whose
  history you want. Revisions written by a store that does not record are
  missing from the history (the numbers show the gap), and if such a store
  deletes and re-creates a key, rows of the key's earlier life may show
  until a recording write at revision 1 or ``prune_history`` replaces them.

The lock (deadlock-free by construction): there is exactly ONE lock for the
whole facet (per table prefix), as in the seed, so two callers naming the
same keys in opposite orders can never wait for each other in a cycle.

* ``lock`` opens ``engine.transaction()`` and takes the engine's cross-key
  lock ``engine.lock(LOCK_NAME)`` before any document statement (SQLite: the
  transaction's ``BEGIN IMMEDIATE`` is already the database's single write
  lock; PostgreSQL: a transaction-scoped advisory lock keyed by the name,
  schema and table prefix). Every document *write*
  made inside some other transaction (``store.transaction()`` without
  ``lock``) takes the same advisory lock first, so two transactions that
  write documents in opposite orders also serialise instead of deadlocking
  on row locks. A single write outside a transaction holds one row lock for
  one statement and cannot close a cycle. (Cycles *across* facets - a
  transaction that holds a kv row another one needs - are outside what this
  facet can rule out.)
* Re-entrancy comes from ``engine.transaction()`` nesting; a per-thread
  record of the ``lock`` block that took the advisory lock
  (``lock.LockHolder``) means a nested ``lock`` (or a write inside a
  ``lock``) does not issue it again.
* ``lock(...)`` returns a ``DocumentLock``, one block at a time like a
  ``store.transaction()`` object: entering it again while it is open, or
  ending it when it is not open or from another thread, raises
  ``InvalidRequest`` and leaves every open block (and the lock) as it was;
  ending it before a block opened inside it has ended rolls both back.
* Waiting for the lock is bounded by the store's ``busy_timeout``
  (``StoreUnavailable`` after it), on both engines.
"""

from __future__ import annotations

from .._validate import prefix_successor as prefix_successor
from .facet import BACKUP_KEYS as BACKUP_KEYS
from .facet import CAS as CAS
from .facet import COPY_TO as COPY_TO
from .facet import CREATE as CREATE
from .facet import DEFAULT_HISTORY_LIMIT as DEFAULT_HISTORY_LIMIT
from .facet import DEFAULT_LIST_LIMIT as DEFAULT_LIST_LIMIT
from .facet import DELETE as DELETE
from .facet import DELETE_AT as DELETE_AT
from .facet import DESCRIBE as DESCRIBE
from .facet import MAX_KEY_SIZE as MAX_KEY_SIZE
from .facet import READ_DOCUMENT as READ_DOCUMENT
from .facet import RENAME as RENAME
from .facet import SCHEMA as SCHEMA
from .facet import UPSERT as UPSERT
from .facet import Document as Document
from .facet import DocumentInfo as DocumentInfo
from .facet import DocumentPage as DocumentPage
from .facet import Documents as Documents
from .facet import HistoryInfo as HistoryInfo
from .facet import InvalidDocument as InvalidDocument
from .facet import PrefixInfo as PrefixInfo
from .facet import RawDocument as RawDocument
from .facet import Revision as Revision
from .facet import RevisionPage as RevisionPage
from .facet import UnreadableDocument as UnreadableDocument
from .facet import check_key as check_key
from .facet import decode_document as decode_document
from .facet import describe_prefix_sql as describe_prefix_sql
from .facet import encode_document as encode_document
from .facet import list_sql as list_sql
from .lock import LOCK_NAME as LOCK_NAME
from .lock import DocumentLock as DocumentLock

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_LIST_LIMIT",
    "Document",
    "DocumentInfo",
    "DocumentLock",
    "DocumentPage",
    "HistoryInfo",
    "Documents",
    "InvalidDocument",
    "MAX_KEY_SIZE",
    "PrefixInfo",
    "RawDocument",
    "Revision",
    "RevisionPage",
    "SCHEMA",
    "UnreadableDocument",
    "decode_document",
    "encode_document",
    "prefix_successor",
]
