"""The PostgreSQL engine's connection pool: psycopg_pool's, the most recently returned idle connection first.

psycopg_pool keeps its idle connections in a queue, first in, first out: a
thread borrowing one connection per statement on a pool of 16 goes round
all 16, so every statement lands on a connection (and a server backend)
whose caches went cold while the other 15 had their turn. That cost a
single thread 0.3-0.6x of its speed on a pool of 1 (bench/postgres.py,
"pool rotation"). ``LifoPool`` takes the newest idle connection instead,
so a thread that returns its connection and borrows again gets the same
one back whenever nobody took it meanwhile.

It keeps no connection of its own: every idle connection is still in the
pool, where any thread can take it, the pool's ``max_idle`` shrinking
closes the one unused longest (the oldest end of the queue, where the
connections a quieter workload no longer needs now gather), and
``close()`` closes them all.

psycopg_pool has no option for the order, so this reorders its private
queue (``_pool``, a deque: taken from the left, returned to the right) in
the one private method that takes from it, under the pool's lock. A
psycopg_pool without them still works, first in, first out
(``tests/postgres`` checks the order, so such a version is noticed).

The engine borrows a connection for every statement outside a
transaction, so the pool's own ``getconn``/``putconn`` (2.6 us of client
CPU a pair: logging calls, statistics, a retry loop for a check callback
the engine never sets, two lock round trips) were a measurable part of a
6-9 us engine overhead per statement (single thread, over raw psycopg). ``LifoPool`` answers the common
case itself: an idle connection is there (``getconn``), or a connection
comes back idle, unexpired, to an open pool nobody waits on (``putconn``);
each is one pass under the pool's lock doing exactly what psycopg_pool does
in that case. Everything else (waiting, growing, a connection returned
broken or inside a transaction, expiry, a closed pool) goes to
psycopg_pool's own methods. The fast paths need the private names listed in
``_FAST_NEEDS``; a psycopg_pool without one of them, or a release not in
``FAST_VERSIONS``, gets psycopg_pool's methods throughout
(``tests/postgres`` checks the fast paths are on for those releases and off
for others).

Failover. psycopg_pool refills after a failed connect at 1, 2, 4, 8 s...
(its ``AttemptWithBackoff``): a primary that died took every pooled
connection with it, the first reconnects fail while the standby is being
promoted, and the pool's next try came up to 8 s after the new primary
was ready (16 s of no writes against the cluster's own 8 s, issue 23).
``LifoPool`` reconnects after ``REFILL_FIRST_DELAY`` seconds, growing by
``REFILL_BACKOFF`` up to ``REFILL_MAX_DELAY``: on the order of one connect
attempt a second per missing connection while a server is away, and a
new primary is found within about a second of taking writes.
``discard(conn)`` closes a connection whose node failed and drains the
pool once per failure: every other idle connection of that generation
reaches the same dead or demoted node, and a caller should not find that
out one connection (and one timeout) at a time.

Opening a store connects once before the pool starts (the engine's probe,
``postgres_connect``); ``give_first`` hands that connection to the pool,
whose first connect takes it instead of opening a second server session
(a backend's start costs the server ~5 ms of CPU and the client a round
trip or more per open). Taken only while fresh and idle; closed by
``close()`` or a ``discard()`` if never taken.

``PooledConnection`` keeps one cursor for the engine's statements: a new
cursor per statement (``Connection.execute``) costs about 3 us of client
CPU of the 15-18 us a prepared one-row read costs psycopg itself
(bench/RESULTS.md, the PostgreSQL per-call section).
"""

from __future__ import annotations

from collections import deque
from time import monotonic
from typing import Any

import psycopg
import psycopg_pool
from psycopg import generators
from psycopg.abc import PQGen
from psycopg.pq import TransactionStatus
from psycopg_pool import base as _pool_base

__all__ = ["MANY", "RUN", "SEND", "VALUE", "LifoPool", "PooledConnection", "resend_flight"]

# How a statement of a recorded flight went out (``resend_flight``): PooledConnection.send, .send_many, .run,
# .send_value.
SEND, MANY, RUN, VALUE = 0, 1, 2, 3

