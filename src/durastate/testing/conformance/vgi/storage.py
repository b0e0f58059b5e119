"""Conformance for ``durastate.compat.vgi``: ``FunctionStorage`` opening, work queue, state, drain and
delete, execution clear, logs and counters, each against the seed's behaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.compat.vgi import (
    FunctionStorage,
    FunctionStorageSqlite,
    ShardedSqliteStorage,
    ShardedStorage,
)

from .common import INT64_MAX, INT64_MIN, WAIT, _any, _drain_queue, _Fixtures, _run_threads

__all__ = [
    "TestVgiCounters",
    "TestVgiDrainAndDelete",
    "TestVgiExecutionClear",
    "TestVgiLogs",
    "TestVgiOpening",
    "TestVgiQueue",
    "TestVgiState",
]


class TestVgiOpening(_Fixtures):
    def test_names_and_aliases(self) -> None:
        assert FunctionStorageSqlite is FunctionStorage
        assert ShardedSqliteStorage is ShardedStorage

    def test_any_engine_url(self, store_url: str) -> None:
        with FunctionStorage(store_url) as storage:
            assert storage.db_path == store_url
            storage.state_put_many(b"s", b"n", [(b"k", b"v")])
            assert storage.state_get_many(b"s", b"n", [b"k"]) == [b"v"]

    def test_memory_is_private_to_each_storage(self) -> None:
        with FunctionStorage(":memory:") as first, FunctionStorage(":memory:") as second:
            assert first.db_path == ":memory:"
            first.state_put_many(b"s", b"n", [(b"k", b"one")])
            first.queue_push(b"e", [b"item"])
            assert second.state_get_many(b"s", b"n", [b"k"]) == [None]
            assert second.queue_pop(b"e") is None
            assert first.state_get_many(b"s", b"n", [b"k"]) == [b"one"]

    def test_plain_path_persists_across_storages(self, tmp_path: Path) -> None:
        path = str(tmp_path / "sub" / "vgi.db")
        with FunctionStorage(path) as storage:
            assert storage.db_path == path
            storage.state_put_many(b"s", b"n", [(b"k", b"v")])
            storage.queue_push(b"e", [b"w1", b"w2"])
            ordinal = storage.state_append(b"s", b"n", b"log", b"x")
            storage.state_counter_add(b"s", b"n", b"c", 3)
        with FunctionStorage(Path(path)) as reopened:
            assert reopened.state_get_many(b"s", b"n", [b"k"]) == [b"v"]
            assert reopened.state_log_scan(b"s", b"n", b"log") == [(ordinal, b"x")]
            assert reopened.state_counter_get(b"s", b"n", b"c") == 3
            assert _drain_queue(reopened, b"e") == [b"w1", b"w2"]

    def test_default_path_is_the_seeds(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import platformdirs

        home = tmp_path / "home"
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("XDG_STATE_HOME", str(home / "xdg-state"))
        monkeypatch.setenv("LOCALAPPDATA", str(home / "local-app-data"))
        state_dir = Path(platformdirs.user_state_dir("vgi"))
        if home not in state_dir.parents:
            pytest.skip(f"platformdirs ignores HOME on this platform ({state_dir}); not touching the real one")
        assert not state_dir.exists()
        with FunctionStorage() as storage:
            assert storage.db_path == str((state_dir / "vgi_storage.db").resolve())
            assert Path(storage.db_path).is_file()
            storage.state_put_many(b"s", b"n", [(b"k", b"v")])
        with FunctionStorage(None) as again:
            assert again.db_path == str((state_dir / "vgi_storage.db").resolve())
            assert again.state_get_many(b"s", b"n", [b"k"]) == [b"v"]

    def test_bad_db_path(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="db_path"):
            FunctionStorage("")
        with pytest.raises(TypeError, match="db_path"):
            FunctionStorage(42)  # type: ignore[arg-type]
        assert list(tmp_path.iterdir()) == []

    def test_close_then_keep_using(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"k", b"v")])
        storage.queue_push(b"e", [b"w1", b"w2"])
        storage.close()
        # Everything written before is still there (an in-memory store too).
        assert storage.state_get_many(b"s", b"n", [b"k"]) == [b"v"]
        assert storage.queue_pop(b"e") == b"w1"
        storage.close()
        storage.close()  # idempotent
        storage.state_put_many(b"s", b"n", [(b"k2", b"v2")])
        assert storage.state_scan(b"s", b"n") == [(b"k", b"v"), (b"k2", b"v2")]
        assert storage.queue_pop(b"e") == b"w2"

    def test_close_leaves_other_threads_alone(self, storage: FunctionStorage) -> None:
        """close() is per thread: another thread's open transaction survives it."""
        in_transaction = threading.Event()
        main_closed = threading.Event()

        def worker() -> None:
            with storage.store.transaction():
                storage.state_put_many(b"s", b"n", [(b"worker", b"committed")])
                in_transaction.set()
                assert main_closed.wait(WAIT)
                storage.state_counter_add(b"s", b"n", b"c", 1)

        thread_errors: list[BaseException] = []

        def guarded() -> None:
            try:
                worker()
            except BaseException as exc:
                thread_errors.append(exc)
                in_transaction.set()

        thread = threading.Thread(target=guarded)
        thread.start()
        try:
            assert in_transaction.wait(WAIT)
            storage.close()
        finally:
            main_closed.set()
            thread.join(WAIT)
        assert not thread_errors, thread_errors
        assert storage.state_get_many(b"s", b"n", [b"worker"]) == [b"committed"]
        assert storage.state_counter_get(b"s", b"n", b"c") == 1

    def test_with_block_closes_the_store(self, store_url: str) -> None:
        with FunctionStorage(store_url) as storage:
            storage.state_put_many(b"s", b"n", [(b"k", b"v")])
        assert storage.store.closed
        with pytest.raises(durastate.StoreClosed):
            storage.state_get_many(b"s", b"n", [b"k"])

    def test_shares_the_native_kv_address_space(
        self, store_url: str, open_store: Callable[..., durastate.Store]
    ) -> None:
        with open_store() as store:
            with FunctionStorage.from_store(store) as storage:
                storage.state_put_many(b"scope", b"ns", [(b"k", b"from-vgi")])
                store.kv.put(b"scope", b"ns", b"native", b"from-kv")
                assert store.kv.get(b"scope", b"ns", b"k") == b"from-vgi"
                assert storage.state_get_many(b"scope", b"ns", [b"native"]) == [b"from-kv"]
            assert not store.closed  # from_store does not take the store over
            assert store.kv.get(b"scope", b"ns", b"k") == b"from-vgi"


