"""Records rows read by column name.

A revision row (``MATERIALIZE``'s after its first column, ``documents_sql``'s
after its first two) is a ``Revision``: the select lists are built from its fields, so
the two cannot disagree, and the facet reads ``latest.version``, never
``latest[2]``. Other statements' rows are one or two columns wide
(``id, record``; ``record, commit_seq``) and are unpacked into names where
they are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .._json_lossless import load_lossless

if TYPE_CHECKING:
    from ..engines.base import Row


class Revision(NamedTuple):
    """One stored revision of a document (a ``{p}rec_revision`` row)."""

    seq: int  # the commit sequence that wrote it
    kind: str  # "base" | "delta"
    version: int  # the content version
    depth: int  # deltas since the logical base (0 for a base)
    content: bytes  # the value (base) or the ops (delta), as JSON
    state: bytes | None  # the materialised value: the newest row and checkpoints only


REVISION_COLUMNS = ", ".join(Revision._fields)


def revision_from_row(row: Row | None) -> Revision | None:
    """The ``Revision`` of a row selected with ``REVISION_COLUMNS`` (None for no row)."""
    return None if row is None else Revision._make(row)


def document_from_row(row: Row) -> tuple[int, Any, Revision | None]:
    """A ``documents_sql`` row as (id, record, newest revision or None)."""
    id, record, *revision = row
    return int(id), record, None if revision[0] is None else Revision._make(revision)


def chain_from_rows(rows: Sequence[Row]) -> list[tuple[int, int | None, int | None]]:
    """``CHAIN`` rows as (conversation id, parent id, parent at), child first."""
    return [
        (int(id), None if parent_id is None else int(parent_id), None if parent_at is None else int(parent_at))
        for id, parent_id, parent_at in rows
    ]


def page_of(rows: Sequence[tuple[int, Any]], limit: int, order: str) -> dict[str, Any]:
    """A page of ``(id, record)`` rows (``limit + 1`` read: the extra one says there is a next page)."""
    items = [load_lossless(record) for _id, record in rows[:limit]]
    if len(rows) <= limit:
        return {"items": items}
    last_id, _record = rows[limit - 1]
    return {"items": items, "next": {"after": last_id, "order": order}}
