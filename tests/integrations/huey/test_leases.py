"""DurastateHuey's leases: how a dequeued task is settled, and what comes back.

Time moves through the ``clock`` fixture (a ``FakeClock``), so lease expiry
needs no sleeping. ``TestKilledConsumer`` SIGKILLs a real consumer process
in the middle of a task and shows the task run to completion elsewhere.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

import durastate
from durastate import InvalidRequest
from durastate.integrations.huey import DurastateHuey, DurastateStorage
from durastate.testing.clock import FakeClock

from . import _app


@pytest.fixture
def app(store: durastate.Store) -> Iterator[DurastateHuey]:
    huey = DurastateHuey("leases", store=store, lease=30, max_attempts=3, utc=False)
    yield huey
    huey.close()


def _in_queue(huey: DurastateHuey) -> int:
    """Rows of the app's task queues, in flight or not."""
    storage = huey.storage
    total = 0
    for queue in storage._queues():
        stats = storage.store.queues.stats(queue)
        total += stats.ready + stats.in_flight + stats.delayed
    return total


class TestSettling:
    def test_executed_task_is_acked_with_the_next_dequeue(self, app: DurastateHuey, clock: FakeClock) -> None:
        @app.task()
        def add(a: int, b: int) -> int:
            return a + b

        result = add(2, 3)
        task = app.dequeue()
        assert _in_queue(app) == 1  # leased, not deleted
        app.execute(task)
        assert result.get() == 5
        assert len(app.storage.pending_acks()) == 1 and _in_queue(app) == 1  # the ack waits for the next dequeue
        assert app.dequeue() is None  # which commits it, although it finds nothing
        assert app.storage.pending_acks() == [] and _in_queue(app) == 0
        clock.advance(3600)
        assert app.dequeue() is None

    def test_waiting_ack_is_committed_with_the_next_claim(self, app: DurastateHuey) -> None:
        @app.task()
        def echo(n: int) -> int:
            return n

        first, second = echo(1), echo(2)
        app.execute(app.dequeue())
        task = app.dequeue()  # acks the first and claims the second, one transaction
        assert task is not None and task.id == second.id
        assert first.get() == 1 and app.storage.pending_acks() == [] and _in_queue(app) == 1

    @pytest.mark.parametrize("acks", [1, 2], ids=["one-ack", "two-acks"])
    def test_waiting_ack_stays_when_the_dequeue_fails(
        self, app: DurastateHuey, monkeypatch: pytest.MonkeyPatch, acks: int
    ) -> None:
        """One waiting ack goes with the claim in ``Queues._ack_then_claim``; several in a transaction with it."""

        @app.task()
        def echo(n: int) -> int:
            return n

        for n in range(acks):
            echo(n)
        tasks = [app.dequeue() for _ in range(acks)]
        for task in tasks:
            app.execute(task)
        waiting = app.storage.pending_acks()
        assert len(waiting) == acks
        with monkeypatch.context() as patched:
            down = lambda *args, **kwargs: (_ for _ in ()).throw(OSError("store down"))  # noqa: E731
            patched.setattr(app.storage.store.queues, "claim", down)
            patched.setattr(app.storage.store.queues, "_ack_then_claim", down)
            with pytest.raises(OSError, match="store down"):
                app.dequeue()
        assert app.storage.pending_acks() == waiting and _in_queue(app) == acks  # the acks rolled back with the claim
        assert app.dequeue() is None and _in_queue(app) == 0

    def test_an_ack_committed_with_the_first_claim_is_settled_when_a_later_claim_fails(
        self, app: DurastateHuey, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The waiting ack rides on the first queue's claim, which finds nothing; the next queue's claim fails.

        The ack was committed: it must not wait again (the next dequeue would
        ack it a second time and log its lease as lost, which it was not).
        """

        @app.task(name="echo")
        def echo(n: int) -> int:
            return n

        app.enqueue(echo.s(1, priority=9))  # two priorities: two queues, the high one first
        app.execute(app.dequeue())  # the high-priority queue is known, and empty after this
        app.enqueue(echo.s(2, priority=0))
        assert len(app.storage.pending_acks()) == 1
        with pytest.MonkeyPatch.context() as patched:
            down = lambda *args, **kwargs: (_ for _ in ()).throw(OSError("store down"))  # noqa: E731
            patched.setattr(app.storage.store.queues, "claim", down)  # the second queue's claim only
            with pytest.raises(OSError, match="store down"):
                app.dequeue()
        assert app.storage.pending_acks() == []  # settled by the statement that succeeded
        task = app.dequeue()
        assert task is not None and task.args == (2,)
        assert "lost before it was settled" not in caplog.text

    def test_a_lost_lease_found_by_the_next_dequeue_is_logged_and_the_claim_goes_ahead(
        self, app: DurastateHuey, store: durastate.Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        @app.task(name="echo")
        def echo(n: int) -> int:
            return n

        echo(1)
        app.execute(app.dequeue())
        other = DurastateHuey("leases", store=store, lease=30, utc=False)
        clock.advance(30)
        assert other.storage.dequeue() is not None  # the first process is gone as far as the store can tell
        second = echo(2)
        task = app.dequeue()  # commits the late ack: its lease was lost, the item is the other's now
        assert task is not None and task.id == second.id
        assert "lost before it was settled" in caplog.text
        assert app.storage.pending_acks() == [] and _in_queue(app) == 2  # the other's claim and ours

    def test_waiting_ack_keeps_its_lease(self, app: DurastateHuey, store: durastate.Store, clock: FakeClock) -> None:
        other = DurastateHuey("leases", store=store, lease=30, utc=False)
        app.storage.enqueue(app.serialize_task(app.task()(lambda: None).s()))
        app.execute(app.dequeue())
        clock.advance(20)
        app._leases.renew_all()  # what the keeper thread does every lease / 3 seconds
        clock.advance(20)
        assert other.storage.dequeue() is None  # 40 s after the claim, still held while its ack waits
        assert app.storage.flush_acks() == 1
        clock.advance(3600)
        assert other.storage.dequeue() is None and _in_queue(app) == 0

    def test_waiting_ack_never_committed_runs_the_task_again(
        self, app: DurastateHuey, store: durastate.Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A process that dies before its ack commits: at-least-once, like a death just before an ack of its own."""
        runs = []

        @app.task(name="count")
        def count() -> None:
            runs.append(1)

        count()
        app.execute(app.dequeue())
        other = DurastateHuey("leases", store=store, lease=30, utc=False)
        other.task(name="count")(count.func)
        clock.advance(30)
        again = other.dequeue()  # the first process is gone as far as the store can tell
        assert again is not None
        other.execute(again)
        other.close()
        assert len(runs) == 2 and _in_queue(app) == 0
        assert app.storage.flush_acks() == 1  # too late: the lease was lost; logged, not raised
        assert "lost before it was settled" in caplog.text

    def test_worker_shutdown_and_close_commit_waiting_acks(self, app: DurastateHuey) -> None:
        from huey.consumer import Worker

        @app.task()
        def echo(n: int) -> int:
            return n

        echo(1)
        app.execute(app.dequeue())
        Worker(app, threading.Event(), 0.1, 1.0, 2.0).shutdown()  # runs huey's shutdown hooks
        assert _in_queue(app) == 0

        echo(2)
        worker = threading.Thread(target=lambda: app.execute(app.dequeue()))
        worker.start()
        worker.join(timeout=60)
        assert _in_queue(app) == 1 and len(app.storage.pending_acks()) == 1
        app.close()  # every thread's waiting acks
        assert _in_queue(app) == 0

    def test_unsettled_message_comes_back_after_the_lease(self, app: DurastateHuey, clock: FakeClock) -> None:
        app.storage.enqueue(b"message")
        assert app.storage.dequeue() == b"message"
        assert app.storage.dequeue() is None
        assert app.storage.queue_size() == 0
        clock.advance(30)
        assert app.storage.queue_size() == 1
        assert app.storage.dequeue() == b"message"

    def test_failed_task_is_acked_once_huey_handled_it(self, app: DurastateHuey, clock: FakeClock) -> None:
        @app.task(retries=1)
        def flaky() -> None:
            raise RuntimeError("boom")

        flaky()
        app.execute(app.dequeue())  # huey re-enqueues a retry; the original delivery is done
        retry = app.dequeue()
        assert retry is not None and retry.retries == 0
        app.execute(retry)
        clock.advance(3600)
        assert app.dequeue() is None
        assert _in_queue(app) == 0

    def test_task_with_a_future_eta_moves_to_the_schedule(self, app: DurastateHuey) -> None:
        @app.task()
        def later() -> int:
            return 1

        later.schedule(delay=3600)
        app.execute(app.dequeue())
        assert _in_queue(app) == 0
        assert app.storage.schedule_size() == 1

    def test_interrupted_task_is_given_back_at_once(self, app: DurastateHuey) -> None:
        runs = []

        @app.task()
        def stopped() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise KeyboardInterrupt  # what the consumer's SIGINT does to a running task

        stopped()
        app.execute(app.dequeue())
        again = app.dequeue()  # no lease wait: it was nacked
        assert again is not None
        app.execute(again)
        assert app.dequeue() is None  # commits the waiting ack
        assert len(runs) == 2 and _in_queue(app) == 0

    def test_execute_that_raises_nacks(self, app: DurastateHuey, monkeypatch: pytest.MonkeyPatch) -> None:
        @app.task()
        def value() -> int:
            return 7

        result = value()
        task = app.dequeue()
        with monkeypatch.context() as patched:
            patched.setattr(app, "put_result", lambda *a: (_ for _ in ()).throw(OSError("result store down")))
            with pytest.raises(OSError, match="result store down"):
                app.execute(task)
        again = app.dequeue()
        assert again is not None and again.id == task.id
        app.execute(again)
        assert result.get() == 7

    def test_undecodable_message_ends_in_the_dead_letters(self, app: DurastateHuey) -> None:
        app.storage.enqueue(b"not a pickled task")
        for _ in range(3):  # max_attempts=3
            with pytest.raises(Exception):  # noqa: B017 - whatever huey's deserializer raises
                app.dequeue()
        assert app.dequeue() is None
        [dead] = app.storage.dead_letters()
        assert dead.payload == b"not a pickled task" and dead.attempts == 3
        assert "cannot deserialize" in (dead.last_error or "")
        assert app.storage.redrive() == 1 and app.storage.queue_size() == 1

    def test_running_task_keeps_its_lease(self, app: DurastateHuey, store: durastate.Store, clock: FakeClock) -> None:
        other = DurastateHuey("leases", store=store, lease=30, utc=False)
        app.storage.enqueue(app.serialize_task(app.task()(lambda: None).s()))
        task = app.dequeue()
        clock.advance(20)
        app._leases.renew_all()  # what the keeper thread does every lease / 3 seconds
        clock.advance(20)
        assert other.storage.dequeue() is None  # 40 s after the claim, still held
        clock.advance(11)
        assert other.storage.dequeue() is not None  # not renewed again: it ran out
        assert task is not None

    def test_lease_none_is_hueys_destructive_dequeue(self, store: durastate.Store, clock: FakeClock) -> None:
        storage = DurastateStorage("plain", store=store, lease=None)
        storage.enqueue(b"once")
        assert storage.dequeue() == b"once"
        clock.advance(3600)
        assert storage.dequeue() is None


class TestInput:
    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"name": ""}, "name"),
            ({"lease": 0}, "lease"),
            ({"lease": "30"}, "lease"),
            ({"max_attempts": 0}, "max_attempts"),
            ({"max_attempts": 1.5}, "max_attempts"),
            ({"url": "memory:"}, "not both"),
            ({"prefix": "zz_"}, "prefix only applies when a store is opened here"),
            ({"prefix": "ds_"}, "prefix only applies when a store is opened here"),
            ({"colour": "red"}, "unknown DurastateStorage option"),
        ],
    )
    def test_bad_options_are_refused(self, store: durastate.Store, options: dict[str, object], message: str) -> None:
        options = {"name": "x", **options}
        with pytest.raises(InvalidRequest, match=message):
            DurastateStorage(store=store, **options)  # type: ignore[arg-type]

    @pytest.mark.parametrize("priority", [float("nan"), float("inf"), "high", True])
    def test_bad_priority_is_refused_and_enqueues_nothing(self, app: DurastateHuey, priority: object) -> None:
        with pytest.raises(InvalidRequest, match="priority"):
            app.storage.enqueue(b"x", priority)
        assert app.storage.queue_size() == 0

    def test_bad_ack_arguments_are_refused(self, app: DurastateHuey) -> None:
        with pytest.raises(InvalidRequest, match="claim must be a durastate Claim"):
            app.storage.ack_later(b"message")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="all_threads must be a bool"):
            app.storage.flush_acks(all_threads="yes")  # type: ignore[arg-type]
        assert app.storage.pending_acks() == []

    def test_bad_keys_and_values_are_refused(self, app: DurastateHuey) -> None:
        storage = app.storage
        with pytest.raises(InvalidRequest, match="key"):
            storage.put_data(1, b"v")
        with pytest.raises(InvalidRequest, match="value"):
            storage.put_data("k", "text")
        with pytest.raises(InvalidRequest, match="ts"):
            storage.add_to_schedule(b"x", 12345)
        assert storage.result_store_size() == 0 and storage.schedule_size() == 0

    def test_put_if_empty_ttl(self, app: DurastateHuey, clock: FakeClock) -> None:
        assert app.storage.put_if_empty("lock", b"1", ttl=10) is True
        assert app.storage.put_if_empty("lock", b"2", ttl=10) is False
        clock.advance(10)
        assert app.storage.put_if_empty("lock", b"3") is True
        assert app.storage.peek_data("lock") == b"3"

    def test_negative_and_fractional_priorities_order(self, app: DurastateHuey) -> None:
        for priority in (-1.5, 0, None, 2.25, -0.0, 10):
            app.storage.enqueue(b"%r" % (priority,), priority)
        assert app.storage.enqueued_items() == [b"10", b"2.25", b"0", b"None", b"-0.0", b"-1.5"]
        assert app.storage.enqueued_items(2) == [b"10", b"2.25"]


