"""The kv facet's schema and statements, each declaring its kind.

One text per operation, with the engine's tokens (``{blob}``,
``{next_value:...}``, ...); a many-key lookup is a ``KeyLookup`` whose
statement shape each engine chooses (``get_many_sql``, ``delete_keys_sql``).
"""

from __future__ import annotations

from .._chunks import STATEMENT_BYTES
from ..engines.base import READ, WRITE, WRITE_ROWS, KeyLookup, Marked, Migration, Schema, Statement

# Keys per statement in get_many / delete(keys=): well under both engines'
# bound-parameter limits, and few distinct statement texts to cache.
KEY_CHUNK = 128

SCHEMA = Schema(
    facet="kv",
    migrations=(
        Migration(
            statements=(
                "CREATE TABLE {p}kv ("
                " scope {blob} NOT NULL, ns {blob} NOT NULL, key {blob} NOT NULL,"
                " value {blob} NOT NULL, expires_at {int64},"
                " PRIMARY KEY (scope, ns, key)){without_rowid}",
                "CREATE INDEX {p}kv_expiry ON {p}kv (expires_at) WHERE expires_at IS NOT NULL",
                "CREATE TABLE {p}kv_log ("
                " id {tail_pk}, scope {blob} NOT NULL, ns {blob} NOT NULL,"
                " key {blob} NOT NULL, value {blob} NOT NULL)",
                "CREATE INDEX {p}kv_log_key ON {p}kv_log (scope, ns, key, id)",
                # An add that would overflow int64 is refused, never turned
                # into another type ({int64_check}).
                "CREATE TABLE {p}kv_counter ("
                " scope {blob} NOT NULL, ns {blob} NOT NULL, key {blob} NOT NULL,"
                " n {int64} NOT NULL{int64_check:n},"
                " PRIMARY KEY (scope, ns, key)){without_rowid}",
            ),
            sequences=("kv_log",),
        ),
        # Logs carry the store's time of each append, for age-based trimming
        # (trim_logs). Entries appended before this step have none and count
        # as older than any cutoff.
        Migration(statements=("ALTER TABLE {p}kv_log ADD COLUMN created_at {int64}",)),
        # The attempt id of an append made outside a transaction, where the
        # engine retries writes after a lost connection (PostgreSQL): the
        # retry finds the entry by it, so no separate attempt row is written
        # (APPEND's ``marked``). NULL elsewhere (SQLite, appends inside a
        # transaction, entries from before this step), which the unique
        # index leaves out.
        Migration(
            statements=(
                "ALTER TABLE {p}kv_log ADD COLUMN attempt {blob}",
                "CREATE UNIQUE INDEX {p}kv_log_attempt ON {p}kv_log (attempt) WHERE attempt IS NOT NULL",
            )
        ),
    ),
)

# -- statements ---------------------------------------------------------------

