"""``durastate maintain``: ``Store.maintain()`` with a policy from the flags, then engine housekeeping.

The retention work is the store's own (``durastate.retention``): the
command builds a ``Retention`` from its flags, opens the store with it and
runs ``store.maintain(max_rows=...)`` once. So it deletes exactly what a
program calling ``maintain()`` with that policy would: expired kv values
and presence fields always, PostgreSQL's attempt rows past their window
(``engine_bookkeeping``), and whatever the flags turn on. Every rule deletes
in bounded batches, each its own short commit, so writers go on, Ctrl-C
keeps every finished batch, and running it again resumes (each rule is
defined by the data). Then, outside the policy, the two engine commands
SQLite and PostgreSQL offer for housekeeping: a WAL checkpoint (SQLite,
always) and VACUUM (``--vacuum``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import durastate
from durastate.engines.base import DDL

WAL_CHECKPOINT = DDL("PRAGMA wal_checkpoint(TRUNCATE)")
SQLITE_VACUUM = DDL("VACUUM")
PG_VACUUM = "VACUUM (ANALYZE) {table}"

Step = Callable[[str, int], None]


def policy(
    *,
    events_older_than: float | None = None,
    dead_older_than: float | None = None,
    logs_older_than: float | None = None,
    sessions_settled_for: float | None = None,
    max_backups: int | None = None,
    document_history: int | None = None,
    document_history_older_than: float | None = None,
    record_revisions: int | None = None,
    record_revisions_older_than: float | None = None,
) -> durastate.Retention:
    """The ``Retention`` the command's flags describe (``InvalidRequest`` for a contradictory one)."""
    return durastate.Retention(
        kv_log_max_age=logs_older_than,
        dead_letter_max_age=dead_older_than,
        max_backups=max_backups,
        processed_event_max_age=events_older_than,
        settled_session_max_age=sessions_settled_for,
        document_history=document_history,
        document_history_max_age=document_history_older_than,
        max_record_revisions=record_revisions,
        record_revision_max_age=record_revisions_older_than,
    )


def run_maintenance(
    store: durastate.Store, *, max_rows: int | None, vacuum: bool, step: Step, url: str | None
) -> dict[str, Any]:
    """``store.maintain()`` (its report's fields), the WAL checkpoint, and VACUUM if asked.

    ``step(rule, rows)`` is called after each retention rule. The result is
    ``MaintenanceReport``'s fields, plus ``wal_checkpoint`` (SQLite file),
    ``vacuum`` (when asked) and ``policy`` (the ``Retention`` that ran).
    """
    report = store.maintain(max_rows=max_rows, progress=step)
    result: dict[str, Any] = dataclasses.asdict(report)
    result["total"] = report.total()
    engine = store.engine
    if engine.dialect.name == "sqlite" and not getattr(engine, "is_memory", False):
        row = engine.one(engine.sql(WAL_CHECKPOINT))
        result["wal_checkpoint"] = (
            "busy (a reader holds the WAL; try again later)"
            if row is not None and row[0]
            else f"ok ({0 if row is None else row[2]} pages)"
        )
    if vacuum:
        result["vacuum"] = _vacuum(store, url)
    result["policy"] = dataclasses.asdict(store.retention)
    return result


def _vacuum(store: durastate.Store, url: str | None) -> str:
    engine = store.engine
    if engine.dialect.name == "sqlite":
        engine.execute(engine.sql(SQLITE_VACUUM))
        return "ok"
    # VACUUM cannot run inside a transaction block, and the engine wraps
    # writes in one (attempt records): a separate autocommit connection.
    import psycopg

    from .dump import facet_tables

    with psycopg.connect(str(url), autocommit=True) as conn:
        for table in facet_tables():
            conn.execute(PG_VACUUM.format(table=engine.prefix + table))
    return "ok"
