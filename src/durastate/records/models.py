"""The records facet's own error and the values it passes between its modules.

The facet returns plain ``dict``s (pi-durable's records); ``Address``,
``Content``, ``DocAction`` and ``Plan`` are its working values, never
returned to a caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import NotFound


class RevisionPruned(NotFound):
    """A point-in-time read names a point whose revision retention removed.

    The document was alive at that point, but ``prune_document_revisions``
    deleted the revision in effect then; ``document_revisions(id)`` lists
    the ones kept (the oldest kept is named in the message).
    """


@dataclass(frozen=True, slots=True)
class Address:
    kind: str
    scope_kind: str
    owner_id: int
    family: int
    key_value: str

    def params(self) -> tuple[Any, ...]:
        return (self.kind, self.scope_kind, self.owner_id, self.family, self.key_value)


@dataclass(frozen=True, slots=True)
class Content:
    kind: str  # "base" | "delta"
    version: int
    value: dict[str, Any] | None  # base
    ops: list[Any] | None  # delta: checked Chord ops
    data: bytes  # the value (base) or the ops (delta), as JSON


@dataclass(slots=True)
class DocAction:
    id: int
    create: dict[str, Any] | None = None  # the record to create (without createdAt)
    address: Address | None = None  # of create
    copy: tuple[int, int | None] | None = None  # (source id, at)
    content: Content | None = None
    retire: bool = False


@dataclass(slots=True)
class Plan:
    claims: list[tuple[int, str]] = field(default_factory=list)  # (id, table) in write order, entries too
    typed: list[tuple[int, str]] = field(default_factory=list)  # the claims rec_id holds (all but entries)
    conversations: list[tuple[Any, ...]] = field(default_factory=list)
    entries: list[tuple[Any, ...]] = field(default_factory=list)  # without commit_seq (index 3)
    tasks: list[tuple[Any, ...]] = field(default_factory=list)
    submissions: list[tuple[Any, ...]] = field(default_factory=list)
    documents: dict[int, DocAction] = field(default_factory=dict)
