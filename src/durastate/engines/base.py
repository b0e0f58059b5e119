"""The engine contract every facet is written against.

A facet (``kv``, ``queues``, ...) never imports a database driver. It holds an
``Engine`` and asks it to run statements. The engine owns connections (one per
thread), transactions (re-entrant per thread, nested ones become savepoints),
error translation (driver error -> ``durastate.errors``, by code, in one
place), the clock, and the few dialect differences.

Statements
----------
SQL is written once per operation as a *template*: ``?`` placeholders and
``{p}`` for the validated table prefix, plus a handful of DDL tokens such as
``{blob}`` (see ``Dialect.tokens``). Each template is declared with its
*kind* where it is defined, next to the code that runs it::

    GET = READ("SELECT value FROM {p}kv WHERE scope = ? AND key = ?")
    PUT = WRITE("INSERT INTO {p}kv (scope, key, value) VALUES (?, ?, ?)")
    POP = WRITE_ROWS("DELETE FROM {p}q WHERE id = ? RETURNING payload")
    MAKE = DDL("CREATE TABLE {p}t (v {int64})")

``READ`` never changes anything; ``WRITE`` changes rows and returns none;
``WRITE_ROWS`` changes rows and returns rows (``RETURNING``); ``DDL``
changes the schema (or anything else an engine cannot run as one
retry-safe statement). ``engine.sql(statement)`` compiles it for the
engine (once: facets compile all their statements when they are created)
and returns an ``SQL``: the driver's text (a ``str``, so drivers use and
cache it as is) that carries its ``kind``. The engine decides what to do by
the kind and never looks at the text: PostgreSQL runs a read as it is and a
write outside a transaction together with its attempt row (see
``engines.postgres``). A plain ``str`` template passed to ``engine.sql`` is
of kind ``OPAQUE``: run correctly whatever it does, at a higher price.
``KeyLookup(...)`` asks the engine to write a lookup of many keys (one
index probe per key) in its own best form.

Dialect
-------
Facets never name a dialect. Templates use the tokens in ``TOKENS``
(``{blob}``, ``{key_text}``, ``{next_value:NAME}``, ...); cross-key locks are
``engine.lock(name)``; gap-free sequences are declared by
``Migration(sequences=...)`` and read with ``{next_value:NAME}`` or
``engine.next_value(NAME)``; ``Migration(announce=...)`` makes the engine
announce inserts into a table (LISTEN/NOTIFY where the server can).

Transactions
------------
``transaction()`` / ``read_transaction()`` return a ``Transaction``: the
one state machine of every engine (see its docstring for the rules: a
failed statement dooms the transaction unless a savepoint containing it
rolls back; refusals never doom; ``close()`` makes the block roll back).
Engines supply only its primitives (``_tx_begin``, ``_tx_commit``, ...).
"""

from __future__ import annotations

import enum
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from ..errors import ConfigurationError, DurastateError, InvalidRequest, SchemaTooNew, StoreClosed

Row = tuple[Any, ...]
Params = Sequence[Any]
Clock = Callable[[], float]

PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,30}")


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe table-name prefix, else raise.

    The prefix is the only caller-supplied text ever interpolated into SQL,
    so it is held to ``^[A-Za-z_][A-Za-z0-9_]{0,30}$``.
    """
    if not isinstance(prefix, str) or PREFIX_RE.fullmatch(prefix) is None:
        raise ConfigurationError(
            f"table prefix must match {PREFIX_RE.pattern} (letters, digits, underscore; "
            f"at most 31 characters, not starting with a digit), got {prefix!r}"
        )
    return prefix


class Kind(enum.Enum):
    """What a statement does (see the module docstring)."""

    READ = "read"
    WRITE = "write"
    WRITE_ROWS = "write returning rows"
    DDL = "ddl"
    OPAQUE = "undeclared"


Template = str | Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement template and its kind, declared where the SQL is written."""

    kind: Kind
    template: Template


def READ(template: Template) -> Statement:
    return Statement(Kind.READ, template)


def WRITE(template: Template) -> Statement:
    return Statement(Kind.WRITE, template)


def WRITE_ROWS(template: Template) -> Statement:
    return Statement(Kind.WRITE_ROWS, template)


def DDL(template: Template) -> Statement:
    return Statement(Kind.DDL, template)


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """Rows of ``{p}<table>`` by a list of keys: one index probe per key.

    ``fixed`` columns equal one bound value each, ``key`` one of ``count``
    bound keys (parameters in that order: fixed values, then the keys).
    Selects ``columns`` (a ``, ``-separated list), or deletes the rows when
    ``delete``. ``column_type`` is the token of every compared column's type
    (say ``"blob"``). The engine writes the statement: a plain ``IN`` list
    where its planner probes the index per key anyway, a shape that forces
    the probes where a cached generic plan would otherwise filter the
    whole ``fixed`` range instead.
    """

    table: str
    columns: str
    fixed: tuple[str, ...]
    key: str
    count: int
    column_type: str = "blob"
    delete: bool = False


