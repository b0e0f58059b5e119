"""``PostgresVectors``: ``engine.vectors`` (``engines.vectors``) on pgvector.

Available when the ``vector`` extension is installed in the database when
the engine opens (``vector_schema``, read once by the engine's first
connection; ``capabilities.vector_index``). durastate never creates the
extension: ``CREATE EXTENSION vector`` needs a superuser on most servers,
and where it goes (its schema) is the DBA's choice. The type, its operators
and operator classes are named with that schema, so the index works
whatever the store's ``search_path``.

One table per index (``VectorTable.name``): ``{p}vec_<name>`` with a row
per (kv key, field): the digest of the kv value the vectors came from, and
the ``vector(dims)``. Its ``(scope, ns, key)`` references the owning kv
row with ``ON DELETE CASCADE``: deleting the row, or the TTL sweep purging
it, deletes its vectors in the same statement, whoever deletes it. An HNSW
index (pgvector's defaults: m 16, ef_construction 64) with the operator
class of the distance orders a search. It is approximate; a search raises
``hnsw.ef_search`` to the rows it asks for (at most 1000) and turns on
pgvector's iterative scan (0.8+; an unknown setting on older versions), so
a key range filters the index walk instead of emptying its result.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest
from .statements import DDL, READ, WRITE, Statement
from .vectors import Owner, VectorIndexes, VectorTable

if TYPE_CHECKING:
    from .postgres import PostgresEngine

__all__ = ["PostgresVectors", "vector_schema"]

# Run by the engine's probe (a plain psycopg connection, before the pool).
EXTENSION_SCHEMA = (
    "SELECT n.nspname FROM pg_catalog.pg_extension e"
    " JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)

# pgvector's operators and operator classes by LangGraph's distance names.
OPERATOR = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
OPCLASS = {"cosine": "vector_cosine_ops", "l2": "vector_l2_ops", "inner_product": "vector_ip_ops"}
# HNSW indexes vector columns of up to 2000 dimensions.
MAX_DIMS = 2000
# hnsw.ef_search's range is 1..1000. pgvector's default, 40, finds 1 of the true 10 nearest on
# 10,000 random 256-dim vectors (bench/langgraph_search.py's data, the hard case); 100 is the floor.
EF_SEARCH_MIN, EF_SEARCH_MAX = 100, 1000

# Templates: {table} is the index's table (``{p}vec_<name>``), {vector} the
# schema-qualified type, {ops} its operator class, {op} the distance
# operator, {dims} the dimensions; filled per index by ``_bind``.
CREATE_TABLE = DDL(
    "CREATE TABLE IF NOT EXISTS {table} ("
    " scope bytea NOT NULL, ns bytea NOT NULL, key bytea NOT NULL, field text NOT NULL,"
    " digest bytea NOT NULL, embedding {vector}({dims}) NOT NULL,"
    " PRIMARY KEY (scope, ns, key, field),"
    " FOREIGN KEY (scope, ns, key) REFERENCES {{p}}kv (scope, ns, key) ON DELETE CASCADE)"
)
CREATE_INDEX = DDL("CREATE INDEX IF NOT EXISTS {table}_ann ON {table} USING hnsw (embedding {ops})")
# Live kv rows whose vectors the table lacks or holds from another value.
STALE = READ(
    "SELECT v.key FROM {{p}}kv v WHERE v.scope = ? AND v.ns = ?"
    " AND (v.expires_at IS NULL OR v.expires_at > ?)"
    " AND NOT EXISTS (SELECT 1 FROM {table} t WHERE t.scope = v.scope AND t.ns = v.ns AND t.key = v.key"
    " AND t.digest = decode(md5(v.value), 'hex'))"
)
DELETE_OWNERS = WRITE("DELETE FROM {table} WHERE scope = ? AND ns = ? AND key = ANY(?)")
# ON CONFLICT: a fill (``ensure``'s answer) racing a writer of the same owner
# must not fail on the writer's rows; the last to write a field wins.
INSERT_VECTORS = WRITE(
    "INSERT INTO {table} (scope, ns, key, field, digest, embedding)"
    " SELECT ?, ?, u.key, u.field, u.digest, CAST(u.embedding AS {vector})"
    " FROM unnest(?::bytea[], ?::text[], ?::bytea[], ?::text[]) AS u(key, field, digest, embedding)"
    " ON CONFLICT (scope, ns, key, field) DO UPDATE SET digest = excluded.digest, embedding = excluded.embedding"
)
# Transaction-local (is_local): they end with the search's read transaction.
SEARCH_SETTINGS = READ(
    "SELECT set_config('hnsw.ef_search', ?, true), set_config('hnsw.iterative_scan', 'strict_order', true)"
)
# How a search runs. A key range (the whole table, or a namespace) holding at most SCAN_MAX_VALUES
# values (vectors x dims: 20,000 vectors of 256 dims, 3,333 of 1536) is scored exactly, in C, by a
# scan and a top-N sort ("+ 0" keeps the planner off the HNSW index): about as fast as the index at
# that size, and exact. A bigger one walks the HNSW index (the whole table: no condition, it holds one
# scope; a namespace: filtered by key, with pgvector's iterative scan), and is scanned exactly when
# the walk gives up (hnsw.max_scan_tuples) short of the rows asked for. The choice is made here, by a
# capped count, not by the planner: the engine's sessions use generic plans, which guess a range's size.
SCAN_MAX_VALUES = 5_000_000
_ORDER = " ORDER BY embedding OPERATOR({op}) CAST(? AS {vector}) LIMIT ?"
_SCANNED = " ORDER BY (embedding OPERATOR({op}) CAST(? AS {vector})) + 0 LIMIT ?"
NEAREST_ALL = READ("SELECT key, field FROM {table}" + _ORDER)
# By whether the range has an upper bound: (start,) or (start, end), then the query and limit.
_RANGE = {False: " WHERE key >= ?", True: " WHERE key >= ? AND key < ?"}
NEAREST_INDEXED = {
    bounded: READ("SELECT key, field FROM {table}" + where + _ORDER) for bounded, where in _RANGE.items()
}
NEAREST_SCANNED = {
    bounded: READ("SELECT key, field FROM {table}" + where + _SCANNED) for bounded, where in _RANGE.items()
}
RANGE_COUNT = {
    bounded: READ("SELECT count(*) FROM (SELECT 1 FROM {table}" + where + " LIMIT ?) AS capped")
    for bounded, where in _RANGE.items()
}


def vector_schema(conn: Any) -> str | None:
    """The schema the ``vector`` extension is installed in, or None (not installed, or a name we cannot quote).

    ``conn`` is a psycopg connection (the engine's probe).
    """
    row = conn.execute(EXTENSION_SCHEMA).fetchone()
    if row is None:
        return None
    schema = str(row[0])
    # Statement templates give '?' and braces meaning: such a schema name is not worth the escaping.
    if any(c in schema for c in "?{}\x00"):
        return None
    return schema


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _vector_text(packed: bytes | memoryview) -> str:
    """A packed float32 vector as pgvector's text input; repr of each float32 reads back as the same float32."""
    values = array("f")
    values.frombytes(packed)
    return "[" + ",".join(map(repr, values)) + "]"


class PostgresVectors(VectorIndexes):
    """``engines.vectors`` on pgvector (see the module docstring)."""

    max_dims = MAX_DIMS
    engine: PostgresEngine

    def __init__(self, engine: PostgresEngine, schema: str | None) -> None:
        super().__init__(engine)
        self._schema = schema

    def _bind(self, statement: Statement, table: VectorTable) -> Statement:
        if self._schema is None or not self.engine.capabilities.vector_index:
            raise self._unsupported()
        if table.dims > MAX_DIMS:
            raise InvalidRequest(f"a pgvector HNSW index holds at most {MAX_DIMS} dims, the index has {table.dims}")
        schema = _quoted(self._schema)
        assert isinstance(statement.template, str)
        text = statement.template.format(
            table="{p}vec_" + table.name,
            vector=f"{schema}.vector",
            ops=f"{schema}.{OPCLASS[table.distance]}",
            op=f"{schema}.{OPERATOR[table.distance]}",
            dims=table.dims,
        )
        return Statement(statement.kind, text)

    def ensure(self, table: VectorTable) -> list[bytes]:
        engine = self.engine
        create = [engine.sql(self._bind(s, table)) for s in (CREATE_TABLE, CREATE_INDEX)]
        stale = engine.sql(self._bind(STALE, table))
        # The migration lock: concurrent openers create the table one after the other.
        with engine._migration_lock():
            for statement in create:
                engine.execute(statement)
        rows = engine.all(stale, (table.scope, table.ns, engine.now_ms()))
        return [bytes(row[0]) for row in rows]

    def replace(self, table: VectorTable, owners: Sequence[Owner]) -> None:
        engine = self.engine
        if not engine.in_transaction():
            raise InvalidRequest("vectors.replace() runs inside the write transaction that wrote the owners' rows")
        if not owners:
            return
        keys, fields, digests, embeddings = [], [], [], []
        for key, digest, vectors in owners:
            for field, packed in vectors:
                if len(packed) != 4 * table.dims:
                    raise InvalidRequest(f"a vector of {len(packed) // 4} dims in an index of {table.dims}")
                keys.append(key)
                fields.append(field)
                digests.append(digest)
                embeddings.append(_vector_text(packed))
        engine.execute(engine.sql(self._bind(DELETE_OWNERS, table)), (table.scope, table.ns, [o[0] for o in owners]))
        if keys:
            engine.execute(
                engine.sql(self._bind(INSERT_VECTORS, table)),
                (table.scope, table.ns, keys, fields, digests, embeddings),
            )

    def nearest(
        self, table: VectorTable, query: Sequence[float], *, start: bytes, end: bytes | None, limit: int
    ) -> list[tuple[bytes, str]]:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidRequest(f"limit must be an int >= 1, got {limit!r}")
        if len(query) != table.dims:
            raise InvalidRequest(f"a query of {len(query)} dims in an index of {table.dims}")
        engine = self.engine
        text = "[" + ",".join(repr(float(x)) for x in query) + "]"

        def run(statement: Statement, *params: Any) -> list[tuple[bytes, str]]:
            rows = engine.all(engine.sql(self._bind(statement, table)), params)
            return [(bytes(row[0]), str(row[1])) for row in rows]

        # The settings are transaction-local: a search outside one gets its own.
        with nullcontext() if engine.in_transaction() else engine.read_transaction():
            bounded = end is not None
            bounds = (start,) if end is None else (start, end)
            scan_max = SCAN_MAX_VALUES // table.dims
            counted = engine.one(engine.sql(self._bind(RANGE_COUNT[bounded], table)), (*bounds, scan_max + 1))
            if counted is not None and int(counted[0]) > scan_max:
                engine.one(engine.sql(self._bind(SEARCH_SETTINGS, table)), (str(self._ef_search(limit)),))
                if not start and end is None:
                    return run(NEAREST_ALL, text, limit)
                found = run(NEAREST_INDEXED[bounded], *bounds, text, limit)
                if len(found) == limit:
                    return found
            return run(NEAREST_SCANNED[bounded], *bounds, text, limit)

    @staticmethod
    def _ef_search(limit: int) -> int:
        return max(EF_SEARCH_MIN, min(EF_SEARCH_MAX, limit))
