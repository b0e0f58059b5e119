"""``durastate.open()`` and the ``Store`` it returns.

A ``Store`` owns one engine and hands out the facets (``store.kv``,
``store.queues``, ...). All facets share the engine, so any mix of their
calls can be made atomic with ``store.transaction()``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

from ._closing import ClosesOnExit
from ._validate import CLOCK_CONTRACT, CLOCK_LIMIT_MS, INT64_MAX, as_attempt_retention, misconfigured, shown
from .engines import registry
from .engines.base import Clock
from .errors import ConfigurationError, InvalidRequest, WrongOption, WrongType
from .facets import FACET_NAMES, Facet, FacetSettings, chosen, schemas
from .retention import MaintenanceReport, Progress, Retention
from .retention import maintain as run_maintenance

if TYPE_CHECKING:
    from .documents import Documents
    from .engines.base import Engine
    from .events import Events
    from .kv import KV
    from .presence import Presence
    from .queues import Queues
    from .records import Records

__all__ = ["DEFAULT_PATH", "OpenOptions", "Store", "open"]

DEFAULT_PATH = Path(registry.DEFAULT_PATH)
DEFAULT_MAX_VALUE_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_KEY_SIZE = 2048
# What a store of every facet migrates (the engine's own schema first).
SCHEMAS = schemas()


class OpenOptions(TypedDict, total=False):
    """The keyword options of ``open()``, for front ends that pass them on (``durastate.aio.open``).

    One key per keyword parameter of ``open()`` (a test keeps them equal);
    their meaning is documented there.
    """

    prefix: str
    durability: str
    busy_timeout: float
    clock: Clock | None
    max_value_size: int | None
    max_key_size: int | None
    min_connections: int
    max_connections: int
    retention: Retention | None
    read_only: bool
    attempt_retention: float | None
    facets: Iterable[str] | None


def _make_engine(url: str | os.PathLike[str] | None, options: dict[str, Any]) -> Engine:
    """The engine for ``url``, by its scheme (``engines.registry``)."""
    if url is None:
        url = str(DEFAULT_PATH)
    return registry.create(url, options)


def open(
    url: str | os.PathLike[str] | None = None,
    *,
    prefix: str = "ds_",
    durability: str = "normal",
    busy_timeout: float = 30.0,
    clock: Clock | None = None,
    max_value_size: int | None = DEFAULT_MAX_VALUE_SIZE,
    max_key_size: int | None = DEFAULT_MAX_KEY_SIZE,
    min_connections: int = 1,
    max_connections: int = 10,
    retention: Retention | None = None,
    read_only: bool = False,
    attempt_retention: float | None = None,
    facets: Iterable[str] | None = None,
    **unknown: NoReturn,
) -> Store:
    """Open (creating and migrating if needed) a store.

    ``url``:
      * ``None``: ``./.durastate/state.db`` (folder and file created, 0600);
      * a path (taken literally, ``?`` and all), ``sqlite:///abs/path.db``
        or ``sqlite:relative/path.db`` (no ``?query``: refused, as is a
        ``file:`` URL; docs/guide/opening.md);
      * ``memory:`` (or ``:memory:``): a private in-memory database that
        lives as long as the Store;
      * ``postgresql://...``: a PostgreSQL server (extra ``[postgres]``);
      * ``<scheme>:...``: an engine registered for that scheme
        (``durastate.engines.registry``).

    ``prefix`` starts every table name (several apps can share a database):
    lower-case letters, digits and ``_`` (table names are case-insensitive).
    A table or index of someone else's under it, of a name the store would
    create, is refused (``ConfigurationError`` naming it; nothing created).
    ``durability``: ``"normal"`` or ``"full"`` (SQLite; see
    ``durastate.engines.sqlite``). ``busy_timeout``: seconds a call waits for
    a lock before raising ``StoreUnavailable``. ``clock``: a ``time.time``
    replacement (seconds since the epoch) used for TTLs, delays and leases;
    called once here: one that raises, takes arguments, or returns anything
    but a number >= 0 whose milliseconds stay below 2**62 is refused, and
    so is any later reading out of that range (``ConfigurationError``, at
    the call that read it, before it changes anything).
    ``max_value_size``/``max_key_size``: bytes; larger inputs are refused
    with ``InvalidRequest``. ``max_key_size`` bounds scope + ns + key
    together; ``None`` means as large as the engine can index (PostgreSQL:
    2600 bytes, a larger value is refused; SQLite: ``max_value_size``).
    ``max_value_size`` ``None``: as large as the engine takes (PostgreSQL:
    10**9 bytes, a statement's message holds at most 1 GiB, and a larger
    ``max_value_size`` is refused; SQLite: no limit of the store's, SQLite
    refuses a value over its own, 10**9 bytes by default, at the write
    with ``InvalidRequest``).
    ``min_connections``/``max_connections``: the PostgreSQL pool size
    (checked, then ignored by SQLite, which uses one connection per
    thread; a ``min_connections`` the server's ``max_connections`` cannot
    give is ``ConfigurationError``). ``attempt_retention``: seconds PostgreSQL keeps the attempt row
    of each write, which lets a write retried after a lost connection apply
    once (``None``: 300; 1 to 604800, i.e. 7 days, or 0; see docs/operations/postgres.md,
    "What the engine keeps for itself"); 0: keep none, and a write that
    would need one to be retried raises ``OutcomeUnknown`` when its answer is
    lost instead of being retried; SQLite keeps no such rows and ignores it
    after the same check. A value that is not a finite number in range is
    refused with ``ConfigurationError``. ``retention``: what ``Store.maintain()`` deletes, how many
    backups ``documents.clear`` keeps and whether documents record their
    revision history (``durastate.retention``; default: keep everything,
    record no history, sweep only what has expired). ``read_only``: open an
    existing, current store for reading only (every write is refused with
    ``ConfigurationError``; a file the process may not write works).
    ``facets``: the names of the facets this store uses (``None``, the
    default: all of ``durastate.facets.FACET_NAMES``; with ``read_only``, all
    those the database has). Only their tables are created and migrated (and,
    with ``read_only``, only theirs need to be current); ``store.<other
    facet>`` raises ``ConfigurationError``. Opening the same database later
    with more facets creates the others then.

    Every option is checked before anything is created: a bad value raises
    ``ConfigurationError``; an unknown keyword or a wrong type
    ``WrongOption`` (a ``ConfigurationError`` and a ``TypeError``).
    """
    engine, finish = _open_parts(
        url,
        prefix=prefix,
        durability=durability,
        busy_timeout=busy_timeout,
        clock=clock,
        max_value_size=max_value_size,
        max_key_size=max_key_size,
        min_connections=min_connections,
        max_connections=max_connections,
        retention=retention,
        read_only=read_only,
        attempt_retention=attempt_retention,
        facets=facets,
        **unknown,
    )
    return finish(engine)


def _open_parts(
    url: str | os.PathLike[str] | None,
    *,
    prefix: str = "ds_",
    durability: str = "normal",
    busy_timeout: float = 30.0,
    clock: Clock | None = None,
    max_value_size: int | None = DEFAULT_MAX_VALUE_SIZE,
    max_key_size: int | None = DEFAULT_MAX_KEY_SIZE,
    min_connections: int = 1,
    max_connections: int = 10,
    retention: Retention | None = None,
    read_only: bool = False,
    attempt_retention: float | None = None,
    facets: Iterable[str] | None = None,
    **unknown: NoReturn,
) -> tuple[Engine, Callable[[Engine], Store]]:
    """``open()``'s two halves: its options checked and the engine made, and ``finish(engine)``.

    ``finish`` migrates an engine and returns its ``Store`` (closing the
    engine if that fails). ``durastate.citus`` calls it once per logical
    shard, with the shard's view of one coordinator engine.
    """
    if unknown:
        _refuse_unknown(unknown)
    facet_list = chosen(facets)
    if retention is None:
        retention = Retention()
    elif not isinstance(retention, Retention):
        misconfigured(f"retention must be a durastate.Retention, got {type(retention).__name__}")
    if max_value_size is not None:
        max_value_size = _as_size("max_value_size", max_value_size)
    if max_key_size is not None:
        max_key_size = _as_size("max_key_size", max_key_size)
    if not isinstance(read_only, bool):
        raise WrongOption(f"read_only must be True or False, got {shown(read_only)}")
    if clock is not None:
        _check_clock(clock)
    options: dict[str, Any] = {
        "prefix": prefix,
        "durability": durability,
        "busy_timeout": busy_timeout,
        "clock": clock,
        "min_connections": min_connections,
        "max_connections": max_connections,
        "read_only": read_only,
    }
    if attempt_retention is not None:
        # Passed only when given, so an engine factory written before the
        # option existed never sees it (engines.registry.SERVER_OPTIONS).
        options["attempt_retention"] = as_attempt_retention(attempt_retention)
    engine = _make_engine(url, options)

    def finish(engine: Engine) -> Store:
        return _store_on(engine, max_value_size, max_key_size, retention, facet_list, all_facets=facets is None)

    return engine, finish


def _refuse_unknown(unknown: dict[str, Any]) -> NoReturn:
    import difflib

    valid = list(OpenOptions.__annotations__)
    hints = [
        f"{name!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(name, valid, 1)) else repr(name)
        for name in sorted(unknown)
    ]
    raise WrongOption(f"unknown option(s) of open(): {', '.join(hints)}; the options are {', '.join(valid)}")


def _as_size(name: str, value: Any) -> int:
    """``max_value_size``/``max_key_size``: bytes, an int from 1 to 2**63-1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongOption(f"{name} must be an int (bytes), got {type(value).__name__}")
    if not 1 <= value <= INT64_MAX:
        misconfigured(f"{name} must be between 1 and 2**63-1 bytes, got {value}")
    return int(value)


