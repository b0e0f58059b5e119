"""Multi-row statements cut to size: a shared rule of the facets that write many rows in one statement.

A statement carries at most a count of rows (its bound parameters stay
under both engines' limits) and at most ``STATEMENT_BYTES`` of values
together: PostgreSQL closes the connection on a message over 1 GB, which
128 values of up to ``max_value_size`` (64 MiB by default) could make; the
store then took it for a lost connection, retried it for its busy timeout
and raised ``StoreUnavailable`` ("retry later") for a call that could never
work. A value larger than that goes in a statement of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

STATEMENT_BYTES = 32 * 1024 * 1024


def chunk_bounds(sizes: Iterable[int], max_rows: int, max_bytes: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of consecutive runs of rows, in order, given each row's value size in bytes: at most
    ``max_rows`` rows whose sizes sum to at most ``max_bytes`` (a larger row: a run of its own). Nothing for no
    rows."""
    start = count = total = 0
    for size in sizes:
        if count > start and (count - start == max_rows or total + size > max_bytes):
            yield start, count
            start, total = count, 0
        total += size
        count += 1
    if count > start:
        yield start, count
