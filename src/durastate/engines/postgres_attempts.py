"""Attempt bookkeeping: no retry of a PostgreSQL write ever applies it twice.

Outside a transaction a statement may be retried when its connection is
lost. A read is simply run again. A write (INSERT/UPDATE/DELETE) runs as
its attempt-recording variant (``attempt_variant``): a data-modifying CTE
that applies the write and, in the same statement, inserts an
``{p}attempt`` row keyed by a random attempt id with the write's result
(rows as JSON, or the row count). If the connection drops with the outcome
unknown, the retry first looks the attempt id up (``replay``): found means
the write committed and its recorded result is returned; absent means it
did not, and it is run again. So no retry ever applies a write twice, and
the normal path stays one round trip. A transaction records one attempt
row with its first write, which answers the same question for a COMMIT
whose connection dropped.

The ``{p}attempt`` table itself is ``engines.base.CORE_SCHEMA``'s; this
module holds its statements, the retention window and the decoding of a
recorded result.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg import generators

from .. import _validate
from .base import SQL, Kind
from .postgres_dialect import numbered

__all__ = [
    "ATTEMPT_INSERT",
    "ATTEMPT_PRUNE",
    "ATTEMPT_PRUNE_BATCH",
    "ATTEMPT_PRUNE_EVERY",
    "ATTEMPT_RESULT",
    "ATTEMPT_RETENTION",
    "MAX_ATTEMPT_RETENTION",
    "MIN_ATTEMPT_RETENTION",
    "NOT_APPLIED",
    "OPAQUE_WRITE",
    "attempt_variant",
    "fetch_counted",
    "fetch_result",
    "replay",
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
ATTEMPT_RESULT = "SELECT result FROM {p}attempt WHERE id = ?"
# SKIP LOCKED: concurrent pruners take different rows instead of waiting on each other.
# The shape is for the generic plan every statement runs: the oldest rows
# by the age index (ORDER BY makes that index the only plan without a
# sort), locked, and deleted by their tuple ids (a TID scan: the rows are
# locked by this statement, so they cannot move meanwhile). The earlier
# ``id IN (SELECT id ... LIMIT ?)`` planned, on a fresh table, a full scan of
# the table for the ids and, once analysed, a hash join over a full scan:
# 6 ms (nothing to delete) and 19 ms (1024 rows) at 1e5 rows, once every
# ATTEMPT_PRUNE_EVERY writes. Deleting by primary key instead (``id =
# ANY(ARRAY(...))``) was 4.9 ms for 1024 rows (1024 probes of a random
# BYTEA key); by tuple id 1.3 ms (tests/postgres/test_bookkeeping.py checks
# the plan).
ATTEMPT_PRUNE = (
    "DELETE FROM {p}attempt WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM {p}attempt WHERE created_at < ? ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED))"
)

# The replay found no record: the first attempt did not commit.
NOT_APPLIED = object()
# attempt_variant's answer for a write it cannot turn into one attempt-recording statement.
OPAQUE_WRITE = "-- opaque write: run in a transaction --"


def attempt_variant(sql: SQL, prefix: str) -> str | None:
    """The attempt-recording variant of a write; ``None`` for a read.

    ``OPAQUE_WRITE`` for a statement that cannot be one attempt-recording
    statement (DDL, NOTIFY): it runs in its own transaction instead,
    whose commit ambiguity the attempt row resolves, at the price of a
    few more round trips. The variant takes the statement's parameters,
    then the attempt id and the store's time.
    """
    kind = sql.kind
    if kind is Kind.READ:
        return None
    if kind is not Kind.WRITE and kind is not Kind.WRITE_ROWS:
        return OPAQUE_WRITE
    returning = kind is Kind.WRITE_ROWS
    body = sql if returning else sql + " RETURNING 1"
    result = "COALESCE(json_agg(_ds_r), '[]'::json)" if returning else "to_json(count(*))"
    final = "SELECT * FROM _ds_r" if returning else "SELECT count(*) FROM _ds_r"
    return (
        f"WITH _ds_r AS ({body}), _ds_a AS (INSERT INTO {prefix}attempt (id, created_at, result)"
        f" SELECT %s, %s, {result} FROM _ds_r) {final}"
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


_BYTEA_OID = 17


def _result_column_types(conn: psycopg.Connection[Any], variant: str) -> list[int]:
    """Type OIDs of the columns ``variant`` returns, without running it.

    The statement is prepared (never executed) under a throwaway name and
    described; psycopg's ``%s`` placeholders become ``$n`` for the server.
    All in one transaction, so that behind a transaction-mode pooler the
    three steps reach the same server session.
    """
    name = b"ds_describe_" + os.urandom(8).hex().encode()
    pgconn = conn.pgconn
    with conn.transaction():
        # psycopg runs libpq non-blocking; its own generators drive the I/O.
        pgconn.send_prepare(name, numbered(variant).encode())
        (prepared,) = conn.wait(generators.execute(pgconn))
        if prepared.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise psycopg.OperationalError(prepared.get_error_message())
        pgconn.send_describe_prepared(name)
        (described,) = conn.wait(generators.execute(pgconn))
        types = [described.ftype(i) for i in range(described.nfields)]
        conn.execute(f"DEALLOCATE {name.decode()}")
    return types


def replay(conn: psycopg.Connection[Any], sql: str, variant: str, attempt: bytes, fetch: int) -> Any:
    """The recorded outcome of ``attempt``, shaped like ``fetch_result``; or ``NOT_APPLIED``.

    Rows were recorded with ``json_agg``, where BYTEA becomes a ``"\\x<hex>"``
    string (``bytea_output = hex`` is set on every connection); the
    statement's described column types say which strings to turn back into
    bytes, so a TEXT value that happens to start with ``\\x`` stays text.
    """
    row = conn.execute(sql, (attempt,)).fetchone()
    if row is None:
        return NOT_APPLIED
    result = row[0]
    if fetch == 0:
        return int(result)
    is_bytea = [oid == _BYTEA_OID for oid in _result_column_types(conn, variant)] if result else []
    rows = [
        tuple(
            bytes.fromhex(v[2:]) if bytea and isinstance(v, str) else v
            for v, bytea in zip(item.values(), is_bytea, strict=True)
        )
        for item in result
    ]
    if fetch == 1:
        return rows[0] if rows else None
    return rows
