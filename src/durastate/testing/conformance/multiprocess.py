"""Conformance: several OS processes on one store.

Many processes sharing one file is the embedded default's whole promise;
PostgreSQL makes the same promise across clients. These tests start real
processes (``multiprocessing`` with an explicit start method) on the
``shared_url`` store and check the outcome exactly:

* counters, logs and batches under contention: totals exact, log ordinals
  unique and increasing per writer;
* destructive ``pop`` from several consumers while a producer pushes:
  nothing lost, nothing delivered twice;
* ``claim``/``ack`` with a holder killed by SIGKILL mid-lease: its item is
  redelivered once the lease runs out (on the real clock) and every item is
  processed exactly once, because processing is committed with the ack;
* ``fork`` and ``spawn`` both work, and a ``Store`` opened before a fork
  keeps working in the parent and in the children;
* several processes cold-opening one fresh store at the same instant all
  succeed and the schema is migrated once;
* SIGKILL of a writer inside ``store.transaction()`` leaves no partial
  trace and loses nothing acknowledged (and, on SQLite, the file passes
  ``PRAGMA integrity_check``).

Processes synchronise through pipes, events and barriers, never sleeps.
Every wait has a deadline, and a worker that hangs fails the test with its
name. Workers are module-level functions so ``spawn`` can pickle them; a
worker reports its result (or its traceback) through a pipe.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any

import pytest

import durastate
from durastate.engines.base import READ
from durastate.errors import Conflict
from durastate.store import SCHEMAS

__all__ = [
    "TestClaimsAcrossProcesses",
    "TestColdOpen",
    "TestCountersAcrossProcesses",
    "TestForkedStore",
    "TestKilledWriter",
    "TestPopsAcrossProcesses",
]

# Start methods this platform offers, fork first (cheaper) for tests that do
# not care which one runs them.
START_METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]
ANY_METHOD = START_METHODS[0]

# How long a worker may take before the test calls it hung. Generous: a
# loaded CI machine is slow, and a healthy run needs a fraction of it.
WORKER_TIMEOUT = 45.0
# Busy timeout for worker stores: long enough to ride out contention, short
# enough that a lock left behind by a killed process fails the test fast.
BUSY_TIMEOUT = 20.0

SCOPE = b"mp"


# -- process plumbing --------------------------------------------------------


def _child(sender: Connection, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Entry point of every reporting worker: run ``func``, send the outcome."""
    try:
        result = func(*args)
    except BaseException:
        sender.send(("error", traceback.format_exc()))
        sender.close()
        raise SystemExit(1) from None
    sender.send(("ok", result))
    sender.close()


