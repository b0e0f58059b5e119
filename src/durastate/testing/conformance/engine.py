"""Conformance: what every engine does the same way underneath the facets."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate.engines import registry
from durastate.engines.base import DDL, READ, WRITE, WRITE_ROWS, Engine, Kind, RequirementFailed, Schema
from durastate.engines.vectors import VectorTable, value_digest
from durastate.errors import NotSupported, WrongType
from durastate.store import SCHEMAS
from durastate.testing import FakeClock

__all__ = [
    "TestBatch",
    "TestCapabilities",
    "TestChangeChannels",
    "TestDeclaredStatements",
    "TestDeferredAnswers",
    "TestFailedStatementInTransaction",
    "TestOpen",
    "TestRefusalsDoNotDoom",
    "TestSchema",
]

# A statement that fails in the database itself on every engine (the facets
# validate their input first, so they rarely reach a database error).
_DUPLICATE_SCHEMA_ROW = WRITE("INSERT INTO {p}schema (facet, version) VALUES ('kv', 1)")


def _fail_a_statement(store: durastate.Store) -> None:
    engine = store.engine
    engine.execute(engine.sql(_DUPLICATE_SCHEMA_ROW))


class TestFailedStatementInTransaction:
    """A statement error inside a transaction dooms it, on every engine.

    (PostgreSQL aborts the transaction; SQLite would carry on. durastate
    makes both refuse to commit, so code behaves the same on both and a
    caught error can never lead to a quietly partial or quietly rolled-back
    commit.)
    """

    def test_failed_statement_is_a_conflict_outside_transactions(self, store: durastate.Store) -> None:
        with pytest.raises(durastate.Conflict):
            _fail_a_statement(store)
        store.kv.put(b"s", b"n", b"k", b"v")  # the store carries on
        assert store.kv.get(b"s", b"n", b"k") == b"v"

    def test_caught_error_still_rolls_back_the_block(self, store: durastate.Store) -> None:
        with pytest.raises(durastate.Conflict, match="transaction rolled back"):  # noqa: SIM117
            with store.transaction():
                store.kv.put(b"s", b"n", b"before", b"v")
                with pytest.raises(durastate.Conflict):
                    _fail_a_statement(store)
        assert store.kv.get(b"s", b"n", b"before") is None

    def test_nested_block_contains_the_failure(self, store: durastate.Store) -> None:
        with store.transaction():
            store.kv.put(b"s", b"n", b"before", b"v")
            with pytest.raises(durastate.Conflict), store.transaction():
                store.kv.put(b"s", b"n", b"inside", b"x")
                _fail_a_statement(store)
            store.kv.put(b"s", b"n", b"after", b"w")
        assert store.kv.get_many(b"s", b"n", [b"before", b"inside", b"after"]) == [b"v", None, b"w"]

    def test_store_is_healthy_after_a_doomed_block(self, store: durastate.Store) -> None:
        with pytest.raises(durastate.Conflict), store.transaction():
            _fail_a_statement(store)
        with store.transaction():
            store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") == b"v"


# A table of the batch tests' own (TestBatch): the facets' tables are the facets' to write.
_PROBE_TABLE = DDL("CREATE TABLE {p}batch_probe (k {text} PRIMARY KEY, v {int64} NOT NULL)")
_PROBE_PUT = WRITE("INSERT INTO {p}batch_probe (k, v) VALUES (?, ?)")
_PROBE_BUMP = WRITE_ROWS("UPDATE {p}batch_probe SET v = v + 1 WHERE k = ? RETURNING v")
_PROBE_GET = READ("SELECT v FROM {p}batch_probe WHERE k = ?")
_PROBE_KEYS = READ("SELECT k FROM {p}batch_probe ORDER BY k")


class TestBatch:
    """``Engine.batch``: statements in order, all or nothing, each answered as its kind."""

    @staticmethod
    def probe(store: durastate.Store) -> tuple[Engine, Callable[[], list[str]]]:
        engine = store.engine
        engine.execute(engine.sql(_PROBE_TABLE))
        keys = engine.sql(_PROBE_KEYS)
        return engine, lambda: [row[0] for row in engine.all(keys)]

    def test_each_step_answers_as_its_kind_and_sees_the_steps_before(self, store: durastate.Store) -> None:
        engine, keys = self.probe(store)
        put, bump, get = engine.sql(_PROBE_PUT), engine.sql(_PROBE_BUMP), engine.sql(_PROBE_GET)
        answers = engine.batch(
            [(put, ("a", 1)), (put, ("b", 5)), (bump, ("a",)), (get, ("a",)), (get, ("z",)), (bump, ("z",))]
        )
        assert [None if a is None else a if isinstance(a, int) else tuple(a) for a in answers] == [
            1,
            1,
            (2,),
            (2,),
            None,
            None,
        ]
        assert keys() == ["a", "b"]
        assert engine.batch([(bump, ("b",)), (get, ("b",))])[1][0] == 6
        assert engine.batch([]) == []

    def test_a_failing_step_keeps_nothing_of_the_batch(self, store: durastate.Store) -> None:
        engine, keys = self.probe(store)
        put = engine.sql(_PROBE_PUT)
        with pytest.raises(durastate.Conflict):
            engine.batch([(put, ("a", 1)), (put, ("b", 1)), (put, ("a", 2))])  # the third's key is the first's
        assert keys() == []
        with pytest.raises(durastate.DurastateError):
            engine.batch([(put, ("a", 1)), (put, ("b", object()))])  # a parameter no driver binds
        assert keys() == []
        assert engine.batch([(put, ("a", 1))]) == [1]  # the engine carries on
        store.kv.put(b"s", b"n", b"k", b"v")
        assert keys() == ["a"] and store.kv.get(b"s", b"n", b"k") == b"v"

    def test_inside_a_transaction_a_batch_is_a_nested_block_of_it(self, store: durastate.Store) -> None:
        engine, keys = self.probe(store)
        put = engine.sql(_PROBE_PUT)
        with pytest.raises(ZeroDivisionError), store.transaction():
            engine.batch([(put, ("a", 1))])
            raise ZeroDivisionError
        assert keys() == []  # rolled back with the transaction
        with store.transaction():
            engine.batch([(put, ("a", 1))])
            with pytest.raises(durastate.Conflict):
                engine.batch([(put, ("b", 1)), (put, ("a", 2))])
            engine.batch([(put, ("c", 1))])  # the transaction carries on without the failed batch
        assert keys() == ["a", "c"]


# The records facet's commit sequence, which every store has (engine.next_value's own tests use it too).
_SEQUENCE = "records"
_IS_ONE = READ("SELECT ? = 1")


class TestDeferredAnswers:
    """``next_value_later`` and ``require`` (``engines.deferred``) mean the same on every engine.

    Where answers are deferred they go out with the transaction's next
    round trip; the outcome a caller sees is the same as where they are read
    at once.
    """

    def test_a_later_value_is_the_next_value(self, store: durastate.Store) -> None:
        engine = store.engine
        first = engine.next_value(_SEQUENCE)
        with store.transaction():
            later = engine.next_value_later(_SEQUENCE)
            store.kv.put(b"s", b"n", b"k", b"v")
        assert later.value == first + 1
        with store.transaction():
            a = engine.next_value_later(_SEQUENCE)
            b = engine.next_value_later(_SEQUENCE)  # a second one while the first may be unanswered
            assert a.value == first + 2  # read inside the transaction: waited for then
        assert b.value == first + 3
        assert engine.next_value_later(_SEQUENCE).value == first + 4  # outside a transaction: at once

    def test_a_rolled_back_later_value_is_handed_out_again(self, store: durastate.Store) -> None:
        engine = store.engine
        first = engine.next_value(_SEQUENCE)
        with pytest.raises(ZeroDivisionError), store.transaction():
            engine.next_value_later(_SEQUENCE)
            raise ZeroDivisionError
        assert engine.next_value(_SEQUENCE) == first + 1

    def test_an_unknown_sequence_raises_at_once_or_when_read(self, store: durastate.Store) -> None:
        engine = store.engine
        with pytest.raises(durastate.DurastateError, match="sequence"), store.transaction():
            engine.next_value_later("no_such_sequence").value  # noqa: B018

    def test_a_requirement_that_holds_lets_the_transaction_commit(self, store: durastate.Store) -> None:
        engine = store.engine
        with store.transaction():
            engine.require(engine.sql(_IS_ONE), (1,), "one is one")
            store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") == b"v"

    def test_a_requirement_that_fails_rolls_the_transaction_back(self, store: durastate.Store) -> None:
        engine = store.engine
        first = engine.next_value(_SEQUENCE)
        with pytest.raises(RequirementFailed, match="two is one"), store.transaction():
            engine.next_value_later(_SEQUENCE)
            store.kv.put(b"s", b"n", b"k", b"v")
            engine.require(engine.sql(_IS_ONE), (2,), "two is one")
            store.kv.put(b"s", b"n", b"k2", b"v")
        assert store.kv.get_many(b"s", b"n", [b"k", b"k2"]) == [None, None]
        assert engine.next_value(_SEQUENCE) == first + 1

    def test_a_failed_requirement_in_a_nested_block_is_contained_by_it(self, store: durastate.Store) -> None:
        engine = store.engine
        first = engine.next_value(_SEQUENCE)
        with store.transaction():
            later = engine.next_value_later(_SEQUENCE)
            with pytest.raises(RequirementFailed), store.transaction():
                store.kv.put(b"s", b"n", b"inside", b"v")
                engine.require(engine.sql(_IS_ONE), (2,), "two is one")
            store.kv.put(b"s", b"n", b"after", b"v")
        assert later.value == first + 1
        assert store.kv.get_many(b"s", b"n", [b"inside", b"after"]) == [None, b"v"]

    def test_lock_later_holds_back_what_is_sent_after_it(self, store: durastate.Store) -> None:
        # A read-modify-write under lock_later, from several threads, loses no increment: the read
        # runs only once the lock is granted (unlocked, READ COMMITTED writers would overwrite each other).
        engine = store.engine
        store.kv.put(b"s", b"n", b"count", b"0")
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def work() -> None:
            try:
                barrier.wait()
                for _ in range(15):
                    with store.transaction():
                        engine.lock_later("conformance-count")
                        value = int(store.kv.get(b"s", b"n", b"count") or b"")
                        store.kv.put(b"s", b"n", b"count", b"%d" % (value + 1))
            except BaseException as exc:  # reported by the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        assert store.kv.get(b"s", b"n", b"count") == b"60"

    def test_lock_later_outside_a_transaction_is_refused(self, store: durastate.Store) -> None:
        with pytest.raises(durastate.InvalidRequest, match=r"lock_later\('x'\) outside a transaction"):
            store.engine.lock_later("x")

    def test_lock_outside_a_transaction_is_refused_and_inside_held(self, store: durastate.Store) -> None:
        # lock() reads the thread's depth itself (docwrite): refused at depth 0, after a block
        # ended too; taken (again, nested or not) inside one.
        for _ in range(2):
            with pytest.raises(durastate.InvalidRequest, match=r"lock\('x'\) outside a transaction"):
                store.engine.lock("x")
            with store.transaction():
                store.engine.lock("x")
                with store.transaction():
                    store.engine.lock("x")
                store.engine.lock("x")


class TestCapabilities:
    """What an engine declares in ``engine.capabilities`` is what it does."""

    def test_in_memory_means_private_to_the_store(self, open_store: Callable[..., durastate.Store]) -> None:
        first, second = open_store(), open_store()
        first.kv.put(b"s", b"n", b"k", b"v")
        seen = second.kv.get(b"s", b"n", b"k")
        assert first.engine.capabilities.in_memory == (seen is None)

    def test_inline_async_calls_or_reads_means_no_wait_changes(self, store: durastate.Store) -> None:
        engine = store.engine
        result: list[object] = []

        def ask() -> None:  # on its own thread: it changes that thread's connection
            try:
                result.append(engine.no_wait_changes())
            except durastate.DurastateError as exc:
                result.append(exc)

        thread = threading.Thread(target=ask)
        thread.start()
        thread.join()
        if engine.capabilities.inline_async_calls or engine.capabilities.inline_async_reads:
            assert isinstance(result[0], int) and not isinstance(result[0], bool)
        else:
            assert isinstance(result[0], NotSupported)

    def test_max_concurrency_is_a_bound_or_none(self, store: durastate.Store) -> None:
        bound = store.engine.capabilities.max_concurrency
        assert bound is None or (isinstance(bound, int) and bound >= 1)

    def test_vector_index_means_engine_vectors_keeps_one(self, store: durastate.Store) -> None:
        table = VectorTable(scope=b"s", ns=b"vectors", dims=2, distance="cosine")
        vectors = store.engine.vectors
        if not store.engine.capabilities.vector_index:
            with pytest.raises(NotSupported):
                vectors.ensure(table)
            return
        assert vectors.ensure(table) == []
        with store.transaction():
            store.kv.put(b"s", b"vectors", b"k", b"row")
            vectors.replace(table, [(b"k", value_digest(b"row"), [("f", struct.pack("<2f", 1.0, 0.0))])])
        assert vectors.nearest(table, [1.0, 0.0], start=b"", end=None, limit=3) == [(b"k", "f")]
        assert vectors.ensure(table) == []  # the digest is the kv row's: nothing stale
        store.kv.delete(b"s", b"vectors", keys=[b"k"])  # the kv row's vectors go with it
        assert vectors.nearest(table, [1.0, 0.0], start=b"", end=None, limit=3) == []


class TestChangeChannels:
    """Any ``str`` names a channel; the engine maps it to what its database accepts."""

    @pytest.mark.parametrize("name", ["events:s", "events:\ud800", "events:\udfff\ud800", "q:" + "\u00e9" * 400])
    def test_a_watch_on_any_name_hears_a_committed_notify(self, store: durastate.Store, name: str) -> None:
        engine = store.engine
        with engine.watch(name, 0.01) as watch:
            with store.transaction():
                engine.notify(name)
            if watch.reliable:  # a polled watch answers True at its next poll whatever happened
                assert watch.wait(30.0)


class TestDeclaredStatements:
    """``engine.sql`` compiles declared statements only: the engine runs a statement by its kind."""

    @pytest.mark.parametrize(
        "undeclared", ["SELECT 1 FROM {p}schema", {"sqlite": "SELECT 1", "postgresql": "SELECT 1"}, None]
    )
    def test_anything_but_a_statement_is_refused(self, store: durastate.Store, undeclared: Any) -> None:
        with pytest.raises(WrongType, match="declared statement"):
            store.engine.sql(undeclared)

    def test_a_statement_keeps_its_kind(self, store: durastate.Store) -> None:
        engine = store.engine
        for declare, kind in ((READ, Kind.READ), (WRITE, Kind.WRITE), (DDL, Kind.DDL)):
            assert engine.sql(declare("SELECT facet FROM {p}schema")).kind is kind
        assert engine.one(engine.sql(READ("SELECT COUNT(*) FROM {p}schema")))[0] >= 1  # type: ignore[index]


class TestOpen:
    def test_bad_prefix_refused(self, store_url: str, open_store: Callable[..., durastate.Store]) -> None:
        for prefix in ("", "1abc", "a-b", "a" * 32, "x; DROP TABLE y"):
            with pytest.raises(durastate.InvalidRequest, match="prefix"):
                open_store(prefix=prefix)

    def test_prefixes_keep_apps_apart(self, open_store: Callable[..., durastate.Store]) -> None:
        a = open_store(prefix="app_a_")
        if a.engine.capabilities.in_memory:
            pytest.skip("each in-memory store is its own database; nothing to share")
        b = open_store(prefix="app_b_")
        a.kv.put(b"s", b"n", b"k", b"a")
        assert b.kv.get(b"s", b"n", b"k") is None
        b.queues.push("q", [b"b"])
        assert a.queues.pop("q") is None

    def test_bad_options_refused(self, store_url: str, open_store: Callable[..., durastate.Store]) -> None:
        for options in (
            {"durability": "sometimes"},
            {"busy_timeout": -1},
            {"max_value_size": 0},
            {"clock": 5},
        ):
            with pytest.raises(durastate.InvalidRequest):
                open_store(**options)

    def test_closed_store_refuses_calls(self, open_store: Callable[..., durastate.Store]) -> None:
        s = open_store()
        s.close()
        s.close()  # idempotent
        with pytest.raises(durastate.StoreClosed):
            s.kv.put(b"s", b"n", b"k", b"v")
        with pytest.raises(durastate.StoreClosed):
            s.queues.pop("q")


class TestRefusalsDoNotDoom:
    """Refusals are not statement errors: a transaction survives them."""

    def test_counter_overflow_inside_a_transaction(self, store: durastate.Store) -> None:
        store.kv.set_counter(b"s", b"n", b"c", 2**63 - 1)
        with store.transaction():
            store.kv.put(b"s", b"n", b"before", b"v")
            with pytest.raises(durastate.InvalidRequest, match="overflow"):
                store.kv.incr(b"s", b"n", b"c", 1)
            store.kv.put(b"s", b"n", b"after", b"w")
        assert store.kv.get_many(b"s", b"n", [b"before", b"after"]) == [b"v", b"w"]
        assert store.kv.counter(b"s", b"n", b"c") == 2**63 - 1

    def test_lost_lease_inside_a_transaction(self, store: durastate.Store, clock: FakeClock) -> None:
        store.queues.push("q", [b"job"])
        stale = store.queues.claim("q", lease=1)
        assert stale is not None
        clock.advance(2)
        fresh = store.queues.claim("q", lease=30)
        assert fresh is not None
        with store.transaction():
            store.kv.put(b"s", b"n", b"k", b"v")
            with pytest.raises(durastate.Conflict):
                stale.ack()
            fresh.ack()
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert store.queues.stats("q").ready == 0


class TestSchema:
    """Migrations are append-only: every path to the current version gives the same schema."""

    @staticmethod
    def normalized(catalog: list[tuple[str, ...]], prefix: str) -> list[tuple[str, ...]]:
        return sorted(tuple(value.replace(prefix, "<prefix>") for value in row) for row in catalog)

    def test_fresh_schema_equals_one_built_migration_by_migration(
        self, store_url: str, open_store: Callable[..., durastate.Store]
    ) -> None:
        fresh = open_store(prefix="fresh_")
        stepwise = registry.create(store_url, {"prefix": "stepwise_"})
        try:
            longest = max(schema.version for schema in SCHEMAS)
            for version in range(1, longest + 1):
                stepwise.migrate([Schema(s.facet, s.migrations[:version]) for s in SCHEMAS])
            built = self.normalized(stepwise.catalog(), "stepwise_")
        finally:
            stepwise.close()
        assert built, "the catalog lists nothing"
        assert self.normalized(fresh.engine.catalog(), "fresh_") == built

    def test_catalog_sees_a_schema_change(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store()
        before = store.engine.catalog()
        store.engine.execute(store.engine.sql(DDL("CREATE INDEX {p}extra ON {p}kv (value)")))
        assert store.engine.catalog() != before
