"""DurastateStore(index=) against LangGraph's InMemoryStore(index=): random put/delete/search sequences.

Both stores get the same index configuration and the same deterministic
embedding function (small integer vectors: exact in float32, so stored
vectors lose nothing and every score is computed from the same numbers).
Compared: the keys of every search page in order, values, and scores
within 1e-6; on every engine, through the sync methods (a sync embedding
function) and the async ones (an async embedding function), scores by
NumPy and by plain Python.

The reference's order is InMemoryStore's with its one arbitrary part made
ours: equal scores come in insertion order there and in (namespace, key)
order here, so the reference re-sorts InMemoryStore's complete result
(scored items by score, then unscored ones) on that tie-break before
paging. Paging is compared on that complete order: InMemoryStore fills a
short page with unscored items counted from the first one whatever the
``offset`` (so pages can repeat items); ours pages the whole order.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from typing import Any

import pytest

pytest.importorskip("langgraph.store.memory")

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.store.base import SearchItem
from langgraph.store.memory import InMemoryStore

import durastate
from durastate.integrations.langgraph import DurastateStore, _vectors

DIMS = 4
WORDS = ["cat", "dog", "fish", "bird", "tree", "rock", "sky"]


def vector(text: str) -> list[float]:
    """A deterministic vector of small integers (the zero vector included, rarely)."""
    digest = hashlib.blake2b(text.encode(), digest_size=DIMS).digest()
    return [float(b % 7 - 3) for b in digest]


def embed(texts: list[str]) -> list[list[float]]:
    return [vector(text) for text in texts]


async def aembed(texts: list[str]) -> list[list[float]]:
    return embed(texts)


CONFIGS = {
    "fields": ["text", "items[*].text"],
    "whole-value": None,  # LangGraph's default: "$", the value as JSON
}

LABELS = ["a", "b"]
namespaces = st.lists(st.sampled_from(LABELS), min_size=1, max_size=2).map(tuple)
keys = st.sampled_from(["k1", "k2", "k3"])
# No text twice in one value: InMemoryStore then fails its put (it embeds each distinct text once
# and counts the vectors against the texts' places); ours stores it (test_store_semantic.py).
values = st.fixed_dictionaries(
    {"n": st.integers(0, 3)},
    optional={
        "text": st.sampled_from(WORDS[4:]),
        "items": st.lists(st.sampled_from(WORDS[:4]), max_size=3, unique=True).map(
            lambda texts: [{"text": text} for text in texts]
        ),
        # Filtered on (on PostgreSQL with pgvector, in the vector search's SQL): strings (one with NUL,
        # which jsonb cannot hold), null, booleans (True == 1), floats, a nested object.
        "kind": st.sampled_from(["x", "y", "1", "x\x00", None]),
        "flag": st.booleans(),
        "f": st.sampled_from([1.0, 2.5, -0.5]),
        "meta": st.fixed_dictionaries({}, optional={"k": st.sampled_from(["x", "y", None])}),
    },
)
put_indexes = st.sampled_from([None, None, None, False, ["text"], ["items[*].text"], ["n"]])
filters = st.one_of(
    st.none(),
    st.integers(0, 3).map(lambda n: {"n": n}),
    st.integers(0, 3).map(lambda n: {"n": {"$gte": n}}),
    st.sampled_from(
        [
            {"kind": "x"},
            {"kind": "x\x00"},
            {"kind": None},
            {"kind": {"$ne": "x"}},
            {"kind": {"$eq": "y"}, "n": {"$lt": 3}},
            {"kind": {"$ne": None}},
            {"flag": True},
            {"flag": 0},
            {"n": True},
            {"n": 1.0},
            {"n": {"$gt": 0, "$lte": 2}},
            {"n": {"$lt": "2"}},
            {"f": 2.5},
            {"meta": {"k": "x"}},
            {"meta": {"k": None}},
            {"meta": {}},
            {"items": [{"text": "cat"}]},
        ]
    ),
)
operations = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values, put_indexes),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(
        st.just("search"),
        st.lists(st.sampled_from(LABELS), max_size=1).map(tuple),
        st.one_of(st.none(), st.sampled_from(WORDS)),
        filters,
        st.integers(0, 6),
        st.integers(0, 4),
    ),
)


def reference_search(
    memory: InMemoryStore, prefix: tuple[str, ...], query: str | None, filter: Any, limit: int, offset: int
) -> list[SearchItem]:
    everything = memory.search(prefix, query=query, filter=filter, limit=10**6)
    address = lambda item: (tuple(item.namespace), item.key)  # noqa: E731
    scored = sorted((i for i in everything if i.score is not None), key=lambda i: (-i.score, *address(i)))
    unscored = sorted((i for i in everything if i.score is None), key=address)
    return (scored + unscored)[offset : offset + limit]


def shape(items: list[SearchItem]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return [(tuple(item.namespace), item.key, item.value) for item in items]


def check_scores(got: list[SearchItem], expected: list[SearchItem], where: str) -> None:
    for ours, theirs in zip(got, expected, strict=True):
        if theirs.score is None:
            assert ours.score is None, where
        else:
            assert ours.score is not None and abs(ours.score - theirs.score) <= 1e-6, where


def calls(ops: list[tuple[Any, ...]]) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Each op as (method, args, kwargs) of BaseStore's API."""
    found: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    for op in ops:
        kind = op[0]
        if kind == "put":
            _, namespace, key, value, index = op
            found.append((kind, (namespace, key, value), {"index": index}))
        elif kind == "delete":
            found.append((kind, op[1:], {}))
        else:
            _, prefix, query, filter, limit, offset = op
            found.append((kind, (prefix,), {"query": query, "filter": filter, "limit": limit, "offset": offset}))
    return found


