"""Row mapping of store.events: named (``rows.event_from_row``) vs positional reads, side by side.

    .venv/bin/python bench/event_rows.py [--rounds 21] [--calls 20000]

The facet once built a ``StoredEvent`` from a row with 23 positional reads
(``r[15]``); it now unpacks the row into the column names
(``durastate.events.rows.event_from_row``). ``positional`` below is that
earlier code, kept here as the contender. Both build the same event from
the same row (checked first); per round each maps the row ``--calls``
times (thread CPU time: the machine is shared), the order of the two
alternating by round, and the median of the per-round ratios is reported
(ratio = named / positional time: <= 1.0 is no slower). The full append and claim cycles are in bench/events.py.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import orjson

from durastate.events import Cause, StoredEvent
from durastate.events.rows import event_from_row

_new_object = object.__new__


def positional(row: Any, offset: int = 0) -> StoredEvent:
    r = row[offset:] if offset else row
    returned = r[12]
    event = _new_object(StoredEvent)
    event.__dict__.update(
        id=r[2],
        type=r[3],
        payload=orjson.loads(r[4]),
        index=int(r[1]),
        session_id=r[0],
        created_at=int(r[5]),
        cause=None if r[6] is None else Cause(int(r[6]), int(r[7]), None if r[8] is None else int(r[8])),
        lane=r[9],
        processed_at=r[10],
        processed_by_attempt=r[11],
        returned_event_ids=None if returned is None else tuple(orjson.loads(returned)),
        first_claimed_at=r[13],
        last_claimed_at=r[14],
        attempt_count=int(r[15]),
        failure_count=int(r[16]),
        last_failed_at=r[17],
        last_failed_attempt=r[18],
        last_error=r[19],
        failed_at=r[20],
        claim_holder=r[21],
        claim_expires_at=r[22],
    )
    return event


# A claimed event with a cause and a lane: the shape claim_available returns.
ROW = (
    "session-1", 7, "id-7", "step", b'{"a":1,"b":[1,2,3]}', 1_700_000_000_000, 3, 1, None, "lane", None, None, None,
    1_700_000_000_001, 1_700_000_000_002, 1, 0, None, None, None, None, "worker", 1_700_000_030_000,
)  # fmt: skip


def timed(mapper: Any, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        mapper(ROW)
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    if positional(ROW) != event_from_row(ROW):
        raise SystemExit("the two mappings disagree")
    ratios, named_ns, positional_ns = [], [], []
    for round_number in range(args.rounds):
        if round_number % 2:
            b = timed(event_from_row, args.calls)
            a = timed(positional, args.calls)
        else:
            a = timed(positional, args.calls)
            b = timed(event_from_row, args.calls)
        ratios.append(b / a)
        positional_ns.append(a / args.calls * 1e9)
        named_ns.append(b / args.calls * 1e9)
    print("| mapping | median ns per row |")
    print("|---|---|")
    print(f"| positional (before) | {statistics.median(positional_ns):.0f} |")
    print(f"| named (rows.event_from_row) | {statistics.median(named_ns):.0f} |")
    print(
        f"ratio named/positional: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
