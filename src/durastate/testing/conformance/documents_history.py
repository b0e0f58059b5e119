"""Conformance: the revision history of ``store.documents`` (``Retention(document_history=N)``).

Every test runs on every engine through the ``durastate.testing.plugin``
fixtures. What the history holds is checked against what the test wrote
(a model of revision -> data), and what the table holds by counting its
rows, so "bounded" is checked, not assumed. Concurrency tests synchronise
with a barrier, never sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import Conflict, InvalidRequest, Retention, WrongType, documents
from durastate._retention import BATCH
from durastate.documents import Document, HistoryInfo, Revision, RevisionPage, UnreadableDocument
from durastate.documents import history as history_sql
from durastate.engines.base import DDL, READ, WRITE
from durastate.testing.clock import FakeClock

from .plans import STATISTICS, assert_index_search, plan_of, with_statistics

__all__ = [
    "TestDocumentHistory",
    "TestDocumentHistoryBadInput",
    "TestDocumentHistoryConcurrency",
    "TestDocumentHistoryIndexUse",
    "TestDocumentHistoryLifecycle",
    "TestDocumentHistoryMigration",
    "TestDocumentHistoryRetention",
]

KEEP = 5


def recording(open_store: Callable[..., durastate.Store], clock: FakeClock, keep: int = KEEP) -> durastate.Store:
    return open_store(clock=clock, retention=Retention(document_history=keep))


def revisions(store: durastate.Store, key: str, **options: Any) -> list[tuple[int, dict[str, Any]]]:
    """The key's whole recorded history (every page), newest first, as (revision, data)."""
    out: list[tuple[int, dict[str, Any]]] = []
    before = None
    while True:
        page = store.documents.history(key, before=before, **options)
        out += [(r.revision, r.data) for r in page.items]
        if page.cursor is None:
            return out
        before = page.cursor


def history_rows(store: durastate.Store, key: str | None = None) -> int:
    """Rows in the history table (of ``key``, or all): what is stored, visible or not."""
    engine = store.engine
    if key is None:
        row = engine.one(engine.sql(READ("SELECT count(*) FROM {p}document_revision")))
    else:
        row = engine.one(engine.sql(READ("SELECT count(*) FROM {p}document_revision WHERE key = ?")), (key,))
    assert row is not None
    return int(row[0])


def plant_revision(store: durastate.Store, key: str, revision: int, payload: bytes, written_at: int = 0) -> None:
    """A history row written bypassing the facet (as another program might)."""
    engine = store.engine
    engine.execute(
        engine.sql(WRITE("INSERT INTO {p}document_revision (key, revision, written_at, payload) VALUES (?, ?, ?, ?)")),
        (key, revision, written_at, payload),
    )