class TestVgiQueue(_Fixtures):
    def test_fifo_across_pushes(self, storage: FunctionStorage) -> None:
        assert storage.queue_push(b"e", [b"1", b"2", b"3"]) == 3
        assert storage.queue_pop(b"e") == b"1"
        assert storage.queue_push(b"e", [b"4", b"5"]) == 2
        assert _drain_queue(storage, b"e") == [b"2", b"3", b"4", b"5"]
        assert storage.queue_pop(b"e") is None

    def test_pop_of_unknown_execution_is_none(self, storage: FunctionStorage) -> None:
        assert storage.queue_pop(b"never-pushed") is None
        assert storage.queue_clear(b"never-pushed") == 0

    def test_empty_push_returns_zero_and_adds_nothing(self, storage: FunctionStorage) -> None:
        assert storage.queue_push(b"e", []) == 0
        assert storage.queue_pop(b"e") is None
        storage.queue_push(b"e", [b"x"])
        assert storage.queue_push(b"e", []) == 0
        assert _drain_queue(storage, b"e") == [b"x"]

    def test_queues_are_per_execution(self, storage: FunctionStorage) -> None:
        storage.queue_push(b"a", [b"a1", b"a2"])
        storage.queue_push(b"b", [b"b1"])
        storage.queue_push(b"", [b"empty-id"])  # the empty execution id is an id like any other
        assert storage.queue_pop(b"b") == b"b1"
        assert storage.queue_pop(b"b") is None
        assert storage.queue_clear(b"a") == 2
        assert storage.queue_pop(b"a") is None
        assert storage.queue_pop(b"") == b"empty-id"

    def test_clear_counts_remaining_items(self, storage: FunctionStorage) -> None:
        storage.queue_push(b"e", [b"1", b"2", b"3", b"4"])
        storage.queue_pop(b"e")
        assert storage.queue_clear(b"e") == 3
        assert storage.queue_clear(b"e") == 0
        assert storage.queue_pop(b"e") is None
        assert storage.queue_push(b"e", [b"again"]) == 1
        assert storage.queue_pop(b"e") == b"again"

    def test_items_come_back_as_exact_bytes(self, storage: FunctionStorage) -> None:
        payloads = [b"", b"\x00", bytes(range(256)), b"\xff" * 100_000]
        storage.queue_push(b"e", payloads)
        storage.queue_push(b"e", _any(b for b in [bytearray(b"ba"), memoryview(b"mv")]))
        popped = _drain_queue(storage, b"e")
        assert popped == [*payloads, b"ba", b"mv"]
        assert all(type(p) is bytes for p in popped)

    def test_each_item_popped_once_by_concurrent_workers(self, storage: FunctionStorage) -> None:
        items = [f"item-{i}".encode() for i in range(200)]
        storage.queue_push(b"e", items)
        popped: list[list[bytes]] = [[] for _ in range(4)]

        def worker(mine: list[bytes]) -> Callable[[], None]:
            def run() -> None:
                while (item := storage.queue_pop(b"e")) is not None:
                    mine.append(item)

            return run

        _run_threads([worker(p) for p in popped])
        everything = [item for p in popped for item in p]
        assert sorted(everything) == sorted(items)
        for mine in popped:  # each worker saw its items in queue order
            assert mine == sorted(mine, key=items.index)

    def test_a_producer_whose_clock_runs_ahead_hides_nothing(
        self, shared_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """vgi's queue has no notion of time: a pushed item is poppable at once by everyone.

        A consumer that saw an empty queue would finish early and the work
        would be lost, so wall-clock skew between workers must not matter.
        """
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + 3600.0)
        with FunctionStorage(shared_url) as producer:
            monkeypatch.setattr(time, "time", real_time)
            producer.queue_push(b"e", [b"pushed-an-hour-ahead"])
            with FunctionStorage(shared_url) as consumer:
                assert consumer.queue_pop(b"e") == b"pushed-an-hour-ahead"

    def test_two_storages_share_one_queue(self, shared_url: str) -> None:
        """Like two vgi worker processes on one database: what one pushes, the other pops."""
        with FunctionStorage(shared_url) as producer, FunctionStorage(shared_url) as consumer:
            producer.queue_push(b"e", [b"w1", b"w2"])
            assert consumer.queue_pop(b"e") == b"w1"
            assert producer.queue_pop(b"e") == b"w2"
            assert consumer.queue_pop(b"e") is None


