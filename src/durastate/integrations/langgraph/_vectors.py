"""Semantic search for ``DurastateStore``: index configuration, what a put embeds, stored vectors, ranking.

The configuration is LangGraph's ``IndexConfig`` (as ``InMemoryStore(index=)``
and ``PostgresStore(index=)`` take it): ``embed`` (a LangChain
``Embeddings``, a sync or async function of a list of texts, or a
``"provider:model"`` string LangChain resolves), ``dims`` and ``fields``
(JSON paths, LangGraph's syntax: ``"a.b"``, ``"items[*].text"``,
``"{a,b}"``; default ``["$"]``, the whole value as JSON). Text extraction
and path parsing are LangGraph's own functions (``get_text_at_path``,
``tokenize_path``), so a field yields the same texts, and a field with
several texts the same ``path.i`` names, as in LangGraph's stores.

Stored vectors: one kv row per indexed item (namespace ``b"vectors"``, the
item's kv key), written and expiring with the item: a version byte, the
dimension count (u32), then per field name a u16 length, the UTF-8 name and
the vector as little-endian float32 (4 bytes a dimension, half of what a
float64 list costs, and what pgvector stores).

Ranking (InMemoryStore's): the cosine similarity of the query's vector and
each stored vector (0.0 when either has norm 0; with ``distance_type`` l2
or inner_product, PostgresStore's scores: minus the Euclidean distance, the
inner product), an item's score the best of its fields' (max pooling), items by score descending, equal scores in
(namespace, key) order; items with no vector follow the scored ones with
score ``None``, in (namespace, key) order; then ``offset``/``limit``.
Scores are computed in float64 from the stored float32 values (NumPy when
it is importable, else plain Python: same formula, same results up to the
last bits of a sum).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import operator
import struct
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import get_text_at_path, tokenize_path

from ...engines.vectors import DISTANCES, HnswParams
from ...errors import InvalidRequest

VECTORS = b"vectors"
FORMAT = 1
HEADER = struct.Struct("<BI")
NAME_LENGTH = struct.Struct("<H")
INDEX_KEYS = {"embed", "dims", "fields", "distance_type", "ann_index_config"}

# Tests set this to False to check the plain-Python scoring against NumPy's.
use_numpy = True


@functools.cache
def _numpy() -> Any:
    """NumPy if it is installed (optional, as for LangGraph's InMemoryStore), imported at the first search."""
    try:
        import numpy
    except ImportError:  # pragma: no cover - exercised where NumPy is absent
        return None
    return numpy


@dataclass(frozen=True)
class IndexSpec:
    """A validated index configuration: the embeddings and the fields (name, tokenized path)."""

    embeddings: Any  # langchain_core.embeddings.Embeddings
    dims: int
    distance: str  # "cosine", "l2" or "inner_product" (LangGraph's distance_type)
    fields: tuple[tuple[str, str | list[str]], ...]
    config: Mapping[str, Any]
    # ann_index_config: the engine's HNSW parameters, or None for "flat" (exact search, no ANN index).
    hnsw: HnswParams | None
    # An async function has no sync twin: LangGraph's wrapper would raise ValueError from a sync call.
    async_only: bool


def index_spec(index: Any) -> IndexSpec:
    """Validate LangGraph's ``IndexConfig``; ``InvalidRequest`` says what is wrong."""
    if not isinstance(index, Mapping):
        raise InvalidRequest(f"index must be an IndexConfig dict, got {type(index).__name__}")
    unknown = set(index) - INDEX_KEYS
    if unknown:
        raise InvalidRequest(f"unknown IndexConfig keys {sorted(unknown)}; supported: {sorted(INDEX_KEYS)}")
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise InvalidRequest(f"index dims must be an int >= 1, got {dims!r}")
    # PostgresStore's metrics and scores (InMemoryStore knows only cosine, PostgresStore's default).
    distance = index.get("distance_type", "cosine")
    if distance not in DISTANCES:
        raise InvalidRequest(f"index distance_type must be one of {list(DISTANCES)}, got {distance!r}")
    # As LangGraph's stores read it: none or empty is the whole value, one str is one field.
    fields = index.get("fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not all(isinstance(f, str) for f in fields):
        raise InvalidRequest(f"index fields must be a list of str paths, got {fields!r}")
    embed = index.get("embed")
    if embed is None:
        raise InvalidRequest("index needs embed: an Embeddings, a function of a list of texts, or a provider string")
    # LangGraph's own wrapper: an Embeddings passes through, a function is wrapped, a string resolved.
    from langgraph.store.base.embed import EmbeddingsLambda, ensure_embeddings

    try:
        embeddings = ensure_embeddings(embed)
    except (ValueError, TypeError) as exc:
        raise InvalidRequest(f"index embed: {exc}") from None
    return IndexSpec(
        embeddings=embeddings,
        async_only=isinstance(embeddings, EmbeddingsLambda) and getattr(embeddings, "func", None) is None,
        dims=dims,
        distance=distance,
        fields=tuple(_field(path, config=True) for path in fields),
        config=dict(index),
        hnsw=ann_index(index.get("ann_index_config")),
    )


def ann_index(config: Any) -> HnswParams | None:
    """PostgresStore's ``ann_index_config`` as the engine's index: HNSW parameters, or None for ``"flat"``.

    ``kind`` ``"hnsw"`` (the default; ``m``, ``ef_construction``) or
    ``"flat"`` (no approximate index: every search exact); ``vector_type``
    ``"vector"``. ``"ivfflat"``, ``"halfvec"`` and unknown keys are refused
    (``InvalidRequest``): durastate's index is HNSW over float32 vectors.
    Checked on every engine, so a configuration means the same on SQLite
    (where no index is kept and the search is exact) and on PostgreSQL.
    """
    if config is None:
        return HnswParams()
    if not isinstance(config, Mapping):
        raise InvalidRequest(f"ann_index_config must be a dict, got {type(config).__name__}")
    kind = config.get("kind", "hnsw")
    vector_type = config.get("vector_type", "vector")
    if kind == "ivfflat":
        raise InvalidRequest(
            "ann_index_config kind 'ivfflat' is not supported: durastate's vector index is HNSW;"
            " use kind 'hnsw' (m, ef_construction) or 'flat' (exact search)"
        )
    if kind not in ("hnsw", "flat"):
        raise InvalidRequest(f"ann_index_config kind must be 'hnsw' or 'flat', got {kind!r}")
    if vector_type != "vector":
        raise InvalidRequest(
            f"ann_index_config vector_type {vector_type!r} is not supported: durastate stores and indexes"
            " float32 vectors ('vector')"
        )
    allowed = {"kind", "vector_type"} | ({"m", "ef_construction"} if kind == "hnsw" else set())
    unknown = set(config) - allowed
    if unknown:
        raise InvalidRequest(f"ann_index_config of kind {kind!r} takes {sorted(allowed)}, got also {sorted(unknown)}")
    if kind == "flat":
        return None
    return HnswParams(
        m=config.get("m", HnswParams.m), ef_construction=config.get("ef_construction", HnswParams.ef_construction)
    )


def _field(path: str, *, config: bool) -> tuple[str, str | list[str]]:
    # "$" in the configuration is the whole value; in a put's index= list LangGraph tokenizes it.
    if config and path == "$":
        return path, path
    try:
        return path, tokenize_path(path)
    except (ValueError, IndexError) as exc:
        raise InvalidRequest(f"invalid index field path {path!r}: {exc}") from None


def put_fields(spec: IndexSpec, index: Any) -> tuple[tuple[str, str | list[str]], ...]:
    """The fields a put embeds: the configuration's (``index=None``), none (``False``) or its list."""
    if index is None:
        return spec.fields
    if index is False:
        return ()
    if isinstance(index, str) or not isinstance(index, Sequence) or not all(isinstance(p, str) for p in index):
        raise InvalidRequest(f"put index must be None, False or a list of str paths, got {index!r}")
    return tuple(_field(path, config=False) for path in index)


def texts_of(value: Mapping[str, Any], fields: Iterable[tuple[str, str | list[str]]]) -> list[tuple[str, str]]:
    """(field name, text) pairs a value yields: ``path`` for one text, ``path.i`` for each of several."""
    found: list[tuple[str, str]] = []
    for path, tokens in fields:
        texts = get_text_at_path(value, tokens)
        if len(texts) == 1:
            found.append((path, texts[0]))
        else:
            found.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
    return found


@dataclass
class Embedding:
    """What one batch needs embedded: documents (puts' texts, each once) and queries (each once)."""

    documents: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    def finish(
        self, spec: IndexSpec, documents: Sequence[Sequence[float]], queries: Sequence[Sequence[float]]
    ) -> tuple[dict[str, bytes], dict[str, list[float]]]:
        """Check what the embedding function returned: documents as float32 bytes, queries as floats."""
        if len(documents) != len(self.documents) or len(queries) != len(self.queries):
            raise InvalidRequest(
                f"the embedding function returned {len(documents)} vectors for {len(self.documents)} texts"
            )
        return (
            {text: pack_vector(spec.dims, vector) for text, vector in zip(self.documents, documents, strict=True)},
            {text: _floats(spec.dims, vector) for text, vector in zip(self.queries, queries, strict=True)},
        )


def _floats(dims: int, vector: Any) -> list[float]:
    try:
        floats = [float(x) for x in vector]
    except (TypeError, ValueError):
        raise InvalidRequest(f"the embedding function returned a non-vector: {type(vector).__name__}") from None
    if len(floats) != dims:
        raise InvalidRequest(f"the embedding function returned a vector of {len(floats)} dims, index dims is {dims}")
    return floats


def pack_vector(dims: int, vector: Any) -> bytes:
    """A vector as ``dims`` little-endian float32 values."""
    floats = _floats(dims, vector)
    try:
        return struct.pack(f"<{dims}f", *floats)
    except OverflowError:
        raise InvalidRequest("the embedding function returned a value out of float32 range") from None


def pack_row(dims: int, vectors: Mapping[str, bytes | memoryview]) -> bytes:
    """A vectors row: header, then per field name its length, name and packed vector."""
    parts: list[bytes | memoryview] = [HEADER.pack(FORMAT, dims)]
    for name, packed in vectors.items():
        encoded = name.encode()
        parts += [NAME_LENGTH.pack(len(encoded)), encoded, packed]
    return b"".join(parts)


def unpack_row(expected_dims: int, raw: bytes, *, strict: bool = True) -> dict[str, memoryview]:
    """Field name -> packed vector of a vectors row (views of ``raw``, not copies).

    A row written with other dims (the index's ``dims`` changed) is refused,
    or with ``strict=False`` (a put replacing it) read as no vectors.
    """
    version, dims = HEADER.unpack_from(raw)
    if version != FORMAT:
        raise InvalidRequest(f"stored vectors have format {version}, this durastate reads format {FORMAT}")
    if dims != expected_dims:
        if not strict:
            return {}
        raise InvalidRequest(
            f"stored vectors have {dims} dims but the index has {expected_dims}: "
            "re-put the items (or use another store name) after changing dims"
        )
    vectors: dict[str, memoryview] = {}
    view = memoryview(raw)
    at, width = HEADER.size, 4 * dims
    while at < len(raw):
        (length,) = NAME_LENGTH.unpack_from(raw, at)
        at += NAME_LENGTH.size
        name = raw[at : at + length].decode()
        at += length
        vectors[name] = view[at : at + width]
        at += width
    return vectors


def _as_float64(np: Any, query: Sequence[float], packed: Sequence[bytes | memoryview], dims: int) -> tuple[Any, Any]:
    """The packed float32 vectors as one float64 matrix (a row each) and ``query`` as a float64 vector."""
    matrix = np.frombuffer(b"".join(packed), dtype="<f4").reshape(len(packed), dims).astype(np.float64)
    return matrix, np.asarray(query, dtype=np.float64)


def cosine(query: Sequence[float], packed: Sequence[bytes | memoryview], dims: int) -> list[float]:
    """Cosine similarity of ``query`` and each packed vector, in float64; 0.0 where a norm is 0."""
    if not packed:
        return []
    np = _numpy() if use_numpy else None
    if np is not None:
        matrix, x = _as_float64(np, query, packed, dims)
        x_norm = float(np.linalg.norm(x))
        norms = np.linalg.norm(matrix, axis=1)
        scores = np.zeros(len(packed), dtype=np.float64)
        if x_norm != 0:
            mask = norms != 0
            scores[mask] = (matrix[mask] @ x) / (norms[mask] * x_norm)
        return [float(s) for s in scores.tolist()]
    x_norm = math.sqrt(sum(map(operator.mul, query, query)))
    result = []
    for raw in packed:
        y = array("f")
        y.frombytes(raw)  # (array("f", view) would read a memoryview as a list of byte values)
        y_norm = math.sqrt(sum(map(operator.mul, y, y)))
        if x_norm == 0 or y_norm == 0:
            result.append(0.0)
        else:
            result.append(sum(map(operator.mul, y, query)) / (y_norm * x_norm))
    return result


def similarity(distance: str, query: Sequence[float], packed: Sequence[bytes | memoryview], dims: int) -> list[float]:
    """Scores of the packed vectors for ``query``, higher is nearer, as PostgresStore scores them.

    cosine: the cosine similarity (``cosine``); l2: minus the Euclidean
    distance; inner_product: the inner product. In float64.
    """
    if distance == "cosine":
        return cosine(query, packed, dims)
    if not packed:
        return []
    np = _numpy() if use_numpy else None
    if np is not None:
        matrix, x = _as_float64(np, query, packed, dims)
        scores = -np.linalg.norm(matrix - x, axis=1) if distance == "l2" else matrix @ x
        return [float(s) for s in scores.tolist()]
    result = []
    for raw in packed:
        y = array("f")
        y.frombytes(raw)
        if distance == "l2":
            result.append(-math.sqrt(sum((a - b) * (a - b) for a, b in zip(y, query, strict=True))))
        else:
            result.append(sum(map(operator.mul, y, query)))
    return result


def rank(
    query: Sequence[float],
    candidates: Sequence[Any],
    vectors_of: Callable[[Any], Iterable[bytes | memoryview]],
    dims: int,
    offset: int,
    limit: int,
    distance: str = "cosine",
) -> list[tuple[Any, float | None]]:
    """The page ``[offset:offset+limit]`` of ``candidates`` (in (namespace, key) order) ranked by ``query``."""
    owners: list[int] = []
    packed: list[bytes | memoryview] = []
    for i, candidate in enumerate(candidates):
        for vector in vectors_of(candidate):
            owners.append(i)
            packed.append(vector)
    best: dict[int, float] = {}
    for i, score in zip(owners, similarity(distance, query, packed, dims), strict=True):
        if i not in best or score > best[i]:
            best[i] = score
    end = offset + limit
    # The index breaks equal scores in (namespace, key) order; only the first `end` are needed.
    top = heapq.nsmallest(end, best, key=lambda i: (-best[i], i))
    page: list[tuple[Any, float | None]] = [(candidates[i], best[i]) for i in top[offset:]]
    if len(top) < end:  # the page reaches past the scored items, into the unscored ones
        unscored = (c for i, c in enumerate(candidates) if i not in best)
        skip = max(0, offset - len(best))
        page += [(c, None) for c in itertools.islice(unscored, skip, skip + end - max(offset, len(best)))]
    return page
