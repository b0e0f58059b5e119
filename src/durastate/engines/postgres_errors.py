"""PostgreSQL errors as durastate's: by SQLSTATE, whether a connection was lost, whether to go elsewhere.

``translate_postgres_error`` maps every psycopg / pool exception onto the
error tree (``durastate.errors``); ``connection_lost`` tells a dropped
connection (outcome of the statement unknown, so a write's retry must ask
whether it committed: ``postgres_attempts``) from a statement error;
``node_unusable`` adds the refusals of a node that cannot take this
store's statements *now* but another node (or this one, later) can: a
standby or a node turned read-only (SQLSTATE 25006 on a store not opened
read-only; the 0A000 / 55000 "... during recovery" refusals), one starting
up or shutting down (57P03). Both mean: discard the connection, retry the
statement on a fresh one (under the attempt rules), until a deadline.

25006 is the one code whose meaning depends on the store: a store opened
``read_only=True`` sets ``default_transaction_read_only`` itself, so there
it means "this store was asked to write", a ``ConfigurationError``; on any
other store it means the node it reached cannot take writes now (a
failover demoted it, a proxy or DNS name points at a replica, a multi-host
URL without ``target_session_attrs=read-write`` reached a standby),
``StoreUnavailable`` once the retries run out.
"""

from __future__ import annotations

import psycopg
import psycopg_pool

from ..errors import ConfigurationError, Conflict, DurastateError, InvalidRequest, StoreClosed, StoreUnavailable
from .loop import running_loop as _running_loop

__all__ = ["connection_lost", "node_unusable", "translate_postgres_error"]

# SQLSTATE classes and codes (https://www.postgresql.org/docs/current/errcodes-appendix.html).
_UNAVAILABLE_CLASSES = ("08", "53", "57", "58", "XX", "40", "55")
# 25: invalid transaction state (a write in a read-only transaction; a
# statement in an aborted one, normally refused before it reaches the server).
# 42: the statement itself is wrong (undefined table, syntax).
_INVALID_CLASSES = ("22", "25", "42", "54")
_INVALID_CODES = {"23502", "23514"}  # not_null_violation, check_violation
_CONFLICT_CODES = {"23505", "23503", "23P01"}  # unique, foreign key, exclusion
# invalid_schema_name (3F000): the search_path names no schema that exists.
_CONFIGURATION_CODES = {"3F000"}
_READ_ONLY_TRANSACTION = "25006"  # read_only_sql_transaction: see the module docstring
# feature_not_supported / object_not_in_prerequisite_state, raised by a standby for what only a primary does
# ("cannot set transaction read-write mode during recovery", "cannot execute NOTIFY during recovery", ...).
_RECOVERY_REFUSAL_CODES = {"0A000", "55000"}
_RECOVERY_REFUSAL = "during recovery"


_LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout ran out


def translate_postgres_error(exc: Exception, where: str, *, read_only: bool = False) -> DurastateError:
    """Map a psycopg / pool exception to our error tree by SQLSTATE (``read_only``: the store's option)."""
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
    if sqlstate == _READ_ONLY_TRANSACTION:
        if read_only:
            return ConfigurationError(message)
        return StoreUnavailable(f"{message} (the node reached does not take writes now: a standby, or read-only)")
    if _recovery_refusal(exc, sqlstate):
        return StoreUnavailable(f"{message} (the node reached is a standby)")
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


# The server ended the session: admin/crash shutdown, cannot connect now, idle-session timeout,
# idle-in-transaction timeout, transaction timeout (PostgreSQL 17).
_CONNECTION_LOST_STATES = {"57P01", "57P02", "57P03", "57P05", "25P03", "25P04"}


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection died, outcome of the statement unknown."""
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return sqlstate.startswith("08") or sqlstate in _CONNECTION_LOST_STATES


def _recovery_refusal(exc: BaseException, sqlstate: str) -> bool:
    return sqlstate in _RECOVERY_REFUSAL_CODES and _RECOVERY_REFUSAL in str(exc)


def node_unusable(exc: BaseException, *, read_only: bool) -> bool:
    """True when ``exc`` means: drop this connection, the statement may succeed on a fresh one.

    The connection was lost (``connection_lost``), or the node it reaches
    cannot take this store's statements now (see the module docstring). A
    refusal means the statement was not applied; a lost connection leaves
    its outcome unknown (the caller's retry replays a write's attempt row).
    """
    if connection_lost(exc):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        return False
    return (sqlstate == _READ_ONLY_TRANSACTION and not read_only) or _recovery_refusal(exc, sqlstate)
