"""``DurastateStore``: LangGraph's long-term memory ``BaseStore`` on ``store.kv``.

Every item is one kv row in scope ``name`` (default ``b"langgraph_store"``),
namespace ``b"items"``, keyed by its namespace tuple and key so that key
order is (namespace, key) order and a namespace prefix is a key range:
each label as ``\\x02 label \\x00`` (labels hold no NUL: LangGraph refuses
them), then ``\\x01`` and the item key. The value is JSON: the item's value
dict, created/updated times (ms, from the store's clock) and its TTL.

Semantics (those of LangGraph's stores; where they differ, PostgresStore's):

* ``batch``: reads see the state before the batch; then the puts and
  deletes apply, the last one per (namespace, key) winning, atomically.
* ``search``: items under a namespace prefix in (namespace, key) order,
  ``filter`` as in InMemoryStore/PostgresStore (nested dicts partially,
  lists element-wise, ``$eq $ne $gt $gte $lt $lte``), then
  ``offset``/``limit``. With ``index=`` (LangGraph's ``IndexConfig``), a
  ``query`` ranks the filtered items by cosine similarity to the query's
  embedding, as InMemoryStore does (``_vectors`` says how; equal scores in
  (namespace, key) order, unembedded items last with score ``None``,
  ``offset`` counted over that whole order). Without ``index=`` a
  ``query`` is refused with ``InvalidRequest`` (LangGraph's stores ignore
  it and list unranked items: a silent misconfiguration).
* Embedding: a batch's puts embed their fields (the index's ``fields``, or
  the put's ``index=`` list; ``index=False`` none) and its searches their
  queries, before anything is read or written, each distinct text once
  (``embed_documents``; queries ``embed_query``, ``aembed_*`` from
  ``abatch``). A field embedded again replaces its vector; fields a put
  does not embed keep the vector they had (as in InMemoryStore and
  PostgresStore); deleting the item deletes its vectors, which expire and
  are refreshed with it.
* ``list_namespaces``: namespaces that hold at least one live item
  (InMemoryStore also lists namespaces it merely looked up), sorted,
  ``prefix``/``suffix`` conditions with ``*`` wildcards, ``max_depth``
  truncation (deduplicated), then ``offset``/``limit``.
* TTL (minutes, LangGraph's unit): the item expires at the store clock's
  ``now + ttl``; an expired item is invisible at once (kv's expiry). Reads
  with ``refresh_ttl`` (default: ``ttl_config["refresh_on_read"]``, else
  True) restart the item's TTL; a refresh never overwrites a newer value.
  ``ttl_config["default_ttl"]`` applies to puts that pass no ``ttl``.
* ``created_at`` survives updates; ``updated_at`` is the last put's time.
* Values must be JSON objects (dicts of JSON values), as PostgresStore
  stores them; anything else, NaN and infinities included (orjson would
  write them as null), is refused with ``InvalidRequest``; a value of a
  type JSON lacks (a ``datetime``, which SqliteStore stores as its ISO
  text) with ``WrongType``, also a ``TypeError`` like PostgresStore's.
* Namespaces (and search prefixes, ``list_namespaces`` paths) are tuples
  (or lists) of str: a str is refused with ``InvalidRequest`` (LangGraph
  checks only the labels, so ``"abc"`` would pass as ``("a", "b", "c")``).
* Async: ``abatch`` (behind every ``a*`` method of ``BaseStore``) runs
  ``batch`` through durastate's one async path (``_bound``), in one
  transaction when the batch puts or deletes.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from ..._json import JSON_OPTIONS, bad_json_value, has_non_finite
from ...engines.vectors import Owner
from ...errors import InvalidRequest, WrongType
from ...store import Store
from . import _vectors
from ._ann import AnnIndex
from ._bound import StoreBound
from ._filter import check_filter, predicate
from ._filter import conditions as filter_conditions
from ._vectors import VECTORS, Embedding, IndexSpec

__all__ = ["DurastateStore"]

ITEMS = b"items"
LABEL = b"\x02"
LABEL_END = b"\x00"
ITEM = b"\x01"
# Past every key that starts with an encoded namespace (the byte after one is
# ITEM or LABEL).
PAST = b"\x03"


class InvalidNamespace(InvalidRequest, InvalidNamespaceError):
    """A refused namespace: durastate's ``InvalidRequest`` and LangGraph's ``InvalidNamespaceError``."""


def _encode_namespace(namespace: tuple[str, ...]) -> bytes:
    return b"".join(LABEL + label.encode() + LABEL_END for label in namespace)


def _decode_namespace(key: bytes) -> tuple[tuple[str, ...], str]:
    """(namespace, item key) of an item's kv key."""
    labels = []
    at = 0
    while key[at : at + 1] == LABEL:
        end = key.index(LABEL_END, at)
        labels.append(key[at + 1 : end].decode())
        at = end + 1
    return tuple(labels), key[at + 1 :].decode()