# Keys in unsigned byte order (Python's bytes order is memcmp order).
ORDERED_KEYS = [
    b"", b"\x00", b"\x00\x00", b"\x01", b"A", b"a", b"ab", b"b", b"\x7f", b"\x80", b"\xfe", b"\xff", b"\xff\x00"
]  # fmt: skip


class TestVgiState(_Fixtures):
    def test_get_many_is_parallel_to_keys(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
        assert storage.state_get_many(b"s", b"n", [b"b", b"missing", b"a", b"b"]) == [b"2", None, b"1", b"2"]
        assert storage.state_get_many(b"s", b"n", []) == []
        values = storage.state_get_many(b"s", b"n", [b"a"])
        assert type(values) is list and type(values[0]) is bytes

    def test_get_many_of_many_keys(self, storage: FunctionStorage) -> None:
        items = [(f"k{i:04}".encode(), f"v{i}".encode()) for i in range(300)]
        storage.state_put_many(b"s", b"n", items)
        keys = [k for k, _ in items] + [b"absent"]
        assert storage.state_get_many(b"s", b"n", keys) == [v for _, v in items] + [None]

    def test_put_many_upserts_and_later_duplicate_wins(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"old"), (b"b", b"keep")])
        storage.state_put_many(b"s", b"n", [(b"a", b"first"), (b"c", b"new"), (b"a", b"last")])
        assert storage.state_scan(b"s", b"n") == [(b"a", b"last"), (b"b", b"keep"), (b"c", b"new")]
        storage.state_put_many(b"s", b"n", [])
        assert storage.state_scan(b"s", b"n") == [(b"a", b"last"), (b"b", b"keep"), (b"c", b"new")]

    def test_scopes_and_namespaces_are_separate(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s1", b"n", [(b"k", b"s1n")])
        storage.state_put_many(b"s2", b"n", [(b"k", b"s2n")])
        storage.state_put_many(b"s1", b"m", [(b"k", b"s1m")])
        storage.state_put_many(b"", b"", [(b"", b"empty")])
        assert storage.state_get_many(b"s1", b"n", [b"k"]) == [b"s1n"]
        assert storage.state_get_many(b"s2", b"n", [b"k"]) == [b"s2n"]
        assert storage.state_get_many(b"s1", b"m", [b"k"]) == [b"s1m"]
        assert storage.state_get_many(b"", b"", [b""]) == [b"empty"]
        assert storage.state_scan(b"s1", b"n") == [(b"k", b"s1n")]

    def test_bytes_like_arguments_are_bytes(self, storage: FunctionStorage) -> None:
        pair = _any((bytearray(b"k"), memoryview(b"v")))
        storage.state_put_many(_any(bytearray(b"s")), _any(memoryview(b"n")), [pair])
        assert storage.state_get_many(b"s", b"n", [b"k"]) == [b"v"]
        assert storage.state_scan(_any(memoryview(b"s")), _any(bytearray(b"n"))) == [(b"k", b"v")]

    def test_scan_orders_by_unsigned_bytes(self, storage: FunctionStorage) -> None:
        shuffled = ORDERED_KEYS[::2] + ORDERED_KEYS[1::2][::-1]
        storage.state_put_many(b"s", b"n", [(k, b"v:" + k) for k in shuffled])
        scanned = storage.state_scan(b"s", b"n")
        assert type(scanned) is list
        assert scanned == [(k, b"v:" + k) for k in ORDERED_KEYS]
        assert all(type(k) is bytes and type(v) is bytes for k, v in scanned)
        assert storage.state_scan(b"s", b"n", reverse=True) == [(k, b"v:" + k) for k in reversed(ORDERED_KEYS)]

    def test_scan_half_open_ranges(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(k, k) for k in ORDERED_KEYS])

        def keys(**kwargs: Any) -> list[bytes]:
            return [k for k, _ in storage.state_scan(b"s", b"n", **kwargs)]

        assert keys(start=b"a", end=b"b") == [b"a", b"ab"]
        assert keys(start=b"\x7f") == [b"\x7f", b"\x80", b"\xfe", b"\xff", b"\xff\x00"]
        assert keys(end=b"\x01") == [b"", b"\x00", b"\x00\x00"]
        assert keys(start=b"\x80", end=b"\xff", reverse=True) == [b"\xfe", b"\x80"]
        assert keys(start=b"b", end=b"b") == []
        assert keys(start=b"z", end=b"a") == []
        assert keys(start=b"", end=b"\x00") == [b""]

    def test_scan_limit(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(k, k) for k in ORDERED_KEYS])
        assert storage.state_scan(b"s", b"n", limit=0) == []
        assert len(storage.state_scan(b"s", b"n", limit=None)) == len(ORDERED_KEYS)
        assert storage.state_scan(b"s", b"n", limit=2) == [(b"", b""), (b"\x00", b"\x00")]
        assert storage.state_scan(b"s", b"n", reverse=True, limit=2) == [(b"\xff\x00", b"\xff\x00"), (b"\xff", b"\xff")]
        assert storage.state_scan(b"s", b"n", start=b"a", limit=1) == [(b"a", b"a")]
        assert len(storage.state_scan(b"s", b"n", limit=1000)) == len(ORDERED_KEYS)

    def test_scan_of_a_large_namespace_is_complete_and_ordered(self, storage: FunctionStorage) -> None:
        items = [(i.to_bytes(2, "big"), str(i).encode()) for i in range(1300)]
        storage.state_put_many(b"s", b"n", items[::-1])
        assert storage.state_scan(b"s", b"n") == items
        assert storage.state_scan(b"s", b"n", reverse=True, limit=1100) == items[::-1][:1100]
        assert storage.state_scan(b"s", b"n", start=items[100][0], limit=700) == items[100:800]

    def test_scan_is_not_destructive(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"1")])
        assert storage.state_scan(b"s", b"n") == storage.state_scan(b"s", b"n") == [(b"a", b"1")]

    def test_keys_and_values_beyond_durastates_default_limits(self, storage: FunctionStorage) -> None:
        """The seed bounded neither; the compat store lifts durastate's defaults."""
        long_key = b"k" * 2100  # over durastate's default max_key_size (2048)
        big_value = bytes(range(256)) * 4096  # 1 MiB
        storage.state_put_many(b"s", b"n", [(long_key, big_value)])
        assert storage.state_get_many(b"s", b"n", [long_key]) == [big_value]