class _Workers:
    """Processes of one test: started, collected with a deadline, never leaked.

    Use as a context manager: on exit every process still alive is killed,
    so a failing assertion never leaves workers behind.
    """

    def __init__(self, method: str) -> None:
        self.method = method
        self.ctx: BaseContext = multiprocessing.get_context(method)
        self._reporting: list[tuple[str, BaseProcess, Connection]] = []
        self._all: list[BaseProcess] = []

    def __enter__(self) -> _Workers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, name: str, func: Callable[..., Any], *args: Any) -> BaseProcess:
        """Run ``func(*args)`` in a new process; ``results()`` collects its return value."""
        receiver, sender = self.ctx.Pipe(duplex=False)
        proc: BaseProcess = self.ctx.Process(target=_child, args=(sender, func, args), name=name, daemon=True)  # type: ignore[attr-defined]
        proc.start()
        sender.close()  # the child holds the only sender: its death means EOF here
        self._reporting.append((name, proc, receiver))
        self._all.append(proc)
        return proc

    def start_plain(self, name: str, func: Callable[..., Any], *args: Any) -> BaseProcess:
        """Run ``func(*args)`` in a new process that reports nothing (a victim)."""
        proc: BaseProcess = self.ctx.Process(target=func, args=args, name=name, daemon=True)  # type: ignore[attr-defined]
        proc.start()
        self._all.append(proc)
        return proc

    def results(self, timeout: float = WORKER_TIMEOUT) -> dict[str, Any]:
        """Every reporting worker's return value by name; fail the test on error or hang."""
        deadline = time.monotonic() + timeout
        out: dict[str, Any] = {}
        for name, proc, receiver in self._reporting:
            if not receiver.poll(max(0.0, deadline - time.monotonic())):
                pytest.fail(f"worker {name} (pid {proc.pid}, {self.method}) hung: no result within {timeout:.0f} s")
            try:
                status, value = receiver.recv()
            except EOFError:
                proc.join(max(0.0, deadline - time.monotonic()))
                pytest.fail(f"worker {name} ({self.method}) died without a result, exit code {proc.exitcode}")
            if status != "ok":
                pytest.fail(f"worker {name} ({self.method}) raised:\n{value}")
            out[name] = value
        for name, proc, _ in self._reporting:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.exitcode != 0:
                pytest.fail(f"worker {name} ({self.method}) did not exit cleanly: exit code {proc.exitcode}")
        return out

    def stop(self) -> None:
        for proc in self._all:
            if proc.is_alive():
                proc.kill()
        for proc in self._all:
            proc.join(10)
        for _, _, receiver in self._reporting:
            receiver.close()


def _kill(proc: BaseProcess) -> None:
    """SIGKILL ``proc`` and wait for it to be gone."""
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(WORKER_TIMEOUT)
    if proc.is_alive():
        pytest.fail(f"process {proc.name} survived SIGKILL for {WORKER_TIMEOUT:.0f} s")
    assert proc.exitcode == -signal.SIGKILL, f"{proc.name} ended with {proc.exitcode}, not by SIGKILL"


def _receive(receiver: Connection, what: str, timeout: float = WORKER_TIMEOUT) -> Any:
    """The next message on ``receiver``; fail the test if none comes in time."""
    if not receiver.poll(timeout):
        pytest.fail(f"no {what} within {timeout:.0f} s")
    try:
        return receiver.recv()
    except EOFError:
        pytest.fail(f"the process died before sending {what}")


@contextmanager
def _opened(target: str | durastate.Store) -> Iterator[durastate.Store]:
    """A store for a worker: its own (from a URL), or one inherited across fork.

    An inherited store belongs to the parent, so the child does not close it.
    """
    if isinstance(target, durastate.Store):
        yield target
        return
    store = durastate.open(target, busy_timeout=BUSY_TIMEOUT)
    try:
        yield store
    finally:
        store.close()


def _open(url: str) -> durastate.Store:
    return durastate.open(url, busy_timeout=BUSY_TIMEOUT)


def _integrity_errors(store: durastate.Store) -> list[str]:
    """The engine's integrity problems (``[]`` when ok, or nothing the engine can check)."""
    return store.engine.integrity_errors()


# -- workers (module level: spawn pickles them by name) ------------------------

COUNTER_NS = b"counters"
LOG_EVERY = 25


def hammer_counters(target: str | durastate.Store, worker: int, rounds: int) -> list[int]:
    """``rounds`` increments of one shared counter, with logs and batches mixed in.

    Every round adds 1 to ``shared``; every other round does it inside a
    transaction together with the worker's own counter, so plain and
    transactional writes contend. Every ``LOG_EVERY`` rounds: one log
    append and one three-key ``put_many``. Returns the log ordinals.
    """
    ordinals: list[int] = []
    own = f"w{worker}".encode()
    with _opened(target) as store:
        kv = store.kv
        for i in range(rounds):
            if i % 2:
                with store.transaction():
                    kv.incr(SCOPE, COUNTER_NS, b"shared")
                    kv.incr(SCOPE, COUNTER_NS, own)
            else:
                kv.incr(SCOPE, COUNTER_NS, b"shared")
            if i % LOG_EVERY == 0:
                ordinals.append(kv.append(SCOPE, b"log", b"shared", f"{worker}:{i}".encode()))
                kv.put_many(SCOPE, b"values", [(f"{worker}:{i}:{j}".encode(), own) for j in range(3)])
    return ordinals


