"""What ``info``, ``doctor``, ``stats`` and the inspector's overview report.

Read-only engine queries (catalog, pragmas, sizes, counts); nothing here
writes. SQLite facts come from pragmas of the store's own connection,
PostgreSQL facts from the catalog of the store's schema.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import durastate
from durastate.engines.base import READ, Engine
from durastate.engines.postgres_health import failover_facts
from durastate.facets import FACETS
from durastate.store import SCHEMAS

from ._common import redact
from .dump import count_rows, facet_tables, table_shape

# Facet of each table (the table names' stems), from the facet registry.
FACET_OF = {table: facet.name for facet in FACETS for table in facet.tables}

READ_SCHEMA_VERSIONS = READ("SELECT facet, version FROM {p}schema ORDER BY facet")
SQLITE_PRAGMAS = ("page_size", "page_count", "freelist_count", "journal_mode", "synchronous", "auto_vacuum")
SQLITE_TABLE_BYTES = READ("SELECT SUM(pgsize) FROM dbstat WHERE name = ? OR tbl_name = ?")
SQLITE_QUICK_CHECK = READ("PRAGMA quick_check")
SQLITE_INTEGRITY_CHECK = READ("PRAGMA integrity_check")
PG_VERSION = READ("SELECT current_setting('server_version'), current_schema(), pg_database_size(current_database())")
PG_TABLE_BYTES = READ("SELECT pg_total_relation_size(to_regclass(?))")
PG_ATTEMPT_ROWS = READ("SELECT COUNT(*) FROM {p}attempt")

# Top groups per facet for ``stats``: (label, table, group expression, bytes expression).
GROUPS = {
    "kv scopes": ("kv", "scope", "length(value)"),
    "queues": ("queue", "queue", "length(payload)"),
    "dead letters": ("queue_dead", "queue", "length(payload)"),
    "event sessions": ("event", "session_id", "length(payload)"),
    "presence namespaces": ("presence", "ns", "length(value)"),
}

NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs", "lustre"}
WAL_WARN_BYTES = 64 * 1024 * 1024
ATTEMPT_WARN_ROWS = 100_000


def facet_of(table: str) -> str:
    return FACET_OF.get(table, table)


# PRAGMA synchronous and auto_vacuum answer numbers; shown by name.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
AUTO_VACUUM_NAMES = {0: "NONE", 1: "FULL", 2: "INCREMENTAL"}
FREE_PAGES_WARN = 0.25  # of the file: a maintain() would give the space back


@dataclass(frozen=True)
class Check:
    """One thing ``doctor`` checked: ``verdict`` ``ok``, ``warning`` or ``problem``; ``detail``: what was seen."""

    check: str
    verdict: str
    detail: str


@dataclass
class Health:
    """Facts (what ``info`` prints), the checks made and their verdicts (what ``doctor`` prints)."""

    facts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def check(self, name: str, verdict: str, detail: str) -> None:
        """Record a check; a warning or problem also goes to ``warnings``/``problems``."""
        self.checks.append(Check(name, verdict, detail))
        if verdict == "warning":
            self.warnings.append(detail)
        elif verdict == "problem":
            self.problems.append(detail)

    @property
    def verdict(self) -> str:
        """``problem`` when any check found one, else ``warning`` when any warned, else ``ok``."""
        verdicts = {c.verdict for c in self.checks}
        return "problem" if "problem" in verdicts else "warning" if "warning" in verdicts else "ok"


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem ``path`` is on (Linux /proc/mounts), or None."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        inside = len(parts) >= 3 and (target == parts[1] or target.startswith(parts[1].rstrip("/") + "/"))
        if inside and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


def health(store: durastate.Store, *, check: str = "quick") -> Health:
    """Engine facts, schema versions, an integrity check, warnings.

    ``check``: ``"quick"`` (SQLite ``quick_check``), ``"full"``
    (``integrity_check``) or ``"none"``; both checks read the whole file.
    """
    engine = store.engine
    h = Health()
    h.facts["engine"] = engine.dialect.name
    h.facts["url"] = redact(store.url)
    h.facts["prefix"] = engine.prefix
    h.facts["durastate"] = durastate.__version__ if hasattr(durastate, "__version__") else "?"
    h.facts["schema"] = {str(f): int(v) for f, v in engine.all(engine.sql(READ_SCHEMA_VERSIONS))}
    expected = {s.facet: s.version for s in SCHEMAS}
    behind = {f: v for f, v in h.facts["schema"].items() if f in expected and v < expected[f]}
    if behind:
        h.check("schema", "warning", f"older schema versions {behind}: open the store writable once to migrate")
    else:
        h.check("schema", "ok", "every facet's schema is this durastate's")
    if engine.dialect.name == "sqlite":
        _sqlite_health(store, engine, h, check)
    else:
        _postgres_health(engine, h)
    return h


def database_file(path: str) -> Path:
    """The file a SQLite engine's ``path`` names: a plain path, or a ``file:`` URI (read-only stores)."""
    if path.startswith("file:"):
        return Path(urllib.parse.unquote(urllib.parse.urlsplit(path).path))
    return Path(path)