class TestVgiDrainAndDelete(_Fixtures):
    def test_drain_returns_sorted_pairs_and_empties_the_namespace(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(k, b"v" + k) for k in reversed(ORDERED_KEYS)])
        storage.state_put_many(b"s", b"other", [(b"k", b"stays")])
        drained = storage.state_drain(b"s", b"n")
        assert type(drained) is list
        assert drained == [(k, b"v" + k) for k in ORDERED_KEYS]
        assert storage.state_drain(b"s", b"n") == []
        assert storage.state_scan(b"s", b"n") == []
        assert storage.state_scan(b"s", b"other") == [(b"k", b"stays")]

    def test_drain_is_atomic_against_a_concurrent_writer(self, storage: FunctionStorage) -> None:
        """Every pair written while drains run is drained exactly once: none lost between read and delete."""
        keys = [f"k{i:04}".encode() for i in range(300)]
        writer_done = threading.Event()
        drained: list[tuple[bytes, bytes]] = []

        def writer() -> None:
            try:
                for key in keys:
                    storage.state_put_many(b"s", b"n", [(key, b"v" + key)])
            finally:
                writer_done.set()

        def drainer() -> None:
            while not writer_done.is_set():
                drained.extend(storage.state_drain(b"s", b"n"))
            drained.extend(storage.state_drain(b"s", b"n"))

        _run_threads([writer, drainer])
        assert sorted(drained) == [(k, b"v" + k) for k in keys]

    def test_delete_keys_counts_only_existing_rows(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
        storage.state_put_many(b"s", b"other", [(b"a", b"x")])
        assert storage.state_delete(b"s", b"n", [b"a", b"missing", b"a", b"c"]) == 2
        assert storage.state_scan(b"s", b"n") == [(b"b", b"2")]
        assert storage.state_get_many(b"s", b"other", [b"a"]) == [b"x"]
        assert storage.state_delete(b"s", b"n", [b"a"]) == 0  # idempotent
        assert storage.state_delete(b"s", b"n", []) == 0
        assert storage.state_scan(b"s", b"n") == [(b"b", b"2")]

    def test_delete_many_keys(self, storage: FunctionStorage) -> None:
        keys = [f"k{i:04}".encode() for i in range(300)]
        storage.state_put_many(b"s", b"n", [(k, b"v") for k in keys])
        assert storage.state_delete(b"s", b"n", keys[:250]) == 250
        assert [k for k, _ in storage.state_scan(b"s", b"n")] == keys[250:]

    def test_delete_half_open_range(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(k, k) for k in ORDERED_KEYS])
        assert storage.state_delete(b"s", b"n", start=b"a", end=b"b") == 2  # a, ab
        assert storage.state_delete(b"s", b"n", start=b"\xfe") == 3  # \xfe, \xff, \xff\x00
        assert storage.state_delete(b"s", b"n", end=b"\x01") == 3  # "", \x00, \x00\x00
        assert storage.state_delete(b"s", b"n", start=b"b", end=b"b") == 0
        assert [k for k, _ in storage.state_scan(b"s", b"n")] == [b"\x01", b"A", b"b", b"\x7f", b"\x80"]

    def test_delete_without_keys_or_range_wipes_the_namespace_only(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
        storage.state_put_many(b"s", b"m", [(b"a", b"other-ns")])
        storage.state_put_many(b"t", b"n", [(b"a", b"other-scope")])
        storage.state_append(b"s", b"n", b"a", b"log")
        storage.state_counter_add(b"s", b"n", b"a", 1)
        assert storage.state_delete(b"s", b"n") == 2
        assert storage.state_delete(b"s", b"n") == 0
        assert storage.state_scan(b"s", b"n") == []
        assert storage.state_scan(b"s", b"m") == [(b"a", b"other-ns")]
        assert storage.state_scan(b"t", b"n") == [(b"a", b"other-scope")]
        assert [v for _, v in storage.state_log_scan(b"s", b"n", b"a")] == [b"log"]  # logs are not state
        assert storage.state_counter_get(b"s", b"n", b"a") == 1

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"keys": [b"a"], "start": b"a"},
            {"keys": [b"a"], "end": b"z"},
            {"keys": [], "start": b"a", "end": b"z"},
        ],
    )
    def test_keys_and_range_together_are_refused(self, storage: FunctionStorage, kwargs: dict[str, Any]) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
        with pytest.raises(ValueError, match="state_delete: keys and start/end are mutually exclusive"):
            storage.state_delete(b"s", b"n", **kwargs)
        assert storage.state_scan(b"s", b"n") == [(b"a", b"1"), (b"b", b"2")]


