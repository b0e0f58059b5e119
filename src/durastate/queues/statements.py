"""The queues facet's schema and statements, each declaring its kind (the facet: ``queues.facet``)."""

from __future__ import annotations

from ..engines.base import READ, WRITE, WRITE_ROWS, Announce, Migration, Reread, Schema

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
        Migration(announce=(Announce(table="queue", key="queue", channel="queue:", key_is_bytes=True),)),
        # Lanes (see the package docstring): leased items (lane 0, by their
        # deadline) sort just before the queue's ready and delayed ones (lane
        # 1, by due time), so a claim's entry moves next to the head it came
        # from instead of past every ready item, and its ack deletes it there.
        Migration(
            statements=(
                "ALTER TABLE {p}queue ADD COLUMN lane {int64} NOT NULL DEFAULT 1",
                "UPDATE {p}queue SET lane = 0 WHERE lease IS NOT NULL",
                "DROP INDEX {p}queue_next",
                "CREATE INDEX {p}queue_lanes ON {p}queue (queue, lane, available_at, id)",
            ),
        ),
    ),
)

# The lanes of the claim index (queue, lane, available_at, id): an item is
# leased (lane 0, available_at its lease deadline) exactly when its lease is
# set, else ready or delayed (lane 1, available_at its due time).
LEASED = 0
WAITING = 1

