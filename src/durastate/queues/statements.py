"""The queues facet's schema and statements, each declaring its kind (the facet: ``queues.facet``)."""

from __future__ import annotations

from ..engines.base import READ, WRITE, WRITE_ROWS, Announce, Migration, Reread, Schema, Statement

_ANNOUNCE_QUEUE = Announce(table="queue", key="queue", channel="queue:", key_is_bytes=True)

SCHEMA = Schema(
    facet="queues",
    migrations=(
        Migration(
            statements=(
                "CREATE TABLE {p}queue ("
                " id {id_pk}, queue {blob} NOT NULL, payload {blob} NOT NULL,"
                " available_at {int64} NOT NULL, attempts {int64} NOT NULL DEFAULT 0,"
                " max_attempts {int64}, lease {blob}, last_error {text},"
                " created_at {int64} NOT NULL)",
                "CREATE INDEX {p}queue_next ON {p}queue (queue, available_at, id)",
                "CREATE TABLE {p}queue_dead ("
                " id {id_pk}, queue {blob} NOT NULL, payload {blob} NOT NULL,"
                " attempts {int64} NOT NULL, max_attempts {int64}, last_error {text},"
                " created_at {int64} NOT NULL, died_at {int64} NOT NULL)",
                "CREATE INDEX {p}queue_dead_queue ON {p}queue_dead (queue, id)",
            ),
        ),
        # New items wake waiters on channel("queue:" + name.hex()) by
        # themselves where the engine can (announced at commit), so a push
        # costs no extra round trip.
        Migration(announce=(_ANNOUNCE_QUEUE,)),
        # The announcement again, as the engine makes it now: its channels carry the store's schema (two
        # stores of one prefix in two schemas of a database no longer wake each other's waiters).
        Migration(announce=(_ANNOUNCE_QUEUE,)),
    ),
)

