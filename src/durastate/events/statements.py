"""The events facet's schema and statements, each declaring its kind.

Statements that select whole events select ``COLUMNS`` (from ``rows``), so
``rows.event_from_row`` reads them by name.
"""

from __future__ import annotations

from ..engines.base import READ, WRITE, WRITE_ROWS, Announce, Migration, Reread, Schema, Statement
from .rows import BRIEF_COLUMNS, COLUMNS, EVENT_COLUMNS

_INDEXES = (
    "CREATE UNIQUE INDEX {p}event_id ON {p}event (event_id)",
    "CREATE INDEX {p}event_unprocessed ON {p}event (session_id, idx) WHERE processed_at IS NULL",
    "CREATE INDEX {p}event_lane ON {p}event (session_id, lane, idx) WHERE processed_at IS NULL",
    "CREATE INDEX {p}event_ready ON {p}event (session_id, idx)"
    " WHERE lane_ready = 1 AND processed_at IS NULL AND failed_at IS NULL",
    "CREATE INDEX {p}event_due ON {p}event (due_at, session_id, idx)"
    " WHERE lane_ready = 1 AND processed_at IS NULL AND failed_at IS NULL",
    "CREATE INDEX {p}event_dead ON {p}event (session_id, idx) WHERE failed_at IS NOT NULL",
)

# New events wake waiters on channel("events:" + session) (Announce).
_ANNOUNCE_EVENTS = Announce(table="event", key="session_id", channel="events:")

SCHEMA = Schema(
    facet="events",
    migrations=(
        Migration(
            # Rowid tables (not {without_rowid}): payloads can be large.
            # {key_text}: session ids and reducer names compare by code point
            # (prefix ranges and cursors need it).
            statements=(
                "CREATE TABLE {p}event_session ("
                " session_id {key_text} PRIMARY KEY, last_index {int64} NOT NULL, created_at {int64} NOT NULL)",
                "CREATE TABLE {p}event ("
                " session_id {key_text} NOT NULL, idx {int64} NOT NULL, event_id {text} NOT NULL,"
                " event_type {text} NOT NULL, payload {blob} NOT NULL, created_at {int64} NOT NULL,"
                " cause_index {int64}, cause_attempt {int64}, cause_batch_size {int64}, lane {text},"
                " lane_ready {int64} NOT NULL DEFAULT 0, due_at {int64} NOT NULL DEFAULT 0,"
                " processed_at {int64}, processed_by_attempt {int64}, returned_event_ids {text},"
                " first_claimed_at {int64}, last_claimed_at {int64},"
                " attempt_count {int64} NOT NULL DEFAULT 0, failure_count {int64} NOT NULL DEFAULT 0,"
                " last_failed_at {int64}, last_failed_attempt {int64}, last_error {text}, failed_at {int64},"
                " claim_holder {text}, claim_expires_at {int64},"
                " PRIMARY KEY (session_id, idx))",
                "CREATE TABLE {p}event_snapshot ("
                " session_id {key_text} NOT NULL, reducer_name {key_text} NOT NULL, up_to_index {int64} NOT NULL,"
                " state {blob} NOT NULL, updated_at {int64} NOT NULL, PRIMARY KEY (session_id, reducer_name))",
                *_INDEXES,
            ),
            # New events wake waiters on channel("events:" + session) by
            # themselves where the engine can (one announcement per session
            # and statement, at commit): an append costs no extra round trip.
            announce=(_ANNOUNCE_EVENTS,),
        ),
        Migration(
            # Fewer pages written per append and completion (each index an
            # event enters or leaves is one more page in the commit):
            # * event_unprocessed goes: every unprocessed event is in one of
            #   event_ready, event_lane or event_dead (PENDING_OF_SESSION);
            # * event_lane holds only events in a lane (lane = ? implies
            #   lane IS NOT NULL, so every lane lookup still uses it);
            # * the session row no longer tracks the last index (an append
            #   no longer writes it): it keeps index_floor, below which
            #   retention may have deleted events, and the last index is the
            #   greater of it and the session's highest stored index
            #   (LAST_OF_SESSION). A database migrated from version 1 keeps
            #   its last indexes as floors, which is what they are.
            statements=(
                "DROP INDEX {p}event_unprocessed",
                "DROP INDEX {p}event_lane",
                "CREATE INDEX {p}event_lane ON {p}event (session_id, lane, idx)"
                " WHERE processed_at IS NULL AND lane IS NOT NULL",
                "ALTER TABLE {p}event_session RENAME COLUMN last_index TO index_floor",
            ),
        ),
        # The announcement again, as the engine makes it now: its channels carry the store's schema (two
        # stores of one prefix in two schemas of a database no longer wake each other's waiters).
        Migration(announce=(_ANNOUNCE_EVENTS,)),
    ),
)