# engine_blobs: the facet hands every queue name, payload and lease token as the
# engine's blob_binding() made it (names and tokens once, bound at every call).
PUSH = WRITE(
    "INSERT INTO {p}queue (queue, payload, available_at, max_attempts, created_at) VALUES (?, ?, ?, ?, ?)",
    engine_blobs=True,
)
# The next item of a queue: the earlier, by (available_at, id), of its two
# lanes' due heads (an expired lease joins the line at its deadline), each
# lane one index probe from its floor (``available_at >= ?``: see "Dead
# rows" in Queues._floor). Parameters: queue, now, lane 0's floor, queue,
# now, lane 1's floor (``_NEXT_PARAMS``); where the engine locks claimed
# rows each lane's head is taken with skip_locked ({head_arm}).
_NEXT_ARMS = (
    "{head_arm}SELECT id, available_at FROM {p}queue WHERE queue = ? AND lane = 0"
    " AND available_at <= ? AND available_at >= ?{end_head_arm:available_at, id}"
    " UNION ALL {head_arm}SELECT id, available_at FROM {p}queue WHERE queue = ? AND lane = 1"
    " AND available_at <= ? AND available_at >= ?{end_head_arm:available_at, id}"
    " ORDER BY available_at, id LIMIT 1"
)
_NEXT_ID = "SELECT id FROM (" + _NEXT_ARMS + ") AS heads"
POP = WRITE_ROWS("DELETE FROM {p}queue WHERE id = (" + _NEXT_ID + ") RETURNING payload", engine_blobs=True)
# The fast path of claim: one statement takes the next item unless it has used
# up its attempts (then claim falls back to CLAIM_HEAD + BURY in a
# transaction), and puts it in lane 0 at its lease deadline. A retry after a
# lost connection finds the claimed row again by the random lease token it
# set (on the claim index: queue, lane 0, then the deadline it set), so the
# engine keeps no copy of the payload (Reread).
CLAIM = WRITE_ROWS(
    "UPDATE {p}queue SET lease = ?, lane = 0, attempts = attempts + 1, available_at = ?"
    " WHERE id = (" + _NEXT_ID + ")"
    " AND (max_attempts IS NULL OR attempts < max_attempts)"
    " RETURNING id, payload, attempts",
    reread=Reread(
        "SELECT id, payload, attempts FROM {p}queue WHERE queue = ? AND lane = 0 AND available_at = ? AND lease = ?",
        (2, 1, 0),
    ),
    engine_blobs=True,
)
CLAIM_HEAD = READ("SELECT id, attempts, max_attempts FROM {p}queue WHERE id = (" + _NEXT_ID + ")")
# The earliest item of each lane of a queue, whatever its state (NULL: the
# lane is empty): the floors' refresh (Queues._floor) and a waiter's next look.
HEAD_TIME = READ(
    "SELECT (SELECT available_at FROM {p}queue WHERE queue = ? AND lane = 0 ORDER BY available_at LIMIT 1),"
    " (SELECT available_at FROM {p}queue WHERE queue = ? AND lane = 1 ORDER BY available_at LIMIT 1)"
)
CLAIM_ID = WRITE_ROWS(
    "UPDATE {p}queue SET lease = ?, lane = 0, attempts = attempts + 1, available_at = ?"
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
    " claimed AS (UPDATE {p}queue SET lane = 0, lease = ?, attempts = attempts + 1, available_at = ?"
    " WHERE id = (SELECT id FROM ("
    "{head_arm}SELECT id, available_at FROM {p}queue WHERE queue = ? AND lane = 0"
    " AND available_at <= ? AND available_at >= ? AND id <> ?{end_head_arm:available_at, id}"
    " UNION ALL {head_arm}SELECT id, available_at FROM {p}queue WHERE queue = ? AND lane = 1"
    " AND available_at <= ? AND available_at >= ?{end_head_arm:available_at, id}"
    " ORDER BY available_at, id LIMIT 1) AS heads)"
    " AND (max_attempts IS NULL OR attempts < max_attempts)"
    " RETURNING id, payload, attempts)"
    " SELECT EXISTS (SELECT 1 FROM acked) OR NOT EXISTS (SELECT 1 FROM {p}queue WHERE id = ?),"
    " claimed.id, claimed.payload, claimed.attempts FROM (SELECT 1) AS one LEFT JOIN claimed ON true",
    reread=Reread(
        "SELECT NOT EXISTS (SELECT 1 FROM {p}queue WHERE id = ?), id, payload, attempts FROM {p}queue"
        " WHERE queue = ? AND lane = 0 AND available_at = ? AND lease = ?",
        (11, 4, 3, 2),
    ),
    engine_blobs=True,
)
# Whether an item is still in its queue (an ack that deleted nothing: lease lost, or already gone).
ITEM_PRESENT = READ("SELECT 1 FROM {p}queue WHERE id = ?")
NACK = WRITE_ROWS(
    "UPDATE {p}queue SET lane = 1, lease = NULL, available_at = ?, last_error = ?"
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
# Queues.peek_ready: the items a claim would hand out now, in claim order:
# each lane's first ``?`` due items on the claim index, merged. Exhausted
# items (a lapsed lease with no attempts left) are left out: the next claim
# buries them instead of delivering them. Each lane is limited on its own:
# the merge then sorts at most twice the limit, whatever the planner
# guesses of a lane's size (a fresh PostgreSQL table guesses a few rows).
PEEK_READY = READ(
    "SELECT payload FROM ("
    "SELECT * FROM (SELECT payload, available_at, id FROM {p}queue WHERE queue = ? AND lane = 0"
    " AND available_at <= ? AND (max_attempts IS NULL OR attempts < max_attempts)"
    " ORDER BY available_at, id LIMIT ?) AS leased"
    " UNION ALL SELECT * FROM (SELECT payload, available_at, id FROM {p}queue WHERE queue = ? AND lane = 1"
    " AND available_at <= ? AND (max_attempts IS NULL OR attempts < max_attempts)"
    " ORDER BY available_at, id LIMIT ?) AS waiting"
    " ORDER BY available_at, id LIMIT ?) AS ready"
)
# Queues.backlog, first: each lane's claimable items counted up to ``?``,
# each lane's earliest, and the dead-letter count, on the indexes alone
# (no table row read, no order): one statement, bounded. Only where the two
# counts pass the limit does it also need BACKLOG.
BACKLOG_COUNTS = READ(
    "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {p}queue WHERE queue = ? AND lane = 0 AND available_at <= ?"
    " LIMIT ?) AS leased),"
    " (SELECT COUNT(*) FROM (SELECT 1 FROM {p}queue WHERE queue = ? AND lane = 1 AND available_at <= ?"
    " LIMIT ?) AS waiting),"
    " (SELECT MIN(available_at) FROM {p}queue WHERE queue = ? AND lane = 0 AND available_at <= ?),"
    " (SELECT MIN(available_at) FROM {p}queue WHERE queue = ? AND lane = 1 AND available_at <= ?),"
    " (SELECT COUNT(*) FROM {p}queue_dead WHERE queue = ?)"
)
# Queues.backlog past its limit: how many of the longest-waiting ``?``
# claimable items (both lanes merged as PEEK_READY's, on the claim index
# alone) are expired leases.
BACKLOG = READ(
    "SELECT COALESCE(SUM(1 - lane), 0)"
    " FROM (SELECT * FROM (SELECT available_at, id, lane FROM {p}queue WHERE queue = ? AND lane = 0"
    " AND available_at <= ? ORDER BY available_at, id LIMIT ?) AS leased"
    " UNION ALL SELECT * FROM (SELECT available_at, id, lane FROM {p}queue WHERE queue = ? AND lane = 1"
    " AND available_at <= ? ORDER BY available_at, id LIMIT ?) AS waiting"
    " ORDER BY available_at, id LIMIT ?) AS r"
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
REDRIVE_ID = WRITE(
    "INSERT INTO {p}queue (queue, payload, available_at, attempts, max_attempts, created_at)"
    " SELECT queue, payload, ?, 0, max_attempts, created_at FROM {p}queue_dead"
    " WHERE queue = ? AND id = ?"
)
DELETE_DEAD_ID = WRITE("DELETE FROM {p}queue_dead WHERE queue = ? AND id = ?")
# Retention: dead letters are buried in id order, so the oldest come first by
# primary key (see durastate._retention.trim_oldest).
DEAD_OLDEST = READ("SELECT id, died_at FROM {p}queue_dead ORDER BY id LIMIT ?")
DEAD_DELETE_THROUGH = WRITE("DELETE FROM {p}queue_dead WHERE id <= ? AND died_at < ?")