class TestDocumentHistory:
    def test_off_by_default_writes_no_history(self, store: durastate.Store) -> None:
        assert store.documents.keep_revisions is None
        for i in range(3):
            store.documents.write("k", {"v": i})
        assert store.documents.history("k") == RevisionPage([], None)
        assert history_rows(store) == 0
        # The current revision is still readable by number; earlier ones were not kept.
        assert store.documents.read("k", revision=3) == Document({"v": 2}, 3)
        assert store.documents.read("k", revision=2) is None

    def test_every_revision_is_recorded_newest_first_with_its_time(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        times = []
        for i in range(3):
            times.append(clock())
            assert store.documents.write("k", {"v": i}) == i + 1
            clock.advance(1.5)
        page = store.documents.history("k")
        assert page == RevisionPage(
            [Revision(n, int(times[n - 1] * 1000) / 1000, {"v": n - 1}) for n in (3, 2, 1)], None
        )

    def test_a_document_keeps_its_last_n_revisions(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock, keep=3)
        for i in range(10):
            store.documents.write("k", {"v": i})
        store.documents.write("other", {"v": 0})
        assert revisions(store, "k") == [(10, {"v": 9}), (9, {"v": 8}), (8, {"v": 7})]
        assert history_rows(store, "k") == 3, "bounded in passing: the rows behind are deleted, not hidden"
        assert revisions(store, "other") == [(1, {"v": 0})]
        assert store.documents.describe_history("k") == HistoryInfo(3, 8, 10)
        assert store.documents.describe_history("absent") == HistoryInfo(0, None, None)

    def test_keep_one_records_just_the_current_revision(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock, keep=1)
        for i in range(4):
            store.documents.write("k", {"v": i})
        assert revisions(store, "k") == [(4, {"v": 3})]
        assert history_rows(store) == 1

    def test_pages_follow_the_cursor(self, open_store: Callable[..., durastate.Store], clock: FakeClock) -> None:
        store = recording(open_store, clock, keep=20)
        for i in range(7):
            store.documents.write("k", {"v": i})
        docs = store.documents
        first = docs.history("k", limit=3)
        assert [r.revision for r in first.items] == [7, 6, 5] and first.cursor == 5
        second = docs.history("k", limit=3, before=first.cursor)
        assert [r.revision for r in second.items] == [4, 3, 2] and second.cursor == 2
        last = docs.history("k", limit=3, before=second.cursor)
        assert [r.revision for r in last.items] == [1] and last.cursor is None
        assert docs.history("k", limit=7) == RevisionPage(docs.history("k").items, None)  # exactly one page
        assert docs.history("k", before=1) == RevisionPage([], None)
        assert [r.revision for r in docs.history("k", before=10**6, limit=2).items] == [7, 6]
        assert docs.history("absent") == RevisionPage([], None)

    def test_read_a_revision_by_number(self, open_store: Callable[..., durastate.Store], clock: FakeClock) -> None:
        store = recording(open_store, clock, keep=3)
        for i in range(5):
            store.documents.write("k", {"v": i})
        docs = store.documents
        assert docs.read("k", revision=5) == Document({"v": 4}, 5) == docs.read("k")
        assert docs.read("k", revision=3) == Document({"v": 2}, 3)
        assert docs.read("k", revision=2) is None  # pruned (more than 3 behind)
        assert docs.read("k", revision=6) is None  # not written yet
        assert docs.read("absent", revision=1) is None

    def test_every_kind_of_write_is_recorded_and_refusals_are_not(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        docs = store.documents
        assert docs.write("k", {"v": "create"}, expect=0) == 1
        assert docs.write("k", {"v": "cas"}, expect=1) == 2
        assert docs.write("k", {"v": "put"}) == 3
        with pytest.raises(Conflict):
            docs.write("k", {"v": "stale"}, expect=1)
        with pytest.raises(Conflict):
            docs.write("k", {"v": "exists"}, expect=0)
        assert revisions(store, "k") == [(3, {"v": "put"}), (2, {"v": "cas"}), (1, {"v": "create"})]

    def test_history_commits_and_rolls_back_with_the_transaction(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        docs = store.documents
        docs.write("k", {"v": 0})
        with pytest.raises(RuntimeError), store.transaction():
            docs.write("k", {"v": 1})
            docs.write("k", {"v": 2})
            raise RuntimeError("undo")
        assert revisions(store, "k") == [(1, {"v": 0})]
        with store.transaction():
            docs.write("k", {"v": 1})
            with pytest.raises(Conflict):  # a refusal inside does not doom the rest
                docs.write("k", {"v": "x"}, expect=7)
            store.kv.put(b"s", b"n", b"k", b"v")
        with docs.lock("k"):
            current = docs.read("k")
            assert current is not None
            docs.write("k", {"v": current.data["v"] + 1}, expect=current.revision)
        assert revisions(store, "k") == [(3, {"v": 2}), (2, {"v": 1}), (1, {"v": 0})]

    def test_any_store_reads_what_a_recording_store_wrote(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        writer = open_shared(clock=clock, retention=Retention(document_history=KEEP))
        reader = open_shared(clock=clock)
        for i in range(3):
            writer.documents.write("k", {"v": i})
        assert revisions(reader, "k") == revisions(writer, "k") == [(3, {"v": 2}), (2, {"v": 1}), (1, {"v": 0})]
        assert reader.documents.read("k", revision=1) == Document({"v": 0}, 1)

    def test_an_unreadable_recorded_payload_raises_with_its_revision(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        store.documents.write("k", {"v": 1})
        store.documents.write("k", {"v": 2})
        store.engine.execute(
            store.engine.sql(WRITE("UPDATE {p}document_revision SET payload = ? WHERE key = ? AND revision = ?")),
            (b"[1, 2]", "k", 1),
        )
        assert store.documents.history("k", limit=1).items[0].data == {"v": 2}
        with pytest.raises(UnreadableDocument) as caught:
            store.documents.history("k")
        assert caught.value.key == "k" and caught.value.revision == 1
        with pytest.raises(UnreadableDocument):
            store.documents.read("k", revision=1)


class TestDocumentHistoryLifecycle:
    def test_delete_ends_the_history_and_a_new_life_starts_at_one(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        docs = store.documents
        for i in range(3):
            docs.write("k", {"old": i})
        assert docs.delete("k", expect=2) is False  # refused: the history stays
        assert history_rows(store, "k") == 3
        assert docs.delete("k") is True
        assert history_rows(store, "k") == 0
        assert docs.history("k") == RevisionPage([], None)
        docs.write("k", {"new": 0})
        assert revisions(store, "k") == [(1, {"new": 0})]

    def test_delete_inside_a_rolled_back_transaction_keeps_the_history(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        store.documents.write("k", {"v": 0})
        store.documents.write("k", {"v": 1})
        with pytest.raises(RuntimeError), store.transaction():
            assert store.documents.delete("k")
            raise RuntimeError("undo")
        assert revisions(store, "k") == [(2, {"v": 1}), (1, {"v": 0})]

    def test_clear_ends_the_history_and_backups_start_without_one(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock)
        docs = store.documents
        docs.write("k", {"v": 0})
        docs.write("k", {"v": 1})
        assert docs.clear("k") == "k.bak"
        assert history_rows(store) == 0
        assert docs.history("k.bak") == RevisionPage([], None)
        assert docs.read("k.bak") == Document({"v": 1}, 1)

    def test_rotated_backups_carry_no_history(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = open_store(clock=clock, retention=Retention(document_history=KEEP, max_backups=2))
        docs = store.documents
        docs.write("k.bak", {"written": "directly"})  # a backup slot with a history of its own
        docs.write("k.bak.1", {"written": "directly"})
        docs.write("k", {"v": 1})
        assert docs.clear("k") == "k.bak.1"  # rotates: k.bak dropped, k.bak.1 moved down
        assert history_rows(store) == 0
        assert docs.read("k.bak") == Document({"written": "directly"}, 1)

    def test_a_store_that_does_not_record_leaves_gaps_that_show(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        on = open_shared(clock=clock, retention=Retention(document_history=4))
        off = open_shared(clock=clock)
        on.documents.write("k", {"v": 1})
        on.documents.write("k", {"v": 2})
        off.documents.write("k", {"v": 3})
        on.documents.write("k", {"v": 4})
        assert revisions(on, "k") == [(4, {"v": 4}), (2, {"v": 2}), (1, {"v": 1})]
        on.documents.write("k", {"v": 5})  # the last 4 revisions are 2-5: 1 goes, 3 was never there
        assert revisions(on, "k") == [(5, {"v": 5}), (4, {"v": 4}), (2, {"v": 2})]

    def test_rows_of_an_earlier_life_are_never_shown_as_the_new_one(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        on = open_shared(clock=clock, retention=Retention(document_history=KEEP))
        off = open_shared(clock=clock)
        for i in range(3):
            on.documents.write("k", {"old": i})
        off.documents.delete("k")  # does not record: the rows stay behind
        assert history_rows(on, "k") == 3
        assert on.documents.history("k") == RevisionPage([], None)  # no document: nothing belongs to it
        assert on.documents.describe_history("k") == HistoryInfo(0, None, None)
        assert on.documents.read("k", revision=2) is None
        on.documents.write("k", {"new": 0})  # a recording create starts the history afresh
        assert revisions(on, "k") == [(1, {"new": 0})]
        assert history_rows(on, "k") == 1

    def test_a_smaller_keep_bounds_older_rows_within_keep_writes(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        wide = open_shared(clock=clock, retention=Retention(document_history=10))
        for i in range(10):
            wide.documents.write("k", {"v": i})
        narrow = open_shared(clock=clock, retention=Retention(document_history=3))
        for i in range(10, 13):
            narrow.documents.write("k", {"v": i})
        assert revisions(narrow, "k") == [(13, {"v": 12}), (12, {"v": 11}), (11, {"v": 10})]
        assert history_rows(narrow, "k") == 3

    def test_a_row_left_at_the_new_revision_is_replaced_not_a_conflict(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        wide = open_shared(clock=clock, retention=Retention(document_history=5))
        off = open_shared(clock=clock)
        narrow = open_shared(clock=clock, retention=Retention(document_history=2))
        for i in range(5):
            wide.documents.write("k", {"old": i})
        off.documents.delete("k")  # leaves rows 1-5 of the old life
        off.documents.write("k", {"new": 1})
        off.documents.write("k", {"new": 2})
        # Revision 3 is both the row to recycle's successor and a leftover: replaced in place.
        assert narrow.documents.write("k", {"new": 3}) == 3
        assert narrow.documents.read("k", revision=3) == Document({"new": 3}, 3)
        assert narrow.documents.history("k").items[0].data == {"new": 3}


class TestDocumentHistoryRetention:
    def test_prune_history_applies_keep_to_what_was_written_before(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        wide = open_shared(clock=clock, retention=Retention(document_history=10))
        for i in range(6):
            wide.documents.write("k", {"v": i})
        narrow = open_shared(clock=clock)  # prune_history works whatever the store's own setting
        assert narrow.documents.prune_history(2) == 4
        assert [n for n, _ in revisions(narrow, "k")] == [6, 5]
        assert narrow.documents.prune_history(2) == 0

    def test_older_than_keeps_each_current_revision(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock, keep=10)
        docs = store.documents
        for i in range(3):
            docs.write("idle", {"v": i})
            docs.write("busy", {"v": i})
        clock.advance(100)
        docs.write("busy", {"v": 3})
        assert docs.prune_history(10, older_than=50) == 5  # idle 1-2, busy 1-3
        assert [n for n, _ in revisions(store, "idle")] == [3]  # old, but current
        assert [n for n, _ in revisions(store, "busy")] == [4]
        assert docs.prune_history(10, older_than=0) == 0

    def test_orphans_and_stale_rows_go_whatever_keep_says(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        on = open_shared(clock=clock, retention=Retention(document_history=KEEP))
        off = open_shared(clock=clock)
        for i in range(3):
            on.documents.write("gone", {"v": i})
            on.documents.write("reborn", {"v": i})
        off.documents.delete("gone")
        off.documents.delete("reborn")
        off.documents.write("reborn", {"v": "new"})  # revision 1 of a new life; rows 2-3 are stale
        assert off.documents.prune_history(100) == 5  # gone 1-3, reborn 2-3
        assert history_rows(off) == 1  # reborn's row 1 cannot be told from the new life's (see the docs)

    def test_prune_crosses_batches_and_honours_its_limit(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = recording(open_store, clock, keep=2)
        keys = [f"k/{i:04d}" for i in range(BATCH + 20)]
        with store.transaction():
            for key in keys:
                store.documents.write(key, {"v": 0})
                store.documents.write(key, {"v": 1})
        assert store.documents.prune_history(1, limit=BATCH + 5) == BATCH + 5
        assert store.documents.prune_history(1, limit=10) == 10
        assert store.documents.prune_history(1) == 5
        assert history_rows(store) == len(keys)
        assert all(revisions(store, key) == [(2, {"v": 1})] for key in (keys[0], keys[-1]))

    def test_maintain_runs_the_policy_within_its_budget(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        policy = Retention(document_history=10, document_history_max_age=60)
        store = open_store(clock=clock, retention=policy)
        for i in range(5):
            store.documents.write("a", {"v": i})
            store.documents.write("b", {"v": i})
        clock.advance(61)
        first = store.maintain(max_rows=3)
        assert first.document_revisions == 3 and not first.finished
        rest = store.maintain()
        assert rest.document_revisions == 5 and rest.finished
        assert [n for n, _ in revisions(store, "a")] == [5] and [n for n, _ in revisions(store, "b")] == [5]

    def test_maintain_leaves_history_alone_without_a_policy(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        on = open_shared(clock=clock, retention=Retention(document_history=KEEP))
        for i in range(3):
            on.documents.write("k", {"v": i})
        report = open_shared(clock=clock).maintain()
        assert report.document_revisions == 0 and history_rows(on) == 3


class TestDocumentHistoryBadInput:
    @pytest.fixture
    def filled(self, open_store: Callable[..., durastate.Store], clock: FakeClock) -> durastate.Store:
        store = recording(open_store, clock)
        store.documents.write("k", {"v": 0})
        store.documents.write("k", {"v": 1})
        return store

    def unchanged(self, store: durastate.Store) -> None:
        assert revisions(store, "k") == [(2, {"v": 1}), (1, {"v": 0})]

    @pytest.mark.parametrize(
        ("call", "error", "message"),
        [
            (lambda d: d.history(b"k"), WrongType, "key must be a str"),
            (lambda d: d.history("a\x00b"), InvalidRequest, "NUL"),
            (lambda d: d.describe_history(None), WrongType, "key must be a str"),
            (lambda d: d.history("k", limit=0), InvalidRequest, "limit must be >= 1"),
            (lambda d: d.history("k", limit="3"), WrongType, "limit must be an int"),
            (lambda d: d.history("k", before=0), InvalidRequest, "before must be >= 1"),
            (lambda d: d.history("k", before=True), WrongType, "before must be an int"),
            (lambda d: d.read("k", revision=0), InvalidRequest, "revision must be >= 1"),
            (lambda d: d.read("k", revision=2.0), WrongType, "revision must be an int"),
            (lambda d: d.read("k", revision=2**63), InvalidRequest, "64-bit"),
            (lambda d: d.read(1, revision=1), WrongType, "key must be a str"),
            (lambda d: d.prune_history(0), InvalidRequest, "keep must be an int >= 1"),
            (lambda d: d.prune_history(None), WrongType, "keep must be an int >= 1"),
            (lambda d: d.prune_history(1, older_than=-1), InvalidRequest, "older_than must be >= 0"),
            (lambda d: d.prune_history(1, older_than=float("nan")), InvalidRequest, "older_than"),
            (lambda d: d.prune_history(1, limit=-1), InvalidRequest, "limit"),
        ],
    )
    def test_refused_with_the_argument_named_and_nothing_changes(
        self, filled: durastate.Store, call: Callable[[Any], Any], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error, match=message):
            call(filled.documents)
        self.unchanged(filled)

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"document_history": 0}, "document_history must be None or an int >= 1"),
            ({"document_history": True}, "document_history must be None or an int >= 1"),
            ({"document_history": 2.5}, "document_history must be None or an int >= 1"),
            ({"document_history": 3, "document_history_max_age": -1}, "document_history_max_age"),
            ({"document_history_max_age": 60}, "needs document_history"),
        ],
    )
    def test_a_bad_policy_is_refused(self, options: dict[str, Any], message: str) -> None:
        with pytest.raises(InvalidRequest, match=message):
            Retention(**options)

    def test_refusals_inside_a_transaction_do_not_doom_it(self, filled: durastate.Store) -> None:
        with filled.transaction():
            with pytest.raises(InvalidRequest):
                filled.documents.history("k", limit=0)
            filled.documents.write("k", {"v": 2})
        assert revisions(filled, "k")[0] == (3, {"v": 2})


class TestDocumentHistoryConcurrency:
    def test_concurrent_writers_record_every_revision_exactly_once(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        writers, rounds = 4, 15
        stores = [
            open_shared(clock=clock, retention=Retention(document_history=writers * rounds)) for _ in range(writers)
        ]
        barrier = threading.Barrier(writers)
        errors: list[BaseException] = []
        written: dict[int, dict[str, Any]] = {}
        lock = threading.Lock()

        def work(n: int) -> None:
            try:
                barrier.wait(30)
                for i in range(rounds):
                    data = {"writer": n, "i": i}
                    revision = stores[n].documents.write("shared", data)
                    stores[n].documents.write(f"own/{n}", data)
                    with lock:
                        written[revision] = data
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "a writer never finished"
        assert errors == []
        total = writers * rounds
        assert revisions(stores[0], "shared") == [(n, written[n]) for n in range(total, 0, -1)]
        assert history_rows(stores[0]) == total + total  # shared, plus each writer's own key


class TestDocumentHistoryIndexUse:
    """History pages, point reads and the in-passing bound are primary-key searches."""

    @pytest.fixture(params=STATISTICS)
    def filled(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock, request: pytest.FixtureRequest
    ) -> durastate.Store:
        store = recording(open_store, clock)
        with store.transaction():
            for i in range(50):
                for _ in range(3):
                    store.documents.write(f"k/{i}", {"i": i})
        return with_statistics(store, request.param)

    def check(self, store: durastate.Store, statement: Any, params: tuple[Any, ...]) -> None:
        plan = plan_of(store, statement, params)
        prefix = store.engine.prefix
        assert_index_search(plan, prefix + "document_revision", prefix + "documents", "d", using=("key",))

    def test_pages_read_one_documents_range_newest_first(self, filled: durastate.Store) -> None:
        self.check(filled, history_sql.page_sql(False), ("k/1", "k/1", 10))
        self.check(filled, history_sql.page_sql(True), ("k/1", "k/1", 3, 10))

    def test_point_statements(self, filled: durastate.Store) -> None:
        self.check(filled, history_sql.READ_REVISION, ("k/1", 2, "k/1", 2, "k/1"))
        self.check(filled, history_sql.DESCRIBE, ("k/1", "k/1"))
        self.check(filled, history_sql.TRIM, ("k/1", 1))
        self.check(filled, history_sql.FORGET, ("k/1",))
        self.check(filled, history_sql.RECYCLE, (9, 0, b"{}", "k/1", 1, "k/1", 9))
        self.check(filled, history_sql.DELETE_DOOMED, ("k/1", 1, 5, 0))


class TestDocumentHistoryMigration:
    def test_a_store_from_before_history_is_upgraded_in_place(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        old = open_shared(clock=clock)
        old.documents.write("k", {"v": 1})
        old.documents.write("k", {"v": 2})
        engine = old.engine
        # The database as the previous version (documents schema 1) left it.
        engine.execute(engine.sql(DDL("DROP TABLE {p}document_revision")))
        engine.execute(engine.sql(WRITE("UPDATE {p}schema SET version = 1 WHERE facet = 'documents'")))
        old.close()
        store = open_shared(clock=clock, retention=Retention(document_history=KEEP))
        version = store.engine.one(store.engine.sql(READ("SELECT version FROM {p}schema WHERE facet = 'documents'")))
        assert version is not None and int(version[0]) == documents.SCHEMA.version == 2
        assert store.documents.read("k") == Document({"v": 2}, 2)  # the data is untouched
        assert store.documents.history("k") == RevisionPage([], None)  # nothing was recorded before
        store.documents.write("k", {"v": 3})
        assert revisions(store, "k") == [(3, {"v": 3})]