REFILL_FIRST_DELAY = 0.1  # seconds before the first reconnect after a failed connect
REFILL_BACKOFF = 1.5
REFILL_MAX_DELAY = 1.0
# psycopg_pool's backoff state for one connection's reconnects (3.2: ConnectionAttempt).
_Attempt: Any = getattr(_pool_base, "AttemptWithBackoff", None) or getattr(_pool_base, "ConnectionAttempt", None)

_TAKE = "_get_ready_connection"  # psycopg_pool >= 3.2: takes an idle connection, under the pool's lock
# Private state the fast paths read and write (psycopg_pool 3.2-3.3).
_FAST_NEEDS = (
    "_pool",
    "_lock",
    "_closed",
    "_check",
    "_reset",
    "_waiting",
    "_drained_at",
    "_nconns_min",
    "_stats",
    "_REQUESTS_NUM",
    "_pool_full_event",
    "_min_size",
)
# What taking the engine's probe as the first connection (LifoPool.give_first) overrides and calls.
_HANDOFF_NEEDS = ("_connect", "_set_connection_expiry_date", "_stats", "_CONNECTIONS_NUM")
# Seconds a handed-over probe connection stays worth taking: a pool that connects lazily (min_connections=0)
# may first connect much later, when a fresh connection costs less than finding an idle one dead.
FIRST_FRESH = 5.0
_IDLE = TransactionStatus.IDLE
# The releases whose private state the fast paths were read against (3.3.3
# tested): a newer minor release may keep the names and change what they
# mean, so it gets psycopg_pool's own methods until checked and added here.
FAST_VERSIONS = ("3.2.", "3.3.")