GET = READ("SELECT value, expires_at FROM {p}kv WHERE scope = ? AND ns = ? AND key = ?")
# Idempotent: run again after it committed, the row holds the same value and
# deadline (the deadline is a bound value, computed once per call) and the
# count is 1 again, so a retry after a lost connection runs it again and
# PostgreSQL keeps no attempt row for it (engines.postgres_attempts).
PUT = WRITE(
    "INSERT INTO {p}kv (scope, ns, key, value, expires_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (scope, ns, key) DO UPDATE"
    " SET value = excluded.value, expires_at = excluded.expires_at",
    idempotent=True,
    engine_blobs=True,
)
# The common no-ttl put: the same upsert with a literal NULL deadline, which
# SQLite writes measurably faster (~7 % on a batch) than a bound NULL.
PUT_PERSISTENT = WRITE(
    "INSERT INTO {p}kv (scope, ns, key, value, expires_at) VALUES (?, ?, ?, ?, NULL)"
    " ON CONFLICT (scope, ns, key) DO UPDATE"
    " SET value = excluded.value, expires_at = NULL",
    idempotent=True,
    engine_blobs=True,
)
DRAIN = WRITE_ROWS("DELETE FROM {p}kv WHERE scope = ? AND ns = ? RETURNING key, value, expires_at")
DELETE_ALL = WRITE("DELETE FROM {p}kv WHERE scope = ? AND ns = ?")
# take / put_if_absent (KV.take, KV.put_if_absent). An expired row counts as
# absent: take removes it and reports a miss; put_if_absent replaces it.
# RETURNING yields a row only when the insert (or the replacement of an
# expired row) happened.
TAKE = WRITE_ROWS("DELETE FROM {p}kv WHERE scope = ? AND ns = ? AND key = ? RETURNING value, expires_at")
# take_first / take_last: the live value with the smallest / greatest key of a namespace, removed and returned in
# one statement (params: scope, ns, scope, ns, now). ``skip_locked`` (PostgreSQL): a row another taker's
# statement holds is passed over for the next one, so racing takers get different pairs instead of one of
# them finding its row gone and answering "empty"; SQLite runs one write at a time.
_TAKE_EDGE = (
    "DELETE FROM {p}kv WHERE scope = ? AND ns = ? AND key = (SELECT key FROM {p}kv WHERE scope = ? AND ns = ?"
    " AND (expires_at IS NULL OR expires_at > ?) ORDER BY key %s LIMIT 1{skip_locked}) RETURNING key, value"
)
TAKE_FIRST = WRITE_ROWS(_TAKE_EDGE % "ASC")
TAKE_LAST = WRITE_ROWS(_TAKE_EDGE % "DESC")
_INSERT_IF_ABSENT = (
    "INSERT INTO {p}kv (scope, ns, key, value, expires_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
    " WHERE {p}kv.expires_at IS NOT NULL AND {p}kv.expires_at <= ?"
)
PUT_IF_ABSENT = WRITE_ROWS(_INSERT_IF_ABSENT + " RETURNING 1")
PRUNE = WRITE(
    "DELETE FROM {p}kv WHERE (scope, ns, key) IN (SELECT scope, ns, key FROM {p}kv WHERE expires_at <= ? LIMIT ?)"
)
# Whether a sweep would find anything: a read on the partial expiry index,
# so the sweep in passing takes the write lock only when there is work.
PRUNE_DUE = READ("SELECT 1 FROM {p}kv WHERE expires_at <= ? LIMIT 1")
# require_absent: true when the key holds no live value (an expired one counts as absent).
NO_LIVE_VALUE = READ(
    "SELECT NOT EXISTS (SELECT 1 FROM {p}kv WHERE scope = ? AND ns = ? AND key = ?"
    " AND (expires_at IS NULL OR expires_at > ?))"
)
CLEAR_VALUES = WRITE("DELETE FROM {p}kv WHERE scope = ?")
CLEAR_LOGS = WRITE("DELETE FROM {p}kv_log WHERE scope = ?")
CLEAR_COUNTERS = WRITE("DELETE FROM {p}kv_counter WHERE scope = ?")

# Gap-free and in commit order under concurrent appenders ({next_value}).
# Marked: where a lost connection is retried, the entry carries the call's
# attempt id (the last parameter), by which the retry finds it.
_APPEND_INTO = "INSERT INTO {p}kv_log (id, scope, ns, key, value, created_at"
APPEND = WRITE_ROWS(
    _APPEND_INTO + ") VALUES ({next_value:kv_log}, ?, ?, ?, ?, ?) RETURNING id",
    marked=Marked(
        _APPEND_INTO + ", attempt) VALUES ({next_value:kv_log}, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (attempt) WHERE attempt IS NOT NULL DO NOTHING RETURNING id",
        reread="SELECT id FROM {p}kv_log WHERE attempt = ?",
    ),
)
LOG_PAGE = READ("SELECT id, value FROM {p}kv_log WHERE scope = ? AND ns = ? AND key = ? AND id > ? ORDER BY id LIMIT ?")

# Retention (see durastate._retention): the old end of every log by ordinal,
# and per-key trims on the (scope, ns, key, id) index.
LOG_OLDEST = READ("SELECT id, created_at FROM {p}kv_log ORDER BY id LIMIT ?")
LOG_DELETE_THROUGH = WRITE("DELETE FROM {p}kv_log WHERE id <= ? AND (created_at IS NULL OR created_at < ?)")
LOG_NTH_NEWEST = READ(
    "SELECT id FROM {p}kv_log WHERE scope = ? AND ns = ? AND key = ? ORDER BY id DESC LIMIT 1 OFFSET ?"
)
LOG_TRIM_KEY = WRITE(
    "DELETE FROM {p}kv_log WHERE id IN (SELECT id FROM {p}kv_log WHERE scope = ? AND ns = ? AND key = ?"
    " AND id < ? AND (created_at IS NULL OR created_at < ?) ORDER BY id LIMIT ?)"
)

