"""The engine contract every facet is written against.

A facet (``kv``, ``queues``, ...) never imports a database driver. It holds an
``Engine`` and asks it to run statements. The engine owns connections (one per
thread), transactions (re-entrant per thread, nested ones become savepoints),
error translation (driver error -> ``durastate.errors``, by code, in one
place), the clock, and the few dialect differences.

SQL is written once per operation as a *template*: ``?`` placeholders and
``{p}`` for the validated table prefix, plus a handful of DDL tokens such as
``{blob}`` (see ``Dialect.tokens``). ``Engine.sql(template)`` turns a
template into the text the driver runs; facets compile all their statements
once, when they are created, so a call never rebuilds SQL text and both
drivers can cache the prepared statement by text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidRequest, SchemaTooNew

Row = tuple[Any, ...]
Params = Sequence[Any]
Clock = Callable[[], float]

PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,30}$")


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe table-name prefix, else raise.

    The prefix is the only caller-supplied text ever interpolated into SQL,
    so it is held to ``^[A-Za-z_][A-Za-z0-9_]{0,30}$``.
    """
    if not isinstance(prefix, str) or not PREFIX_RE.match(prefix):
        raise InvalidRequest(
            f"table prefix must match {PREFIX_RE.pattern} (letters, digits, underscore; "
            f"at most 31 characters, not starting with a digit), got {prefix!r}"
        )
    return prefix


@dataclass(frozen=True)
class Dialect:
    """What differs between SQL engines, and nothing else.

    ``tokens`` fill the ``{name}`` slots of DDL templates; ``placeholder``
    replaces ``?`` in every template; ``no_limit`` is the value bound to a
    ``LIMIT ?`` that should not limit (SQLite: -1, PostgreSQL: NULL).
    """

    name: str
    placeholder: str
    no_limit: int | None
    tokens: dict[str, str] = field(default_factory=dict)
    # SQL that answers one row when table ``?`` exists (bound: full name).
    table_exists: str = ""
    # The most bytes an indexed key (all its columns) may hold, or None.
    max_index_key: int | None = None

    def compile(self, template: str, prefix: str) -> str:
        text = template.format(p=prefix, **self.tokens)
        if self.placeholder != "?":
            # Only PostgreSQL's psycopg needs this: '%' is its escape, '?' ours.
            text = text.replace("%", "%%").replace("?", self.placeholder)
        return text


@dataclass(frozen=True)
class Migration:
    """One step of a facet's schema: DDL templates run in order.

    ``statements`` run on every dialect; ``per_dialect`` adds statements for
    one dialect only (keyed by ``Dialect.name``), run after the common ones.
    """

    statements: tuple[str, ...] = ()
    per_dialect: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def for_dialect(self, dialect: str) -> tuple[str, ...]:
        return self.statements + self.per_dialect.get(dialect, ())


@dataclass(frozen=True)
class Schema:
    """A facet's schema: its name and its ordered migrations.

    The version of a database for this facet is the number of migrations
    applied; position in the list *is* the version, so migrations are only
    ever appended, never edited or reordered.
    """

    facet: str
    migrations: tuple[Migration, ...]

    @property
    def version(self) -> int:
        return len(self.migrations)


class Engine(Protocol):
    """What a facet may ask of an engine.

    Statement methods run on the calling thread's connection; inside
    ``transaction()`` they join that transaction, otherwise each statement
    commits on its own (autocommit). They raise only ``durastate.errors``.
    """

    dialect: Dialect
    prefix: str
    url: str

    def sql(self, template: str | Mapping[str, str]) -> str: ...

    def one(self, sql: str, params: Params = ()) -> Row | None: ...

    def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def execute(self, sql: str, params: Params = ()) -> int: ...

    def executemany(self, sql: str, rows: Iterable[Params]) -> None: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def read_transaction(self) -> AbstractContextManager[None]: ...

    def in_transaction(self) -> bool: ...

    def now_ms(self) -> int: ...

    def wait_for_change(self, channel: str, timeout: float) -> None: ...

    def notify(self, channel: str, *, announced: bool = False) -> None: ...

    def migrate(self, schemas: Iterable[Schema]) -> None: ...

    def release_connection(self) -> None: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


# -- shared engine machinery -------------------------------------------------