# -- statements ---------------------------------------------------------------

_READY = "lane_ready = 1 AND processed_at IS NULL AND failed_at IS NULL"

# The last index of session row ``s``: its highest stored event, or the
# floor retention left when it deleted the newest ones (see migration 2).
LAST_OF_SESSION = (
    "{greatest}(s.index_floor, COALESCE((SELECT MAX(x.idx) FROM {p}event x WHERE x.session_id = s.session_id), 0))"
)
# Whether session row ``s`` has an unprocessed event. Each unprocessed event
# is in one of three indexes: event_ready (lane_ready = 1, not dead-lettered),
# event_lane (lane_ready = 0 only ever happens to an event in a lane: one
# waiting behind its lane's head) or event_dead; each probe is one seek.
_PENDING_IN = (
    "SELECT 1 FROM {p}event e WHERE e.session_id = s.session_id AND e.lane_ready = 1"
    " AND e.processed_at IS NULL AND e.failed_at IS NULL",
    "SELECT 1 FROM {p}event e WHERE e.session_id = s.session_id AND e.lane IS NOT NULL AND e.processed_at IS NULL",
    "SELECT 1 FROM {p}event e WHERE e.session_id = s.session_id AND e.failed_at IS NOT NULL AND e.processed_at IS NULL",
)
# As a column (1, or NULL when nothing is pending): in a select list, so
# PostgreSQL evaluates the probes for the one session row (in a WHERE it
# may hash each probe's whole index instead).
PENDING_OF_SESSION = "CASE WHEN " + " OR ".join(f"EXISTS ({probe})" for probe in _PENDING_IN) + " THEN 1 END"
# Its negation as a condition: three anti-joins.
_NOTHING_PENDING = " AND ".join(f"NOT EXISTS ({probe})" for probe in _PENDING_IN)
# The session row is the lock every index-assigning operation takes first.
# PostgreSQL: a row lock held to commit; SQLite: BEGIN IMMEDIATE already
# serialises writers (and has no FOR UPDATE). Columns: the last index and
# whether the session has an unprocessed event. On PostgreSQL a read that
# waited for the lock may miss what the holder committed meanwhile (its
# subqueries read the snapshot taken before the wait): the insert that
# follows then finds the index taken and reads the last index again
# (``Events._insert``).
LOCK_SESSION = READ(
    "SELECT " + LAST_OF_SESSION + ", " + PENDING_OF_SESSION + " FROM {p}event_session s"
    " WHERE s.session_id = ?{for_update_of:s}"
)
CREATE_SESSION = WRITE_ROWS(
    "INSERT INTO {p}event_session (session_id, index_floor, created_at) VALUES (?, 0, ?)"
    " ON CONFLICT (session_id) DO NOTHING RETURNING index_floor"
)
# Retention raises the floor before it deletes a session's newest events, so
# their indexes are never handed out again.
RAISE_FLOOR = WRITE("UPDATE {p}event_session SET index_floor = ? WHERE session_id = ? AND index_floor < ?")
LAST_INDEX = READ("SELECT " + LAST_OF_SESSION + " FROM {p}event_session s WHERE s.session_id = ?")
HAS_PENDING = READ("SELECT " + PENDING_OF_SESSION + " FROM {p}event_session s WHERE s.session_id = ?")
EVENT_BY_ID = READ("SELECT " + COLUMNS + " FROM {p}event WHERE event_id = ?")
_GET_EVENT = "SELECT " + COLUMNS + " FROM {p}event WHERE session_id = ? AND idx = ?"
GET_EVENT = READ(_GET_EVENT)
# The event row stays locked until commit on PostgreSQL, so a concurrent
# claim (which does not take the session lock) cannot bump its attempt
# between our check and our write.
GET_EVENT_LOCKED = READ(_GET_EVENT + "{for_update}")
# complete_attempt's first read: the parent event and the session's last
# index, locking both (session row first, as every index-assigning
# operation does: FOR UPDATE OF locks in the order it names). No row: no
# such session or no such event.
LOCK_PARENT = READ(
    "SELECT " + ", ".join("e." + c for c in EVENT_COLUMNS) + ", " + LAST_OF_SESSION + " FROM {p}event_session s"
    " JOIN {p}event e ON e.session_id = s.session_id WHERE s.session_id = ? AND e.idx = ?{for_update_of:s, e}"
)
# Position of LOCK_PARENT's last column (the session's last index), after the event's.
LOCK_PARENT_LAST = len(EVENT_COLUMNS)
# lane_ready: ready unless an unprocessed event of the same lane exists
# (earlier in this batch included: rows are inserted one by one). VALUES,
# not INSERT ... SELECT: SQLite copies a SELECT that reads the table it
# inserts into through a temporary table first, which cost 2.7 us a row.
# No row inserted (rowcount 0): the id or the index is taken (see LOCK_SESSION).
INSERT_EVENT = WRITE(
    "INSERT INTO {p}event (session_id, idx, event_id, event_type, payload, created_at, cause_index,"
    " cause_attempt, cause_batch_size, lane, lane_ready, due_at, processed_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " CASE WHEN CAST(? AS TEXT) IS NULL THEN 1"
    " WHEN NOT EXISTS (SELECT 1 FROM {p}event WHERE session_id = ? AND lane = ? AND processed_at IS NULL)"
    " THEN 1 ELSE 0 END, ?, ?) ON CONFLICT DO NOTHING"
)
_MARK_PROCESSED = (
    "UPDATE {p}event SET processed_at = ?, processed_by_attempt = ?, returned_event_ids = ?,"
    " lane_ready = 0, claim_holder = NULL, claim_expires_at = NULL WHERE session_id = ? AND idx = ?"
)
# append of one event, in no lane, not settled, with no cause and no id of
# its own (the one checks then: none), to a session that exists: one
# statement, its own commit. The index is the session's next; on
# PostgreSQL FOR UPDATE OF takes the session lock as every append does (a
# read that waited for it may be stale: see LOCK_SESSION). No row (no session
# row yet, the id or the index taken): append's full path.
APPEND_ALONE = WRITE_ROWS(
    "INSERT INTO {p}event (session_id, idx, event_id, event_type, payload, created_at, lane_ready, due_at)"
    " SELECT s.session_id, " + LAST_OF_SESSION + " + 1, ?, ?, ?, ?, 1, ? FROM {p}event_session s"
    " WHERE s.session_id = ?{for_update_of:s} ON CONFLICT DO NOTHING RETURNING idx"
)
MARK_PROCESSED = WRITE(_MARK_PROCESSED)
# complete_attempt without children of an event in no lane, while the attempt
# is current (the checks complete_attempt makes, in the WHERE): nothing to
# index and no lane head to promote, so no session lock, one statement. Any
# other case (a retry, a stale attempt, an unknown event) changes no row and
# takes complete_attempt's full path.
COMPLETE_ALONE = WRITE(
    _MARK_PROCESSED + " AND attempt_count = ? AND processed_at IS NULL AND failed_at IS NULL"
    " AND claim_holder IS NOT NULL AND lane IS NULL"
)
PROMOTE_LANE = WRITE(
    "UPDATE {p}event SET lane_ready = 1, due_at = ? WHERE session_id = ? AND lane_ready = 0 AND idx = ("
    "SELECT idx FROM {p}event WHERE session_id = ? AND lane = ? AND processed_at IS NULL ORDER BY idx LIMIT 1)"
)
_CLAIM_SET = (
    "UPDATE {p}event SET attempt_count = attempt_count + 1, first_claimed_at = COALESCE(first_claimed_at, ?),"
    " last_claimed_at = ?, claim_holder = ?, claim_expires_at = ?, due_at = ?"
)
# Every claim re-checks readiness in the UPDATE's own WHERE: on PostgreSQL
# a row another transaction claimed meanwhile is re-evaluated after its lock
# is released and no longer matches.
# The first ``limit`` ready events are picked once, into a materialized CTE:
# as ``idx IN (SELECT ... LIMIT ?)`` PostgreSQL's generic plan re-ran the
# subquery for every ready row of the session (quadratic in the backlog).
CLAIM_SESSION = WRITE_ROWS(
    "WITH picked AS MATERIALIZED (SELECT idx AS picked_idx FROM {p}event WHERE session_id = ? AND "
    + _READY
    + " AND due_at <= ? ORDER BY idx LIMIT ?) "
    + _CLAIM_SET
    + " FROM picked WHERE session_id = ? AND idx = picked.picked_idx AND "
    + _READY
    + " AND due_at <= ? RETURNING "
    + COLUMNS
)
# The same without a limit (claim_available's default): every ready event
# of the session in one pass over event_ready, without the subquery's copy.
CLAIM_SESSION_ALL = WRITE_ROWS(
    _CLAIM_SET + " WHERE session_id = ? AND " + _READY + " AND due_at <= ? RETURNING " + COLUMNS
)
CLAIM_CANDIDATES = READ("SELECT idx FROM {p}event WHERE session_id = ? AND " + _READY + " AND due_at <= ? ORDER BY idx")
CLAIM_ONE = WRITE_ROWS(
    _CLAIM_SET + " WHERE session_id = ? AND idx = ? AND " + _READY + " AND due_at <= ? RETURNING " + COLUMNS
)
# Across sessions, oldest-ready first; concurrent PostgreSQL claimers skip
# each other's rows instead of queueing behind them. The rows are then
# claimed one by one with CLAIM_ONE: an "UPDATE ... WHERE key IN (SELECT
# ... LIMIT n FOR UPDATE SKIP LOCKED)" may re-run its subquery on
# PostgreSQL, which then skips the rows the UPDATE itself just changed and
# hands out more than n.
CLAIM_ANY_CANDIDATES = READ(
    "SELECT session_id, idx FROM {p}event WHERE " + _READY + " AND due_at <= ?"
    " ORDER BY due_at, session_id, idx LIMIT ?{skip_locked}"
)
RETRY_AT = READ(
    "SELECT MIN(claim_expires_at) FROM {p}event WHERE session_id = ? AND " + _READY + " AND claim_expires_at > ?"
)
ATTEMPT_OF = READ("SELECT attempt_count FROM {p}event WHERE session_id = ? AND idx = ?")
_RENEW = (
    "UPDATE {p}event SET claim_expires_at = ?, due_at = ? WHERE session_id = ? AND idx = ? AND attempt_count = ?"
    " AND processed_at IS NULL AND failed_at IS NULL AND claim_holder = ? AND claim_expires_at > ?"
)
RENEW = WRITE(_RENEW)
FAIL = WRITE(
    "UPDATE {p}event SET failure_count = ?, last_error = ?, last_failed_at = ?, last_failed_attempt = ?,"
    " failed_at = ?, claim_holder = NULL, claim_expires_at = NULL, due_at = ? WHERE session_id = ? AND idx = ?"
)