class SQL(str):
    """Compiled statement text for one engine, carrying its ``kind``.

    A ``str`` so drivers take (and cache) it as is; engines may attach
    their own compiled companions to it (PostgreSQL: the attempt-recording
    variant of a write).
    """

    kind: Kind
    # Set by an engine's ``_compiled`` hook, for that engine only.
    companion: Any

    def __new__(cls, text: str, kind: Kind) -> SQL:
        compiled = super().__new__(cls, text)
        compiled.kind = kind
        return compiled


@dataclass(frozen=True)
class Spec:
    """A token that takes an argument, written ``{name:arg}`` in a template.

    ``text`` may use ``{arg}`` (the argument) and ``{p}`` (the prefix).
    """

    text: str


class _BoundSpec:
    __slots__ = ("prefix", "text")

    def __init__(self, text: str, prefix: str) -> None:
        self.text = text
        self.prefix = prefix

    def __format__(self, arg: str) -> str:
        return self.text.format(arg=arg, p=self.prefix)


# Every token a template may use, and what it means. Each engine's dialect
# gives all of them a text (tests check that the sets agree).
TOKENS = {
    "blob": "a column type for bytes",
    "int64": "a column type for 64-bit integers",
    "text": "a column type for text compared however the engine likes",
    "key_text": "a column type for text that compares by code point (keys, ranges, ORDER BY)",
    "id_pk": "an integer primary key the engine assigns (ids may be reused after deletes)",
    "tail_pk": "an integer primary key filled by {next_value:NAME}: gap-free, in commit order, never reused",
    "without_rowid": "table option for small rows keyed by their primary key",
    "skip_locked": "suffix of a claim's SELECT: skip rows another transaction holds",
    "for_update": "suffix of a SELECT that locks the rows it reads until commit",
    "for_update_of": "{for_update_of:alias}: lock only the rows of table alias",
    "greatest": "the function name of the larger of two values",
    "int64_check": "{int64_check:column}: refuse a value that is not an integer (after NOT NULL)",
    "next_value": "{next_value:NAME}: the next ordinal of sequence NAME for a {tail_pk} column",
}


def in_list_lookup(lookup: KeyLookup) -> str:
    """``KeyLookup`` as ``... WHERE fixed = ? AND key IN (?, ...)``."""
    where = " AND ".join(f"{column} = ?" for column in lookup.fixed)
    keys = f"{lookup.key} IN (" + ", ".join("?" * lookup.count) + ")"
    where = f"{where} AND {keys}" if where else keys
    if lookup.delete:
        return f"DELETE FROM {{p}}{lookup.table} WHERE {where}"
    return f"SELECT {lookup.columns} FROM {{p}}{lookup.table} WHERE {where}"


@dataclass(frozen=True)
class Dialect:
    """What differs between SQL engines, and nothing else.

    ``tokens`` fill the ``{name}`` slots of templates (see ``TOKENS``; a
    ``Spec`` token takes an argument); ``placeholder`` replaces ``?`` in
    every template; ``no_limit`` is the value bound to a ``LIMIT ?`` that
    should not limit (SQLite: -1, PostgreSQL: NULL).
    """

    name: str
    placeholder: str
    no_limit: int | None
    tokens: dict[str, str | Spec] = field(default_factory=dict)
    # SQL that answers one row when table ``?`` exists (bound: full name).
    table_exists: str = ""
    # The most bytes an indexed key (all its columns) may hold, or None.
    max_index_key: int | None = None
    # The template of a ``KeyLookup``.
    key_lookup: Callable[[KeyLookup], str] = field(default=lambda lookup: in_list_lookup(lookup))

    def compile(self, template: str, prefix: str) -> str:
        tokens = {k: _BoundSpec(v.text, prefix) if isinstance(v, Spec) else v for k, v in self.tokens.items()}
        text = template.format(p=prefix, **tokens)
        if self.placeholder != "?":
            # Only PostgreSQL's psycopg needs this: '%' is its escape, '?' ours.
            text = text.replace("%", "%%").replace("?", self.placeholder)
        return text


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


@dataclass(frozen=True)
class PlanStep:
    """One table read of a query plan, in engine-neutral terms.

    ``index`` is the index read (None: the table itself, row by row);
    ``condition`` what the index is *searched* by (empty: the index, or the
    table, is walked whole); ``filter`` a condition applied to the rows
    read, after reading them (a large filter over a small condition means
    cost that grows with the data); ``detail`` the engine's own words.
    """

    table: str
    index: str | None
    condition: str
    filter: str
    detail: str


