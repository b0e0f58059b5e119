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
that has just committed reads how many bytes of frames the WAL holds (the
wal-index header in the ``-shm`` file, ``wal_bytes``), and past ``LIMIT``
checkpoints in two steps, still holding the engine's writer gate (this
process's other threads queue there):

* ``PASSIVE`` copies the frames into the database file and fsyncs both,
  without the write lock: other processes go on writing. Most of its time
  is the WAL's fsync (the frames were written without one), which is why
  it comes first. It answers ``-1`` frames when another process holds the
  checkpoint lock (its own checkpoint is under way): nothing more then.
  Nor when it had to leave more than an eighth of the frames uncopied
  (``restart_worthwhile``): a reader holds a snapshot that old,
  and a ``RESTART`` would hold every writer up for nothing while it waits
  for that reader.
* ``RESTART`` takes the write lock, copies the few frames written since and
  waits for the readers still reading from the WAL to finish (up to
  ``RESTART_WAIT_MS`` for both: writers are held up meanwhile; a reader
  that begins meanwhile reads from the database file, not the WAL; on a
  thread running an event loop it waits for nothing, as nothing waits
  there, ``sqlite_busy``), so the next writer starts the WAL over from its
  beginning: the file keeps its size (no blocks
  freed and allocated again, which ``TRUNCATE`` costs: ~20 ms for 16 MiB),
  the frames it holds drop to none. When a writer or a reader of another
  process stands in its way it copies what it can; the next look tries again.

What it gives up: at ``synchronous=NORMAL`` (durability="normal") a power
loss can lose the commits made since the last checkpoint's fsync, which is
now up to ``LIMIT`` bytes of WAL rather than SQLite's 1,000 pages; a
process crash loses nothing either way. A reader that holds one snapshot
for a long time keeps the WAL growing, as with SQLite's own policy: no
checkpoint can copy past a snapshot in use. A connection whose
``wal_autocheckpoint`` its owner sets again (pi-durable's
``wal_auto_checkpoint_pages``) runs SQLite's checkpoints as well. The WAL
file itself is left at its largest size (``maintain()`` and
``tools.checkpoint()`` truncate it).
"""

from __future__ import annotations

import os
import struct

__all__ = [
    "AUTOCHECKPOINT_OFF",
    "CHECK_EVERY",
    "LIMIT",
    "PASSIVE",
    "RESTART",
    "RESTART_WAIT_MS",
    "restart_worthwhile",
    "wal_bytes",
]

# Run at each file connection's open (it writes nothing to the file).
AUTOCHECKPOINT_OFF = "PRAGMA wal_autocheckpoint = 0"
# Writes (into the database file); each answers (busy, frames in the WAL, frames copied), frames -1 when another
# connection's checkpoint holds the checkpoint lock.
PASSIVE = "PRAGMA wal_checkpoint(PASSIVE)"
RESTART = "PRAGMA wal_checkpoint(RESTART)"
# Milliseconds RESTART waits (in SQLite's busy handler: sleeps of 1, 2, 5 ms) for the write lock and for readers
# of the WAL: a reader that always holds some snapshot (a loop of short read transactions) is past its
# snapshot within one sleep; never waiting kept the WAL growing past 40 MiB beside one such reader.
RESTART_WAIT_MS = 10
# Bytes of frames in the WAL past which the writer that looks checkpoints.
LIMIT = 16 * 1024 * 1024
# Writes of one engine between two looks at the WAL (an fstat() and a pread() of the -shm file, ~1-2 us).
CHECK_EVERY = 16
# The wal-index header's first copy (https://www.sqlite.org/walformat.html, "the WAL-index header"), in the
# host's byte order: the page size at byte 14 (1 means 65536), mxFrame (the frames in the WAL) at byte 16.
_HEADER = struct.Struct("=14xHI")


def restart_worthwhile(frames: int, copied: int) -> bool:
    """After ``PASSIVE`` answered ``frames`` in the WAL, ``copied`` copied: is ``RESTART`` worth trying?

    Not when another connection was checkpointing (``frames`` -1), nor when a
    reader's snapshot stopped the copy more than an eighth of the frames
    short: a reader that far behind the writers is not done within
    ``RESTART_WAIT_MS`` (a short read transaction's snapshot is a few
    commits old at most).
    """
    return frames >= 0 and (frames - copied) * 8 <= frames


def wal_bytes(shm: int) -> int:
    """Bytes of frames the WAL holds, read from the open ``-shm`` file ``shm`` (0 when unreadable).

    Read without SQLite's locks: a header being rewritten this moment
    may read stale or torn, which only moves one look's answer.
    """
    try:
        page: int
        frames: int
        page, frames = _HEADER.unpack(os.pread(shm, _HEADER.size, 0))
    except (OSError, struct.error):
        return 0
    return frames * ((page if page != 1 else 65536) + 24)
