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
SQLite and PostgreSQL offer for housekeeping, run by ``maintain()`` too:
the space returned on SQLite (incremental vacuum, WAL truncated) and
VACUUM (``--vacuum``, ``maintain(vacuum=True)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import durastate
from durastate import retention as retention_rules

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
    """``store.maintain(vacuum=...)``: its report's fields, ``vacuum`` (when asked) and ``policy``.

    ``step(rule, rows)`` is called after each retention rule. The space
    returned (``bytes_returned``) is ``maintain()``'s own: on SQLite the
    freed pages and the WAL, truncated; ``--vacuum`` its thorough pass.
    """
    report = store.maintain(max_rows=max_rows, progress=step, vacuum=vacuum)
    return _result(store, report, vacuum)


def _result(store: durastate.Store, report: Any, vacuum: bool) -> dict[str, Any]:
    result: dict[str, Any] = dataclasses.asdict(report)
    result["total"] = report.total()
    if vacuum:
        result["vacuum"] = "ok" if report.finished else "not run (the retention rules did not finish)"
    result["policy"] = dataclasses.asdict(store.retention)
    return result


class _RolledBack(Exception):
    """Carries a dry run's report out of the transaction it rolls back."""

    def __init__(self, report: Any) -> None:
        super().__init__("dry run")
        self.report = report


def dry_run(store: durastate.Store, *, max_rows: int | None, step: Step) -> dict[str, Any]:
    """What ``run_maintenance`` would delete, rule by rule, with nothing kept: the same rules in one
    transaction that is rolled back.

    Exact (the counts are the rows the rules found and deleted inside the
    transaction) at a price: the transaction holds the store's write lock
    (SQLite) or the deleted rows' locks (PostgreSQL) while it runs, so other
    writers wait for it; with ``--max-rows`` it stays short. Space is not
    given back and not measured (``bytes_returned`` is None); ``--vacuum``
    is not run.
    """
    try:
        with store.engine.transaction():
            raise _RolledBack(retention_rules.maintain(store, store.retention, max_rows=max_rows, progress=step))
    except _RolledBack as done:
        report = done.report
    result = _result(store, report, vacuum=False)
    result["bytes_returned"] = None
    result["dry_run"] = True
    return result
