"""One logical shard of ``durastate.citus``: a schema's tables over the coordinator engine's connections.

A ``SchemaEngine`` is a ``PostgresEngine`` (Citus mode) for the tables of
one schema, sharing the coordinator engine's pool and per-thread
transaction. So every logical shard of one process costs no connection of
its own, and a transaction opened through any shard is the same
coordinator transaction for all of them: writes to several shards inside it
commit together (Citus commits a transaction that wrote several nodes with
two-phase commit; on plain PostgreSQL the schemas are one server's).

Statements name the schema: ``{p}`` becomes ``"schema".prefix`` in every
statement but DDL (index names cannot be qualified), which migrations run
with ``SET LOCAL search_path`` to the schema. The gap-free sequence
function is created with ``SET search_path FROM CURRENT`` so that its body
finds its schema's table whatever the calling session's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from ..errors import ConfigurationError, InvalidRequest
from .base import READ, EngineBase, Kind, Migration
from .postgres import PostgresEngine
from .postgres_citus_sql import (
    CITUS_INSTALLED,
    CREATE_SHARD_TABLE,
    DISTRIBUTED_SCHEMAS,
    READ_SHARD_COUNT,
    RECORD_SHARD_COUNT,
    SHARDS_LOCK,
    create_schema,
)
from .postgres_errors import translate_postgres_error
from .postgres_notify import channel_identifier

__all__ = ["SchemaEngine", "citus_url", "logical_shards"]

_VERSIONS_EXIST = READ("SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = ? AND tablename = ?")
_VERSIONS = READ("SELECT facet, version FROM {p}schema")
_SEARCH_PATH = "SELECT set_config('search_path', %s, true)"
_SEQUENCE_FUNCTION = "LANGUAGE sql VOLATILE AS"


def _delegated(name: str) -> property:
    """An attribute that is the coordinator engine's (read and written there)."""

    def get(self: SchemaEngine) -> Any:
        return getattr(self._coordinator, name)

    def put(self: SchemaEngine, value: Any) -> None:
        setattr(self._coordinator, name, value)

    return property(get, put)


class SchemaEngine(PostgresEngine):
    """The tables of ``schema`` through ``coordinator``'s pool and transactions (see the module docstring).

    Closing it closes nothing: the coordinator engine's owner closes that.
    """

    # The connection state is the coordinator's: pool, per-thread
    # transaction, closed flag, clock offset.
    _pool = _delegated("_pool")
    _pool_lock = _delegated("_pool_lock")
    _tls = _delegated("_tls")
    _closed = _delegated("_closed")
    _probed = _delegated("_probed")
    _clock_offset = _delegated("_clock_offset")
    _offset_measured_at = _delegated("_offset_measured_at")
    _offset_rtt = _delegated("_offset_rtt")

    def __init__(self, coordinator: PostgresEngine, schema: str) -> None:
        if not coordinator.citus:
            raise InvalidRequest("a SchemaEngine needs a coordinator engine in the Citus mode (citus://)")
        self._coordinator = coordinator
        self.schema = schema
        self.citus = True
        self._qualified = f'"{schema}".{coordinator.prefix}'
        self._local_time = coordinator._local_time
        self._server_clock = coordinator._server_clock
        self.attempt_retention = coordinator.attempt_retention
        self._recording = coordinator._recording  # before EngineBase.__init__ (the statement cache's key)
        EngineBase.__init__(self, prefix=coordinator.prefix, clock=coordinator._clock, read_only=coordinator.read_only)
        self.url = f"{coordinator.url} (schema {schema})"
        self._conninfo = coordinator._conninfo
        self._busy_timeout = coordinator._busy_timeout
        self._min, self._max = coordinator._min, coordinator._max
        # Every shard's statements join the coordinator's per-thread transaction.
        self.capabilities = coordinator.capabilities.replace(cross_shard_transactions=True)
        self._versions_exist = self.sql(_VERSIONS_EXIST)
        self._versions = self.sql(_VERSIONS)
        self._compile_own_statements()

    def _prefix_for(self, kind: Kind) -> str:
        return self.prefix if kind is Kind.DDL else self._qualified

    def channel(self, name: str) -> str:
        """As ``PostgresEngine.channel``, for this schema's tables (shards never share a channel)."""
        return channel_identifier(self._qualified, name)

    def _lock_params(self, name: str) -> tuple[str, str]:
        return name, self._qualified

    def _read_versions(self) -> dict[str, int] | None:
        if self.one(self._versions_exist, (self.schema, self.prefix + "schema")) is None:
            return None
        return {str(f): int(v) for f, v in self.all(self._versions)}

    def _tx_begin(self, read: bool, lock: str | None) -> None:
        """``PostgresEngine._tx_begin``; a migration's transaction also works in the schema (its DDL is unqualified)."""
        super()._tx_begin(read, lock)
        if lock is not None:
            conn = self._tls.state.conn
            assert conn is not None
            conn.execute(_SEARCH_PATH, (f'"{self.schema}"',))

    def migration_statements(self, step: Migration) -> tuple[str, ...]:
        """``EngineBase.migration_statements``; the sequence function keeps its schema (module docstring)."""
        return tuple(
            text.replace(_SEQUENCE_FUNCTION, "LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS")
            for text in super().migration_statements(step)
        )

    def catalog(self) -> list[tuple[str, ...]]:
        """``PostgresEngine.catalog`` of this schema."""
        with self.read_transaction():
            conn = self._tls.state.conn
            assert conn is not None
            conn.execute(_SEARCH_PATH, (f'"{self.schema}"',))
            return super().catalog()

    def close(self) -> None:
        """Nothing to close: the connections are the coordinator engine's."""

    def _forget_parent_pool(self) -> None:  # pragma: no cover - the coordinator is the registered one
        pass


