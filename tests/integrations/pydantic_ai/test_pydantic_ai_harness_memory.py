"""DurastateMemoryStore against pydantic-ai-harness's own InMemoryStore: the same results, errors included.

The harness's wheel ships no conformance suite, so ``InMemoryStore`` from the
pinned wheel is the reference. Hypothesis draws sequences of ``write``,
``delete``, ``read``, ``get_operation``, ``list_paths`` and ``search`` over a
few paths (some sharing prefixes, one the harness refuses), each mutation
with an ``expected_version`` that is the current one, an older one (also one
from before a delete), ``None`` or garbage, and with or without a
``MemoryOperation`` drawn from a few ids and fingerprints (so receipts are
replayed and reused with other arguments). Versions are opaque strings that
differ between the stores, so each store's versions are compared by identity:
numbered in the order that store first returned them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durastate

pytest.importorskip("pydantic_ai_harness")

from pydantic_ai_harness.memory import (
    InMemoryStore,
    MemoryConflictError,
    MemoryMutation,
    MemoryOperation,
    MemoryOperationConflictError,
    MemoryStore,
    SearchableMemoryStore,
)

from durastate.integrations import pydantic_ai_harness as ours_module
from durastate.integrations.pydantic_ai_harness import (
    DurastateMemoryStore,
    OperationReused,
    VersionConflict,
)

from .._differential import differential

PATHS = ["a.md", "d/x.md", "d/y", "d-e", "../up"]
path = st.sampled_from(PATHS[:4]) | st.sampled_from(PATHS)
prefix = st.sampled_from(["", "d", "d/", "a", "zz", "d/x.md", "/bad"])
content = st.sampled_from(["", "alpha", "alpha beta alpha", "beta\x00gamma", "x" * 40, "Ünïcode beta"])
version = st.sampled_from(["current", "current", "current", "older", "none", "garbage"])
operation = st.none() | st.tuples(st.sampled_from(["o1", "o2", "o3"]), st.sampled_from(["f1", "f2"]))
size = st.integers(-1, 6)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), path, content, version, operation),
        st.tuples(st.just("delete"), path, version, operation),
        st.tuples(st.just("read"), path, st.sampled_from([1, 3, 100, 0])),
        st.tuples(
            st.just("get_operation"), st.tuples(st.sampled_from(["o1", "o2", "o3"]), st.sampled_from(["f1", "f2"]))
        ),
        st.tuples(st.just("list"), prefix, size),
        st.tuples(
            st.just("search"),
            prefix,
            st.sampled_from(["alpha", "beta gamma", "", "md"]),
            size,
            size,
            st.sampled_from([5, 30, 200, 0]),
            st.sampled_from([4, 100, 0]),
        ),
    ),
    max_size=30,
)


class Versions:
    """One store's versions: each numbered when first seen; per path, the ones seen."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.seen: dict[str, list[str]] = {}

    def note(self, path: str, version: str | None) -> int | None:
        if version is None:
            return None
        self.seen.setdefault(path, []).append(version)
        return self.numbers.setdefault(version, len(self.numbers))

    def pick(self, path: str, how: str) -> str | None:
        seen = self.seen.get(path, [])
        if how == "current":
            return seen[-1] if seen else None
        if how == "older":
            return seen[0] if seen else "never"
        return None if how == "none" else "garbage"


def _outcome(error: BaseException) -> str:
    for kind in (MemoryOperationConflictError, MemoryConflictError, ValueError):
        if isinstance(error, kind):
            return kind.__name__
    raise error


async def _apply(store: Any, versions: Versions, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    try:
        if kind == "write":
            _, p, text, how, oper = op
            mutation = await store.write(
                p, text, expected_version=versions.pick(p, how), operation=oper and MemoryOperation(*oper)
            )
            return (mutation.replayed, mutation.existed, versions.note(p, mutation.version))
        if kind == "delete":
            _, p, how, oper = op
            mutation = await store.delete(
                p, expected_version=versions.pick(p, how), operation=oper and MemoryOperation(*oper)
            )
            return (mutation.replayed, mutation.existed, versions.note(p, mutation.version))  # replays a write's
        if kind == "read":
            found = await store.read(op[1], max_chars=op[2])
            if found is None:
                return None
            return (found.content, versions.note(op[1], found.version), found.operation_id, found.truncated)
        if kind == "get_operation":
            receipt = await store.get_operation(MemoryOperation(*op[1]))
            return receipt and (receipt.replayed, receipt.existed, receipt.version is None)
        if kind == "list":
            return await store.list_paths(op[1], limit=op[2])
        _, pre, query, limit, max_files, max_chars, max_file_chars = op
        return await store.search(
            pre, query, limit=limit, max_files=max_files, max_chars=max_chars, max_file_chars=max_file_chars
        )
    except Exception as error:
        return _outcome(error)


@pytest.fixture
def memory(shared_url: str) -> Iterator[DurastateMemoryStore]:
    with durastate.open(shared_url) as store, DurastateMemoryStore(store=store) as memory:
        yield memory


def _empty(memory: DurastateMemoryStore) -> None:
    store = memory.store
    store.kv.clear(ours_module.SCOPE)
    for key in list(store.documents.iter_keys(ours_module.FILES)):
        store.documents.delete(key)


@differential(60)
@given(ops=operations)
def test_same_results_as_in_memory_store(memory: DurastateMemoryStore, ops: list[Any]) -> None:
    _empty(memory)
    reference = InMemoryStore()
    ours_versions, reference_versions = Versions(), Versions()

    async def main() -> None:
        for i, op in enumerate(ops):
            expected = await _apply(reference, reference_versions, op)
            got = await _apply(memory, ours_versions, op)
            assert got == expected, (i, op)
            if op[0] in ("write", "delete"):  # and what the change left: the file, every path
                for look in (("read", op[1], 100), ("list", "", 100)):
                    expected = await _apply(reference, reference_versions, look)
                    assert await _apply(memory, ours_versions, look) == expected, (i, op, look)

    asyncio.run(main())


def test_is_the_harness_protocols(memory: DurastateMemoryStore) -> None:
    assert isinstance(memory, MemoryStore)
    assert isinstance(memory, SearchableMemoryStore)


def test_two_writers_of_one_file_one_wins(shared_url: str) -> None:
    """Two stores (two connections) write one version concurrently: one wins, the other gets the conflict."""
    with durastate.open(shared_url) as first, durastate.open(shared_url) as second:
        writers = [DurastateMemoryStore(store=first), DurastateMemoryStore(store=second)]
        created = asyncio.run(writers[0].write("notes.md", "v1", expected_version=None))
        both_read = threading.Barrier(2)

        def write(i: int) -> str:
            found = asyncio.run(writers[i].read("notes.md", max_chars=100))
            assert found is not None and found.version == created.version
            both_read.wait()
            try:
                asyncio.run(writers[i].write("notes.md", f"by {i}", expected_version=found.version))
            except VersionConflict as error:
                assert isinstance(error, MemoryConflictError) and isinstance(error, durastate.Conflict)
                return "conflict"
            return "won"

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(write, [0, 1]))
        assert sorted(results) == ["conflict", "won"]
        stored = asyncio.run(writers[0].read("notes.md", max_chars=100))
        assert stored is not None and stored.content == f"by {results.index('won')}"
        for writer in writers:
            writer.close()


