"""SQLite: a claim's entry in the claim index stays next to the queue's head (the lanes, docs/decisions.md "lanes")."""

from __future__ import annotations

import statistics
import struct
from pathlib import Path

import durastate

# The wal-index header's first copy (https://www.sqlite.org/walformat.html): mxFrame at byte 16, salts at 32.
_HEADER = struct.Struct("=16xI12xQ")
WAITING = 1400  # items behind the head: the queue's range of the claim index spans many leaves


def _wal(db: Path) -> tuple[int, int]:
    """(frames, salts) of ``db``'s WAL."""
    with open(f"{db}-shm", "rb") as shm:
        frames, salts = _HEADER.unpack(shm.read(_HEADER.size))
    return frames, salts


def test_an_ack_and_the_next_claim_write_only_the_pages_at_the_queues_head(tmp_path: Path) -> None:
    """A leased item's entry goes to the end of lane 0, just before the ready items it was taken from:
    an ack committed with the next claim writes the table's leaf and the index's head leaf, no third page
    at the far end of the queue's range (where the entry went when leased items sorted by deadline among
    the ready ones)."""
    db = tmp_path / "q.db"
    with durastate.open(db) as store:
        store.queues.push("jobs", [b"x" * 200] * WAITING)
        held = store.queues.claim("jobs", lease=30)
        written = []
        for _ in range(40):
            before = _wal(db)
            with store.transaction():
                assert held is not None
                held.ack()
                held = store.queues.claim("jobs", lease=30)
            after = _wal(db)
            if after[1] == before[1]:  # the WAL did not start over in between
                written.append(after[0] - before[0])
        assert len(written) >= 30
        # Most commits: 2 pages (3 before the lanes); a few more where a leaf fills or empties.
        assert statistics.median(written) == 2, written
