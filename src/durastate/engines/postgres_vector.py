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
index (pgvector's defaults: m 16, ef_construction 64, or the table's
``HnswParams``; none for ``hnsw=None``) with the operator class of the
distance orders a search. It is approximate; a search raises
``hnsw.ef_search`` to the rows it asks for (at most 1000) and turns on
pgvector's iterative scan (0.8+; an unknown setting on older versions), so
a key range and ``nearest_rows``' conditions filter the index walk instead
of emptying its result.

Each index table's exact vector count (``{p}vec_counts``, kept by triggers
on the table: ``COUNTING``) and the keys outside a search's range decide
whether it scans exactly or walks the HNSW index (``SCAN_MAX_VALUES``)
without reading the vectors first.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest
from .statements import DDL, READ, WRITE, Statement
from .vectors import HnswParams, JsonCondition, Neighbour, Owner, VectorIndexes, VectorTable

if TYPE_CHECKING:
    from .postgres import PostgresEngine

__all__ = ["PostgresVectors", "vector_schema"]

# Asked by the engine's probe (before the pool starts), as a scalar subquery of its one question (at most one row).
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
# pgvector's default parameters (m 16, ef_construction 64) are the index {table}_ann, as first created;
# others are their own index, {table}_ann_m<m>_ef<ef_construction>.
CREATE_INDEX = DDL("CREATE INDEX IF NOT EXISTS {table}_ann ON {table} USING hnsw (embedding {ops})")
CREATE_INDEX_WITH = DDL(
    "CREATE INDEX IF NOT EXISTS {table}_ann_m{m}_ef{ef_construction} ON {table} USING hnsw (embedding {ops})"
    " WITH (m = {m}, ef_construction = {ef_construction})"
)
# Live kv rows whose vectors the table lacks or holds from another value: (key, digest of the value) pairs
# less those the table holds. A set difference, not NOT EXISTS: on tables without statistics (new, or just
# restored) the planner took the anti join for a nested loop over two "small" tables and read the index
# table once per kv row (100,000 x 100,000 rows: minutes); EXCEPT hashes or sorts each side once.
STALE = READ(
    "SELECT s.key FROM ("
    "SELECT v.key, decode(md5(v.value), 'hex') AS digest FROM {{p}}kv v WHERE v.scope = ? AND v.ns = ?"
    " AND (v.expires_at IS NULL OR v.expires_at > ?)"
    " EXCEPT SELECT t.key, t.digest FROM {table} t WHERE t.scope = ? AND t.ns = ?) s"
)
DELETE_OWNERS = WRITE("DELETE FROM {table} WHERE scope = ? AND ns = ? AND key = ANY(?)")
# How many vectors each index table holds, exactly: a search decides scan or walk by it (SCAN_MAX_VALUES)
# without reading the vectors first. Kept by triggers on the index table, so every insert and
# delete counts whoever runs it (replace, the cascade from a kv delete or TTL purge) and a reader's
# snapshot sees the count of the rows it sees. A statement's change is added to a transaction-local
# setting (durastate.vec_<table oid>: rolled back with its savepoint or transaction); the first one in
# a transaction also inserts a row into {p}vec_flush, whose deferred trigger adds the sum to the
# counts once, at commit. Updating the count row at every statement instead made a transaction of n
# statements cost O(n^2) (a delete of 20,000 owners in one transaction: 16 s instead of 1): the
# versions a transaction writes of one row cannot be pruned before it ends, and each update walks
# them. A writer adds to one of COUNT_SLOTS rows (by backend pid): concurrent writers of one index do
# not queue on one row; a reader sums the rows.
COUNT_SLOTS = 16
# The statements that make a prefix count (tables, functions, the flush trigger), run with START_COUNTING.
# search_path FROM CURRENT: a delete cascading from a session with another search_path still finds
# the tables. Inserts are counted per statement (a transition table: replace inserts an owner's rows in
# one); deletes per row deleted: every kv delete under the prefix runs the cascade's DELETE, which
# mostly deletes nothing, and a statement trigger would run for each (~35 us each, measured).
COUNTING = [
    DDL(
        "CREATE TABLE IF NOT EXISTS {{p}}vec_counts ("
        " name text NOT NULL, slot int NOT NULL, vectors bigint NOT NULL, PRIMARY KEY (name, slot))"
    ),
    DDL("CREATE TABLE IF NOT EXISTS {{p}}vec_flush (name text NOT NULL, relid oid NOT NULL)"),
    DDL(
        "CREATE OR REPLACE FUNCTION {{p}}vec_count() RETURNS trigger LANGUAGE plpgsql"
        " SET search_path FROM CURRENT AS $body$"
        " DECLARE delta bigint; pending text;"
        " BEGIN"
        " IF TG_OP = 'TRUNCATE' THEN"
        " DELETE FROM {{p}}vec_counts WHERE name = TG_ARGV[0];"
        " PERFORM set_config('durastate.vec_' || TG_RELID, '', true);"
        " RETURN NULL;"
        " END IF;"
        " IF TG_LEVEL = 'ROW' THEN delta := -1;"
        " ELSE SELECT count(*) INTO delta FROM changed; IF delta = 0 THEN RETURN NULL; END IF;"
        " END IF;"
        " pending := current_setting('durastate.vec_' || TG_RELID, true);"
        " IF pending IS NULL OR pending = '' THEN"
        " INSERT INTO {{p}}vec_flush (name, relid) VALUES (TG_ARGV[0], TG_RELID);"
        " ELSE delta := delta + CAST(pending AS bigint);"
        " END IF;"
        " PERFORM set_config('durastate.vec_' || TG_RELID, CAST(delta AS text), true);"
        " RETURN NULL;"
        " END $body$"
    ),
    DDL(
        "CREATE OR REPLACE FUNCTION {{p}}vec_flush() RETURNS trigger LANGUAGE plpgsql"
        " SET search_path FROM CURRENT AS $body$"
        " DECLARE pending text;"
        " BEGIN"
        " pending := current_setting('durastate.vec_' || NEW.relid, true);"
        " PERFORM set_config('durastate.vec_' || NEW.relid, '', true);"
        " DELETE FROM {{p}}vec_flush WHERE ctid = NEW.ctid;"
        " IF pending IS NOT NULL AND pending NOT IN ('', '0') THEN"
        " INSERT INTO {{p}}vec_counts AS c (name, slot, vectors)"
        f" VALUES (NEW.name, mod(pg_backend_pid(), {COUNT_SLOTS}), CAST(pending AS bigint))"
        " ON CONFLICT (name, slot) DO UPDATE SET vectors = c.vectors + excluded.vectors;"
        " END IF;"
        " RETURN NULL;"
        " END $body$"
    ),
    DDL("DROP TRIGGER IF EXISTS flushed ON {{p}}vec_flush"),
    DDL(
        "CREATE CONSTRAINT TRIGGER flushed AFTER INSERT ON {{p}}vec_flush DEFERRABLE INITIALLY DEFERRED"
        " FOR EACH ROW EXECUTE FUNCTION {{p}}vec_flush()"
    ),
]
COUNTED = READ("SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = CAST('{table}' AS regclass) AND tgname = 'counted'")
# Under the migration lock, in one transaction: the lock keeps writers out between the count and the
# triggers (a table from before the counts, or a counts row lost).
START_COUNTING = [
    DDL("LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"),
    DDL("DELETE FROM {{p}}vec_counts WHERE name = '{name}'"),
    DDL("INSERT INTO {{p}}vec_counts (name, slot, vectors) SELECT '{name}', 0, count(*) FROM {table}"),
    DDL(
        "CREATE TRIGGER counted AFTER INSERT ON {table} REFERENCING NEW TABLE AS changed"
        " FOR EACH STATEMENT EXECUTE FUNCTION {{p}}vec_count('{name}')"
    ),
    DDL(
        "CREATE TRIGGER counted_deletes AFTER DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION {{p}}vec_count('{name}')"
    ),
    DDL(
        "CREATE TRIGGER counted_truncates AFTER TRUNCATE ON {table}"
        " FOR EACH STATEMENT EXECUTE FUNCTION {{p}}vec_count('{name}')"
    ),
]
# ON CONFLICT: a fill (``ensure``'s answer) racing a writer of the same owner
# must not fail on the writer's rows; the last to write a field wins.
INSERT_VECTORS = WRITE(
    "INSERT INTO {table} (scope, ns, key, field, digest, embedding)"
    " SELECT ?, ?, u.key, u.field, u.digest, CAST(u.embedding AS {vector})"
    " FROM unnest(?::bytea[], ?::text[], ?::bytea[], ?::text[]) AS u(key, field, digest, embedding)"
    " ON CONFLICT (scope, ns, key, field) DO UPDATE SET digest = excluded.digest, embedding = excluded.embedding"
)
# Transaction-local (is_local): they end with the search's read transaction. enable_sort off: the walk is
# planned (a generic plan, cached per connection: planned after these, re-planned after an ANALYZE, also
# after these) with every sort costed as disabled, so the one plan that yields rows in distance order
# without sorting, the HNSW index, is the cheapest whatever the statistics say. Left to the planner, the
# generic plan (a key range of unknown bounds: 0.5% of the rows; an unknown LIMIT: a tenth of them) took
# the primary key's range and a sort of every row once the table had statistics (438 ms at 100,000 x 64
# dims, against 5-25 ms for the walk), and a sort on small tables even without. The first column is
# enable_sort as it was (RESTORE_SORT), read before it is set (target list order).
SEARCH_SETTINGS = READ(
    "SELECT current_setting('enable_sort'), set_config('hnsw.ef_search', ?, true),"
    " set_config('hnsw.iterative_scan', 'strict_order', true), set_config('enable_sort', 'off', true)"
)
# After the walk, before anything else the transaction plans (the exact scan when the walk fell short, the
# caller's statements when the search runs in the caller's transaction).
RESTORE_SORT = READ("SELECT set_config('enable_sort', ?, true)")
# How a search runs. A key range (the whole table, or a namespace) holding at most SCAN_MAX_VALUES
# values (vectors x dims: 20,000 vectors of 256 dims, 3,333 of 1536) is scored exactly, in C, by a
# scan and a sort ("+ 0" keeps the planner off the HNSW index): about as fast as the index at
# that size, and exact. A bigger one walks the HNSW index (filtered by key range and conditions, with
# pgvector's iterative scan), and is scanned exactly when the walk gives up (hnsw.max_scan_tuples)
# short of the rows asked for. The choice is made here, not by the planner (the engine's sessions use
# generic plans, which guess a range's size; a fresh table has no statistics), from the table's count
# (COUNTING), in the scan's statement ("gated": one round trip): a table of at most that many
# vectors is scanned; in a bigger one, a range with few keys outside it (_OUTSIDE) is sized exactly
# (the count minus those) and scanned or walked at once, else the scan reads at most
# SCAN_MAX_VALUES + 1 rows of the range and says how many it read ("capped"), and the walk runs when
# that is more.
SCAN_MAX_VALUES = 5_000_000
# "gated": the scan, run only when the table holds at most the last parameter's vectors, else one row of
# NULLs but the count (a one-time filter skips the scan). The count: the committed counts plus what this
# transaction has changed and not yet flushed (a search in the transaction that wrote the vectors).
_GATED = (
    "WITH size AS MATERIALIZED (SELECT coalesce(sum(vectors), 0)"
    " + CAST(coalesce(nullif(current_setting('durastate.vec_' || CAST(CAST('{table}' AS regclass) AS oid), true),"
    " ''), '0') AS bigint) AS vectors FROM {{p}}vec_counts WHERE name = '{name}')"
    " SELECT * FROM ({select}) AS found WHERE (SELECT vectors FROM size) <= ?"
    " UNION ALL SELECT NULL, CAST({outside} AS text){nulls}, CAST(vectors AS float8) FROM size WHERE vectors > ?"
)
# In that last row (as text, in the field column): how many vectors lie outside the range, up to a cap per
# side (LIMIT ?), by the primary key (scope, ns, key, ...): the range then holds exactly the count minus
# that when it is below the cap. A search of a prefix that holds most of a big table (all items under
# ("docs",)) learns it is too big to scan without reading it. Parameters: scope, ns, the bound, the cap.
# ORDER BY the key: the primary key's order, so the plan is its index (with statistics, a generic plan
# otherwise guesses a third of the table before the bound and picks a sequential scan: 67 ms at 100,000).
_BEFORE = (
    "(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE scope = ? AND ns = ? AND key < ?"
    " ORDER BY scope, ns, key DESC LIMIT ?) AS o)"
)
_AFTER = (
    "(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE scope = ? AND ns = ? AND key >= ?"
    " ORDER BY scope, ns, key LIMIT ?) AS o)"
)
_OUTSIDE = {
    (False, False): "0",
    (True, False): _BEFORE,
    (True, True): _BEFORE + " + " + _AFTER,
    (False, True): _AFTER,
}
# The cap: at most OUTSIDE_MAX keys, and an eighth of the rows a scan may read. On a fresh table (no
# visibility map yet) each key counted fetches its heap tuple: 9,765 keys took 71 ms at load average 10,
# so the cap is small; it is paid in full by a search of a small part of a big table, then the capped scan.
OUTSIDE_MAX, OUTSIDE_SHARE = 1000, 8
# By whether the range has a lower bound, an upper bound: the WHERE clause (start, then end).
_RANGE = {
    (False, False): "",
    (True, False): " WHERE key >= ?",
    (True, True): " WHERE key >= ? AND key < ?",
    (False, True): " WHERE key < ?",
}
# The capped scan's (a part with many keys outside it: most often a small part of a big table) also names
# the table's scope and ns, which every row shares (parameters: scope, ns, then the bounds), so that it seeks
# the primary key (scope, ns, key, field); the key alone is not its prefix, and a namespace of 10,000 in
# 100,000 vectors was a sequential scan of all of them (41-55 ms of a 56-73 ms search; 22-27 by the key).
# Not the other modes: they run on ranges that may be most of the table, which a sequential scan reads
# faster than the key's order (the whole of 10,000 x 256 dims: 52 ms by the key).
_SEEK = {bounded: where.replace(" WHERE ", " WHERE scope = ? AND ns = ? AND ") for bounded, where in _RANGE.items()}
_DISTANCE = "embedding OPERATOR({op}) CAST(? AS {vector})"
# The walk orders by the distance itself (the HNSW index's order); the scan by "+ 0", which no index has.
_ORDERS = {"walk": _DISTANCE, "scan": f"({_DISTANCE}) + 0"}
# The range's vectors in distance order, then the first LIMIT (NULL: all; the walk has none: the outer
# LIMIT stops the index walk). "capped": the scan over the range's first rows (LIMIT ?), materialized
# so that a last row (key NULL) can say how many it read. Parameters: the query, the range, [the cap],
# [the first LIMIT].
_IN_ORDER = {
    "walk": "SELECT key, field, " + _ORDERS["walk"] + " AS distance FROM {table}{range} ORDER BY distance",
    "scan": "SELECT key, field, " + _ORDERS["scan"] + " AS distance FROM {table}{range} ORDER BY distance LIMIT ?",
    "capped": "SELECT key, field, distance FROM capped ORDER BY distance LIMIT ?",
}
_CAPPED = (
    "WITH capped AS MATERIALIZED (SELECT key, field, " + _ORDERS["scan"] + " AS distance FROM {table}{range} LIMIT ?) "
)
_CAPPED_COUNT = " UNION ALL SELECT NULL, NULL{nulls}, CAST(count(*) AS float8) FROM capped"
# nearest_rows: each vector with its owner's live kv row and its sibling's (LATERAL ... LIMIT 1: one
# primary-key probe per vector, only as many as the outer LIMIT pulls), the conditions on the sibling's
# value as jsonb. Parameters after the vectors': scope, owner ns, now, scope, sibling ns, now, the
# conditions', the limit.
_LIVE_ROW = (
    " CROSS JOIN LATERAL (SELECT value{doc} FROM {{p}}kv WHERE scope = ? AND ns = ? AND key = s.key"
    " AND (expires_at IS NULL OR expires_at > ?) LIMIT 1) AS {alias}"
)
# jsonb refuses the escape \u0000 (NUL) that JSON allows: it is read as \ufffd (what that does to a
# condition: _exact). Only the rows the outer LIMIT pulls are parsed.
_DOC = ", CAST(replace(convert_from(value, 'UTF8'), '\\u0000', '\\ufffd') AS jsonb) AS doc"
_AT = "(i.doc #> CAST(? AS text[]))"
_NUMBER = (
    f"(CASE jsonb_typeof({_AT}) WHEN 'number' THEN CAST({_AT} AS float8)"
    f" WHEN 'boolean' THEN CASE WHEN {_AT} = 'true'::jsonb THEN 1.0 ELSE 0.0 END END)"
)
# By (op, operand kind): a JsonCondition's SQL; its parameters are the path (once per _AT), then the
# operand (the last "?", when the operand is not None).
_CONDITION = {
    ("eq", "str"): f"{_AT} = to_jsonb(CAST(? AS text))",
    ("eq", "null"): f"({_AT} IS NULL OR {_AT} = 'null'::jsonb)",
    ("eq", "float"): f"{_NUMBER} = CAST(? AS float8)",
    ("ne", "str"): f"{_AT} IS DISTINCT FROM to_jsonb(CAST(? AS text))",
    ("ne", "null"): f"({_AT} IS NOT NULL AND {_AT} <> 'null'::jsonb)",
    **{
        (op, "float"): f"(jsonb_typeof({_AT}) = 'string' OR {_NUMBER} {sign} CAST(? AS float8))"
        for op, sign in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))
    },
}
# Each proper prefix of a condition's path must be an object (else "#>" would index an array).
_IS_OBJECT = f"jsonb_typeof({_AT}) = 'object'"
# Text that, in a path key or a str operand, makes a condition inexact once NUL is read as \ufffd.
_INEXACT = ("\x00", "\\u0000", "\ufffd", "\\ufffd")