def _check_clock(clock: Any) -> None:
    """Read ``clock`` once: a ``time.time`` replacement, seconds since the epoch (``CLOCK_CONTRACT``)."""
    if not callable(clock):
        misconfigured(f"clock must be callable returning seconds, got {type(clock).__name__}")
    try:
        sample = clock()
    except Exception as exc:
        raise ConfigurationError(
            f"clock() raised {type(exc).__name__}: {exc}; the clock must take no arguments and return seconds "
            "since the epoch, like time.time()"
        ) from exc
    if isinstance(sample, bool) or not isinstance(sample, (int, float)):
        misconfigured(f"clock must return seconds since the epoch (a finite number), it returned {shown(sample)}")
    if not 0 <= sample * 1000 < CLOCK_LIMIT_MS:  # NaN and infinities too
        misconfigured(
            f"clock must return {CLOCK_CONTRACT}; it returned {shown(sample)}"
            + (" (nanoseconds? time.time_ns is not a clock in seconds)" if 1e17 < sample < 1e20 else "")
        )


def _store_on(
    engine: Engine,
    max_value_size: int | None,
    max_key_size: int | None,
    retention: Retention,
    facets: tuple[Facet, ...],
    *,
    all_facets: bool = False,
) -> Store:
    """Migrate ``engine`` for ``facets`` and make its ``Store``; the engine is closed if that fails.

    ``all_facets`` (``open()`` was not given ``facets``) on a read-only
    engine: the store hands out the facets the database has, since it could
    not create the others (a store made with ``facets=["kv"]`` opens
    read-only as a kv store, not as an error).
    """
    try:
        if all_facets and engine.read_only:
            present = engine.schema_versions()
            facets = tuple(facet for facet in facets if facet.schema.facet in present) or facets
        value_limit = engine.dialect.max_value
        if max_value_size is None:
            max_value_size = INT64_MAX if value_limit is None else value_limit
        elif value_limit is not None and max_value_size > value_limit:
            misconfigured(
                f"max_value_size={max_value_size} is more than {engine.dialect.name} can take in one value "
                f"({value_limit} bytes); pass at most that, or None for the engine's limit"
            )
        index_limit = engine.dialect.max_index_key
        if max_key_size is None:
            max_key_size = index_limit if index_limit is not None else max_value_size
        elif index_limit is not None and max_key_size > index_limit:
            misconfigured(
                f"max_key_size={max_key_size} is more than {engine.dialect.name} can index "
                f"({index_limit} bytes for scope + ns + key); pass at most that, or None for the engine's limit"
            )
        engine.migrate(schemas(facets))
    except BaseException:
        engine.close()
        raise
    return Store(
        engine,
        max_value_size=max_value_size,
        max_key_size=max_key_size,
        retention=retention,
        facets=[facet.name for facet in facets],
    )


