"""DurastateStorage against Strands' InMemoryStorage and LocalFileStorage: the same keys, bytes and errors.

Hypothesis draws sequences of write / read / delete / list (prefixes, empty
too) / search over keys that exercise the shipped backends' key rules
(runs of ``/``, leading and trailing ``/``, an empty key, ``..`` segments,
backslashes), through the storage itself and through ``namespace`` views
(nested too); each call must give the same outcome on all three backends:
the same bytes, the same sorted key lists, the same search results, the
same error class (``StorageError``). ``LocalFileStorage`` cannot hold a key
that is also a "folder" of another (``a`` and ``a/b``: a file and a
directory of one name), so it runs on a key pool without such pairs.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strands.storage import InMemoryStorage, LocalFileStorage
from strands.types.exceptions import StorageError

import durastate
from durastate.errors import InvalidRequest
from durastate.integrations.strands import DurastateStorage, InvalidStorageKey

from .._differential import differential

KEYS = ["a", "a/b", "/a//b/", "a/b/c.md", "ab", "b", "é/x", "", "a/../b", "c\\d", "notes/cat dog.txt"]
PREFIXES = ["", "a", "a/", "/a", "b", "é", "x/../y", "notes/"]
VIEWS = [(), ("a",), ("a", "b"), ("notes",)]
FLAT_KEYS = ["k", "/k/", "kk", "b.md", "é", "", "x/../y", "c\\d", "cat dog.txt"]  # no key is another's folder
FLAT_VIEWS = [(), ("n",), ("n", "m")]
WORDS = ["cat", "dog", "the quick fox", "notes", ""]


def operations(keys: list[str], views: list[tuple[str, ...]]) -> Any:
    at = st.sampled_from(range(len(views)))
    return st.lists(
        st.one_of(
            st.tuples(st.just("write"), at, st.sampled_from(keys), st.sampled_from(WORDS)),
            st.tuples(st.just("write"), at, st.sampled_from(keys), st.sampled_from(WORDS)),
            st.tuples(st.just("read"), at, st.sampled_from(keys)),
            st.tuples(st.just("delete"), at, st.sampled_from(keys)),
            st.tuples(st.just("list"), at, st.sampled_from(PREFIXES)),
            st.tuples(st.just("search"), at, st.sampled_from(WORDS)),
        ),
        min_size=3,
        max_size=20,
    )


def _view(storage: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        storage = storage.namespace(part)
    return storage


async def _call(storage: Any, op: tuple[Any, ...], views: list[tuple[str, ...]]) -> tuple[str, Any]:
    view = _view(storage, views[op[1]])
    try:
        if op[0] == "write":
            return "ok", await view.write(op[2], op[3].encode())
        if op[0] == "read":
            return "ok", await view.read(op[2])
        if op[0] == "delete":
            return "ok", await view.delete(op[2])
        if op[0] == "list":
            return "ok", await view.list(op[2])
        return "ok", sorted((r.key, r.score) for r in await view.search(op[2]))
    except StorageError:
        return "error", "StorageError"


_prefixes = (f"run{n}" for n in itertools.count())


async def _agree(store: durastate.Store, ops: list[Any], views: list[tuple[str, ...]], file: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="strands-storage-") as folder:
        ours = DurastateStorage(store=store)
        # Each example in a namespace of its own in the shared store, as each gets a fresh folder.
        storages = {"durastate": ours.namespace(next(_prefixes)), "memory": InMemoryStorage()}
        if file:
            storages["file"] = LocalFileStorage(folder)
        try:
            for step, op in enumerate(ops):
                outcomes = {label: await _call(storage, op, views) for label, storage in storages.items()}
                mine = outcomes.pop("durastate")
                for label, theirs in outcomes.items():
                    assert mine == theirs, f"step {step} {op}: durastate {mine!r} != {label} {theirs!r}"
        finally:
            await ours.aclose()


SETTINGS = differential(30)


@SETTINGS
@given(ops=operations(KEYS, VIEWS))
def test_random_sequences_match_the_in_memory_storage(shared_store: durastate.Store, ops: list[Any]) -> None:
    asyncio.run(_agree(shared_store, ops, VIEWS, file=False))


@SETTINGS
@given(ops=operations(FLAT_KEYS, FLAT_VIEWS))
def test_random_sequences_match_both_shipped_storages(shared_store: durastate.Store, ops: list[Any]) -> None:
    asyncio.run(_agree(shared_store, ops, FLAT_VIEWS, file=True))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.write(1, b"x"), InvalidStorageKey),
        (lambda s: s.write("k", "text, not bytes"), InvalidRequest),
        (lambda s: s.write("k" * 5000, b"x"), InvalidStorageKey),
        (lambda s: s.list(None), InvalidStorageKey),
    ],
)
def test_wrong_arguments_are_refused_and_change_nothing(shared_store: durastate.Store, call: Any, error: type) -> None:
    async def main() -> None:
        async with DurastateStorage(store=shared_store) as storage:
            with pytest.raises(error):
                await call(storage)
            assert await storage.list("") == []

    asyncio.run(main())