def write_from_fork(store: durastate.Store, child: int) -> bool:
    """Use a Store inherited across fork: one transaction, then read it back.

    Returns whether the store believed it was inside a transaction before
    this child opened one (it must not: the parent's transaction is not the
    child's).
    """
    inherited_transaction = store.engine.in_transaction()
    with store.transaction():
        store.kv.incr(SCOPE, COUNTER_NS, b"children")
        store.kv.put(SCOPE, b"fork", b"child-%d" % child, b"written")
    if store.kv.get(SCOPE, b"fork", b"child-%d" % child) != b"written":
        raise AssertionError(f"child {child} cannot read its own committed write")
    return inherited_transaction


POP_DONE = b"producer-done"


def produce(url: str, queue: str, payloads: list[bytes], batch: int) -> int:
    """Push ``payloads`` in batches, then flag that the producer is done."""
    with _opened(url) as store:
        for i in range(0, len(payloads), batch):
            store.queues.push(queue, payloads[i : i + batch])
        store.kv.put(SCOPE, b"flags", POP_DONE, b"1")
    return len(payloads)


def pop_until_empty(url: str, queue: str) -> list[bytes]:
    """Pop until the producer is done and the queue is empty; return what was popped.

    The done flag is read *before* the pop that comes back empty: the
    producer sets it after its last push committed, so an empty pop after
    seeing the flag means nothing is left or still to come.
    """
    popped: list[bytes] = []
    deadline = time.monotonic() + WORKER_TIMEOUT
    with _opened(url) as store:
        while time.monotonic() < deadline:
            done = store.kv.get(SCOPE, b"flags", POP_DONE) is not None
            payload = store.queues.pop(queue, wait=0 if done else 0.2)
            if payload is not None:
                popped.append(payload)
            elif done:
                return popped
    raise TimeoutError(f"queue {queue!r} not drained within {WORKER_TIMEOUT:.0f} s; popped {len(popped)}")


def claim_and_hold(url: str, queue: str, lease: float, channel: Connection) -> None:
    """Claim one item, report it, then block forever holding the lease (until killed)."""
    with _opened(url) as store:
        claim = store.queues.claim(queue, lease=lease, wait=WORKER_TIMEOUT)
        if claim is None:
            channel.send(None)
            return
        channel.send((claim.payload, claim.attempts))
        channel.recv()  # the parent never answers: it kills us


PROCESSED_NS = b"processed"
ATTEMPTS_NS = b"attempts"
TOTALS_NS = b"totals"


def process_until_done(url: str, queue: str, expected: int) -> list[bytes]:
    """Claim, process and ack until ``expected`` items are processed in total.

    "Processing" an item is counted in the same transaction as its ack, so
    it is recorded exactly when the item leaves the queue. A lost lease
    (another worker re-claimed the item) makes the ack raise ``Conflict``,
    which rolls the whole transaction back. Returns the payloads this
    worker processed.
    """
    mine: list[bytes] = []
    deadline = time.monotonic() + WORKER_TIMEOUT
    with _opened(url) as store:
        kv = store.kv
        while kv.counter(SCOPE, TOTALS_NS, b"processed") < expected:
            if time.monotonic() > deadline:
                total = kv.counter(SCOPE, TOTALS_NS, b"processed")
                raise TimeoutError(f"only {total} of {expected} items processed after {WORKER_TIMEOUT:.0f} s")
            claim = store.queues.claim(queue, lease=WORKER_TIMEOUT, wait=0.2)
            if claim is None:
                continue
            try:
                with store.transaction():
                    kv.incr(SCOPE, PROCESSED_NS, claim.payload)
                    kv.incr(SCOPE, TOTALS_NS, b"processed")
                    kv.put(SCOPE, ATTEMPTS_NS, claim.payload, str(claim.attempts).encode())
                    claim.ack()
            except Conflict:
                continue  # lease lost: its new holder processes it
            mine.append(claim.payload)
    return mine


