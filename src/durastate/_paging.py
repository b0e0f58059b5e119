"""Streaming a long result page by page (keyset continuation).

A facet that can return more rows than should sit in memory reads them
``PAGE_SIZE`` at a time, each page continuing after the last row of the
previous one (by key or ordinal, never by OFFSET), and hands the caller one
iterator. The first page is read eagerly, so argument errors and an
unavailable store surface at the call; when it already holds everything,
the caller gets a plain list iterator and no generator is involved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from ._validate import PAGE_SIZE

R = TypeVar("R")

# fetch(last_row_of_previous_page_or_None, how_many) -> rows
PageFetcher = Callable[[R | None, int], list[R]]


def stream_pages(fetch: PageFetcher[R], limit: int | None, page_size: int = PAGE_SIZE) -> Iterator[R]:
    """All rows ``fetch`` yields page after page, at most ``limit`` (None: all)."""
    want = page_size if limit is None else min(limit, page_size)
    rows = fetch(None, want)
    if len(rows) < want or (limit is not None and limit <= page_size):
        return iter(rows)
    return _more_pages(fetch, rows, limit, page_size)


def _more_pages(fetch: PageFetcher[R], rows: list[R], limit: int | None, page_size: int) -> Iterator[R]:
    remaining = limit
    while True:
        yield from rows
        if remaining is not None:
            remaining -= len(rows)
            if remaining <= 0:
                return
        if len(rows) < page_size:
            return
        rows = fetch(rows[-1], page_size if remaining is None else min(remaining, page_size))
