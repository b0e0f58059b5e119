"""Conformance for ``store.records``: the hypothesis model of documents, commits from several
processes, index use.
"""

from __future__ import annotations

import copy
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import durastate
from durastate import Conflict, records
from durastate.records import MAX_SAFE_INTEGER, Records

from ..plans import STATISTICS, assert_index_search, plan_of, with_statistics
from .common import (
    WORKER_TIMEOUT,
    all_pages,
    base,
    change,
    conv_scope,
    conversation,
    create,
    delta,
    doc_record,
    entry,
    retire,
    set_op,
    task,
)

__all__ = ["TestRecordsIndexUse", "TestRecordsAcrossProcesses", "TestRecordsModel"]


class _Doc:
    def __init__(self, scope: dict[str, Any], history: str | None) -> None:
        self.scope = scope
        self.history = history
        self.created: int | None = None
        self.retired: int | None = None
        self.revisions: list[tuple[int, int, dict[str, Any], int]] = []  # (seq, version, value, depth)

    @property
    def current_only(self) -> bool:
        return self.scope["kind"] != "conversation" or self.history == "latest"

    def at(self, point: int | None) -> tuple[int, dict[str, Any], int] | None:
        if self.created is None:
            return None
        if point is None:
            if self.retired is not None:
                return None
            point = MAX_SAFE_INTEGER
        elif not (self.created <= point and (self.retired is None or point < self.retired)):
            return None
        best = None
        for seq, version, value, depth in self.revisions:
            if seq <= point:
                best = (version, value, depth)
        return best


KEYS = st.sampled_from(["a", "b", "c"])