class PooledConnection(psycopg.Connection[Any]):
    """A pooled connection that runs every engine statement on one cursor of its own.

    Safe because a borrowed connection runs one statement at a time, for one
    thread, and every result is fetched before the next statement.

    In pipeline mode (``start_pipeline`` .. ``end_pipeline``, the engine's
    transactions) statements whose results nobody reads go out on a second
    cursor (``send``, ``send_many``) without waiting; ``run`` then
    ``flush`` waits for everything sent so far in one round trip. Two
    cursors because psycopg attaches each pipelined result to the cursor
    that sent it as the result arrives: a statement sent on the statement
    cursor after a fire-and-forget one could otherwise be read with the
    earlier one's result. A third (``send_value``) carries a statement whose
    one row is read after the flush or the pipeline's end (a sequence value
    sent unawaited: ``Engine.next_value_later``), one at a time.
    """

    _statement_cursor: psycopg.Cursor[Any] | None = None
    _send_cursor: psycopg.Cursor[Any] | None = None
    _value_cursor: psycopg.Cursor[Any] | None = None
    # Borrowed on an event loop's thread, with a short lock_timeout until given back (PostgresEngine).
    lock_wait_shortened = False

    def run(self, query: str, params: Any = None) -> psycopg.Cursor[Any]:
        """``Connection.execute`` on this connection's statement cursor (in a pipeline: sent, not awaited)."""
        cur = self._statement_cursor
        if cur is None:
            cur = self._statement_cursor = self.cursor()
        return cur.execute(query, params)

    @property
    def statement_cursor(self) -> psycopg.Cursor[Any]:
        """The cursor ``run`` ran its last statement on."""
        cur = self._statement_cursor
        assert cur is not None
        return cur

    # -- pipeline mode (see the class docstring) ---------------------------------

    def start_pipeline(self) -> None:
        """Enter pipeline mode: from here statements are sent without waiting for their results."""
        pipeline = psycopg.Pipeline(self)
        self._pipeline = pipeline
        pipeline.__enter__()

    def send(self, query: str, params: Any = None) -> None:
        """Send a statement whose result is not wanted (pipeline mode); a failure surfaces at the next flush."""
        cur = self._send_cursor
        if cur is None:
            cur = self._send_cursor = self.cursor()
        cur.execute(query, params)

    def send_many(self, query: str, rows: list[Any]) -> None:
        """``executemany`` riding the pipeline: sent, not awaited."""
        cur = self._send_cursor
        if cur is None:
            cur = self._send_cursor = self.cursor()
        cur.executemany(query, rows)

    def send_value(self, query: str, params: Any = None) -> None:
        """Send a statement whose row ``value_row`` reads once answered (pipeline mode); one at a time."""
        cur = self._value_cursor
        if cur is None:
            cur = self._value_cursor = self.cursor()
        cur.execute(query, params)

    def send_watched(self, query: str, params: Any = None) -> psycopg.Cursor[Any]:
        """Send a statement on a new cursor and return it (pipeline mode), to tell afterwards whether it ran.

        When the pipeline's end raises, the failure may be a later
        statement's: the returned cursor's ``statusmessage`` is this
        statement's tag if it succeeded, ``None`` if it failed or the server
        skipped it (a new cursor, so never an earlier statement's tag).
        """
        cur = self.cursor()
        cur.execute(query, params)
        return cur

    def value_row(self) -> Any:
        """The row of the last ``send_value`` statement (after a flush or ``end_pipeline``); None for none."""
        cur = self._value_cursor
        assert cur is not None
        return cur.fetchone()

    def flush(self) -> None:
        """Wait for the results of everything sent so far (one round trip); raise the first failure."""
        pipeline = self._pipeline
        assert pipeline is not None
        with self.lock:
            try:
                self.wait(pipeline._fetch_gen(flush=True))
            finally:
                self._maintain()

    def sync(self) -> None:
        """Sync the pipeline: after a failure the server skips everything up to a sync; raise the failure.

        Not ``Pipeline.sync``: it can wait forever after a large statement
        (``_sent_whole_gen``).
        """
        pipeline = self._pipeline
        assert pipeline is not None
        with self.lock:
            try:
                self.wait(self._sync_gen(pipeline))
            finally:
                self._maintain()

    def _sync_gen(self, pipeline: psycopg.Pipeline) -> PQGen[None]:
        pipeline._enqueue_sync()
        yield from pipeline._communicate_gen()
        yield from self._sent_whole_gen()
        yield from pipeline._fetch_gen(flush=False)

    def end_pipeline(self) -> None:
        """Sync, collect every result and leave pipeline mode; raise the first failure (``end_pipeline_gen``)."""
        if self._pipeline is None:
            return
        with self.lock:
            self.wait(self.end_pipeline_gen())

    def end_pipeline_gen(self) -> PQGen[None]:
        """``end_pipeline``'s waits as one psycopg generator, for whichever thread drives it.

        A worker drives it with ``Connection.wait`` (``end_pipeline``); an
        event loop from its reader and writer callbacks (``postgres_loop``).
        Whatever happens, the connection leaves pipeline mode or is closed
        (the pool discards a closed connection), so the pool never hands
        out a connection still in a pipeline.
        """
        pipeline = self._pipeline
        if pipeline is None:
            return
        try:
            try:
                yield from self._sync_and_collect_gen(pipeline)
            finally:
                pipeline._exit(None)
        finally:
            self._pipeline = None
            if self.pgconn.pipeline_status:
                self.close()
            elif not self.closed and self._prepared._to_flush:
                yield from self._prepared.maintain_gen(self)  # see _maintain

    def _maintain(self) -> None:
        """Send the prepared-statement maintenance psycopg queued while it read pipelined results, now.

        psycopg forgets its prepared statements when it reads a ROLLBACK (TO
        SAVEPOINT), DROP or ALTER result and queues a ``DEALLOCATE ALL`` for
        the server, which it sends after the next statement it runs. When
        the result was read by a flush rather than by running a statement,
        that next statement is prepared first (under a new name, after the
        forgetting) and the ``DEALLOCATE ALL`` then drops it on the server:
        its next run failed with "prepared statement ... does not exist".
        Sending the maintenance right after the read keeps the order right.
        """
        prepared = self._prepared
        if prepared._to_flush:
            self.wait(prepared.maintain_gen(self))

    def _sync_and_collect_gen(self, pipeline: psycopg.Pipeline) -> PQGen[None]:
        """Send a Sync and collect every result; raise the first failure.

        Not ``Pipeline.__exit__``: it sends a Flush after the Sync, and a
        server that read a message after its last Sync never arms
        ``idle_session_timeout`` for the idle session. Every result is
        collected even after a failure (leaving pipeline mode needs it), and
        the failure raised is the first one, not the "pipeline aborted" of
        the statements the server then skipped.
        """
        first: psycopg.Error | None = None
        pipeline._enqueue_sync()
        try:
            yield from pipeline._communicate_gen()
            yield from self._sent_whole_gen()
        except psycopg.Error as exc:
            first = exc
        try:
            yield from pipeline._fetch_gen(flush=False)
        except psycopg.Error as exc:
            first = first or exc
        if first is not None:
            raise first

    def _sent_whole_gen(self) -> PQGen[None]:
        """Send what libpq still holds of the pipeline's messages, all of it, reading meanwhile.

        psycopg's ``pipeline_communicate`` stops once its last command is
        handed to libpq, whose flush on a non-blocking connection sends
        only what the socket takes: of a statement of a few MB (a large
        value) the rest stays in libpq's buffer. Waiting for results then
        waits forever, the server waiting for the rest of the statement
        (psycopg's own ``Pipeline.sync`` does: 3.3.9; its exit was fixed
        in psycopg#722). ``generators.send`` flushes until nothing is
        left, reading what the server sends meanwhile so neither side
        blocks on a full socket buffer.
        """
        yield from generators.send(self.pgconn)

    def abandon_pipeline(self) -> None:
        """``end_pipeline``, its failure ignored (the transaction is being rolled back anyway)."""
        try:
            self.end_pipeline()
        except psycopg.Error:
            pass


