"""DurastateStore(index=) behaviour the differential test does not cover: TTL, batches, refusals, dims changes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import PutOp, SearchOp

import durastate
from durastate.integrations.langgraph import DurastateStore
from durastate.testing import FakeClock

AXES = ["cat", "dog", "fish"]


class Counting:
    """A sync embedding function (one axis per known word) that records the texts it was asked for."""

    def __init__(self, dims: int = 3) -> None:
        self.dims = dims
        self.asked: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.asked.append(list(texts))
        return [[float(word in text) for word in AXES][: self.dims] + [0.0] * (self.dims - 3) for text in texts]


@pytest.fixture
def embed() -> Counting:
    return Counting()


@pytest.fixture
def memory(store: durastate.Store, embed: Counting) -> DurastateStore:
    return DurastateStore(store, index={"embed": embed, "dims": 3, "fields": ["text"]})


def test_ranks_by_cosine_and_scores(memory: DurastateStore) -> None:
    memory.put(("d",), "both", {"text": "cat dog"})
    memory.put(("d",), "cat", {"text": "cat"})
    memory.put(("d",), "none", {"other": 1})
    found = memory.search(("d",), query="cat")
    assert [(item.key, item.score) for item in found] == [
        ("cat", 1.0),
        ("both", pytest.approx(0.5**0.5)),
        ("none", None),
    ]
    assert memory.search(("d",), query="cat", limit=1, offset=1)[0].key == "both"
    assert [item.score for item in memory.search(("d",))] == [None, None, None]  # no query: no ranking


def test_vectors_expire_and_refresh_with_their_item(store: durastate.Store, clock: FakeClock, embed: Counting) -> None:
    memory = DurastateStore(store, index={"embed": embed, "dims": 3, "fields": ["text"]})
    memory.put(("d",), "a", {"text": "cat"}, ttl=1)
    clock.advance(59)
    assert memory.search(("d",), query="cat")[0].score == 1.0  # a read: restarts both TTLs
    clock.advance(59)
    assert memory.search(("d",), query="cat", refresh_ttl=False)[0].score == 1.0
    clock.advance(2)
    assert memory.search(("d",), query="cat") == []
    memory.put(("d",), "a", {"other": "no text"})  # the expired vector does not come back
    assert memory.search(("d",), query="cat")[0].score is None


def test_a_batch_embeds_each_text_once_and_reads_before_its_writes(memory: DurastateStore, embed: Counting) -> None:
    memory.put(("d",), "old", {"text": "dog"})
    embed.asked.clear()
    results = memory.batch(
        [
            PutOp(("d",), "a", {"text": "cat"}),
            PutOp(("d",), "b", {"text": "cat"}),
            SearchOp(("d",), query="cat"),
            SearchOp(("d",), query="cat", limit=1),
            PutOp(("d",), "c", {"text": "fish"}),
            PutOp(("d",), "c", {"text": "dog"}),  # the last put of c wins: fish is never embedded
        ]
    )
    assert [[item.key for item in result] for result in results[2:4]] == [["old"], ["old"]]
    assert embed.asked == [["cat", "dog"], ["cat"]]
    assert [item.key for item in memory.search(("d",), query="cat")] == ["a", "b", "c", "old"]


def test_the_same_text_twice_in_one_value(store: durastate.Store, embed: Counting) -> None:
    # InMemoryStore refuses this put (it counts one vector per distinct text against two places).
    memory = DurastateStore(store, index={"embed": embed, "dims": 3, "fields": ["items[*].text"]})
    memory.put(("d",), "a", {"items": [{"text": "cat"}, {"text": "dog"}, {"text": "cat"}]})
    assert memory.search(("d",), query="dog")[0].score == 1.0


def test_async_embedding_function_through_the_async_methods(store: durastate.Store) -> None:
    async def aembed(texts: list[str]) -> list[list[float]]:
        return Counting()(texts)

    memory = DurastateStore(store, index={"embed": aembed, "dims": 3, "fields": ["text"]})

    async def scenario() -> list[Any]:
        await memory.aput(("d",), "a", {"text": "fish"})
        await memory.aput(("d",), "b", {"text": "cat"})
        # A batch that writes runs in one transaction: its search reads the state before its put.
        mixed = await memory.abatch([PutOp(("d",), "c", {"text": "fish cat"}), SearchOp(("d",), query="cat")])
        return [mixed[1], await memory.asearch(("d",), query="fish")]

    before_put, after = asyncio.run(scenario())
    assert [item.key for item in before_put] == ["b", "a"]
    assert [item.key for item in after] == ["a", "c", "b"]
    with pytest.raises(durastate.InvalidRequest, match="async"):
        memory.put(("d",), "e", {"text": "dog"})
    assert memory.get(("d",), "e") is None


def test_changed_dims_refuse_search_until_items_are_put_again(store: durastate.Store) -> None:
    DurastateStore(store, index={"embed": Counting(3), "dims": 3, "fields": ["text"]}).put(("d",), "a", {"text": "cat"})
    wider = DurastateStore(store, index={"embed": Counting(4), "dims": 4, "fields": ["text"]})
    with pytest.raises(durastate.InvalidRequest, match="3 dims but the index has 4"):
        wider.search(("d",), query="cat")
    wider.put(("d",), "a", {"text": "cat"})
    assert wider.search(("d",), query="cat")[0].score == 1.0


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ([], "IndexConfig dict"),
        ({"embed": Counting()}, "dims"),
        ({"embed": Counting(), "dims": 0}, "dims"),
        ({"embed": Counting(), "dims": True}, "dims"),
        ({"dims": 3}, "needs embed"),
        ({"embed": Counting(), "dims": 3, "fields": {"text": 1}}, "fields"),
        ({"embed": Counting(), "dims": 3, "fields": ["text", 3]}, "fields"),
        ({"embed": Counting(), "dims": 3, "distance_type": "hamming"}, "distance_type"),
        ({"embed": Counting(), "dims": 3, "dim": 3}, "unknown IndexConfig"),
    ],
)
def test_bad_index_configs_are_refused(store: durastate.Store, index: Any, message: str) -> None:
    with pytest.raises(durastate.InvalidRequest, match=message):
        DurastateStore(store, index=index)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.put(("d",), "b", {"text": "cat"}, index="text"), "put index"),
        (lambda m: m.search(("d",), query=3), "query must be a str"),
        (lambda m: m.batch([PutOp(("d",), "b", {"text": "x"}), SearchOp(("d",), limit=-1)]), "limit"),
    ],
)
def test_refusals_change_nothing_and_embed_nothing(
    memory: DurastateStore, embed: Counting, call: Any, message: str
) -> None:
    memory.put(("d",), "a", {"text": "dog"})
    embed.asked.clear()
    with pytest.raises(durastate.InvalidRequest, match=message):
        call(memory)
    assert embed.asked == []
    assert memory.get(("d",), "b") is None


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        (lambda texts: [[1.0, 0.0] for _ in texts], "2 dims, index dims is 3"),
        (lambda texts: [], "0 vectors for 1 texts"),
        (lambda texts: [[1e39, 0.0, 0.0] for _ in texts], "float32 range"),
        (lambda texts: [None for _ in texts], "non-vector"),
    ],
)
def test_bad_embeddings_are_refused_and_change_nothing(store: durastate.Store, vectors: Any, message: str) -> None:
    memory = DurastateStore(store, index={"embed": vectors, "dims": 3, "fields": ["text"]})
    with pytest.raises(durastate.InvalidRequest, match=message):
        memory.put(("d",), "a", {"text": "cat"})
    assert memory.get(("d",), "a") is None


def test_fields_read_as_langgraph_reads_them(store: durastate.Store) -> None:
    # One str is one field; an empty list is the whole value (LangGraph's default, "$").
    one = DurastateStore(store, index={"embed": Counting(), "dims": 3, "fields": "text"}, name="one")
    one.put(("d",), "a", {"text": "cat", "other": "dog"})
    assert one.search(("d",), query="cat")[0].score == 1.0
    whole = DurastateStore(store, index={"embed": Counting(), "dims": 3, "fields": []}, name="whole")
    whole.put(("d",), "a", {"text": "cat", "other": "dog"})
    assert whole.search(("d",), query="cat")[0].score == pytest.approx(0.5**0.5)


def test_vector_index_option_is_checked(store: durastate.Store, embed: Counting) -> None:
    with pytest.raises(durastate.InvalidRequest, match="vector_index must be"):
        DurastateStore(store, index={"embed": embed, "dims": 3}, vector_index="yes")  # type: ignore[arg-type]
    with pytest.raises(durastate.InvalidRequest, match="needs index="):
        DurastateStore(store, vector_index=True)
    if not store.engine.capabilities.vector_index:
        with pytest.raises(durastate.NotSupported, match="keeps no vector index"):
            DurastateStore(store, index={"embed": embed, "dims": 3}, vector_index=True)


@pytest.mark.parametrize("distance", ["l2", "inner_product"])
def test_other_distances_score_as_postgresstore(store: durastate.Store, distance: str) -> None:
    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(len(text)), 1.0, 0.0] for text in texts]

    memory = DurastateStore(store, index={"embed": embed, "dims": 3, "fields": ["text"], "distance_type": distance})
    memory.put(("a",), "short", {"text": "ab"})
    memory.put(("a",), "long", {"text": "abcdef"})
    # The query "abc" embeds as [3, 1, 0].
    found = {item.key: item.score for item in memory.search(("a",), query="abc")}
    if distance == "l2":  # PostgresStore: -(embedding <-> query), nearest first
        assert found == {"short": pytest.approx(-1.0), "long": pytest.approx(-3.0)}
    else:  # PostgresStore: -(embedding <#> query), the inner product
        assert found == {"long": pytest.approx(6 * 3 + 1.0), "short": pytest.approx(2 * 3 + 1.0)}
    assert [item.key for item in memory.search(("a",), query="abc")] == (
        ["short", "long"] if distance == "l2" else ["long", "short"]
    )


def test_ann_index_config_is_honoured_or_refused(store: durastate.Store, embed: Counting) -> None:
    """PostgresStore's ann_index_config: hnsw parameters and "flat" are honoured, the rest refused, on every engine."""
    from durastate.engines.vectors import HnswParams

    def config(ann: Any) -> dict[str, Any]:
        return {"embed": embed, "dims": 3, "ann_index_config": ann}

    tuned = DurastateStore(store, index=config({"kind": "hnsw", "m": 8, "ef_construction": 32}), name="tuned")  # type: ignore[arg-type]
    assert tuned._index is not None and tuned._index.hnsw == HnswParams(m=8, ef_construction=32)
    flat = DurastateStore(store, index=config({"kind": "flat", "vector_type": "vector"}), name="flat")  # type: ignore[arg-type]
    assert flat._index is not None and flat._index.hnsw is None
    flat.put(("d",), "a", {"text": "cat"})
    assert [i.key for i in flat.search(("d",), query="cat")] == ["a"]
    refused = [
        ({"kind": "ivfflat", "nlist": 100}, "ivfflat"),
        ({"vector_type": "halfvec"}, "halfvec"),
        ({"kind": "hnsw", "nlist": 100}, "got also"),
        ({"kind": "flat", "m": 8}, "got also"),
        ({"kind": "diskann"}, "kind must be"),
        ({"m": 1}, "m must be"),
        ({"m": 40, "ef_construction": 64}, "at least 2 \\* m"),
        ("hnsw", "must be a dict"),
    ]
    for ann, message in refused:
        with pytest.raises(durastate.InvalidRequest, match=message):
            DurastateStore(store, index=config(ann))  # type: ignore[arg-type]
