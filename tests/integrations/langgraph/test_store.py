"""DurastateStore behaviour the differential test does not cover: times, TTL config, refusals, batches, async."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, time
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, PutOp, SearchOp

import durastate
from durastate.integrations.langgraph import DurastateStore
from durastate.testing import FakeClock


@pytest.fixture
def memory(store: durastate.Store) -> DurastateStore:
    return DurastateStore(store)


def test_created_at_survives_updates_updated_at_moves(memory: DurastateStore, clock: FakeClock) -> None:
    memory.put(("users",), "ada", {"v": 1})
    first = memory.get(("users",), "ada")
    assert first is not None
    assert first.created_at == datetime.fromtimestamp(clock(), tz=UTC)
    clock.advance(10)
    memory.put(("users",), "ada", {"v": 2})
    second = memory.get(("users",), "ada")
    assert second is not None and second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert (second.updated_at - first.updated_at).total_seconds() == 10


def test_default_ttl_and_refresh_off(store: durastate.Store, clock: FakeClock) -> None:
    memory = DurastateStore(store, ttl={"default_ttl": 1, "refresh_on_read": False})
    memory.put(("s",), "a", {"x": 1})  # default: 1 minute
    memory.put(("s",), "b", {"x": 2}, ttl=None)  # explicitly forever
    clock.advance(59)
    assert memory.get(("s",), "a") is not None  # read, but refresh_on_read is off
    clock.advance(1)
    assert memory.get(("s",), "a") is None
    assert memory.get(("s",), "b") is not None
    assert memory.get(("s",), "b", refresh_ttl=True) is not None


def test_max_depth_lists_the_children_of_a_shallower_namespace(memory: DurastateStore) -> None:
    # Found by the differential test: truncating to max_depth skipped past a
    # namespace shallower than max_depth, and with it its children.
    for namespace in [("b",), ("b", "a"), ("b", "a", "x"), ("c", "d", "e")]:
        memory.put(namespace, "k1", {"n": 0})
    assert memory.list_namespaces(max_depth=2) == [("b",), ("b", "a"), ("c", "d")]
    assert memory.list_namespaces(max_depth=2, limit=1, offset=1) == [("b", "a")]
    assert memory.list_namespaces(max_depth=1) == [("b",), ("c",)]


def test_semantic_search_is_refused_clearly(memory: DurastateStore) -> None:
    memory.put(("docs",), "a", {"text": "hello"})
    with pytest.raises(durastate.InvalidRequest, match="no vector index"):
        memory.search(("docs",), query="greeting")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.batch([PutOp(("langgraph",), "k", {"a": 1})]), "reserved"),
        (lambda m: m.batch([GetOp(("a.b",), "k")]), "periods"),
        (lambda m: m.put(("ok",), "k", {"a": 1}, ttl=-1), "minutes > 0"),
        (lambda m: m.put(("ok",), "k", {"a": object()}), "not JSON"),
        (lambda m: m.search(("ok",), filter={"a": {"$regex": "x"}}), "unknown filter operator"),
        (lambda m: m.search(("ok",), limit=-1), "limit"),
        (lambda m: m.list_namespaces(max_depth=0), "max_depth"),
    ],
)
def test_refusals_change_nothing(memory: DurastateStore, call: object, message: str) -> None:
    memory.put(("ok",), "k", {"a": 0})
    with pytest.raises(durastate.InvalidRequest, match=message):
        call(memory)  # type: ignore[operator]
    item = memory.get(("ok",), "k")
    assert item is not None and item.value == {"a": 0}


@pytest.mark.parametrize(
    "value",
    [
        {"v": float("nan"), "i": float("-inf"), "ok": 1},
        {"ok": None, "deep": {"list": [1, {"x": float("inf")}]}},
    ],
)
def test_nan_and_infinity_are_refused_not_stored_as_null(memory: DurastateStore, value: dict) -> None:
    # orjson writes them as null: the item read back had None where the caller put NaN.
    memory.put(("ok",), "k", {"a": 0})
    with pytest.raises(durastate.InvalidRequest, match="NaN or infinity, which cannot be stored as JSON"):
        memory.put(("ok",), "k", value)
    with pytest.raises(durastate.InvalidRequest, match="NaN or infinity"):
        memory.batch([PutOp(("ok",), "new", {"a": 1}), PutOp(("ok",), "bad", value)])
    with pytest.raises(durastate.InvalidRequest, match="NaN or infinity"):
        asyncio.run(memory.aput(("ok",), "k", value))
    assert [(i.key, i.value) for i in memory.search(("ok",))] == [("k", {"a": 0})]


@pytest.mark.parametrize(
    "value",
    [
        {"at": datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)},
        {"at": datetime(2024, 5, 6, 7, 8, 9)},
        {"deep": [{"on": date(2024, 5, 6)}]},
        {"at": time(7, 8, 9)},
    ],
)
def test_a_datetime_is_refused_as_postgres_store_refuses_it(memory: DurastateStore, value: dict) -> None:
    """PostgresStore refuses a datetime, date or time in a value (``TypeError``: its JSONB is written by
    ``json.dumps``); orjson would write it as ISO text (as SqliteStore stores it) that reads back as a str.
    Refused as ``WrongType``: an ``InvalidRequest`` and a ``TypeError``; nothing is written."""
    memory.put(("ok",), "k", {"a": 0})
    with pytest.raises(durastate.WrongType, match="not JSON: Type is not JSON serializable: datetime") as caught:
        memory.put(("ok",), "k", value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, durastate.InvalidRequest)
    with pytest.raises(TypeError, match="not JSON"):
        memory.batch([PutOp(("ok",), "new", {"a": 1}), PutOp(("ok",), "bad", value)])
    with pytest.raises(TypeError, match="not JSON"):
        asyncio.run(memory.aput(("ok",), "k", value))
    assert [(i.key, i.value) for i in memory.search(("ok",))] == [("k", {"a": 0})]


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda m: m.put("abc", "k", {"a": 1}), "namespace"),
        (lambda m: m.get("abc", "k"), "namespace"),
        (lambda m: m.delete("abc", "k"), "namespace"),
        (lambda m: m.search("abc"), "namespace_prefix"),
        (lambda m: m.list_namespaces(prefix="ab"), "list_namespaces prefix"),
        (lambda m: m.list_namespaces(suffix="bc"), "list_namespaces suffix"),
        (lambda m: m.batch([GetOp(("ok",), "k"), PutOp("abc", "k", {"a": 1})]), "namespace"),
        (lambda m: asyncio.run(m.aput("abc", "k", {"a": 1})), "namespace"),
        (lambda m: asyncio.run(m.asearch("abc")), "namespace_prefix"),
    ],
)
def test_a_str_namespace_is_refused_not_split_into_labels(memory: DurastateStore, call: Any, what: str) -> None:
    # LangGraph checks only that the labels are str: "abc" passed as ("a", "b", "c").
    memory.put(("ok",), "k", {"a": 0})
    memory.put(("a", "b", "c"), "k", {"a": 0})
    with pytest.raises(durastate.InvalidRequest, match=f"^{what} must be a tuple of str, got str"):
        call(memory)
    assert memory.get(["ok"], "k").value == {"a": 0}  # type: ignore[arg-type,union-attr]  # a list still is one
    assert [(tuple(i.namespace), i.value) for i in memory.search(())] == [
        (("a", "b", "c"), {"a": 0}),
        (("ok",), {"a": 0}),
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.put(("ok", "\ud800"), "k", {"a": 1}),
        lambda m: m.batch([PutOp(("ok",), "new", {"a": 1}), PutOp(("ok",), "k\ud800", {"a": 1})]),
        lambda m: m.get(("ok",), "k\ud800"),
        lambda m: m.search(("ok", "\ud800")),
        lambda m: m.list_namespaces(prefix=("\ud800",)),
        lambda m: asyncio.run(m.aput(("ok",), "k\ud800", {"a": 1})),
    ],
)
def test_a_lone_surrogate_in_a_label_or_key_is_an_invalid_request(memory: DurastateStore, call: Any) -> None:
    # It raised the bare UnicodeEncodeError of the key's encoding.
    memory.put(("ok",), "k", {"a": 0})
    with pytest.raises(durastate.InvalidRequest, match="no lone surrogates"):
        call(memory)
    assert [(i.key, i.value) for i in memory.search(())] == [("k", {"a": 0})]


def test_from_url_refuses_an_unknown_option_before_opening_anything(tmp_path: Any) -> None:
    path = tmp_path / "memory.db"
    with pytest.raises(durastate.InvalidRequest, match=r"unknown DurastateStore\.from_url option\(s\): bogus, nope;"):
        DurastateStore.from_url(f"sqlite://{path}", nope=1, bogus=2, ttl=None)
    assert not path.exists()


def test_namespace_refusals_are_both_error_types(memory: DurastateStore) -> None:
    from langgraph.store.base import InvalidNamespaceError

    with pytest.raises(InvalidNamespaceError) as caught:
        memory.batch([PutOp(("",), "k", {"a": 1})])
    assert isinstance(caught.value, durastate.InvalidRequest)


def test_a_refused_batch_applies_none_of_its_puts(memory: DurastateStore) -> None:
    with pytest.raises(durastate.InvalidRequest):
        memory.batch([PutOp(("ok",), "first", {"a": 1}), PutOp(("ok",), "bad", {"a": 1}, ttl=0)])
    assert memory.get(("ok",), "first") is None


def test_batch_reads_see_the_state_before_its_writes(memory: DurastateStore) -> None:
    memory.put(("b",), "k", {"v": "old"})
    results = memory.batch(
        [PutOp(("b",), "k", {"v": "new"}), GetOp(("b",), "k"), PutOp(("b",), "k", {"v": "last"}), SearchOp(("b",))]
    )
    assert results[1].value == {"v": "old"}  # type: ignore[union-attr]
    assert [i.value for i in results[3]] == [{"v": "old"}]  # type: ignore[union-attr]
    assert memory.get(("b",), "k").value == {"v": "last"}  # type: ignore[union-attr]


def test_async_methods(memory: DurastateStore) -> None:
    async def scenario() -> list[str]:
        await memory.aput(("a", "b"), "k", {"n": 1})
        await memory.aput(("a", "c"), "k", {"n": 2})
        found = await memory.asearch(("a",), filter={"n": {"$gte": 2}})
        assert [tuple(i.namespace) for i in found] == [("a", "c")]
        await memory.adelete(("a", "c"), "k")
        return [".".join(ns) for ns in await memory.alist_namespaces(prefix=("a",))]

    assert asyncio.run(scenario()) == ["a.b"]


def test_from_url_owns_its_store(tmp_path: object) -> None:
    url = f"sqlite://{tmp_path}/memory.db"
    with DurastateStore.from_url(url) as memory:
        memory.put(("x",), "k", {"kept": True})
    with DurastateStore.from_url(url) as memory:
        assert memory.get(("x",), "k").value == {"kept": True}  # type: ignore[union-attr]
    assert memory.store.closed


@pytest.mark.parametrize(
    "filter",
    [
        {"tags": ["a", "b"]},
        {"tags": ["a"]},
        {"meta": {"n": 1}},
        {"meta": {"n": {"$gte": 1}}},
        {"meta": {"n": 1, "s": "x"}},
        {"tags": ["a", "b"], "meta": {"s": "x"}},
        {"pairs": [{"k": 1}, {"k": 2}]},
        {"missing": None},
        {"meta": "x"},
    ],
)
def test_filters_on_lists_and_nested_values_match_inmemorystore(memory: DurastateStore, filter: dict) -> None:
    from langgraph.store.memory import InMemoryStore

    reference = InMemoryStore()
    values = [
        {"tags": ["a", "b"], "meta": {"n": 1, "s": "x"}, "pairs": [{"k": 1, "o": 0}, {"k": 2}]},
        {"tags": ["a"], "meta": {"n": 2, "s": "y"}, "pairs": [{"k": 1}]},
        {"tags": ["b", "a"], "meta": {"n": 0}, "missing": None},
        {"tags": "a", "meta": ["n"]},
    ]
    for i, value in enumerate(values):
        for store in (memory, reference):
            store.put(("f",), f"k{i}", value)
    expected = sorted(item.key for item in reference.search(("f",), filter=filter))
    assert [item.key for item in memory.search(("f",), filter=filter)] == expected