# engine_blobs: the facet hands every queue name, payload and lease token as the
# engine's blob_binding() made it (names and tokens once, bound at every call).
PUSH = WRITE(
    "INSERT INTO {p}queue (queue, payload, available_at, max_attempts, created_at) VALUES (?, ?, ?, ?, ?)",
    engine_blobs=True,
)
# ``available_at >= ?``: the queue's floor (see "Dead rows" in Queues._floor).
_NEXT_ID = (
    "SELECT id FROM {p}queue WHERE queue = ? AND available_at <= ? AND available_at >= ?"
    " ORDER BY available_at, id LIMIT 1{skip_locked}"
)
POP = WRITE_ROWS("DELETE FROM {p}queue WHERE id = (" + _NEXT_ID + ") RETURNING payload", engine_blobs=True)
# The fast path of claim: one statement takes the head unless it has used up
# its attempts (then claim falls back to CLAIM_HEAD + BURY in a transaction).
# A retry after a lost connection finds the claimed row again by the
# random lease token it set (on the claim index: queue, then the deadline
# it set), so the engine keeps no copy of the payload (Reread).
CLAIM = WRITE_ROWS(
    "UPDATE {p}queue SET lease = ?, attempts = attempts + 1, available_at = ?"
    " WHERE id = (" + _NEXT_ID + ")"
    " AND (max_attempts IS NULL OR attempts < max_attempts)"
    " RETURNING id, payload, attempts",
    reread=Reread(
        "SELECT id, payload, attempts FROM {p}queue WHERE queue = ? AND available_at = ? AND lease = ?", (2, 1, 0)
    ),
    engine_blobs=True,
)
CLAIM_HEAD = READ(
    "SELECT id, attempts, max_attempts FROM {p}queue WHERE queue = ? AND available_at <= ? AND available_at >= ?"
    " ORDER BY available_at, id LIMIT 1{skip_locked}"
)
# The earliest item of a queue, whatever its state: the floor's refresh (Queues._floor).
HEAD_TIME = READ("SELECT available_at FROM {p}queue WHERE queue = ? ORDER BY available_at LIMIT 1")
CLAIM_ID = WRITE_ROWS(
    "UPDATE {p}queue SET lease = ?, attempts = attempts + 1, available_at = ?"
    " WHERE id = ? RETURNING id, payload, attempts",
    engine_blobs=True,
)
BURY = WRITE(
    "INSERT INTO {p}queue_dead"
    " (queue, payload, attempts, max_attempts, last_error, created_at, died_at)"
    " SELECT queue, payload, attempts, max_attempts, last_error, created_at, ?"
    " FROM {p}queue WHERE id = ?"
)
DELETE_ID = WRITE("DELETE FROM {p}queue WHERE id = ?")
ACK = WRITE("DELETE FROM {p}queue WHERE id = ? AND lease = ?", engine_blobs=True)
# Queues._ack_then_claim on an engine with ``write_ctes`` (compiled only there): the
# ack and the next claim as one autocommitted statement, one round trip with
# no transaction and no attempt row (the claim part is CLAIM, with the acked
# id left out: an expired lease still carrying our token must not be claimed
# by the statement that deletes it). Its first column says whether the ack
# is done: deleted now, or gone already. A retry after a lost connection
# re-reads the claimed row by its lease token (the ack committed with it; its
# item is gone unless its lease was lost); no row found: nothing committed,
# or the claim found no item, and the statement runs again (an ack that did
# commit finds its item gone: done, the same answer).
ACK_THEN_CLAIM = WRITE_ROWS(
    "WITH acked AS (DELETE FROM {p}queue WHERE id = ? AND lease = ? RETURNING id),"
    " claimed AS (UPDATE {p}queue SET lease = ?, attempts = attempts + 1, available_at = ?"
    " WHERE id = (SELECT id FROM {p}queue WHERE queue = ? AND available_at <= ? AND available_at >= ?"
    " AND id <> ? ORDER BY available_at, id LIMIT 1{skip_locked})"
    " AND (max_attempts IS NULL OR attempts < max_attempts)"
    " RETURNING id, payload, attempts)"
    " SELECT EXISTS (SELECT 1 FROM acked) OR NOT EXISTS (SELECT 1 FROM {p}queue WHERE id = ?),"
    " claimed.id, claimed.payload, claimed.attempts FROM (SELECT 1) AS one LEFT JOIN claimed ON true",
    reread=Reread(
        "SELECT NOT EXISTS (SELECT 1 FROM {p}queue WHERE id = ?), id, payload, attempts FROM {p}queue"
        " WHERE queue = ? AND available_at = ? AND lease = ?",
        (8, 4, 3, 2),
    ),
    engine_blobs=True,
)
# Whether an item is still in its queue (an ack that deleted nothing: lease lost, or already gone).
ITEM_PRESENT = READ("SELECT 1 FROM {p}queue WHERE id = ?")
NACK = WRITE_ROWS(
    "UPDATE {p}queue SET lease = NULL, available_at = ?, last_error = ?"
    " WHERE id = ? AND lease = ? RETURNING attempts, max_attempts",
    engine_blobs=True,
)
RENEW = WRITE("UPDATE {p}queue SET available_at = ? WHERE id = ? AND lease = ?", engine_blobs=True)
CLEAR = WRITE("DELETE FROM {p}queue WHERE queue = ?")
# One statement, so the four counts are one consistent snapshot without a
# transaction (on SQLite that would take the write lock for a mere read).
STATS = READ(
    "SELECT"
    " COALESCE(SUM(CASE WHEN available_at <= ? THEN 1 ELSE 0 END), 0),"
    " COALESCE(SUM(CASE WHEN available_at > ? AND lease IS NOT NULL THEN 1 ELSE 0 END), 0),"
    " COALESCE(SUM(CASE WHEN available_at > ? AND lease IS NULL THEN 1 ELSE 0 END), 0),"
    " (SELECT COUNT(*) FROM {p}queue_dead WHERE queue = ?)"
    " FROM {p}queue WHERE queue = ?"
)
# Queues.peek_ready: the items a claim would hand out now, in claim order, on the
# claim index. Exhausted items (a lapsed lease with no attempts left) are
# left out: the next claim buries them instead of delivering them.
PEEK_READY = READ(
    "SELECT payload FROM {p}queue WHERE queue = ? AND available_at <= ?"
    " AND (max_attempts IS NULL OR attempts < max_attempts) ORDER BY available_at, id LIMIT ?"
)
# Queues.backlog: the longest-waiting ``?`` claimable items on the claim index
# (no payloads read), and the dead-letter count: one statement, bounded.
BACKLOG = READ(
    "SELECT COUNT(*), MIN(available_at), COALESCE(SUM(CASE WHEN lease IS NULL THEN 0 ELSE 1 END), 0),"
    " (SELECT COUNT(*) FROM {p}queue_dead WHERE queue = ?)"
    " FROM (SELECT available_at, lease FROM {p}queue WHERE queue = ? AND available_at <= ?"
    " ORDER BY available_at, id LIMIT ?) r"
)
DEAD_PAGE = READ(
    "SELECT id, payload, attempts, last_error, created_at, died_at FROM {p}queue_dead"
    " WHERE queue = ? AND id > ? ORDER BY id LIMIT ?"
)
REDRIVE_ALL = WRITE(
    "INSERT INTO {p}queue (queue, payload, available_at, attempts, max_attempts, created_at)"
    " SELECT queue, payload, ?, 0, max_attempts, created_at FROM {p}queue_dead"
    " WHERE queue = ? ORDER BY id"
)
DELETE_DEAD_ALL = WRITE("DELETE FROM {p}queue_dead WHERE queue = ?")