def _check_namespace_type(op: Op) -> None:
    """``InvalidNamespace`` unless the op's namespace (prefix, match paths) is a tuple (or list), not a str.

    LangGraph checks only the labels, so a str passes as its characters:
    ``put("abc", ...)`` would store under ``("a", "b", "c")``.
    """
    if isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            if type(condition.path) is not tuple and not isinstance(condition.path, (tuple, list)):
                raise InvalidNamespace(
                    f"list_namespaces {condition.match_type} must be a tuple of str, "
                    f"got {type(condition.path).__name__} {condition.path!r:.80}"
                )
        return
    namespace = op.namespace_prefix if isinstance(op, SearchOp) else op.namespace
    if type(namespace) is not tuple and not isinstance(namespace, (tuple, list)):
        name = "namespace_prefix" if isinstance(op, SearchOp) else "namespace"
        raise InvalidNamespace(f"{name} must be a tuple of str, got {type(namespace).__name__} {namespace!r:.80}")


def _value_json(op: PutOp) -> bytes:
    """The JSON of a put's value; ``InvalidRequest`` for what JSON cannot hold (as PostgresStore's JSONB refuses it).

    A type JSON has no place for (a ``datetime``, ``date`` or ``time``, a
    dataclass, bytes, a set) is a ``WrongType``, also a ``TypeError`` as
    PostgresStore's refusal is; orjson alone would write the first two as
    text and an object (SqliteStore stores them so), which read back as
    something else than what was put.
    """
    value = op.value if type(op.value) is dict else dict(op.value)  # type: ignore[arg-type]
    try:
        data = orjson.dumps(value, option=JSON_OPTIONS)
    except TypeError as exc:
        message = f"value of {op.namespace}/{op.key!r} is not JSON: {exc}"
        if bad_json_value(str(exc)):
            raise InvalidRequest(message) from None
        raise WrongType(message) from None
    # orjson writes NaN and infinities as null: only a text with a null can hide one, and only one
    # that decodes to something else (C speed) before the slower walk decides (as _json.dump_json).
    if b"null" in data and orjson.loads(data) != value and has_non_finite(value):
        raise InvalidRequest(
            f"value of {op.namespace}/{op.key!r} contains NaN or infinity, which cannot be stored as JSON"
        )
    return data


def _datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _condition_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == got for want, got in zip(path, part, strict=True))


@dataclass
class _Plan:
    """A checked batch: its writes (the last op per address), the texts they embed, what to embed."""

    writes: dict[tuple[tuple[str, ...], str], PutOp] = field(default_factory=dict)
    # The JSON of each write's value (deletes have none), encoded and checked while planning.
    values: dict[tuple[tuple[str, ...], str], bytes] = field(default_factory=dict)
    texts: dict[tuple[tuple[str, ...], str], list[tuple[str, str]]] = field(default_factory=dict)
    embedding: Embedding | None = None
    # (document text -> packed vector, query -> vector), once embedded.
    embedded: tuple[dict[str, bytes], dict[str, list[float]]] = field(default_factory=lambda: ({}, {}))


