"""What each huey op of bench/integrations.py makes the disk do: durastate (durability="full") against SqliteHuey.

    .venv/bin/python bench/huey_wal_shape.py [--ops 1400]

Both sides run bench/integrations.py's huey ops in its order, each on one
fresh file of its own (durastate: ``DurastateStorage`` leased and
``lease=None`` on one store and one queue, as the peer's; the peer: huey's ``SqliteStorage``): ``--ops``
enqueues (1,400: the bench's 7 rounds x 200 calls), then as many enqueue +
dequeue (+ ack) cycles, then as many with ``lease=None``. After each op it
reads the WAL's frames (the wal-index header in the ``-shm`` file) and the
WAL file's size, and reports per op: frames committed, and how many ops
left the WAL file longer than before (at ``synchronous=FULL`` each commit
fdatasyncs the WAL, and an fdatasync of a file whose size changed also
commits the filesystem's journal). Deterministic: no timing. Ops whose WAL
started over (a checkpoint) are left out of the frame counts.
"""

from __future__ import annotations

import argparse
import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

from huey.storage import SqliteStorage

import durastate
from durastate.integrations.huey import DurastateStorage

PAYLOAD = b"x" * 200  # bench/integrations.py's
# The wal-index header's first copy (https://www.sqlite.org/walformat.html): mxFrame at byte 16, salts at 32.
_HEADER = struct.Struct("=16xI12xQ")


def _wal_state(db: Path) -> tuple[int, int, int]:
    """(frames, salts, WAL file bytes) of ``db``'s WAL; (-1, -1, 0) before it exists."""
    try:
        with open(f"{db}-shm", "rb") as shm:
            frames, salt = _HEADER.unpack(shm.read(_HEADER.size))
        return frames, salt, os.path.getsize(f"{db}-wal")
    except FileNotFoundError:
        return -1, -1, 0


def measure(db: Path, op: Callable[[], None], ops: int) -> tuple[float, int]:
    """(frames a call, calls that left the WAL file longer) over ``ops`` calls of ``op``."""
    frames = counted = grown = 0
    before = _wal_state(db)
    for _ in range(ops):
        op()
        after = _wal_state(db)
        if after[1] == before[1] and after[0] >= before[0] >= 0:
            frames += after[0] - before[0]
            counted += 1
        grown += after[2] > before[2]
        before = after
    return frames / max(counted, 1), grown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=1400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="durastate-bench-") as folder:
        ours_db, peer_db = Path(folder) / "huey-durastate.db", Path(folder) / "huey-peer.db"
        store = durastate.open(ours_db, durability="full")
        leased = DurastateStorage("bench", store=store)
        plain = DurastateStorage("bench", store=store, lease=None)
        peer = SqliteStorage("bench", filename=str(peer_db))

        def cycle() -> None:
            leased.enqueue(PAYLOAD)
            assert leased.dequeue() == PAYLOAD
            claim = leased.take_claim()
            assert claim is not None
            leased.ack_later(claim)  # committed by the next dequeue, as DurastateHuey.execute does

        def plain_cycle() -> None:
            plain.enqueue(PAYLOAD)
            assert plain.dequeue() == PAYLOAD

        def peer_cycle() -> None:
            peer.enqueue(PAYLOAD)
            assert peer.dequeue() == PAYLOAD

        rows = [
            ("huey enqueue", lambda: leased.enqueue(PAYLOAD), lambda: peer.enqueue(PAYLOAD)),
            ("huey enqueue+dequeue+ack (lease)", cycle, peer_cycle),
            ("huey enqueue+dequeue, lease=None", plain_cycle, peer_cycle),
        ]
        print(f"# {args.ops} calls per op, in bench/integrations.py's order; durastate durability='full'")
        print(f"{'op':34} {'frames/call ds':>14} {'peer':>6} {'WAL grew, ds':>13} {'peer':>6}")
        for name, ours, theirs in rows:
            ours_frames, ours_grown = measure(ours_db, ours, args.ops)
            peer_frames, peer_grown = measure(peer_db, theirs, args.ops)
            print(f"{name:34} {ours_frames:14.2f} {peer_frames:6.2f} {ours_grown:13d} {peer_grown:6d}")
        peer.close()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
