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
checkpoint can copy past a snapshot in use. Nor is ``LIMIT`` a ceiling
with several writer processes: the WAL runs past it by what they write
while one checkpoint's fsyncs run, so its largest size follows the disk's
latency (four processes, a limit of 1 MiB: 8-10 MiB on a quiet disk, up to
53-62 MiB beside other programs' fsyncs, against 85-93 MiB, never started
over, with SQLite's own policy; tests/test_sqlite_wal_bound.py). Writers
are never held up to wait for a checkpoint. A connection whose
``wal_autocheckpoint`` its owner sets again (pi-durable's
``wal_auto_checkpoint_pages``) runs SQLite's checkpoints as well. The WAL
file itself is left at its largest size (``maintain()`` and
``tools.checkpoint()`` truncate it).

A WAL that rewrites a few pages is checkpointed sooner (``WalBound``).
The wal-index (the ``-shm`` file) finds a page's frames through a hash
table per 4,096 frames, keyed by page number with linear probing: a new
frame of a page walks past every earlier frame of that page in its
segment, and so does every lookup of the page by a connection whose cache
another connection's commit made stale. A queue rewrites the same two or
three pages (the table's last leaf, the claim index's leaf) at every
commit, so near ``LIMIT`` (~4,000 frames of 4 KiB) each frame walked
~2,000 entries: 110k instructions of a push+claim+ack's 461k in the
appends, 151k in the lookups (docs/decisions.md, "sqlqueue"). Each look
therefore also estimates the walk (``hot_chain``: how many frames the
newest segment holds of the pages its latest ``RECENT_FRAMES`` frames
wrote, counted in its latest ``COUNTED_FRAMES``) and past ``HOT_CHAIN``
checkpoints as at ``LIMIT``, except that its ``RESTART`` waits for nothing
(``HOT_RESTART_WAIT_MS``): an early start-over is worth taking only when
nothing stands in its way. One that another process's checkpoint, writer
or reader stopped ends the early ones for that WAL
(``WalBound.checkpointed``): with several writer processes each further
try would cost a ``PASSIVE`` (its fsyncs) for about what it saves;
``LIMIT`` still bounds the WAL. The page numbers are counted only when the
walk could have reached ``HOT_CHAIN`` since the last count (for writes
spread over many pages, ``kv.put`` of new keys: once per WAL).

At ``durability="full"`` (``synchronous=FULL``) the bound is ``LIMIT_FULL``
(4 MiB, about SQLite's own 1,000 pages). Every commit there fsyncs the WAL,
and while a WAL is young each commit also makes the file longer: an
``fdatasync`` of a file whose size changed commits the filesystem's journal
too (on ext4 1.5-2x the time of one that overwrote blocks already there),
so a WAL that grows to 16 MiB before it starts over pays that on ~1,400
small commits where SQLite's own policy pays it on ~470 (docs/decisions.md,
"hueyfull", "walfull"). ``LIMIT``'s reason, few checkpoints for many writer
processes at ``normal``, weighs less there: each commit already waits for
the disk, and a smaller WAL is also less to replay after a crash.
"""

from __future__ import annotations

import os
import struct
from collections import Counter

__all__ = [
    "AUTOCHECKPOINT_OFF",
    "CHECK_EVERY",
    "COUNTED_FRAMES",
    "HOT_CHAIN",
    "HOT_RESTART_WAIT_MS",
    "LIMIT",
    "LIMIT_FULL",
    "PASSIVE",
    "RESTART",
    "RECENT_FRAMES",
    "RESTART_WAIT_MS",
    "ShmFile",
    "WalBound",
    "hot_chain",
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
# The same at durability="full" (see the module's docstring); never above LIMIT.
LIMIT_FULL = 4 * 1024 * 1024
# Writes of one engine between two looks at the WAL (an fstat() and a pread() of the -shm file, ~1-2 us).
CHECK_EVERY = 16
# The mean walk of the wal-index hash (earlier frames of the same page in its segment) past which the writer
# that looks checkpoints before LIMIT. A queue's push+claim+ack (2 hot pages, 6 frames) reaches it at ~1,000
# frames, SQLite's own threshold; writes spread over many pages do not before LIMIT.
HOT_CHAIN = 512
# The latest frames whose pages stand for the pages being written now (hot_chain).
RECENT_FRAMES = 64
# The latest frames whose page numbers hot_chain counts (~40 us of CPU), at most.
COUNTED_FRAMES = 1024
# RESTART's wait when the walk, not LIMIT, called the checkpoint: none (see the module's docstring).
HOT_RESTART_WAIT_MS = 0
# The wal-index header's first copy (https://www.sqlite.org/walformat.html, "the WAL-index header"), in the
# host's byte order: the page size at byte 14 (1 means 65536), mxFrame (the frames in the WAL) at byte 16, the
# salts at byte 32 (new at each start-over of the WAL).
_HEADER = struct.Struct("=14xHI12xQ")
# The wal-index's hash segments (walformat.html, "hash tables"): 32 KiB each, first the page number of each of
# its frames (4 bytes, host order); the first segment's 4,062 come after the headers (136 bytes), the others' 4,096.
_SEGMENT_BYTES = 32768
_FIRST_SEGMENT_FRAMES = 4062
_SEGMENT_FRAMES = 4096
_FIRST_PAGE_NUMBER = 136


def restart_worthwhile(frames: int, copied: int) -> bool:
    """After ``PASSIVE`` answered ``frames`` in the WAL, ``copied`` copied: is ``RESTART`` worth trying?

    Not when another connection was checkpointing (``frames`` -1), nor when a
    reader's snapshot stopped the copy more than an eighth of the frames
    short: a reader that far behind the writers is not done within
    ``RESTART_WAIT_MS`` (a short read transaction's snapshot is a few
    commits old at most).
    """
    return frames >= 0 and (frames - copied) * 8 <= frames


def _segment_start(frames: int) -> int:
    """The first frame (from 1) of the hash segment that holds frame ``frames``."""
    if frames <= _FIRST_SEGMENT_FRAMES:
        return 1
    return frames - (frames - _FIRST_SEGMENT_FRAMES - 1) % _SEGMENT_FRAMES


def _page_number_offset(frame: int) -> int:
    """Where the page number of frame ``frame`` (from 1) lies in the ``-shm`` file."""
    if frame <= _FIRST_SEGMENT_FRAMES:
        return _FIRST_PAGE_NUMBER + 4 * (frame - 1)
    segment, index = divmod(frame - _FIRST_SEGMENT_FRAMES - 1, _SEGMENT_FRAMES)
    return _SEGMENT_BYTES * (segment + 1) + 4 * index


def hot_chain(shm: int, frames: int) -> int:
    """About how many earlier frames of its page the hash walks past for a frame written now (0 when unreadable).

    The mean, over the latest ``RECENT_FRAMES`` frames, of how many frames
    of each one's page the newest hash segment holds, counted in its latest
    ``COUNTED_FRAMES`` frames and scaled to all of its frames (the pace
    taken as steady): a queue's two hot pages have half the segment's
    frames each; ``kv.put`` of new keys fills a leaf in a few dozen frames
    and moves on to the next.
    """
    start = _segment_start(frames)
    first = max(start, frames - COUNTED_FRAMES + 1)
    try:
        pages = memoryview(os.pread(shm, 4 * (frames - first + 1), _page_number_offset(first))).cast("I").tolist()
    except (OSError, TypeError):  # TypeError: a short read, not a whole number of page numbers
        return 0
    recent = pages[-RECENT_FRAMES:]
    if not recent:
        return 0
    frames_of = Counter(pages)  # ~40 us of CPU for 1,024 frames: a few times per WAL (WalBound)
    return sum(frames_of[page] for page in recent) * (frames - start + 1) // (len(recent) * len(pages))


class ShmFile:
    """The ``-shm`` file beside a store's file, open for reading, for the looks at the WAL (``WalBound.due``).

    ``fd`` is the descriptor, ``None`` while not open. Closed by ``close()``
    (the engine's ``close()``), and when this object is collected: an engine
    dropped without ``close()`` is collected with its connections (sqlite3
    closes each as it goes) and takes the descriptor with it. Kept as a bare
    ``int`` on the engine, it stayed open for the life of the process: one
    descriptor for every store a long-lived process opened and dropped.
    """

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd: int | None = None

    def close(self) -> None:
        """Close the descriptor, if open. Idempotent."""
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass  # closed already (nothing else closes it: never raised from a finalizer)

    def __del__(self) -> None:
        self.close()


class WalBound:
    """One engine's look at its file's WAL (``due``); kept between looks, under the engine's writer gate.

    ``full``: the engine's commits fsync (``durability="full"``): bounded by
    ``LIMIT_FULL`` rather than ``LIMIT`` (the module's docstring).
    """

    __slots__ = ("_early", "_full", "_hot", "_missed", "_next_count", "_salt")

    def __init__(self, full: bool = False) -> None:
        self._full = full
        self._salt = -1  # the WAL (its salts) the state below is for
        self._next_count = HOT_CHAIN  # mxFrame from which hot_chain is worth computing again
        self._hot = False  # hot_chain passed HOT_CHAIN in this WAL
        self._early = False  # due's last answer was an early checkpoint
        self._missed = False  # an early checkpoint of this WAL did not start it over: no more early ones

    def checkpointed(self, restarted: bool) -> None:
        """The checkpoint ``due`` called for is over; ``restarted``: its ``RESTART`` started the WAL over.

        An early one that did not: another process stood in its way (its
        checkpoint, writer or reader), so the file has other writers, and
        each further try would cost a ``PASSIVE`` (its fsyncs) for nothing:
        no more early checkpoints in this WAL, ``LIMIT`` bounds it.
        """
        if self._early and not restarted:
            self._missed = True

    def due(self, shm: int, early: bool = True) -> int | None:
        """``None`` when the WAL needs no checkpoint now; else the milliseconds its ``RESTART`` may wait.

        ``RESTART_WAIT_MS`` past ``LIMIT``; ``HOT_RESTART_WAIT_MS`` when the
        hash's walk (``hot_chain``) passed ``HOT_CHAIN`` first,
        unless an early one of this WAL already missed (``checkpointed``)
        or ``early`` is false: the asking writer has met another process's
        write lock, so the file has other writers, and an early checkpoint's
        ``PASSIVE`` step (its copying, its fsyncs) holds them up: a queue's
        push+claim+ack at 4 and 16 processes had its p99 at 2-4x raw
        ``sqlite3``'s with early checkpoints, 0.6-1.2x without (stop 18,
        bench/RESULTS.md). ``LIMIT`` bounds such a WAL.
        Read without SQLite's locks: a header or a page number being
        rewritten this moment may read stale or torn, which only moves one
        look's answer.
        """
        try:
            page, frames, salt = _HEADER.unpack(os.pread(shm, _HEADER.size, 0))
        except (OSError, struct.error):
            return None
        self._early = False
        # Read at each look (not kept): a test may set the module's limits while a store is open.
        if frames * ((page if page != 1 else 65536) + 24) > (min(LIMIT, LIMIT_FULL) if self._full else LIMIT):
            return RESTART_WAIT_MS
        if not early:
            return None
        if salt != self._salt:  # the WAL started over: its walks with it
            self._salt, self._next_count, self._hot, self._missed = salt, HOT_CHAIN, False, False
        if self._missed:
            return None
        if not self._hot:
            if frames < self._next_count:
                return None
            chain = hot_chain(shm, frames)
            if chain < HOT_CHAIN:
                # The walk grows with the frames at the pace just read: read again when it would reach HOT_CHAIN
                # (for writes spread over many pages, past LIMIT: once per WAL). A pace that quickens meanwhile
                # is seen late, at worst at LIMIT, as before this estimate.
                self._next_count = frames + max(RECENT_FRAMES, frames * (HOT_CHAIN - chain) // max(chain, 1))
                return None
            self._hot = True
        self._early = True
        return HOT_RESTART_WAIT_MS


def wal_bytes(shm: int) -> int:
    """Bytes of frames the WAL holds, read from the open ``-shm`` file ``shm`` (0 when unreadable).

    Read without SQLite's locks: a header being rewritten this moment
    may read stale or torn, which only moves one look's answer.
    """
    try:
        page: int
        frames: int
        page, frames, _salt = _HEADER.unpack(os.pread(shm, _HEADER.size, 0))
    except (OSError, struct.error):
        return 0
    return frames * ((page if page != 1 else 65536) + 24)