# -- PostgreSQL: writes in as few round trips as they need ----------------------
#
# Compiled only where answers are deferred and a WITH may hold writes
# (``capabilities.deferred_answers`` and ``write_ctes``: plain PostgreSQL,
# not its Citus mode). A statement there costs a round trip for each answer
# read, so each write below answers in one statement what the facet needs;
# SQLite, which answers at once, keeps the statements above.

# append outside a transaction, of up to APPEND_AT_ONCE events without a
# cause (all with ids of their own, or none), to a session that exists or
# not: one statement, its own commit, one round trip. The session row is
# created (``created``) or locked (``locked``, FOR UPDATE OF as
# APPEND_ALONE), only while none of the ids is taken; the events (``batch``,
# one row of values each) go in at the indexes after its last, each event's
# lane readiness as INSERT_EVENT's (``blocked``: an unsettled event of its
# lane is earlier in the batch). Answers each inserted index with whether the
# session had an unprocessed event before (asked for by a parameter: only
# needed when every event is settled). No row: an id is taken, or the session
# row was created by a transaction not yet visible (append's full path, with
# the same ids, tells which). The insert has no ON CONFLICT: an index found
# taken (a lock that waited read a stale last index, see LOCK_SESSION) or an
# id taken meanwhile fails the whole statement (a ``Conflict``, nothing
# applied, no surrounding transaction to doom), and the full path runs. A
# retry after a lost connection re-reads the events by their ids and the
# statement's time (found: it committed, they are its answer; see
# ``engines.postgres_attempts``). One text per batch size, each value a
# parameter of its own: with the rows as arrays the planner costed 10 of
# each, never took the generic plan and planned every call again (~1 ms).
# Parameters: each event's id, type, payload, lane, blocked and processed_at,
# then whether to read pending, the session, the session, now, now, now.
APPEND_AT_ONCE = 16
_BATCH_ROW = "(CAST(? AS {text}), CAST(? AS {text}), CAST(? AS {blob}), CAST(? AS {text}), CAST(? AS {int64}),"
_IDS_FREE = "NOT EXISTS (SELECT 1 FROM batch b JOIN {p}event y ON y.event_id = b.event_id)"


