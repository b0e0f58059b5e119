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
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from .._validate import CLOCK_CONTRACT, CLOCK_LIMIT_MS, shown
from ..errors import ConfigurationError, DurastateError, InvalidRequest, NotSupported, SchemaTooNew, WrongType
from .capabilities import Capabilities
from .deferred import Later, RequirementFailed
from .loop import LoopCommit
from .plans import Plan, PlanStep
from .schema import (
    _CREATE_SCHEMA_TABLE,
    _UPSERT_VERSION,
    CORE_SCHEMA,
    CREATE_SEQUENCE,
    NEXT_VALUE,
    READ_VERSIONS,
    SCHEMA_TABLE,
    SEQUENCE_NAME_RE,
    Announce,
    Migration,
    Schema,
    created_objects,
    name_taken,
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
    ByCount,
    Dialect,
    KeyLookup,
    Kind,
    Marked,
    Params,
    Reread,
    Row,
    Spec,
    Statement,
    Template,
    in_list_lookup,
    validate_prefix,
)
from .tools import EngineTools
from .transaction import (
    BlockRefused,
    PerThread,
    SharedState,
    Transaction,
    TransactionFields,
    TransactionState,
    aborted_error,
)
from .vectors import VectorIndexes
from .watch import ChangeWatch, PolledWatch

__all__ = [
    "CORE_SCHEMA",
    "BlockRefused",
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
    "ByCount",
    "Clock",
    "Dialect",
    "Engine",
    "EngineBase",
    "KeyLookup",
    "Kind",
    "Later",
    "Marked",
    "Migration",
    "Params",
    "PerThread",
    "Plan",
    "PlanStep",
    "Reread",
    "RequirementFailed",
    "Row",
    "Schema",
    "Spec",
    "Statement",
    "Template",
    "Transaction",
    "TransactionFields",
    "TransactionState",
    "aborted_error",
    "in_list_lookup",
    "validate_prefix",
]

Clock = Callable[[], float]


def _same_blob(value: bytes) -> object:
    """``Engine.blob_binding``'s default: the ``bytes`` as it is."""
    return value