class Store(ClosesOnExit):
    """One database and its facets. Thread-safe; usable across ``fork``.

    Use as a context manager, or call ``close()``. ``facets`` (names,
    ``None``: all) are the facets this store hands out; each is made at its
    first use (``store.kv``), so opening compiles no statement of a facet
    the process never touches.
    """

    # The facets (durastate.facets.FACETS), made on first use by __getattr__.
    kv: KV
    queues: Queues
    documents: Documents
    records: Records
    events: Events
    presence: Presence

    def __init__(
        self,
        engine: Engine,
        *,
        max_value_size: int,
        max_key_size: int,
        retention: Retention | None = None,
        facets: Iterable[str] | None = None,
    ) -> None:
        self.engine = engine
        self.retention = Retention() if retention is None else retention
        self._settings = FacetSettings(max_value_size, max_key_size, self.retention)
        self._facets = {facet.name: facet for facet in chosen(facets)}
        self._making = threading.Lock()

    @property
    def facets(self) -> tuple[str, ...]:
        """The names of the facets this store hands out (``open(facets=...)``), in registry order."""
        return tuple(self._facets)

    def __getattr__(self, name: str) -> Any:
        # Only reached when ``name`` is not set yet: a facet's first use.
        facet = self.__dict__.get("_facets", {}).get(name)
        if facet is None:
            if name in FACET_NAMES:
                raise ConfigurationError(
                    f"store.{name}: this store was opened with facets={list(self._facets)}; "
                    f"open it with {name!r} among them to use it"
                )
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        with self._making:  # one instance per facet, even when threads race to its first use
            made = self.__dict__.get(name)
            if made is None:
                made = self.__dict__[name] = facet.make(self.engine, self._settings)
        return made

    @property
    def url(self) -> str:
        return self.engine.url

    def transaction(self) -> Transaction:
        """One atomic commit across every facet of this store.

        ``with store.transaction() as tx:`` - every call this thread makes
        inside the block, on ``tx`` or on ``store`` directly, joins the
        transaction; it commits when the block ends normally and rolls back
        entirely on any exception. Nested blocks are savepoints: an
        exception caught inside the outer block undoes only the inner one.
        Other threads are not part of it (on SQLite they wait for it).
        """
        return Transaction(self)

    def maintain(
        self, *, max_rows: int | None = None, progress: Progress | None = None, vacuum: bool = False
    ) -> MaintenanceReport:
        """Delete what the store's ``retention`` policy says has aged out (``durastate.retention``),
        then give the freed space back.

        Bounded batches, each its own short commit, so writers go on
        meanwhile; ``max_rows`` bounds one run (``finished=False`` in the
        report when it stopped early: run it again). ``progress(rule,
        rows)`` is called after each rule (``durastate maintain`` shows it).
        Refused inside a transaction (its batches would all join it).

        Space, once the rules ran to the end: on a SQLite file the pages
        the deletes freed go back to the filesystem in short steps
        (incremental auto-vacuum, which every file durastate created has)
        and the WAL is truncated; ``report.bytes_returned`` says how much
        the files shrank. ``vacuum=True`` adds the engine's thorough pass:
        SQLite's ``VACUUM`` (holds the write lock while it rewrites the
        file; the one way to return space in a file made without
        incremental auto-vacuum, and it gives the file that mode);
        PostgreSQL's ``VACUUM (ANALYZE)`` of the store's tables (no
        blocking lock; without it autovacuum does the same in its own
        time). See ``engines.sqlite_space`` and ``engines.postgres_space``.
        """
        if self.engine.in_transaction():
            raise InvalidRequest("maintain() inside a transaction would hold every batch in it; call it outside")
        if not isinstance(vacuum, bool):
            raise WrongType(f"vacuum must be True or False, got {type(vacuum).__name__}")
        report = run_maintenance(self, self.retention, max_rows=max_rows, progress=progress)
        if report.finished:
            report.bytes_returned = self.engine.reclaim_space(full=vacuum).bytes_returned
        return report

    def close(self) -> None:
        """Close all connections. Idempotent; later calls raise ``StoreClosed``."""
        self.engine.close()

    @property
    def closed(self) -> bool:
        return self.engine.closed

    def __repr__(self) -> str:
        return f"<durastate.Store {self.url}{' (closed)' if self.closed else ''}>"


class Transaction:
    """Context manager returned by ``Store.transaction()``; yields the store.

    One engine transaction for the object's life: it refuses a second entry
    while open, an exit that is not its open block's (``engines.transaction``).
    """

    __slots__ = ("_inner", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._inner = store.engine.transaction()

    def __enter__(self) -> Store:
        self._inner.__enter__()
        return self._store

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._inner.__exit__(exc_type, exc, tb)
