"""The SQL of the Citus mode: the one statement shape Citus cannot plan, and the logical shards' catalog.

``citus_statement``: Citus refuses a subquery inside ``INSERT ... VALUES``
("subqueries are not supported within INSERT queries"). Written
``INSERT ... SELECT <values>`` (no FROM) Citus plans it "pull to
coordinator", and there (13.2.2) a subquery comparing a column with a NULL
parameter made the whole insert silently insert nothing. So the one-row
insert becomes ``INSERT ... SELECT <values> FROM {p}schema WHERE facet =
'core'``: a table of the same schema that always holds exactly that one
row (the engine's own schema version, written by every migration), so
Citus routes the statement whole to the schema's node, where PostgreSQL
runs it as it is. The facets write one text for every engine; this rewrite
is the engine's, done once when a statement is compiled, and only for
statements of that exact shape.

The logical shards (``durastate.citus``): one schema each, created once on
the coordinator, their count recorded in ``{p}logical_shards`` in the
coordinator's own schema (a plain local table), under an advisory lock so
concurrent first openers create them once.
"""

from __future__ import annotations

import re

__all__ = [
    "CITUS_INSTALLED",
    "CREATE_SHARD_TABLE",
    "DISTRIBUTED_SCHEMAS",
    "HAS_2PC_LOG",
    "PENDING_2PC",
    "READ_SHARD_COUNT",
    "RECORD_SHARD_COUNT",
    "SHARDS_LOCK",
    "citus_statement",
    "create_schema",
]

_VALUES = re.compile(r"\sVALUES\s*\(", re.IGNORECASE)
_AFTER_VALUES = re.compile(r"\s*($|ON\s+CONFLICT\b|RETURNING\b)", re.IGNORECASE)
_SUBQUERY = re.compile(r"\(\s*SELECT\b|\bEXISTS\s*\(", re.IGNORECASE)


def _closing_paren(text: str, start: int) -> int | None:
    """Index of the ``)`` closing the ``(`` before ``start``; quotes respected; None if unbalanced."""
    depth = 1
    i = start
    while i < len(text):
        c = text[i]
        if c == "'":
            end = text.find("'", i + 1)
            while end != -1 and text[end + 1 : end + 2] == "'":  # '' inside a literal
                end = text.find("'", end + 2)
            if end == -1:
                return None
            i = end
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def citus_statement(text: str, prefix: str) -> str:
    """``text``, or its one-row ``INSERT ... VALUES`` with a subquery as ``INSERT ... SELECT`` (see above).

    ``prefix``: what ``{p}`` became in ``text`` (the table names).

    Anything else (no subquery in the values, several rows, not an
    ``INSERT``) is returned unchanged.
    """
    if not text.lstrip().upper().startswith("INSERT"):
        return text
    match = _VALUES.search(text)
    if match is None:
        return text
    end = _closing_paren(text, match.end())
    if end is None:
        return text
    values = text[match.end() : end]
    rest = text[end + 1 :]
    if _SUBQUERY.search(values) is None or _AFTER_VALUES.match(rest) is None:
        return text
    return f"{text[: match.start()]} SELECT {values} FROM {prefix}schema WHERE facet = 'core'{rest}"


# -- the logical shards -------------------------------------------------------------

# Whether the server is a Citus node (no row: plain PostgreSQL, where the
# logical shards are plain schemas of one server).
CITUS_INSTALLED = "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus'"
# A lost COMMIT (postgres_transaction, "Citus"): whether the coordinator keeps a
# two-phase commit log, and whether it holds a committed two-phase commit begun
# by backend %s that 2PC recovery has not settled yet (one row per prepared
# worker part; gid citus_<group>_<initiator pid>_<transaction>_<connection>).
HAS_2PC_LOG = "SELECT to_regclass('pg_catalog.pg_dist_transaction') IS NOT NULL"
PENDING_2PC = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_transaction WHERE gid ~ ('^citus_[0-9]+_' || %s || '_'))"
# First openers wait for each other (coordinator-local, like every advisory lock on Citus).
SHARDS_LOCK = "SELECT pg_advisory_xact_lock(hashtext('durastate-logical-shards:' || current_schema() || %s))"
CREATE_SHARD_TABLE = (
    "CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " shards INTEGER NOT NULL, created_at BIGINT NOT NULL)"
)
READ_SHARD_COUNT = "SELECT shards FROM {table} WHERE id = 1"
RECORD_SHARD_COUNT = "INSERT INTO {table} (id, shards, created_at) VALUES (1, %s, %s)"
DISTRIBUTED_SCHEMAS = "SELECT schema_name::text FROM citus_schemas WHERE schema_name::text = ANY(%s)"


def create_schema(schema: str) -> tuple[str, ...]:
    """Statements that create ``schema`` as a Citus distributed schema (a plain one without Citus).

    ``SET LOCAL`` of the setting: a plain server accepts it as a custom
    setting and ignores it.
    """
    return ("SET LOCAL citus.enable_schema_based_sharding = on", f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
