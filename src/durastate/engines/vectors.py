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
* ``nearest_rows(table, query, ..., sibling=ns, where=conditions)``: the
  same, restricted to live owners whose *sibling* row (the kv row of the
  same scope and key in namespace ``sibling``) is live and whose value, read
  as JSON, meets every ``JsonCondition``; each with the owner's and the
  sibling's values, so the caller reads nothing more. The filter runs in the
  engine's search (the index walk skips what it rejects, then goes on), so a
  selective filter still fills ``limit``. An engine may let through rows a
  condition rejects (it treats a condition it cannot evaluate exactly as
  true: callers re-check), never drop one it accepts.

Vectors travel as little-endian float32 bytes (``dims`` values), the kv
rows' encoding. Distances (``DISTANCES``) are LangGraph's names.

Engines without the capability answer with this base class, which refuses
every call with ``NotSupported``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from ..errors import InvalidRequest, NotSupported

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["DISTANCES", "HnswParams", "JsonCondition", "Neighbour", "Owner", "VectorIndexes", "VectorTable"]

DISTANCES = ("cosine", "l2", "inner_product")
# JsonCondition operators: "eq"/"ne" compare a str, a float or None; the others order a float.
CONDITION_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
# pgvector's HNSW bounds (m 2..100, ef_construction 4..1000 and at least 2 * m) and defaults.
HNSW_M = (2, 100, 16)
HNSW_EF_CONSTRUCTION = (4, 1000, 64)

# (kv key, digest of the kv row's value, [(field name, packed float32 vector)]).
Owner = tuple[bytes, bytes, Sequence[tuple[str, bytes | memoryview]]]


@dataclass(frozen=True)
class HnswParams:
    """How an HNSW index is built: ``m`` links a node, ``ef_construction`` candidates an insert (pgvector's names)."""

    m: int = HNSW_M[2]
    ef_construction: int = HNSW_EF_CONSTRUCTION[2]

    def __post_init__(self) -> None:
        for name, value, (low, high, _) in (
            ("m", self.m, HNSW_M),
            ("ef_construction", self.ef_construction, HNSW_EF_CONSTRUCTION),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidRequest(f"HNSW {name} must be an int in {low}..{high}, got {value!r}")
        if self.ef_construction < 2 * self.m:
            raise InvalidRequest(
                f"HNSW ef_construction must be at least 2 * m ({2 * self.m}), got {self.ef_construction}"
            )

    @property
    def default(self) -> bool:
        return self == HnswParams()


@dataclass(frozen=True)
class VectorTable:
    """One index: the kv rows of ``(scope, ns)``, vectors of ``dims`` values, compared by ``distance``.

    ``name`` is derived from all four, so every process finds the same index
    and changing ``dims`` or ``distance`` makes a new one (filled by
    ``ensure``'s answer) instead of mixing vectors.

    ``hnsw``: how the engine's approximate index is built (its HNSW
    parameters); None: no approximate index, every search is exact (a scan).
    Not part of ``name``: the vectors are the same whatever their index.
    """

    scope: bytes
    ns: bytes
    dims: int
    distance: str
    hnsw: HnswParams | None = field(default_factory=HnswParams)

    def __post_init__(self) -> None:
        if isinstance(self.dims, bool) or not isinstance(self.dims, int) or self.dims < 1:
            raise InvalidRequest(f"vector dims must be an int >= 1, got {self.dims!r}")
        if self.distance not in DISTANCES:
            raise InvalidRequest(f"vector distance must be one of {DISTANCES}, got {self.distance!r}")
        if self.hnsw is not None and not isinstance(self.hnsw, HnswParams):
            raise InvalidRequest(f"vector hnsw must be HnswParams or None, got {self.hnsw!r}")

    @property
    def name(self) -> str:
        """16 hex digits naming the index (its table, in SQL engines)."""
        digest = hashlib.sha256(b"\x00".join([self.scope, self.ns, str(self.dims).encode(), self.distance.encode()]))
        return digest.hexdigest()[:16]


@dataclass(frozen=True)
class JsonCondition:
    """A test of the JSON value at ``path`` in a sibling row's value (``nearest_rows``'s ``where``).

    ``path``: object keys from the top, each a str; the condition holds only
    when every shorter prefix of the path is an object (a missing key reads
    as missing, not as an error). ``op``:

    * ``"eq"``: a str operand: the value is that string; None: the value is
      missing or null; a float: the value is a number, or a boolean (true 1,
      false 0), equal to it as a float64.
    * ``"ne"``: a str operand: the value is missing or anything but that
      string; None: the value is present and not null.
    * ``"lt" "le" "gt" "ge"``: a float operand (not NaN): the value is a
      number or boolean that orders so against it as a float64, or a string
      (which may spell a number: the engine lets every string through).
    """

    path: tuple[str, ...]
    op: str
    operand: str | float | None

    def __post_init__(self) -> None:
        if not self.path or not all(isinstance(k, str) for k in self.path):
            raise InvalidRequest(f"a JSON condition's path must be a non-empty tuple of str, got {self.path!r}")
        if self.op not in CONDITION_OPS:
            raise InvalidRequest(f"a JSON condition's op must be one of {CONDITION_OPS}, got {self.op!r}")
        operand = self.operand
        if self.op in ("eq", "ne"):
            valid = operand is None or isinstance(operand, str) or (self.op == "eq" and _is_finite_float(operand))
        else:
            valid = _is_finite_float(operand) or operand in (math.inf, -math.inf)
        if not valid:
            raise InvalidRequest(f"JSON condition {self.op!r} cannot take the operand {operand!r}")


def _is_finite_float(value: object) -> bool:
    return type(value) is float and math.isfinite(value)


class Neighbour(NamedTuple):
    """One vector ``nearest_rows`` found: its owner's key, its field, the owner's value and the sibling's value."""

    key: bytes
    field: str
    owner: bytes
    sibling: bytes


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

    def nearest_rows(
        self,
        table: VectorTable,
        query: Sequence[float],
        *,
        start: bytes,
        end: bytes | None,
        limit: int,
        sibling: bytes,
        where: Sequence[JsonCondition] = (),
    ) -> list[Neighbour]:
        """``nearest``'s vectors of live owners whose sibling row is live and meets ``where``, with both values.

        The sibling row: the kv row of the owner's scope and key in namespace
        ``sibling``. Fewer than ``limit`` entries: no more vectors in the
        range pass (the filter included). Conditions are tested on the
        sibling's value read as UTF-8 JSON (see ``JsonCondition``); an engine
        may let through a row a condition rejects, never drop one it accepts.
        """
        raise self._unsupported()
