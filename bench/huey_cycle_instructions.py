"""Instructions per huey leased cycle (enqueue, dequeue, ack_later) on SQLite: run under callgrind, twice.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python bench/huey_cycle_instructions.py 0 full
    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python bench/huey_cycle_instructions.py 1000 full

(difference of the two "refs" totals / 1000 = instructions per cycle; set PYTHONPATH=<tree>/src to compare trees).
Arguments: cycles after the warm-up, durability ("normal" or "full").
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import durastate
from durastate.integrations.huey import DurastateStorage

PAYLOAD = b"x" * 200


def main() -> None:
    cycles = int(sys.argv[1])
    durability = sys.argv[2] if len(sys.argv) > 2 else "normal"
    store = durastate.open(Path(tempfile.mkdtemp()) / "ds.db", durability=durability)
    storage = DurastateStorage("bench", store=store)
    for _ in range(200):
        storage.enqueue(PAYLOAD)
    for _ in range(60 + cycles):
        storage.enqueue(PAYLOAD)
        storage.dequeue()
        claim = storage.take_claim()
        assert claim is not None
        storage.ack_later(claim)
    store.close()


if __name__ == "__main__":
    main()