# A page of a namespace's counters in key order (the primary key), for
# listings (kv.counters): keyset-paged by the last key.
COUNTER_PAGE = {
    False: READ("SELECT key, n FROM {p}kv_counter WHERE scope = ? AND ns = ? ORDER BY key LIMIT ?"),
    True: READ("SELECT key, n FROM {p}kv_counter WHERE scope = ? AND ns = ? AND key > ? ORDER BY key LIMIT ?"),
}
COUNTER_GET = READ("SELECT n FROM {p}kv_counter WHERE scope = ? AND ns = ? AND key = ?")
# The WHERE bounds (the range the old value must lie in for old + delta to
# fit in int64, computed from the delta) make an overflowing add return no
# row instead of failing the statement: a refusal, not a database error, so
# it does not doom the caller's transaction (see engines.base).
COUNTER_ADD = WRITE_ROWS(
    "INSERT INTO {p}kv_counter (scope, ns, key, n) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET n = {p}kv_counter.n + excluded.n"
    " WHERE {p}kv_counter.n BETWEEN ? AND ?"
    " RETURNING n"
)
COUNTER_SET = WRITE(
    "INSERT INTO {p}kv_counter (scope, ns, key, n) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (scope, ns, key) DO UPDATE SET n = excluded.n"
)
COUNTER_DELETE = WRITE("DELETE FROM {p}kv_counter WHERE scope = ? AND ns = ? AND key = ?")


def get_many_sql(count: int) -> KeyLookup:
    """``count`` keys of one namespace (one statement per count; params: scope, ns, keys)."""
    return KeyLookup("kv", "key, value, expires_at", ("scope", "ns"), "key", count)


# Pairs per put_many statement (5 parameters each, well under both engines'
# bound-parameter limits); a longer batch is several, in one transaction.
PUT_CHUNK = 128
# And the most value bytes a put_many statement carries (a larger value goes
# alone): see ``durastate._chunks``.
PUT_CHUNK_BYTES = STATEMENT_BYTES


def put_many_sql(count: int, *, deadline: bool, if_absent: bool) -> Statement:
    """One upsert of ``count`` pairs (params: scope, ns, key, value[, expires_at if deadline] per pair[, now]).

    A batch as one statement: atomic on its own (no transaction to open
    and commit: a third of a small batch's cost on SQLite) and one round
    trip. The pairs' keys must be distinct: PostgreSQL refuses a statement
    that would update one row twice. ``deadline``: each pair binds its
    ``expires_at`` (else a literal NULL, as ``PUT_PERSISTENT``: SQLite
    writes it faster, and Python's sqlite3 binds a ``None`` only after an
    adapter lookup costing ~3,300 instructions).
    ``if_absent``: a live stored value is kept (``_INSERT_IF_ABSENT``'s
    condition, ``now`` bound once, last). The plain upserts are idempotent
    as ``PUT`` is; the ``if_absent`` one is not declared so (as
    ``PUT_IF_ABSENT``): it keeps its attempt row on PostgreSQL.
    ``engine_blobs``: ``KV.put_many`` hands scope, ns, every key and value
    as the engine's ``blob_binding()`` made them (on SQLite a ``bytearray``
    bound as it is: no pass of ``bindable`` over a batch's parameters, ~16
    bytecodes each, bench/RESULTS.md "putmanyblobs").
    """
    row = "(?, ?, ?, ?, ?)" if deadline else "(?, ?, ?, ?, NULL)"
    text = "INSERT INTO {p}kv (scope, ns, key, value, expires_at) VALUES " + ", ".join([row] * count)
    if if_absent:
        text += (
            " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
            " WHERE {p}kv.expires_at IS NOT NULL AND {p}kv.expires_at <= ?"
        )
    elif deadline:
        text += " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
    else:
        text += " ON CONFLICT (scope, ns, key) DO UPDATE SET value = excluded.value, expires_at = NULL"
    return WRITE(text, idempotent=not if_absent, engine_blobs=True)


def delete_keys_sql(count: int) -> KeyLookup:
    return KeyLookup("kv", "", ("scope", "ns"), "key", count, delete=True)


def scan_sql(has_start: bool, has_end: bool, reverse: bool) -> Statement:
    """One page of a range scan; each bound present or not is its own text.

    Separate texts (rather than ``? IS NULL OR key < ?``) keep both bounds
    usable by the index, so a narrow range in a huge namespace stays cheap.
    Live rows only: the expiry deadline is the last bound parameter but one.
    """
    where = "scope = ? AND ns = ?"
    if has_start:
        where += " AND key >= ?"
    if has_end:
        where += " AND key < ?"
    order = "DESC" if reverse else "ASC"
    return READ(
        f"SELECT key, value FROM {{p}}kv WHERE {where}"
        f" AND (expires_at IS NULL OR expires_at > ?) ORDER BY key {order} LIMIT ?"
    )


def delete_range_sql(has_start: bool, has_end: bool) -> Statement:
    where = "scope = ? AND ns = ?"
    if has_start:
        where += " AND key >= ?"
    if has_end:
        where += " AND key < ?"
    return WRITE(f"DELETE FROM {{p}}kv WHERE {where}")


# The three tables of the kv address space, each with (scope, ns) leading an
# index: listing walks each one and merges (distinct_sql statements).
LISTED_TABLES = ("kv", "kv_log", "kv_counter")