def open_at_once(url: str, barrier: Any) -> list[tuple[str, int]]:
    """Wait for every sibling, open the (fresh) store together, write once.

    Returns the schema versions the store recorded.
    """
    barrier.wait(WORKER_TIMEOUT)
    with _opened(url) as store:
        store.kv.incr(SCOPE, b"openers", b"count")
        engine = store.engine
        rows = engine.all(engine.sql(READ("SELECT facet, version FROM {p}schema ORDER BY facet")))
    return [(str(facet), int(version)) for facet, version in rows]


ACKED_ROUNDS = 20
BATCH_KEYS = 10


def write_then_hang_in_transaction(url: str, channel: Connection) -> None:
    """Acknowledged single writes, then a batch transaction that never ends.

    Round ``i`` writes one value, one counter step, one queue item and one
    log entry, each committed on its own, and reports ``i`` after all four
    returned. Then it opens a transaction, writes a batch of every kind,
    reports ``"inside"`` and blocks until killed.
    """
    with _opened(url) as store:
        kv = store.kv
        for i in range(ACKED_ROUNDS):
            kv.put(SCOPE, b"acked", f"{i:04d}".encode(), b"v%d" % i)
            kv.incr(SCOPE, COUNTER_NS, b"acked")
            store.queues.push("crash", [b"acked-%d" % i])
            kv.append(SCOPE, b"log", b"crash", b"acked-%d" % i)
            channel.send(i)
        with store.transaction():
            kv.put_many(SCOPE, b"batch", [(b"%04d" % j, b"batch") for j in range(BATCH_KEYS)])
            kv.incr(SCOPE, COUNTER_NS, b"acked", 1000)
            store.queues.push("crash", [b"batch-%d" % j for j in range(BATCH_KEYS)])
            kv.append(SCOPE, b"log", b"crash", b"batch")
            kv.put(SCOPE, b"acked", b"batch", b"batch")
            channel.send("inside")
            channel.recv()  # the parent never answers: it kills us


def commit_batches_forever(url: str, channel: Connection) -> None:
    """Commit numbered batches back to back, reporting each after its commit.

    Batch ``n`` writes ``BATCH_KEYS`` values under ``batch/<n>/``, one queue
    item and adds 1 to the ``batches`` counter, all in one transaction.
    Runs until killed.
    """
    with _opened(url) as store:
        kv = store.kv
        n = 0
        while True:
            with store.transaction():
                kv.put_many(SCOPE, b"batch", [(b"%06d/%02d" % (n, j), b"x" * 64) for j in range(BATCH_KEYS)])
                store.queues.push("batches", [b"%06d" % n])
                kv.incr(SCOPE, COUNTER_NS, b"batches")
            channel.send(n)
            n += 1


# -- the contract ------------------------------------------------------------


