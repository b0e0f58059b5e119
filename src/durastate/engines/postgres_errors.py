"""PostgreSQL errors as durastate's: by SQLSTATE, and whether a connection was lost.

``translate_postgres_error`` maps every psycopg / pool exception onto the
error tree (``durastate.errors``); ``connection_lost`` tells a dropped
connection (outcome of the statement unknown, so a write's retry must ask
whether it committed: ``postgres_attempts``) from a statement error.
"""

from __future__ import annotations

from asyncio import _get_running_loop as _running_loop

import psycopg
import psycopg_pool

from ..errors import ConfigurationError, Conflict, DurastateError, InvalidRequest, StoreClosed, StoreUnavailable

__all__ = ["connection_lost", "translate_postgres_error"]

# SQLSTATE classes and codes (https://www.postgresql.org/docs/current/errcodes-appendix.html).
_UNAVAILABLE_CLASSES = ("08", "53", "57", "58", "XX", "40", "55")
# 25: invalid transaction state (a write in a read-only transaction; a
# statement in an aborted one, normally refused before it reaches the server).
# 42: the statement itself is wrong (undefined table, syntax).
_INVALID_CLASSES = ("22", "25", "42", "54")
_INVALID_CODES = {"23502", "23514"}  # not_null_violation, check_violation
_CONFLICT_CODES = {"23505", "23503", "23P01"}  # unique, foreign key, exclusion
# read_only_sql_transaction: a read_only store asked to write; invalid_schema_name
# (3F000): the search_path names no schema that exists.
_CONFIGURATION_CODES = {"25006", "3F000"}


_LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout ran out


def translate_postgres_error(exc: Exception, where: str) -> DurastateError:
    """Map a psycopg / pool exception to our error tree by SQLSTATE."""
    message = f"{where}: {exc}".strip()
    if isinstance(exc, psycopg_pool.PoolClosed):
        return StoreClosed(message)
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StoreUnavailable(f"{message} (no connection available from the pool in time)")
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            return StoreUnavailable(message)  # connection lost, server gone
        if isinstance(exc, (psycopg.DataError, psycopg.ProgrammingError)):
            return InvalidRequest(message)
        return DurastateError(message)
    if sqlstate in _CONFIGURATION_CODES:
        return ConfigurationError(message)
    if sqlstate in _CONFLICT_CODES:
        return Conflict(message)
    if sqlstate in _INVALID_CODES or sqlstate[:2] in _INVALID_CLASSES:
        return InvalidRequest(message)
    if sqlstate == _LOCK_NOT_AVAILABLE and _running_loop() is not None:
        return StoreUnavailable(
            f"{message} (this call runs on the thread of a running event loop, where it waits for a row lock"
            " only briefly: waiting longer would stall the loop, and a transaction the loop drives, holding"
            " the lock, could never finish. Call it through durastate.aio, or from another thread)"
        )
    if sqlstate[:2] in _UNAVAILABLE_CLASSES:
        return StoreUnavailable(message)
    return DurastateError(message)


_CONNECTION_LOST_STATES = {"57P01", "57P02", "57P03"}  # admin/crash shutdown, cannot connect now


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection died, outcome of the statement unknown."""
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return sqlstate.startswith("08") or sqlstate in _CONNECTION_LOST_STATES
