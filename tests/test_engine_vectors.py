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
from durastate.engines.vectors import HnswParams, JsonCondition, VectorTable

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


def test_hnsw_params_are_validated() -> None:
    assert HnswParams() == HnswParams(m=16, ef_construction=64) and HnswParams().default
    for bad in ({"m": 1}, {"m": 101}, {"ef_construction": 3}, {"m": 40, "ef_construction": 64}, {"m": True}):
        with pytest.raises(durastate.InvalidRequest, match="HNSW"):
            HnswParams(**bad)  # type: ignore[arg-type]
    with pytest.raises(durastate.InvalidRequest, match="op"):
        JsonCondition(("a",), "like", "x")
    with pytest.raises(durastate.InvalidRequest, match="operand"):
        JsonCondition(("a",), "gt", "x")
    with pytest.raises(durastate.InvalidRequest, match="path"):
        JsonCondition((), "eq", "x")


# Sibling rows (JSON) and what each condition must pass; "k*" keys own one vector each.
SIBLINGS = {
    b"k1": {"s": "x", "n": 1, "o": {"k": "x"}},
    b"k2": {"s": "y", "n": True, "o": {"k": None}},
    b"k3": {"s": "x\x00", "n": 2.5, "o": []},
    b"k4": {"s": None, "n": "3"},
    b"k5": {"n": False, "o": {"k": "y"}},
}
CONDITIONS = [
    (JsonCondition(("v", "s"), "eq", "x"), {b"k1"}),
    (JsonCondition(("v", "s"), "eq", "x\x00"), set(SIBLINGS)),  # inexact after NUL: not tested, all pass
    (JsonCondition(("v", "s"), "eq", None), {b"k4", b"k5"}),
    (JsonCondition(("v", "s"), "ne", "x"), {b"k2", b"k3", b"k4", b"k5"}),
    (JsonCondition(("v", "s"), "ne", None), {b"k1", b"k2", b"k3"}),
    (JsonCondition(("v", "n"), "eq", 1.0), {b"k1", b"k2"}),
    (JsonCondition(("v", "n"), "eq", 0.0), {b"k5"}),
    (JsonCondition(("v", "n"), "gt", 1.0), {b"k3", b"k4"}),  # "3": a string passes (the caller decides)
    (JsonCondition(("v", "n"), "le", 1.0), {b"k1", b"k2", b"k4", b"k5"}),
    (JsonCondition(("v", "o", "k"), "eq", "x"), {b"k1"}),
    (JsonCondition(("v", "o", "k"), "eq", None), {b"k2"}),  # k3's o is a list, k4 has none: not objects
]


def test_nearest_rows_filters_on_the_sibling_row(store: durastate.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    if not store.engine.capabilities.vector_index:
        with pytest.raises(durastate.NotSupported, match="vector_index"):
            store.engine.vectors.nearest_rows(TABLE, [1.0, 0.0, 0.0], start=b"", end=None, limit=1, sibling=b"items")
        return
    import orjson

    vectors, kv = store.engine.vectors, store.kv
    vectors.ensure(TABLE)
    with store.transaction():
        for i, (key, value) in enumerate(SIBLINGS.items()):
            kv.put(b"scope", b"vectors", key, b"row")
            kv.put(b"scope", b"items", key, orjson.dumps({"v": value}))
            vectors.replace(TABLE, [(key, b"d", [("f", packed(1.0, 0.1 * i, 0.0))])])
        kv.put(b"scope", b"vectors", b"k6", b"row")  # no sibling row: never found
        vectors.replace(TABLE, [(b"k6", b"d", [("f", packed(1.0, 0.0, 0.0))])])
    near = [1.0, 0.0, 0.0]
    found = vectors.nearest_rows(TABLE, near, start=b"", end=None, limit=10, sibling=b"items")
    assert [n.key for n in found] == list(SIBLINGS)  # nearest first; k6 (no sibling) left out
    assert found[0].owner == b"row" and orjson.loads(found[0].sibling) == {"v": SIBLINGS[b"k1"]}
    for walk in (False, True):
        if walk:  # the HNSW walk (iterative scan) instead of the exact scan
            from durastate.engines import postgres_vector

            monkeypatch.setattr(postgres_vector, "SCAN_MAX_VALUES", 0)
        for condition, wanted in CONDITIONS:
            got = vectors.nearest_rows(TABLE, near, start=b"", end=None, limit=10, sibling=b"items", where=[condition])
            assert {n.key for n in got} == wanted, (condition, walk)
        # A page of 1 past rows the filter drops: still filled.
        where = [JsonCondition(("v", "s"), "eq", None)]
        assert [
            n.key
            for n in vectors.nearest_rows(TABLE, near, start=b"", end=None, limit=1, sibling=b"items", where=where)
        ] == [b"k4"]
        assert [
            n.key for n in vectors.nearest_rows(TABLE, near, start=b"k2", end=b"k5", limit=5, sibling=b"items")
        ] == [b"k2", b"k3", b"k4"]
