"""The stored revision history of ``store.documents``: its table, statements and pruning.

Off unless the store's ``Retention(document_history=N)`` turns it on (see
``durastate.documents``, "Revision history", for the contract). This module
holds what the facet runs for it, so that ``documents.facet`` stays one idea:

``{p}document_revision`` has one row per recorded revision: ``(key,
revision)`` is the primary key (an index range per document, newest last),
``written_at`` the store clock's milliseconds when that revision was
written, ``payload`` its bytes exactly as the document table held them.
Every revision a recording store writes is a row, the current one
included, so a history page is one index range of one table (joined to the
document row, which decides what still belongs to the document).

Bounded three ways: each recording write deletes its document's rows more
than ``N`` revisions behind (one primary-key range, in the write's own
transaction), ``delete``/``clear`` delete the document's rows with it, and
``prune`` (``store.maintain()``) walks the table for the rest: rows whose
document is gone or was re-created since (written by a store that did not
record), rows more than ``keep`` behind, rows older than a cutoff (except
each document's current revision).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._retention import BATCH
from .._validate import INT64_MIN
from ..engines.base import READ, WRITE, Statement

if TYPE_CHECKING:
    from ..engines.base import Engine, Row

# The table, created by the documents facet's second migration.
CREATE_TABLE = (
    "CREATE TABLE {p}document_revision ("
    " key {key_text} NOT NULL, revision {int64} NOT NULL, written_at {int64} NOT NULL, payload {blob} NOT NULL,"
    " PRIMARY KEY (key, revision))"
)

# A revision just written. An upsert: a row left at this (key, revision) by
# an earlier life of the key (deleted by a store that did not record, then
# re-created) is replaced, not a constraint error.
RECORD = WRITE(
    "INSERT INTO {p}document_revision (key, revision, written_at, payload) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (key, revision) DO UPDATE SET written_at = excluded.written_at, payload = excluded.payload"
)
# The in-passing bound in one statement: the document's row ``keep`` revisions
# behind becomes the new revision (its slot reused: no insert and delete).
# Not when a row already holds the new revision (left by an earlier life of
# the key): that would break the primary key; ``RECORD`` replaces it instead.
# Parameters: revision, written_at, payload, key, revision - keep, key, revision.
RECYCLE = WRITE(
    "UPDATE {p}document_revision SET revision = ?, written_at = ?, payload = ? WHERE key = ? AND revision = ?"
    " AND NOT EXISTS (SELECT 1 FROM {p}document_revision taken WHERE taken.key = ? AND taken.revision = ?)"
)
# Rows of one document at or below a revision: the in-passing bound.
TRIM = WRITE("DELETE FROM {p}document_revision WHERE key = ? AND revision <= ?")
# Every row of one document: it was deleted, cleared, or is being created anew.
FORGET = WRITE("DELETE FROM {p}document_revision WHERE key = ?")
# One row the maintenance walk chose, if it is still doomed: the walk reads
# outside the delete's transaction, so the test is made again by the delete
# itself (a key re-created meanwhile keeps its new rows). Parameters: key,
# revision, keep, cutoff_ms (INT64_MIN: no age rule).
_LIVE_OF_ROW = "(SELECT d.revision FROM {p}documents d WHERE d.key = h.key)"
DELETE_DOOMED = WRITE(
    "DELETE FROM {p}document_revision AS h WHERE h.key = ? AND h.revision = ? AND ("
    f" h.revision > COALESCE({_LIVE_OF_ROW}, 0)"
    f" OR h.revision <= {_LIVE_OF_ROW} - ?"
    f" OR (h.written_at < ? AND h.revision <> {_LIVE_OF_ROW}))"
)

# A row belongs to the document while the document exists at that revision
# or later: the bound leaves out what an earlier life of the key left behind.
# A scalar subquery, not a join, so the page is read in index order (no sort).
_LIVE = "(SELECT d.revision FROM {p}documents d WHERE d.key = ?)"


def page_sql(before: bool) -> Statement:
    """A page of one document's history, newest first. Parameters: key, key, [before,] limit."""
    bound = " AND revision < ?" if before else ""
    return READ(
        "SELECT revision, written_at, payload FROM {p}document_revision"
        f" WHERE key = ? AND revision <= {_LIVE}{bound} ORDER BY revision DESC LIMIT ?"
    )