# Tables every store has, whatever facets it uses.
#
# {p}sequence: gap-free, commit-ordered sequences (PostgreSQL; SQLite's single
# writer and AUTOINCREMENT give the same for free). A sequence is a row;
# {p}next_value(name) increments it, and the row lock is held until commit,
# so values are handed out in commit order and a rolled-back value is handed
# out again. A reader tailing ``id > last_seen`` never skips a late commit.
# Facets seed their row in their own migration.
#
# {p}attempt: one row per mutating call on a network engine, written in the
# same transaction as the call's effect (see engines.postgres). When a
# connection drops after the server committed but before the reply arrived,
# the row tells the retry that the call already happened and what it
# returned. Rows are pruned after ATTEMPT_RETENTION.
CORE_SCHEMA = Schema(
    facet="core",
    migrations=(
        Migration(
            statements=("CREATE TABLE {p}sequence (name TEXT PRIMARY KEY, value {int64} NOT NULL)",),
            per_dialect={
                "postgresql": (
                    "CREATE FUNCTION {p}next_value(seq TEXT) RETURNS BIGINT LANGUAGE sql VOLATILE AS"
                    " $$ UPDATE {p}sequence SET value = value + 1 WHERE name = seq RETURNING value $$",
                    "CREATE TABLE {p}attempt (id BYTEA PRIMARY KEY, created_at BIGINT NOT NULL, result JSON)",
                    "CREATE INDEX {p}attempt_age ON {p}attempt (created_at)",
                ),
            },
        ),
    ),
)

SCHEMA_TABLE = "{p}schema"
_CREATE_SCHEMA_TABLE = "CREATE TABLE IF NOT EXISTS {p}schema ( facet TEXT PRIMARY KEY, version INTEGER NOT NULL)"
_READ_VERSIONS = "SELECT facet, version FROM {p}schema"
_UPSERT_VERSION = (
    "INSERT INTO {p}schema (facet, version) VALUES (?, ?) ON CONFLICT (facet) DO UPDATE SET version = excluded.version"
)


class EngineBase:
    """Machinery shared by every engine: SQL compilation, clock, migrations.

    Subclasses provide the statement methods, ``transaction()`` and
    ``_migration_lock()`` (a context manager that holds a transaction which
    excludes concurrent migrators: ``BEGIN IMMEDIATE`` on SQLite, an
    advisory lock on PostgreSQL).
    """

    dialect: Dialect
    prefix: str
    url: str

    def __init__(self, *, prefix: str, clock: Clock | None) -> None:
        self.prefix = validate_prefix(prefix)
        self._clock: Clock = clock if clock is not None else time.time
        self._sql_cache: dict[str, str] = {}

    # The abstract statement API, declared for the type checker.
    def one(self, sql: str, params: Params = ()) -> Row | None:
        raise NotImplementedError

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        raise NotImplementedError

    def execute(self, sql: str, params: Params = ()) -> int:
        raise NotImplementedError

    def _migration_lock(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def sql(self, template: str | Mapping[str, str]) -> str:
        """Compile a statement template for this engine (cached by text).

        ``template`` is one text for every dialect, or a mapping from
        ``Dialect.name`` to the text for that dialect, for the few
        operations whose best SQL differs (say why next to the mapping).
        """
        if not isinstance(template, str):
            try:
                template = template[self.dialect.name]
            except KeyError:
                raise NotImplementedError(f"no {self.dialect.name} text for statement {template!r}") from None
        text = self._sql_cache.get(template)
        if text is None:
            text = self.dialect.compile(template, self.prefix)
            self._sql_cache[template] = text
        return text

    def now_ms(self) -> int:
        """The store's clock in integer milliseconds since the Unix epoch."""
        return int(self._clock() * 1000)

    def _read_versions(self) -> dict[str, int] | None:
        exists = self.one(self.sql(self.dialect.table_exists), (self.sql(SCHEMA_TABLE),))
        if exists is None:
            return None
        return {str(f): int(v) for f, v in self.all(self.sql(_READ_VERSIONS))}

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
        with self._migration_lock():
            self.execute(self.sql(_CREATE_SCHEMA_TABLE))
            current = self._read_versions() or {}
            if self._check_versions(wanted, current):
                return
            for schema in wanted:
                have = current.get(schema.facet, 0)
                for step in schema.migrations[have:]:
                    for template in step.for_dialect(self.dialect.name):
                        self.execute(self.sql(template))
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