@pytest.mark.multiprocess
class TestKilledConsumer:
    def test_task_of_a_sigkilled_consumer_runs_elsewhere(self, shared_url: str) -> None:
        huey, double = _app.make_app(shared_url)
        kv = huey.storage.store.kv
        result = double(21)
        consumer = multiprocessing.get_context("spawn").Process(target=_app.consume, args=(shared_url,))
        consumer.start()
        try:
            deadline = time.monotonic() + 60
            while kv.get(*_app.MARKS, b"started") is None:  # the consumer is inside the task
                assert consumer.is_alive() and time.monotonic() < deadline, "consumer never started the task"
                consumer.join(timeout=0.05)
        finally:
            os.kill(consumer.pid, signal.SIGKILL)  # type: ignore[arg-type]
            consumer.join(timeout=30)
        assert consumer.exitcode == -signal.SIGKILL
        assert huey.dequeue() is None  # still leased to the dead consumer

        # Another consumer, once the lease has run out (its clock is past it):
        late_store = durastate.open(shared_url, clock=FakeClock(time.time() + _app.LEASE + 1))
        late, _ = _app.make_app(store=late_store)
        try:
            task = late.dequeue()
            assert task is not None and task.id == result.id
            late.execute(task)
        finally:
            late.close()
            late_store.close()
        assert result.get() == 42
        assert kv.counter(*_app.MARKS, b"runs") == 2
        assert huey.storage.queue_size() == 0 and _in_queue(huey) == 0
        huey.close()


