"""What the records benches share: their entries, the fork chain they scan, and the plain-SQL anchor of that scan.

The anchor runs the records facet's own statements on a bare connection:
the gap to the facet is what its code adds.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from durastate.records import MAX_CHAIN_DEPTH, MAX_SAFE_INTEGER, Records

CHAIN_BASE = 10_000_000  # the fork chain's ids start here (apart from any other rows)


def entry_value(id: int, conversation_id: int) -> dict[str, Any]:
    """An entry of ``conversation_id``: 80 characters of text."""
    return {"id": id, "conversationId": conversation_id, "role": "user", "text": "x" * 80}


def fork_chain(records: Records, depth: int = 10, entries: int = 5) -> int:
    """Commit a chain of ``depth`` conversations, each forked from the last entry of the one before; the leaf's id.

    Each conversation holds ``entries`` entries; ids are consecutive from
    CHAIN_BASE (a conversation, then its entries).
    """
    parent: tuple[int, int] | None = None
    conv = CHAIN_BASE
    for _ in range(depth):
        ids = list(range(conv + 1, conv + 1 + entries))
        value: dict[str, Any] = {"id": conv}
        if parent is not None:
            value["parent"] = {"conversationId": parent[0], "at": parent[1]}
        writes = [{"type": "conversation", "value": value}]
        writes += [{"type": "entry", "value": entry_value(i, conv)} for i in ids]
        records.commit(writes)
        parent = (conv, ids[-1])
        conv = ids[-1] + 1
    assert parent is not None
    return parent[0]


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