def append_statement(n: int, checked: bool) -> Statement:
    """The statement appending ``n`` events (1 .. APPEND_AT_ONCE), see above.

    ``checked``: the ids are looked up first (not for random ids, which no
    stored event holds: the insert still fails on one that did).
    """
    rows = ", ".join(f"{_BATCH_ROW} CAST(? AS {{int64}}), {i})" for i in range(1, n + 1))
    ids = ", ".join("?" * n)
    free = " AND " + _IDS_FREE if checked else ""
    return WRITE_ROWS(
        f"WITH batch (event_id, event_type, payload, lane, blocked, processed_at, n) AS (VALUES {rows}),"
        " locked AS (SELECT s.session_id, "
        + LAST_OF_SESSION
        + " AS last, CASE WHEN ? THEN "
        + PENDING_OF_SESSION
        + " END AS pending FROM {p}event_session s WHERE s.session_id = ?"
        + free
        + "{for_update_of:s}),"
        # Only where no session row was found (the insert's conflict check is not free).
        " created AS (INSERT INTO {p}event_session (session_id, index_floor, created_at)"
        " SELECT ?, 0, ? WHERE NOT EXISTS (SELECT 1 FROM locked)" + free + " ON CONFLICT (session_id) DO NOTHING"
        " RETURNING session_id, index_floor),"
        " base AS (SELECT session_id, last, pending FROM locked"
        " UNION ALL SELECT session_id, index_floor, NULL FROM created),"
        " inserted AS (INSERT INTO {p}event (session_id, idx, event_id, event_type, payload, created_at, lane,"
        " lane_ready, due_at, processed_at) SELECT base.session_id, base.last + b.n, b.event_id, b.event_type,"
        " b.payload, ?, b.lane, CASE WHEN b.lane IS NULL THEN 1 WHEN b.blocked = 1 OR EXISTS (SELECT 1"
        " FROM {p}event x WHERE x.session_id = base.session_id AND x.lane = b.lane AND x.processed_at IS NULL)"
        " THEN 0 ELSE 1 END, ?, b.processed_at FROM base CROSS JOIN batch b RETURNING idx)"
        " SELECT idx, (SELECT pending FROM base) FROM inserted" + (" ORDER BY idx" if n > 1 else ""),
        reread=Reread(
            "SELECT e.idx, CASE WHEN ? THEN (SELECT " + PENDING_OF_SESSION + " FROM {p}event_session s"
            f" WHERE s.session_id = e.session_id) END FROM {{p}}event e WHERE e.event_id IN ({ids})"
            " AND e.session_id = ? AND e.created_at = ? ORDER BY e.idx",
            (6 * n, *range(0, 6 * n, 6), 6 * n + 1, 6 * n + 3),
        ),
    )


