"""Nearest-neighbour indexes kept in the database: ``engine.vectors`` (``VectorIndexes``).

An index belongs to the kv rows of one ``(scope, ns)``: each such row (its
*owner*) has any number of vectors, one per field name. The kv row stays
the source of truth (it holds the same vectors, packed); the index is a
copy the engine keeps where the server can search it, so a caller may
always fall back to reading the kv rows and scoring them itself.

Contract of an engine that declares ``capabilities.vector_index``:

* ``ensure(table)`` creates the index if it is missing (idempotent, safe
  against concurrent callers) and returns the keys of the owners whose
  vectors it does not hold, or holds from another version of the kv row:
  what the caller must ``replace`` before searching (a store written without the index, an
  import, a writer that opted out).
* ``replace(table, owners)``, inside the caller's write transaction and
  after the owners' kv rows are written: each owner's vectors become exactly
  the given ones, marked with the digest of its kv row's value.
* Deleting or expiring-and-purging an owner's kv row deletes its vectors
  (the engine ties them to the row), whoever deletes it.
* ``nearest(table, query, ...)``: owners' vectors by distance to ``query``,
  nearest first, a key range optional. Approximate (an ANN index may miss
  some): callers re-rank what it returns and ask for more when unsure.

Vectors travel as little-endian float32 bytes (``dims`` values), the kv
rows' encoding. Distances (``DISTANCES``) are LangGraph's names.

Engines without the capability answer with this base class, which refuses
every call with ``NotSupported``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidRequest, NotSupported

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["DISTANCES", "Owner", "VectorIndexes", "VectorTable"]

DISTANCES = ("cosine", "l2", "inner_product")

# (kv key, digest of the kv row's value, [(field name, packed float32 vector)]).
Owner = tuple[bytes, bytes, Sequence[tuple[str, bytes | memoryview]]]


@dataclass(frozen=True)
class VectorTable:
    """One index: the kv rows of ``(scope, ns)``, vectors of ``dims`` values, compared by ``distance``.

    ``name`` is derived from all four, so every process finds the same index
    and changing ``dims`` or ``distance`` makes a new one (filled by
    ``ensure``'s answer) instead of mixing vectors.
    """

    scope: bytes
    ns: bytes
    dims: int
    distance: str

    def __post_init__(self) -> None:
        if isinstance(self.dims, bool) or not isinstance(self.dims, int) or self.dims < 1:
            raise InvalidRequest(f"vector dims must be an int >= 1, got {self.dims!r}")
        if self.distance not in DISTANCES:
            raise InvalidRequest(f"vector distance must be one of {DISTANCES}, got {self.distance!r}")

    @property
    def name(self) -> str:
        """16 hex digits naming the index (its table, in SQL engines)."""
        digest = hashlib.sha256(b"\x00".join([self.scope, self.ns, str(self.dims).encode(), self.distance.encode()]))
        return digest.hexdigest()[:16]


def value_digest(value: bytes) -> bytes:
    """The digest ``replace`` marks an owner's vectors with: MD5 of its kv value (a version tag, not security)."""
    return hashlib.md5(value, usedforsecurity=False).digest()


class VectorIndexes:
    """``engine.vectors`` of an engine without nearest-neighbour indexes: every call is ``NotSupported``.

    ``max_dims``: the most dimensions an index can hold (0: none).
    """

    max_dims: int = 0

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _unsupported(self) -> NotSupported:
        return NotSupported(
            f"{self.engine.url}: {type(self.engine).__name__} keeps no vector index "
            "(capabilities.vector_index is False): search the vectors exactly"
        )

    def ensure(self, table: VectorTable) -> list[bytes]:
        """Create the index if missing; the keys of the live kv rows whose vectors it lacks or holds stale."""
        raise self._unsupported()

    def replace(self, table: VectorTable, owners: Sequence[Owner]) -> None:
        """Make each owner's vectors exactly the given ones (inside the write transaction that wrote its row)."""
        raise self._unsupported()

    def nearest(
        self, table: VectorTable, query: Sequence[float], *, start: bytes, end: bytes | None, limit: int
    ) -> list[tuple[bytes, str]]:
        """``(key, field)`` of up to ``limit`` vectors with ``start <= key < end``, nearest to ``query`` first.

        ``start=b""``, ``end=None``: no bound. One entry per vector: an owner with several fields may come more than
        once. Fewer than ``limit`` entries: the range holds no more vectors
        the index can rank (cosine cannot rank a zero vector).
        """
        raise self._unsupported()