def citus_url(url: str) -> str:
    """``url`` as a ``citus://`` URL (from ``postgresql://``, ``postgres://`` or ``citus://``); else refused."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidRequest(f"a Citus coordinator URL is postgresql://... or citus://..., got {url!r}")
    scheme, rest = url.split("://", 1)
    if scheme not in ("citus", "postgresql", "postgres"):
        raise InvalidRequest(f"a Citus coordinator URL is postgresql://... or citus://..., got scheme {scheme!r}")
    return f"citus://{rest}"


def logical_shards(coordinator: PostgresEngine, names: Callable[[int], list[str]], wanted: int | None) -> list[str]:
    """The logical shards' schemas, created (with their recorded count) by the first opener.

    ``names(count)``: the schema names of ``count`` shards. ``wanted``: the
    count asked for (``None``: whatever was recorded). Refused with
    ``ConfigurationError`` when it differs from the recorded count, or when
    none is recorded and none is asked for; on a Citus coordinator, also
    when a shard's schema is not a distributed schema.
    """
    table = f"{coordinator.prefix}logical_shards"
    conn = coordinator._borrow()
    try:
        with conn.transaction():
            conn.execute(SHARDS_LOCK, (coordinator.prefix,))
            on_citus = conn.execute(CITUS_INSTALLED).fetchone() is not None
            conn.execute(CREATE_SHARD_TABLE.format(table=table))
            row = conn.execute(READ_SHARD_COUNT.format(table=table)).fetchone()
            recorded = None if row is None else int(row[0])
            if recorded is None:
                if wanted is None:
                    raise ConfigurationError(
                        f"{coordinator.url}: no logical shards were created here yet (no {table} row): "
                        "pass shards=N the first time"
                    )
                for schema in names(wanted):
                    for statement in create_schema(schema):
                        conn.execute(statement)
                conn.execute(RECORD_SHARD_COUNT.format(table=table), (wanted, coordinator.now_ms()))
                recorded = wanted
            elif wanted is not None and wanted != recorded:
                raise ConfigurationError(
                    f"{coordinator.url}: this store was created with {recorded} logical shards; opening it with "
                    f"shards={wanted} is refused (the count is fixed at creation: keys would move between shards)"
                )
            schemas = names(recorded)
            if on_citus:
                found = {r[0] for r in conn.execute(DISTRIBUTED_SCHEMAS, (schemas,))}
                missing = [s for s in schemas if s not in found]
                if missing:
                    raise ConfigurationError(
                        f"{coordinator.url}: schemas {missing[:3]} ... are not Citus distributed schemas "
                        "(created by hand?); distribute them with citus_schema_distribute()"
                    )
    except psycopg.Error as exc:
        raise translate_postgres_error(exc, f"{coordinator.url}: logical shards") from None
    finally:
        coordinator._give_back(conn)
    return schemas
