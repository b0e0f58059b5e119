"""``engine.vectors`` (``engines.vectors``) on every engine: refused where not declared, kept where declared.

PostgreSQL declares ``capabilities.vector_index`` when pgvector is installed
in the database (CI's server has none: there the refusal is what runs);
tests/integrations/langgraph/test_store_pgvector.py installs it where the
server has it and tests the store's use of it.
"""

from __future__ import annotations

import itertools
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


def vectors_counted(store: durastate.Store) -> tuple[int, int]:
    """(the count a search decides by, the rows the index table holds) for TABLE."""
    from durastate.engines.statements import READ

    engine = store.engine
    counted = engine.one(engine.sql(READ(f"SELECT sum(vectors) FROM {{p}}vec_counts WHERE name = '{TABLE.name}'")))
    held = engine.one(engine.sql(READ(f"SELECT count(*) FROM {{p}}vec_{TABLE.name}")))
    assert counted is not None and held is not None
    return int(counted[0] or 0), int(held[0])


def test_scan_or_walk_is_decided_by_the_tables_count(store: durastate.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A range is scanned exactly up to SCAN_MAX_VALUES; the whole of a bigger table is walked without scanning first.

    The count is kept by the index table's triggers (inserts, replaced owners, kv deletes cascading, rolled back
    batches and savepoints) on a table as fresh as a user's (no ANALYZE), and is made for a table that has none
    (created before).
    """
    if not store.engine.capabilities.vector_index:
        pytest.skip(f"{store.engine.url}: no vector index (on PostgreSQL: CREATE EXTENSION vector)")
    import math

    from durastate.engines import postgres_vector
    from durastate.engines.statements import DDL

    monkeypatch.setattr(postgres_vector, "SCAN_MAX_VALUES", 8 * TABLE.dims)  # 8 vectors of 3 dims
    monkeypatch.setattr(postgres_vector, "OUTSIDE_SHARE", 1)  # keys outside a range: counted up to 8 a side
    statement = postgres_vector._statement
    modes: list[str] = []

    def spy(mode: str, *args: object) -> object:
        modes.append(mode)
        return statement(mode, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(postgres_vector, "_statement", spy)
    engine, vectors, kv = store.engine, store.engine.vectors, store.kv
    held: dict[tuple[bytes, str], float] = {}  # what the kv rows hold: (key, field) -> angle from the query
    angles = itertools.count(1)

    def put(keys: list[bytes], fields: tuple[str, ...] = ("f",)) -> None:
        with store.transaction():
            owners = []
            for key in keys:
                kv.put(b"scope", b"vectors", key, b"row")
                for name in [name for name in held if name[0] == key]:
                    del held[name]
                owned = {(key, field): 0.02 * next(angles) for field in fields}  # no two at one distance
                owners.append((key, b"d", [(f, packed(math.cos(t), math.sin(t), 0.0)) for (_, f), t in owned.items()]))
                held.update(owned)
            vectors.replace(TABLE, owners)

    def searched(start: bytes, end: bytes | None) -> list[str]:
        """The statements a search ran; its answer checked against the exact order."""
        modes.clear()
        found = vectors.nearest(TABLE, [1.0, 0.0, 0.0], start=start, end=end, limit=4)
        inside = [name for name in held if name[0] >= start and (end is None or name[0] < end)]
        assert found == sorted(inside, key=held.__getitem__)[:4]
        return list(modes)

    vectors.ensure(TABLE)
    a, b, c = [b"a1", b"a2", b"a3"], [b"b1", b"b2", b"b3"], [b"c%d" % i for i in range(1, 7)]
    put(a + b)
    assert vectors_counted(store) == (6, 6)
    assert searched(b"", None) == ["gated"]  # 6 <= 8: scanned
    put(c)
    assert vectors_counted(store) == (12, 12)
    # 12 > 8: the whole table is walked, with no scan first (HNSW finds all of so few).
    assert searched(b"", None) == ["gated", "walk"]
    # A part of it: sized by the keys outside it (fewer than 8 a side), then scanned or walked.
    assert searched(b"c", b"d") == ["gated", "scan"]  # 6 outside: 6 inside
    assert searched(b"a", b"c") == ["gated", "scan"]
    assert searched(b"b", None) == ["gated", "walk"]  # 3 outside: 9 inside
    # 9 outside, more than counted: the scan of the first 9 rows says it holds fewer (and is the answer).
    assert searched(b"", b"b") == ["gated", "capped"]
    monkeypatch.setattr(postgres_vector, "OUTSIDE_SHARE", 8)  # 1 a side: 3 outside is too many to count
    assert searched(b"b", None) == ["gated", "capped", "walk"]
    monkeypatch.setattr(postgres_vector, "OUTSIDE_SHARE", 1)
    # Replacing owners' vectors counts what is replaced once.
    put(a, ("f", "g"))
    assert vectors_counted(store) == (15, 15)
    # Deleting the kv rows deletes their vectors (the foreign key's cascade): counted too.
    kv.delete(b"scope", b"vectors", keys=c)
    for key in c:
        del held[key, "f"]
    assert vectors_counted(store) == (9, 9)
    assert searched(b"", None) == ["gated", "walk"]
    # A batch rolled back leaves the count as it was.
    with pytest.raises(RuntimeError), store.transaction():
        with store.transaction():
            kv.put(b"scope", b"vectors", b"d1", b"row")
            vectors.replace(TABLE, [(b"d1", b"d", [("f", packed(1.0, 0.0, 0.0))])])
        raise RuntimeError("rolled back")
    assert vectors_counted(store) == (9, 9)
    # A savepoint rolled back inside a transaction that commits: only what the transaction kept counts.
    with store.transaction():
        kv.put(b"scope", b"vectors", b"d1", b"row")
        vectors.replace(TABLE, [(b"d1", b"d", [("f", packed(0.0, 0.0, 1.0))])])
        with pytest.raises(RuntimeError), store.transaction():
            kv.put(b"scope", b"vectors", b"d2", b"row")
            vectors.replace(TABLE, [(b"d2", b"d", [("f", packed(0.0, 0.0, 1.0))])])
            raise RuntimeError("rolled back")
        kv.delete(b"scope", b"vectors", keys=[b"d1"])
    assert vectors_counted(store) == (9, 9)
    kv.delete(b"scope", b"vectors", keys=[b"a1"])  # 7 vectors left: scanned again
    del held[b"a1", "f"], held[b"a1", "g"]
    assert searched(b"", None) == ["gated"]
    # A table from before the counts (no triggers, no count): ensure() counts it and starts counting.
    with store.transaction():
        for trigger in ("counted", "counted_deletes", "counted_truncates"):
            engine.execute(engine.sql(DDL(f"DROP TRIGGER {trigger} ON {{p}}vec_{TABLE.name}")))
        engine.execute(engine.sql(DDL("DELETE FROM {p}vec_counts")))
    assert vectors_counted(store) == (0, 7)
    vectors.ensure(TABLE)
    assert vectors_counted(store) == (7, 7)
    put(c)
    assert vectors_counted(store) == (13, 13)
    assert searched(b"", None) == ["gated", "walk"]
    # In the transaction that changed them, the count includes its changes (not counted until it commits).
    with store.transaction():
        kv.delete(b"scope", b"vectors", keys=c)
        for key in c:
            del held[key, "f"]
        assert searched(b"", None) == ["gated"]
    assert vectors_counted(store) == (7, 7)


def test_the_walk_is_answered_by_the_hnsw_index_fresh_and_analyzed(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the engine walks, the HNSW index answers, whatever the planner's statistics say.

    Left to the planner, the walk's generic plan sorted the key range instead (exactly, so only
    its cost showed): on tables with statistics (after autovacuum's ANALYZE) at 100,000 vectors,
    and on small tables even without. The setting that keeps it on the index does not outlive the walk
    in the caller's transaction.
    """
    if not store.engine.capabilities.vector_index:
        pytest.skip(f"{store.engine.url}: no vector index (on PostgreSQL: CREATE EXTENSION vector)")
    import math

    from durastate.engines import postgres_vector
    from durastate.engines.statements import DDL, READ

    monkeypatch.setattr(postgres_vector, "SCAN_MAX_VALUES", 0)  # every search walks
    engine, vectors, kv = store.engine, store.engine.vectors, store.kv
    vectors.ensure(TABLE)
    angles = {b"k%03d" % i: 0.001 * ((i * 37) % 300) for i in range(300)}  # distinct, keys and angles unordered
    with store.transaction():
        for key in angles:
            kv.put(b"scope", b"vectors", key, b"row")
            kv.put(b"scope", b"items", key, b"{}")
        vectors.replace(TABLE, [(k, b"d", [("f", packed(math.cos(t), math.sin(t), 0.0))]) for k, t in angles.items()])
    ann = engine.one(engine.sql(READ(f"SELECT CAST(CAST('{{p}}vec_{TABLE.name}_ann' AS regclass) AS oid)")))
    assert ann is not None
    scans = engine.sql(READ(f"SELECT pg_stat_get_xact_numscans({int(ann[0])}), current_setting('enable_sort')"))
    near = [1.0, 0.0, 0.0]

    def walked(start: bytes, end: bytes | None, rows: bool) -> None:
        """One search in a transaction: the index scanned once, the exact order, enable_sort as it was after."""
        inside = sorted((k for k in angles if k >= start and (end is None or k < end)), key=angles.__getitem__)
        with store.transaction():
            before = engine.one(scans)
            if rows:
                neighbours = vectors.nearest_rows(TABLE, near, start=start, end=end, limit=5, sibling=b"items")
                found = [n.key for n in neighbours]
            else:
                found = [k for k, _ in vectors.nearest(TABLE, near, start=start, end=end, limit=5)]
            after = engine.one(scans)
        assert before is not None and after is not None
        assert (after[0] - before[0], after[1]) == (1, before[1]), (start, end, rows)
        assert found == inside[:5]

    for state in ("fresh", "analyzed"):
        if state == "analyzed":
            for table in (f"vec_{TABLE.name}", "kv"):
                engine.execute(engine.sql(DDL(f"ANALYZE {{p}}{table}")))
        for start, end in [(b"", None), (b"k1", b"k2"), (b"k05", None), (b"", b"k01")]:
            for rows in (False, True):
                walked(start, end, rows)
    # Outside a transaction (the search's own): the same pages.
    assert [k for k, _ in vectors.nearest(TABLE, near, start=b"k1", end=b"k2", limit=3)] == sorted(
        (k for k in angles if b"k1" <= k < b"k2"), key=angles.__getitem__
    )[:3]