class LifoPool(psycopg_pool.ConnectionPool[PooledConnection]):
    """``psycopg_pool.ConnectionPool`` that hands out its most recently returned idle connection first."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        super().__init__(conninfo, connection_class=PooledConnection, **kwargs)
        self.fast = (
            psycopg_pool.__version__.startswith(FAST_VERSIONS)
            and all(hasattr(self, name) for name in _FAST_NEEDS)
            and type(getattr(self, "_pool", None)) is deque
        )
        # The probe connection handed over (give_first): at most one, taken by the first _connect.
        self._first: list[tuple[PooledConnection, float]] = []
        self.handoff = all(hasattr(self, name) for name in _HANDOFF_NEEDS)

    if _Attempt is not None and hasattr(psycopg_pool.ConnectionPool, "_add_connection"):

        def _add_connection(self, attempt: Any, growing: bool = False) -> None:
            """psycopg_pool's, with ``_RefillAttempt``'s shorter backoff for a new series of reconnects."""
            if attempt is None:
                attempt = _RefillAttempt(timeout=self.reconnect_timeout)
            super()._add_connection(attempt, growing)

    def _connect(self, timeout: float | None = None) -> PooledConnection:
        """The engine's probe connection the first time (``give_first``), if still fresh; else psycopg_pool's."""
        first = self._take_first()
        if first is None:
            return super()._connect(timeout)
        self._stats[self._CONNECTIONS_NUM] += 1
        first._pool = self
        self._set_connection_expiry_date(first)  # its _created_at: now, after any drain that closed the stash
        return first

    def give_first(self, conn: PooledConnection) -> None:
        """Hand the pool a connection already made and configured (the engine's probe) as its first one.

        The pool's first connect takes it instead of connecting (one server
        session fewer per store opened), if it is idle, open and younger
        than ``FIRST_FRESH`` seconds; otherwise it is closed and the pool
        connects as usual. A pool that never connects closes it at
        ``close()`` or ``discard()``. Without the private names it needs
        (``_HANDOFF_NEEDS``) the pool does not take it: it is closed at once.
        """
        if not self.handoff:
            conn.close()
            return
        self._first.append((conn, monotonic()))

    def _take_first(self) -> PooledConnection | None:
        try:
            conn, given_at = self._first.pop()  # one taker: list.pop is atomic, a second caller gets IndexError
        except IndexError:
            return None
        if conn.closed or conn.pgconn.transaction_status != _IDLE or monotonic() - given_at > FIRST_FRESH:
            conn.close()
            return None
        return conn

    def _close_first(self) -> None:
        conn = self._take_first()
        if conn is not None:
            conn.close()

    def close(self, timeout: float = 5.0) -> None:
        """psycopg_pool's ``close``, and the first connection closed if the pool never took it."""
        self._close_first()
        super().close(timeout)

    def discard(self, conn: PooledConnection) -> None:
        """Close ``conn`` (its node failed); drain the pool if ``conn`` is from its current generation.

        The caller still gives ``conn`` back (``putconn``), which replaces it.
        Connections made after a drain are a later generation: a failure of
        one of those drains again, a second failure of the same one does not.
        """
        created = getattr(conn, "_created_at", None)
        conn.close()
        self._close_first()  # made before the failure, to the same node
        drained = getattr(self, "_drained_at", None)
        if created is None or drained is None or created > drained:
            try:
                self.drain()
            except psycopg_pool.PoolClosed:
                pass

    if hasattr(psycopg_pool.ConnectionPool, _TAKE):

        def _get_ready_connection(self, timeout: float | None) -> PooledConnection | None:
            idle = getattr(self, "_pool", None)
            if type(idle) is deque and len(idle) > 1:
                idle.rotate(1)  # the newest (right end) to the left end, where the pool takes from
            conn: PooledConnection | None = super()._get_ready_connection(timeout)
            return conn

    def getconn(self, timeout: float | None = None) -> PooledConnection:
        """The newest idle connection, taken in one pass under the lock; else psycopg_pool's ``getconn``."""
        conn = self.getconn_idle()
        if conn is not None:
            return conn
        return super().getconn(timeout)

    def getconn_idle(self) -> PooledConnection | None:
        """The newest idle connection if one is there (``getconn``'s fast path); None rather than wait or connect.

        For a caller that must not block (an event loop's thread): None
        also when the fast paths are off.
        """
        if not self.fast or self._check is not None:
            return None
        with self._lock:
            idle = self._pool
            if not idle or self._closed:
                return None
            conn: PooledConnection = idle.pop()  # the newest
            if len(idle) < self._nconns_min:
                self._nconns_min = len(idle)  # what max_idle shrinking reads
            self._stats[self._REQUESTS_NUM] += 1
        conn._pool = self  # as psycopg_pool marks a connection it hands out
        return conn

    def putconn(self, conn: PooledConnection) -> None:
        """Back to the newest end of the idle queue in one pass; anything unusual to psycopg_pool's ``putconn``."""
        if (
            self.fast
            and getattr(conn, "_pool", None) is self
            and self._reset is None
            and conn.pgconn.transaction_status == _IDLE
            and conn._created_at > self._drained_at
            and conn._expire_at > monotonic()
        ):
            with self._lock:
                if not self._closed and not self._waiting:
                    conn._pool = None  # psycopg_pool unmarks connections while idle (no reference loop)
                    self._pool.append(conn)
                    event = self._pool_full_event
                    if event is not None and len(self._pool) >= self._min_size:
                        event.set()
                    return
        super().putconn(conn)


