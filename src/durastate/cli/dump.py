"""Portable, versioned JSON-lines dumps of a whole store (``export``/``import``).

Why table rows and not facet calls: an import must reproduce every facet's
state exactly (kv log ordinals, document revisions, queue attempts, leases
and dead letters, event attempt numbers and claims, record commit
sequences), and no facet's public API can write those verbatim. So the dump
carries every row of every facet table (the tables the facets' ``SCHEMA``
declare; both engines have the same columns under the same names) plus the
store's sequences, and ``import`` writes them back in one transaction into
an empty store of either engine. That is the documented restore path.

Format (version 1), one JSON object a line, UTF-8:

1. ``{"format": "durastate-export", "version": 1, "engine", "prefix",
   "schema": {facet: version}, "exported_at_ms"}``;
2. per table, ``{"table": name, "columns": [...], "rows": n}`` then ``n``
   lines ``{"r": {column: value}}``; bytes are ``{"$b": base64}``, text a
   string, integers numbers, NULL null;
3. ``{"sequences": {name: value}}``: ``kv_log`` (the last log ordinal ever
   handed out), ``records`` (commit sequence) and ``records_id`` (mint_id);
4. ``{"end": {"rows": total}}``: a file without it is truncated and refused.

The export is one read snapshot (``read_transaction``) and streams each
table by primary key, ``PAGE_ROWS`` rows a statement, so memory stays flat.
A dump's schema versions must equal the importing code's (``import`` of a
dump from another durastate version is refused; upgrade both sides).
Not carried: PostgreSQL's ``attempt`` rows (retry bookkeeping of in-flight
calls, pruned after an hour) and queue id counters above the largest stored
id (a new push on the imported store gets the next id after it).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

import durastate
from durastate.engines.base import READ, SQL, WRITE, WRITE_ROWS, Engine, Kind, Statement
from durastate.errors import InvalidRequest
from durastate.store import SCHEMAS

FORMAT = "durastate-export"
VERSION = 1
PAGE_ROWS = 1000

# Core tables that are not facet data: the schema versions (written by
# migrate), retry bookkeeping (PostgreSQL), the sequences (own section).
_NOT_DUMPED = {"schema", "attempt", "sequence"}
_TABLE_RE = re.compile(r"CREATE TABLE \{p\}(\w+) \(")

# -- catalog statements (read-only) --------------------------------------------

TABLE_COLUMNS = READ(
    {
        "sqlite": "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid",
        "postgresql": (
            "SELECT a.attname, COALESCE((SELECT k.n FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)"
            " WHERE k.attnum = a.attnum), 0)"
            " FROM pg_catalog.pg_attribute a"
            " LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary"
            " WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
        ),
    }
)
READ_SEQUENCES = READ("SELECT name, value FROM {p}sequence")
# SQLite hands out kv log ordinals by AUTOINCREMENT, kept in sqlite_sequence.
SQLITE_AUTOINCREMENT = READ("SELECT seq FROM sqlite_sequence WHERE name = ?")
SET_SQLITE_AUTOINCREMENT = WRITE("UPDATE sqlite_sequence SET seq = ? WHERE name = ?")
ADD_SQLITE_AUTOINCREMENT = WRITE("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)")
SET_SEQUENCE = WRITE("UPDATE {p}sequence SET value = ? WHERE name = ?")
# PostgreSQL identity columns (queue ids) continue after the imported rows.
RESET_IDENTITY = "SELECT setval(pg_get_serial_sequence(?, 'id'), COALESCE(MAX(id), 0) + 1, false) FROM {p}{table}"
IDENTITY_TABLES = ("queue", "queue_dead")


def facet_tables() -> list[str]:
    """Every facet table name (without prefix), in schema order, from the facets' SCHEMA."""
    names: list[str] = []
    for schema in SCHEMAS:
        for migration in schema.migrations:
            texts = list(migration.statements) + [t for d in migration.per_dialect.values() for t in d]
            for text in texts:
                m = _TABLE_RE.match(text)
                if m and m.group(1) not in _NOT_DUMPED and m.group(1) not in names:
                    names.append(m.group(1))
    return names


@dataclass(frozen=True)
class TableShape:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # primary key columns, in key order