class TestVgiExecutionClear(_Fixtures):
    def test_clear_counts_state_logs_and_counters_and_leaves_queues(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
        storage.state_put_many(b"s", b"m", [(b"a", b"3")])
        storage.state_append(b"s", b"n", b"log", b"x")
        storage.state_append(b"s", b"m", b"log", b"y")
        storage.state_counter_add(b"s", b"n", b"c", 5)
        storage.queue_push(b"s", [b"work"])  # same id as the scope: queues are not scope-keyed
        storage.state_put_many(b"other", b"n", [(b"a", b"kept")])
        storage.state_append(b"other", b"n", b"log", b"kept")
        storage.state_counter_add(b"other", b"n", b"c", 1)

        assert storage.execution_clear(b"s") == 3 + 2 + 1
        assert storage.execution_clear(b"s") == 0
        assert storage.state_scan(b"s", b"n") == [] and storage.state_scan(b"s", b"m") == []
        assert storage.state_log_scan(b"s", b"n", b"log") == []
        assert storage.state_counter_get(b"s", b"n", b"c") == 0
        assert storage.queue_pop(b"s") == b"work"
        assert storage.state_scan(b"other", b"n") == [(b"a", b"kept")]
        assert [v for _, v in storage.state_log_scan(b"other", b"n", b"log")] == [b"kept"]
        assert storage.state_counter_get(b"other", b"n", b"c") == 1

    def test_clear_of_unknown_scope_is_zero(self, storage: FunctionStorage) -> None:
        assert storage.execution_clear(b"nothing-here") == 0


class TestVgiLogs(_Fixtures):
    def test_ordinals_are_globally_increasing(self, storage: FunctionStorage) -> None:
        addresses = [(b"s1", b"n", b"a"), (b"s2", b"n", b"a"), (b"s1", b"m", b"b"), (b"s1", b"n", b"a")] * 5
        ordinals = [storage.state_append(s, n, k, b"x") for s, n, k in addresses]
        assert all(type(o) is int for o in ordinals)
        assert ordinals == sorted(set(ordinals))  # strictly increasing across every log

    def test_scan_returns_one_log_in_append_order(self, storage: FunctionStorage) -> None:
        expected = []
        for i in range(6):
            expected.append((storage.state_append(b"s", b"n", b"k", f"item{i}".encode()), f"item{i}".encode()))
            storage.state_append(b"s", b"n", b"other-key", b"noise")
            storage.state_append(b"s", b"other-ns", b"k", b"noise")
            storage.state_append(b"other-scope", b"n", b"k", b"noise")
        scanned = storage.state_log_scan(b"s", b"n", b"k")
        assert type(scanned) is list
        assert scanned == expected
        assert all(type(i) is int and type(v) is bytes for i, v in scanned)
        assert storage.state_log_scan(b"s", b"n", b"k") == expected  # not destructive
        assert storage.state_log_scan(b"s", b"n", b"never") == []

    def test_after_id_pages_through_the_log(self, storage: FunctionStorage) -> None:
        expected = [(storage.state_append(b"s", b"n", b"k", bytes([i])), bytes([i])) for i in range(10)]
        pages = []
        after = -1
        while page := storage.state_log_scan(b"s", b"n", b"k", after_id=after, limit=3):
            assert len(page) <= 3
            pages.append(page)
            after = page[-1][0]
        assert [len(p) for p in pages] == [3, 3, 3, 1]
        assert [entry for page in pages for entry in page] == expected
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=expected[4][0]) == expected[5:]

    def test_after_id_and_limit_edges(self, storage: FunctionStorage) -> None:
        expected = [(storage.state_append(b"s", b"n", b"k", bytes([i])), bytes([i])) for i in range(3)]
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=-1, limit=None) == expected
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=-(10**30)) == expected
        assert storage.state_log_scan(b"s", b"n", b"k", limit=0) == []
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=expected[-1][0]) == []
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=INT64_MAX) == []
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=10**30) == []

    def test_ordinals_are_not_reused_after_clear(self, storage: FunctionStorage) -> None:
        last = max(storage.state_append(b"s", b"n", b"k", b"x") for _ in range(3))
        storage.execution_clear(b"s")
        assert storage.state_log_scan(b"s", b"n", b"k") == []
        after_clear = storage.state_append(b"s", b"n", b"k", b"y")
        assert after_clear > last
        assert storage.state_log_scan(b"s", b"n", b"k") == [(after_clear, b"y")]

    def test_long_log(self, storage: FunctionStorage) -> None:
        expected = [(storage.state_append(b"s", b"n", b"k", b"x"), b"x") for _ in range(1100)]
        assert storage.state_log_scan(b"s", b"n", b"k") == expected
        assert storage.state_log_scan(b"s", b"n", b"k", after_id=expected[99][0], limit=1000) == expected[100:1100]