def test_schedule_is_read_once_by_racing_readers(store: durastate.Store) -> None:
    """Two storages reading one schedule hand each message out once."""
    first = DurastateStorage("race", store=store)
    second = DurastateStorage("race", store=store)
    base = datetime.datetime(2000, 1, 1)
    for i in range(50):
        first.add_to_schedule(b"%d" % i, base + datetime.timedelta(seconds=i))
    got: list[bytes] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2)

    def read(storage: DurastateStorage) -> None:
        barrier.wait()
        for step in range(1, 51):
            items = storage.read_schedule(base + datetime.timedelta(seconds=step))
            with lock:
                got.extend(items)

    threads = [threading.Thread(target=read, args=(s,)) for s in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(got) == sorted(b"%d" % i for i in range(50))


def test_immediate_mode_runs_tasks_in_memory(store: durastate.Store) -> None:
    huey = DurastateHuey("immediate", store=store, immediate=True)

    @huey.task()
    def add(a: int, b: int) -> int:
        return a + b

    assert add(1, 2).get() == 3
    assert not isinstance(huey.storage, DurastateStorage)  # huey's in-memory storage, as huey does
    assert list(store.kv.scan(b"huey/immediate/queue", b"priorities")) == []  # nothing reached the store
    huey.close()


def test_another_storage_class_is_refused(store: durastate.Store) -> None:
    from huey.storage import MemoryStorage

    with pytest.raises(InvalidRequest, match="storage_class"):
        DurastateHuey("x", store=store, storage_class=MemoryStorage)


def test_prefix_is_refused_with_a_borrowed_store_and_applied_with_url(store: durastate.Store) -> None:
    with pytest.raises(InvalidRequest, match="prefix"):
        DurastateHuey("z", store=store, prefix="zz_")  # the borrowed store's prefix is not "zz_"
    huey = DurastateHuey("z", url="memory:", prefix="zz_")
    try:
        assert huey.storage.store.engine.prefix == "zz_"
    finally:
        huey.close()


def test_a_priority_new_to_another_process_is_served_after_the_refresh(store: durastate.Store) -> None:
    consumer = DurastateStorage("shared", store=store)
    producer = DurastateStorage("shared", store=store)  # as if in another process
    producer.enqueue(b"low", 1)
    assert consumer.dequeue() == b"low"  # registry read: priority 1 known
    producer.enqueue(b"normal", 5)
    producer.enqueue(b"urgent", 9)
    consumer.PRIORITY_REFRESH = 3600.0
    assert consumer.dequeue() is None  # its copy of the registry predates priorities 5 and 9
    assert consumer.enqueued_items() == [b"urgent", b"normal"]  # listing always reads the registry
    consumer.PRIORITY_REFRESH = 0.0
    assert [consumer.dequeue(), consumer.dequeue()] == [b"urgent", b"normal"]


class TestFork:
    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
    def test_a_forked_child_does_not_see_its_parents_waiting_acks(self, app: DurastateHuey) -> None:
        # The storage tells a forked copy by a count of forks (no os.getpid() per call): the child's copy
        # of the waiting acks is the parent's to commit, so the child sees none; the parent keeps its own.
        @app.task()
        def noop() -> None:
            return None

        noop()
        app.execute(app.dequeue())
        assert len(app.storage.pending_acks()) == 1
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            try:
                os.write(write, str(len(app.storage.pending_acks())).encode())
            finally:
                os._exit(0)
        os.close(write)
        try:
            seen = os.read(read, 16)
        finally:
            os.close(read)
            os.waitpid(pid, 0)
        assert seen == b"0"
        assert len(app.storage.pending_acks()) == 1