@pytest.mark.multiprocess
class TestCountersAcrossProcesses:
    """Concurrent increments from several processes are never lost."""

    WORKERS = 4
    ROUNDS = 200

    @pytest.mark.parametrize("method", START_METHODS)
    def test_increments_from_many_processes_add_up_exactly(self, shared_url: str, method: str) -> None:
        parent = _open(shared_url)
        try:
            # Touch the store before forking, so children inherit live
            # connections (fork) that they must not reuse.
            parent.kv.incr(SCOPE, COUNTER_NS, b"shared", 0)
            # fork: the children use the parent's Store object itself;
            # spawn: they cannot inherit it and open the URL.
            target: str | durastate.Store = parent if method == "fork" else shared_url
            with _Workers(method) as workers:
                for w in range(self.WORKERS):
                    workers.start(f"counter-{w}", hammer_counters, target, w, self.ROUNDS)
                # The parent contends too, on its (pre-fork) store.
                parent_ordinals = hammer_counters(parent, self.WORKERS, self.ROUNDS)
                results = workers.results()
            per_worker = [results[f"counter-{w}"] for w in range(self.WORKERS)] + [parent_ordinals]

            kv = parent.kv
            writers = self.WORKERS + 1
            assert kv.counter(SCOPE, COUNTER_NS, b"shared") == writers * self.ROUNDS
            for w in range(writers):
                assert kv.counter(SCOPE, COUNTER_NS, f"w{w}".encode()) == self.ROUNDS // 2
            appends_each = len(range(0, self.ROUNDS, LOG_EVERY))
            for ordinals in per_worker:
                assert len(ordinals) == appends_each
                assert ordinals == sorted(set(ordinals)), "one writer's ordinals must strictly increase"
            everything = [o for ordinals in per_worker for o in ordinals]
            assert len(set(everything)) == len(everything), "log ordinals collided across processes"
            logged = list(kv.log(SCOPE, b"log", b"shared"))
            assert [o for o, _ in logged] == sorted(everything)
            by_ordinal = dict(logged)
            for w, ordinals in enumerate(per_worker):
                for o, i in zip(ordinals, range(0, self.ROUNDS, LOG_EVERY), strict=True):
                    assert by_ordinal[o] == f"{w}:{i}".encode()
            values = dict(kv.scan(SCOPE, b"values"))
            assert len(values) == writers * appends_each * 3
            assert all(values[f"{w}:0:2".encode()] == f"w{w}".encode() for w in range(writers))
        finally:
            parent.close()


@pytest.mark.multiprocess
class TestForkedStore:
    """A Store opened before ``fork`` works in the children.

    The plain case (no transaction open anywhere at fork time) is covered by
    ``TestCountersAcrossProcesses`` with ``fork``. Here another thread of the
    parent is inside ``store.transaction()`` when the fork happens: the
    children must still get a store they can write to once that transaction
    ends (an engine may make the fork wait for it, or ignore it).
    """

    CHILDREN = 3
    # How long the holder keeps its transaction open waiting for the fork to
    # finish. An engine that delays fork until open transactions end would
    # otherwise deadlock with the holder; after this the holder commits anyway.
    HOLD = 2.0

    @pytest.mark.skipif("fork" not in START_METHODS, reason="this platform cannot fork")
    def test_fork_while_another_thread_is_in_a_transaction(
        self, shared_url: str, request: pytest.FixtureRequest, open_shared: Callable[..., durastate.Store]
    ) -> None:
        # Short busy timeout: children legitimately wait for the holder's
        # commit (well under a second); a lock that never frees fails fast.
        parent = open_shared(busy_timeout=5.0)
        inside, forked = threading.Event(), threading.Event()
        holder_errors: list[BaseException] = []

        def hold_transaction() -> None:
            try:
                with parent.transaction():
                    parent.kv.put(SCOPE, b"fork", b"parent", b"committed after the fork")
                    inside.set()
                    forked.wait(self.HOLD)
            except BaseException as exc:  # reported by the main thread
                holder_errors.append(exc)
                inside.set()

        holder = threading.Thread(target=hold_transaction, name="transaction-holder")
        try:
            with _Workers("fork") as workers:
                holder.start()
                assert inside.wait(WORKER_TIMEOUT), "the holder thread never entered its transaction"
                for child in range(self.CHILDREN):
                    workers.start(f"child-{child}", write_from_fork, parent, child)
                forked.set()
                holder.join(WORKER_TIMEOUT)
                assert not holder.is_alive() and holder_errors == []
                results = workers.results()
            assert results == {f"child-{c}": False for c in range(self.CHILDREN)}, "a child inherited a transaction"
            kv = parent.kv
            assert kv.counter(SCOPE, COUNTER_NS, b"children") == self.CHILDREN
            assert dict(kv.scan(SCOPE, b"fork")) == {
                b"parent": b"committed after the fork",
                **{b"child-%d" % c: b"written" for c in range(self.CHILDREN)},
            }
        finally:
            forked.set()
            holder.join(WORKER_TIMEOUT)
            parent.close()


