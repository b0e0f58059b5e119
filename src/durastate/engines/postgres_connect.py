"""Opening a PostgreSQL store: validate the URL, connect once, say clearly why not.

``PostgresEngine`` connects one probe connection itself before it starts
the pool, so a misconfiguration fails at once, within the connect timeout,
with the server's own message, and the pool never starts retrying (and
logging) in the background; once configured, the probe becomes the pool's
first connection (``LifoPool.give_first``). What the probe's failure means:

* the URL or an option value is malformed (libpq refuses it before any
  network traffic), the server rejected the login (unknown database or
  role, failed authentication, no ``pg_hba.conf`` entry) or a startup
  option (``options=-c...``): ``ConfigurationError``, permanent;
* ``min_connections`` is more than the server, the login role or the
  database lets this role have (``unfillable_pool``): the pool would connect
  until ``busy_timeout``, each connect past the limit refused ("too many
  clients already", "too many connections for role", which alone look
  transient), and the store would be refused as unavailable after taking
  every slot it could: ``ConfigurationError``, permanent;
* the server could not be reached (refused, timed out, unknown host) or is
  not accepting connections right now (starting up, shutting down, in
  recovery, out of connection slots): ``StoreUnavailable``, transient.

libpq reports a refused startup as text only (no SQLSTATE reaches the
client for it), so this is the one place that reads a driver message: a
failure the *server* sent (its severity, ``FATAL:``, is in the text) is
permanent unless it is one of the server's transient refusals listed in
``_TRANSIENT_SERVER_REFUSALS`` (SQLSTATE 53300, 57P01-57P03 in English;
a server with translated messages gets them reported as permanent, which
errs on "fix the configuration" rather than on retrying forever).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..errors import ConfigurationError, DurastateError, StoreUnavailable

__all__ = ["behind_pooler", "connect_failure", "connect_options", "listen_options", "unfillable_pool"]

CONNECT_TIMEOUT = 10  # seconds, unless the URL says ``connect_timeout=``
_SERVER_SEVERITIES = ("FATAL:", "ERROR:", "PANIC:")
_TRANSIENT_SERVER_REFUSALS = (
    "too many clients",  # 53300
    "remaining connection slots are reserved",  # 53300
    "the database system is starting up",  # 57P03
    "the database system is shutting down",  # 57P03
    "the database system is in recovery mode",  # 57P03
    "the database system is not yet accepting connections",  # 57P03
    "the database system is not accepting connections",  # 57P03
    "terminating connection due to administrator command",  # 57P01
)
# libpq's own refusals of a value (before any network traffic): permanent.
_CLIENT_REFUSALS = ("invalid ", "unrecognized", "no password supplied", "password is too long")


def connect_options(url: str, where: str) -> dict[str, Any]:
    """Keyword arguments for ``psycopg.connect(url, ...)``; malformed URLs raise ``ConfigurationError``.

    The URL's own ``connect_timeout`` wins over the default.
    """
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ConfigurationError(f"{where}: {_first_line(exc)}") from None
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        options["connect_timeout"] = CONNECT_TIMEOUT
    return options


# The listening connection (postgres_listen) idles for hours: TCP keepalives find it dead when the network
# drops it silently (a statement never goes out to find out). Seconds; the URL's own settings win.
LISTEN_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}
LISTEN_APPLICATION_NAME = "durastate listener"


def listen_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for the store's listening connection: keepalives and a name, unless the URL sets them.

    The name (``application_name``, ``LISTEN_APPLICATION_NAME``) tells
    operators which backend is a store's listener; a URL that names its
    sessions names the listener the same, as the rest of the store's.
    """
    params = conninfo_to_dict(url)  # connect_options checked it parses
    listen = dict(options)
    for key, value in LISTEN_KEEPALIVES.items():
        if key not in params:
            listen[key] = value
    if "application_name" not in params:
        listen["application_name"] = LISTEN_APPLICATION_NAME
    return listen


def connect_failure(exc: psycopg.Error, where: str) -> DurastateError:
    """What a failed connect means for the caller (see the module docstring)."""
    text = " ".join(str(exc).split())
    message = f"{where}: {text}"
    if isinstance(exc, psycopg.ProgrammingError):  # the conninfo itself
        return ConfigurationError(message)
    if any(severity in text for severity in _SERVER_SEVERITIES):
        if any(refusal in text for refusal in _TRANSIENT_SERVER_REFUSALS):
            return StoreUnavailable(message)
        return ConfigurationError(message)
    if any(refusal in text for refusal in _CLIENT_REFUSALS):
        return ConfigurationError(message)
    return StoreUnavailable(message)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def behind_pooler(conn: psycopg.Connection[Any], reported_pid: int) -> bool:
    """Whether ``conn`` reaches PostgreSQL through a connection pooler (pgbouncer, pgcat, Odyssey, ...).

    A server tells its client the process id of the backend serving it
    (BackendKeyData, for cancel requests) when the connection starts; a
    pooler hands out its own key instead (pgbouncer: random bytes), since
    its clients share backends. So the pid the connection was given and the
    pid the server reports for this session differ behind a pooler, and
    are equal on a direct connection. ``reported_pid``: what the session's
    ``pg_backend_pid()`` answered.
    """
    return int(reported_pid) != conn.info.backend_pid


def unfillable_pool(
    where: str,
    minimum: int,
    server_max: int,
    reserved: int,
    role_limit: int | None,
    database_limit: int | None,
) -> ConfigurationError | None:
    """The error for a pool of ``minimum`` connections this role can never hold, ``None`` when it can.

    ``server_max`` less ``reserved`` (the superuser_reserved_connections, 0
    for a superuser), the login role's and the database's CONNECTION LIMIT
    (-1 or ``None``: none; a superuser is held to neither).
    """
    limits = [(server_max - reserved, "the server", "raise the server's max_connections")]
    if role_limit is not None and role_limit >= 0:
        limits.append((role_limit, "its role", "raise the role's CONNECTION LIMIT (ALTER ROLE)"))
    if database_limit is not None and database_limit >= 0:
        limits.append((database_limit, "its database", "raise the database's CONNECTION LIMIT (ALTER DATABASE)"))
    fits, whose, remedy = min(limits, key=lambda limit: limit[0])
    if minimum <= fits:
        return None
    if whose == "the server":
        allows = f"its max_connections is {server_max}" + (
            f", {reserved} of them reserved for superusers" if reserved else ""
        )
    else:
        allows = f"CONNECTION LIMIT {fits}"
    return ConfigurationError(
        f"{where}: min_connections={minimum} is more connections than {whose} allows ({allows}); "
        f"open with min_connections at most {fits} (leaving room for other clients), or {remedy}"
    )
