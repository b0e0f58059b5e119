"""``PostgresTools``: the operators' questions (``engines.tools``) answered from PostgreSQL's catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidRequest
from .postgres_health import failover_facts
from .statements import READ, WRITE_ROWS
from .tools import EngineTools, Health, TableShape, shape_from_catalog

if TYPE_CHECKING:
    from .postgres import PostgresEngine

__all__ = ["PostgresTools"]

TABLE_COLUMNS = READ(
    "SELECT a.attname, COALESCE((SELECT k.n FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)"
    " WHERE k.attnum = a.attnum), 0)"
    " FROM pg_catalog.pg_attribute a"
    " LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary"
    " WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)
TABLE_BYTES = READ("SELECT pg_total_relation_size(to_regclass(?))")
# The planner's estimate: -1 (PostgreSQL 14+) until the table is first analyzed.
ESTIMATE = READ("SELECT reltuples FROM pg_catalog.pg_class WHERE oid = to_regclass(?)")
SERVER = READ("SELECT current_setting('server_version'), current_schema(), pg_database_size(current_database())")
ATTEMPT_ROWS = READ("SELECT COUNT(*) FROM {p}attempt")
# Identity columns (queue ids) continue after the imported rows; tables without one are skipped.
# A write (setval), per table: ``{table}`` is filled in before compiling.
RESET_IDENTITY = (
    "SELECT setval(s, (SELECT COALESCE(MAX(id), 0) + 1 FROM {p}{table}), false)"
    " FROM pg_get_serial_sequence(?, 'id') AS s WHERE s IS NOT NULL"
)
HAS_ID_COLUMN = READ(
    "SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass(?) AND attname = 'id' AND NOT attisdropped"
)
ATTEMPT_WARN_ROWS = 100_000


class PostgresTools(EngineTools):
    """PostgreSQL visits every row version to count, so counts are exact up to 10,000 rows, then estimated."""

    count_cap = 10_000
    engine: PostgresEngine

    def table_shape(self, table: str) -> TableShape:
        rows = self.engine.all(self.engine.sql(TABLE_COLUMNS), (self.engine.prefix + table,))
        return shape_from_catalog(self.engine.prefix, table, [(str(r[0]), int(r[1])) for r in rows])

    def estimate_rows(self, table: str) -> int | None:
        row = self.engine.one(self.engine.sql(ESTIMATE), (self.engine.prefix + table,))
        return None if row is None or row[0] is None or float(row[0]) < 0 else int(row[0])

    def stored_bytes(self, table: str) -> int | None:
        row = self.engine.one(self.engine.sql(TABLE_BYTES), (self.engine.prefix + table,))
        return None if row is None or row[0] is None else int(row[0])

    def health(self, *, check: str = "quick") -> Health:
        if check not in ("quick", "full", "none"):
            raise InvalidRequest(f"check must be 'quick', 'full' or 'none', got {check!r}")
        engine = self.engine
        h = Health()
        row = engine.one(engine.sql(SERVER))
        assert row is not None
        h.facts["server_version"], h.facts["schema_name"], h.facts["database_bytes"] = row[0], row[1], int(row[2])
        attempts = engine.one(engine.sql(ATTEMPT_ROWS))
        h.facts["attempt_rows"] = 0 if attempts is None else int(attempts[0])
        if h.facts["attempt_rows"] > ATTEMPT_WARN_ROWS:
            h.warnings.append(
                f"the attempt table holds {h.facts['attempt_rows']:,} rows; the engine prunes rows older than an "
                "hour as it writes, so this means a very high write rate or a stopped clock"
            )
        h.facts["integrity"] = "ok (the server checks its own pages)"
        # What a failover can lose: replication, recovery, a pooler (engines.postgres_health).
        facts, warnings = failover_facts(engine)
        h.facts.update(facts)
        h.warnings.extend(warnings)
        return h

    def after_import(self, tables: tuple[str, ...]) -> None:
        engine = self.engine
        for table in tables:
            name = engine.prefix + table
            if engine.one(engine.sql(HAS_ID_COLUMN), (name,)) is not None:
                engine.all(engine.sql(WRITE_ROWS(RESET_IDENTITY.replace("{table}", table))), (name,))
