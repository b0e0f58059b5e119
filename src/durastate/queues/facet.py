"""The ``Queues`` class and its ``Claim``: the queues facet of a ``Store`` (the model: ``durastate.queues``).

This module holds the work on a queue: push, claim and pop, settling a
claim (ack, nack, renew); inspection, dead letters and housekeeping are
``upkeep``'s, queue names and their channels ``names``'.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from .._validate import INT64_MAX, MAX_DURATION_MS, as_int64, as_list, as_seconds, as_wait, fail, fail_type, shown, text
from ..engines.watch import ChangeWatch
from ..errors import Conflict
from .names import NAMES_KEPT, channel, queue_name
from .statements import (
    ACK,
    ACK_THEN_CLAIM,
    BURY,
    CLAIM,
    CLAIM_HEAD,
    CLAIM_ID,
    DELETE_ID,
    HEAD_TIME,
    ITEM_PRESENT,
    NACK,
    POP,
    PUSH,
    RENEW,
)
from .upkeep import Upkeep

_Found = TypeVar("_Found")

if TYPE_CHECKING:
    from ..engines.base import Engine

# The public names are the package's (durastate.queues.__all__).

DEFAULT_MAX_ATTEMPTS = 5
POLL_INTERVAL = 0.05
_BURY_PER_TRANSACTION = 64
# The claim index's lower bound per queue (Queues._floor): how far below the
# earliest item it lies, and how long it is kept before it is read again.
FLOOR_SLACK_MS = 1000
FLOOR_REFRESH = 2.0
_FLOORS_KEPT = 10_000
# The floor bound where the engine needs none (no dead index entries): below every item (available_at is int64).
NO_FLOOR = -(2**63)
# Seconds a waiter adds to the head's due time before looking again (the clock is read in whole ms).
DUE_MARGIN = 0.001


# Lease tokens are drawn from os.urandom in blocks (one system call per
# _TOKENS_AT_ONCE claims, ~0.4 us of CPU each); next() on the list's iterator
# hands each token to one thread only. A forked child drops its parent's
# block: both would hand out the same tokens.
_TOKEN_SIZE = 16
_TOKENS_AT_ONCE = 64
_tokens: Iterator[bytes] = iter(())


def _lease_token() -> bytes:
    """A new random lease token (``_TOKEN_SIZE`` bytes of ``os.urandom``), never handed out twice."""
    global _tokens
    while True:
        try:
            return next(_tokens)
        except StopIteration:
            block = os.urandom(_TOKEN_SIZE * _TOKENS_AT_ONCE)
            _tokens = iter([block[i : i + _TOKEN_SIZE] for i in range(0, len(block), _TOKEN_SIZE)])


def _forget_tokens() -> None:
    global _tokens
    _tokens = iter(())


os.register_at_fork(after_in_child=_forget_tokens)


# Below this many seconds (~285,000 years) ``value * 1000`` is exact for an
# int as for its float, and far inside MAX_DURATION_MS.
_FAST_DURATION_LIMIT = 9e12


def _duration_ms(name: str, value: Any, allow_zero: bool) -> int:
    """``value`` seconds as whole milliseconds (validated like ``as_seconds``).

    ``allow_zero`` is positional: a keyword costs every claim its parsing.

    A positive duration below 1 ms counts as 1 ms, so a tiny lease is still
    a lease rather than expired on arrival; one longer than
    ``MAX_DURATION_MS`` is refused instead of overflowing the column.
    """
    if (type(value) is float or type(value) is int) and 0 <= value < _FAST_DURATION_LIMIT:
        # The common case, without the general checks: a plain, finite
        # (NaN fails the comparison), non-negative number well in range.
        ms = int(value * 1000)
        if ms or allow_zero:
            return ms
        if value:
            return 1
        # value == 0 and not allow_zero: the general path words the refusal.
    seconds = as_seconds(name, value, allow_zero=allow_zero)
    if seconds > MAX_DURATION_MS / 1000:  # before the product, which can overflow to infinity
        fail(f"{name}={shown(value)} seconds is too long; the limit is {MAX_DURATION_MS // 1000} seconds")
    ms = int(seconds * 1000)
    if ms == 0 and not allow_zero:
        return 1
    return ms


class Claim:
    """A leased item. Settle it with exactly one of ``ack``/``nack``.

    ``ack``, ``nack`` and ``renew`` raise ``Conflict`` (and change nothing)
    when the lease was lost: it expired and the item was claimed again.
    """

    __slots__ = ("_lease_ms", "_queues", "_token", "attempts", "id", "lease_expires_at", "payload", "queue")

    def __init__(
        self,
        queues: Queues,
        queue: bytes,
        item_id: int,
        payload: bytes,
        attempts: int,
        token: object,
        lease_expires_at_ms: int,
        lease_ms: int,
    ) -> None:
        self._queues = queues
        self.queue = queue
        self.id = item_id
        self.payload = payload
        self.attempts = attempts  # deliveries so far, this one included
        self._token = token  # as the engine's blob_binding() made it (the statements that bind it: engine_blobs)
        self._lease_ms = lease_ms
        self.lease_expires_at = lease_expires_at_ms / 1000.0

    def __repr__(self) -> str:
        return (
            f"Claim(queue={self.queue!r}, id={self.id}, attempts={self.attempts}, "
            f"payload={self.payload[:32]!r}{'...' if len(self.payload) > 32 else ''})"
        )

    def ack(self) -> None:
        """The work is done: remove the item for good."""
        queues = self._queues
        if queues._engine.execute(queues._ack_sql, (self.id, self._token)) != 1:
            raise Conflict(f"ack of {self!r}: lease lost (the item was claimed again or is gone)")

    def nack(self, delay: float = 0.0, error: str | None = None) -> None:
        """Give the item back, due again after ``delay`` seconds.

        ``error`` is kept with the item (and shown in its dead letter). If
        this was the item's last allowed attempt, it moves to the dead
        letters now.
        """
        self._queues._nack(self, delay, error)

    def renew(self, lease: float | None = None) -> None:
        """Extend the lease to ``lease`` seconds from now (default: the original length)."""
        self._queues._renew(self, lease)


class Queues(Upkeep):
    """The queues facet of a ``Store`` (see the module docstring); inspection and housekeeping: ``Upkeep``."""

    def __init__(self, engine: Engine, *, max_value_size: int) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        # Blobs bound at every call (queue names, lease tokens, payloads) in the engine's cheapest form.
        self._blob = engine.blob_binding()
        # Queue names as callers give them -> (bytes, as bound, channel): see _named.
        self._names: dict[Any, tuple[bytes, object, str]] = {}
        sql = engine.sql
        self._push = sql(PUSH)
        self._pop = sql(POP)
        self._claim = sql(CLAIM)
        self._claim_head = sql(CLAIM_HEAD)
        self._head_time = sql(HEAD_TIME)
        self._floors: dict[bytes, tuple[int, float]] = {}
        # Whether claims and pops keep a floor (_floor): where the engine's indexes keep dead entries.
        self._floored = engine.capabilities.dead_index_entries
        # One item is pushed by one statement outside a transaction, unless the engine sends notifications after
        # the commit itself (PostgreSQL's Citus mode): alone, that is a second round trip; in a transaction, the
        # notification rides the COMMIT's, so one item goes in a transaction too (one round trip, not two).
        self._push_alone = engine.capabilities.notify_in_transaction
        self._claim_id = sql(CLAIM_ID)
        self._bury = sql(BURY)
        self._delete_id = sql(DELETE_ID)
        self._ack_sql = sql(ACK)
        self._item_present = sql(ITEM_PRESENT)
        self._ack_then_claim_sql = sql(ACK_THEN_CLAIM) if engine.capabilities.write_ctes else None
        self._nack_sql = sql(NACK)
        self._renew_sql = sql(RENEW)
        self._init_upkeep(sql)

    # -- producing -----------------------------------------------------------

    def push(
        self,
        name: str | bytes,
        items: Iterable[bytes],
        *,
        delay: float = 0.0,
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
    ) -> int:
        """Append ``items`` (a list of bytes) to queue ``name``; return how many.

        The batch is atomic. ``delay`` (seconds) holds the items back;
        ``max_attempts`` (``None``: unlimited) is how many deliveries by
        ``claim`` an item gets before it moves to the dead letters.
        """
        try:
            _, bound, changes = self._names[name]
        except (KeyError, TypeError):  # a name not seen yet, or unhashable (refused there)
            _, bound, changes = self._named(name)
        payloads = list(items) if type(items) is list else as_list("items", items)
        limit = self.max_value_size
        for payload in payloads:
            if type(payload) is not bytes or len(payload) > limit:
                # Anything but bytes within the limit: checked (and copied to bytes) item by item.
                payloads = self._checked_items(payloads)
                break
        if max_attempts is not None and (type(max_attempts) is not int or not 1 <= max_attempts <= INT64_MAX):
            max_attempts = as_int64("max_attempts", max_attempts)
            if max_attempts < 1:
                fail(f"max_attempts must be >= 1 or None, got {max_attempts}")
        engine = self._engine
        now = engine.now_ms()
        # No delay (the default) needs no conversion; anything else is checked.
        no_delay = (type(delay) is float or type(delay) is int) and delay == 0
        due = now if no_delay else now + _duration_ms("delay", delay, True)
        if not payloads:
            return 0
        blob = self._blob
        if len(payloads) == 1 and self._push_alone:
            engine.execute(self._push, (bound, blob(payloads[0]), due, max_attempts, now))
            engine.notify(changes, announced=True)
        else:
            # The notification inside: where the engine sends it (Citus mode), it rides the COMMIT's round trip.
            with engine.transaction():
                engine.executemany(self._push, [(bound, blob(p), due, max_attempts, now) for p in payloads])
                engine.notify(changes, announced=True)
        return len(payloads)

    def _known(self, name: Any) -> tuple[bytes, object, str]:
        """``_named(name)``, from this facet's cache when the name was seen (push, claim and pop inline this)."""
        try:
            return self._names[name]
        except (KeyError, TypeError):  # a name not seen yet, or unhashable (refused there)
            return self._named(name)

    def _named(self, name: Any) -> tuple[bytes, object, str]:
        """Queue ``name`` (checked as ``queue_name`` does) as bytes, as the engine binds it, and its channel.

        Kept per facet for the ``str`` and ``bytes`` names it saw (cleared
        past ``NAMES_KEPT``): each call of push, claim and pop then finds
        all three with one look-up (``self._names[name]``) instead of
        checking the name, copying it for the engine and formatting its
        channel again.
        """
        queue = queue_name(name)
        named = (queue, self._blob(queue), channel(queue))
        if type(name) is str or type(name) is bytes:
            if len(self._names) >= NAMES_KEPT:
                self._names.clear()
            self._names[name] = named
        return named

    def _checked_items(self, payloads: list[Any]) -> list[bytes]:
        """``payloads`` as bytes (``bytearray`` and ``memoryview`` copied), each at most ``max_value_size``."""
        checked: list[bytes] = []
        for i, payload in enumerate(payloads):
            if type(payload) is not bytes:
                if not isinstance(payload, (bytearray, memoryview)):
                    fail_type(f"items[{i}]", "bytes", payload)
                payload = bytes(payload)
            if len(payload) > self.max_value_size:
                fail(f"items[{i}] is {len(payload)} bytes; the limit is max_value_size={self.max_value_size}")
            checked.append(payload)
        return checked

    # -- consuming -----------------------------------------------------------

    def pop(self, name: str | bytes, *, wait: float | None = None) -> bytes | None:
        """Remove and return the next available payload, or ``None``.

        At-most-once: the item is gone once this returns. With ``wait``,
        block up to that many seconds for one to arrive.
        """
        try:
            queue, bound, _ = self._names[name]
        except (KeyError, TypeError):
            queue, bound, _ = self._named(name)
        if wait is None:  # no waiting: one try
            return self._pop_once(queue, bound)
        deadline = self._wait_deadline(wait)
        return self._until_found(name, queue, deadline, functools.partial(self._pop_once, queue, bound))

    def _pop_once(self, queue: bytes, bound: object) -> bytes | None:
        engine = self._engine
        now = engine.now_ms()
        row = engine.one(self._pop, (bound, now, self._floor(queue, now) if self._floored else NO_FLOOR))
        return None if row is None else bytes(row[0])

    def claim(self, name: str | bytes, *, lease: float = 30.0, wait: float | None = None) -> Claim | None:
        """Lease the next available item for ``lease`` seconds, or return ``None``.

        With ``wait``, block up to that many seconds for one to arrive.
        """
        try:
            queue, bound, _ = self._names[name]
        except (KeyError, TypeError):
            queue, bound, _ = self._named(name)
        lease_ms = _duration_ms("lease", lease, False)
        if wait is None:  # no waiting: one try
            return self._claim_once(queue, bound, lease_ms)
        deadline = self._wait_deadline(wait)
        return self._until_found(name, queue, deadline, functools.partial(self._claim_once, queue, bound, lease_ms))

    def _until_found(
        self, name: str | bytes, queue: bytes, deadline: float | None, attempt: Callable[[], _Found | None]
    ) -> _Found | None:
        """``attempt()`` until it finds something; with a ``deadline``, waiting for the queue's changes between tries.

        The watch is registered before the first try, so a push committed
        between a try and the wait is not missed (``engines.watch``).
        """
        watch = None if deadline is None else self._watch(queue)
        try:
            while True:
                found = attempt()
                if found is not None:
                    return found
                if watch is None or deadline is None:
                    return None
                look_at = self._look_again_at(name, watch, deadline)
                if not watch.wait_until(look_at) and look_at >= deadline:
                    return None
        finally:
            if watch is not None:
                watch.close()

    def _claim_once(self, queue: bytes, bound: object, lease_ms: int) -> Claim | None:
        """One try at claiming from ``queue`` (``bound``: its name as the engine binds it)."""
        engine = self._engine
        # The block's next token without a call (never empty: 16 bytes); _lease_token when it is used up.
        token = self._blob(next(_tokens, None) or _lease_token())
        now = engine.now_ms()
        floor = self._floor(queue, now) if self._floored else NO_FLOOR
        row = engine.one(self._claim, (token, now + lease_ms, bound, now, floor))
        if row is None:
            row = self._claim_past_exhausted(queue, bound, token, now, floor, lease_ms)
            if row is None:
                return None
        return Claim(self, queue, row[0], row[1], row[2], token, now + lease_ms, lease_ms)

    def _claim_past_exhausted(
        self, queue: bytes, bound: object, token: object, now: int, floor: int, lease_ms: int
    ) -> Any:
        """Slow path: bury heads that used up their attempts, then claim.

        Reached only when the fast statement found nothing: either the queue
        has no available item (one cheap read) or its head is exhausted.
        """
        engine = self._engine
        while True:
            with engine.transaction():
                for _ in range(_BURY_PER_TRANSACTION):
                    head = engine.one(self._claim_head, (bound, now, floor))
                    if head is None:
                        return None
                    item_id, attempts, max_attempts = head
                    if max_attempts is None or attempts < max_attempts:
                        return engine.one(self._claim_id, (token, now + lease_ms, item_id))
                    engine.execute(self._bury, (now, item_id))
                    engine.execute(self._delete_id, (item_id,))

    def _floor(self, queue: bytes, now: int) -> int:
        """A time below which ``queue`` has no item: the lower bound of every claim's and pop's index range.

        Dead rows. On PostgreSQL an acked (deleted) or claimed (updated)
        item leaves a dead row version behind, and its entry in the claim
        index stays at the head of the queue's range until VACUUM removes
        it, which it cannot while any session holds an older snapshot (a
        transaction left idle, a long report). A claim scanning from the
        head steps over every one of them: 200,000 settled items made a
        claim 60x slower. The floor skips them: it is the earliest item's
        ``available_at`` (``HEAD_TIME``, which does step over them, once)
        less ``FLOOR_SLACK_MS``, kept per queue for ``FLOOR_REFRESH``
        seconds. No item can appear below it meanwhile, except through
        clocks (every later push, nack, lease or renew is due at its own
        "now" or later; writers' clocks differ by less than the slack: on
        PostgreSQL all use the server's) or a push committed more than the
        slack after its own "now" (a long transaction): such an item waits
        for the next refresh (at most ``FLOOR_REFRESH`` seconds) instead of
        going first. A store clock that went back refreshes at once.

        Only where the engine declares ``dead_index_entries``; elsewhere
        (SQLite) claims and pops bind ``NO_FLOOR`` without calling this.
        """
        known = self._floors.get(queue)
        tick = time.monotonic()
        if known is not None:
            floor, refreshed = known
            if tick - refreshed < FLOOR_REFRESH and now >= floor + FLOOR_SLACK_MS:
                return floor
        row = self._engine.one(self._head_time, (queue,))
        floor = (now if row is None else min(int(row[0]), now)) - FLOOR_SLACK_MS
        if len(self._floors) >= _FLOORS_KEPT:
            self._floors.clear()  # many queues: forget them all (each refreshes on its next claim)
        self._floors[queue] = (floor, tick)
        return floor

    def _wait_deadline(self, wait: float | None) -> float | None:
        """The ``time.monotonic()`` a ``wait=`` ends at; ``None``: no waiting (``None`` or 0)."""
        if wait is None:
            return None
        seconds = as_wait(wait)
        if not seconds:
            return None
        if self._engine.in_transaction():
            fail("wait= would hold the transaction's write lock while sleeping; claim outside the transaction")
        return time.monotonic() + seconds

    def _watch(self, name: str | bytes) -> ChangeWatch:
        """The watch a waiter on queue ``name`` registers before its first try (``engines.watch``).

        Woken by pushes, nacks and released claims of that queue (their
        ``notify``); where the engine cannot hear other processes' (SQLite,
        a PostgreSQL pooler) it polls every ``POLL_INTERVAL`` seconds. Also
        the async facade's (``durastate.aio``).
        """
        return self._engine.watch(self._known(name)[2], POLL_INTERVAL)

    def _look_again_at(self, name: str | bytes, watch: ChangeWatch, deadline: float) -> float:
        """After an empty try: the ``time.monotonic()`` to try again at unless woken before (at most ``deadline``).

        An item can become available without a notification: a delayed
        push or a nack's delay comes due, a lease runs out, or the pusher's
        clock ran ahead of this waiter's. A ``reliable`` watch (which would
        otherwise sleep until ``deadline``) looks again when the queue's
        head comes due (``HEAD_TIME``, one statement), or after
        ``POLL_INTERVAL`` if the head is due already but was not taken
        (another transaction holds it). A polling watch answers every
        ``POLL_INTERVAL`` anyway. Also the async facade's.
        """
        if not watch.reliable:
            return deadline
        engine = self._engine
        row = engine.one(self._head_time, (self._known(name)[0],))
        if row is None:
            return deadline
        due_in = (int(row[0]) - engine.now_ms()) / 1000
        return min(deadline, time.monotonic() + (due_in + DUE_MARGIN if due_in > 0 else POLL_INTERVAL))

    # -- settling a claim ------------------------------------------------------

    def _ack_then_claim(self, done: Claim, name: str | bytes, lease: float = 30.0) -> tuple[bool, Claim | None]:
        """Ack ``done``, then claim the next item of queue ``name`` for ``lease`` seconds; (acked, the claim or None).

        For an integration that settles a finished item as it asks for the
        next one (huey's worker): one statement on an engine with
        ``write_ctes`` (PostgreSQL: one round trip, no transaction), one
        ``Engine.batch`` elsewhere; the ack never commits after the claim.
        ``acked`` is False when the lease of ``done`` was lost and its item
        is still queued (claimed again, or due again); an item already gone
        counts as acked, so a retry after a lost connection, which finds the
        item its first attempt deleted gone, answers the same. Where the
        claim is not made by the one statement (the queue is empty, or its
        head used up its attempts: buried first), the ack has committed
        before the claim's own statements run. Never waits for an item.
        ``lease`` may be passed by position (huey's dequeue does: a keyword
        costs every call its parsing).
        """
        if type(done) is not Claim or done._queues is not self:
            fail_type("done", "a Claim of this store's queues", done)
        try:
            queue, bound, _ = self._names[name]  # _known, inline (as in claim)
        except (KeyError, TypeError):
            queue, bound, _ = self._named(name)
        lease_ms = _duration_ms("lease", lease, False)
        engine = self._engine
        token = self._blob(next(_tokens, None) or _lease_token())  # as in _claim_once
        now = engine.now_ms()
        floor = self._floor(queue, now) if self._floored else NO_FLOOR
        until = now + lease_ms
        statement = self._ack_then_claim_sql
        if statement is None:
            # The ack, then the claim, as one batch (SQLite: one transaction in one call of the engine).
            count, row = engine.batch(
                ((self._ack_sql, (done.id, done._token)), (self._claim, (token, until, bound, now, floor)))
            )
            # Whether the item is gone (deleted here, or already), not raising for a lost lease: read after
            # the commit, and only when the ack deleted nothing (its lease lost, or the item gone before).
            acked = count == 1 or engine.one(self._item_present, (done.id,)) is None
        else:
            answer = engine.one(statement, (done.id, done._token, token, until, bound, now, floor, done.id, done.id))
            assert answer is not None  # the statement answers one row, claimed or not
            acked = bool(answer[0])
            row = None if answer[1] is None else answer[1:]
        if row is None:
            row = self._claim_past_exhausted(queue, bound, token, now, floor, lease_ms)
            if row is None:
                return acked, None
        return acked, Claim(self, queue, row[0], row[1], row[2], token, until, lease_ms)

    def _nack(self, claim: Claim, delay: float, error: str | None) -> None:
        delay_ms = _duration_ms("delay", delay, True)
        if error is not None:
            if not isinstance(error, str):
                fail_type("error", "a str or None", error)
            # As events.fail_attempt checks its error: no NUL (PostgreSQL text cannot hold one), no lone
            # surrogates, at most max_value_size bytes; the same refusal on every engine.
            error = text("error", error, limit=self.max_value_size)
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            row = engine.one(self._nack_sql, (now + delay_ms, error, claim.id, claim._token))
            if row is None:
                raise Conflict(f"nack of {claim!r}: lease lost (the item was claimed again or is gone)")
            attempts, max_attempts = row
            if max_attempts is not None and attempts >= max_attempts:
                # Their answers decide nothing: they go out with the commit.
                engine.send(self._bury, (now, claim.id))
                engine.send(self._delete_id, (claim.id,))
            # Inside the transaction: sent at its commit, and no second
            # transaction (on PostgreSQL a NOTIFY of its own is one more
            # BEGIN/COMMIT round trip).
            engine.notify(channel(claim.queue))

    def _release(self, claim: Claim) -> None:
        """Make ``claim``'s item due again now and wake the queue's waiters (its holder will never settle it).

        For an async ``claim`` whose caller was cancelled before it received
        the item (``durastate.aio``): as a lease run out, the delivery
        counts as an attempt, but nothing waits for the lease.
        """
        engine = self._engine
        with engine.transaction():
            engine.execute(self._renew_sql, (engine.now_ms(), claim.id, claim._token))
            engine.notify(channel(claim.queue))  # sent at the commit: a waiter looks again at once

    def _renew(self, claim: Claim, lease: float | None) -> None:
        lease_ms = claim._lease_ms if lease is None else _duration_ms("lease", lease, False)
        until = self._engine.now_ms() + lease_ms
        if self._engine.execute(self._renew_sql, (until, claim.id, claim._token)) != 1:
            raise Conflict(f"renew of {claim!r}: lease lost (the item was claimed again or is gone)")
        claim.lease_expires_at = until / 1000.0
