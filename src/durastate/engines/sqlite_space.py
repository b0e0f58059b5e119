"""Giving the space deleted rows leave behind back to the filesystem (SQLite file stores).

SQLite keeps the pages a delete frees inside the file, on its freelist,
for later writes: without more, a store that grew to 50 MB and then lost
90 % of its data stays 50 MB on disk (plus a WAL as large as the largest
stretch of writes between two checkpoints). Two things return it:

* **incremental auto-vacuum.** A file durastate creates is set to
  ``auto_vacuum = INCREMENTAL`` before its first table (SQLite allows the
  switch only then, or through a full ``VACUUM``). ``PRAGMA
  incremental_vacuum(N)`` then moves up to N pages from the end of the
  file into free slots and truncates the file: a short write each, so
  ``reclaim`` runs it in steps of ``STEP_PAGES`` and writers interleave.
  The price is a pointer-map page per ~1,000 pages, updated when pages
  move (measured on the 16-process kv.put bench: within its noise).
* **a full ``VACUUM``** (``full=True``): rewrites the whole file, holding
  the write lock throughout and needing the file's size again in
  temporary space; it also defragments, and turns a file made before
  durastate set incremental auto-vacuum (or by another program) into one
  that has it, so later runs need no full pass.

Either way a ``wal_checkpoint(TRUNCATE)`` follows: it copies the WAL into
the file and truncates the WAL to zero bytes (when no reader is still
using it; otherwise it is left for the next run, and SQLite reuses it from
its start anyway).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .space import SpaceReport

__all__ = ["AUTO_VACUUM_INCREMENTAL", "STEP_PAGES", "reclaim"]

# The statement a new file gets before its first table (sqlite.py, when it
# creates the file).
AUTO_VACUUM_INCREMENTAL = "PRAGMA auto_vacuum = INCREMENTAL"
# Pages moved per incremental_vacuum step (8 MiB at the default 4 KiB page).
STEP_PAGES = 2048
_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


def _files_size(path: str) -> int:
    total = 0
    for name in (path, f"{path}-wal"):
        try:
            total += os.path.getsize(name)
        except OSError:
            pass
    return total


def reclaim(
    path: str,
    read: Callable[[str], Any],
    script: Callable[[str], None],
    *,
    full: bool,
) -> SpaceReport:
    """Return free pages to the filesystem, then truncate the WAL (see the module docstring).

    ``path``: the database file; ``read(pragma)``: the pragma's first
    column; ``script(statement)``: runs a statement to its end (an
    ``incremental_vacuum`` frees one page per step of its statement, so a
    plain execute would free one page).
    """
    before = _files_size(path)
    if full:
        # Applied by the VACUUM that follows: the file has incremental auto-vacuum from now on.
        script(AUTO_VACUUM_INCREMENTAL)
        script("VACUUM")
    elif int(read("PRAGMA auto_vacuum")) == _INCREMENTAL:
        free = int(read("PRAGMA freelist_count"))
        while free > 0:
            script(f"PRAGMA incremental_vacuum({STEP_PAGES})")
            left = int(read("PRAGMA freelist_count"))
            if left >= free:
                break  # writers refill it as fast: enough for this run
            free = left
    busy = int(read("PRAGMA wal_checkpoint(TRUNCATE)"))
    free_bytes = int(read("PRAGMA freelist_count")) * int(read("PRAGMA page_size"))
    return SpaceReport(max(0, before - _files_size(path)), free_bytes, busy == 0)
