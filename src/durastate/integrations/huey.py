"""huey (3.5) on durastate: ``DurastateHuey``, a task queue whose dequeued tasks are leased.

::

    from durastate.integrations.huey import DurastateHuey

    huey = DurastateHuey("my-app", url="postgresql://...")   # any durastate URL; default ./.durastate/state.db

    @huey.task()
    def add(a, b):
        return a + b

Run the consumer as usual (``huey_consumer my_module.huey``). Every part of
huey's storage contract is here: the task queue with priorities, the
schedule, the result store (``put_data``/``peek_data``/``pop_data``/
``put_if_empty`` with ``ttl``) and counters, proven by huey's own
``StorageTests`` on SQLite and PostgreSQL.

Leases: what changes against huey's own storages. huey's ``dequeue`` deletes
the message, so a consumer killed mid-task (``kill -9``, OOM, power loss)
loses it. Here ``dequeue`` *claims* it (``store.queues``) for ``lease``
seconds (default 300) and ``DurastateHuey.execute`` settles the claim when
huey is done with the task:

* the task ran (succeeded, or failed and huey handled it: stored the error,
  re-enqueued a retry), was revoked, expired or cancelled: ``ack`` (gone),
  committed with the worker's next dequeue (see "Acks ride on the next
  dequeue" below);
* it was not ready yet (an ETA in the future): moved to the schedule and
  acked **in one transaction**;
* huey reported it interrupted (the consumer's SIGINT) or ``execute`` raised:
  ``nack``, so it is due again at once;
* the process died: nothing is settled, and once the lease runs out the next
  ``dequeue`` (any consumer) gets it again.

While a task runs, a daemon thread renews its lease every ``lease / 3``
seconds, so long tasks are not handed out twice. A message is delivered at
most ``max_attempts`` times (default 5, ``None``: unlimited); after that it
moves to ``store.queues``' dead letters (``storage.dead_letters()``,
``storage.redrive()``) instead of killing consumers forever. A message
that cannot be deserialised is nacked, so it reaches the dead letters after
``max_attempts`` tries. The delivery guarantee is therefore at-least-once
(a task that finished just before its process died runs again), where
huey's own storages give at-most-once. ``lease=None`` restores huey's
destructive dequeue exactly.

Acks ride on the next dequeue. A settled task's ack is not a commit of its
own: ``execute`` hands it to ``storage.ack_later``, and the same thread's
next ``storage.dequeue()`` commits it with the next claim (huey's worker
calls ``dequeue`` as soon as ``execute`` returns, also when the queue is
empty): one ack waiting goes in ``Queues._ack_then_claim`` with the claim
of the highest priority (on PostgreSQL one statement: one round trip, no
transaction), several in one transaction with the claim. So a task costs
two commits, the enqueue and the claim, as on huey's own storages
(enqueue, destructive dequeue), instead of three; on SQLite with ``durability="full"`` and on PostgreSQL each commit
waits for a flush to disk, which is most of a task's queue cost. A waiting
ack is also committed by the worker's shutdown (an ``on_shutdown`` hook, in
the worker's thread), ``DurastateHuey.close()``, ``storage.close()`` and
``storage.flush_acks()``, and its lease is renewed like a running task's
meanwhile. If the process dies before it commits, the task runs again once
its lease is out: the at-least-once guarantee below, with the same window
as an ack of its own (from the end of the task to the next commit). If the
dequeue fails, its acks wait for the next one (nothing of it committed); an
ack whose lease was lost meanwhile is logged, and the claim goes ahead (an
item another consumer has already finished counts as acked by the dequeue).

Calling ``storage.dequeue()`` directly (outside ``DurastateHuey``) claims the
message too; nobody settles it, so it comes back after the lease.

Layout, all under the names ``huey/<name>/...`` on durastate's public facets:
one ``store.queues`` queue per distinct priority (``.../queue/<8 bytes>``,
the priority encoded so bytes order is numeric order) plus a kv registry of
the priorities in use, which ``dequeue`` walks from the highest down
(registry entries are never removed, so a dequeue costs one claim per
distinct priority ever used: use a handful of priorities, not timestamps;
``dequeue`` re-reads the registry at most every ``PRIORITY_REFRESH``
seconds, so a priority first used by another process is served within that
delay);
the schedule, results and counters are kv scopes of their own, so each
``flush_*`` is one ``kv.clear``. ``add_to_schedule`` and ``read_schedule``
first take one row lock (a zero counter increment), so two schedulers
never both hand out one scheduled task and a message never slips in
between a reader's scan and its delete.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import struct
import threading
import time
from collections.abc import Iterable
from typing import Any

try:
    from huey.api import Huey
    from huey.constants import EmptyData
    from huey.signals import SIGNAL_INTERRUPTED
    from huey.storage import BaseStorage
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f"durastate.integrations.huey needs the huey package: pip install 'durastate[huey]' ({exc})"
    ) from exc

import durastate

from ..errors import Conflict, DurastateError, InvalidRequest
from ..queues import DEFAULT_MAX_ATTEMPTS, Claim, DeadLetter
from ._common import check_source

__all__ = ["DEFAULT_LEASE", "DurastateHuey", "DurastateStorage"]

DEFAULT_LEASE = 300.0
logger = logging.getLogger(__name__)

_PRIORITIES = b"priorities"
_RESULTS = b"r"
_SCHEDULE = b"s"
_COUNTERS = b"c"
_LOCK = b"lock"
_FLOAT = struct.Struct(">d")
_U64 = struct.Struct(">Q")
_SIGN = 1 << 63
_MASK = (1 << 64) - 1


def _sortable(value: float) -> bytes:
    """8 bytes whose unsigned order is the numeric order of ``value`` (IEEE 754 trick)."""
    (bits,) = _U64.unpack(_FLOAT.pack(value))
    return _U64.pack(bits ^ _MASK if bits & _SIGN else bits | _SIGN)


_NO_PRIORITY = _sortable(0.0)


def _priority_key(priority: Any) -> bytes:
    if priority is None:  # huey's usual case: computed once
        return _NO_PRIORITY
    if isinstance(priority, bool) or not isinstance(priority, (int, float)):
        raise InvalidRequest(f"priority must be a number or None, got {type(priority).__name__}")
    value = float(priority)
    if not math.isfinite(value):
        raise InvalidRequest(f"priority must be finite, got {priority!r}")
    return _sortable(value + 0.0)  # + 0.0 folds -0.0 into 0.0


def _key(key: Any) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise InvalidRequest(f"key must be str or bytes, got {type(key).__name__}")


def _data(name: str, data: Any) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise InvalidRequest(f"{name} must be bytes, got {type(data).__name__}")


def _timestamp_key(ts: Any) -> bytes:
    if not isinstance(ts, datetime.datetime):
        raise InvalidRequest(f"ts must be a datetime, got {type(ts).__name__}")
    return _sortable(ts.timestamp())


# Forks into a child so far (counted in the child): a storage that saw another count is a forked copy, its
# waiting acks the parent's. Compared at every ack_later and dequeue instead of os.getpid(), a system call.
_forks = [0]


def _forked() -> None:
    _forks[0] += 1


os.register_at_fork(after_in_child=_forked)


class DurastateStorage(BaseStorage):  # type: ignore[misc]
    """huey's storage contract on a durastate store (see the module docstring).

    ``url`` (any durastate URL; ``None``: ``./.durastate/state.db``) or
    ``store`` (an open ``durastate.Store``, which this storage then does not
    close). ``lease``: seconds a dequeued message is held (``None``: delete
    on dequeue, huey's own semantics). ``max_attempts``: deliveries before a
    message moves to the dead letters (``None``: unlimited). ``prefix``: the
    store's table prefix when opening ``url`` (default ``"ds_"``); refused
    with ``store=`` (it keeps the prefix it was opened with).
    """

    blocking = False
    priority = True
    # Seconds dequeue may go on using its copy of the priority registry: a
    # priority first used by *another* process is dequeued at most this much
    # later than it would be otherwise (one registry read saved per dequeue).
    PRIORITY_REFRESH = 1.0

    def __init__(
        self,
        name: str = "huey",
        url: str | None = None,
        *,
        store: durastate.Store | None = None,
        lease: float | None = DEFAULT_LEASE,
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
        prefix: str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise InvalidRequest(f"unknown DurastateStorage option(s): {', '.join(sorted(unknown))}")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"name must be a non-empty str, got {name!r}")
        if lease is not None and (isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0):
            raise InvalidRequest(f"lease must be a positive number of seconds or None, got {lease!r}")
        if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)):
            raise InvalidRequest(f"max_attempts must be an int >= 1 or None, got {max_attempts!r}")
        if max_attempts is not None and max_attempts < 1:
            raise InvalidRequest(f"max_attempts must be >= 1 or None, got {max_attempts}")
        check_source(url, store, prefix=prefix)
        super().__init__(name)
        self.store = store if store is not None else durastate.open(url, prefix="ds_" if prefix is None else prefix)
        self._owns_store = store is None
        self.lease = None if lease is None else float(lease)
        self.max_attempts = max_attempts
        base = b"huey/" + name.encode("utf-8")
        self._queue_prefix = base + b"/queue/"
        self._queue_scope = base + b"/queue"
        self._schedule_scope = base + b"/schedule"
        self._results_scope = base + b"/results"
        self._counters_scope = base + b"/counters"
        self._known_priorities: set[bytes] = set()
        # dequeue's copy of the priority registry and when it was read
        # (time.monotonic); see PRIORITY_REFRESH.
        self._dequeue_queues: list[bytes] = []
        self._dequeue_queues_read = -math.inf
        self._last_claim = threading.local()
        # ack_later's claims by thread ident; the pid tells a forked child
        # that they are its parent's (not its own to commit).
        self._pending: dict[int, list[Claim]] = {}
        self._pending_lock = threading.Lock()
        self._pending_forks = _forks[0]

    def close(self) -> bool:
        """Commit every thread's waiting acks (``ack_later``), then close the store if this storage opened it."""
        if not self.store.closed:
            try:
                self.flush_acks(all_threads=True)
            except DurastateError as exc:  # their tasks come back after the lease: at-least-once
                logger.warning("could not commit the acks of finished tasks at close: %s", exc)
        if self._owns_store and not self.store.closed:
            self.store.close()
            return True
        return False

    # -- queue ---------------------------------------------------------------

    def _queues_for_dequeue(self) -> list[bytes]:
        """``_queues()``, re-read at most every ``PRIORITY_REFRESH`` seconds (this process's enqueues at once)."""
        now = time.monotonic()
        if now - self._dequeue_queues_read >= self.PRIORITY_REFRESH:
            self._dequeue_queues = self._queues()
            self._dequeue_queues_read = now
        return self._dequeue_queues

    def _queues(self) -> list[bytes]:
        """The queue of every priority ever used, highest priority first."""
        keys = self.store.kv.scan(self._queue_scope, _PRIORITIES, reverse=True)
        return [self._queue_prefix + key for key, _ in keys]

    def enqueue(self, data: bytes, priority: float | None = None) -> None:
        payload = _data("data", data)
        key = _priority_key(priority)
        if key not in self._known_priorities:
            # Registered before the push: a crash in between leaves an empty queue, never a lost one.
            self.store.kv.put_if_absent(self._queue_scope, _PRIORITIES, key, b"")
            self._known_priorities.add(key)
            self._dequeue_queues_read = -math.inf  # a priority new to this process: dequeue re-reads
        self.store.queues.push(self._queue_prefix + key, [payload], max_attempts=self.max_attempts)

    def dequeue(self) -> bytes | None:
        """The next message (highest priority first), or ``None``; with a lease, claimed (see the module docstring).

        This thread's acks waiting in ``ack_later`` are committed in the same
        transaction as the claim, before it. If the transaction fails they
        stay waiting (nothing was committed) and the error propagates.
        """
        self._last_claim.claim = None
        queues = self.store.queues
        if self.lease is None:
            for queue in self._queues_for_dequeue():
                data = queues.pop(queue)
                if data is not None:
                    return data
            return None
        pending = self._take_pending(threading.get_ident())
        if not pending:
            claim = self._claim_next()
        elif len(pending) == 1:
            claim = self._ack_then_claim_next(pending[0])
        else:
            try:
                with self.store.transaction():
                    _ack_all(pending)
                    claim = self._claim_next()
            except BaseException:
                self._give_back(threading.get_ident(), pending)
                raise
        if claim is None:
            return None
        self._last_claim.claim = claim
        return claim.payload

    def _claim_next(self) -> Claim | None:
        assert self.lease is not None
        for queue in self._queues_for_dequeue():
            claim = self.store.queues.claim(queue, lease=self.lease)
            if claim is not None:
                return claim
        return None

    def _ack_then_claim_next(self, done: Claim) -> Claim | None:
        """``_claim_next`` with ``done``'s ack in the first queue's claim (``Queues._ack_then_claim``).

        If that statement fails, ``done`` waits again (it was taken from this
        thread's waiting acks); once it succeeded the ack is settled, whatever
        the later queues' claims do.

        On PostgreSQL the ack and the claim are one statement (one round trip,
        no transaction); the common case of huey's worker: one finished task
        per dequeue.
        """
        assert self.lease is not None
        queues = self._queues_for_dequeue()
        try:
            if not queues:
                _ack_all([done])
                return None
            acked, claim = self.store.queues._ack_then_claim(done, queues[0], self.lease)
        except BaseException:
            self._give_back(threading.get_ident(), [done])  # nothing was committed: the ack waits again
            raise
        # The ack is committed from here on: a failure of a later queue's claim must not give it back, or the
        # next dequeue would ack it again and log its lease as lost.
        if not acked:
            _lease_lost(done)
        if claim is not None:
            return claim
        for queue in queues[1:]:
            claim = self.store.queues.claim(queue, lease=self.lease)
            if claim is not None:
                return claim
        return None

    def ack_later(self, claim: Claim) -> None:
        """Ack ``claim`` with this thread's next ``dequeue`` (one commit for both), or ``flush_acks``/``close``.

        What ``DurastateHuey.execute`` does with a task that ran; see
        "Acks ride on the next dequeue" in the module docstring.
        """
        if not isinstance(claim, Claim):
            raise InvalidRequest(f"claim must be a durastate Claim, got {type(claim).__name__}")
        with self._pending_lock:
            self._forget_parents_acks()
            self._pending.setdefault(threading.get_ident(), []).append(claim)

    def flush_acks(self, *, all_threads: bool = False) -> int:
        """Commit the acks ``ack_later`` keeps (this thread's; ``all_threads``: every thread's), in one transaction.

        Returns how many were committed or found lost (a lost lease is logged,
        not raised). If the transaction fails, they stay waiting.
        """
        if not isinstance(all_threads, bool):
            raise InvalidRequest(f"all_threads must be a bool, got {type(all_threads).__name__}")
        owner = None if all_threads else threading.get_ident()
        pending = self._take_pending(owner)
        if not pending:
            return 0
        try:
            with self.store.transaction():
                _ack_all(pending)
        except BaseException:
            self._give_back(threading.get_ident() if owner is None else owner, pending)
            raise
        return len(pending)

    def pending_acks(self) -> list[Claim]:
        """Claims whose ack waits for a ``dequeue`` or ``flush_acks`` (every thread's), oldest first per thread."""
        with self._pending_lock:
            self._forget_parents_acks()
            return [claim for claims in self._pending.values() for claim in claims]

    def forget_ack(self, claim: Claim) -> bool:
        """Drop ``claim`` from the waiting acks (its lease was lost); whether it was waiting."""
        with self._pending_lock:
            for claims in self._pending.values():
                for i, waiting in enumerate(claims):
                    if waiting is claim:
                        del claims[i]
                        return True
        return False

    def _take_pending(self, owner: int | None) -> list[Claim]:
        """Remove and return the waiting acks of thread ``owner`` (``None``: every thread)."""
        if not self._pending:  # the common case, without the lock: nothing waits
            return []
        with self._pending_lock:
            self._forget_parents_acks()
            if owner is not None:
                return self._pending.pop(owner, [])
            taken = [claim for claims in self._pending.values() for claim in claims]
            self._pending.clear()
            return taken

    def _give_back(self, owner: int, claims: list[Claim]) -> None:
        with self._pending_lock:
            self._pending[owner] = claims + self._pending.get(owner, [])

    def _forget_parents_acks(self) -> None:
        """In a forked child, the parent's waiting acks are the parent's to commit."""
        if self._pending_forks != _forks[0]:
            self._pending.clear()
            self._pending_forks = _forks[0]

    def take_claim(self) -> Claim | None:
        """The claim of this thread's last ``dequeue`` (once), for whoever settles it."""
        claim: Claim | None = getattr(self._last_claim, "claim", None)
        self._last_claim.claim = None
        return claim

    def queue_size(self) -> int:
        total = 0
        for queue in self._queues():
            stats = self.store.queues.stats(queue)
            total += stats.ready + stats.delayed
        return total

    def enqueued_items(self, limit: int | None = None) -> list[bytes]:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidRequest(f"limit must be an int >= 0 or None, got {limit!r}")
        items: list[bytes] = []
        for queue in self._queues():
            if limit is not None and len(items) >= limit:
                break
            items.extend(self.store.queues.peek_ready(queue, limit=None if limit is None else limit - len(items)))
        return items

    def flush_queue(self) -> None:
        with self.store.transaction():
            for queue in self._queues():
                self.store.queues.clear(queue)
                self.store.queues.delete_dead(queue)

    def dead_letters(self) -> list[DeadLetter]:
        """Messages that used up ``max_attempts`` deliveries, across priorities."""
        return [dead for queue in self._queues() for dead in self.store.queues.dead_letters(queue, limit=None)]

    def redrive(self) -> int:
        """Put every dead letter back in its queue with fresh attempts; return how many."""
        return sum(self.store.queues.redrive(queue) for queue in self._queues())

    # -- schedule --------------------------------------------------------------

    def add_to_schedule(self, data: bytes, ts: datetime.datetime) -> None:
        # Unique per message; ties on the timestamp keep (roughly) insertion order.
        key = _timestamp_key(ts) + _U64.pack(time.time_ns()) + os.urandom(4)
        payload = _data("data", data)
        kv = self.store.kv
        with self.store.transaction():
            kv.incr(self._schedule_scope, _LOCK, _LOCK, 0)  # see read_schedule
            kv.put(self._schedule_scope, _SCHEDULE, key, payload)

    def read_schedule(self, ts: datetime.datetime) -> list[bytes]:
        """Remove and return the messages due at ``ts``, oldest first.

        Readers and writers of the schedule take one row lock first (a zero
        counter increment, held to commit): no message can arrive between
        the scan and the range delete, so the delete is an index range
        (not a key list) and two schedulers never both hand one out.
        """
        end = _timestamp_key(ts) + b"\xff" * 13  # past every message of that instant
        kv = self.store.kv
        scope = self._schedule_scope
        with self.store.transaction():
            kv.incr(scope, _LOCK, _LOCK, 0)
            due = [value for _, value in kv.scan(scope, _SCHEDULE, end=end)]
            if due:
                kv.delete(scope, _SCHEDULE, end=end)
        return due

    def schedule_size(self) -> int:
        return sum(1 for _ in self.store.kv.scan(self._schedule_scope, _SCHEDULE))

    def scheduled_items(self, limit: int | None = None) -> list[bytes]:
        return [value for _, value in self.store.kv.scan(self._schedule_scope, _SCHEDULE, limit=limit)]

    def flush_schedule(self) -> None:
        self.store.kv.clear(self._schedule_scope)

    # -- result store ----------------------------------------------------------

    def put_data(self, key: str | bytes, value: bytes, is_result: bool = False) -> None:
        self.store.kv.put(self._results_scope, _RESULTS, _key(key), _data("value", value))

    def peek_data(self, key: str | bytes) -> Any:
        value = self.store.kv.get(self._results_scope, _RESULTS, _key(key))
        return EmptyData if value is None else value

    def peek_many(self, keys: Iterable[str | bytes]) -> dict[Any, bytes]:
        wanted = list(keys)
        values = self.store.kv.get_many(self._results_scope, _RESULTS, [_key(k) for k in wanted])
        return {key: value for key, value in zip(wanted, values, strict=True) if value is not None}

    def pop_data(self, key: str | bytes) -> Any:
        value = self.store.kv.take(self._results_scope, _RESULTS, _key(key))
        return EmptyData if value is None else value

    def delete_data(self, key: str | bytes) -> bool:
        return self.store.kv.take(self._results_scope, _RESULTS, _key(key)) is not None

    def has_data_for_key(self, key: str | bytes) -> bool:
        return self.store.kv.get(self._results_scope, _RESULTS, _key(key)) is not None

    def put_if_empty(self, key: str | bytes, value: bytes, ttl: float | None = None) -> bool:
        return self.store.kv.put_if_absent(self._results_scope, _RESULTS, _key(key), _data("value", value), ttl=ttl)

    def result_store_size(self) -> int:
        return sum(1 for _ in self.store.kv.scan(self._results_scope, _RESULTS))

    def result_items(self) -> dict[Any, bytes]:
        items: dict[Any, bytes] = {}
        for key, value in self.store.kv.scan(self._results_scope, _RESULTS):
            try:
                items[key.decode("utf-8")] = value  # huey writes str keys and reads them back as str
            except UnicodeDecodeError:
                items[key] = value
        return items

    def flush_results(self) -> None:
        self.store.kv.clear(self._results_scope)

    # -- counters ----------------------------------------------------------------

    def incr(self, key: str | bytes, amount: int = 1) -> int:
        return self.store.kv.incr(self._counters_scope, _COUNTERS, _key(key), amount)

    def delete_counter(self, key: str | bytes) -> None:
        self.store.kv.delete_counter(self._counters_scope, _COUNTERS, _key(key))

    def flush_counters(self) -> None:
        self.store.kv.clear(self._counters_scope)


def _ack_all(claims: list[Claim]) -> None:
    """Ack each claim; a lease lost meanwhile is logged (huey already did the work), not raised."""
    for claim in claims:
        _settle(claim, ack=True, error="")


class _LeaseKeeper:
    """Renews the leases of running tasks and waiting acks every ``lease / 3`` seconds, from one daemon thread."""

    def __init__(self, lease: float, storage: Any = None) -> None:
        self.interval = lease / 3
        self._storage = storage if isinstance(storage, DurastateStorage) else None
        self._held: dict[int, Claim] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._forks = _forks[0]

    def hold(self, key: int, claim: Claim) -> None:
        with self._lock:
            if self._forks != _forks[0]:  # forked: the parent's claims are not ours to renew
                self._held.clear()
                self._thread = None
                self._forks = _forks[0]
            self._held[key] = claim
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="durastate-huey-leases", daemon=True)
                self._thread.start()

    def held(self, key: int) -> Claim | None:
        with self._lock:
            return self._held.get(key)

    def release(self, key: int) -> Claim | None:
        with self._lock:
            return self._held.pop(key, None)

    def renew_all(self) -> None:
        """Extend every held lease by its full length; drop the ones lost to another consumer."""
        with self._lock:
            held = list(self._held.items())
        for key, claim in held:
            try:
                claim.renew()
            except Conflict:
                if self.release(key) is not None:  # still held: not merely settled meanwhile
                    logger.warning("lease of %r was lost (taken over after it ran out); it may run twice", claim)
            except DurastateError as exc:  # the store is busy or down: try again next round
                logger.warning("could not renew the lease of %r: %s", claim, exc)
        if self._storage is not None:
            self._renew_waiting_acks(self._storage)

    def _renew_waiting_acks(self, storage: DurastateStorage) -> None:
        for claim in storage.pending_acks():
            try:
                claim.renew()
            except Conflict:
                if storage.forget_ack(claim):  # still waiting: not merely committed meanwhile
                    logger.warning("lease of %r was lost before its ack was committed; it may run twice", claim)
            except DurastateError as exc:
                logger.warning("could not renew the lease of %r (its ack waits): %s", claim, exc)

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.renew_all()