# The session row locked (FOR UPDATE), nothing read: sent ahead of a locking
# read so that read's snapshot is taken with the lock held (a statement that
# waited for a lock reads a snapshot from before the wait: LOCK_SESSION).
LOCK_SESSION_ROW = READ("SELECT 1 FROM {p}event_session WHERE session_id = ?{for_update}")
# Whether the events sent to indexes (? , ?] of the session all went in
# (``require``d after INSERT_EVENT statements nobody awaited): with the
# session lock held from before the last index was read, the rows there are
# this transaction's, so a count short means an insert found its id taken.
INSERTED = READ("SELECT COUNT(*) = ? FROM {p}event WHERE session_id = ? AND idx > ? AND idx <= ?")
# put_snapshot outside a transaction: the session lock, the check that the
# index is at most the session's last, and the write, in one statement (its
# own commit). Answers the last index (NULL: no session; a stale one when its
# lock waited, so a refusal is checked again by the full path) and whether the
# snapshot was stored. A retry after a lost connection re-reads the snapshot
# by its index and time (found: it committed and stored it).
PUT_SNAPSHOT_CHECKED = WRITE_ROWS(
    "WITH s AS (SELECT " + LAST_OF_SESSION + " AS last FROM {p}event_session s"
    " WHERE s.session_id = ?{for_update_of:s}),"
    " w AS (INSERT INTO {p}event_snapshot (session_id, reducer_name, up_to_index, state, updated_at)"
    " SELECT ?, ?, ?, ?, ? FROM s WHERE s.last >= ? ON CONFLICT (session_id, reducer_name) DO UPDATE SET"
    " up_to_index = excluded.up_to_index, state = excluded.state, updated_at = excluded.updated_at"
    " WHERE excluded.up_to_index > {p}event_snapshot.up_to_index RETURNING 1)"
    " SELECT (SELECT last FROM s), EXISTS (SELECT 1 FROM w)",
    reread=Reread(
        "SELECT CAST(? AS {int64}), TRUE FROM {p}event_snapshot WHERE session_id = ? AND reducer_name = ?"
        " AND up_to_index = ? AND updated_at = ?",
        (3, 1, 2, 3, 5),
    ),
)
# renew_claims of up to RENEW_AT_ONCE distinct indexes in one statement (in a
# transaction, whose COMMIT follows its answer): each claim's RENEW as a CTE of
# its own, then per claim that names an event its index, attempt count and
# whether it was renewed. One primary-key lookup a claim, whatever the plan
# statistics say (a join of the claims as an array planned, on fresh tables,
# a scan of the whole session). Parameters: RENEW's for each claim, then the
# session and the index of each.
RENEW_AT_ONCE = 16