# How much of one document's history is recorded (no payload read).
DESCRIBE = READ(
    f"SELECT count(*), min(revision), max(revision) FROM {{p}}document_revision WHERE key = ? AND revision <= {_LIVE}"
)

# One revision: the document itself when it is at that revision, else its
# recorded row (one statement, so one snapshot decides). Parameters: key,
# revision, key, revision, key.
READ_REVISION = READ(
    "SELECT payload FROM {p}documents WHERE key = ? AND revision = ?"
    " UNION ALL SELECT payload FROM {p}document_revision"
    f" WHERE key = ? AND revision = ? AND revision < {_LIVE}"
)

# The maintenance walk: rows by primary key, with their document's revision
# (NULL: the document is gone).
_WALK = (
    "SELECT h.key, h.revision, h.written_at, d.revision AS live FROM {p}document_revision h"
    " LEFT JOIN {p}documents d ON d.key = h.key"
)
WALK_FIRST = READ(f"{_WALK} ORDER BY h.key, h.revision LIMIT ?")
WALK_AFTER = READ(f"{_WALK} WHERE (h.key, h.revision) > (?, ?) ORDER BY h.key, h.revision LIMIT ?")

STATEMENTS: dict[str, Statement] = {
    "record": RECORD,
    "recycle": RECYCLE,
    "trim": TRIM,
    "forget": FORGET,
    "delete_doomed": DELETE_DOOMED,
    "page": page_sql(False),
    "page_before": page_sql(True),
    "read_revision": READ_REVISION,
    "describe": DESCRIBE,
    "walk_first": WALK_FIRST,
    "walk_after": WALK_AFTER,
}


def record(engine: Engine, sql: Mapping[str, str], key: str, revision: int, blob: bytes, keep: int) -> None:
    """The history row of a revision just written, and the in-passing bound (inside the write's transaction).

    Once a document has ``keep`` revisions recorded, the row ``keep`` behind
    is rewritten as the new one (one statement); every ``keep``-th revision
    also trims below the window (rows left by a larger ``keep`` before, or
    by gaps). Otherwise a new row, then the trim. Revision 1 first deletes
    whatever an earlier life of the key left.
    """
    now = engine.now_ms()
    if revision == 1:
        engine.execute(sql["forget"], (key,))
    elif revision > keep:
        oldest = revision - keep
        if engine.execute(sql["recycle"], (revision, now, blob, key, oldest, key, revision)):
            if revision % keep == 0:
                engine.execute(sql["trim"], (key, oldest))
            return
    engine.execute(sql["record"], (key, revision, now, blob))
    if revision > keep:
        engine.execute(sql["trim"], (key, revision - keep))


def doomed(row: Row, keep: int, cutoff_ms: int | None) -> bool:
    """Whether the maintenance walk deletes this ``(key, revision, written_at, live)`` row.

    The same test as ``DELETE_DOOMED`` makes, which has the last word.
    """
    _key, revision, written_at, live = row
    if live is None or revision > live:
        return True  # the document is gone, or this is from an earlier life of its key
    if revision <= live - keep:
        return True
    return cutoff_ms is not None and revision != live and written_at < cutoff_ms


def prune(engine: Engine, sql: Mapping[str, str], keep: int, cutoff_ms: int | None, limit: int | None) -> int:
    """Delete what ``doomed`` says, ``BATCH`` rows a commit, at most ``limit``; rows deleted.

    Reads the table in primary-key pages of ``BATCH`` (no payloads), so a
    run costs a read of every row; it resumes from the data (a run cut
    short by ``limit`` leaves nothing half done).
    """
    removed = 0
    after: tuple[str, int] | None = None
    while limit is None or removed < limit:
        if after is None:
            rows = engine.all(sql["walk_first"], (BATCH,))
        else:
            rows = engine.all(sql["walk_after"], (*after, BATCH))
        if not rows:
            break
        victims = [(row[0], row[1]) for row in rows if doomed(row, keep, cutoff_ms)]
        if limit is not None:
            victims = victims[: limit - removed]
        if victims:
            age = INT64_MIN if cutoff_ms is None else cutoff_ms
            with engine.transaction():
                removed += sum(engine.execute(sql["delete_doomed"], (*victim, keep, age)) for victim in victims)
        if len(rows) < BATCH:
            break
        after = (rows[-1][0], rows[-1][1])
    return removed