if _Attempt is not None:

    class _RefillAttempt(_Attempt):  # type: ignore[misc]
        """psycopg_pool's reconnect backoff, from ``REFILL_FIRST_DELAY`` up to ``REFILL_MAX_DELAY`` (see the module
        docstring)."""

        INITIAL_DELAY = REFILL_FIRST_DELAY
        DELAY_BACKOFF = REFILL_BACKOFF
        delay: float

        def update_delay(self, now: float) -> None:
            super().update_delay(now)
            self.delay = min(self.delay, REFILL_MAX_DELAY)


def resend_flight(conn: PooledConnection, flight: list[tuple[int, str, Any]], *, end: bool = False) -> PooledConnection:
    """Send a transaction's recorded first flight again on ``conn``, in a new pipeline, and wait for it.

    ``end``: the flight ends with COMMIT: leave pipeline mode. Returns
    ``conn``; on failure ``conn`` is out of pipeline mode (or closed).
    """
    conn.start_pipeline()
    try:
        for how, sql, params in flight:
            if how == MANY:
                conn.send_many(sql, params)
            elif how == RUN:
                conn.run(sql, params)
            elif how == VALUE:
                conn.send_value(sql, params)
            else:
                conn.send(sql, params)
        if end:
            conn.end_pipeline()
        else:
            conn.flush()
    except psycopg.Error:
        conn.abandon_pipeline()
        raise
    return conn