# Dead letters named by id (``redrive``/``delete_dead`` with ids): a statement per chunk of ``count`` ids, on the
# primary key alone (``id IN (...)``: a probe per id). The queue is never part of the search: beside ``queue = ?``
# PostgreSQL's generic plan on a fresh table searches the queue's range of the (queue, id) index and filters every
# dead letter of it by id. The check compares the queue of the rows it found instead, and locks them, so the move
# and the delete of the same transaction need no queue condition.
def _ids(count: int) -> str:
    return "id IN (" + ", ".join("?" * count) + ")"


def dead_ids_held_sql(count: int) -> Statement:
    """Whether all ``count`` ids (distinct) are dead letters of the queue, locking them until commit (params:
    queue, count, the ids): ``Engine.require``'s check before the chunk's move and delete."""
    return READ(
        "SELECT COALESCE(SUM(CASE WHEN queue = ? THEN 1 ELSE 0 END), 0) = ?"
        " FROM (SELECT queue FROM {p}queue_dead WHERE " + _ids(count) + "{for_update}) AS held"
    )


def dead_ids_found_sql(count: int) -> Statement:
    """The id and queue of each of ``count`` ids that is a dead letter (params: the ids): the refusal's words."""
    return READ("SELECT id, queue FROM {p}queue_dead WHERE " + _ids(count))


def redrive_ids_sql(count: int) -> Statement:
    """Copy the dead letters of ``count`` ids back to their queue in the ids' order (params: available_at, the
    ids, the ids again): run after ``dead_ids_held_sql`` held."""
    order = " ".join(f"WHEN ? THEN {i}" for i in range(count))
    return WRITE(
        "INSERT INTO {p}queue (queue, payload, available_at, attempts, max_attempts, created_at)"
        " SELECT queue, payload, ?, 0, max_attempts, created_at FROM {p}queue_dead WHERE " + _ids(count) + ""
        " ORDER BY CASE id " + order + " END"
    )


def delete_dead_ids_sql(count: int) -> Statement:
    """Delete the dead letters of ``count`` ids (params: the ids): run after ``dead_ids_held_sql`` held."""
    return WRITE("DELETE FROM {p}queue_dead WHERE " + _ids(count))


# Retention: dead letters are buried in id order, so the oldest come first by
# primary key (see durastate._retention.trim_oldest).
DEAD_OLDEST = READ("SELECT id, died_at FROM {p}queue_dead ORDER BY id LIMIT ?")
DEAD_DELETE_THROUGH = WRITE("DELETE FROM {p}queue_dead WHERE id <= ? AND died_at < ?")
