"""Bounding a SQLite file's WAL when many processes write to it (issue 26, pain 10).

SQLite's own policy (``wal_autocheckpoint``, 1,000 pages) checkpoints in
``PASSIVE`` mode after any commit that leaves the WAL past the threshold,
and the WAL starts over from its beginning only when a writer begins while
every frame is already in the database file. One process writing alone
meets that after each checkpoint. With several writer processes it almost
never does: the next writer has begun before the last commit's checkpoint
finished, so the WAL grows without bound (hundreds of MB in seconds with
16 writer processes, raw ``sqlite3`` as much as durastate), and since it
stays past the threshold, every commit runs a checkpoint of its own, with
its two fsyncs, in that writer's latency (bench/RESULTS.md, "writers3").

durastate's file connections turn the automatic checkpoint off
(``AUTOCHECKPOINT_OFF``) and bound the WAL themselves: every
``CHECK_EVERY`` writes of an engine (the first one included) the writer
that has just committed looks at the WAL file's size, and past ``LIMIT``
bytes runs ``wal_checkpoint(TRUNCATE)``, still holding the engine's writer
gate (this process's other threads queue there). ``TRUNCATE`` takes the
write lock, copies every frame into the database file, waits for no reader
(busy timeout 0 for it) and empties the WAL file, so its size is the
measure the next look reads. When a writer or a reader of another process
stands in its way it does what ``PASSIVE`` would (copies what it can, and
the WAL keeps its size); the next look tries again. Other processes'
checkpoints run under SQLite's checkpoint lock, so two never run at once.

What it gives up: at ``synchronous=NORMAL`` (durability="normal") a power
loss can lose the commits made since the last checkpoint's fsync, which is
now up to ``LIMIT`` bytes of WAL rather than SQLite's 1,000 pages; a
process crash loses nothing either way. A reader that holds one snapshot
for a long time keeps the WAL growing, as with SQLite's own policy: no
checkpoint can copy past a snapshot in use. A connection whose
``wal_autocheckpoint`` its owner sets again (pi-durable's
``wal_auto_checkpoint_pages``) runs SQLite's checkpoints as well.
"""

from __future__ import annotations

import os

__all__ = ["AUTOCHECKPOINT_OFF", "CHECK_EVERY", "LIMIT", "TRUNCATE", "past_limit"]

# Run at each file connection's open (it writes nothing to the file).
AUTOCHECKPOINT_OFF = "PRAGMA wal_autocheckpoint = 0"
# Write: copies the WAL into the database file and empties it (busy=1 in its row when something stood in its way).
TRUNCATE = "PRAGMA wal_checkpoint(TRUNCATE)"
# Bytes of WAL file past which the writer that looks checkpoints.
LIMIT = 16 * 1024 * 1024
# Writes of one engine between two looks at the WAL's size (a stat(), ~1 us).
CHECK_EVERY = 16


def past_limit(wal: str) -> bool:
    """Whether the WAL file ``wal`` is larger than ``LIMIT`` (a missing file is not)."""
    try:
        return os.stat(wal).st_size > LIMIT
    except OSError:
        return False