@pytest.mark.multiprocess
class TestPopsAcrossProcesses:
    """Destructive pops by several processes: each item to exactly one of them."""

    ITEMS = 300
    POPPERS = 3

    def test_concurrent_pops_deliver_each_item_once(self, shared_url: str) -> None:
        payloads = [b"item-%05d" % i for i in range(self.ITEMS)]
        _open(shared_url).close()  # create and migrate before the race
        with _Workers(ANY_METHOD) as workers:
            for p in range(self.POPPERS):
                workers.start(f"popper-{p}", pop_until_empty, shared_url, "work")
            workers.start("producer", produce, shared_url, "work", payloads, 7)
            results = workers.results()
        popped = [payload for p in range(self.POPPERS) for payload in results[f"popper-{p}"]]
        duplicates = len(popped) - len(set(popped))
        assert duplicates == 0, f"{duplicates} items were popped twice"
        missing = set(payloads) - set(popped)
        assert not missing, f"{len(missing)} items were never popped, e.g. {sorted(missing)[:3]}"
        assert len(popped) == self.ITEMS
        with _opened(shared_url) as store:
            assert store.queues.pop("work") is None


@pytest.mark.multiprocess
class TestClaimsAcrossProcesses:
    """Claim/ack across processes, with one holder killed mid-lease."""

    ITEMS = 24
    WORKERS = 3
    VICTIM_LEASE = 1.0

    def test_killed_holders_item_is_redelivered_and_everything_processed_once(self, shared_url: str) -> None:
        payloads = [b"job-%03d" % i for i in range(self.ITEMS)]
        with _opened(shared_url) as store:
            store.queues.push("jobs", payloads)
        with _Workers(ANY_METHOD) as workers:
            ours, theirs = workers.ctx.Pipe()
            victim = workers.start_plain("victim", claim_and_hold, shared_url, "jobs", self.VICTIM_LEASE, theirs)
            held = _receive(ours, "claim report from the victim")
            assert held is not None, "the victim found nothing to claim"
            held_payload, held_attempts = held
            assert held_attempts == 1
            for w in range(self.WORKERS):
                workers.start(f"worker-{w}", process_until_done, shared_url, "jobs", self.ITEMS)
            _kill(victim)
            results = workers.results()

        processed = [p for w in range(self.WORKERS) for p in results[f"worker-{w}"]]
        assert sorted(processed) == payloads, "each item must be processed by exactly one worker"
        with _opened(shared_url) as store:
            kv = store.kv
            counts = {p: kv.counter(SCOPE, PROCESSED_NS, p) for p in payloads}
            assert {p: n for p, n in counts.items() if n != 1} == {}
            assert kv.counter(SCOPE, TOTALS_NS, b"processed") == self.ITEMS
            attempts = kv.get(SCOPE, ATTEMPTS_NS, held_payload)
            assert attempts is not None and int(attempts) >= 2, (
                f"the killed holder's {held_payload!r} was acked at attempt {attempts!r}, not redelivered"
            )
            stats = store.queues.stats("jobs")
            assert (stats.ready, stats.in_flight, stats.delayed, stats.dead) == (0, 0, 0, 0)