class DurastateHuey(Huey):  # type: ignore[misc]
    """A ``Huey`` on durastate whose dequeued tasks are leased (see the module docstring).

    ``DurastateHuey(name, url=...)`` or ``store=``; ``lease``,
    ``max_attempts`` and ``prefix`` are ``DurastateStorage``'s options;
    every other keyword is huey's (``results``, ``utc``, ``immediate``, ...).
    """

    storage_class = DurastateStorage

    def __init__(self, name: str = "huey", url: str | None = None, **options: Any) -> None:
        if "storage_class" in options:
            raise InvalidRequest("DurastateHuey always uses DurastateStorage; use huey.Huey for another storage_class")
        super().__init__(name, url=url, **options)
        lease = getattr(self.storage, "lease", None)  # MemoryStorage in immediate mode has none
        self._leases = _LeaseKeeper(lease if lease is not None else DEFAULT_LEASE, self.storage)
        self._interrupted = threading.local()
        if isinstance(self.storage, DurastateStorage):
            # huey's worker runs its shutdown hooks in its own thread when it stops: its waiting ack goes out.
            self.on_shutdown(name="durastate: commit waiting acks")(self.storage.flush_acks)

    def dequeue(self) -> Any:
        storage = self.storage
        data = storage.dequeue()
        if data is None:
            return None
        claim = storage.take_claim() if isinstance(storage, DurastateStorage) else None
        try:
            task = self.deserialize_task(data)
        except Exception as exc:
            if claim is not None:
                claim.nack(error=f"cannot deserialize the message: {exc!r}"[:1000])
            raise
        if claim is not None:
            self._leases.hold(id(task), claim)
        return task

    def execute(self, task: Any, timestamp: datetime.datetime | None = None) -> Any:
        key = id(task)
        claim = self._leases.held(key)
        if claim is None:  # not dequeued here (or lease=None): huey's own behaviour
            return super().execute(task, timestamp)
        try:
            if timestamp is None:
                timestamp = self._get_timestamp()
            if not self.ready_to_run(task, timestamp):
                self._leases.release(key)
                with self.storage.store.transaction():  # into the schedule and off the queue, atomically
                    self.add_schedule(task)
                    claim.ack()
                return None
            self._interrupted.flag = False
            value = super().execute(task, timestamp)
        except BaseException as exc:
            self._leases.release(key)
            _settle(claim, ack=False, error=f"execute raised {exc!r}"[:1000])
            raise
        if getattr(self._interrupted, "flag", False):
            self._leases.release(key)
            _settle(claim, ack=False, error="interrupted (consumer shutting down)")
        else:
            # Waiting in the storage before it leaves the keeper: its lease is renewed all along.
            self.storage.ack_later(claim)
            self._leases.release(key)
        return value

    def close(self) -> None:
        """Commit the waiting acks, stop renewing leases and close the store (if this huey opened it)."""
        self.storage.close()
        self._leases.close()

    def _emit(self, signal: str, task: Any, *args: Any, **kwargs: Any) -> Any:
        if signal == SIGNAL_INTERRUPTED:
            self._interrupted.flag = True
        return super()._emit(signal, task, *args, **kwargs)


def _settle(claim: Claim, *, ack: bool, error: str) -> None:
    """Ack or nack; a lease lost meanwhile is logged, not raised (huey already did the work)."""
    try:
        if ack:
            claim.ack()
        else:
            claim.nack(error=error)
    except Conflict:
        _lease_lost(claim)


def _lease_lost(claim: Claim) -> None:
    logger.warning("lease of %r was lost before it was settled; another consumer may run it again", claim)