async def run_async(ours: DurastateStore, ops: list[tuple[Any, ...]]) -> list[Any]:
    return [await getattr(ours, f"a{kind}")(*args, **kwargs) for kind, args, kwargs in calls(ops)]


EXAMPLE = itertools.count()


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("scoring", ["numpy", "python"])
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(operations, max_size=25))
# Equal scores (the same text in two items) come in (namespace, key) order; a put without the
# field keeps its old vector; index=False keeps the old vectors too; unscored items come last.
@example(
    ops=[
        ("put", ("b",), "k1", {"n": 0, "text": "rock"}, None),
        ("put", ("a",), "k2", {"n": 0, "text": "rock"}, None),
        ("put", ("a",), "k1", {"n": 1, "text": "sky"}, None),
        ("put", ("a",), "k1", {"n": 1}, None),
        ("put", ("a",), "k3", {"n": 2, "text": "tree"}, False),
        ("put", ("b",), "k1", {"n": 0, "text": "sky", "items": [{"text": "dog"}, {"text": "bird"}]}, False),
        ("put", ("b",), "k2", {"n": 3, "items": [{"text": "dog"}, {"text": "bird"}]}, None),
        ("search", (), "rock", None, 6, 0),
        ("search", (), "rock", None, 2, 1),
        ("search", ("a",), "sky", {"n": 1}, 6, 0),
        ("search", (), "dog", None, 6, 2),
        ("delete", ("a",), "k2"),
        ("search", (), "rock", None, 6, 0),
    ]
)
def test_semantic_search_matches_inmemorystore(
    store: durastate.Store,
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    mode: str,
    scoring: str,
    ops: list[tuple[Any, ...]],
) -> None:
    if scoring == "numpy":
        pytest.importorskip("numpy")
    monkeypatch.setattr(_vectors, "use_numpy", scoring == "numpy")
    fields = CONFIGS[config]
    index: dict[str, Any] = {"dims": DIMS, "embed": embed if mode == "sync" else aembed}
    reference_index: dict[str, Any] = {"dims": DIMS, "embed": embed}
    if fields is not None:
        index["fields"] = reference_index["fields"] = fields
    # A fresh kv scope per example: examples never see each other's items.
    ours = DurastateStore(store, index=index, name=f"semantic-{next(EXAMPLE)}")  # type: ignore[arg-type]
    memory = InMemoryStore(index=reference_index)  # type: ignore[arg-type]
    if mode == "sync":
        got = [getattr(ours, kind)(*args, **kwargs) for kind, args, kwargs in calls(ops)]
    else:
        got = asyncio.run(run_async(ours, ops))
    for step, (op, result) in enumerate(zip(ops, got, strict=True)):
        kind = op[0]
        if kind == "put":
            _, namespace, key, value, put_index = op
            memory.put(namespace, key, value, index=put_index)
        elif kind == "delete":
            memory.delete(op[1], op[2])
        else:
            _, prefix, query, filter, limit, offset = op
            expected = reference_search(memory, prefix, query, filter, limit, offset)
            where = f"step {step}: {op}"
            assert shape(result) == shape(expected), where
            check_scores(result, expected, where)