@pytest.mark.multiprocess
class TestColdOpen:
    """Several processes opening one fresh store at the same instant."""

    OPENERS = 6

    @pytest.mark.parametrize("method", START_METHODS)
    def test_simultaneous_cold_open_succeeds_everywhere_and_migrates_once(self, shared_url: str, method: str) -> None:
        with _Workers(method) as workers:
            barrier = workers.ctx.Barrier(self.OPENERS)
            for i in range(self.OPENERS):
                workers.start(f"opener-{i}", open_at_once, shared_url, barrier)
            results = workers.results()
        expected = sorted((schema.facet, schema.version) for schema in SCHEMAS)
        for name, versions in results.items():
            # One row per facet at the code's version: a second migration of
            # the same step would have failed its CREATE TABLE in some opener.
            assert versions == expected, name
        with _opened(shared_url) as store:
            assert store.kv.counter(SCOPE, b"openers", b"count") == self.OPENERS


@pytest.mark.multiprocess
class TestKilledWriter:
    """SIGKILL of a writer: all-or-nothing batches, nothing acknowledged lost."""

    def test_kill_inside_transaction_leaves_no_partial_batch(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        _open(shared_url).close()
        acked: list[int] = []
        with _Workers(ANY_METHOD) as workers:
            ours, theirs = workers.ctx.Pipe()
            writer = workers.start_plain("writer", write_then_hang_in_transaction, shared_url, theirs)
            while True:
                message = _receive(ours, "progress from the writer")
                if message == "inside":
                    break
                acked.append(message)
            _kill(writer)
        assert acked == list(range(ACKED_ROUNDS))

        # Short busy timeout: a write lock outliving its process fails fast.
        with open_shared(busy_timeout=5.0) as store:
            assert _integrity_errors(store) == []
            kv = store.kv
            assert list(kv.scan(SCOPE, b"batch")) == [], "values of the killed batch survived"
            assert kv.get(SCOPE, b"acked", b"batch") is None
            assert kv.counter(SCOPE, COUNTER_NS, b"acked") == ACKED_ROUNDS
            assert list(kv.scan(SCOPE, b"acked")) == [(f"{i:04d}".encode(), b"v%d" % i) for i in acked]
            assert [v for _, v in kv.log(SCOPE, b"log", b"crash")] == [b"acked-%d" % i for i in acked]
            drained = []
            while (payload := store.queues.pop("crash")) is not None:
                drained.append(payload)
            assert drained == [b"acked-%d" % i for i in acked]
            # The dead writer's lock is gone: a new transaction commits.
            with store.transaction():
                kv.put(SCOPE, b"after", b"k", b"v")
            assert kv.get(SCOPE, b"after", b"k") == b"v"

    def test_kill_at_an_arbitrary_point_keeps_every_batch_whole(
        self, shared_url: str, open_shared: Callable[..., durastate.Store]
    ) -> None:
        _open(shared_url).close()
        reported: list[int] = []
        with _Workers(ANY_METHOD) as workers:
            ours, theirs = workers.ctx.Pipe()
            writer = workers.start_plain("batcher", commit_batches_forever, shared_url, theirs)
            theirs.close()
            while len(reported) < 30:
                reported.append(_receive(ours, "a batch report"))
            _kill(writer)
            # Reports sent before the kill are acknowledgements too.
            while ours.poll(0):
                try:
                    reported.append(ours.recv())
                except EOFError:
                    break
        assert reported == list(range(len(reported)))

        with open_shared(busy_timeout=5.0) as store:
            assert _integrity_errors(store) == []
            kv = store.kv
            committed = kv.counter(SCOPE, COUNTER_NS, b"batches")
            # Every reported batch committed; at most one more committed
            # whose report the kill cut off.
            assert len(reported) <= committed <= len(reported) + 1
            keys = [k for k, _ in kv.scan(SCOPE, b"batch")]
            assert keys == [b"%06d/%02d" % (n, j) for n in range(committed) for j in range(BATCH_KEYS)]
            items = []
            while (payload := store.queues.pop("batches")) is not None:
                items.append(payload)
            assert items == [b"%06d" % n for n in range(committed)]