def renew_all(n: int) -> Statement:
    """The statement renewing ``n`` claims (1 .. RENEW_AT_ONCE), see above."""
    renews = ", ".join(f"r{i} AS ({_RENEW} RETURNING idx)" for i in range(n))
    answers = " UNION ALL ".join(
        f"SELECT idx, attempt_count, EXISTS (SELECT 1 FROM r{i}) FROM {{p}}event WHERE session_id = ? AND idx = ?"
        for i in range(n)
    )
    return WRITE_ROWS(f"WITH {renews} {answers}")


READ_RANGE = READ(
    "SELECT " + COLUMNS + " FROM {p}event WHERE session_id = ? AND idx > ? AND idx <= ? ORDER BY idx LIMIT ?"
)


def _state_read(columns: tuple[str, ...]) -> str:
    """The snapshot and the events after it in one statement (one consistent read).

    A snapshot moving on, or a prune, between two reads could not tear it.
    Rows: ``row_kind`` (0 the snapshot, 1 an event), then ``columns``; the
    snapshot's up_to_index and state ride in the idx and payload columns.
    """
    snapshot = ", ".join("up_to_index" if c == "idx" else "state" if c == "payload" else "NULL" for c in columns)
    return (
        "SELECT 0 AS row_kind, " + snapshot + " FROM {p}event_snapshot WHERE session_id = ? AND reducer_name = ?"
        " UNION ALL SELECT 1 AS row_kind, " + ", ".join(columns) + " FROM {p}event WHERE session_id = ? AND idx >"
        " COALESCE((SELECT up_to_index FROM {p}event_snapshot WHERE session_id = ? AND reducer_name = ?), 0)"
        f" ORDER BY 1, {2 + columns.index('idx')}"
    )