class RecordsMachine(RuleBasedStateMachine):
    """Random batches of document writes (and entries) against a model."""

    def __init__(self, factory: Callable[[], durastate.Store]) -> None:
        super().__init__()
        self.store = factory()
        self.r = self.store.records
        self.r.commit([conversation(1)])
        self.docs: dict[int, _Doc] = {}
        self.next_id = 100
        self.seqs: list[int] = [self.r.last_seq()]

    def _commit(self, writes: list[dict[str, Any]], apply: Callable[[int], None]) -> None:
        seq = self.r.commit(writes)
        assert seq == self.seqs[-1] + 1
        self.seqs.append(seq)
        apply(seq)

    @rule(full=st.booleans(), value=st.dictionaries(KEYS, st.integers(-5, 5), max_size=3), with_entry=st.booleans())
    def create_document(self, full: bool, value: dict[str, Any], with_entry: bool) -> None:
        id = self.next_id
        self.next_id += 2
        scope = conv_scope(1) if full else {"kind": "task", "taskId": 9}
        doc = _Doc(scope, None)
        writes = [create(doc_record(id, kind=f"k{id}", scope=scope), base(value))]
        if with_entry:
            writes.append(entry(id + 1, 1))

        def apply(seq: int) -> None:
            doc.created = seq
            doc.revisions.append((seq, 1, copy.deepcopy(value), 0))
            self.docs[id] = doc

        self._commit(writes, apply)

    @precondition(lambda self: any(d.retired is None for d in self.docs.values()))
    @rule(data=st.data())
    def change_documents(self, data: st.DataObject) -> None:
        live = sorted(i for i, d in self.docs.items() if d.retired is None)
        chosen = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=3, unique=True))
        writes: list[dict[str, Any]] = []
        plans: list[tuple[int, str, Any]] = []
        for id in chosen:
            doc = self.docs[id]
            version, value, depth = doc.at(None)  # type: ignore[misc]
            action = data.draw(st.sampled_from(["set", "remove", "base", "retire"]))
            if action == "set":
                key, n = data.draw(KEYS), data.draw(st.integers(-5, 5))
                writes.append(change(id, delta([set_op(key, n)], version)))
                new = {**value, key: n}
                plans.append((id, "delta", (version, new, depth + 1)))
            elif action == "remove" and value:
                key = data.draw(st.sampled_from(sorted(value)))
                writes.append(change(id, delta([["d", [key]]], version)))
                new = {k: v for k, v in value.items() if k != key}
                plans.append((id, "delta", (version, new, depth + 1)))
            elif action == "retire":
                writes.append(retire(id))
                plans.append((id, "retire", None))
            else:
                new = data.draw(st.dictionaries(KEYS, st.integers(-5, 5), max_size=3))
                writes.append(change(id, base(new, version + 1)))
                plans.append((id, "delta", (version + 1, new, 0)))

        def apply(seq: int) -> None:
            for id, kind, payload in plans:
                doc = self.docs[id]
                if kind == "retire":
                    doc.retired = seq
                else:
                    version, new, depth = payload
                    doc.revisions.append((seq, version, new, depth))

        self._commit(writes, apply)

    @precondition(lambda self: any(d.retired is None for d in self.docs.values()))
    @rule(data=st.data())
    def refused_batch(self, data: st.DataObject) -> None:
        live = sorted(i for i, d in self.docs.items() if d.retired is None)
        id = data.draw(st.sampled_from(live))
        version = self.docs[id].at(None)[0]  # type: ignore[index]
        bad = data.draw(
            st.sampled_from(
                [
                    change(id, delta([["a", ["zz"], "x"]], version)),
                    change(id, delta([set_op("a", 1)], version + 1)),
                    create(doc_record(id), base({})),
                    entry(1, 1),
                ]
            )
        )
        before = self.r.last_seq()
        with pytest.raises(Conflict):
            self.r.commit([entry(self.next_id, 1), task(self.next_id + 1, 1), bad])
        assert self.r.last_seq() == before

    @rule(data=st.data())
    def read_at_a_point(self, data: st.DataObject) -> None:
        point = data.draw(st.sampled_from(self.seqs))
        for id, doc in self.docs.items():
            if doc.current_only:
                continue
            want = doc.at(point)
            got = self.r.document(id, point)
            if want is None:
                assert got is None, (id, point)
            else:
                assert got is not None, (id, point)
                assert (got["version"], got["value"], got["deltasSinceBase"]) == want, (id, point)

    @invariant()
    def current_reads_match(self) -> None:
        for id, doc in self.docs.items():
            want = doc.at(None)
            got = self.r.document(id)
            if want is None:
                assert got is None
            else:
                assert got is not None and (got["version"], got["value"], got["deltasSinceBase"]) == want

    def teardown(self) -> None:
        self.store.close()


class TestRecordsModel:
    def test_documents_match_the_model(self, open_store: Callable[..., durastate.Store]) -> None:
        stores: list[durastate.Store] = []

        def factory() -> durastate.Store:
            # A fresh, empty store per example: the same URL, a new table prefix.
            s = open_store(prefix=f"m{len(stores)}_")
            stores.append(s)
            return s

        machine: Any = lambda: RecordsMachine(factory)  # noqa: E731
        run_state_machine_as_test(
            machine,
            settings=settings(max_examples=25, stateful_step_count=25, deadline=None),
        )


def commit_many(url: str, worker: int, count: int) -> list[int]:
    store = durastate.open(url, busy_timeout=30.0)
    try:
        r = store.records
        seqs = []
        own_task = r.mint_id()
        for i in range(count):
            id = r.mint_id()
            seqs.append(r.commit([entry(id, 1), task(own_task, 1, status=f"{worker}:{i}")]))
        return seqs
    finally:
        store.close()


def _run_worker(sender: Any, url: str, worker: int, count: int) -> None:
    try:
        sender.send(("ok", commit_many(url, worker, count)))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        sender.send(("error", repr(exc)))