def test_one_operation_retried_at_once_applies_once_and_both_get_its_receipt(shared_url: str) -> None:
    """Two stores run the same operation on one file concurrently (a retry racing the original).

    One applies it; the other gets its receipt, replayed, as the reference gives a second call: on
    PostgreSQL the second waits for the operation's lock and then finds the receipt (it does not race
    the first to the file and lose with a conflict).
    """
    with durastate.open(shared_url) as first, durastate.open(shared_url) as second:
        writers = [DurastateMemoryStore(store=first), DurastateMemoryStore(store=second)]
        created = asyncio.run(writers[0].write("notes.md", "v1", expected_version=None))
        both_read = threading.Barrier(2)
        operation = MemoryOperation("retried", "fp")

        def write(i: int) -> MemoryMutation:
            found = asyncio.run(writers[i].read("notes.md", max_chars=100))
            assert found is not None and found.version == created.version
            both_read.wait()
            return asyncio.run(writers[i].write("notes.md", "v2", expected_version=found.version, operation=operation))

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(write, [0, 1]))
        assert sorted(r.replayed for r in results) == [False, True]
        assert results[0].version == results[1].version and all(r.existed for r in results)
        stored = asyncio.run(writers[0].read("notes.md", max_chars=100))
        assert stored is not None and (stored.content, stored.version) == ("v2", results[0].version)
        for writer in writers:
            writer.close()


def test_version_of_a_deleted_file_does_not_match_its_recreation(memory: DurastateMemoryStore) -> None:
    async def main() -> None:
        old = await memory.write("f", "one", expected_version=None)
        await memory.delete("f", expected_version=old.version)
        new = await memory.write("f", "two", expected_version=None)
        assert new.version != old.version  # the revision alone (1 both times) would repeat
        with pytest.raises(VersionConflict):
            await memory.write("f", "stale", expected_version=old.version)

    asyncio.run(main())


def test_receipt_is_kept_in_the_mutations_transaction(memory: DurastateMemoryStore) -> None:
    async def main() -> None:
        operation = MemoryOperation("op", "fp")
        first = await memory.write("f", "one", expected_version=None, operation=operation)
        again = await memory.write("f", "other", expected_version="whatever", operation=operation)
        assert (again.version, again.replayed) == (first.version, True)
        with pytest.raises(OperationReused):
            await memory.delete("f", expected_version=first.version, operation=MemoryOperation("op", "other"))
        # A refused mutation leaves no receipt.
        with pytest.raises(VersionConflict):
            await memory.write("g", "x", expected_version="nope", operation=MemoryOperation("op2", "fp"))
        assert await memory.get_operation(MemoryOperation("op2", "fp")) is None

    asyncio.run(main())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.write("../x", "c", expected_version=None), "path must be segments"),
        (lambda m: m.write("f", b"bytes", expected_version=None), "content must be a str"),
        (lambda m: m.write("f", "\ud800", expected_version=None), "lone surrogates"),
        (lambda m: m.write("f", "c", expected_version=3), "expected_version must be a str"),
        (lambda m: m.write("f", "c", expected_version=None, operation=("id", "fp")), "operation must be"),
        (lambda m: m.read("f", max_chars=0), "max_chars must be >= 1"),
        (lambda m: m.list_paths("", limit=0), "limit must be >= 1"),
        (lambda m: m.get_operation(None), "operation must be a MemoryOperation"),
    ],
)
def test_refused_arguments(memory: DurastateMemoryStore, call: Any, message: str) -> None:
    with pytest.raises(durastate.InvalidRequest, match=message):
        asyncio.run(call(memory))
    assert list(memory.store.documents.iter_keys(ours_module.FILES)) == []