READ_STATE = READ(_state_read(EVENT_COLUMNS))
# The same with only what the a2 seed's read_state returns of an event (Events._brief_state).
READ_STATE_BRIEF = READ(_state_read(BRIEF_COLUMNS))
PUT_SNAPSHOT = WRITE(
    "INSERT INTO {p}event_snapshot (session_id, reducer_name, up_to_index, state, updated_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, reducer_name) DO UPDATE SET"
    " up_to_index = excluded.up_to_index, state = excluded.state, updated_at = excluded.updated_at"
    " WHERE excluded.up_to_index > {p}event_snapshot.up_to_index"
)
LIST_SNAPSHOTS = READ(
    "SELECT reducer_name, up_to_index, updated_at FROM {p}event_snapshot WHERE session_id = ? ORDER BY reducer_name"
)
# Flags (? = 0 OR ...) switch the optional bounds on and off, so one text
# serves every combination of prefix upper bound and cursor.
LIST_SESSIONS = READ(
    "SELECT session_id, COUNT(*),"
    " SUM(CASE WHEN processed_at IS NULL AND failed_at IS NULL THEN 1 ELSE 0 END),"
    " SUM(CASE WHEN failed_at IS NOT NULL THEN 1 ELSE 0 END), SUM(attempt_count), SUM(failure_count),"
    " MIN(created_at), MAX(created_at), MAX(first_claimed_at), MAX(last_claimed_at), MAX(last_failed_at),"
    " MAX(processed_at), MAX(failed_at)"
    " FROM {p}event WHERE session_id >= ? AND (? = 0 OR session_id < ?) AND (? = 0 OR session_id > ?)"
    " GROUP BY session_id ORDER BY session_id LIMIT ?"
)
# Backlog per lane across every session (Events.lane_backlog), for alerts:
# over the oldest ``?`` ready events only (event_due, in due order), so an
# inspector polling it costs O(that bound) however deep the backlog is. A
# ready event still naming a holder is one whose claim ran out (a claim
# moves due_at to its expiry; complete and fail clear the holder).
LANE_READY = READ(
    "SELECT lane, COUNT(*) AS ready, MIN(due_at) AS oldest_due,"
    " SUM(CASE WHEN claim_holder IS NULL THEN 0 ELSE 1 END) AS expired_claims"
    " FROM (SELECT lane, due_at, claim_holder FROM {p}event WHERE " + _READY + " AND due_at <= ?"
    " ORDER BY due_at, session_id, idx LIMIT ?) r GROUP BY lane"
)
# Dead letters per lane, over at most ``?`` of them (event_dead).
LANE_DEAD = READ(
    "SELECT lane, COUNT(*) AS dead FROM (SELECT lane FROM {p}event WHERE failed_at IS NOT NULL LIMIT ?) d GROUP BY lane"
)
DEAD_IN_SESSION = READ(
    "SELECT " + COLUMNS + " FROM {p}event WHERE session_id = ? AND failed_at IS NOT NULL AND idx > ?"
    " ORDER BY idx LIMIT ?"
)
DEAD_ALL = READ(
    "SELECT " + COLUMNS + " FROM {p}event WHERE failed_at IS NOT NULL"
    " AND (session_id > ? OR (session_id = ? AND idx > ?)) ORDER BY session_id, idx LIMIT ?"
)
REDRIVE_ONE = WRITE(
    "UPDATE {p}event SET failed_at = NULL, failure_count = 0, due_at = ?"
    " WHERE session_id = ? AND idx = ? AND failed_at IS NOT NULL"
)
# A dead-lettered event settled without processing (``discard``): processed
# by no attempt, with no returned events; it keeps its failure count and
# last error. Its lane (returned) then moves on, as on a completion.
DISCARD_DEAD = WRITE_ROWS(
    "UPDATE {p}event SET processed_at = ?, processed_by_attempt = NULL, returned_event_ids = '[]', failed_at = NULL,"
    " lane_ready = 0, claim_holder = NULL, claim_expires_at = NULL"
    " WHERE session_id = ? AND idx = ? AND failed_at IS NOT NULL RETURNING lane"
)
REDRIVE_SESSION = WRITE(
    "UPDATE {p}event SET failed_at = NULL, failure_count = 0, due_at = ? WHERE session_id = ? AND failed_at IS NOT NULL"
)
SNAPSHOT_FLOORS = READ(
    "SELECT f.session_id, f.covered, " + LAST_OF_SESSION + " FROM (SELECT session_id, MIN(up_to_index) AS covered"
    " FROM {p}event_snapshot GROUP BY session_id) f JOIN {p}event_session s ON s.session_id = f.session_id"
    " ORDER BY f.session_id"
)
PRUNE = WRITE(
    "DELETE FROM {p}event WHERE session_id = ? AND idx IN (SELECT idx FROM {p}event WHERE session_id = ?"
    " AND processed_at IS NOT NULL AND processed_at <= ? AND idx <= ? ORDER BY idx LIMIT ?)"
)