def table_shape(engine: Engine, table: str) -> TableShape:
    rows = engine.all(engine.sql(TABLE_COLUMNS), (engine.prefix + table,))
    if not rows:
        raise InvalidRequest(f"table {engine.prefix}{table} not found")
    columns = tuple(str(r[0]) for r in rows)
    key = tuple(str(name) for name, pos in sorted((r for r in rows if r[1]), key=lambda r: int(r[1])))
    if not key:
        raise InvalidRequest(f"table {engine.prefix}{table} has no primary key; cannot page it")
    return TableShape(table, columns, key)


def _page_sql(shape: TableShape, after: bool) -> Statement:
    cols = ", ".join(shape.columns)
    order = ", ".join(shape.key)
    where = ""
    if after:
        where = f" WHERE ({order}) > ({', '.join('?' * len(shape.key))})"
    return READ(f"SELECT {cols} FROM {{p}}{shape.name}{where} ORDER BY {order} LIMIT ?")


def iter_rows(engine: Engine, shape: TableShape) -> Iterator[dict[str, Any]]:
    """Every row of the table by primary key, ``PAGE_ROWS`` per statement."""
    first, more = engine.sql(_page_sql(shape, False)), engine.sql(_page_sql(shape, True))
    key_at = [shape.columns.index(k) for k in shape.key]
    last: tuple[Any, ...] | None = None
    while True:
        rows = engine.all(first, (PAGE_ROWS,)) if last is None else engine.all(more, (*last, PAGE_ROWS))
        for r in rows:
            yield dict(zip(shape.columns, r, strict=True))
        if len(rows) < PAGE_ROWS:
            return
        last = tuple(rows[-1][i] for i in key_at)


def count_rows(engine: Engine, table: str) -> int:
    row = engine.one(engine.sql(READ(f"SELECT COUNT(*) FROM {{p}}{table}")))
    return 0 if row is None else int(row[0])


def sequences(engine: Engine) -> dict[str, int]:
    """The store's sequences under engine-neutral names."""
    values = {str(n): int(v) for n, v in engine.all(engine.sql(READ_SEQUENCES))}
    if engine.dialect.name == "sqlite":
        row = engine.one(engine.sql(SQLITE_AUTOINCREMENT), (engine.prefix + "kv_log",))
        values["kv_log"] = 0 if row is None else int(row[0])
    return values


