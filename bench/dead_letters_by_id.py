"""queues.redrive / delete_dead by ids on PostgreSQL: milliseconds of one call of 1, 10 and 1,000 ids.

A fresh store (a random table prefix, left behind) per call, in the database of DURASTATE_BENCH_POSTGRES_URL
(required: a throwaway database); PYTHONPATH picks the tree measured. One run each: a first call of its
statements on the connection (they are prepared on the way), so it is a rough figure.
"""

from __future__ import annotations

import os
import time
import uuid

import durastate

URL = os.environ["DURASTATE_BENCH_POSTGRES_URL"]


def main() -> None:
    for n in (1, 10, 1000):
        for operation in ("redrive", "delete_dead"):
            with durastate.open(URL, prefix="b" + uuid.uuid4().hex[:8] + "_") as store:
                queues = store.queues
                queues.push("jobs", [b"x"] * n, max_attempts=1)
                while (claim := queues.claim("jobs")) is not None:
                    claim.nack()
                ids = [d.id for d in queues.dead_letters("jobs", limit=None)]
                start = time.perf_counter()
                assert getattr(queues, operation)("jobs", ids) == n
                print(f"{operation:12} {n:5} ids {(time.perf_counter() - start) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