class TestRecordsAcrossProcesses:
    WORKERS = 4
    COMMITS = 40

    def test_concurrent_commits_get_strictly_increasing_gap_free_sequences(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        setup = open_shared()
        try:
            start = setup.records.commit([conversation(1)])
        finally:
            setup.close()
        ctx = multiprocessing.get_context("spawn")
        procs: list[tuple[Any, Any]] = []
        try:
            for w in range(self.WORKERS):
                receiver, sender = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_run_worker, args=(sender, shared_url, w, self.COMMITS), daemon=True)
                proc.start()
                sender.close()
                procs.append((proc, receiver))
            results: list[list[int]] = []
            for proc, receiver in procs:
                assert receiver.poll(WORKER_TIMEOUT), "a committing worker hung"
                status, value = receiver.recv()
                assert status == "ok", value
                results.append(value)
                proc.join(WORKER_TIMEOUT)
        finally:
            for proc, _ in procs:
                if proc.is_alive():
                    proc.kill()
                    proc.join(10)
        for seqs in results:
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        every = sorted(s for seqs in results for s in seqs)
        assert every == list(range(start + 1, start + 1 + self.WORKERS * self.COMMITS))
        check = open_shared()
        try:
            entries = _all_entries(check.records)
            assert len(entries) == self.WORKERS * self.COMMITS
            assert sorted(e["commitSeq"] for e in entries) == every
        finally:
            check.close()


def _all_entries(r: Records) -> list[dict[str, Any]]:
    out: Iterator[dict[str, Any]] = iter(all_pages(r.scan_entries, {"conversationId": 1, "order": "ascending"}, 50))
    return [r.entry(e["id"]) for e in out]  # type: ignore[misc]


class TestRecordsIndexUse:
    """Commit, entry and document reads are index searches (flat in store size)."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        # Rows to gather statistics on: an empty analyzed table plans like no real one. Documents with a few
        # revisions each, so the revision table's statistics are a real one's too.
        store.records.commit([conversation(i) for i in range(1, 201)])
        store.records.commit([create(doc_record(1000 + i, scope=conv_scope(i)), base({})) for i in range(1, 51)])
        for n in range(3):
            store.records.commit([change(1000 + i, delta([set_op("n", n)])) for i in range(1, 51)])
        return with_statistics(store, request.param)

    def check(
        self,
        store: durastate.Store,
        statement: Any,
        params: tuple[Any, ...],
        table: str,
        *using: str,
        sorts: bool = False,
    ) -> None:
        plan = plan_of(store, statement, params)
        assert_index_search(plan, store.engine.prefix + table, "c", "a", "d", "r", "n", using=using, sorts=sorts)

    def test_entries(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_ENTRY, (1,), "rec_entry", "id")
        self.check(filled, records.HEAD_MARKER, (1, 10), "rec_entry", "conversation_id")
        for statement in records.ENTRIES.values():
            self.check(filled, statement, (1, 0, 10, 5), "rec_entry", "conversation_id")

    def test_conversations(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_CONVERSATION, (1,), "rec_conversation", "id")
        # The chain's rows (at most MAX_CHAIN_DEPTH) are put in order by a sort.
        self.check(filled, records.CHAIN, (1, 10), "rec_conversation", "id", sorts=True)

    def test_documents(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_DOCUMENT_RECORD, (1,), "rec_document", "id")
        self.check(filled, records.FIND_DOCUMENT["current"], ("k", "s", 1, 1, "key"), "rec_document", "key_value")
        # At most CHECKPOINT_EVERY + 1 revision rows, which an engine may sort after the join.
        self.check(filled, records.MATERIALIZE, (5, 5, 0, 1), "rec_revision", "document_id", sorts=True)
        # A commit's read of its documents and their newest revisions; the check of an address it creates at.
        self.check(filled, records.documents_sql(2), (1, 2), "rec_document", "id")
        self.check(filled, records.documents_sql(2), (1, 2), "rec_revision", "document_id")
        self.check(filled, records.NO_CURRENT_DOCUMENT, ("k", "s", 1, 1, "key"), "rec_document", "key_value")

    def test_id_lookups(self, filled: durastate.Store) -> None:
        self.check(filled, records.GET_TASK, (1,), "rec_task", "id")
        self.check(filled, records.GET_SUBMISSION, (1,), "rec_submission", "id")
