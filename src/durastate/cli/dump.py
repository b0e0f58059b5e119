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
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson

import durastate
from durastate.engines.base import READ, SQL, WRITE, Engine, Kind, Statement
from durastate.engines.tools import TableShape
from durastate.errors import InvalidRequest
from durastate.facets import FACETS

FORMAT = "durastate-export"
VERSION = 1
PAGE_ROWS = 1000


def facet_tables(store: durastate.Store) -> list[str]:
    """The tables (without prefix) of the store's facets, in registry order (``durastate.facets``)."""
    return [table for facet in FACETS if facet.name in store.facets for table in facet.tables]


def table_shape(engine: Engine, table: str) -> TableShape:
    """The table's columns and primary key, from the engine's catalog (``engine.tools``)."""
    return engine.tools.table_shape(table)


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
    return engine.tools.count_rows(table)


def sequences(engine: Engine) -> dict[str, int]:
    """The store's sequences under engine-neutral names (``engine.tools.sequences``)."""
    return engine.tools.sequences()


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
        versions = _schema_versions(store)
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
        for table in facet_tables(store):
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
    return sum(count_rows(engine, t) for t in facet_tables(store))


def _schema_versions(store: durastate.Store) -> dict[str, int]:
    """The schema version of each of the store's facets (a dump is read back only by the same versions)."""
    return {facet.schema.facet: facet.schema.version for facet in FACETS if facet.name in store.facets}


def is_empty(store: durastate.Store) -> bool:
    engine = store.engine
    if any(count_rows(engine, t) for t in facet_tables(store)):
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
    versions = _schema_versions(store)
    if header.get("schema") != versions:
        raise InvalidRequest(
            f"the export's schema versions {header.get('schema')} differ from this store's {versions}: "
            "import with the durastate version that exported it, into a store of the same facets"
        )
    known = set(facet_tables(store))
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
                engine.tools.restore_sequences(_sequence_values(obj["sequences"]))
            elif "end" in obj:
                if int(obj["end"].get("rows", -1)) != sum(counts.values()):
                    raise InvalidRequest("the end line's row count does not match the rows read")
                ended = True
            else:
                raise InvalidRequest(f"unexpected line {sorted(obj)}")
        if not ended:
            raise InvalidRequest("the export is truncated (no end line): nothing was imported")
        engine.tools.after_import(tuple(counts))
    return counts


def _sequence_values(values: Any) -> dict[str, int]:
    if not isinstance(values, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values.values()
    ):
        raise InvalidRequest(f"the sequences line must map names to counts >= 0, got {values!r:.200}")
    return {str(name): value for name, value in values.items()}


def table_rows(store: durastate.Store) -> Iterable[tuple[str, int]]:
    engine = store.engine
    return [(t, count_rows(engine, t)) for t in facet_tables(store)]
