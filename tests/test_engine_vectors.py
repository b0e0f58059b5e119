"""``engine.vectors`` (``engines.vectors``) on every engine: refused where not declared, kept where declared.

PostgreSQL declares ``capabilities.vector_index`` when pgvector is installed
in the database (CI's server has none: there the refusal is what runs);
tests/integrations/langgraph/test_store_pgvector.py installs it where the
server has it and tests the store's use of it.
"""

from __future__ import annotations

import struct

import pytest

import durastate
from durastate.engines.vectors import VectorTable

TABLE = VectorTable(scope=b"scope", ns=b"vectors", dims=3, distance="cosine")


def packed(*values: float) -> bytes:
    return struct.pack("<3f", *values)


def test_vector_table_is_validated() -> None:
    with pytest.raises(durastate.InvalidRequest, match="dims"):
        VectorTable(scope=b"s", ns=b"n", dims=0, distance="cosine")
    with pytest.raises(durastate.InvalidRequest, match="distance"):
        VectorTable(scope=b"s", ns=b"n", dims=3, distance="hamming")
    # The name depends on everything that makes vectors comparable.
    names = {VectorTable(scope=b"s", ns=b"n", dims=d, distance=m).name for d in (3, 4) for m in ("cosine", "l2")}
    assert len(names) == 4


def test_engines_without_the_capability_refuse(store: durastate.Store) -> None:
    if store.engine.capabilities.vector_index:
        pytest.skip("this engine keeps vector indexes (pgvector is installed)")
    vectors = store.engine.vectors
    assert vectors.max_dims == 0
    with pytest.raises(durastate.NotSupported, match="vector_index"):
        vectors.ensure(TABLE)
    with pytest.raises(durastate.NotSupported, match="vector_index"):
        vectors.nearest(TABLE, [1.0, 0.0, 0.0], start=b"", end=None, limit=1)


@pytest.mark.parametrize("walk", [False, True], ids=["scanned", "walked"])
def test_declared_indexes_follow_their_kv_rows(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch, walk: bool
) -> None:
    if not store.engine.capabilities.vector_index:
        pytest.skip(f"{store.engine.url}: no vector index (on PostgreSQL: CREATE EXTENSION vector)")
    if walk:  # every search walks pgvector's HNSW index instead of scanning exactly
        from durastate.engines import postgres_vector

        monkeypatch.setattr(postgres_vector, "SCAN_MAX_VALUES", 0)
    vectors, kv = store.engine.vectors, store.kv
    assert vectors.ensure(TABLE) == []
    with pytest.raises(durastate.InvalidRequest, match="inside the write transaction"):
        vectors.replace(TABLE, [(b"k1", b"d", [("f", packed(1, 0, 0))])])
    with store.transaction():
        kv.put(b"scope", b"vectors", b"k1", b"row1")
        kv.put(b"scope", b"vectors", b"k2", b"row2")
        vectors.replace(TABLE, [(b"k1", b"d", [("a", packed(1, 0, 0)), ("b", packed(0, 1, 0))])])
        vectors.replace(TABLE, [(b"k2", b"d", [("a", packed(0.1, 0.9, 0))])])
    near = [1.0, 0.0, 0.0]
    assert vectors.nearest(TABLE, near, start=b"", end=None, limit=5) == [(b"k1", "a"), (b"k2", "a"), (b"k1", "b")]
    assert vectors.nearest(TABLE, near, start=b"k2", end=b"k3", limit=5) == [(b"k2", "a")]
    assert vectors.nearest(TABLE, near, start=b"k2", end=None, limit=5) == [(b"k2", "a")]
    assert vectors.nearest(TABLE, near, start=b"", end=b"k2", limit=5) == [(b"k1", "a"), (b"k1", "b")]
    # Replacing an owner's vectors replaces all of them.
    with store.transaction():
        vectors.replace(TABLE, [(b"k1", b"d", [("c", packed(0, 0, 1))])])
    assert vectors.nearest(TABLE, near, start=b"k1", end=b"k2", limit=5) == [(b"k1", "c")]
    # Rows whose digest is not their kv value's are reported stale (both, here: b"d" is no digest).
    assert sorted(vectors.ensure(TABLE)) == [b"k1", b"k2"]
    # Deleting the kv row deletes its vectors, whoever deletes it.
    kv.delete(b"scope", b"vectors", keys=[b"k1"])
    assert vectors.nearest(TABLE, near, start=b"", end=None, limit=5) == [(b"k2", "a")]
    with pytest.raises(durastate.InvalidRequest, match="dims"):
        vectors.nearest(TABLE, [1.0], start=b"", end=None, limit=5)
