"""The records facet's own error and the values it passes between its modules.

The facet returns plain ``dict``s (pi-durable's records); ``Address``,
``Content``, ``DocAction`` and ``Plan`` are its working values, never
returned to a caller.
"""

from __future__ import annotations

from dataclasses import dataclass
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


class Plan:
    """A checked batch, split by table (built by ``inputs.plan_commit``).

    A plain class, not a dataclass: one is built per commit, and list
    literals are cheaper than eight ``default_factory`` calls.
    """

    __slots__ = ("claims", "conversations", "documents", "entries", "submissions", "tasks", "typed")

    def __init__(self) -> None:
        self.claims: list[tuple[int, str]] = []  # (id, table) in write order, entries too
        self.typed: list[tuple[int, str]] = []  # the claims rec_id holds (all but entries)
        self.conversations: list[tuple[Any, ...]] = []
        self.entries: list[Any] = []  # flat: id, conversation_id, head, None (commit_seq), record per entry
        self.tasks: list[tuple[Any, ...]] = []
        self.submissions: list[tuple[Any, ...]] = []
        self.documents: dict[int, DocAction] = {}