# Retention: a session goes oldest events first, up to the index it had when
# the deletion began (readers meanwhile see a shrinking suffix), then, under
# the session lock, whatever is left with its snapshots and its row.
DELETE_SESSION_BATCH = WRITE(
    "DELETE FROM {p}event WHERE session_id = ? AND idx IN (SELECT idx FROM {p}event WHERE session_id = ?"
    " AND idx <= ? ORDER BY idx LIMIT ?)"
)
DELETE_SESSION_EVENTS = WRITE("DELETE FROM {p}event WHERE session_id = ?")
DELETE_SESSION_SNAPSHOTS = WRITE("DELETE FROM {p}event_snapshot WHERE session_id = ?")
DELETE_SESSION_ROW = WRITE("DELETE FROM {p}event_session WHERE session_id = ?")
# Settled: nothing unprocessed (no pending, claimed or dead-lettered event) and
# no activity since the cutoff (the last processing, or the session's creation).
_SETTLED = (
    " " + _NOTHING_PENDING + " AND COALESCE((SELECT MAX(e.processed_at) FROM {p}event e"
    " WHERE e.session_id = s.session_id), s.created_at) < ?"
)
SETTLED_SESSIONS = READ(
    "SELECT s.session_id FROM {p}event_session s WHERE s.session_id > ? AND"
    + _SETTLED
    + " ORDER BY s.session_id LIMIT ?"
)
STILL_SETTLED = READ("SELECT 1 FROM {p}event_session s WHERE s.session_id = ? AND" + _SETTLED)
