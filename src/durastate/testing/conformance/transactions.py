"""Conformance: ``store.transaction()`` across facets, closing, reopening, schema.

One ``with store.transaction():`` block is one atomic commit over every
facet (kv values, counters, logs, queue pushes, claims and acks): all of it
lands when the block ends normally, none of it when it ends with any
exception, ``BaseException`` included. Nested blocks are savepoints.
A statement that fails in the database inside a block dooms the whole
transaction (``TestDoomedTransactions``): later statements are refused, the
block raises on exit and commits nothing, unless a nested block that
*contains* the failure rolls back. Refusals raised before the database is
asked (bad arguments, a lost lease) never doom (``conformance.engine``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate import Conflict, DurastateError, InvalidRequest, SchemaTooNew, StoreClosed
from durastate.engines.base import DDL, READ, WRITE
from durastate.kv import PAGE_SIZE
from durastate.kv import SCHEMA as KV_SCHEMA
from durastate.queues import SCHEMA as QUEUES_SCHEMA
from durastate.queues import Claim
from durastate.testing.clock import FakeClock

from ._schema_edits import shift_version
from .queues import FAILURE_DEADLINE, claim, counts, pop_all, stats

__all__ = [
    "TestClosedStore",
    "TestCloseInsideATransaction",
    "TestDoomedTransactions",
    "TestReopen",
    "TestSchemaTooNew",
    "TestTransactionAtomicity",
    "TestTransactionIsolation",
    "TestTransactionNesting",
]


class Interrupted(BaseException):
    """A ``BaseException`` that is not an ``Exception`` (like KeyboardInterrupt)."""


def observable(store: durastate.Store) -> object:
    """Everything the transaction tests write, read through the public API."""
    return (
        list(store.kv.scan(b"s", b"n")),
        store.kv.counter(b"s", b"n", b"c"),
        [v for _, v in store.kv.log(b"s", b"n", b"l")],
        stats(store, "jobs"),
        stats(store, "follow"),
    )


def write_everything(store: durastate.Store, tag: bytes) -> None:
    """One write of each kind, including settling a claim of queue "jobs"."""
    store.kv.put(b"s", b"n", b"k-" + tag, b"v-" + tag)
    store.kv.put_many(b"s", b"n", [(b"m-" + tag, b"1"), (b"old", b"overwritten by " + tag)])
    store.kv.delete(b"s", b"n", [b"doomed"])
    store.kv.incr(b"s", b"n", b"c", 10)
    store.kv.append(b"s", b"n", b"l", b"entry-" + tag)
    store.queues.push("follow", [b"follow-" + tag])
    claim(store, "jobs").ack()


class _Prepared:
    """Test classes inheriting this get the ``prepared`` fixture.

    (A class member rather than a module fixture: the suite is imported with
    ``import *``, which carries classes but not module-level fixtures.)
    """

    @pytest.fixture
    def prepared(self, store: durastate.Store) -> durastate.Store:
        """A store with committed data for the transaction to change."""
        store.kv.put(b"s", b"n", b"old", b"original")
        store.kv.put(b"s", b"n", b"doomed", b"still here")
        store.kv.incr(b"s", b"n", b"c", 5)
        store.kv.append(b"s", b"n", b"l", b"committed")
        store.queues.push("jobs", [b"job-1", b"job-2"])
        return store


class TestTransactionAtomicity(_Prepared):
    def test_block_yields_the_store(self, store: durastate.Store) -> None:
        with store.transaction() as tx:
            assert tx is store

    def test_commit_spans_every_facet(self, prepared: durastate.Store) -> None:
        store = prepared
        with store.transaction() as tx:
            tx.kv.put(b"s", b"n", b"k", b"v")
            assert tx.kv.incr(b"s", b"n", b"c", 2) == 7
            ordinal = tx.kv.append(b"s", b"n", b"l", b"appended")
            tx.queues.push("follow", [b"next"])
            held = claim(tx, "jobs")
            held.ack()
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert store.kv.counter(b"s", b"n", b"c") == 7
        assert list(store.kv.log(b"s", b"n", b"l"))[-1] == (ordinal, b"appended")
        assert store.queues.pop("follow") == b"next"
        assert held.payload == b"job-1"
        assert pop_all(store, "jobs") == [b"job-2"]

    def test_block_reads_its_own_writes(self, prepared: durastate.Store) -> None:
        store = prepared
        with store.transaction():
            write_everything(store, b"a")
            assert store.kv.get(b"s", b"n", b"k-a") == b"v-a"
            assert store.kv.get(b"s", b"n", b"doomed") is None
            assert dict(store.kv.scan(b"s", b"n"))[b"old"] == b"overwritten by a"
            assert store.kv.counter(b"s", b"n", b"c") == 15
            assert [v for _, v in store.kv.log(b"s", b"n", b"l")] == [b"committed", b"entry-a"]
            assert stats(store, "jobs") == counts(ready=1)
            assert stats(store, "follow") == counts(ready=1)

    @pytest.mark.parametrize(
        "error", [RuntimeError("boom"), KeyboardInterrupt(), SystemExit(3), Interrupted()], ids=repr
    )
    def test_any_exception_rolls_back_every_facet(self, prepared: durastate.Store, error: BaseException) -> None:
        store = prepared
        before = observable(store)
        with pytest.raises(type(error)) as raised, store.transaction():
            write_everything(store, b"a")
            raise error
        assert raised.value is error, "the block's own exception must propagate unchanged"
        assert observable(store) == before

    def test_rolled_back_claim_keeps_its_attempt_count(self, prepared: durastate.Store) -> None:
        store = prepared
        with pytest.raises(RuntimeError), store.transaction():
            claim(store, "jobs")
            raise RuntimeError("undo")
        again = claim(store, "jobs")
        assert (again.payload, again.attempts) == (b"job-1", 1)

    def test_rolled_back_clear_restores_values_logs_and_counters(self, prepared: durastate.Store) -> None:
        store = prepared
        before = observable(store)
        with pytest.raises(RuntimeError), store.transaction():
            assert store.kv.clear(b"s") > 0
            assert store.kv.drain(b"s", b"n") == []
            raise RuntimeError("undo")
        assert observable(store) == before

    @staticmethod
    def lose_lease(store: durastate.Store, clock: FakeClock) -> tuple[Claim, Claim]:
        """A stale claim (lease expired, item re-claimed) and the current one."""
        store.queues.push("leased", [b"contested"])
        stale = claim(store, "leased", lease=5)
        clock.advance(6)
        current = claim(store, "leased", lease=600)
        assert current.id == stale.id
        return stale, current

    def test_conflicting_ack_rolls_back_the_other_writes(self, prepared: durastate.Store, clock: FakeClock) -> None:
        store = prepared
        stale, current = self.lose_lease(store, clock)
        before = observable(store)
        with pytest.raises(Conflict), store.transaction():
            store.kv.put(b"s", b"n", b"result", b"of stale work")
            store.kv.incr(b"s", b"n", b"c")
            store.kv.append(b"s", b"n", b"l", b"stale")
            store.queues.push("follow", [b"follow-up"])
            claim(store, "jobs").ack()
            stale.ack()
        assert observable(store) == before
        current.ack()  # the current holder is unaffected
        assert stats(store, "leased") == counts()

    def test_caught_conflict_leaves_the_transaction_usable(self, prepared: durastate.Store, clock: FakeClock) -> None:
        """A lost lease is an answer, not a failed statement: the block can go on."""
        store = prepared
        stale, _ = self.lose_lease(store, clock)
        with store.transaction():
            store.kv.put(b"s", b"n", b"k", b"kept")
            with pytest.raises(Conflict):
                stale.ack()
            store.queues.push("follow", [b"kept too"])
        assert store.kv.get(b"s", b"n", b"k") == b"kept"
        assert store.queues.pop("follow") == b"kept too"

    def test_store_is_usable_after_a_rollback(self, prepared: durastate.Store) -> None:
        store = prepared
        with pytest.raises(KeyboardInterrupt), store.transaction():
            write_everything(store, b"a")
            raise KeyboardInterrupt
        store.kv.put(b"s", b"n", b"after", b"v")
        with store.transaction():
            write_everything(store, b"b")
        assert store.kv.get(b"s", b"n", b"after") == b"v"
        assert store.kv.get(b"s", b"n", b"k-a") is None
        assert store.kv.get(b"s", b"n", b"k-b") == b"v-b"
        assert pop_all(store, "follow") == [b"follow-b"]

    def test_empty_block_commits(self, store: durastate.Store) -> None:
        with store.transaction():
            pass
        store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") == b"v"

    def test_batches_inside_a_block_are_undone_whole(self, store: durastate.Store) -> None:
        keys = [i.to_bytes(2, "big") for i in range(300)]  # several statements per batch
        with pytest.raises(RuntimeError), store.transaction():
            store.kv.put_many(b"s", b"n", [(k, b"v") for k in keys])
            store.queues.push("q", [b"x"] * 300)
            raise RuntimeError("undo")
        assert list(store.kv.scan(b"s", b"n")) == []
        assert stats(store, "q") == counts()


class TestTransactionNesting(_Prepared):
    def test_caught_inner_failure_undoes_only_the_inner_block(self, prepared: durastate.Store) -> None:
        store = prepared
        with store.transaction():
            store.kv.put(b"s", b"n", b"outer", b"1")
            store.queues.push("follow", [b"outer"])
            with pytest.raises(RuntimeError), store.transaction():
                write_everything(store, b"inner")
                raise RuntimeError("inner only")
            store.kv.incr(b"s", b"n", b"c")
        assert store.kv.get(b"s", b"n", b"outer") == b"1"
        assert store.kv.get(b"s", b"n", b"k-inner") is None
        assert store.kv.get(b"s", b"n", b"old") == b"original"
        assert store.kv.get(b"s", b"n", b"doomed") == b"still here"
        assert store.kv.counter(b"s", b"n", b"c") == 6
        assert [v for _, v in store.kv.log(b"s", b"n", b"l")] == [b"committed"]
        assert pop_all(store, "follow") == [b"outer"]
        assert stats(store, "jobs") == counts(ready=2)

    def test_inner_success_is_undone_by_an_outer_failure(self, prepared: durastate.Store) -> None:
        store = prepared
        before = observable(store)
        with pytest.raises(RuntimeError), store.transaction():
            with store.transaction():
                write_everything(store, b"inner")
            store.kv.put(b"s", b"n", b"outer", b"1")
            raise RuntimeError("outer")
        assert observable(store) == before

    def test_three_levels_middle_failure(self, store: durastate.Store) -> None:
        with store.transaction():
            store.kv.put(b"s", b"n", b"1", b"level 1")
            with pytest.raises(RuntimeError), store.transaction():
                store.kv.put(b"s", b"n", b"2", b"level 2")
                with store.transaction():
                    store.kv.put(b"s", b"n", b"3", b"level 3")
                raise RuntimeError("level 2")
            with store.transaction():
                store.kv.put(b"s", b"n", b"4", b"level 2 again")
        assert list(store.kv.scan(b"s", b"n")) == [(b"1", b"level 1"), (b"4", b"level 2 again")]

    def test_base_exception_in_an_inner_block_undoes_everything(self, prepared: durastate.Store) -> None:
        store = prepared
        before = observable(store)
        with pytest.raises(KeyboardInterrupt), store.transaction():
            store.kv.put(b"s", b"n", b"outer", b"1")
            with store.transaction():
                write_everything(store, b"inner")
                raise KeyboardInterrupt
        assert observable(store) == before


# A statement every engine refuses in the database itself.
NO_SUCH_TABLE = READ("SELECT * FROM {p}no_such_table")
# A table with a CHECK constraint, for a refusal of a value rather than of SQL.
CHECKED_TABLE = DDL("CREATE TABLE {p}checked (v INTEGER NOT NULL CHECK (v > 0))")
INSERT_CHECKED = WRITE("INSERT INTO {p}checked (v) VALUES (?)")
CHECKED_VALUES = READ("SELECT v FROM {p}checked")


def fail_in_database(store: durastate.Store) -> None:
    """Run a statement the database refuses; assert it raised a specific error."""
    engine = store.engine
    with pytest.raises(InvalidRequest) as raised:
        engine.execute(engine.sql(NO_SUCH_TABLE), ())
    assert type(raised.value) is not DurastateError


def keys(store: durastate.Store) -> list[bytes]:
    return [k for k, _ in store.kv.scan(b"s", b"n")]


def put(store: durastate.Store, key: bytes) -> None:
    store.kv.put(b"s", b"n", key, b"v")


class TestDoomedTransactions:
    """Failure before, inside and after savepoints; the same on every engine."""

    def test_issue_repro_nothing_commits(self, store: durastate.Store) -> None:
        """A failure before a savepoint is not undone by rolling that savepoint back."""
        with pytest.raises(InvalidRequest), store.transaction():
            put(store, b"a")
            fail_in_database(store)
            try:
                with store.transaction():
                    raise LookupError
            except LookupError:
                pass
            put(store, b"b")
        assert keys(store) == []

    def test_caught_everything_still_commits_nothing(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="transaction rolled back"), store.transaction():
            put(store, b"a")
            fail_in_database(store)
            with pytest.raises(InvalidRequest, match="aborted by an earlier failed statement"):
                put(store, b"b")
            with pytest.raises(InvalidRequest, match="aborted"), store.transaction():
                raise AssertionError("a nested block of a doomed transaction must not open")
        assert keys(store) == []
        put(store, b"after")  # the store is healthy afterwards
        assert keys(store) == [b"after"]

    def test_failure_inside_a_savepoint_rolled_back_by_its_exception(self, store: durastate.Store) -> None:
        with store.transaction():
            put(store, b"before")
            with pytest.raises(InvalidRequest), store.transaction():
                put(store, b"inside")
                store.engine.execute(store.engine.sql(NO_SUCH_TABLE), ())
            put(store, b"after")
        assert keys(store) == [b"after", b"before"]

    def test_failure_caught_inside_a_savepoint_rolls_it_back_on_exit(self, store: durastate.Store) -> None:
        with store.transaction():
            put(store, b"before")
            with pytest.raises(InvalidRequest, match="block rolled back"), store.transaction():
                put(store, b"inside")
                fail_in_database(store)
            put(store, b"after")
        assert keys(store) == [b"after", b"before"]

    def test_failure_after_a_released_savepoint_dooms_everything(self, store: durastate.Store) -> None:
        with pytest.raises(InvalidRequest, match="transaction rolled back"), store.transaction():
            with store.transaction():
                put(store, b"inside")
            put(store, b"before failure")
            fail_in_database(store)
        assert keys(store) == []

    def test_three_levels_failure_in_the_middle(self, store: durastate.Store) -> None:
        with store.transaction():
            put(store, b"1")
            with pytest.raises(InvalidRequest, match="block rolled back"), store.transaction():
                put(store, b"2")
                fail_in_database(store)
                try:
                    with store.transaction():  # opened after the failure: refused
                        raise LookupError
                except (LookupError, InvalidRequest) as exc:
                    assert isinstance(exc, InvalidRequest), "the doomed level let a savepoint open"
            put(store, b"1 again")
        assert keys(store) == [b"1", b"1 again"]

    def test_three_levels_failure_at_the_bottom(self, store: durastate.Store) -> None:
        with store.transaction():
            put(store, b"1")
            with store.transaction():
                put(store, b"2")
                with pytest.raises(InvalidRequest), store.transaction():
                    put(store, b"3")
                    store.engine.execute(store.engine.sql(NO_SUCH_TABLE), ())
                put(store, b"2 again")
        assert keys(store) == [b"1", b"2", b"2 again"]

    def test_check_violation_is_refused_and_dooms(self, store: durastate.Store) -> None:
        engine = store.engine
        engine.execute(engine.sql(CHECKED_TABLE), ())
        with pytest.raises(InvalidRequest):
            engine.execute(engine.sql(INSERT_CHECKED), (0,))
        with pytest.raises(InvalidRequest, match="transaction rolled back"), store.transaction():
            engine.execute(engine.sql(INSERT_CHECKED), (1,))
            with pytest.raises(InvalidRequest):
                engine.execute(engine.sql(INSERT_CHECKED), (-1,))
        with store.transaction():
            engine.execute(engine.sql(INSERT_CHECKED), (2,))
            with pytest.raises(InvalidRequest), store.transaction():
                engine.execute(engine.sql(INSERT_CHECKED), (-2,))
        assert engine.all(engine.sql(CHECKED_VALUES), ()) == [(2,)]

    def test_a_doomed_read_transaction_raises_too(self, store: durastate.Store) -> None:
        put(store, b"k")
        with pytest.raises(InvalidRequest, match="transaction rolled back"), store.engine.read_transaction():
            assert keys(store) == [b"k"]
            fail_in_database(store)


class TestCloseInsideATransaction:
    """``close()`` from another thread while a block is open: the block rolls back."""

    @staticmethod
    def close_from_another_thread(store: durastate.Store) -> None:
        closer = threading.Thread(target=store.close)
        closer.start()
        closer.join(FAILURE_DEADLINE)
        assert not closer.is_alive()

    def test_next_call_raises_store_closed_and_nothing_commits(
        self, store_url: str, open_store: Callable[..., durastate.Store]
    ) -> None:
        store = open_store()
        with pytest.raises(StoreClosed), store.transaction():
            put(store, b"a")
            self.close_from_another_thread(store)
            with pytest.raises(StoreClosed):
                put(store, b"b")
        if not store.engine.capabilities.in_memory:
            assert keys(open_store()) == []

    def test_block_without_further_calls_rolls_back(
        self, store_url: str, open_store: Callable[..., durastate.Store]
    ) -> None:
        store = open_store()
        with pytest.raises(StoreClosed), store.transaction():
            put(store, b"a")
            with store.transaction():
                put(store, b"inner")
            self.close_from_another_thread(store)
        if not store.engine.capabilities.in_memory:
            assert keys(open_store()) == []

    def test_nested_block_sees_the_close(self, store: durastate.Store) -> None:
        with pytest.raises(StoreClosed), store.transaction():
            put(store, b"a")
            with store.transaction():
                self.close_from_another_thread(store)
                put(store, b"inner")


class TestTransactionIsolation(_Prepared):
    def _read_in_thread(self, read: Callable[[], Any]) -> Any:
        result: list[Any] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                result.append(read())
            except BaseException as exc:  # reported below
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(FAILURE_DEADLINE)
        assert not thread.is_alive(), "the reader blocked on the open transaction"
        if errors:
            raise errors[0]
        return result[0]

    def test_other_threads_do_not_see_uncommitted_writes(self, prepared: durastate.Store) -> None:
        store = prepared
        if not store.engine.capabilities.reads_during_writes:
            pytest.skip(
                "the engine declares reads_during_writes=False: other threads' reads wait for the open "
                "write transaction (sqlite-memory: no WAL), so none can run inside it"
            )
        before = observable(store)
        with store.transaction():
            write_everything(store, b"a")
            assert self._read_in_thread(lambda: observable(store)) == before
        assert self._read_in_thread(lambda: store.kv.get(b"s", b"n", b"k-a")) == b"v-a"


class TestClosedStore:
    def test_close_is_idempotent_and_reported(self, store: durastate.Store) -> None:
        assert not store.closed
        store.close()
        store.close()
        assert store.closed

    def test_context_manager_closes(self, open_store: Callable[..., durastate.Store]) -> None:
        with open_store() as store:
            store.kv.put(b"s", b"n", b"k", b"v")
        assert store.closed
        with pytest.raises(StoreClosed):
            store.kv.get(b"s", b"n", b"k")

    def test_every_call_on_a_closed_store_raises_store_closed(self, store: durastate.Store) -> None:
        store.queues.push("q", [b"a", b"b"])
        held = claim(store, "q")
        view = store.kv.scope(b"s")
        store.close()
        calls: dict[str, Callable[[], object]] = {
            "kv.get": lambda: store.kv.get(b"s", b"n", b"k"),
            "kv.get_many": lambda: store.kv.get_many(b"s", b"n", [b"k"]),
            "kv.put": lambda: store.kv.put(b"s", b"n", b"k", b"v"),
            "kv.put_many": lambda: store.kv.put_many(b"s", b"n", [(b"k", b"v"), (b"j", b"v")]),
            "kv.scan": lambda: list(store.kv.scan(b"s", b"n")),
            "kv.drain": lambda: store.kv.drain(b"s", b"n"),
            "kv.delete": lambda: store.kv.delete(b"s", b"n", all=True),
            "kv.clear": lambda: store.kv.clear(b"s"),
            "kv.prune_expired": lambda: store.kv.prune_expired(),
            "kv.append": lambda: store.kv.append(b"s", b"n", b"k", b"v"),
            "kv.log": lambda: list(store.kv.log(b"s", b"n", b"k")),
            "kv.incr": lambda: store.kv.incr(b"s", b"n", b"k"),
            "kv.counter": lambda: store.kv.counter(b"s", b"n", b"k"),
            "kv.set_counter": lambda: store.kv.set_counter(b"s", b"n", b"k", 1),
            "kv.delete_counter": lambda: store.kv.delete_counter(b"s", b"n", b"k"),
            "scoped.get": lambda: view.get(b"n", b"k"),
            "queues.push": lambda: store.queues.push("q", [b"x"]),
            "queues.pop": lambda: store.queues.pop("q"),
            "queues.pop(wait)": lambda: store.queues.pop("q", wait=FAILURE_DEADLINE),
            "queues.claim": lambda: store.queues.claim("q"),
            "queues.clear": lambda: store.queues.clear("q"),
            "queues.stats": lambda: store.queues.stats("q"),
            "queues.dead_letters": lambda: store.queues.dead_letters("q"),
            "queues.redrive": lambda: store.queues.redrive("q"),
            "queues.delete_dead": lambda: store.queues.delete_dead("q"),
            "claim.ack": held.ack,
            "claim.nack": held.nack,
            "claim.renew": held.renew,
            "transaction": lambda: store.transaction().__enter__(),
        }
        for label, call in calls.items():
            try:
                call()
            except StoreClosed:
                continue
            except Exception as exc:
                pytest.fail(f"{label}: raised {type(exc).__name__}: {exc} instead of StoreClosed")
            pytest.fail(f"{label}: succeeded on a closed store")

    def test_closing_from_another_thread_is_seen_by_this_one(self, store: durastate.Store) -> None:
        store.kv.put(b"s", b"n", b"k", b"v")  # this thread has a connection now
        closer = threading.Thread(target=store.close)
        closer.start()
        closer.join(FAILURE_DEADLINE)
        with pytest.raises(StoreClosed):
            store.kv.get(b"s", b"n", b"k")

    def test_a_scan_started_before_close_fails_on_its_next_page(self, store: durastate.Store) -> None:
        store.kv.put_many(b"s", b"n", [(i.to_bytes(2, "big"), b"v") for i in range(PAGE_SIZE * 2)])
        rows = store.kv.scan(b"s", b"n")
        next(rows)
        store.close()
        with pytest.raises(StoreClosed):
            list(rows)


class TestReopen:
    def test_reopened_store_sees_committed_data_only(
        self, shared_url: str, clock: FakeClock, open_shared: Callable[..., durastate.Store]
    ) -> None:
        with open_shared(clock=clock) as store:
            store.queues.push("jobs", [b"job-1", b"job-2"])
            with store.transaction():
                store.kv.put(b"s", b"n", b"k", b"committed")
                store.kv.incr(b"s", b"n", b"c", 3)
                ordinal = store.kv.append(b"s", b"n", b"l", b"entry")
                store.queues.push("follow", [b"next"])
                claim(store, "jobs").ack()
            with pytest.raises(RuntimeError), store.transaction():
                store.kv.put(b"s", b"n", b"k", b"rolled back")
                store.kv.put(b"s", b"n", b"other", b"rolled back")
                store.queues.push("follow", [b"rolled back"])
                raise RuntimeError("undo")
            held = claim(store, "jobs", lease=60)
            store.queues.push("late", [b"a"], delay=100)
        with open_shared(clock=clock) as store:
            assert list(store.kv.scan(b"s", b"n")) == [(b"k", b"committed")]
            assert store.kv.counter(b"s", b"n", b"c") == 3
            assert list(store.kv.log(b"s", b"n", b"l")) == [(ordinal, b"entry")]
            assert pop_all(store, "follow") == [b"next"]
            # Leases and delays survive the reopen.
            assert stats(store, "jobs") == counts(in_flight=1)
            assert stats(store, "late") == counts(delayed=1)
            clock.advance(61)
            again = claim(store, "jobs")
            assert (again.id, again.payload, again.attempts) == (held.id, b"job-2", 2)
            assert store.kv.append(b"s", b"n", b"l", b"more") > ordinal

    def test_two_stores_on_one_database_see_each_others_commits(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        with open_shared() as first, open_shared() as second:
            with first.transaction():
                first.kv.put(b"s", b"n", b"k", b"from first")
                first.queues.push("q", [b"job"])
            assert second.kv.get(b"s", b"n", b"k") == b"from first"
            assert second.queues.pop("q") == b"job"
            assert first.queues.pop("q") is None


class TestSchemaTooNew:
    @pytest.mark.parametrize("facet", ["kv", "queues"])
    def test_newer_facet_version_is_refused(self, open_store: Callable[..., durastate.Store], facet: str) -> None:
        schema = {"kv": KV_SCHEMA, "queues": QUEUES_SCHEMA}[facet]
        store = open_store()
        store.kv.put(b"s", b"n", b"k", b"kept")
        engine = store.engine
        shift_version(engine, facet, +1)  # as a newer durastate would leave it
        with pytest.raises(SchemaTooNew) as raised:
            engine.migrate([schema])
        assert facet in str(raised.value)
        if not engine.capabilities.in_memory:
            with pytest.raises(SchemaTooNew) as raised:
                open_store()
            assert facet in str(raised.value)
        # Refusing touched nothing: with the version put back, the data is there.
        shift_version(engine, facet, -1)
        engine.migrate([schema])
        assert store.kv.get(b"s", b"n", b"k") == b"kept"
        if not engine.capabilities.in_memory:
            assert open_store().kv.get(b"s", b"n", b"k") == b"kept"
