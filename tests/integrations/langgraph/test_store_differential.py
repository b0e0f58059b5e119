"""DurastateStore against LangGraph's InMemoryStore: random operation sequences, identical results.

The reference is ``InMemoryStore`` with three additions, each because
InMemoryStore leaves the behaviour out, not to paper over a difference:

* TTL: InMemoryStore has none (``supports_ttl = False``), so the reference
  tracks deadlines on the same fake clock (minutes; an item is gone once
  the clock reaches its deadline; a read with refresh restarts it) and
  deletes expired items from the InMemoryStore before every operation;
* namespaces are listed only while they hold an item: InMemoryStore keeps
  every namespace it has seen, even one it was only asked to ``get`` from,
  which the persistent stores (PostgresStore) and ours do not;
* search order: InMemoryStore returns insertion order, ours (namespace, key)
  order; the reference sorts InMemoryStore's complete result that way, then
  applies ``offset``/``limit``, so paging is compared item for item.

Values, keys, namespaces, filters (equality, nested, ``$gt`` ...),
``list_namespaces`` prefix/suffix (with ``*``) /max_depth/limit/offset all
come from InMemoryStore itself.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("langgraph.store.memory")

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.store.base import Item
from langgraph.store.memory import InMemoryStore

import durastate
from durastate.integrations.langgraph import DurastateStore
from durastate.testing import FakeClock

LABELS = ["a", "b", "c"]
namespaces = st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple)
keys = st.sampled_from(["k1", "k2"])
values = st.fixed_dictionaries(
    {
        "n": st.integers(0, 3),
        "tag": st.sampled_from(["x", "y"]),
        "nested": st.fixed_dictionaries({"m": st.integers(0, 2)}),
    }
)
filters = st.one_of(
    st.none(),
    st.integers(0, 3).map(lambda n: {"n": n}),
    st.integers(0, 3).map(lambda n: {"n": {"$gt": n}}),
    st.integers(0, 3).map(lambda n: {"n": {"$lte": n}}),
    st.integers(0, 3).map(lambda n: {"n": {"$ne": n}}),
    st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 2)).map(lambda t: {"tag": t[0], "nested": {"m": t[1]}}),
)
paths = st.lists(st.sampled_from([*LABELS, "*"]), min_size=1, max_size=2).map(tuple)
refreshes = st.sampled_from([None, True, False])
ttls = st.sampled_from([None, 1, 1, 2])

operations = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values, ttls),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys, refreshes),
    st.tuples(
        st.just("search"),
        st.lists(st.sampled_from(LABELS), max_size=2).map(tuple),
        filters,
        st.integers(0, 5),
        st.integers(0, 3),
        refreshes,
    ),
    st.tuples(
        st.just("list_namespaces"),
        st.one_of(st.none(), paths),
        st.one_of(st.none(), paths),
        st.one_of(st.none(), st.integers(1, 3)),
        st.integers(1, 6),
        st.integers(0, 2),
    ),
    st.tuples(st.just("advance"), st.sampled_from([0, 30, 59, 60, 61, 90, 120])),
)


class Reference:
    """InMemoryStore plus TTL on the fake clock and live-namespace listing (see the module docstring)."""

    def __init__(self, clock: FakeClock) -> None:
        self.memory = InMemoryStore()
        self.clock = clock
        self.deadline: dict[tuple[tuple[str, ...], str], tuple[float, float]] = {}

    def _expire(self) -> None:
        now = self.clock()
        for address, (deadline, _) in list(self.deadline.items()):
            if deadline <= now:
                self.memory.delete(*address)
                del self.deadline[address]
        for namespace in [ns for ns, items in self.memory._data.items() if not items]:
            del self.memory._data[namespace]

    def _refresh(self, items: list[Any], refresh: bool | None) -> None:
        if refresh is False:
            return
        for item in items:
            address = (tuple(item.namespace), item.key)
            if address in self.deadline:
                minutes = self.deadline[address][1]
                self.deadline[address] = (self.clock() + minutes * 60, minutes)

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any], ttl: float | None) -> None:
        self._expire()
        self.memory.put(namespace, key, value)
        self.deadline.pop((namespace, key), None)
        if ttl is not None:
            self.deadline[(namespace, key)] = (self.clock() + ttl * 60, ttl)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        self._expire()
        self.memory.delete(namespace, key)
        self.deadline.pop((namespace, key), None)

    def get(self, namespace: tuple[str, ...], key: str, refresh: bool | None) -> Item | None:
        self._expire()
        item = self.memory.get(namespace, key)
        self._refresh([item] if item else [], refresh)
        return item

    def search(self, prefix: tuple[str, ...], filter: Any, limit: int, offset: int, refresh: bool | None) -> list[Any]:
        self._expire()
        everything = self.memory.search(prefix, filter=filter, limit=10**6)
        everything.sort(key=lambda item: (tuple(item.namespace), item.key))
        page = everything[offset : offset + limit]
        self._refresh(page, refresh)
        return page

    def list_namespaces(self, **options: Any) -> list[tuple[str, ...]]:
        self._expire()
        return self.memory.list_namespaces(**options)


def shape(result: Any) -> Any:
    """What must be identical: namespaces, keys and values (times are checked in test_store.py)."""
    if isinstance(result, Item):
        return (tuple(result.namespace), result.key, result.value)
    if isinstance(result, list):
        return [shape(r) for r in result]
    return result


EXAMPLE = itertools.count()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(operations, max_size=30))
# A read restarts the TTL: alive 118 s after a 1-minute put, because of the read at 59 s.
@example(
    ops=[
        ("put", ("a",), "k1", {"n": 1, "tag": "x", "nested": {"m": 0}}, 1),
        ("advance", 59),
        ("search", ("a",), None, 5, 0, None),
        ("advance", 59),
        ("get", ("a",), "k1", None),
        ("advance", 59),
        ("get", ("a",), "k1", False),
        ("advance", 2),
        ("list_namespaces", None, None, None, 5, 0),
    ]
)
# max_depth below a shallower namespace: its children are listed (they were skipped once).
@example(
    ops=[
        ("put", ("b",), "k1", {"n": 0, "tag": "x", "nested": {"m": 0}}, None),
        ("put", ("b", "a"), "k1", {"n": 0, "tag": "x", "nested": {"m": 0}}, None),
        ("list_namespaces", None, None, 2, 1, 1),
    ]
)
def test_store_matches_inmemorystore(store: durastate.Store, clock: FakeClock, ops: list[tuple[Any, ...]]) -> None:
    # One store per test, a fresh kv scope per example: examples never see each other's items.
    ours = DurastateStore(store, name=f"differential-{next(EXAMPLE)}")
    reference = Reference(clock)
    for step, op in enumerate(ops):
        kind = op[0]
        if kind == "advance":
            clock.advance(op[1])
            continue
        if kind == "put":
            _, namespace, key, value, ttl = op
            expected, got = reference.put(namespace, key, value, ttl), ours.put(namespace, key, value, ttl=ttl)
        elif kind == "delete":
            _, namespace, key = op
            expected, got = reference.delete(namespace, key), ours.delete(namespace, key)
        elif kind == "get":
            _, namespace, key, refresh = op
            expected, got = reference.get(namespace, key, refresh), ours.get(namespace, key, refresh_ttl=refresh)
        elif kind == "search":
            _, prefix, filter, limit, offset, refresh = op
            expected = reference.search(prefix, filter, limit, offset, refresh)
            got = ours.search(prefix, filter=filter, limit=limit, offset=offset, refresh_ttl=refresh)
        else:
            _, prefix, suffix, max_depth, limit, offset = op
            options = {"prefix": prefix, "suffix": suffix, "max_depth": max_depth, "limit": limit, "offset": offset}
            expected, got = reference.list_namespaces(**options), ours.list_namespaces(**options)
        assert shape(got) == shape(expected), f"step {step}: {op}"
