"""Conformance for ``store.documents``: the hypothesis model and writers in several processes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import durastate
from durastate import Conflict
from durastate.documents import (
    Document,
    DocumentInfo,
    Documents,
    PrefixInfo,
)

from ..multiprocess import ANY_METHOD, BUSY_TIMEOUT, _Workers
from .common import DOCS, MODEL_KEYS, MODEL_PREFIXES, cas_increment, locked_increment

__all__ = ["TestDocumentsAcrossProcesses", "TestDocumentsModel"]


class DocumentsMachine(RuleBasedStateMachine):
    """``store.documents`` against a dict ``key -> (payload bytes, revision)``."""

    def __init__(self, docs: Documents) -> None:
        super().__init__()
        self.docs = docs
        self.model: dict[str, tuple[bytes, int]] = {}
        for key in list(docs.iter_keys()):
            docs.delete(key)

    @rule(key=MODEL_KEYS, data=DOCS)
    def write(self, key: str, data: dict[str, Any]) -> None:
        rev = self.docs.write(key, data)
        expected = self.model[key][1] + 1 if key in self.model else 1
        assert rev == expected
        self.model[key] = (orjson.dumps(data), rev)

    @rule(key=MODEL_KEYS, data=DOCS, stale=st.booleans())
    def write_cas(self, key: str, data: dict[str, Any], stale: bool) -> None:
        current = self.model.get(key, (b"", 0))[1]
        expect = current + 1 if stale else current
        if expect == 0 or not stale:
            # expect=0 is create-only: it works exactly when the key is absent.
            rev = self.docs.write(key, data, expect=expect)
            assert rev == current + 1
            self.model[key] = (orjson.dumps(data), rev)
        else:
            with pytest.raises(Conflict):
                self.docs.write(key, data, expect=expect)

    @rule(key=MODEL_KEYS, data=DOCS)
    def create_only(self, key: str, data: dict[str, Any]) -> None:
        if key in self.model:
            with pytest.raises(Conflict):
                self.docs.write(key, data, expect=0)
        else:
            assert self.docs.write(key, data, expect=0) == 1
            self.model[key] = (orjson.dumps(data), 1)

    @rule(key=MODEL_KEYS)
    def delete(self, key: str) -> None:
        assert self.docs.delete(key) == (key in self.model)
        self.model.pop(key, None)

    @precondition(lambda self: bool(self.model))
    @rule(key=MODEL_KEYS)
    def clear(self, key: str) -> None:
        got = self.docs.clear(key)
        if key not in self.model:
            assert got is None
            return
        backup, n = key + ".bak", 1
        while backup in self.model:
            backup, n = f"{key}.bak.{n}", n + 1
        assert got == backup
        self.model[backup] = (self.model.pop(key)[0], 1)

    @rule(key=MODEL_KEYS)
    def read(self, key: str) -> None:
        got = self.docs.read(key)
        if key not in self.model:
            assert got is None
        else:
            payload, rev = self.model[key]
            assert got == Document(orjson.loads(payload), rev)

    @rule(prefix=MODEL_PREFIXES)
    def describe_prefix(self, prefix: str) -> None:
        inside = [p for k, (p, _) in self.model.items() if k.startswith(prefix)]
        assert self.docs.describe(prefix=prefix) == PrefixInfo(len(inside), sum(map(len, inside)))

    @invariant()
    def listing_matches(self) -> None:
        items = self.docs.list().items
        assert items == [DocumentInfo(k, self.model[k][1], len(self.model[k][0])) for k in sorted(self.model)]


class TestDocumentsModel:
    def test_documents_behave_like_the_model(self, store: durastate.Store) -> None:
        factory: Any = lambda: DocumentsMachine(store.documents)  # noqa: E731
        run_state_machine_as_test(
            factory,
            settings=settings(max_examples=25, stateful_step_count=25, deadline=None),
        )


def mp_locked_increments(url: str, rounds: int, barrier: Any) -> None:
    with durastate.open(url, busy_timeout=BUSY_TIMEOUT) as store:
        barrier.wait(30)
        for _ in range(rounds):
            locked_increment(store.documents, "counter")


def mp_cas_increments(url: str, rounds: int, barrier: Any) -> int:
    conflicts = 0
    with durastate.open(url, busy_timeout=BUSY_TIMEOUT) as store:
        barrier.wait(30)
        for _ in range(rounds):
            conflicts += cas_increment(store.documents, "counter")
    return conflicts


def mp_opposite_locks(url: str, first: str, second: str, rounds: int, barrier: Any) -> None:
    with durastate.open(url, busy_timeout=BUSY_TIMEOUT) as store:
        docs = store.documents
        barrier.wait(30)
        for _ in range(rounds):
            with docs.lock(first):
                locked_increment(docs, first)
                with docs.lock(second, first):
                    locked_increment(docs, second)


@pytest.mark.multiprocess
class TestDocumentsAcrossProcesses:
    PROCESSES = 3
    ROUNDS = 30

    def test_locked_read_modify_write_from_processes_is_exact(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        open_shared().close()  # create and migrate before the race
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(self.PROCESSES)
            for i in range(self.PROCESSES):
                workers.start(f"locker-{i}", mp_locked_increments, shared_url, self.ROUNDS, barrier)
            workers.results()
        total = self.PROCESSES * self.ROUNDS
        with open_shared() as store:
            assert store.documents.read("counter") == Document({"n": total}, total)

    def test_cas_retry_loops_from_processes_are_exact(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        with open_shared() as store:
            store.documents.write("counter", {"n": 0})
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(self.PROCESSES)
            for i in range(self.PROCESSES):
                workers.start(f"cas-{i}", mp_cas_increments, shared_url, self.ROUNDS, barrier)
            workers.results()
        total = self.PROCESSES * self.ROUNDS
        with open_shared() as store:
            assert store.documents.read("counter") == Document({"n": total}, total + 1)

    def test_opposite_order_nested_locks_from_processes_never_deadlock_or_fail(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        open_shared().close()
        rounds = 20
        with _Workers(ANY_METHOD) as workers:
            barrier = workers.ctx.Barrier(2)
            workers.start("ab", mp_opposite_locks, shared_url, "a", "b", rounds, barrier)
            workers.start("ba", mp_opposite_locks, shared_url, "b", "a", rounds, barrier)
            workers.results()
        with open_shared() as store:
            for key in "ab":
                doc = store.documents.read(key)
                assert doc is not None
                assert doc.data["n"] == 2 * rounds