class DurastateStore(StoreBound, BaseStore):
    """A LangGraph ``BaseStore`` (sync and async) on a durastate store, with optional semantic search.

    ``DurastateStore(store)`` uses an open store (the caller closes it);
    ``DurastateStore.from_url(url, **open_options)`` opens one and closes it
    with this store. ``ttl`` is LangGraph's ``TTLConfig`` (``default_ttl``
    in minutes, ``refresh_on_read``). ``index`` is LangGraph's
    ``IndexConfig`` (``embed``, ``dims``, ``fields``), as
    ``InMemoryStore(index=)`` takes it; without it ``search(query=)`` is
    refused. ``name`` is the kv scope.
    """

    supports_ttl = True

    def __init__(
        self,
        store: Store,
        *,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
        name: str = "langgraph_store",
        vector_index: bool | None = None,
    ) -> None:
        self._bind(store, name, "langgraph-store")
        self._index: IndexSpec | None = _vectors.index_spec(index) if index is not None else None
        if vector_index is not None and not isinstance(vector_index, bool):
            raise InvalidRequest(f"vector_index must be None, True or False, got {vector_index!r}")
        if vector_index and self._index is None:
            raise InvalidRequest("vector_index=True needs index= (LangGraph's IndexConfig: embed, dims)")
        if ttl is not None:
            if not isinstance(ttl, Mapping):
                raise InvalidRequest(f"ttl must be a TTLConfig dict, got {type(ttl).__name__}")
            unknown = set(ttl) - {"default_ttl", "refresh_on_read", "sweep_interval_minutes"}
            if unknown:
                raise InvalidRequest(f"unknown TTLConfig keys {sorted(unknown)}")
            default = ttl.get("default_ttl")
            if default is not None:
                self._minutes("default_ttl", default)
        self.ttl_config = ttl
        # BaseStore's put() reads index_config to tell whether index= means anything.
        self.index_config = self._index.config if self._index is not None else None
        self._kv = store.kv
        self._engine = store.engine
        self._scope = name.encode()
        # The engine's vector index (``_ann``): None without index=; inactive where the engine has none.
        self._ann = AnnIndex(store, self._scope, ITEMS, self._index, vector_index) if self._index is not None else None

    @classmethod
    def from_url(
        cls,
        url: str | os.PathLike[str] | None = None,
        *,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
        name: str = "langgraph_store",
        vector_index: bool | None = None,
        **open_options: Any,
    ) -> DurastateStore:
        """Open ``url`` (any ``durastate.open`` URL and options); closing this store closes it."""
        return cls.opened(url, open_options, ttl=ttl, index=index, name=name, vector_index=vector_index)

    # -- batch -------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops: reads on the state before the batch, then its writes, atomically.

        Texts are embedded first (``embed_documents``/``embed_query``), outside
        any transaction; a batch refused or whose embedding fails changes nothing.
        """
        ops = list(ops)
        plan = self._plan(ops)
        if plan.embedding is not None and self._index is not None:
            embeddings, embedding = self._index.embeddings, plan.embedding
            if self._index.async_only:
                raise InvalidRequest(
                    "the index's embed is an async function: call the async methods (aput, asearch, abatch), "
                    "or give a sync function or an Embeddings"
                )
            documents = embeddings.embed_documents(embedding.documents) if embedding.documents else []
            queries = [embeddings.embed_query(query) for query in embedding.queries]
            plan.embedded = embedding.finish(self._index, documents, queries)
        if self._ann is not None and self._ann.active is None:
            self._ann.ready()
        return self._run(ops, plan)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` from async code: texts embedded with ``aembed_*``, then the ops (see ``_bound``).

        The ops run in one transaction when the batch puts or deletes; a batch
        of reads only is a plain call: it takes no write lock (a TTL refresh
        at its end is one transaction of its own).
        """
        ops = list(ops)
        plan = self._plan(ops)
        if plan.embedding is not None and self._index is not None:
            embeddings, embedding = self._index.embeddings, plan.embedding
            documents = await embeddings.aembed_documents(embedding.documents) if embedding.documents else []
            queries = await asyncio.gather(*(embeddings.aembed_query(query) for query in embedding.queries))
            plan.embedded = embedding.finish(self._index, documents, queries)
        if self._ann is not None and self._ann.active is None:
            await self._aio.call(self._ann.ready)
        if plan.writes:
            return await self._aio.transact(self._run, ops, plan)
        return await self._aio.call(self._run, ops, plan)

    def _plan(self, ops: list[Op]) -> _Plan:
        """Check every op (``InvalidRequest`` before anything runs); the writes and the texts to embed."""
        plan = _Plan()
        documents: dict[str, None] = {}
        queries: dict[str, None] = {}
        for op in ops:
            if not isinstance(op, (GetOp, SearchOp, ListNamespacesOp, PutOp)):
                raise InvalidRequest(f"unknown store operation {type(op).__name__}")
            if not ((type(op) is PutOp or type(op) is GetOp) and type(op.namespace) is tuple):
                _check_namespace_type(op)  # the common case (a tuple) is checked inline above
            try:
                validate_op_namespace(op)
            except InvalidNamespaceError as exc:
                raise InvalidNamespace(str(exc)) from None
            if isinstance(op, PutOp):
                self._check_put(op)
                address = (tuple(op.namespace), op.key)
                plan.writes[address] = op
                plan.texts.pop(address, None)
                if op.value is not None:
                    plan.values[address] = _value_json(op)
                if self._index is not None and op.value is not None:
                    fields = _vectors.put_fields(self._index, op.index)
                    try:
                        plan.texts[address] = _vectors.texts_of(op.value, fields)
                    except (TypeError, ValueError) as exc:
                        raise InvalidRequest(f"value of {op.namespace}/{op.key!r} is not JSON: {exc}") from None
            elif isinstance(op, SearchOp):
                if op.query is not None and not isinstance(op.query, str):
                    raise InvalidRequest(f"search query must be a str, got {type(op.query).__name__}")
                if op.query and self._index is None:
                    raise InvalidRequest(
                        "DurastateStore has no vector index: semantic search (query=...) needs "
                        "DurastateStore(..., index={'embed': ..., 'dims': ...}); "
                        "or search by namespace prefix and filter"
                    )
                check_filter(op.filter)
                self._check_page(op.limit, op.offset)
                if op.query:
                    queries[op.query] = None
            elif isinstance(op, ListNamespacesOp):
                self._check_page(op.limit, op.offset)
        for texts in plan.texts.values():
            documents.update((text, None) for _, text in texts)
        if documents or queries:
            plan.embedding = Embedding(documents=list(documents), queries=list(queries))
        return plan

    def _run(self, ops: list[Op], plan: _Plan) -> list[Result]:
        """The checked ops with their texts embedded: reads first, then the writes in one transaction."""
        refresh: list[tuple[bytes, bytes, float]] = []
        results: list[Result] = []
        try:
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op, refresh))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, refresh, plan.embedded[1]))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                else:
                    results.append(None)
            if refresh or plan.writes:
                with self.store.transaction():
                    self._refresh(refresh)
                    self._apply(plan)
        except UnicodeEncodeError as exc:
            # A label or key with a lone surrogate, met where it is encoded (a write's transaction
            # rolled back): refused here rather than checked on every op before.
            raise InvalidRequest(
                f"namespace labels and keys must be valid unicode (no lone surrogates): {exc}"
            ) from None
        return results

    # -- validation ----------------------------------------------------------------

    @staticmethod
    def _minutes(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InvalidRequest(f"{name} must be a number of minutes > 0 (or None), got {value!r}")
        return float(value)

    @staticmethod
    def _check_page(limit: Any, offset: Any) -> None:
        for name, value in (("limit", limit), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidRequest(f"{name} must be an int >= 0, got {value!r}")

    def _check_put(self, op: PutOp) -> None:
        if not op.namespace:
            raise InvalidNamespace("namespace must not be empty")
        if op.namespace[0] == "langgraph":
            raise InvalidNamespace(f'the root label "langgraph" is reserved by LangGraph, got {op.namespace}')
        if not isinstance(op.key, str):
            raise InvalidRequest(f"key must be a str, got {type(op.key).__name__}")
        if op.value is not None and not isinstance(op.value, Mapping):
            raise InvalidRequest(f"value must be a dict (or None to delete), got {type(op.value).__name__}")
        if op.ttl is not None:
            self._minutes("ttl", op.ttl)

    # -- reads ---------------------------------------------------------------------

    def _wants_refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return bool(refresh_ttl)
        if self.ttl_config is not None:
            return bool(self.ttl_config.get("refresh_on_read", True))
        return True

    def _item(self, kv_key: bytes, raw: bytes, refresh: list[tuple[bytes, bytes, float]], wants_refresh: bool) -> Item:
        namespace, key = _decode_namespace(kv_key)
        stored = orjson.loads(raw)
        if wants_refresh and stored["ttl"] is not None:
            refresh.append((kv_key, raw, stored["ttl"]))
        return Item(
            value=stored["value"],
            key=key,
            namespace=namespace,
            created_at=_datetime(stored["created_at"]),
            updated_at=_datetime(stored["updated_at"]),
        )

    def _get(self, op: GetOp, refresh: list[tuple[bytes, bytes, float]]) -> Item | None:
        if not isinstance(op.key, str):
            raise InvalidRequest(f"key must be a str, got {type(op.key).__name__}")
        kv_key = _encode_namespace(tuple(op.namespace)) + ITEM + op.key.encode()
        raw = self._kv.get(self._scope, ITEMS, kv_key)
        if raw is None:
            return None
        return self._item(kv_key, raw, refresh, self._wants_refresh(op.refresh_ttl))

    def _search(
        self, op: SearchOp, refresh: list[tuple[bytes, bytes, float]], queries: Mapping[str, list[float]]
    ) -> list[SearchItem]:
        start = _encode_namespace(tuple(op.namespace_prefix))
        accept: Callable[[bytes], bool] | None = None
        if op.filter:
            matches = predicate(op.filter)

            def accept(raw: bytes) -> bool:
                return matches(orjson.loads(raw)["value"])

        def items() -> Iterator[tuple[bytes, bytes]]:
            """The items under the prefix that pass the filter, in (namespace, key) order (read when called)."""
            rows = self._kv.scan(self._scope, ITEMS, start=start, end=start + PAST)
            return rows if accept is None else (row for row in rows if accept(row[1]))

        found: list[tuple[tuple[bytes, bytes], float | None]] = []
        if op.query and self._index is not None:
            query = queries[op.query]
            # One snapshot for the items and their vectors.
            with self._engine.read_transaction():
                if self._ann is not None and self._ann.active and all(map(math.isfinite, query)):
                    # The stored JSON is {"value": <the item's value>, ...}: the filter's keys are under "value".
                    where = filter_conditions(op.filter, ("value",))
                    ranked = self._ann.search(query, start, start + PAST, op.offset, op.limit, accept, where)
                    if ranked is not None:
                        return self._search_items(ranked, op, refresh)
                candidates = list(items())
                if not op.filter:
                    stored = dict(self._kv.scan(self._scope, VECTORS, start=start, end=start + PAST))
                else:  # the filter's survivors only: reading every vector in the range costs more
                    keys = [kv_key for kv_key, _ in candidates]
                    stored = {
                        key: raw
                        for key, raw in zip(keys, self._kv.get_many(self._scope, VECTORS, keys), strict=True)
                        if raw is not None
                    }
            dims = self._index.dims

            def vectors_of(row: tuple[bytes, bytes]) -> Iterable[memoryview]:
                raw = stored.get(row[0])
                return _vectors.unpack_row(dims, raw).values() if raw is not None else ()

            found = _vectors.rank(query, candidates, vectors_of, dims, op.offset, op.limit, self._index.distance)
        else:
            for i, row in enumerate(items()):
                if i >= op.offset + op.limit:
                    break
                if i >= op.offset:
                    found.append((row, None))
        return self._search_items(found, op, refresh)

    def _search_items(
        self,
        found: Sequence[tuple[tuple[bytes, bytes], float | None]],
        op: SearchOp,
        refresh: list[tuple[bytes, bytes, float]],
    ) -> list[SearchItem]:
        wants_refresh = self._wants_refresh(op.refresh_ttl)
        results = []
        for (kv_key, raw), score in found:
            item = self._item(kv_key, raw, refresh, wants_refresh)
            results.append(
                SearchItem(
                    namespace=item.namespace,
                    key=item.key,
                    value=item.value,
                    created_at=item.created_at,
                    updated_at=item.updated_at,
                    score=score,
                )
            )
        return results

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = list(op.match_conditions or ())
        for condition in conditions:
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidRequest(f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}")
        if op.max_depth is not None and (
            isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int) or op.max_depth < 1
        ):
            raise InvalidRequest(f"max_depth must be an int >= 1 or None, got {op.max_depth!r}")
        # A prefix condition without wildcards narrows the scan to its range.
        fixed: tuple[str, ...] = ()
        for condition in conditions:
            if condition.match_type == "prefix":
                path = tuple(condition.path)
                literal = path[: path.index("*")] if "*" in path else path
                if len(literal) > len(fixed):
                    fixed = literal
        start = _encode_namespace(fixed)
        end = start + PAST
        found: list[tuple[str, ...]] = []
        seen: set[tuple[str, ...]] = set()
        # Skip scan: one row per distinct namespace, then past it.
        while True:
            row = next(iter(self._kv.scan(self._scope, ITEMS, start=start, end=end, limit=1)), None)
            if row is None:
                break
            namespace, _ = _decode_namespace(row[0])
            # Next: the namespaces below this one (its own items skipped)...
            start = _encode_namespace(namespace) + LABEL
            if all(_condition_matches(c, namespace) for c in conditions):
                shown = namespace[: op.max_depth] if op.max_depth is not None else namespace
                if shown not in seen:
                    seen.add(shown)
                    found.append(shown)
                if op.max_depth is not None and len(shown) == op.max_depth:
                    # ...or, at the depth shown, past everything below it: it all shows as this
                    # namespace. (A shallower namespace's children show as themselves.)
                    start = _encode_namespace(shown) + PAST
        found.sort()
        return found[op.offset : op.offset + op.limit]

    # -- writes --------------------------------------------------------------------

    def _refresh(self, refresh: list[tuple[bytes, bytes, float]]) -> None:
        """Restart the TTL of items read (and of their vectors), unless they changed since (a newer put wins)."""
        kv, scope = self._kv, self._scope
        for kv_key, raw, minutes in refresh:
            if kv.get(scope, ITEMS, kv_key) == raw:
                kv.put(scope, ITEMS, kv_key, raw, ttl=minutes * 60)
                vectors = kv.get(scope, VECTORS, kv_key)
                if vectors is not None:
                    kv.put(scope, VECTORS, kv_key, vectors, ttl=minutes * 60)

    def _apply(self, plan: _Plan) -> None:
        kv, scope, index = self._kv, self._scope, self._index
        documents = plan.embedded[0]
        now = self._engine.now_ms()
        # Vectors rows written, for the engine's index (``_ann``), in this transaction.
        indexed: list[Owner] = []
        ann = self._ann if self._ann is not None and self._ann.active else None
        for address, op in plan.writes.items():
            kv_key = _encode_namespace(address[0]) + ITEM + op.key.encode()
            if op.value is None:
                kv.delete(scope, ITEMS, keys=[kv_key])
                kv.delete(scope, VECTORS, keys=[kv_key])
                continue
            ttl = op.ttl  # BaseStore.put already put the default_ttl into the op
            seconds = ttl * 60 if ttl is not None else None
            old = kv.get(scope, ITEMS, kv_key)
            created = orjson.loads(old)["created_at"] if old is not None else now
            # {"value": ..., "created_at": ..., "updated_at": ..., "ttl": ...}, as orjson.dumps of that dict writes it.
            raw = b'{"value":%b,"created_at":%d,"updated_at":%d,"ttl":%b}' % (
                plan.values[address],
                created,
                now,
                orjson.dumps(ttl),
            )
            kv.put(scope, ITEMS, kv_key, raw, ttl=seconds)
            if index is None:
                continue
            # Fields this put does not embed keep their vectors (LangGraph's stores do the same);
            # the row is rewritten anyway so that it expires with the item.
            old_vectors = kv.get(scope, VECTORS, kv_key)
            vectors: dict[str, bytes | memoryview] = {}
            if old_vectors is not None:
                vectors.update(_vectors.unpack_row(index.dims, old_vectors, strict=False))
            for name, text in plan.texts.get(address, ()):
                vectors[name] = documents[text]
            if vectors:
                row = _vectors.pack_row(index.dims, vectors)
                kv.put(scope, VECTORS, kv_key, row, ttl=seconds)
                if ann is not None and row != old_vectors:
                    indexed.append(ann.owner(kv_key, row))
        if ann is not None:
            ann.replace(indexed)
