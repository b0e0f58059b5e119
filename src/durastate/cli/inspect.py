"""What ``info``, ``doctor``, ``stats`` and the inspector's overview report.

Read-only engine queries (catalog, pragmas, sizes, counts); nothing here
writes. SQLite facts come from pragmas of the store's own connection,
PostgreSQL facts from the catalog of the store's schema.
"""

from __future__ import annotations

from typing import Any

import durastate
from durastate.engines.base import READ
from durastate.engines.tools import Health
from durastate.facets import FACETS

from ._common import redact
from .dump import facet_tables

# Facet of each table (the table names' stems), from the facet registry.
FACET_OF = {table: facet.name for facet in FACETS for table in facet.tables}

# Top groups per facet for ``stats``: (label, table, group expression, bytes expression).
GROUPS = {
    "kv scopes": ("kv", "scope", "length(value)"),
    "queues": ("queue", "queue", "length(payload)"),
    "dead letters": ("queue_dead", "queue", "length(payload)"),
    "event sessions": ("event", "session_id", "length(payload)"),
    "presence namespaces": ("presence", "ns", "length(value)"),
}


def facet_of(table: str) -> str:
    return FACET_OF.get(table, table)


def health(store: durastate.Store, *, check: str = "quick") -> Health:
    """The store's facts (engine, URL, prefix, versions), the engine's own (``engine.tools.health``), warnings.

    ``check``: ``"quick"``, ``"full"`` or ``"none"``; what each checks is the
    engine's (SQLite's ``quick_check`` and ``integrity_check`` read the whole file).
    """
    engine = store.engine
    h = Health()
    h.facts["engine"] = engine.dialect.name
    h.facts["url"] = redact(store.url)
    h.facts["prefix"] = engine.prefix
    h.facts["durastate"] = durastate.__version__ if hasattr(durastate, "__version__") else "?"
    h.facts["schema"] = dict(sorted(engine.schema_versions().items()))
    own = engine.tools.health(check=check)
    h.facts.update(own.facts)
    h.warnings.extend(own.warnings)
    h.problems.extend(own.problems)
    return h


def table_stats(store: durastate.Store, *, scan: bool = True) -> list[dict[str, Any]]:
    """Rows and bytes per facet table of the store.

    ``scan=True`` (``durastate stats``): exact counts, and data lengths where
    the engine cannot size a table otherwise. ``scan=False`` (the inspector's
    overview): bounded work per table, counts exact up to the engine's
    ``tools.count_cap`` (``"exact": False`` marks an estimate or a lower bound).
    """
    tools = store.engine.tools
    stats = []
    for t in facet_tables(store):
        rows, exact = (tools.count_rows(t), True) if scan else tools.bounded_count(t)
        stats.append(
            {"facet": facet_of(t), "table": t, "rows": rows, "exact": exact, "bytes": tools.table_bytes(t, scan=scan)}
        )
    return stats


def facet_stats(tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
    facets: dict[str, dict[str, Any]] = {}
    for t in tables:
        f = facets.setdefault(t["facet"], {"facet": t["facet"], "rows": 0, "exact": True, "bytes": 0})
        f["rows"] += t["rows"]
        f["exact"] = f["exact"] and t["exact"]
        f["bytes"] = None if t["bytes"] is None or f["bytes"] is None else f["bytes"] + t["bytes"]
    return list(facets.values())


def top_groups(store: durastate.Store, limit: int = 10) -> dict[str, list[dict[str, Any]]]:
    """The largest scopes / queues / sessions / namespaces by rows (one GROUP BY each)."""
    engine = store.engine
    out: dict[str, list[dict[str, Any]]] = {}
    for label, (table, column, size) in GROUPS.items():
        sql = engine.sql(
            READ(
                f"SELECT {column}, COUNT(*), COALESCE(SUM({size}), 0) FROM {{p}}{table}"
                f" GROUP BY {column} ORDER BY COUNT(*) DESC, {column} LIMIT ?"
            )
        )
        out[label] = [{"name": r[0], "rows": int(r[1]), "bytes": int(r[2])} for r in engine.all(sql, (limit,))]
    docs = engine.sql(READ("SELECT key, length(payload) FROM {p}documents ORDER BY key"))
    prefixes: dict[str, list[int]] = {}
    for key, size in engine.all(docs):
        head = str(key).split("/", 1)[0] + ("/" if "/" in str(key) else "")
        slot = prefixes.setdefault(head, [0, 0])
        slot[0] += 1
        slot[1] += int(size)
    ranked = sorted(prefixes.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
    out["document prefixes"] = [{"name": k, "rows": v[0], "bytes": v[1]} for k, v in ranked]
    return out
