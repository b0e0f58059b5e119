"""The engine contract every facet is written against.

A facet (``kv``, ``queues``, ...) never imports a database driver. It holds an
``Engine`` and asks it to run statements. The engine owns connections (one per
thread), transactions (re-entrant per thread, nested ones become savepoints),
error translation (driver error -> ``durastate.errors``, by code, in one
place), the clock, and the few dialect differences.
Beside this module, by concern: ``statements`` (templates, kinds,
``SQL``, the dialect), ``schema`` (schemas, migrations, the core tables),
``plans`` (``Plan``) and ``transaction`` (the transaction state machine).
Their names are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from ..errors import ConfigurationError, DurastateError, InvalidRequest, NotSupported, SchemaTooNew
from .capabilities import Capabilities
from .plans import Plan, PlanStep
from .schema import (
    _CREATE_SCHEMA_TABLE,
    _READ_VERSIONS,
    _UPSERT_VERSION,
    CORE_SCHEMA,
    CREATE_SEQUENCE,
    NEXT_VALUE,
    SCHEMA_TABLE,
    SEQUENCE_NAME_RE,
    Announce,
    Migration,
    Schema,
)
from .space import SpaceReport
from .statements import (
    DDL,
    PREFIX_RE,
    READ,
    SQL,
    TOKENS,
    WRITE,
    WRITE_ROWS,
    Dialect,
    KeyLookup,
    Kind,
    Params,
    Row,
    Spec,
    Statement,
    Template,
    in_list_lookup,
    validate_prefix,
)
from .transaction import Transaction, TransactionState, aborted_error

__all__ = [
    "CORE_SCHEMA",
    "Capabilities",
    "CREATE_SEQUENCE",
    "DDL",
    "NEXT_VALUE",
    "PREFIX_RE",
    "READ",
    "SCHEMA_TABLE",
    "SEQUENCE_NAME_RE",
    "SQL",
    "TOKENS",
    "WRITE",
    "WRITE_ROWS",
    "Announce",
    "Clock",
    "Dialect",
    "Engine",
    "EngineBase",
    "KeyLookup",
    "Kind",
    "Migration",
    "Params",
    "Plan",
    "PlanStep",
    "Row",
    "Schema",
    "Spec",
    "Statement",
    "Template",
    "Transaction",
    "TransactionState",
    "aborted_error",
    "in_list_lookup",
    "validate_prefix",
]

Clock = Callable[[], float]


class Engine(Protocol):
    """What a facet may ask of an engine.

    Statement methods run on the calling thread's connection; inside
    ``transaction()`` they join that transaction, otherwise each statement
    commits on its own (autocommit). They raise only ``durastate.errors``.
    """

    dialect: Dialect
    prefix: str
    url: str
    # The value bound to ``LIMIT ?`` for "no limit".
    no_limit: int | None
    # What this engine offers (see ``engines.capabilities``).
    capabilities: Capabilities
    read_only: bool

    def sql(self, statement: Statement | KeyLookup | Template) -> SQL: ...

    def one(self, sql: str, params: Params = ()) -> Row | None: ...

    def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def execute(self, sql: str, params: Params = ()) -> int: ...

    def executemany(self, sql: str, rows: Iterable[Params]) -> None: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def read_transaction(self) -> AbstractContextManager[None]: ...

    def in_transaction(self) -> bool: ...

    def lock(self, name: str) -> None: ...

    def catalog(self) -> list[tuple[str, ...]]: ...

    def explain(self, sql: str, params: Params = ()) -> Plan: ...

    def integrity_errors(self) -> list[str]: ...

    def next_value(self, name: str) -> int: ...

    def now_ms(self) -> int: ...

    def wait_for_change(self, channel: str, timeout: float) -> None: ...

    def notify(self, channel: str, *, announced: bool = False) -> None: ...

    def migrate(self, schemas: Iterable[Schema]) -> None: ...

    def prune_bookkeeping(self, *, limit: int | None = None) -> int: ...

    def reclaim_space(self, *, full: bool = False) -> SpaceReport: ...

    def release_connection(self) -> None: ...

    def no_wait_changes(self) -> int: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


class EngineBase:
    """Machinery shared by every engine: SQL compilation, clock, migrations,
    the transaction state machine (``Transaction``).

    Subclasses provide the statement methods and the transaction
    primitives ``_tx_begin``/``_tx_commit``/``_tx_rollback``/
    ``_tx_savepoint``/``_tx_release``/``_tx_rollback_to``, set ``_local``
    to a ``TransactionState`` (subclass) and ``_closed``, and call
    ``_doom(error)`` when a statement fails inside a transaction.
    """

    dialect: Dialect
    prefix: str
    url: str
    _local: TransactionState
    _closed: bool

    def __init__(self, *, prefix: str, clock: Clock | None, read_only: bool = False) -> None:
        self.prefix = validate_prefix(prefix)
        if not isinstance(read_only, bool):
            raise InvalidRequest(f"read_only must be True or False, got {read_only!r}")
        self.read_only = read_only
        self._clock: Clock = clock if clock is not None else time.time
        self._sql_cache: dict[tuple[Kind, str], SQL] = {}
        self._next_value_sql = self.sql(NEXT_VALUE)

    no_limit: int | None = None
    capabilities: Capabilities

    def no_wait_changes(self) -> int:
        """For async front ends: make this thread's calls refuse a held lock at once.

        Returns the count of rows this thread's connection has changed so
        far (a call refused with ``LockBusy`` while it is unchanged changed
        nothing, so it may run again on a worker). Only engines declaring
        ``capabilities.inline_async_calls`` offer it; the others raise
        ``NotSupported``.
        """
        raise NotSupported(f"{self.url}: this engine does not run calls inline on an event loop")

    # -- dialect helpers -------------------------------------------------------

    def lock(self, name: str) -> None:
        """Take the cross-key lock ``name`` until the open transaction ends.

        For writers that must exclude each other beyond the rows they touch
        (say, every writer of one facet). Refused outside a transaction.
        """
        if not self.in_transaction():
            raise InvalidRequest(f"lock({name!r}) outside a transaction would be released at once")
        self._take_lock(name)

    def _take_lock(self, name: str) -> None:
        raise NotImplementedError

    def explain(self, sql: str, params: Params = ()) -> Plan:
        """The plan this engine would run ``sql`` (compiled by ``sql()``) with.

        Never runs the statement. Where the engine prepares statements and
        reuses their plans (PostgreSQL), this is the generic plan, the one
        a hot statement ends up with; the planner is also told to avoid
        sequential scans, so that a small test table shows the path a large
        one would take (a statement no index serves still shows a scan).
        """
        raise NotImplementedError

    def integrity_errors(self) -> list[str]:
        """Problems the engine finds in its own files (``[]``: none, or nothing it can check)."""
        return []

    def catalog(self) -> list[tuple[str, ...]]:
        """This store's schema objects (tables or columns, indexes, triggers, ...), sorted.

        Rows of strings, engine-specific in content but stable: two stores
        with the same prefix and schema give equal catalogs (used to check
        that a fresh schema equals one built by every migration in turn).
        """
        raise NotImplementedError

    def next_value(self, name: str) -> int:
        """The next value of gap-free sequence ``name`` (see ``Migration.sequences``).

        Inside a transaction the value is handed out in commit order: the
        sequence row stays locked until the transaction ends.
        """
        row = self.one(self._next_value_sql, (name,))
        if row is None:
            raise DurastateError(f"{self.url}: sequence {name!r} does not exist (no migration created it)")
        return int(row[0])

    def migration_statements(self, step: Migration) -> tuple[str, ...]:
        """The DDL templates this engine runs for ``step``, in order."""
        out: list[str] = []
        for name in step.sequences:
            if not SEQUENCE_NAME_RE.match(name):
                raise InvalidRequest(f"sequence name {name!r} must match {SEQUENCE_NAME_RE.pattern}")
            out.append(CREATE_SEQUENCE.replace("{name}", name))
        out.extend(step.statements)
        for announce in step.announce:
            out.extend(self._announce_ddl(announce))
        out.extend(step.per_dialect.get(self.dialect.name, ()))
        return tuple(out)

    def _announce_ddl(self, announce: Announce) -> tuple[str, ...]:
        """DDL that makes the server announce inserts itself; none by default."""
        return ()

    # -- transactions ----------------------------------------------------------

    def transaction(self) -> Transaction:
        """A write transaction (re-entrant per thread: nested blocks are savepoints)."""
        return Transaction(self)

    def read_transaction(self) -> Transaction:
        """One consistent snapshot for several reads, without the write lock."""
        return Transaction(self, read=True)

    def in_transaction(self) -> bool:
        return self._local.depth > 0

    def _migration_lock(self) -> Transaction:
        """A transaction that excludes concurrent migrators of this prefix."""
        return Transaction(self, lock=f"durastate-migrate:{self.prefix}")

    def _doom(self, error: DurastateError) -> DurastateError:
        """Record ``error`` (a statement failed) against the open transaction, if any."""
        state = self._local
        if state.depth and state.doomed is None:
            state.doomed = error
            state.doomed_level = state.depth
        return error

    def _tx_begin(self, read: bool, lock: str | None) -> None:
        raise NotImplementedError

    def _tx_commit(self) -> None:
        raise NotImplementedError

    def _tx_rollback(self) -> None:
        """Roll back the transaction; never raises (best effort)."""
        raise NotImplementedError

    def _tx_savepoint(self, name: str) -> None:
        raise NotImplementedError

    def _tx_release(self, name: str) -> None:
        raise NotImplementedError

    def _tx_rollback_to(self, name: str) -> None:
        """Roll back to and release savepoint ``name``; never raises (best effort)."""
        raise NotImplementedError

    # The abstract statement API, declared for the type checker.
    def one(self, sql: str, params: Params = ()) -> Row | None:
        raise NotImplementedError

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        raise NotImplementedError

    def execute(self, sql: str, params: Params = ()) -> int:
        raise NotImplementedError

    def sql(self, statement: Statement | KeyLookup | Template) -> SQL:
        """Compile a statement for this engine (cached by kind and text).

        ``statement`` is a ``Statement`` (``READ(...)``, ``WRITE(...)``,
        ...) or a ``KeyLookup``; a bare template is of kind ``OPAQUE``. A template is one text
        for every dialect, or a mapping from ``Dialect.name`` to the text
        for that dialect.
        """
        template: Template
        if isinstance(statement, KeyLookup):
            kind = Kind.WRITE if statement.delete else Kind.READ
            template = self.dialect.key_lookup(statement)
        elif isinstance(statement, Statement):
            kind, template = statement.kind, statement.template
        else:
            kind, template = Kind.OPAQUE, statement
        if not isinstance(template, str):
            try:
                template = template[self.dialect.name]
            except KeyError:
                raise NotImplementedError(f"no {self.dialect.name} text for statement {template!r}") from None
        key = (kind, template)
        compiled = self._sql_cache.get(key)
        if compiled is None:
            compiled = self._compiled(SQL(self.dialect.compile(template, self._prefix_for(kind)), kind))
            self._sql_cache[key] = compiled
        return compiled

    def _compiled(self, sql: SQL) -> SQL:
        """Hook: an engine attaches its per-statement companions to ``sql``."""
        return sql

    def _prefix_for(self, kind: Kind) -> str:
        """Hook: the text ``{p}`` becomes in a statement of ``kind`` (a schema-qualified prefix, say)."""
        return self.prefix

    def now_ms(self) -> int:
        """The store's clock in integer milliseconds since the Unix epoch.

        A clock that returns anything but a finite number of seconds is a
        configuration mistake: ``InvalidRequest`` naming what it returned.
        """
        seconds = self._clock()
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            try:
                return int(seconds * 1000)
            except (OverflowError, ValueError):  # inf, nan
                pass
        raise InvalidRequest(f"the store's clock returned {seconds!r}; it must return seconds since the epoch")

    def _read_versions(self) -> dict[str, int] | None:
        exists = self.one(self.sql(READ(self.dialect.table_exists)), (SCHEMA_TABLE.format(p=self.prefix),))
        if exists is None:
            return None
        return {str(f): int(v) for f, v in self.all(self.sql(_READ_VERSIONS))}

    def prune_bookkeeping(self, *, limit: int | None = None) -> int:
        """Delete up to ``limit`` (``None``: all) rows of the engine's own bookkeeping past their retention.

        ``Store.maintain()`` calls it. Returns the number of rows deleted.
        An engine that keeps no bookkeeping (SQLite) has nothing to do.
        """
        return 0

    def reclaim_space(self, *, full: bool = False) -> SpaceReport:
        """Give space that deletes freed back to the filesystem, after ``Store.maintain()``'s rules.

        Without ``full``: what costs only short steps (SQLite: incremental
        vacuum and a WAL truncate); ``full``: the thorough pass the engine
        offers (SQLite: ``VACUUM``; PostgreSQL: ``VACUUM (ANALYZE)``). An
        engine with nothing to return returns an empty report.
        """
        return SpaceReport()

    def migrate(self, schemas: Iterable[Schema]) -> None:
        """Bring every facet in ``schemas`` to the code's version.

        Cheap when nothing is to do (one read, no write lock). Otherwise
        takes the migration lock, re-reads the versions (another process may
        have migrated meanwhile) and applies the missing steps, all in one
        transaction, so concurrent openers migrate exactly once.

        Raises ``SchemaTooNew`` when the database has a facet at a version
        this code does not know.
        """
        wanted = list(schemas)
        current = self._read_versions()
        if current is not None and self._check_versions(wanted, current):
            return
        if self.read_only:
            raise ConfigurationError(
                f"{self.url}: opened read_only, but its schema is "
                + ("missing (not a durastate store yet)" if current is None else "older than this durastate")
                + ": open it writable once to create or migrate it"
            )
        with self._migration_lock():
            self.execute(self.sql(_CREATE_SCHEMA_TABLE))
            current = self._read_versions() or {}
            if self._check_versions(wanted, current):
                return
            for schema in wanted:
                have = current.get(schema.facet, 0)
                for step in schema.migrations[have:]:
                    for template in self.migration_statements(step):
                        self.execute(self.sql(DDL(template)))
                if have < schema.version:
                    self.execute(self.sql(_UPSERT_VERSION), (schema.facet, schema.version))

    def _check_versions(self, wanted: list[Schema], current: dict[str, int]) -> bool:
        """True when every facet is current; raise if one is newer than the code."""
        up_to_date = True
        for schema in wanted:
            have = current.get(schema.facet, 0)
            if have > schema.version:
                raise SchemaTooNew(
                    f"{self.url}: facet {schema.facet!r} is at schema version {have}, "
                    f"this durastate knows only up to {schema.version}; upgrade durastate"
                )
            if have < schema.version:
                up_to_date = False
        return up_to_date
