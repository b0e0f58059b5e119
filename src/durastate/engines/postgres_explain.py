"""``PostgresEngine.explain``: a statement's generic plan, read into ``Plan`` steps.

The plan checks of the conformance suite (``durastate.testing.conformance.plans``)
ask whether a statement searches an index; this module gets the plan the
server would use for any parameter values and reduces its tree to the
table reads (``PlanStep``) and whether it sorts.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from .base import Params, Plan, PlanStep
from .postgres_dialect import numbered

__all__ = ["explain_plan"]


def explain_plan(conn: psycopg.Connection[Any], sql: str, params: Params, *, in_transaction: bool) -> Plan:
    """The generic plan of ``sql`` on ``conn``, never running it (``psycopg.Error`` on failure).

    PostgreSQL 16+: ``EXPLAIN (GENERIC_PLAN)``. Older servers: the
    statement is prepared with ``plan_cache_mode = force_generic_plan``
    and its ``EXECUTE`` explained. All inside a transaction (or, when
    ``in_transaction``, a savepoint of the caller's) that is rolled back.
    """
    own = not in_transaction
    text_numbered = numbered(sql)
    conn.execute("BEGIN" if own else "SAVEPOINT ds_explain")
    try:
        conn.execute("SET LOCAL enable_seqscan = off")
        if conn.info.server_version >= 160000:
            text = "EXPLAIN (GENERIC_PLAN, FORMAT JSON) " + text_numbered
            row = conn.execute(text.replace("%", "%%")).fetchone()
        else:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            # Typed like psycopg binds them, so the plan is the one the statement gets.
            types = f" ({', '.join(_parameter_type(v) for v in params)})" if params else ""
            conn.execute(f"PREPARE ds_explain{types} AS {text_numbered}".replace("%", "%%"))
            placeholders = ", ".join(["%s"] * len(params))
            execute = (
                f"EXPLAIN (FORMAT JSON) EXECUTE ds_explain({placeholders})"
                if params
                else ("EXPLAIN (FORMAT JSON) EXECUTE ds_explain")
            )
            # EXECUTE takes no bound parameters: quote them client-side.
            with psycopg.ClientCursor(conn) as cursor:
                row = cursor.execute(execute, tuple(params)).fetchone()
            conn.execute("DEALLOCATE ds_explain")
    finally:
        conn.execute("ROLLBACK" if own else "ROLLBACK TO SAVEPOINT ds_explain")
    assert row is not None
    document = row[0]
    tree = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    steps: list[PlanStep] = []
    sorts = _plan_steps(tree, steps)
    return Plan(tuple(steps), sorts, json.dumps(tree, indent=1))


def _parameter_type(value: Any) -> str:
    """The server type psycopg sends ``value`` as (near enough for planning)."""
    if isinstance(value, (list, tuple)):
        return (_parameter_type(value[0]) if value else "text") + "[]"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytea"
    if value is None:
        return "unknown"
    return "text"


def _plan_steps(node: dict[str, Any], steps: list[PlanStep]) -> bool:
    """Collect the table reads of an EXPLAIN (FORMAT JSON) tree; True if it sorts."""
    kind = node.get("Node Type", "")
    sorts = kind in ("Sort", "Incremental Sort")
    relation = node.get("Relation Name")
    if relation and kind != "ModifyTable":
        index = node.get("Index Name")
        condition = node.get("Index Cond", "")
        if kind == "Tid Scan":  # a direct fetch of the rows by tuple id
            index, condition = "ctid", node.get("TID Cond", "")
        if kind == "Bitmap Heap Scan":
            children = node.get("Plans", [])
            index = ",".join(c.get("Index Name", "") for c in children) or None
            condition = node.get("Recheck Cond", "")
        detail = f"{kind} on {relation}" + (f" using {index}" if index else "")
        steps.append(PlanStep(node.get("Alias", relation), index, condition, node.get("Filter", ""), detail))
        if node.get("Alias") not in (None, relation):
            steps.append(PlanStep(relation, index, condition, node.get("Filter", ""), detail))
    for child in node.get("Plans", []):
        sorts = _plan_steps(child, steps) or sorts
    return sorts
