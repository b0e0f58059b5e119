"""Schemas and migrations: what a facet declares, and the tables every store has.

A facet declares its tables as a ``Schema``: ordered ``Migration`` steps of
DDL templates (tokens, no dialect names), gap-free sequences and announced
tables. ``EngineBase.migrate`` applies them (see ``engines.base``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import ConfigurationError
from .statements import DDL, READ, WRITE, WRITE_ROWS


@dataclass(frozen=True)
class Announce:
    """Inserts into ``{p}<table>`` wake waiters on ``<channel><key>`` by themselves.

    ``key`` is the column whose value completes the channel name (``bytes``
    columns as lower-case hex when ``key_is_bytes``), matching the
    ``engine.notify(channel + key, announced=True)`` the facet makes after
    the insert. Engines whose server can announce writes (PostgreSQL's
    LISTEN/NOTIFY) install a trigger; the others need nothing.
    """

    table: str
    key: str
    channel: str
    key_is_bytes: bool = False


@dataclass(frozen=True)
class Migration:
    """One step of a facet's schema, run in order.

    ``sequences``: gap-free ordinal sequences created by this step, read by
    ``{next_value:NAME}`` inside an INSERT or by ``engine.next_value(NAME)``.
    ``statements``: DDL templates (tokens, no dialect names). ``announce``:
    tables whose inserts the engine announces (see ``Announce``). The engine
    turns each into its own statements (``EngineBase.migration_statements``).
    ``per_dialect`` is for an engine's own schema only (keyed by
    ``Dialect.name``): facets never name a dialect.
    """

    statements: tuple[str, ...] = ()
    sequences: tuple[str, ...] = ()
    announce: tuple[Announce, ...] = ()
    per_dialect: dict[str, tuple[str, ...]] = field(default_factory=dict)


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


# Tables every store has, whatever facets it uses.
#
# {p}sequence: gap-free, commit-ordered sequences. A sequence is a row
# (created by ``Migration.sequences``); NEXT_VALUE increments it, and the row
# lock is held until commit, so values are handed out in commit order and a
# rolled-back value is handed out again. A reader tailing ``id > last_seen``
# never skips a late commit. Inside an INSERT, ``{next_value:NAME}`` fills a
# ``{tail_pk}`` column: PostgreSQL calls {p}next_value(name) (the same
# UPDATE as a function); SQLite's single writer and AUTOINCREMENT give the
# same for free, so there it is NULL and the row is not used.
#
# {p}attempt: one row per mutating call on a network engine, written in the
# same transaction as the call's effect (see engines.postgres). When a
# connection drops after the server committed but before the reply arrived,
# the row tells the retry that the call already happened and what it
# returned. Rows are pruned once older than the engine's retention window
# (``PostgresEngine(attempt_retention=)``), see ``Engine.prune_bookkeeping``.
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
        # A write's returned rows, in PostgreSQL's binary form (array_send of
        # the rows): bytes stay bytes, where JSON spelled them in hex at
        # twice their size (engines.postgres_attempts).
        Migration(per_dialect={"postgresql": ("ALTER TABLE {p}attempt ADD COLUMN rows BYTEA",)}),
        # Attempt ids start with their time (postgres_attempts.attempt_id), so
        # the primary key orders the rows by age and pruning walks it
        # (ATTEMPT_PRUNE): the age index goes, one index entry fewer a write.
        # Rows written before (random ids) stay answerable by their id; the
        # prune by id never reaches them, so they stay until
        # ``Store.maintain()`` (``prune_bookkeeping``: ATTEMPT_PRUNE_UNTIMED,
        # by their ``created_at``) once their window has passed. Processes
        # still running older code (a store checks its schema version only
        # when opened) keep writing random ids and ``created_at``, which is
        # why the column stays; their own prune in passing, ordered by
        # ``created_at``, reads the whole table and sorts it without the
        # index until they are restarted.
        Migration(per_dialect={"postgresql": ("DROP INDEX {p}attempt_age",)}),
    ),
)

NEXT_VALUE = WRITE_ROWS("UPDATE {p}sequence SET value = value + 1 WHERE name = ? RETURNING value")
CREATE_SEQUENCE = "INSERT INTO {p}sequence (name, value) VALUES ('{name}', 0)"
SEQUENCE_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

SCHEMA_TABLE = "{p}schema"
_CREATE_SCHEMA_TABLE = DDL("CREATE TABLE IF NOT EXISTS {p}schema ( facet TEXT PRIMARY KEY, version INTEGER NOT NULL)")
# The facets' schema versions (the engine's open reads them; so does a damaged file's check).
READ_VERSIONS = READ("SELECT facet, version FROM {p}schema")
_UPSERT_VERSION = WRITE(
    "INSERT INTO {p}schema (facet, version) VALUES (?, ?) ON CONFLICT (facet) DO UPDATE SET version = excluded.version"
)

# The table or index a migration's DDL template creates: its kind and its name after ``{p}``.
_CREATES = re.compile(r"\s*CREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX)\s+(?:IF\s+NOT\s+EXISTS\s+)?\{p\}(\w+)")


def created_objects(templates: Iterable[str], prefix: str) -> list[tuple[str, str]]:
    """``(kind, full name)`` of each table and index ``templates`` create under ``prefix``, in order."""
    found = (_CREATES.match(template) for template in templates)
    return [(match[1].lower(), prefix + match[2]) for match in found if match is not None]


def name_taken(url: str, what: str, prefix: str) -> ConfigurationError:
    """The refusal of a migration that met ``what`` (a table or index of one of its names) made by someone else."""
    return ConfigurationError(
        f"{url}: {what} (another application's, under durastate's table prefix {prefix!r}?); open the store with "
        "a prefix of its own (durastate.open(..., prefix='myapp_'), the CLI's --table-prefix) or move that one away"
    )