def vector_schema(found: str | None) -> str | None:
    """The schema the ``vector`` extension is installed in, or None (not installed, or a name we cannot quote).

    ``found``: what ``EXTENSION_SCHEMA`` answered (the engine's probe asks it as a scalar subquery).
    """
    if found is None:
        return None
    schema = str(found)
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

    engine: PostgresEngine

    def __init__(self, engine: PostgresEngine, schema: str | None) -> None:
        super().__init__(engine)
        self._schema = schema
        # 0 (none) where the engine keeps no index, as the default engine.vectors says.
        self.max_dims = MAX_DIMS if schema is not None and engine.capabilities.vector_index else 0

    def _bind(self, statement: Statement, table: VectorTable) -> Statement:
        if self._schema is None or not self.engine.capabilities.vector_index:
            raise self._unsupported()
        if table.dims > MAX_DIMS:
            raise InvalidRequest(f"a pgvector HNSW index holds at most {MAX_DIMS} dims, the index has {table.dims}")
        schema = _quoted(self._schema)
        assert isinstance(statement.template, str)
        hnsw = table.hnsw or HnswParams()
        text = statement.template.format(
            table="{p}vec_" + table.name,
            vector=f"{schema}.vector",
            ops=f"{schema}.{OPCLASS[table.distance]}",
            op=f"{schema}.{OPERATOR[table.distance]}",
            dims=table.dims,
            name=table.name,
            m=hnsw.m,
            ef_construction=hnsw.ef_construction,
        )
        return Statement(statement.kind, text)

    def ensure(self, table: VectorTable) -> list[bytes]:
        engine = self.engine
        statements = [CREATE_TABLE]
        if table.hnsw is not None:
            statements.append(CREATE_INDEX if table.hnsw.default else CREATE_INDEX_WITH)
        create = [engine.sql(self._bind(s, table)) for s in statements]
        stale = engine.sql(self._bind(STALE, table))
        counted = engine.sql(self._bind(COUNTED, table))
        counting = [engine.sql(self._bind(s, table)) for s in (*COUNTING, *START_COUNTING)]
        # The migration lock: concurrent openers create the table one after the other.
        with engine._migration_lock():
            for sql in create:
                engine.execute(sql)
            if engine.one(counted) is None:  # a new table, or one from before the counts
                for sql in counting:
                    engine.execute(sql)
        rows = engine.all(stale, (table.scope, table.ns, engine.now_ms(), table.scope, table.ns))
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
        rows = self._search(table, query, (start, end), limit, None, (), limit)
        return [(bytes(row[0]), str(row[1])) for row in rows]

    def nearest_rows(
        self,
        table: VectorTable,
        query: Sequence[float],
        *,
        start: bytes,
        end: bytes | None,
        limit: int,
        sibling: bytes,
        where: Sequence[JsonCondition] = (),
    ) -> list[Neighbour]:
        if not isinstance(sibling, bytes):
            raise InvalidRequest(f"sibling must be a kv namespace (bytes), got {type(sibling).__name__}")
        conditions = tuple(c for c in where if _exact(c))
        # A filter drops rows after the scan's first LIMIT: ask it for more than the page (then, if short, all).
        first = max(4 * limit, 100) if conditions else limit
        rows = self._search(table, query, (start, end), limit, sibling, conditions, first)
        return [Neighbour(bytes(r[0]), str(r[1]), bytes(r[2]), bytes(r[3])) for r in rows]

    def _search(
        self,
        table: VectorTable,
        query: Sequence[float],
        span: tuple[bytes, bytes | None],
        limit: int,
        sibling: bytes | None,
        conditions: tuple[JsonCondition, ...],
        first: int,
    ) -> list[tuple[Any, ...]]:
        """Walk the index or scan (see SCAN_MAX_VALUES): rows (key, field, [owner, sibling,] distance).

        ``span``: the key range (start, end); ``sibling`` None: the vectors alone (``nearest``).
        """
        start, end = span
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidRequest(f"limit must be an int >= 1, got {limit!r}")
        if len(query) != table.dims:
            raise InvalidRequest(f"a query of {len(query)} dims in an index of {table.dims}")
        engine = self.engine
        text = "[" + ",".join(repr(float(x)) for x in query) + "]"
        bounded = (bool(start), end is not None)
        bounds = tuple(b for b in (start or None, end) if b is not None)
        seek = (table.scope, table.ns, *bounds) if bounds else ()  # _SEEK's parameters
        tail: tuple[Any, ...] = ()
        if sibling is not None:
            now = engine.now_ms()
            tail = (table.scope, table.ns, now, table.scope, sibling, now, *_condition_params(conditions))
        shape = None if sibling is None else tuple((c.op, _kind(c.operand), len(c.path)) for c in conditions)

        def run(mode: str, *numbers: int | None) -> list[tuple[Any, ...]]:
            # The cap and first LIMIT before the rows' parameters; the gate's bytes after the limit.
            sql = engine.sql(self._bind(_statement(mode, bounded, shape), table))
            if mode == "gated":
                outside = [p for bound in bounds for p in (table.scope, table.ns, bound, numbers[2])]
                return engine.all(sql, (text, *bounds, numbers[0], *tail, limit, numbers[1], *outside, numbers[1]))
            return engine.all(sql, (text, *(seek if mode == "capped" else bounds), *numbers, *tail, limit))

        def scan(found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
            # Short, with rows: the first LIMIT may have cut rows the laterals or conditions then dropped
            # (a filter, an expired item); every vector of the range then. Without: the range ran out.
            return found if len(found) == limit or sibling is None else run("scan", None)

        # The settings are transaction-local: a search outside one gets its own.
        outer = engine.in_transaction()
        with nullcontext() if outer else engine.read_transaction():
            scan_max = SCAN_MAX_VALUES // table.dims
            if table.hnsw is None:
                return scan(run("scan", first))
            # The scan, unless the table holds more than scan_max vectors (then a last row, key NULL).
            outside_max = max(1, min(OUTSIDE_MAX, scan_max // OUTSIDE_SHARE))
            found = run("gated", first, scan_max, outside_max)
            if not found or found[-1][0] is not None:
                return scan(found)
            total, outside = int(found[-1][-1]), int(found[-1][1])
            if outside < outside_max:  # so each side is below its cap: the range holds total - outside
                if total - outside <= scan_max:
                    return scan(run("scan", first))
            else:  # a part of a big table, maybe small: the scan of its first rows says (and is the answer)
                found = run("capped", scan_max + 1, first)
                if found and found[-1][0] is None and int(found[-1][-1]) <= scan_max:
                    return scan(found[:-1])
            settings = engine.one(engine.sql(self._bind(SEARCH_SETTINGS, table)), (str(self._ef_search(limit)),))
            found = run("walk")
            if len(found) == limit and not outer:
                return found  # the settings end with the search's own transaction
            assert settings is not None
            engine.send(engine.sql(self._bind(RESTORE_SORT, table)), (settings[0],))
            return found if len(found) == limit else run("scan", None)

    @staticmethod
    def _ef_search(limit: int) -> int:
        return max(EF_SEARCH_MIN, min(EF_SEARCH_MAX, limit))


def _condition_params(conditions: Sequence[JsonCondition]) -> list[Any]:
    """The parameters of the conditions' SQL (``_statement``): each prefix of the path, the path, the operand."""
    params: list[Any] = []
    for condition in conditions:
        path = list(condition.path)
        params += [path[:depth] for depth in range(1, len(path))]
        sql = _CONDITION[condition.op, _kind(condition.operand)]
        params += [path] * (sql.count("?") - (condition.operand is not None))
        if condition.operand is not None:
            params.append(condition.operand)
    return params


def _kind(operand: str | float | None) -> str:
    return "null" if operand is None else "str" if isinstance(operand, str) else "float"


def _exact(condition: JsonCondition) -> bool:
    """Whether the SQL evaluates ``condition`` as specified (else it is left out: rows it rejects pass)."""
    texts = [*condition.path, condition.operand] if isinstance(condition.operand, str) else condition.path
    return not any(bad in text for text in texts for bad in _INEXACT)


@functools.lru_cache(maxsize=256)
def _statement(mode: str, bounded: tuple[bool, bool], shape: tuple[tuple[str, str, int], ...] | None) -> Statement:
    """A search's statement: ``mode`` (walk, scan, gated, capped), a range, and without rows (``shape`` None) or
    with the owner's and sibling's rows and conditions of that shape."""
    where_range = _RANGE[bounded]
    inner = _IN_ORDER["scan" if mode == "gated" else mode].replace("{range}", where_range)
    if shape is None:
        select = "SELECT s.key, s.field, s.distance FROM (" + inner + ") AS s ORDER BY s.distance LIMIT ?"
    else:
        owner = _LIVE_ROW.replace("{doc}", "").replace("{alias}", "o")
        sibling = _LIVE_ROW.replace("{doc}", _DOC if shape else "").replace("{alias}", "i")
        tests = []
        for op, kind, depth in shape:
            tests += [_IS_OBJECT] * (depth - 1) + [_CONDITION[op, kind]]
        where = " WHERE " + " AND ".join(tests) if tests else ""
        select = (
            "SELECT s.key, s.field, o.value, i.value, s.distance FROM ("
            + inner
            + ") AS s"
            + owner
            + sibling
            + where
            + " ORDER BY s.distance LIMIT ?"
        )
    nulls = "" if shape is None else ", NULL, NULL"
    if mode == "gated":
        return READ(
            _GATED.replace("{select}", select).replace("{nulls}", nulls).replace("{outside}", _OUTSIDE[bounded])
        )
    if mode != "capped":
        return READ(select)
    count = _CAPPED_COUNT.replace("{nulls}", nulls)
    return READ(_CAPPED.replace("{range}", _SEEK[bounded]) + "SELECT * FROM (" + select + ") AS found" + count)
