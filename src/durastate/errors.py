"""The one error hierarchy of durastate.

Every failure a caller can act on is one of these types. Driver exceptions
(``sqlite3.Error``, ``psycopg.Error``) never escape a public call: each engine
translates them at a single boundary, by error code (SQLite result codes,
PostgreSQL SQLSTATE), never by message text.

Which one to catch:

* ``InvalidRequest``  the call itself was wrong (type, range, size, reserved
  name). Retrying the same call cannot succeed. Nothing was changed.
  A wrong argument *type* raises ``WrongType``, an ``InvalidRequest`` that
  is also a ``TypeError``.
* ``Conflict``        the call was valid but lost a race: a compare-and-swap
  saw another revision, a lease was taken over, a batch collides with stored
  data. Re-read and decide.
* ``NotFound``        the thing named does not exist (where absence is an
  error rather than a ``None`` result).
* ``ConfigurationError`` (an ``InvalidRequest``) the store cannot work as
  configured: a path it may not create or write, a folder that is a file, a
  read-only store asked to write, a wrong database name, role or password,
  an unknown URL option. Permanent: fix the configuration. An unknown or
  wrong-typed option of ``open()`` raises ``WrongOption``, a
  ``ConfigurationError`` that is also a ``TypeError``.
* ``NotSupported`` (a ``ConfigurationError``) the store's engine does not
  offer what was asked (a maintenance tool, a feature its
  ``engine.capabilities`` declares off). Permanent for that engine.
* ``StoreCorrupt``    the file is damaged or is not a database. Permanent:
  restore it from a backup.
* ``StoreUnavailable`` the engine could not serve the call: server down,
  connection lost, database locked past the busy timeout, disk full, I/O
  error. Transient: retry later.
* ``OutcomeUnknown``  the connection was lost after a write was sent and the
  store keeps no record to tell whether it was applied (PostgreSQL opened
  with ``attempt_retention=0``). Not "retry later": read what the write
  would have changed, then decide.
* ``StoreClosed``     the ``Store`` was closed; the call was not attempted.
* ``SchemaTooNew``    the database was written by a newer durastate; we refuse
  to guess at a schema we do not know.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "Conflict",
    "DurastateError",
    "InvalidRequest",
    "NotFound",
    "NotSupported",
    "OutcomeUnknown",
    "SchemaTooNew",
    "StoreClosed",
    "StoreCorrupt",
    "StoreUnavailable",
    "WrongOption",
    "WrongType",
]


class DurastateError(Exception):
    """Base of every error durastate raises on purpose."""


class StoreUnavailable(DurastateError):
    """The engine cannot serve the call right now (down, locked, full, I/O)."""


class Conflict(DurastateError):
    """A valid call lost a race or collides with stored state."""


class NotFound(DurastateError):
    """The named thing does not exist."""


class InvalidRequest(DurastateError, ValueError):
    """The call's arguments are wrong; nothing was changed.

    Also a ``ValueError`` so code written against the standard library
    convention (``except ValueError``) keeps working.
    """


class WrongType(InvalidRequest, TypeError):
    """An argument has the wrong type (``documents.read(1)``, ``kv.get("k")``).

    An ``InvalidRequest`` like every other argument mistake, and also a
    ``TypeError``, which is what the standard library raises for the same
    mistake. Every facet raises this one class for a wrong type, with the
    message ``"<argument> must be <what>, got <type name>"``.
    """


class OutcomeUnknown(DurastateError):
    """A write's connection was lost after it was sent; it may or may not have been applied.

    Raised only where the store keeps no attempt rows (PostgreSQL opened
    with ``attempt_retention=0``), for a write whose retry would need one:
    with them, durastate retries such a write exactly once by itself. Not a
    ``StoreUnavailable``: retrying the call blindly could apply it twice.
    """


class StoreClosed(DurastateError):
    """The store was closed before this call."""


class SchemaTooNew(DurastateError):
    """The database schema is newer than this version of durastate."""


class ConfigurationError(InvalidRequest):
    """The store cannot work as configured (path, permissions, read-only, credentials, options).

    Permanent: retrying the same call cannot succeed until the
    configuration changes.
    """


class WrongOption(ConfigurationError, TypeError):
    """An option of ``open()`` that is unknown or has the wrong type (``open(bogus=1)``, ``max_value_size=1.5``).

    A ``ConfigurationError`` like every other option the store cannot work
    with, and also a ``TypeError``, which is what Python raises for an
    unknown keyword argument and what ``WrongType`` is for a wrong type.
    """


class NotSupported(ConfigurationError):
    """The store's engine does not offer this operation (see ``engine.capabilities``)."""


class StoreCorrupt(DurastateError):
    """The database file is damaged or is not a database. Permanent: restore from a backup."""