class TestVgiCounters(_Fixtures):
    def test_add_get_set_delete(self, storage: FunctionStorage) -> None:
        assert storage.state_counter_get(b"s", b"n", b"c") == 0
        assert storage.state_counter_add(b"s", b"n", b"c", 5) == 5
        assert storage.state_counter_add(b"s", b"n", b"c", -7) == -2
        assert storage.state_counter_get(b"s", b"n", b"c") == -2
        storage.state_counter_set(b"s", b"n", b"c", 100)
        assert storage.state_counter_add(b"s", b"n", b"c", 0) == 100
        storage.state_counter_delete(b"s", b"n", b"c")
        assert storage.state_counter_get(b"s", b"n", b"c") == 0
        storage.state_counter_delete(b"s", b"n", b"c")  # absent: no-op
        storage.state_counter_set(b"s", b"n", b"fresh", -3)  # set creates
        assert storage.state_counter_get(b"s", b"n", b"fresh") == -3

    def test_counters_are_addressed_and_separate_from_state(self, storage: FunctionStorage) -> None:
        storage.state_counter_add(b"s", b"n", b"k", 1)
        storage.state_counter_add(b"s", b"m", b"k", 10)
        storage.state_counter_add(b"t", b"n", b"k", 100)
        storage.state_put_many(b"s", b"n", [(b"k", b"state")])
        assert storage.state_counter_get(b"s", b"n", b"k") == 1
        assert storage.state_counter_get(b"s", b"m", b"k") == 10
        assert storage.state_counter_get(b"t", b"n", b"k") == 100
        assert storage.state_get_many(b"s", b"n", [b"k"]) == [b"state"]
        assert storage.state_delete(b"s", b"n") == 1  # the state row only
        assert storage.state_counter_get(b"s", b"n", b"k") == 1

    def test_concurrent_adds_are_exact(self, storage: FunctionStorage) -> None:
        def adder() -> None:
            for _ in range(100):
                storage.state_counter_add(b"s", b"n", b"c", 1)

        _run_threads([adder] * 4)
        assert storage.state_counter_get(b"s", b"n", b"c") == 400

    def test_int64_range(self, storage: FunctionStorage) -> None:
        storage.state_counter_set(b"s", b"n", b"c", INT64_MAX)
        assert storage.state_counter_get(b"s", b"n", b"c") == INT64_MAX
        with pytest.raises(ValueError):
            storage.state_counter_add(b"s", b"n", b"c", 1)  # the seed silently went REAL here
        assert storage.state_counter_get(b"s", b"n", b"c") == INT64_MAX
        assert storage.state_counter_add(b"s", b"n", b"c", INT64_MIN) == -1
        storage.state_counter_set(b"s", b"n", b"low", INT64_MIN)
        with pytest.raises(ValueError):
            storage.state_counter_add(b"s", b"n", b"low", -1)
        assert storage.state_counter_get(b"s", b"n", b"low") == INT64_MIN

    @pytest.mark.parametrize("number", [2**63, INT64_MIN - 1, 10**40])
    def test_arguments_outside_int64_are_overflow_and_value_errors(self, storage: FunctionStorage, number: int) -> None:
        storage.state_counter_set(b"s", b"n", b"c", 7)
        for call in (
            lambda: storage.state_counter_add(b"s", b"n", b"c", number),
            lambda: storage.state_counter_set(b"s", b"n", b"c", number),
        ):
            with pytest.raises(OverflowError) as caught:
                call()
            assert isinstance(caught.value, ValueError)
        assert storage.state_counter_get(b"s", b"n", b"c") == 7

    def test_bool_and_index_types_count_as_ints(self, storage: FunctionStorage) -> None:
        class Index:
            def __index__(self) -> int:
                return 4

        assert storage.state_counter_add(b"s", b"n", b"c", True) == 1
        assert storage.state_counter_add(b"s", b"n", b"c", Index()) == 5  # type: ignore[arg-type]
