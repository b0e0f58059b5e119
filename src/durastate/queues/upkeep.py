"""Inspection, dead letters and housekeeping of the queues facet (``Upkeep``, a base of ``Queues``).

What operators, inspectors and maintenance run, apart from the work itself
(``facet``: push, claim, pop and settling a claim): counts and backlog,
the ready items, dead letters (listing, re-driving, deleting, expiring),
clearing a queue, listing queues and paging through a queue's items.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._listing import check_limit, distinct_params, distinct_sql, merge_distinct
from .._retention import as_age_ms, trim_oldest
from .._validate import INT64_MAX, as_int64, as_limit, as_list, as_name, bounded_int, fail, fail_type, shown
from ..engines.base import READ, ByCount, RequirementFailed
from ..errors import Conflict, NotFound
from .names import channel, queue_name
from .statements import (
    BACKLOG,
    CLEAR,
    DEAD_DELETE_THROUGH,
    DEAD_OLDEST,
    DEAD_PAGE,
    DELETE_DEAD_ALL,
    PEEK_READY,
    REDRIVE_ALL,
    STATS,
    dead_ids_found_sql,
    dead_ids_held_sql,
    delete_dead_ids_sql,
    redrive_ids_sql,
)

if TYPE_CHECKING:
    from ..engines.base import SQL, Engine, Statement


# Ids per statement of a redrive or delete by ids: one parameter each, well under both engines' limits.
ID_CHUNK = 128


@dataclass(frozen=True)
class QueueStats:
    """How many items of one queue are in each state right now."""

    ready: int  # claimable now
    in_flight: int  # claimed, lease running
    delayed: int  # pushed with a delay or nacked with one, not yet due
    dead: int  # in the dead letters


@dataclass(frozen=True)
class QueueBacklog:
    """What waits in one queue (``Queues.backlog``); times: seconds since the epoch.

    ``ready`` counts claimable items (at most the ``limit`` asked for:
    ``capped`` says it was reached); ``expired_leases``: of those, items
    claimed and never acked or nacked before their lease ran out (their
    consumer died or hangs); ``oldest_ready_at``: since when the
    longest-waiting one has been claimable (``None``: nothing ready);
    ``dead``: the dead-letter count (exact).
    """

    ready: int
    expired_leases: int
    oldest_ready_at: float | None
    dead: int
    capped: bool


@dataclass(frozen=True)
class DeadLetter:
    """An item that used up its attempts (``redrive`` puts it back)."""

    id: int
    payload: bytes
    attempts: int
    last_error: str | None
    created_at: float  # seconds since the epoch, when first pushed
    died_at: float


class Upkeep:
    """Inspection, dead letters and housekeeping; ``Queues`` runs ``_init_upkeep`` when it starts."""

    _engine: Engine

    def _init_upkeep(self, sql: Callable[[Statement], SQL]) -> None:
        self._clear = sql(CLEAR)
        self._stats = sql(STATS)
        self._backlog = sql(BACKLOG)
        self._dead_page = sql(DEAD_PAGE)
        self._redrive_all = sql(REDRIVE_ALL)
        self._delete_dead_all = sql(DELETE_DEAD_ALL)
        # By id count (1..ID_CHUNK), compiled at the first call with that count.
        self._dead_ids_held = ByCount(lambda n: sql(dead_ids_held_sql(n)))
        self._dead_ids_found = ByCount(lambda n: sql(dead_ids_found_sql(n)))
        self._redrive_ids = ByCount(lambda n: sql(redrive_ids_sql(n)))
        self._delete_dead_ids = ByCount(lambda n: sql(delete_dead_ids_sql(n)))
        self._dead_oldest = sql(DEAD_OLDEST)
        self._dead_delete_through = sql(DEAD_DELETE_THROUGH)

    # -- housekeeping ----------------------------------------------------------

    def clear(self, name: str | bytes) -> int:
        """Delete every item of the queue, claimed or not (not the dead letters)."""
        return self._engine.execute(self._clear, (queue_name(name),))

    def stats(self, name: str | bytes) -> QueueStats:
        """Counts of ready, in-flight, delayed and dead items, read consistently."""
        queue = queue_name(name)
        engine = self._engine
        now = engine.now_ms()
        row = engine.one(self._stats, (now, now, now, queue, queue))
        assert row is not None  # an aggregate always answers one row
        return QueueStats(ready=int(row[0]), in_flight=int(row[1]), delayed=int(row[2]), dead=int(row[3]))

    def backlog(self, name: str | bytes, *, limit: int = 10_000) -> QueueBacklog:
        """How far behind the consumers of the queue are: see ``QueueBacklog``.

        Reads at most ``limit`` (1..10000000) ready items, on the claim index
        and without their payloads, so polling it costs the same however
        long the queue grows; ``stats`` counts everything exactly.
        """
        queue = queue_name(name)
        limit = bounded_int("limit", limit, 1, 10_000_000)
        engine = self._engine
        row = engine.one(self._backlog, (queue, queue, engine.now_ms(), limit))
        assert row is not None  # an aggregate always answers one row
        ready = int(row[0])
        return QueueBacklog(
            ready=ready,
            expired_leases=int(row[2]),
            oldest_ready_at=None if row[1] is None else row[1] / 1000.0,
            dead=int(row[3]),
            capped=ready >= limit,
        )

    def peek_ready(self, name: str | bytes, *, limit: int | None = 100) -> list[bytes]:
        """Payloads of the next ``limit`` items a claim or pop would take now, in that order.

        Non-destructive and not a reservation: another consumer may take
        them before you do. Items in flight or delayed are not listed; an
        item whose lease ran out is (it is claimable again). ``limit=None``
        lists every available item.
        """
        queue = queue_name(name)
        limit = as_limit("limit", limit)
        engine = self._engine
        # A limit past int64 cannot be bound (and no queue is that long): the same as no limit.
        want = engine.no_limit if limit is None or limit > INT64_MAX else limit
        return [row[0] for row in engine.all(engine.sql(PEEK_READY), (queue, engine.now_ms(), want))]

    def dead_letters(self, name: str | bytes, *, after: int = 0, limit: int | None = 100) -> list[DeadLetter]:
        """Dead letters of the queue with id > ``after``, oldest first."""
        queue = queue_name(name)
        after = as_int64("after", after)
        limit = as_limit("limit", limit)
        rows = self._engine.all(self._dead_page, (queue, after, self._engine.no_limit if limit is None else limit))
        return [
            DeadLetter(
                id=r[0], payload=r[1], attempts=r[2], last_error=r[3], created_at=r[4] / 1000.0, died_at=r[5] / 1000.0
            )
            for r in rows
        ]

    def redrive(self, name: str | bytes, ids: Iterable[int] | None = None) -> int:
        """Move dead letters (all, or those with ``ids``) back to the queue.

        They are due at once with a fresh attempt count. Returns how many
        moved (an id given twice moves once). All or nothing: when an id is
        not a dead letter of this queue (never was, redriven or deleted
        already, another queue's), ``NotFound`` names every such id and
        none of ``ids`` moves.
        """
        queue = queue_name(name)
        if ids is not None:
            return self._by_ids(queue, _distinct_ids(ids), redrive=True)
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            moved = engine.execute(self._redrive_all, (now, queue))
            engine.execute(self._delete_dead_all, (queue,))
            if moved:  # inside: with the COMMIT where the engine sends it itself (Citus mode)
                engine.notify(channel(queue), announced=True)
        return moved

    def expire_dead(self, older_than: float, *, limit: int | None = None) -> int:
        """Drop dead letters of every queue that died more than ``older_than`` seconds ago.

        Oldest first, in bounded batches (each its own short commit), at most
        ``limit`` in all; returns how many went. A dead letter redriven and
        buried again counts from its latest burial.
        """
        cutoff = self._engine.now_ms() - as_age_ms("older_than", older_than)
        limit = as_limit("limit", limit)
        return trim_oldest(self._engine, self._dead_oldest, self._dead_delete_through, cutoff, limit)

    def delete_dead(self, name: str | bytes, ids: Iterable[int] | None = None) -> int:
        """Drop dead letters for good (all, or those with ``ids``); return how many.

        With ``ids``, all or nothing as ``redrive``: when an id is not a
        dead letter of this queue (never was, redriven or deleted already,
        another queue's), ``NotFound`` names every such id and none of
        ``ids`` is deleted; an id given twice counts once.
        """
        queue = queue_name(name)
        engine = self._engine
        if ids is None:
            return engine.execute(self._delete_dead_all, (queue,))
        return self._by_ids(queue, _distinct_ids(ids), redrive=False)

    def _by_ids(self, queue: bytes, wanted: list[int], *, redrive: bool) -> int:
        """Redrive (or delete) the dead letters ``wanted`` of ``queue``, all or none; how many.

        A statement per ``ID_CHUNK`` ids for each step, in one transaction:
        the check that every id is a dead letter of the queue
        (``Engine.require``, which also locks them), the copy back to the
        queue (``redrive``) and the delete, none waiting for its answer: on
        PostgreSQL one round trip whatever the count, where a statement
        awaited per id cost two round trips each. A failed check has rolled
        everything back (the call's block, a savepoint in a caller's); the
        ids that are not dead letters are then read to name them.
        """
        if not wanted:
            return 0
        engine = self._engine
        chunks = [wanted[start : start + ID_CHUNK] for start in range(0, len(wanted), ID_CHUNK)]
        for _ in range(3):
            try:
                with engine.transaction():
                    now = engine.now_ms()
                    for chunk in chunks:
                        n = len(chunk)
                        engine.require(self._dead_ids_held[n], (queue, n, *chunk), "every id is a dead letter")
                        if redrive:
                            engine.send(self._redrive_ids[n], (now, *chunk, *chunk))
                        engine.send(self._delete_dead_ids[n], chunk)
                    if redrive:  # inside: with the COMMIT where the engine sends it itself (Citus mode)
                        engine.notify(channel(queue), announced=True)
                return len(wanted)
            except RequirementFailed:
                found = {
                    int(row[0])
                    for chunk in chunks
                    for row in engine.all(self._dead_ids_found[len(chunk)], chunk)
                    if bytes(row[1]) == queue
                }
                missing = [i for i in wanted if i not in found]
                if missing:
                    raise _not_dead_letters(queue, missing, "redriven" if redrive else "deleted") from None
        # Every id was missing at a check and found right after it, three times over: dead letters of
        # another writer's transaction that keeps being rolled back (the check waits for their locks).
        raise Conflict(f"the dead letters of queue {shown(queue)} changed under every attempt; try again")

    # -- listing (read-only, for inspectors and exports; see durastate._listing) --

    def names(self, *, after: str | bytes | None = None, limit: int = 100) -> list[bytes]:
        """Names of the queues that hold items or dead letters, in bytes order.

        At most ``limit`` (1..10000) names, all greater than ``after``; page on
        by passing the last one back. Not a snapshot.
        """
        bound = None if after is None else as_name("after", after)
        limit = check_limit(limit)
        params = distinct_params((), bound, limit)
        statements = self._list_names[bound is not None]
        return merge_distinct(([bytes(r[0]) for r in self._engine.all(s, params)] for s in statements), limit)

    def peek(self, name: str | bytes, *, after: str | None = None, limit: int = 100) -> list[QueueItem]:
        """Items of the queue (not the dead letters) in delivery order.

        Delivery order is ``(available_at, id)``: ready items first (as
        ``claim`` would take them), then leased and delayed ones by when they
        become claimable. Page on by passing the last item's ``cursor`` as
        ``after``. Reads only: nothing is claimed, leases and attempts are
        untouched; ``state`` is judged on the store's clock now. Not a
        snapshot: an item claimed between pages moves behind the cursor.
        """
        queue = queue_name(name)
        limit = check_limit(limit)
        engine = self._engine
        now = engine.now_ms()
        if after is None:
            rows = engine.all(self._peek_sql[False], (queue, limit))
        else:
            due, item_id = _peek_cursor(after)
            rows = engine.all(self._peek_sql[True], (queue, due, item_id, limit))
        return [
            QueueItem(
                id=int(r[0]),
                payload=bytes(r[1]),
                state="ready" if r[2] <= now else ("leased" if r[6] else "delayed"),
                attempts=int(r[3]),
                max_attempts=None if r[4] is None else int(r[4]),
                last_error=r[5],
                available_at=r[2] / 1000.0,
                created_at=r[7] / 1000.0,
                cursor=f"{int(r[2])}:{int(r[0])}",
                lease_expired=bool(r[6]) and r[2] <= now,
            )
            for r in rows
        ]

    @functools.cached_property
    def _list_names(self) -> dict[bool, list[str]]:
        return {
            a: [self._engine.sql(distinct_sql(t, "queue", after=a)) for t in ("queue", "queue_dead")]
            for a in (False, True)
        }

    @functools.cached_property
    def _peek_sql(self) -> dict[bool, str]:
        return {after: self._engine.sql(PEEK[after]) for after in (False, True)}


def _distinct_ids(ids: Iterable[int]) -> list[int]:
    """``ids`` checked (``ids[]`` int64), each once, in the order first given."""
    return list(dict.fromkeys(as_int64("ids[]", i) for i in as_list("ids", ids)))


def _not_dead_letters(queue: bytes, missing: list[int], verb: str) -> NotFound:
    """The refusal of ``redrive``/``delete_dead`` by ids: every id in ``missing`` named, nothing ``verb``."""
    return NotFound(
        f"no dead letter {', '.join(map(str, missing))} in queue {shown(queue)} (dead_letters() lists them); "
        f"nothing was {verb}"
    )


def _peek_cursor(after: Any) -> tuple[int, int]:
    """``"available_at_ms:id"`` (``QueueItem.cursor``) as its two integers."""
    if not isinstance(after, str):
        fail_type("after", "a cursor string from QueueItem.cursor", after)
    due, sep, item = after.partition(":")
    try:
        if not sep:
            raise ValueError
        return as_int64("after", int(due)), as_int64("after", int(item))
    except ValueError:
        fail(f'after must be a cursor from QueueItem.cursor ("<ms>:<id>"), got {shown(after)}')


# One page of a queue's items in delivery order, on the (queue, available_at,
# id) index the claims use; "is leased" is computed in SQL so the lease token
# itself never leaves the database.
_PEEK_COLUMNS = (
    "SELECT id, payload, available_at, attempts, max_attempts, last_error,"
    " CASE WHEN lease IS NULL THEN 0 ELSE 1 END, created_at FROM {p}queue WHERE queue = ?"
)
PEEK = {
    False: READ(_PEEK_COLUMNS + " ORDER BY available_at, id LIMIT ?"),
    True: READ(_PEEK_COLUMNS + " AND (available_at, id) > (?, ?) ORDER BY available_at, id LIMIT ?"),
}


@dataclass(frozen=True)
class QueueItem:
    """An item as ``Queues.peek`` sees it (times: seconds since the epoch).

    ``state``: ``"ready"`` (claimable now), ``"leased"`` (claimed; the lease
    runs until ``available_at``, when it is claimable again unless acked or
    renewed) or ``"delayed"`` (pushed or nacked with a delay, due at
    ``available_at``).
    """

    id: int
    payload: bytes
    state: str
    attempts: int
    max_attempts: int | None
    last_error: str | None
    available_at: float
    created_at: float
    cursor: str  # pass as ``peek(after=)`` to continue after this item
    # Claimed, never acked or nacked, and its lease ran out: the consumer died
    # or is stuck. ``state`` is then ``"ready"`` (a claim takes it again).
    lease_expired: bool = False