def _encode(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return base64.b64decode(value["$b"])
    return value


Tick = Callable[[int, int], None]  # (rows, bytes) done since the last call


def export_store(store: durastate.Store, out: IO[bytes], tick: Tick | None = None) -> dict[str, int]:
    """Write the whole store to ``out``; return rows per table."""
    engine = store.engine
    counts: dict[str, int] = {}

    def line(obj: Any) -> int:
        data = orjson.dumps(obj) + b"\n"
        out.write(data)
        return len(data)

    with engine.read_transaction():
        versions = _schema_versions()
        line(
            {
                "format": FORMAT,
                "version": VERSION,
                "engine": engine.dialect.name,
                "prefix": engine.prefix,
                "schema": versions,
                "exported_at_ms": engine.now_ms(),
            }
        )
        for table in facet_tables():
            shape = table_shape(engine, table)
            n = count_rows(engine, table)  # same snapshot as the rows
            line({"table": table, "columns": list(shape.columns), "rows": n})
            written = 0
            for row in iter_rows(engine, shape):
                size = line({"r": {k: _encode(v) for k, v in row.items()}})
                written += 1
                if tick is not None:
                    tick(1, size)
            counts[table] = written
        line({"sequences": sequences(engine)})
    line({"end": {"rows": sum(counts.values())}})
    return counts


def total_rows(store: durastate.Store) -> int:
    engine = store.engine
    return sum(count_rows(engine, t) for t in facet_tables())


def _schema_versions() -> dict[str, int]:
    return {s.facet: s.version for s in SCHEMAS}


def is_empty(store: durastate.Store) -> bool:
    engine = store.engine
    if any(count_rows(engine, t) for t in facet_tables()):
        return False
    return not any(sequences(engine).values())


def _lines(source: IO[bytes]) -> Iterator[tuple[dict[str, Any], int]]:
    """Each JSON object of the dump and the bytes its line took."""
    for number, raw in enumerate(source, 1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest(f"line {number} is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InvalidRequest(f"line {number} is not a JSON object")
        yield obj, len(raw)


def import_store(store: durastate.Store, source: IO[bytes], tick: Tick | None = None) -> dict[str, int]:
    """Load a dump into an empty store in one transaction; return rows per table.

    Refused (``InvalidRequest``, nothing written): a store that is not empty,
    a file that is not a dump, of another format version or schema, with an
    unknown table or column, or truncated (no ``end`` line, or row counts
    that do not match the table headers).
    """
    engine = store.engine
    lines = _lines(source)
    header = next(lines, ({}, 0))[0]
    if header.get("format") != FORMAT:
        raise InvalidRequest('not a durastate export (the first line has no "format": "durastate-export")')
    if header.get("version") != VERSION:
        raise InvalidRequest(f"export format version {header.get('version')!r}; this durastate reads {VERSION}")
    if header.get("schema") != _schema_versions():
        raise InvalidRequest(
            f"the export's schema versions {header.get('schema')} differ from this durastate's "
            f"{_schema_versions()}: import with the durastate version that exported it"
        )
    known = set(facet_tables())
    counts: dict[str, int] = {}
    with engine.transaction():
        if not is_empty(store):
            raise InvalidRequest(f"{store.url} is not empty: import only into a new store")
        shape: TableShape | None = None
        insert = SQL("", Kind.WRITE)
        expected = 0
        batch: list[list[Any]] = []
        ended = False

        def flush() -> None:
            if batch:
                engine.executemany(insert, batch)
                batch.clear()

        for obj, size in lines:
            if ended:
                raise InvalidRequest("data after the end line")
            if "r" in obj:
                if shape is None:
                    raise InvalidRequest("a row before any table header")
                row = obj["r"]
                if set(row) != set(shape.columns):
                    raise InvalidRequest(
                        f"a {shape.name} row has columns {sorted(row)}, expected {list(shape.columns)}"
                    )
                batch.append([_decode(row[c]) for c in shape.columns])
                counts[shape.name] += 1
                if len(batch) >= PAGE_ROWS:
                    flush()
                if tick is not None:
                    tick(1, size)
            elif "table" in obj:
                flush()
                if shape is not None and counts[shape.name] != expected:
                    raise InvalidRequest(f"table {shape.name}: {counts[shape.name]} rows, header said {expected}")
                name = obj["table"]
                if name not in known or name in counts:
                    raise InvalidRequest(f"unknown or repeated table {name!r} in the export")
                stored = table_shape(engine, name)
                columns = tuple(str(c) for c in obj.get("columns", ()))
                if set(columns) != set(stored.columns) or len(columns) != len(stored.columns):
                    raise InvalidRequest(
                        f"table {name}: the export has columns {sorted(columns)}, this store {sorted(stored.columns)}"
                    )
                shape = TableShape(name, columns, stored.key)  # the export's column order
                expected = int(obj.get("rows", -1))
                counts[name] = 0
                placeholders = ", ".join("?" * len(shape.columns))
                insert = engine.sql(
                    WRITE(f"INSERT INTO {{p}}{name} ({', '.join(shape.columns)}) VALUES ({placeholders})")
                )
            elif "sequences" in obj:
                flush()
                if shape is not None and counts[shape.name] != expected:
                    raise InvalidRequest(f"table {shape.name}: {counts[shape.name]} rows, header said {expected}")
                shape = None
                _restore_sequences(engine, obj["sequences"])
            elif "end" in obj:
                if int(obj["end"].get("rows", -1)) != sum(counts.values()):
                    raise InvalidRequest("the end line's row count does not match the rows read")
                ended = True
            else:
                raise InvalidRequest(f"unexpected line {sorted(obj)}")
        if not ended:
            raise InvalidRequest("the export is truncated (no end line): nothing was imported")
        if engine.dialect.name == "postgresql":
            for table in IDENTITY_TABLES:
                engine.one(engine.sql(WRITE_ROWS(RESET_IDENTITY.replace("{table}", table))), (engine.prefix + table,))
    return counts


def _restore_sequences(engine: Engine, values: dict[str, Any]) -> None:
    for name, value in values.items():
        value = int(value)
        if name == "kv_log" and engine.dialect.name == "sqlite":
            table = engine.prefix + "kv_log"
            if not engine.execute(engine.sql(SET_SQLITE_AUTOINCREMENT), (value, table)) and value:
                engine.execute(engine.sql(ADD_SQLITE_AUTOINCREMENT), (table, value))
        elif not engine.execute(engine.sql(SET_SEQUENCE), (value, name)) and value:
            raise InvalidRequest(f"unknown sequence {name!r} in the export")


def table_rows(store: durastate.Store) -> Iterable[tuple[str, int]]:
    engine = store.engine
    return [(t, count_rows(engine, t)) for t in facet_tables()]
