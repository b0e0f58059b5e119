"""Attempt bookkeeping: no retry of a PostgreSQL write ever applies it twice.

Outside a transaction a statement may be retried when its connection is
lost. A read is simply run again. A write (INSERT/UPDATE/DELETE) runs as
its attempt-recording variant (``attempt_variant``): a data-modifying CTE
that applies the write and, in the same statement, inserts an
``{p}attempt`` row keyed by its attempt id (``attempt_id``: the time, then
random bytes) with what a retry needs to
answer as the first attempt would have, and no more. If the connection
drops with the outcome unknown, the retry first looks the attempt id up
(``replay``): found means the write committed and its recorded result is
returned; absent means it did not, and it is run again. So no retry ever
applies a write twice, and the normal path stays one round trip. A
transaction records one attempt row with its first write (its id and
time: a done marker), which answers the same question for a COMMIT whose
connection dropped. A transaction that takes a sequence value without
waiting for it (``Engine.next_value_later``) records the value in that row
(``result``), in the statement that takes it: a retry that finds the
transaction committed answers with the value it got.

What a row records, by the write's kind:

* ``WRITE``: the row count (``result``, a JSON number).
* ``WRITE`` declared ``idempotent`` (an upsert of given values, ``kv.put``):
  no attempt row at all. Its retry runs it again: if the first run
  committed, the second changes nothing more and counts the same rows.
* ``WRITE_ROWS`` declaring a ``Reread`` (a claim, whose rows carry the
  random lease token it set): no attempt row at all. The retry re-reads
  the rows by the token; found means the claim committed and they are its
  answer, none means it did not (or its lease was lost since, which a
  holder that never heard of it cannot tell from an expired lease: the
  item is claimable again either way), and it runs again.
* ``WRITE_ROWS`` declaring ``marked`` (an append to a log, whose entry
  outlives the retry): no attempt row at all. It runs as the insert that
  carries the attempt id in the row it writes (a column with a unique
  index where it is not NULL, ``ON CONFLICT DO NOTHING``): one heap row
  and one index entry fewer than an attempt row, and nothing to prune. The
  retry re-reads the rows by the attempt id; none found, it inserts again
  in a transaction of its own: a first attempt still running on the lost
  backend makes that insert wait on the unique index and, once it commits,
  insert nothing, and the retry rolls back (a gap-free sequence value it
  took is given back) and answers with the first attempt's rows.
* any other ``WRITE_ROWS`` (the destructive reads ``pop``, ``drain``,
  ``take``, whose rows are gone once they commit, and the rest): the rows
  in PostgreSQL's binary form (``rows``, ``array_send`` of the rows: each
  value in its type's binary form with its type id), so a payload is
  stored once at its own size, never hex-spelled in JSON. Decoded by
  ``decode_rows`` with psycopg's own binary loaders. A destructive read
  cannot answer a retry with less: the only other copy is deleted.

A store opened with ``attempt_retention=0`` keeps no attempt rows: every
write that would record one runs as it is (``UNRECORDED``), once, and one
whose connection is lost before its answer came raises ``OutcomeUnknown``;
a write transaction records nothing either (``UNRECORDED_ATTEMPT``), and a
lost COMMIT's answer raises the same. The other kinds above keep their
retries (they need no row).

The ``{p}attempt`` table itself is ``engines.base.CORE_SCHEMA``'s; this
module holds its statements, the retention window and the decoding of a
recorded result.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.adapt import Transformer
from psycopg.pq import Format

from .. import _validate
from .base import SQL, Kind, Params

__all__ = [
    "ATTEMPT_INSERT",
    "ATTEMPT_PRUNE",
    "ATTEMPT_PRUNE_UNTIMED",
    "ATTEMPT_PRUNE_BATCH",
    "ATTEMPT_PRUNE_EVERY",
    "ATTEMPT_RESULT",
    "ATTEMPT_RETENTION",
    "MarkedWrite",
    "UNRECORDED",
    "UNRECORDED_ATTEMPT",
    "Unrecorded",
    "MAX_ATTEMPT_RETENTION",
    "MIN_ATTEMPT_RETENTION",
    "NEXT_VALUE_RECORDED",
    "NOT_APPLIED",
    "ONE_COLUMN",
    "ONE_ROW_INSERT",
    "OPAQUE_WRITE",
    "OneRowInsert",
    "RUN_AGAIN",
    "RereadWrite",
    "attempt_args",
    "attempt_id",
    "attempt_id_floor",
    "attempt_variant",
    "decode_rows",
    "fetch_counted",
    "fetch_result",
    "replay",
    "rerun",
]

# Attempt rows answer one question: did a write whose connection dropped
# commit? Its retry asks within a second; the window is minutes so that a paused process (GC, suspended VM) still gets
# the right answer. Writes prune in passing: every ATTEMPT_PRUNE_EVERY
# writes outside a transaction, one batch of up to ATTEMPT_PRUNE_BATCH
# expired rows (4x the rate rows are added, so the table stays at about
# the window's worth of writes); opening a store prunes one batch; and
# ``prune_bookkeeping`` (``Store.maintain()``) prunes all of them.
# The window (seconds, PostgresEngine(attempt_retention=) / durastate.open)
# and its bounds are _validate's, shared with open().
ATTEMPT_RETENTION = _validate.ATTEMPT_RETENTION
MIN_ATTEMPT_RETENTION = _validate.MIN_ATTEMPT_RETENTION
MAX_ATTEMPT_RETENTION = _validate.MAX_ATTEMPT_RETENTION
ATTEMPT_PRUNE_EVERY = 256  # every 64 cost single writes 1-7 % CPU (bench-trees)
ATTEMPT_PRUNE_BATCH = 1024

ATTEMPT_INSERT = "INSERT INTO {p}attempt (id, created_at) VALUES (?, ?)"
ATTEMPT_RESULT = "SELECT result, rows FROM {p}attempt WHERE id = ?"
# ``next_value_later`` in a pipelined transaction: the sequence's next value
# (the row lock held to the end, as ``NEXT_VALUE``), written into the
# transaction's attempt row too. By whether that row is yet to be written
# (the transaction's first write) or was: inserted with it, or updated. The
# row is written even when no sequence has the name (its value is NULL):
# it still answers whether the transaction committed.
NEXT_VALUE_RECORDED = {
    True: "WITH s AS (UPDATE {p}sequence SET value = value + 1 WHERE name = ? RETURNING value),"
    " a AS (INSERT INTO {p}attempt (id, created_at, result) VALUES (?, ?, (SELECT to_json(value) FROM s)))"
    " SELECT value FROM s",
    False: "WITH s AS (UPDATE {p}sequence SET value = value + 1 WHERE name = ? RETURNING value),"
    " a AS (UPDATE {p}attempt t SET result = (SELECT to_json(value) FROM s) WHERE t.id = ?)"
    " SELECT value FROM s",
}
# SKIP LOCKED: concurrent pruners take different rows instead of waiting on each other.
# The shape is for the generic plan every statement runs: the oldest rows
# by the primary key (an attempt id starts with its time, ``attempt_id``;
# ``id < ?`` is ``attempt_id_floor`` of the cutoff, so the rows stamped
# before it; ORDER BY makes that index the only plan without a sort),
# locked, and deleted by their tuple ids (a TID scan: the rows are locked by
# this statement, so they cannot move meanwhile). ``created_at < ?`` (the
# cutoff again) is checked on the rows the index found, which are fetched
# to be locked anyway: a row is deleted only when both its id and its time
# say it expired (a retry's row keeps its first try's id and carries the
# retry's time; an id of older code is random, and 1 in ~10^7 of them
# sorts below a cutoff). The earlier ``id IN (SELECT id ... LIMIT ?)``
# planned, on a fresh table, a full scan of the table for the ids and, once
# analysed, a hash join over a full scan: 6 ms (nothing to delete) and 19
# ms (1024 rows) at 1e5 rows, once every ATTEMPT_PRUNE_EVERY writes.
# Deleting by primary key instead (``id = ANY(ARRAY(...))``) was 4.9 ms for
# 1024 rows (1024 probes of a random BYTEA key); by tuple id 1.3 ms
# (tests/postgres/test_bookkeeping.py checks the plan). Until core schema
# step 3 the order came from an index of its own on ``created_at``
# (``{p}attempt_age``), one more index entry a write.
ATTEMPT_PRUNE = (
    "DELETE FROM {p}attempt WHERE ctid = ANY(ARRAY(SELECT ctid FROM {p}attempt"
    " WHERE id < ? AND created_at < ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED))"
)
# Rows whose id does not start with a time before now (``id >= ?``,
# ``attempt_id_floor`` of the pruner's now) but whose time says they
# expired: those written by durastate before core schema step 3, whose ids
# are 16 random bytes. All but ~1 in 10^7 sort above now's floor, which
# ``ATTEMPT_PRUNE`` never reaches (the rest sort below a cutoff once the
# window has passed over them, and it takes them then);
# ``prune_bookkeeping`` runs this after it. The primary key's range from now on holds only those rows and
# any stamped by a clock ahead of the pruner's (kept by ``created_at``):
# once they are gone, one descent of the index finds nothing.
ATTEMPT_PRUNE_UNTIMED = (
    "DELETE FROM {p}attempt WHERE ctid = ANY(ARRAY(SELECT ctid FROM {p}attempt"
    " WHERE id >= ? AND created_at < ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED))"
)

# An attempt id: the store's time in milliseconds (``now_ms``, the unit of
# ``created_at``) as 8 big-endian bytes, then 8 random ones. Ids sort by
# the time they were made, so each new primary-key entry lands at the
# index's right edge (a random key lands on a random leaf page, and the
# first touch of each after a checkpoint writes a full-page image to the
# WAL), and the oldest rows are the first by the key (``ATTEMPT_PRUNE``).
# Uniqueness rests on the random half alone (64 bits drawn per id: two ids
# made in one millisecond by any processes collide with odds ~2^-64), never
# on the clock: a clock stepped back or frozen repeats a prefix, not an id.
# A clock stepped back stamps rows as older than they are: they are pruned
# that much sooner, as by ``created_at`` before (which has the same value);
# a pruner's clock stepped back only delays pruning.
_TIME_PREFIX = struct.Struct(">Q")
_LAST_MS = 2**64 - 1


def attempt_id(now_ms: int) -> bytes:
    """A new attempt id (16 bytes) made at ``now_ms``: ``attempt_id_floor(now_ms)`` then 8 random bytes."""
    try:
        return _TIME_PREFIX.pack(now_ms) + os.urandom(8)
    except struct.error:  # an injected clock before 1970 (or past 2^64 ms): the nearest end
        return attempt_id_floor(now_ms) + os.urandom(8)


def attempt_id_floor(ms: int) -> bytes:
    """8 bytes that every attempt id made before ``ms`` sorts below, and every one made at or after it not."""
    return _TIME_PREFIX.pack(min(max(ms, 0), _LAST_MS))


# A write returning a single column (``RETURNING n``, ``RETURNING payload``:
# a counter's sum, a popped payload) records ``array_send(array_agg(value))``,
# an array of that column's type, instead of an array of anonymous records:
# ~10,000 fewer server instructions a write (of ~175,000 for a counter add,
# ~235,000 for a pop: callgrind, bench/RESULTS.md "pgslot"), the cost of
# sending each value as a record (its row type looked up per statement).
# (Not for a column of an array type, which array_agg would stack into a
# two-dimensional array: no statement returns one alone.)
ONE_COLUMN = re.compile(r" RETURNING [A-Za-z_][A-Za-z0-9_]*$")
# An insert of one row of values, nothing after them (no ON CONFLICT, no
# RETURNING, no SELECT): it inserts exactly one row or fails, so its count
# is known before it runs (1), and its attempt row can go in ahead of it
# (``OneRowInsert``). A value may be a call (``{p}next_value('name')``).
ONE_ROW_INSERT = re.compile(r"INSERT INTO [\w.]+ \([\w, ]+\) VALUES \((?:[^()]|\([^()]*\))*\)\Z")
RECORD_OID = 2249  # the element type of an array of anonymous records

# The replay found no record: the first attempt did not commit.
NOT_APPLIED = object()
# attempt_variant's answer for a write it cannot turn into one attempt-recording statement.
OPAQUE_WRITE = "-- opaque write: run in a transaction --"


class RereadWrite:
    """The companion of a write whose retry re-reads its rows (``statements.Reread``)."""

    __slots__ = ("params", "sql")

    def __init__(self, sql: SQL, params: tuple[int, ...]) -> None:
        self.sql = sql
        self.params = params

    def replay(self, conn: psycopg.Connection[Any], params: Any, fetch: int) -> Any:
        """The rows the first attempt returned, found again; ``NOT_APPLIED`` when there are none."""
        rows = conn.execute(self.sql, [params[i] for i in self.params]).fetchall()
        if not rows:
            return NOT_APPLIED
        if fetch == 0:
            return len(rows)
        return rows[0] if fetch == 1 else rows


class RunAgain:
    """The companion of an idempotent write (``WRITE(idempotent=True)``): its retry runs it again."""

    __slots__ = ()

    def replay(self, conn: psycopg.Connection[Any], params: Any, fetch: int) -> Any:
        """Nothing to look up: running it again is the answer (``NOT_APPLIED``)."""
        return NOT_APPLIED


RUN_AGAIN = RunAgain()


class MarkedWrite:
    """The companion of an insert that carries its attempt id in its row (``statements.Marked``).

    ``sql`` takes the statement's parameters, then the attempt id;
    ``reread`` the attempt id alone.
    """

    __slots__ = ("reread", "sql")

    def __init__(self, sql: SQL, reread: SQL) -> None:
        self.sql = sql
        self.reread = reread

    def replay(self, conn: psycopg.Connection[Any], attempt: bytes, fetch: int) -> Any:
        """The rows the attempt ``attempt`` inserted, shaped like ``fetch_result``; ``NOT_APPLIED`` when none."""
        rows = conn.execute(self.reread, (attempt,)).fetchall()
        if not rows:
            return NOT_APPLIED
        if fetch == 0:
            return len(rows)
        return rows[0] if fetch == 1 else rows

    def run_again(self, conn: psycopg.Connection[Any], params: Any, attempt: bytes, fetch: int) -> Any:
        """The retry's insert, in a transaction of its own: rolled back when the first attempt's row is there.

        Only a first attempt that committed while this retry waited on the
        unique index makes the insert do nothing; its gap-free sequence
        value, if it took one, must not be spent, so the transaction rolls
        back and the first attempt's rows are the answer.
        """
        with conn.transaction():
            cur = conn.execute(self.sql, (*params, attempt))
            if cur.rowcount:
                return fetch_result(cur, fetch)
            raise psycopg.Rollback()
        found = self.replay(conn, attempt, fetch)
        assert found is not NOT_APPLIED, "the insert conflicted with no committed row"
        return found


class Unrecorded:
    """The companion of a write on a store that keeps no attempt rows (``attempt_retention=0``).

    It runs as it is, once: a connection lost before its answer came
    raises ``OutcomeUnknown`` (nothing could tell a retry whether it
    committed). Only writes that would record an attempt row get it:
    idempotent, re-read and marked writes keep their retries, which need no
    row.
    """

    __slots__ = ()


UNRECORDED = Unrecorded()
# A write transaction's attempt id on a store that keeps no attempt rows: it
# wrote, and nothing records whether its COMMIT took effect.
UNRECORDED_ATTEMPT = b""


class OneRowInsert:
    """The attempt-recording variant of an insert of one row of values (``ONE_ROW_INSERT``), attempt row first.

    ``sql`` takes the attempt id and the store's time, then the statement's
    parameters: the attempt row goes in by a CTE ahead of the insert, which
    stays the statement itself, answering its row count as it is (1). No
    CTE reads the inserted row back to count it: ~42,000 fewer server
    instructions a push (of ~243,000; bench/RESULTS.md "pgslot").
    """

    __slots__ = ("sql",)

    def __init__(self, sql: str) -> None:
        self.sql = sql


def attempt_variant(
    sql: SQL, prefix: str, *, lean: bool = True, recording: bool = True
) -> str | RereadWrite | RunAgain | MarkedWrite | OneRowInsert | Unrecorded | None:
    """The attempt-recording variant of a write; ``None`` for a read.

    ``OPAQUE_WRITE`` for a statement that cannot be one attempt-recording
    statement (DDL, NOTIFY): it runs in its own transaction instead,
    whose commit ambiguity the attempt row resolves, at the price of a
    few more round trips. A ``RereadWrite`` for a write that declares a ``Reread``,
    ``RUN_AGAIN`` for one declared idempotent: it runs as it is; a ``MarkedWrite``
    for one declared ``marked``: its marked insert runs instead. The variant takes the statement's parameters, then the
    attempt id and the store's time. ``lean`` (off in the Citus mode, whose
    planner they were not checked against): an insert of one row of values
    gets a ``OneRowInsert``, and a write returning one column records an
    array of that column's values, not of rows (``ONE_COLUMN``).
    ``recording`` off (``attempt_retention=0``): ``UNRECORDED`` instead of
    an attempt-recording statement.
    """
    kind = sql.kind
    if kind is Kind.READ:
        return None
    if kind is not Kind.WRITE and kind is not Kind.WRITE_ROWS:
        return OPAQUE_WRITE
    if sql.idempotent:
        return RUN_AGAIN
    if kind is Kind.WRITE_ROWS:
        if sql.reread is not None:
            return RereadWrite(*sql.reread)
        if sql.marked is not None:
            return MarkedWrite(*sql.marked)
    if not recording:
        return UNRECORDED
    if kind is Kind.WRITE_ROWS:
        if lean and ONE_COLUMN.search(sql):
            return (
                f"WITH _ds_r (_ds_c) AS ({sql}), _ds_a AS (INSERT INTO {prefix}attempt (id, created_at, rows)"
                " SELECT %s, %s, array_send(array_agg(_ds_c)) FROM _ds_r) SELECT * FROM _ds_r"
            )
        return (
            f"WITH _ds_r AS ({sql}), _ds_a AS (INSERT INTO {prefix}attempt (id, created_at, rows)"
            " SELECT %s, %s, array_send(array_agg(_ds_r)) FROM _ds_r) SELECT * FROM _ds_r"
        )
    if lean and ONE_ROW_INSERT.match(sql):
        return OneRowInsert(
            f"WITH _ds_a AS (INSERT INTO {prefix}attempt (id, created_at, result) VALUES (%s, %s, '1')) {sql}"
        )
    return (
        f"WITH _ds_r AS ({sql} RETURNING 1), _ds_a AS (INSERT INTO {prefix}attempt (id, created_at, result)"
        " SELECT %s, %s, to_json(count(*)) FROM _ds_r) SELECT count(*) FROM _ds_r"
    )


def fetch_result(cur: psycopg.Cursor[Any], fetch: int) -> Any:
    if fetch == 1:
        return cur.fetchone()
    if fetch == 2:
        return cur.fetchall()
    return cur.rowcount


def fetch_counted(cur: psycopg.Cursor[Any], fetch: int) -> Any:
    """Like ``fetch_result`` for an attempt-recording variant (its rows count the rows)."""
    if fetch == 0:
        row = cur.fetchone()
        return 0 if row is None else int(row[0])
    return fetch_result(cur, fetch)


_INT = struct.Struct("!i")
_TWO_INTS = struct.Struct("!ii")


def decode_rows(conn: psycopg.Connection[Any], data: bytes | None) -> list[tuple[Any, ...]]:
    """Rows recorded by ``array_send(array_agg(row))`` (``None``: no rows), as tuples.

    The array's binary form: dimensions, a null flag, the element type,
    (size, lower bound) per dimension, then each element as its length
    (-1: NULL) and bytes; each element a record: its field count, then per
    field its type id, length (-1: NULL) and bytes in that type's binary
    form, loaded with the connection's own binary loaders (the same ones
    that load a result). An array of one column's values (``ONE_COLUMN``)
    has that column's type as its element type: each element is a row's
    one value.
    """
    if not data:
        return []
    view = memoryview(data)
    (ndim,) = _INT.unpack_from(view, 0)
    if ndim == 0:
        return []
    (count, _lower) = _TWO_INTS.unpack_from(view, 12)
    at = 12 + 8 * ndim
    loaders = Transformer(conn)
    (element,) = _INT.unpack_from(view, 8)
    if element != RECORD_OID:  # one column's values (ONE_COLUMN): each element is a row's only value
        assert ndim == 1, "an array-typed column was recorded as one column's values"
        load = loaders.get_loader(element, Format.BINARY).load
        values: list[tuple[Any, ...]] = []
        for _ in range(count):
            (size,) = _INT.unpack_from(view, at)
            at += 4
            if size < 0:
                values.append((None,))
                continue
            values.append((load(view[at : at + size]),))
            at += size
        return values
    rows = []
    for _ in range(count):
        (length,) = _INT.unpack_from(view, at)
        at += 4
        end = at + length
        (fields,) = _INT.unpack_from(view, at)
        at += 4
        row: list[Any] = []
        for _ in range(fields):
            oid, size = _TWO_INTS.unpack_from(view, at)
            at += 8
            if size < 0:
                row.append(None)
                continue
            row.append(loaders.get_loader(oid, Format.BINARY).load(view[at : at + size]))
            at += size
        rows.append(tuple(row))
        at = end
    return rows


def replay(conn: psycopg.Connection[Any], sql: str, attempt: bytes, fetch: int) -> Any:
    """The recorded outcome of ``attempt``, shaped like ``fetch_result``; or ``NOT_APPLIED``."""
    row = conn.execute(sql, (attempt,)).fetchone()
    if row is None:
        return NOT_APPLIED
    result, data = row
    if fetch == 0:
        return len(decode_rows(conn, data)) if result is None else int(result)
    rows = decode_rows(conn, data)
    if fetch == 1:
        return rows[0] if rows else None
    return rows


def attempt_args(params: Params, attempt: bytes, now: int, first: bool) -> tuple[Any, ...]:
    """An attempt-recording variant's parameters: the attempt id and time after the statement's, or first.

    ``first``: for a ``OneRowInsert``.
    """
    return (attempt, now, *params) if first else (*params, attempt, now)


def rerun(
    conn: psycopg.Connection[Any],
    variant: str,
    args: tuple[Any, ...],
    attempt: bytes,
    fetcher: Callable[[Any, int], Any],
    lookup: str,
    fetch: int,
    prefix: str,
) -> Any:
    """A retry's run of the attempt-recording ``variant``: ``fetcher(cursor, fetch)``.

    ``args``: the variant's parameters (``attempt_args`` of ``attempt``).
    ``lookup``: ``ATTEMPT_RESULT``.

    ``replay`` found no record of the attempt, but its first try may still
    be running on the backend whose connection was lost: this run then
    waits on the attempt id's primary key and, once the first try commits,
    fails on the duplicate id and rolls back. The first try's recorded
    result is then the answer; it used to
    reach the caller as a ``Conflict``, for a write that had applied once.
    """
    try:
        return fetcher(conn.execute(variant, args), fetch)
    except psycopg.errors.UniqueViolation as exc:
        if not (exc.diag.constraint_name or "").startswith(f"{prefix}attempt_pkey".lower()):
            raise
        found = replay(conn, lookup, attempt, fetch)
        if found is NOT_APPLIED:  # the row that held the id is gone again (pruned): nothing to answer with
            raise
        return found
