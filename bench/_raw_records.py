"""Plain-SQL anchors of the records facet's reads, on the facet's own statements (what its code adds is the gap)."""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from durastate.records import MAX_CHAIN_DEPTH, MAX_SAFE_INTEGER, Records


class Raw(Protocol):
    def all(self, sql: str, params: Any) -> list[Any]: ...


def fork_scan(raw: Raw, records: Records, leaf: int, limit: int = 50) -> list[Any]:
    """The newest ``limit`` entries visible from conversation ``leaf``: its fork chain, newest first, decoded.

    The statements ``records.scan_entries`` runs (the chain, then each
    conversation's entries below its child's fork point), without its checks
    and paging.
    """
    chain = raw.all(records._chain, (leaf, MAX_CHAIN_DEPTH))
    rows: list[Any] = []
    upper = MAX_SAFE_INTEGER
    for conv_id, parent_id, parent_at in chain:
        rows += raw.all(records._entries["DESC"], (conv_id, -1, upper, limit + 1 - len(rows)))
        if len(rows) > limit or parent_id is None:
            break
        upper = min(upper, parent_at)
    return [orjson.loads(record) for _, record in rows[:limit]]