class Engine(ABC):
    """What a facet may ask of an engine: the contract every engine implements.

    Statement methods run on the calling thread's connection; inside
    ``transaction()`` they join that transaction, otherwise each statement
    commits on its own (autocommit); their ``sql`` is a statement this
    engine's ``sql()`` compiled (an ``SQL``). Every method raises only
    ``durastate.errors`` (a driver's exception never escapes), and a call
    after ``close()`` raises ``StoreClosed``. An engine subclasses this
    directly, or ``EngineBase`` for the shared machinery (statement
    compilation, the transaction state machine, migrations, the clock).
    """

    # Set by every engine (class or instance attributes).
    dialect: Dialect  # the tokens and placeholder its statements compile with
    prefix: str  # the validated table prefix (see ``validate_prefix``)
    url: str  # the store's URL for messages, credentials redacted
    no_limit: int | None  # the value bound to ``LIMIT ?`` for "no limit"
    capabilities: Capabilities  # what this engine offers (``engines.capabilities``)
    read_only: bool  # True: every write is refused (``ConfigurationError``)

    @abstractmethod
    def sql(self, statement: Statement | KeyLookup) -> SQL:
        """Returns ``statement`` compiled for this engine, carrying its kind; ``WrongType`` for anything but a
        ``Statement`` or ``KeyLookup``; never touches the database.
        """

    def blob_binding(self) -> Callable[[bytes], object]:
        """Returns the function that turns a ``bytes`` parameter into the value this engine binds cheapest as that
        same BLOB (read back as the same ``bytes``); by default the identity: the ``bytes`` itself. For a
        facet's repeated blobs (made once, bound many times) and the statements declared ``engine_blobs``.
        """
        return _same_blob

    @abstractmethod
    def one(self, sql: str, params: Params = ()) -> Row | None:
        """Returns the first row of ``sql`` (``None``: no row) and finishes the statement; never leaves it open."""

    @abstractmethod
    def all(self, sql: str, params: Params = ()) -> list[Row]:
        """Returns every row of ``sql``; a failure inside a transaction dooms it (``Transaction``)."""

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> int:
        """Returns the number of rows ``sql`` changed; rows it returns are read and dropped."""

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        """Runs ``sql`` once per parameter row, all or nothing (outside a transaction too); returns nothing."""

    def send(self, sql: str, params: Params = ()) -> None:
        """Runs a write whose answer the caller does not need; returns nothing.

        Inside a transaction an engine may send it with the transaction's
        next round trip instead of waiting for it (PostgreSQL's pipeline);
        a failure then dooms the transaction and is raised by the next
        statement that waits for an answer, or by the commit. Elsewhere (and
        by default) it is ``execute`` without the count.
        """
        self.execute(sql, params)

    def batch(self, steps: Sequence[tuple[str, Params]]) -> list[Any]:
        """Runs ``steps`` (each a statement and its parameters) in order, all or nothing; returns their answers.

        A ``WRITE``'s answer is its row count (as ``execute``'s), any other
        statement's its first row (as ``one``'s; ``None``: no row). For a
        few statements none of which needs another's answer, say a queue's
        ack and its next claim: an engine may run them with less than its
        general transaction (SQLite: on its shared writer connection in one
        call, the writer gate held throughout). A failing step raises its
        error and nothing of the batch is kept; inside an open transaction
        the batch is a nested block of it (a savepoint: a failure undoes the
        batch, not the transaction). ``[]`` answers ``[]`` and touches
        nothing. By default ``transaction()`` around ``execute`` and
        ``one``.
        """
        if not steps:
            return []
        with self.transaction():
            return [
                self.execute(sql, params) if getattr(sql, "kind", None) is Kind.WRITE else self.one(sql, params)
                for sql, params in steps
            ]

    def require(self, sql: str, params: Params = (), message: str = "a requirement of the transaction") -> None:
        """Fails the transaction unless ``sql`` answers true; returns nothing (``engines.deferred``).

        ``sql`` is a READ answering at most one row whose one column is
        true when the requirement holds (no row: it does not). Where answers
        are deferred (``capabilities.deferred_answers``) it is sent with the
        transaction's next round trip and its failure raised then, by the
        next statement that waits, the release of a savepoint around it, or
        the commit; elsewhere (and by default) it is read at once. The
        failure is ``RequirementFailed`` naming ``message``; let it leave the
        block, which rolls back.
        """
        row = self.one(sql, params)
        if row is None or not row[0]:
            raise RequirementFailed(f"{self.url}: requirement failed: {message}")

    def next_value_later(self, name: str) -> Later:
        """Returns the next value of sequence ``name`` as a ``Later`` (``engines.deferred``).

        Where answers are deferred (``capabilities.deferred_answers``),
        inside a transaction, the value arrives with the transaction's next
        round trip, and a statement that needs it reads it in SQL; elsewhere
        (and by default) it is ``next_value``'s, read at once. An unknown
        sequence raises ``DurastateError``, at once or when ``value`` is read.
        """
        return Later(self.next_value(name))

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """Returns a write transaction block: re-entrant per thread (nested blocks are savepoints), rolled back by any
        exception.
        """

    @abstractmethod
    def read_transaction(self) -> AbstractContextManager[None]:
        """Returns a block whose reads see one snapshot; it takes no write lock and may not write."""

    @abstractmethod
    def in_transaction(self) -> bool:
        """Returns whether the calling thread has a transaction open on this engine; never blocks."""

    @abstractmethod
    def lock(self, name: str) -> None:
        """Takes the cross-key lock ``name`` until the open transaction ends; ``InvalidRequest`` outside one."""

    def lock_later(self, name: str) -> None:
        """Takes lock ``name`` as ``lock`` does, but where answers are deferred (``capabilities.deferred_answers``)
        sent with the transaction's next round trip instead of waited for (``engines.deferred``): the statements
        sent after it run once it is granted, the caller goes on before. For a writer whose decisions all come
        from statements after the lock; one that decides on nothing read (or on a lock held) uses ``lock``. By
        default ``lock``.
        """
        self.lock(name)

    @abstractmethod
    def catalog(self) -> list[tuple[str, ...]]:
        """Returns this prefix's schema objects as sorted rows of strings, equal for equal schemas; writes nothing."""

    @abstractmethod
    def explain(self, sql: str, params: Params = ()) -> Plan:
        """Returns the plan the engine would run ``sql`` with (the generic one where plans are cached); never runs."""

    @abstractmethod
    def integrity_errors(self) -> list[str]:
        """Returns the problems the engine finds in its own storage (``[]``: none, or nothing it can check); repairs
        nothing.
        """

    @abstractmethod
    def schema_versions(self) -> dict[str, int]:
        """Returns each schema's version in the database (``{}``: not a durastate store yet); only reads."""

    @property
    def tools(self) -> EngineTools:
        """Returns the operators' questions about this store (``engines.tools``): table shapes, sizes, bounded
        counts, health, sequences. The default answers what durastate's own tables tell and raises ``NotSupported``
        for the rest; an engine returns its own subclass.
        """
        return EngineTools(self)

    @property
    def vectors(self) -> VectorIndexes:
        """Returns the engine's nearest-neighbour indexes over kv rows (``engines.vectors``), where
        ``capabilities.vector_index`` says it keeps them; the default refuses every call with ``NotSupported``.
        """
        return VectorIndexes(self)

    @abstractmethod
    def next_value(self, name: str) -> int:
        """Returns the next value of gap-free sequence ``name``, in commit order; ``DurastateError`` for an unknown
        one.
        """

    @abstractmethod
    def now_ms(self) -> int:
        """Returns the store's clock in integer milliseconds since the epoch; ``ConfigurationError`` (an
        ``InvalidRequest``) for a broken clock."""

    @abstractmethod
    def wait_for_change(self, channel: str, timeout: float) -> None:
        """Returns after a ``notify(channel)`` (other processes' too where ``capabilities.listen_notify``) or
        ``timeout`` seconds; a hint only.
        """

    def watch(self, channel: str, poll: float) -> ChangeWatch:
        """Returns a watch on ``channel`` registered now, before the caller's check (``engines.watch``); this
        default polls through ``wait_for_change`` every ``poll`` seconds.
        """
        return PolledWatch(self, channel, poll)

    @abstractmethod
    def notify(self, channel: str, *, announced: bool = False) -> None:
        """Wakes waiters on ``channel`` once the open transaction commits (never before, never after a rollback);
        ``announced``: a trigger did.
        """

    @abstractmethod
    def migrate(self, schemas: Iterable[Schema]) -> None:
        """Brings every facet in ``schemas`` to the code's version exactly once; ``SchemaTooNew`` (changing nothing)
        for a newer one.
        """

    @abstractmethod
    def prune_bookkeeping(self, *, limit: int | None = None) -> int:
        """Returns how many rows of the engine's own bookkeeping it deleted (at most ``limit``); never touches facet
        data.
        """

    @abstractmethod
    def reclaim_space(self, *, full: bool = False) -> SpaceReport:
        """Returns the space deletes freed that it gave back to the filesystem (``full``: the thorough pass)."""

    @abstractmethod
    def release_connection(self) -> None:
        """Lets go of the calling thread's idle connection; ``InvalidRequest`` inside a transaction."""

    @abstractmethod
    def no_wait_changes(self) -> int:
        """Returns the thread's change count, its calls now refusing a held lock at once; ``NotSupported`` unless
        ``inline_async_calls`` or ``inline_async_reads``.
        """

    @abstractmethod
    def run_without_waiting(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        later: Callable[[Callable[[], object]], None],
    ) -> tuple[Any, LoopCommit | None]:
        """Returns ``fn``'s result, run on this thread (an event loop's) without waiting, and its transaction's
        ``COMMIT`` left to collect (``LoopCommit``), or None; ``WouldWait`` (nothing applied) where it would wait;
        ``NotSupported`` unless ``loop_commits``. ``later`` runs work that waits (a rollback) on another thread.
        """

    @abstractmethod
    def close(self) -> None:
        """Closes every connection; idempotent; later calls raise ``StoreClosed`` and open transactions roll back."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        """Returns whether ``close()`` was called; never blocks."""


# Looked up once: a module global, not time's attribute, on every call.
_time_ns = time.time_ns


def _system_now_ms() -> int:
    """The system clock (``time.time``'s) in whole milliseconds since the epoch: an engine's ``now_ms`` with no
    clock given (``EngineBase.__init__``)."""
    return _time_ns() // 1_000_000


class EngineBase(Engine):
    """Machinery shared by every engine: SQL compilation, clock, migrations,
    the transaction state machine (``Transaction``).

    Subclasses implement the abstract methods left: the statement methods
    (``one``, ``all``, ``execute``, ``executemany``), ``catalog``,
    ``explain``, ``notify``, ``wait_for_change``, ``release_connection``,
    ``close``/``closed``, the lock primitive ``_take_lock`` and the
    transaction primitives ``_tx_begin``/``_tx_commit``/``_tx_rollback``/
    ``_tx_savepoint``/``_tx_release``/``_tx_rollback_to``; they set
    ``_local`` to a ``TransactionState`` (subclass; or ``_tls`` to a
    ``PerThread`` of ``TransactionFields``, which is faster), ``_closed`` and
    ``capabilities``, and call ``_doom(error)`` when a statement fails
    inside a transaction.
    """

    _tls: PerThread[Any] | SharedState
    _closed: bool

    @property
    def _local(self) -> TransactionFields:
        """The calling thread's transaction state (hot paths read ``self._tls.state`` themselves)."""
        state: TransactionFields = self._tls.state
        return state

    @_local.setter
    def _local(self, state: TransactionFields) -> None:
        # An engine keeping its state in a threading.local of its own (TransactionState).
        self._tls = SharedState(state)

    def __init__(self, *, prefix: str, clock: Clock | None, read_only: bool = False) -> None:
        self.prefix = validate_prefix(prefix)
        if not isinstance(read_only, bool):
            raise InvalidRequest(f"read_only must be True or False, got {read_only!r}")
        self.read_only = read_only
        self._clock: Clock = clock if clock is not None else time.time
        if clock is None and type(self).now_ms is EngineBase.now_ms:
            # The system clock's milliseconds straight from ``time_ns``: one short frame for every push, claim
            # and lease instead of ``now_ms``'s checks of what a clock given by the caller returned.
            self.now_ms = _system_now_ms  # type: ignore[method-assign]
        # Shared by every engine with the same dialect, class and prefix (see
        # ``_statement_cache_key``): a process opening many stores compiles
        # each statement once.
        shared = self._statement_cache_key()
        self._sql_cache: dict[tuple[Kind, str, Reread | None, bool, Marked | None, bool], SQL] = (
            {} if shared is None else self.dialect.compiled_cache(shared)
        )
        self._next_value_sql = self.sql(NEXT_VALUE)

    no_limit: int | None = None

    def no_wait_changes(self) -> int:
        """``Engine.no_wait_changes``: ``NotSupported``; an engine declaring ``inline_async_calls`` or
        ``inline_async_reads`` overrides it."""
        raise NotSupported(f"{self.url}: this engine does not run calls inline on an event loop")

    def run_without_waiting(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        later: Callable[[Callable[[], object]], None],
    ) -> tuple[Any, LoopCommit | None]:
        """``Engine.run_without_waiting``: ``NotSupported``; an engine declaring ``loop_commits`` overrides it."""
        raise NotSupported(f"{self.url}: this engine does not commit from an event loop")

    def lock(self, name: str) -> None:
        """Take the cross-key lock ``name`` until the open transaction ends.

        For writers that must exclude each other beyond the rows they touch
        (say, every writer of one facet). Refused outside a transaction.
        """
        # ``in_transaction()`` inline: a facet's every write in a transaction
        # takes its lock (two Python calls fewer a write; "docwrite").
        if self._tls.state.depth > 0:
            self._take_lock(name)
        else:
            self._lock_in_transaction("lock", name)

    def lock_later(self, name: str) -> None:
        """``Engine.lock_later``: ``lock``, sent with the next round trip where the engine defers answers."""
        self._lock_in_transaction("lock_later", name)

    def _lock_in_transaction(self, call: str, name: str) -> None:
        if not self.in_transaction():
            raise InvalidRequest(f"{call}({name!r}) outside a transaction would be released at once")
        if call == "lock":
            self._take_lock(name)
        else:
            self._take_lock_later(name)

    @abstractmethod
    def _take_lock(self, name: str) -> None:
        """Take lock ``name`` in the open transaction (``lock`` checked there is one)."""

    def _take_lock_later(self, name: str) -> None:
        """``lock_later``'s lock (checked: in a transaction); where every answer comes at once, ``_take_lock``."""
        self._take_lock(name)

    def integrity_errors(self) -> list[str]:
        """Problems the engine finds in its own files (``[]``: none, or nothing it can check)."""
        return []

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
        """``Engine.in_transaction``: the thread's block depth is above 0."""
        depth: int = self._tls.state.depth
        return depth > 0

    def _migration_lock(self) -> Transaction:
        """A transaction that excludes concurrent migrators of this prefix."""
        return Transaction(self, lock=f"durastate-migrate:{self.prefix}")

    def _doom(self, error: DurastateError) -> DurastateError:
        """Record ``error`` (a statement failed) against the open transaction, if any."""
        state = self._tls.state
        if state.depth and state.doomed is None:
            state.doomed = error
            state.doomed_level = state.depth
        return error

    @abstractmethod
    def _tx_begin(self, read: bool, lock: str | None) -> None:
        """Begin the outermost transaction (``read``: a read snapshot; ``lock``: also take that lock); raise if it
        could not.
        """

    @abstractmethod
    def _tx_commit(self) -> None:
        """Commit the outermost transaction; on failure roll it back and raise."""

    @abstractmethod
    def _tx_rollback(self) -> None:
        """Roll back the transaction; never raises (best effort)."""

    @abstractmethod
    def _tx_savepoint(self, name: str) -> None:
        """Open savepoint ``name``; refused (raising the doom's error) in a doomed transaction."""

    @abstractmethod
    def _tx_release(self, name: str) -> None:
        """Release savepoint ``name``, keeping its work in the transaction."""

    @abstractmethod
    def _tx_rollback_to(self, name: str) -> None:
        """Roll back to and release savepoint ``name``; never raises (best effort)."""

    def sql(self, statement: Statement | KeyLookup) -> SQL:
        """Compile a statement for this engine (cached by kind and text).

        ``statement`` is a ``Statement`` (``READ(...)``, ``WRITE(...)``,
        ...) or a ``KeyLookup``; anything else (a bare ``str`` among them)
        is refused with ``WrongType``: the engine decides how to run a
        statement by its declared kind. A ``Statement``'s template is one
        text for every dialect, or a mapping from ``Dialect.name`` to the
        text for that dialect (``NotSupported`` when this engine's is
        missing).
        """
        template: Template
        reread = None
        idempotent = False
        marked = None
        engine_blobs = False
        if isinstance(statement, Statement):
            kind, template, reread = statement.kind, statement.template, statement.reread
            idempotent, marked, engine_blobs = statement.idempotent, statement.marked, statement.engine_blobs
        elif isinstance(statement, KeyLookup):
            kind = Kind.WRITE if statement.delete else Kind.READ
            template = self.dialect.key_lookup(statement)
        else:
            raise WrongType(
                "engine.sql() takes a declared statement (READ(...), WRITE(...), WRITE_ROWS(...), DDL(...)) "
                f"or a KeyLookup, got {type(statement).__name__}: {str(statement)[:80]!r}"
            )
        if not isinstance(template, str):
            try:
                template = template[self.dialect.name]
            except KeyError:
                raise NotSupported(f"{self.url}: no {self.dialect.name} text for statement {template!r}") from None
        key = (kind, template, reread, idempotent, marked, engine_blobs)
        compiled = self._sql_cache.get(key)
        if compiled is None:
            compiled = SQL(self.dialect.compile(template, self._prefix_for(kind)), kind)
            compiled.idempotent = idempotent
            compiled.engine_blobs = engine_blobs
            if reread is not None:
                read = SQL(self.dialect.compile(reread.template, self._prefix_for(Kind.READ)), Kind.READ)
                compiled.reread = (read, reread.params)
            if marked is not None:
                compiled.marked = (
                    SQL(self.dialect.compile(marked.template, self._prefix_for(kind)), kind),
                    SQL(self.dialect.compile(marked.reread, self._prefix_for(Kind.READ)), Kind.READ),
                )
            compiled = self._compiled(compiled)
            self._sql_cache[key] = compiled
        return compiled

    def _compiled(self, sql: SQL) -> SQL:
        """Hook: an engine attaches its per-statement companions to ``sql``.

        What it attaches may depend only on ``sql`` and on what
        ``_statement_cache_key`` covers: compiled statements are shared by
        the engines with equal keys.
        """
        return sql

    def _prefix_for(self, kind: Kind) -> str:
        """Hook: the text ``{p}`` becomes in a statement of ``kind`` (a schema-qualified prefix, say)."""
        return self.prefix

    def _statement_cache_key(self) -> Hashable | None:
        """What this engine's compiled statements depend on besides the dialect, or ``None``.

        Engines of one dialect whose keys are equal share compiled
        statements (``Dialect.compiled_cache``), so a process opening many
        stores compiles each statement once. The key must cover everything
        ``_prefix_for`` and ``_compiled`` read (the engine's class, prefix,
        mode). ``None`` (the default, for engines that do not say): this
        engine compiles its own.
        """
        return None

    def now_ms(self) -> int:
        """The store's clock in integer milliseconds since the Unix epoch.

        A clock that returns anything but what ``open`` checks of its first
        reading (``CLOCK_CONTRACT``: seconds, their milliseconds in
        0 .. ``CLOCK_LIMIT_MS``) is a configuration mistake:
        ``ConfigurationError`` naming what it returned, raised before the
        call that read it has changed anything.
        """
        seconds = self._clock()
        kind = type(seconds)
        # float first (time.time's): two isinstance calls are a share of a queue push's CPU.
        if kind is float or kind is int or (isinstance(seconds, (int, float)) and kind is not bool):
            try:
                ms = int(seconds * 1000)
            except (OverflowError, ValueError):  # inf, nan
                pass
            else:
                # Past the limit a stored time, or now plus a lease or delay, leaves int64: SQLite's driver raises
                # OverflowError, PostgreSQL "bigint out of range". One comparison of ints.
                if 0 <= ms < CLOCK_LIMIT_MS:
                    return ms
        raise ConfigurationError(f"the store's clock returned {shown(seconds)}; it must return {CLOCK_CONTRACT}")

    def schema_versions(self) -> dict[str, int]:
        return self._read_versions() or {}

    def _read_versions(self) -> dict[str, int] | None:
        name = SCHEMA_TABLE.format(p=self.prefix)
        if self.one(self.sql(READ(self.dialect.table_exists)), (name,)) is None:
            return None
        try:
            rows = self.all(self.sql(READ_VERSIONS))
        except InvalidRequest:  # a table of that name without our columns: not ours
            what = f"table {name!r} is there without the columns of durastate's schema table (facet, version)"
            raise name_taken(self.url, what, self.prefix) from None
        return {str(f): int(v) for f, v in rows}

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
        this code does not know, and ``ConfigurationError`` naming the table
        when one it would create, or its schema table, is someone else's
        (the prefix is taken: nothing is changed).
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
        run: list[str] = []  # the steps' DDL sent so far
        try:
            with self._migration_lock():
                self.execute(self.sql(_CREATE_SCHEMA_TABLE))
                current = self._read_versions() or {}
                if self._check_versions(wanted, current):
                    return
                for schema in wanted:
                    have = current.get(schema.facet, 0)
                    for step in schema.migrations[have:]:
                        for template in self.migration_statements(step):
                            run.append(template)
                            self.execute(self.sql(DDL(template)))
                    if have < schema.version:
                        self.execute(self.sql(_UPSERT_VERSION), (schema.facet, schema.version))
        except InvalidRequest as exc:
            if not isinstance(exc, ConfigurationError) and (taken := self._names_taken(run)) is not None:
                raise taken from None
            raise

    def _names_taken(self, run: list[str]) -> ConfigurationError | None:
        """After a failed migration, rolled back: the refusal naming the first table or index that ``run``'s DDL
        creates and that is there all the same, made by someone else; ``None`` if there is none (or the lookup
        fails: the migration's own error stands). The engine's error says only "already exists", SQLite's by no
        code of its own, and a pipelining engine may report it at a later statement: the catalog tells."""
        try:
            taken = self.sql(READ(self.dialect.name_taken or self.dialect.table_exists))
            for kind, name in created_objects(run, self.prefix):
                if self.one(taken, (name,)) is not None:
                    what = (
                        f"cannot create {kind} {name!r}: a table or index of that name is already there, and this "
                        "store's schema versions do not account for it"
                    )
                    return name_taken(self.url, what, self.prefix)
        except DurastateError:
            pass
        return None

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
