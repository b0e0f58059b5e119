"""The records facet's schema, its storage layout constants and its statements, each declaring its kind.

Statements that select whole revision rows select ``rows.Revision``'s
fields in order, so ``rows`` reads them by name.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engines.base import READ, WRITE, WRITE_ROWS, Migration, Schema, Statement
from .rows import Revision

# mint_id() never hands out an id below this one (pi-durable: ROOT_CONVERSATION_ID = 1).
FIRST_MINTED_ID = 2
# Every CHECKPOINT_EVERY-th delta of a full-history document keeps its
# materialised value (see "Bounded document reads" in the package docstring).
CHECKPOINT_EVERY = 16
# The deepest fork chain read (deeper is only possible with a cycle).
MAX_CHAIN_DEPTH = 1000
# Ids per lookup statement; batches are padded to a power of two (few texts).
ID_CHUNK = 128
# A commit claiming at most this many ids claims them in one statement of
# exactly that many rows (no padding for SQL to skip; the common commits).
EXACT_CLAIM = 16
# Values per entry row of insert_entries_sql (id, conversation_id, head, commit_seq, record).
ENTRY_WIDTH = 5

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
        # 2: when each revision was written (the store's clock, ms), so
        # prune_document_revisions(older_than=) can age them. Rows written
        # before have none and count as old.
        Migration(statements=("ALTER TABLE {p}rec_revision ADD COLUMN written_at {int64}",)),
        # 3: an entry's id is claimed by rec_entry's own primary key, not by
        # a rec_id row: a commit of entries runs one statement and writes
        # one B-tree fewer. rec_id keeps the ids of the other types; each
        # claim checks the other table (see claim_sql, insert_entries_sql).
        Migration(statements=("DELETE FROM {p}rec_id WHERE type = 'entry'",)),
    ),
)

# -- statements ---------------------------------------------------------------

# The commit sequence: engine.next_value(COMMIT_SEQUENCE), the first
# statement of every commit.
COMMIT_SEQUENCE = "records"
LAST_SEQ = READ("SELECT value FROM {p}sequence WHERE name = 'records'")
# One more than both the last minted id and the largest id ever committed
# (entries in rec_entry, the other types in rec_id; max(id) of a primary
# key is an index lookup).
MINT_ID = WRITE_ROWS(
    "UPDATE {p}sequence SET value = {greatest}(value, COALESCE((SELECT max(id) FROM {p}rec_id), -1),"
    " COALESCE((SELECT max(id) FROM {p}rec_entry), -1)) + 1"
    " WHERE name = 'records_id' RETURNING value"
)

INSERT_CONVERSATION = WRITE(
    "INSERT INTO {p}rec_conversation (id, owner_conversation_id, owner_task_id, parent_id, parent_at, record)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
# A plain entry row (copies of stored rows; commits use insert_entries_sql).
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
    "INSERT INTO {p}rec_revision (document_id, seq, kind, version, depth, content, state, written_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
DROP_REVISIONS = WRITE("DELETE FROM {p}rec_revision WHERE document_id = ?")
# The previous newest row's value goes unless it is the oldest row left:
# then no older row can anchor a read of it (only after retention pruned
# the rows before it; otherwise the oldest row is always a base).
DROP_STATE = WRITE(
    "UPDATE {p}rec_revision SET state = NULL WHERE document_id = ? AND seq = ?"
    " AND seq > (SELECT min(o.seq) FROM {p}rec_revision o WHERE o.document_id = ?)"
)
# Whether an address has no current incarnation (a commit creating one there needs that). Newest
# first, as the address index orders its rows: PostgreSQL then takes it on a never-analyzed table
# (without the order: the scope index, filtering every document of the scope).
NO_CURRENT_DOCUMENT = READ(
    "SELECT count(*) = 0 FROM (SELECT 1 FROM {p}rec_document WHERE kind = ? AND scope_kind = ? AND owner_id = ?"
    " AND family = ? AND key_value = ? AND retired_at IS NULL ORDER BY created_at DESC LIMIT 1) live"
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
    "SELECT d.record, "
    + ", ".join(f"r.{column}" for column in Revision._fields)
    + " FROM {p}rec_document d LEFT JOIN {p}rec_revision r ON r.document_id = d.id AND r.seq <= ?"
    " AND r.seq >= COALESCE((SELECT a.seq FROM {p}rec_revision a WHERE a.document_id = d.id AND a.seq <= ?"
    " AND (a.kind = 'base' OR a.state IS NOT NULL) ORDER BY a.seq DESC LIMIT 1), ?)"
    " WHERE d.id = ? ORDER BY r.seq"
)


def ids_sql(table: str, columns: str, count: int) -> Statement:
    return READ(f"SELECT {columns} FROM {{p}}{table} WHERE id IN (" + ", ".join("?" * count) + ")")


def documents_sql(count: int) -> Statement:
    """``count`` documents by id: each one's id and record, and its newest revision (``Revision``'s columns; NULL
    when it has none), in one statement (a commit's check of the documents it writes)."""
    return READ(
        "SELECT d.id, d.record, "
        + ", ".join(f"r.{column}" for column in Revision._fields)
        + " FROM {p}rec_document d LEFT JOIN {p}rec_revision r ON r.document_id = d.id AND r.seq ="
        " (SELECT n.seq FROM {p}rec_revision n WHERE n.document_id = d.id ORDER BY n.seq DESC LIMIT 1)"
        " WHERE d.id IN (" + ", ".join("?" * count) + ")"
    )


def claim_sql(count: int, *, checked: bool = False) -> Statement:
    """Claim ``count`` ids of types other than entry in ``rec_id``; RETURNING names the ids it took.

    An id it does not return was claimed before (by an earlier commit, or
    by an entry: it skips an id ``rec_entry`` holds): only those are looked
    up, to tell an upsert of the same type from a conflict. Padding repeats
    the last row, which DO NOTHING skips on both engines.

    ``checked``: the ids were found free by ``ids_free_sql`` in the same
    transaction (``commit.Commits.in_one_flight``): the claims only, no
    answer (DO NOTHING keeps an upserted record's claim and skips padding).
    """
    if checked:
        return WRITE(
            "INSERT INTO {p}rec_id (id, type) VALUES " + ", ".join(["(?, ?)"] * count) + " ON CONFLICT (id) DO NOTHING"
        )
    return WRITE_ROWS(
        "INSERT INTO {p}rec_id (id, type) SELECT v.column1, v.column2 FROM (VALUES "
        + ", ".join(["(?, ?)"] * count)
        + ") v WHERE NOT EXISTS (SELECT 1 FROM {p}rec_entry e WHERE e.id = v.column1)"
        " ON CONFLICT (id) DO NOTHING RETURNING id"
    )


def ids_free_sql(count: int) -> Statement:
    """Whether ``count`` (id, type) claims are all free: a requirement (``engine.require``) of a one-flight commit.

    An id is free when neither table holds it, or when ``rec_id`` holds it
    for a record of the same type and that type is upserted (task,
    submission): exactly when the precise path would refuse none of them
    (a batch naming an id twice never gets here). Padding repeats a row.
    """
    return READ(
        "SELECT NOT EXISTS (SELECT 1 FROM (VALUES "
        + ", ".join(["(?, ?)"] * count)
        + ") v WHERE EXISTS (SELECT 1 FROM {p}rec_entry e WHERE e.id = v.column1)"
        " OR EXISTS (SELECT 1 FROM {p}rec_id i WHERE i.id = v.column1"
        " AND (i.type <> v.column2 OR v.column2 NOT IN ('task', 'submission'))))"
    )


def insert_entries_sql(count: int, *, checked: bool = False) -> Statement:
    """Insert ``count`` entry rows, each only if its id is free; its row count is how many were written.

    The entry's own primary key claims its id (DO NOTHING skips an entry
    written before, and a repeat within the statement); the NOT EXISTS
    skips an id ``rec_id`` holds for another type (claimed before, or by
    this commit's ``claim_sql``, which runs first). Padding repeats the
    last row, as in ``claim_sql``. No RETURNING: on SQLite it cost 4-5 us
    of a one-entry commit's ~27 (``bench/pi_durable_commit_cpu.py``), and
    the ids written are only needed when the count falls short, where
    the commit's own ``commit_seq`` on the rows tells them apart.

    ``checked``: the ids were found free by ``ids_free_sql`` in the same
    transaction (``commit.Commits.in_one_flight``), and each row is (id,
    conversation_id, head, record): ``commit_seq`` is the value the commit
    took from the sequence, read here (its row is locked by this
    transaction until the end), so nobody waits for it before sending this.
    """
    if checked:
        return WRITE(
            "INSERT INTO {p}rec_entry (id, conversation_id, head, commit_seq, record)"
            " SELECT v.column1, v.column2, v.column3, (SELECT value FROM {p}sequence WHERE name = '"
            + COMMIT_SEQUENCE
            + "'), v.column4 FROM (VALUES "
            + ", ".join(["(?, ?, ?, ?)"] * count)
            + ") v ON CONFLICT (id) DO NOTHING"
        )
    return WRITE(
        "INSERT INTO {p}rec_entry (id, conversation_id, head, commit_seq, record)"
        " SELECT v.column1, v.column2, v.column3, v.column4, v.column5 FROM (VALUES "
        + ", ".join(["(?, ?, ?, ?, ?)"] * count)
        + ") v WHERE NOT EXISTS (SELECT 1 FROM {p}rec_id i WHERE i.id = v.column1)"
        " ON CONFLICT (id) DO NOTHING"
    )


def scan_sql(table: str, filters: Sequence[str], descending: bool) -> Statement:
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


def filter_combos(filters: Sequence[str]) -> list[tuple[str, ...]]:
    """Every subset of ``filters``, in their order (one compiled scan statement each)."""
    out: list[tuple[str, ...]] = [()]
    for f in filters:
        out += [(*c, f) for c in out]
    return out


# document_revisions(): the revisions of one document, oldest first.
LIST_REVISIONS = READ("SELECT seq, kind, version, depth FROM {p}rec_revision WHERE document_id = ? ORDER BY seq")

# -- retention (prune_document_revisions) --------------------------------------

# A page of documents by id, each with the oldest of its newest ?
# (keep_last) revisions, which must stay, and its oldest revision's seq and
# write time: a document has something to prune only if its oldest
# revision is older than the first that must stay (and, with an age rule,
# old enough). Each subquery walks the revision primary key; the first is
# min() over a LIMIT, not OFFSET: with a bound OFFSET PostgreSQL's generic
# plan sorts the document's revisions instead.
PRUNE_CANDIDATES = READ(
    "SELECT d.id,"
    " (SELECT min(n.seq) FROM (SELECT k.seq FROM {p}rec_revision k WHERE k.document_id = d.id"
    " ORDER BY k.seq DESC LIMIT ?) n),"
    " (SELECT o.seq FROM {p}rec_revision o WHERE o.document_id = d.id ORDER BY o.seq LIMIT 1),"
    " (SELECT o.written_at FROM {p}rec_revision o WHERE o.document_id = d.id ORDER BY o.seq LIMIT 1)"
    " FROM {p}rec_document d WHERE d.id > ? ORDER BY d.id LIMIT ?"
)
# The oldest revisions of a document up to the one that must stay.
OLDEST_REVISIONS = READ(
    "SELECT seq, kind, state IS NOT NULL, written_at FROM {p}rec_revision"
    " WHERE document_id = ? AND seq <= ? ORDER BY seq LIMIT ?"
)
# Taken first by every pruning batch: record commits lock this row first
# too (engine.next_value(COMMIT_SEQUENCE)), so a batch never interleaves
# with a commit (SQLite's write transaction serialises them anyway).
LOCK_COMMITS = READ("SELECT value FROM {p}sequence WHERE name = 'records'{for_update}")
# Whether a revision (the new oldest) still lacks a value of its own.
NEEDS_STATE = READ(
    "SELECT 1 FROM {p}rec_revision WHERE document_id = ? AND seq = ? AND kind = 'delta' AND state IS NULL"
)
SET_STATE = WRITE("UPDATE {p}rec_revision SET state = ? WHERE document_id = ? AND seq = ?")
DELETE_REVISIONS_BEFORE = WRITE("DELETE FROM {p}rec_revision WHERE document_id = ? AND seq < ?")
# A read at a point before this one finds no revision: retention removed it.
OLDEST_REVISION = READ("SELECT min(seq) FROM {p}rec_revision WHERE document_id = ?")