def _sqlite_health(store: durastate.Store, engine: Engine, h: Health, check: str) -> None:
    for name in SQLITE_PRAGMAS:
        row = engine.one(engine.sql(READ(f"PRAGMA {name}")))
        h.facts[name] = None if row is None else row[0]
    for name, names in (("synchronous", SYNCHRONOUS_NAMES), ("auto_vacuum", AUTO_VACUUM_NAMES)):
        if isinstance(h.facts.get(name), int):
            h.facts[name] = names.get(h.facts[name], h.facts[name])
    journal = str(h.facts.get("journal_mode", "")).lower()
    if journal == "wal" or getattr(engine, "is_memory", False):
        h.check("journal mode", "ok", f"journal_mode {journal}")
    else:
        h.check(
            "journal mode", "warning", f"journal_mode {journal}: readers and the writer block each other without WAL"
        )
    if h.facts.get("synchronous") == "OFF":
        h.check("durability", "warning", "synchronous OFF: a power loss can corrupt the file")
    else:
        h.check("durability", "ok", f"synchronous {h.facts.get('synchronous')}")
    pages, free = h.facts.get("page_count") or 0, h.facts.get("freelist_count") or 0
    if pages and free / pages > FREE_PAGES_WARN:
        h.check("free pages", "warning", f"{free} of {pages} pages are free: `durastate maintain` gives them back")
    else:
        h.check("free pages", "ok", f"{free} of {pages} pages free")
    path = getattr(engine, "path", None)
    if path and not getattr(engine, "is_memory", False):
        db = database_file(str(path))
        wal = db.with_name(db.name + "-wal")
        h.facts["file"] = str(db)
        h.facts["file_bytes"] = db.stat().st_size if db.exists() else 0
        h.facts["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
        fs = filesystem_type(db)
        h.facts["filesystem"] = fs
        if fs in NETWORK_FILESYSTEMS:
            h.check(
                "filesystem",
                "warning",
                f"{db} is on a network filesystem ({fs}): SQLite's WAL needs shared memory that "
                "network filesystems do not provide; use a local disk or PostgreSQL",
            )
        else:
            h.check("filesystem", "ok", f"{fs or 'unknown'} (local)")
        if h.facts["wal_bytes"] > WAL_WARN_BYTES:
            h.check(
                "WAL size",
                "warning",
                f"the WAL is {h.facts['wal_bytes'] // (1024 * 1024)} MiB: checkpoints are not keeping up "
                "(a reader holding a long transaction?); run `durastate maintain`",
            )
        else:
            h.check("WAL size", "ok", f"{h.facts['wal_bytes']:,} bytes")
        if not os.access(db, os.W_OK):
            h.check("writable", "warning", f"{db} is not writable by this user")
        else:
            h.check("writable", "ok", f"{db} is writable by this user")
    if check == "none":
        h.facts["integrity"] = "not checked (durastate doctor checks it)"
        return
    statement = SQLITE_INTEGRITY_CHECK if check == "full" else SQLITE_QUICK_CHECK
    # One row per problem, or one row holding several lines: count lines.
    result = [line for r in engine.all(engine.sql(statement)) for line in str(r[0]).splitlines()]
    shown = result[:10] + ([f"... and {len(result) - 10} more"] if len(result) > 10 else [])
    h.facts["integrity"] = "ok" if result == ["ok"] else shown
    name = "integrity (PRAGMA integrity_check)" if check == "full" else "integrity (PRAGMA quick_check)"
    if result != ["ok"]:
        h.check(name, "problem", "integrity check failed: " + "; ".join(result[:5]))
    else:
        h.check(name, "ok", "every page and index entry checked")


def _postgres_health(engine: Engine, h: Health) -> None:
    row = engine.one(engine.sql(PG_VERSION))
    assert row is not None
    h.facts["server_version"], h.facts["schema_name"], h.facts["database_bytes"] = row[0], row[1], int(row[2])
    attempts = engine.one(engine.sql(PG_ATTEMPT_ROWS))
    h.facts["attempt_rows"] = 0 if attempts is None else int(attempts[0])
    if h.facts["attempt_rows"] > ATTEMPT_WARN_ROWS:
        h.check(
            "attempt table",
            "warning",
            f"the attempt table holds {h.facts['attempt_rows']:,} rows; the engine prunes rows older than an "
            "hour as it writes, so this means a very high write rate or a stopped clock",
        )
    else:
        h.check("attempt table", "ok", f"{h.facts['attempt_rows']:,} rows")
    h.facts["integrity"] = "ok (the server checks its own pages)"
    h.check("integrity", "ok", "the server checks its own pages")
    # What a failover can lose: replication, recovery, a pooler (engines.postgres_health).
    facts, warnings = failover_facts(engine)
    h.facts.update(facts)
    for warning in warnings:
        h.check("failover", "warning", warning)
    if not warnings:
        h.check("failover", "ok", f"standbys: {facts.get('standbys')}")


def table_bytes(engine: Engine, table: str, *, scan: bool = True) -> int | None:
    """Bytes a table takes: its pages (SQLite dbstat; PostgreSQL relation size).

    A SQLite built without the dbstat table answers the stored data's
    length instead, by reading the whole table (only when ``scan``; else None).
    """
    name = engine.prefix + table
    try:
        if engine.dialect.name == "sqlite":
            row = engine.one(engine.sql(SQLITE_TABLE_BYTES), (name, name))
        else:
            row = engine.one(engine.sql(PG_TABLE_BYTES), (name,))
    except durastate.DurastateError:
        if not scan:
            return None
        columns = table_shape(engine, table).columns
        total = " + ".join(f"COALESCE(length({c}), 0)" for c in columns)
        row = engine.one(engine.sql(READ(f"SELECT SUM({total}) FROM {{p}}{table}")))
    return 0 if row is None or row[0] is None else int(row[0])


# Bounded counting for pages: at most CAP rows are read per table.
CAPPED_COUNT = "SELECT COUNT(*) FROM (SELECT 1 FROM {p}{table} LIMIT ?) AS capped"
PG_ESTIMATE = READ("SELECT reltuples FROM pg_catalog.pg_class WHERE oid = to_regclass(?)")
# SQLite counts from its b-tree pages quickly; PostgreSQL reads every row
# (MVCC) and has its planner's estimate for the rest.
COUNT_CAP = {"sqlite": 1_000_000, "postgresql": 10_000}


def bounded_count(engine: Engine, table: str) -> tuple[int, bool]:
    """``(rows, exact)``: exact up to the engine's ``COUNT_CAP``; beyond it
    PostgreSQL's planner estimate (``reltuples``, when the table was
    analyzed) or the cap itself (a lower bound)."""
    cap = COUNT_CAP[engine.dialect.name]
    row = engine.one(engine.sql(READ(CAPPED_COUNT.replace("{table}", table))), (cap + 1,))
    n = 0 if row is None else int(row[0])
    if n <= cap:
        return n, True
    if engine.dialect.name == "postgresql":
        estimate = engine.one(engine.sql(PG_ESTIMATE), (engine.prefix + table,))
        if estimate is not None and estimate[0] is not None and float(estimate[0]) > cap:
            return int(estimate[0]), False
    return cap, False


def table_stats(store: durastate.Store, *, scan: bool = True) -> list[dict[str, Any]]:
    """Rows and bytes per facet table.

    ``scan=True`` (``durastate stats``): exact counts, and data lengths where
    the engine cannot size a table otherwise. ``scan=False`` (the inspector's
    overview): bounded work per table, counts exact up to ``COUNT_CAP``
    (``"exact": False`` marks an estimate or a lower bound).
    """
    engine = store.engine
    stats = []
    for t in facet_tables():
        rows, exact = (count_rows(engine, t), True) if scan else bounded_count(engine, t)
        stats.append(
            {"facet": facet_of(t), "table": t, "rows": rows, "exact": exact, "bytes": table_bytes(engine, t, scan=scan)}
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
