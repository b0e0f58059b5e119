"""``reclaim_space`` on PostgreSQL: what ``Store.maintain()`` does about bloat after a retention pass.

A delete leaves dead row versions in the table and its indexes until
VACUUM removes them; autovacuum does that on its own schedule (by default
once a fifth of a table's rows are dead). Until then scans step over them,
and the space they hold is not reusable. ``reclaim(full=True)`` (``maintain
(vacuum=True)``) runs a plain ``VACUUM (ANALYZE)`` on each of the prefix's
tables at once: dead versions go, their space becomes reusable by later
writes, index pages emptied by the retention pass are recycled, empty pages
at a table's end are given back to the filesystem, and the planner's
statistics follow the new row counts. It takes no lock that blocks readers
or writers.

durastate never runs ``VACUUM FULL``: it rewrites each table under an
ACCESS EXCLUSIVE lock (every reader and writer of it waits for the whole
rewrite), which is an operator's decision (or pg_repack's job), not a
maintenance pass's. Without ``full`` nothing runs: autovacuum's job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .space import SpaceReport

__all__ = ["reclaim"]

# The prefix's tables and their sizes (heap, indexes, TOAST), in the connection's schema.
TABLE_SIZES = (
    "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE %s ESCAPE '\\'"
)
VACUUM = 'VACUUM (ANALYZE) "{table}"'


def reclaim(run: Callable[[str, Any], Any], prefix: str) -> SpaceReport:
    """``VACUUM (ANALYZE)`` every table of ``prefix`` (see the module docstring).

    ``run(sql, params)``: a cursor's execute on an autocommit connection
    (VACUUM cannot run inside a transaction block).
    """
    pattern = prefix.replace("_", "\\_") + "%"
    before = {str(name): int(size) for name, size in run(TABLE_SIZES, (pattern,)).fetchall()}
    for table in sorted(before):
        run(VACUUM.format(table=table), None)
    after = sum(int(size) for _name, size in run(TABLE_SIZES, (pattern,)).fetchall())
    return SpaceReport(max(0, sum(before.values()) - after))
