"""Shared rules for deleting what has aged out, in bounded batches.

Every retention method of every facet deletes at most ``BATCH`` rows per
statement, each statement its own short commit (outside a caller's
transaction), so no sweep holds the write lock for more than a few
milliseconds and writers interleave with it. A sweep that stops early
(``limit``) can simply be run again: it resumes where the data says, never
from remembered state.

``trim_oldest`` serves the append-only tables whose ids follow time (kv
logs, dead letters): it reads the oldest rows by primary key and deletes,
by one primary-key range, the leading run of them that is older than the
cutoff. It stops at the first row that is not old enough: ids are handed
out in commit order, so what follows is younger (up to the clock skew
between writers, which can only make it keep a few rows longer).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ._validate import MAX_DURATION_MS, fail, fail_type, shown

if TYPE_CHECKING:
    from .engines.base import Engine

BATCH = 256


def as_age_ms(name: str, seconds: Any) -> int:
    """``seconds`` (a finite number >= 0) as whole milliseconds, else ``InvalidRequest``."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        fail_type(name, "a finite number of seconds >= 0", seconds)
    if isinstance(seconds, float) and not math.isfinite(seconds):
        fail(f"{name} must be a finite number of seconds >= 0, got {seconds!r}")
    if seconds < 0:
        fail(f"{name} must be >= 0 seconds, got {shown(seconds)}")
    if seconds > MAX_DURATION_MS / 1000:
        fail(f"{name} is too large ({shown(seconds)} seconds)")
    return int(seconds * 1000)


def as_keep(name: str, count: Any) -> int:
    """``count`` (an int >= 1) or ``InvalidRequest``: retention never keeps nothing by accident."""
    if isinstance(count, bool) or not isinstance(count, int):
        fail_type(name, "an int >= 1", count)
    if count < 1:
        fail(f"{name} must be an int >= 1, got {count!r}")
    return count


def trim_oldest(engine: Engine, oldest: str, delete_through: str, cutoff_ms: int, limit: int | None) -> int:
    """Delete rows older than ``cutoff_ms`` from the old end of an id-ordered table.

    ``oldest``: a read of ``(id, time)`` ordered by id, ``LIMIT ?``.
    ``delete_through``: a write deleting rows with ``id <= ?`` and time
    ``< ?`` (rows without a time count as old). At most ``limit`` rows in
    all (``None``: no limit), ``BATCH`` per statement. Returns rows deleted.
    """
    removed = 0
    while limit is None or removed < limit:
        want = BATCH if limit is None else min(BATCH, limit - removed)
        rows = engine.all(oldest, (want,))
        through = None
        for row_id, at in rows:
            if at is not None and int(at) >= cutoff_ms:
                break
            through = int(row_id)
        if through is None:
            break
        removed += engine.execute(delete_through, (through, cutoff_ms))
        if through != int(rows[-1][0]) or len(rows) < want:
            break  # reached a young row, or the end of the table
    return removed
