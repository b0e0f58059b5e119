"""``DurastateStore``'s searches through the engine's vector index (``engine.vectors``), when it keeps one.

The kv vectors rows (``_vectors``) stay the source of truth; the engine's
index (pgvector on PostgreSQL, ``engines.postgres_vector``) is a copy of
them, written in the transaction that writes the rows, and deleted with
them by the engine. At first use the store asks the engine to create the
index and fills in what it lacks or holds stale (a store written before,
by a writer that opted out, an import).

A search asks the index for candidates, nearest first, in the prefix's key
range and passing what the engine can test of the filter
(``_filter.conditions``, in the engine's SQL), each with its item and
vectors rows (``engine.vectors.nearest_rows``: one statement). It scores
them exactly as the exact search does (from the kv rows, in float64), so
scores and the order of equal scores are the exact search's, and tests each
item with the filter's own semantics (``_filter.predicate``). The page is
taken from the candidates when it is settled: it is full and its last score
is above the score of the farthest vector fetched (an item not fetched
scores at most that, in an exact index), and, for cosine, above 0 (the
index cannot rank a zero vector, which scores 0); or the engine returned
fewer than asked, so every matching vector of the range is a candidate.
Otherwise four times as many are fetched, up to ``FETCH_MAX``; past that, or
when the page reaches items with no vector (score None, listed by the exact
search), the exact search answers. The engine answers small ranges exactly
(pgvector: a scan in C) and walks its approximate index for big ones, where
an item the walk misses can be missing from a page
(``tests/integrations/langgraph/test_store_pgvector.py`` and
``bench/langgraph_search.py`` measure recall).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ...engines.vectors import JsonCondition, Owner, VectorTable, value_digest
from ...errors import InvalidRequest, NotSupported
from ...store import Store
from . import _vectors
from ._vectors import VECTORS, IndexSpec

# How many vectors a search fetches from the index at most before the exact search answers instead.
FETCH_MAX = 4000
# Owners filled per transaction at first use.
FILL_BATCH = 500


class AnnIndex:
    """One store's use of ``engine.vectors``: created and filled at first use (``ready``), then kept and searched."""

    def __init__(self, store: Store, scope: bytes, items: bytes, spec: IndexSpec, wanted: bool | None) -> None:
        engine = store.engine
        self._store = store
        self._scope = scope
        self._items = items
        self._dims = spec.dims
        self._table = VectorTable(scope=scope, ns=VECTORS, dims=spec.dims, distance=spec.distance, hnsw=spec.hnsw)
        reason = None
        if not engine.capabilities.vector_index:
            reason = f"{engine.url}: the engine keeps no vector index (on PostgreSQL: CREATE EXTENSION vector)"
        elif engine.read_only:  # the index is created and filled at first use: that writes
            reason = f"{engine.url}: opened read_only"
        elif spec.dims > engine.vectors.max_dims:
            reason = (
                f"the engine's vector index holds at most {engine.vectors.max_dims} dims, the index has {spec.dims}"
            )
        if reason is not None and wanted:
            raise NotSupported(f"vector_index=True: {reason}")
        # None: not created and filled yet; then True (in use) or False (exact search).
        self.active: bool | None = None if reason is None and wanted is not False else False
        self._lock = threading.Lock()

    def ready(self) -> None:
        """Create the index and fill in what it lacks, once (outside any transaction)."""
        if self.active is not None:
            return
        with self._lock:
            if self.active is not None:
                return
            vectors, kv = self._store.engine.vectors, self._store.kv
            stale = vectors.ensure(self._table)
            for at in range(0, len(stale), FILL_BATCH):
                keys = stale[at : at + FILL_BATCH]
                with self._store.transaction():
                    # The rows as they are now: a writer may have changed them since ensure() read them.
                    rows = [(k, raw) for k, raw in zip(keys, kv.get_many(self._scope, VECTORS, keys), strict=True)]
                    try:
                        owners = [self.owner(k, raw) for k, raw in rows if raw is not None]
                    except InvalidRequest:
                        # Vectors of other dims (dims changed): the exact search says so at each search.
                        self.active = False
                        return
                    vectors.replace(self._table, owners)
            self.active = True

    def owner(self, key: bytes, raw: bytes) -> Owner:
        """What the index holds for a vectors row: its fields' vectors, marked with the row's digest."""
        return key, value_digest(raw), list(_vectors.unpack_row(self._dims, raw).items())

    def replace(self, owners: Sequence[Owner]) -> None:
        """Inside the write transaction that wrote the owners' vectors rows."""
        if owners:
            self._store.engine.vectors.replace(self._table, owners)

    def search(
        self,
        query: Sequence[float],
        start: bytes,
        end: bytes,
        offset: int,
        limit: int,
        accept: Callable[[bytes], bool] | None,
        where: Sequence[JsonCondition] = (),
    ) -> list[tuple[tuple[bytes, bytes], float]] | None:
        """The page ``[offset:offset+limit]`` of the items in ``[start, end)`` ranked by ``query``, or None.

        ``accept(item row)``: the search's filter (None: every item), which
        decides; ``where``: what of it the engine tests while it ranks (every
        item ``accept`` takes must meet it). Call it inside a read
        transaction (one snapshot). None: the page is not settled from the
        candidates (see the module docstring); the caller runs the exact search.
        """
        need = offset + limit
        if need == 0:
            return []
        dims, distance = self._dims, self._table.distance
        # A filter the engine cannot test drops candidates: start wider (a scan costs the same for 20 rows or 200).
        fetch = max(2 * need, need + 10) if accept is None or where else max(8 * need, 100)
        vectors = self._store.engine.vectors
        # Every item's key starts with a namespace label: the empty prefix is the whole table.
        bound_end = None if start == b"" else end
        while fetch <= FETCH_MAX:
            found = vectors.nearest_rows(
                self._table, query, start=start, end=bound_end, limit=fetch, sibling=self._items, where=where
            )
            # Fewer than asked: every vector of the range that the engine's filter passes is here.
            complete = len(found) < fetch
            candidates: list[tuple[bytes, bytes]] = []
            packed: list[bytes | memoryview] = []
            owners: list[int] = []
            seen: set[bytes] = set()
            for key, _, owner, item in found:
                if key in seen:
                    continue
                seen.add(key)
                if accept is not None and not accept(item):
                    continue
                for vector in _vectors.unpack_row(dims, owner).values():
                    owners.append(len(candidates))
                    packed.append(vector)
                candidates.append((key, item))
            last = found[-1] if found else None
            farthest = _vectors.unpack_row(dims, last.owner).get(last.field) if last is not None else None
            if farthest is None and not complete:  # the index holds a field the row no longer has: ask again
                fetch *= 4
                continue
            scores = _vectors.similarity(
                distance, query, [*packed, *([farthest] if farthest is not None else [])], dims
            )
            best: dict[int, float] = {}
            for i, score in zip(owners, scores, strict=False):
                if i not in best or score > best[i]:
                    best[i] = score
            ranked = sorted(best, key=lambda i: (-best[i], candidates[i][0]))
            if len(ranked) >= need:
                page = [(candidates[i], best[i]) for i in ranked[offset:need]]
                if complete:
                    return page  # every scored item of the range is a candidate
                worst = best[ranked[need - 1]]
                if worst > scores[-1] and (distance != "cosine" or worst > 0):
                    return page
            elif complete:
                return None  # the page reaches the unscored items: the exact search lists them
            fetch *= 4
        return None