@dataclass(frozen=True)
class Plan:
    """The plan an engine uses for a statement (``Engine.explain``)."""

    steps: tuple[PlanStep, ...]
    sorts: bool  # a separate sort step (the order does not come from an index)
    text: str  # the whole plan in the engine's words, for messages

    def reads(self, *tables: str) -> list[PlanStep]:
        """The steps that read any of ``tables`` (table names or aliases)."""
        return [step for step in self.steps if step.table in tables]


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

    def release_connection(self) -> None: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


# -- shared engine machinery -------------------------------------------------

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
    ),
)

NEXT_VALUE = WRITE_ROWS("UPDATE {p}sequence SET value = value + 1 WHERE name = ? RETURNING value")
CREATE_SEQUENCE = "INSERT INTO {p}sequence (name, value) VALUES ('{name}', 0)"
SEQUENCE_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

SCHEMA_TABLE = "{p}schema"
_CREATE_SCHEMA_TABLE = DDL("CREATE TABLE IF NOT EXISTS {p}schema ( facet TEXT PRIMARY KEY, version INTEGER NOT NULL)")
_READ_VERSIONS = READ("SELECT facet, version FROM {p}schema")
_UPSERT_VERSION = WRITE(
    "INSERT INTO {p}schema (facet, version) VALUES (?, ?) ON CONFLICT (facet) DO UPDATE SET version = excluded.version"
)


class TransactionState(threading.local):
    """One thread's view of its open transaction on one engine.

    ``depth`` counts open blocks (0: none; 1: the transaction; 2+: nested
    savepoints). ``doomed`` is the first statement error not yet undone and
    ``doomed_level`` the depth it happened at: rolling back the savepoint of
    level L undoes it only when ``doomed_level >= L`` (the failure happened
    inside that savepoint). Engines subclass this for their own per-thread
    fields (connection, cursor, ...).
    """

    depth: int = 0
    doomed: DurastateError | None = None
    doomed_level: int = 0


def aborted_error(doomed: DurastateError) -> DurastateError:
    """The error a statement gets in a transaction an earlier failure doomed."""
    return type(doomed)(f"transaction aborted by an earlier failed statement: {doomed}")


class Transaction:
    """The one transaction state machine; engines supply its primitives.

    Outermost block: ``_tx_begin(read, lock)`` ... ``_tx_commit()`` or
    ``_tx_rollback()``. Nested blocks: ``_tx_savepoint(name)`` ...
    ``_tx_release(name)`` or ``_tx_rollback_to(name)`` (which also releases).

    The rule, on every engine:

    * any exception leaving a block (``BaseException`` included) rolls that
      block back: the whole transaction, or the nested block's savepoint;
    * a statement that fails in the database (the engine calls
      ``EngineBase._doom``) dooms the transaction: later statements and
      nested blocks are refused with the same error type, and the block
      raises on exit and commits nothing, even when the caller caught the
      error. Only rolling back a savepoint opened *before* the failure
      (one that contains it) undoes the doom;
    * refusals raised in Python (argument errors, a lost compare-and-swap,
      a superseded attempt) never reach the engine and never doom;
    * after ``close()`` the next statement, nested block or commit raises
      ``StoreClosed`` and the transaction rolls back.
    """

    __slots__ = ("_engine", "_level", "_lock", "_read", "_state")

    def __init__(self, engine: EngineBase, *, read: bool = False, lock: str | None = None) -> None:
        self._engine = engine
        self._read = read
        self._lock = lock
        self._level = 0

    def __enter__(self) -> None:
        engine = self._engine
        state = engine._local
        self._state = state
        if engine._closed:
            raise StoreClosed(f"{engine.url}: store is closed")
        if state.depth == 0:
            engine._tx_begin(self._read, self._lock)
        else:
            if state.doomed is not None:
                raise aborted_error(state.doomed)
            engine._tx_savepoint(f"ds_sp{state.depth}")
        state.depth += 1
        self._level = state.depth

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        engine = self._engine
        state = self._state
        level = self._level
        state.depth = level - 1
        doomed = state.doomed
        if level > 1:
            savepoint = f"ds_sp{level - 1}"
            contained = doomed is not None and state.doomed_level >= level
            if exc_type is None and not contained and not engine._closed:
                engine._tx_release(savepoint)
                return
            # Roll back on anything; a failing rollback (connection gone)
            # must not mask the block's own exception.
            engine._tx_rollback_to(savepoint)
            if contained:
                state.doomed = None
            if exc_type is None:
                if engine._closed:
                    raise StoreClosed(f"{engine.url}: store closed inside the transaction; it rolled back")
                assert doomed is not None
                raise type(doomed)(f"block rolled back: a statement inside it failed: {doomed}")
            return
        state.doomed = None
        if exc_type is not None:
            engine._tx_rollback()
            return
        if doomed is not None:
            engine._tx_rollback()
            raise type(doomed)(f"transaction rolled back: a statement inside it failed: {doomed}")
        if engine._closed:
            engine._tx_rollback()
            raise StoreClosed(f"{engine.url}: store closed inside the transaction; it rolled back")
        engine._tx_commit()


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
