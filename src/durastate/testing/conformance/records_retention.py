"""Conformance: retention of records' full-history documents (``records.prune_document_revisions``).

Old revisions go (beyond the newest ``keep_last``, older than
``older_than``, or both), never a document's newest one; every revision
left reads exactly as it did before the prune (value, version,
``deltasSinceBase``), whatever checkpoint it sat between; a read at a
pruned point raises ``RevisionPruned``; sweeps cross batches, honour their
``limit`` and resume; ``Retention`` runs them from ``Store.maintain()`` and
is off by default (pi-durable keeps every revision).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import Conflict, InvalidRequest, NotFound, Retention, records
from durastate._retention import BATCH
from durastate.records import CHECKPOINT_EVERY, Records, RevisionPruned
from durastate.records import SCHEMA as RECORDS_SCHEMA
from durastate.testing.clock import FakeClock

from ._schema_edits import migrate_again, rewind
from .plans import STATISTICS, assert_index_search, plan_of, with_statistics
from .records import (
    base,
    change,
    conv_scope,
    conversation,
    copy_doc,
    create,
    delta,
    doc_record,
    entry,
    fingerprint,
    retire,
    set_op,
    submission,
    task,
)

__all__ = [
    "TestRecordsRetention",
    "TestRecordsRetentionPolicy",
    "TestRecordsRetentionMigration",
    "TestRecordsRetentionIndexUse",
]

CONV = 1


def full_history_doc(r: Records, id: int, value: dict[str, Any] | None = None) -> int:
    """Create a full-history (conversation-scoped) document; return its commit sequence."""
    return r.commit([create(doc_record(id, scope=conv_scope(CONV), key=f"d{id}"), base(value or {"n": 0}))])


def grow(
    r: Records,
    id: int,
    count: int,
    clock: FakeClock | None = None,
    *,
    start: int = 1,
    rebase_every: int | None = None,
) -> list[int]:
    """``count`` more revisions of ``id``, the i-th setting ``n`` to i (from ``start``); their sequences.

    Deltas of version 1, or with ``rebase_every`` a new base (and version)
    every that many. With ``clock``, one second passes before each.
    """
    seqs = []
    for i in range(start, start + count):
        if clock is not None:
            clock.advance(1)
        if rebase_every is not None and i % rebase_every == 0:
            content = base({"n": i, "rebased": True}, version=1 + i // rebase_every)
        else:
            content = delta([set_op("n", i), set_op(f"k{i % 7}", [i])], version=1 + i // (rebase_every or 10**9))
        seqs.append(r.commit([change(id, content)]))
    return seqs


def reads(r: Records, id: int, seqs: list[int]) -> dict[int, Any]:
    """Every point-in-time read of ``id`` at ``seqs``."""
    return {seq: r.document(id, seq) for seq in seqs}


def stored_seqs(r: Records, id: int) -> list[int]:
    return [revision["seq"] for revision in r.document_revisions(id)]


class TestRecordsRetention:
    @pytest.fixture
    def rec(self, store: durastate.Store) -> Records:
        store.records.commit([conversation(CONV)])
        return store.records

    @pytest.mark.parametrize("keep", [1, 2, 5, CHECKPOINT_EVERY, CHECKPOINT_EVERY + 3])
    def test_keep_last_leaves_the_newest_reading_exactly_as_before(self, rec: Records, keep: int) -> None:
        first = full_history_doc(rec, 5)
        seqs = [first, *grow(rec, 5, BATCH + 2 * CHECKPOINT_EVERY + 5)]  # more than one batch, across checkpoints
        before = reads(rec, 5, seqs)
        current = rec.document(5)
        assert rec.prune_document_revisions(keep_last=keep) == len(seqs) - keep
        assert stored_seqs(rec, 5) == seqs[-keep:]
        for seq in seqs[-keep:]:
            assert rec.document(5, seq) == before[seq]
        assert rec.document(5) == current
        for seq in (first, seqs[-keep - 1]):  # the document was alive there, its revision is gone
            with pytest.raises(RevisionPruned, match=f"removed its revisions before {seqs[-keep]}") as caught:
                rec.document(5, seq)
            assert isinstance(caught.value, NotFound)
        assert rec.document(5, first - 1) is None  # before it was created: still simply absent
        assert rec.prune_document_revisions(keep_last=keep) == 0

    def test_kept_revisions_across_a_version_change_read_as_before(self, rec: Records) -> None:
        seqs = [full_history_doc(rec, 5), *grow(rec, 5, 3 * CHECKPOINT_EVERY, rebase_every=20)]
        before = reads(rec, 5, seqs)
        for keep in (len(seqs) - 7, 2 * CHECKPOINT_EVERY - 1, CHECKPOINT_EVERY - 3, 3, 1):
            rec.prune_document_revisions(keep_last=keep)
            assert stored_seqs(rec, 5) == seqs[-keep:]
            assert reads(rec, 5, seqs[-keep:]) == {seq: before[seq] for seq in seqs[-keep:]}

    def test_commits_after_a_prune_keep_every_revision_readable(self, rec: Records) -> None:
        seqs = [full_history_doc(rec, 5), *grow(rec, 5, CHECKPOINT_EVERY + 3)]
        assert rec.prune_document_revisions(keep_last=1) == len(seqs) - 1
        # The one kept (at depth CHECKPOINT_EVERY + 3) is no longer the newest, nor a checkpoint.
        seqs += grow(rec, 5, 2 * CHECKPOINT_EVERY, start=CHECKPOINT_EVERY + 4)
        kept = stored_seqs(rec, 5)
        assert kept == seqs[-len(kept) :] and len(kept) == 2 * CHECKPOINT_EVERY + 1
        values = reads(rec, 5, kept)
        ns = [v["value"]["n"] for v in values.values()]
        assert ns == list(range(CHECKPOINT_EVERY + 3, 3 * CHECKPOINT_EVERY + 4))
        assert [v["deltasSinceBase"] for v in values.values()] == ns

    def test_older_than_keeps_the_young_and_always_the_newest(self, rec: Records, clock: FakeClock) -> None:
        old = [full_history_doc(rec, 5), *grow(rec, 5, 10)]
        only_old = [full_history_doc(rec, 6), *grow(rec, 6, 3)]
        clock.advance(100)
        young = grow(rec, 5, 4, clock)
        before = reads(rec, 5, young)
        assert rec.prune_document_revisions(older_than=50) == len(old) + len(only_old) - 1
        assert stored_seqs(rec, 5) == young
        assert stored_seqs(rec, 6) == only_old[-1:]  # old, but the newest
        assert reads(rec, 5, young) == before
        with pytest.raises(RevisionPruned):
            rec.document(5, old[-1])
        # older_than=0: strictly older than now; revisions of this very millisecond stay.
        assert rec.prune_document_revisions(older_than=0) == len(young) - 1
        assert stored_seqs(rec, 5) == young[-1:]

    def test_both_rules_keep_what_either_keeps(self, rec: Records, clock: FakeClock) -> None:
        old = [full_history_doc(rec, 5), *grow(rec, 5, 5)]
        clock.advance(100)
        young = grow(rec, 5, 5, clock)
        # Outside the newest 2 and older than 50 s: only the old ones go.
        assert rec.prune_document_revisions(keep_last=2, older_than=50) == len(old)
        assert stored_seqs(rec, 5) == young
        # Within the newest 8 (all of them): nothing goes, however old.
        clock.advance(1000)
        assert rec.prune_document_revisions(keep_last=8, older_than=0) == 0
        assert rec.prune_document_revisions(keep_last=2, older_than=0) == 3

    def test_limit_bounds_a_sweep_and_the_next_one_resumes(self, rec: Records) -> None:
        runs = {}
        for id in (5, 6, 7):
            runs[id] = [full_history_doc(rec, id), *grow(rec, id, 20)]
        before = {id: reads(rec, id, seqs[-3:]) for id, seqs in runs.items()}
        removed = [rec.prune_document_revisions(keep_last=3, limit=7) for _ in range(9)]
        assert removed == [7] * 7 + [5, 0]  # 3 documents x 18 revisions
        for id, seqs in runs.items():
            assert stored_seqs(rec, id) == seqs[-3:]
            assert reads(rec, id, seqs[-3:]) == before[id]
        with pytest.raises(InvalidRequest):
            rec.prune_document_revisions(keep_last=1, limit=-1)
        assert rec.prune_document_revisions(keep_last=1, limit=0) == 0

    def test_current_only_documents_and_other_records_are_untouched(self, rec: Records) -> None:
        rec.commit(
            [
                entry(2, CONV, head="h"),
                task(3, CONV),
                submission(4, CONV, request_id="req"),
                create(doc_record(8), base({"a": 1})),  # session scope: current-only
                create(doc_record(9, scope=conv_scope(CONV), history="latest"), base({"a": 1})),
            ]
        )
        for i in range(5):
            rec.commit([change(8, delta([set_op("a", i)])), change(9, delta([set_op("a", i)]))])
        full_history_doc(rec, 5)
        grow(rec, 5, 4)
        others = fingerprint(rec, range(1, 5)), rec.document(8), rec.document(9)
        assert rec.prune_document_revisions(keep_last=1) == 4
        assert (fingerprint(rec, range(1, 5)), rec.document(8), rec.document(9)) == others
        assert len(rec.document_revisions(8)) == len(rec.document_revisions(9)) == 1

    def test_a_retired_document_keeps_its_last_revision(self, rec: Records) -> None:
        seqs = [full_history_doc(rec, 5), *grow(rec, 5, 6)]
        retired_at = rec.commit([retire(5)])
        assert rec.prune_document_revisions(keep_last=1) == len(seqs) - 1
        assert stored_seqs(rec, 5) == seqs[-1:]
        assert rec.document(5, seqs[-1])["value"]["n"] == 6  # type: ignore[index]
        assert rec.document(5, retired_at) is None and rec.document(5) is None

    def test_a_copy_from_a_pruned_point_is_refused(self, rec: Records) -> None:
        seqs = [full_history_doc(rec, 5), *grow(rec, 5, 6)]
        rec.prune_document_revisions(keep_last=2)
        last = rec.last_seq()
        with pytest.raises(Conflict, match="retention removed"):
            rec.commit([copy_doc(doc_record(20, scope=conv_scope(2), key="d5"), 5, seqs[1])])
        assert rec.last_seq() == last and rec.document(20) is None
        rec.commit([copy_doc(doc_record(20, scope=conv_scope(2), key="d5"), 5, seqs[-2])])
        assert rec.document(20)["value"] == rec.document(5, seqs[-2])["value"]  # type: ignore[index]

    def test_bad_arguments_change_nothing(self, rec: Records) -> None:
        seqs = [full_history_doc(rec, 5), *grow(rec, 5, 3)]
        with pytest.raises(InvalidRequest, match="keep_last=, older_than="):
            rec.prune_document_revisions()
        for bad_keep in (0, -1, 1.5, True, "2"):
            with pytest.raises(InvalidRequest):
                rec.prune_document_revisions(keep_last=bad_keep)  # type: ignore[arg-type]
        for bad_age in (-1, float("nan"), float("inf"), True, "5"):
            with pytest.raises(InvalidRequest):
                rec.prune_document_revisions(older_than=bad_age)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest):
            rec.prune_document_revisions(keep_last=1, limit="3")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest):  # checked even where keep_last alone would keep everything
            rec.prune_document_revisions(keep_last=2**63, older_than=-1)
        assert stored_seqs(rec, 5) == seqs

    @pytest.mark.parametrize("older_than", [None, 0])
    def test_keep_last_beyond_int64_keeps_everything(self, rec: Records, older_than: float | None) -> None:
        seqs = [full_history_doc(rec, 5), *grow(rec, 5, 3)]
        assert rec.prune_document_revisions(keep_last=2**63, older_than=older_than) == 0
        assert stored_seqs(rec, 5) == seqs

    def test_pruning_while_another_thread_commits_keeps_every_revision_readable(
        self, store: durastate.Store, rec: Records
    ) -> None:
        full_history_doc(rec, 5)
        done = threading.Event()
        failures: list[BaseException] = []

        def commit_deltas() -> None:
            try:
                grow(rec, 5, 3 * CHECKPOINT_EVERY + 5)
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)
            finally:
                done.set()

        writer = threading.Thread(target=commit_deltas)
        writer.start()
        while not done.is_set():
            rec.prune_document_revisions(keep_last=1)
        writer.join()
        assert failures == []
        kept = stored_seqs(rec, 5)
        n = 3 * CHECKPOINT_EVERY + 5
        assert kept[-1] == rec.last_seq()
        # Every revision left reads: its n is its position counted from the newest.
        assert [rec.document(5, seq)["value"]["n"] for seq in kept] == list(range(n - len(kept) + 1, n + 1))  # type: ignore[index]
        assert rec.document(5)["value"]["n"] == n  # type: ignore[index]


class TestRecordsRetentionPolicy:
    def test_maintain_prunes_revisions_within_its_budget(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = open_store(clock=clock, retention=Retention(max_record_revisions=2))
        r = store.records
        r.commit([conversation(CONV)])
        seqs = {id: [full_history_doc(r, id), *grow(r, id, 4)] for id in (5, 6)}
        partial = store.maintain(max_rows=3)
        assert partial.finished is False and partial.record_revisions == 3
        rest = store.maintain()
        assert rest.finished is True and rest.record_revisions == 2 * 5 - 2 * 2 - 3
        assert {id: stored_seqs(r, id) for id in seqs} == {id: s[-2:] for id, s in seqs.items()}
        assert store.maintain().record_revisions == 0

    def test_maintain_ages_revisions(self, open_store: Callable[..., durastate.Store], clock: FakeClock) -> None:
        policy = Retention(record_revision_max_age=60, max_record_revisions=1)
        store = open_store(clock=clock, retention=policy)
        r = store.records
        r.commit([conversation(CONV)])
        old = [full_history_doc(r, 5), *grow(r, 5, 3)]
        clock.advance(120)
        young = grow(r, 5, 2, clock)
        report = store.maintain()
        assert report.record_revisions == len(old)
        assert stored_seqs(r, 5) == young

    def test_retention_is_off_by_default(self, open_store: Callable[..., durastate.Store], clock: FakeClock) -> None:
        store = open_store(clock=clock)
        r = store.records
        r.commit([conversation(CONV)])
        seqs = [full_history_doc(r, 5), *grow(r, 5, 5)]
        clock.advance(10**7)
        assert store.maintain().record_revisions == 0
        assert stored_seqs(r, 5) == seqs

    @pytest.mark.parametrize(
        "bad",
        [
            {"max_record_revisions": 0},
            {"max_record_revisions": 1.5},
            {"max_record_revisions": True},
            {"record_revision_max_age": -1},
            {"record_revision_max_age": float("nan")},
        ],
    )
    def test_bad_policies_are_refused(self, bad: dict[str, Any]) -> None:
        with pytest.raises(InvalidRequest, match="Retention"):
            Retention(**bad)


class TestRecordsRetentionMigration:
    def test_revisions_from_before_write_times_count_as_old(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = open_store(clock=clock)
        store.records.commit([conversation(CONV)])
        before = [full_history_doc(store.records, 5), *grow(store.records, 5, 3)]
        # The database as the previous version left it, then migrated again.
        rewind(store.engine, RECORDS_SCHEMA, 1, "ALTER TABLE {p}rec_revision DROP COLUMN written_at")
        store = migrate_again(store, RECORDS_SCHEMA, lambda: open_store(clock=clock))
        after = grow(store.records, 5, 2)
        assert store.records.prune_document_revisions(older_than=3600) == len(before)
        assert stored_seqs(store.records, 5) == after
        assert store.records.document(5, after[0])["value"]["n"] == 1  # type: ignore[index]


class TestRecordsRetentionIndexUse:
    """The sweep's reads are index searches (flat in store size)."""

    @pytest.fixture(params=STATISTICS)
    def filled(self, store: durastate.Store, request: pytest.FixtureRequest) -> durastate.Store:
        r = store.records
        r.commit([conversation(CONV)])
        for id in range(5, 45):
            full_history_doc(r, id)
            grow(r, id, 5)
        return with_statistics(store, request.param)

    def check(self, store: durastate.Store, statement: Any, params: tuple[Any, ...], *using: str) -> None:
        plan = plan_of(store, statement, params)
        prefix = store.engine.prefix
        assert_index_search(plan, prefix + "rec_revision", "k", "o", "d", using=using)

    def test_candidates(self, filled: durastate.Store) -> None:
        self.check(filled, records.PRUNE_CANDIDATES, (2, 10, 256), "document_id")

    def test_batch_statements(self, filled: durastate.Store) -> None:
        self.check(filled, records.OLDEST_REVISIONS, (5, 100, 257), "document_id", "seq")
        self.check(filled, records.NEEDS_STATE, (5, 10), "document_id", "seq")
        self.check(filled, records.OLDEST_REVISION, (5,), "document_id")
