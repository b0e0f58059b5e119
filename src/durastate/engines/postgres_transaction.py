"""The PostgreSQL engine's transactions: pipelined, so a transaction costs the round trips it must wait for.

A transaction runs in psycopg's pipeline mode on the connection the thread
keeps from ``BEGIN`` to its end. Nothing is awaited that nobody reads:
``BEGIN`` and the transaction's attempt row go out with its first
statement that needs an answer; ``executemany``, ``Engine.send`` (writes
whose answers decide nothing), ``NOTIFY`` and ``SAVEPOINT`` go out with
the next one, or with ``COMMIT``, whose sync answers them all. A
transaction of writes nobody waits for (``put_many``, a multi-item
``push``) is one round trip; each statement whose answer is read costs one
more. A failure of an unawaited statement dooms the transaction as any
failure does, and is raised by the next statement that waits, by the
release of the savepoint it ran under (which then rolls back to it,
containing it as if it had raised inside the block), or by the commit.

Two more statements go out unawaited (``engines.deferred``): a sequence
value (``next_value_later``: its answer is read at the next flush or the
commit, and the statement also writes it into the transaction's attempt
row) and a requirement (``require``: ``REQUIREMENT``, which fails the
transaction when it does not hold). So a transaction that needs a fresh
sequence value and a check, such as a records commit, is still one flight.

Until the first answer nothing of the transaction can have committed, so
everything sent until then (its *first flight*) is recorded, and sent again
on another connection when the first answer finds the connection's node
failed (a pooled connection the server had closed, a node that went
read-only): the retry a ``BEGIN`` of its own used to get. A one-flight
transaction (all of it unawaited, ``COMMIT`` included) whose connection
drops is sent again unless its attempt row shows it committed; a value
it took unawaited comes from that row, or from the answer of the flight
sent again.

Citus. A transaction that wrote shards on two workers commits in two
phases (PREPARE on the workers, the coordinator's commit, COMMIT
PREPARED). If the connection drops after the coordinator committed and
before COMMIT PREPARED reached every worker, the attempt row (in a
shard's schema, on a worker) stays invisible until Citus's 2PC recovery
commits it: "not found" then does not mean "not applied". So in the Citus
mode a lost COMMIT whose attempt row is not found is only taken as not
applied (raised as retryable, or its one flight sent again) when the
coordinator's ``pg_dist_transaction`` holds no two-phase commit of the
lost backend's awaiting recovery; otherwise its outcome is unknown until
recovery ran, and that is what is raised (``IN_DOUBT``). A row left by an
earlier, completed two-phase commit of the same backend (recovery removes
them every ``citus.recover_2pc_interval``) also makes it unknown: the
check errs on the side of not applying a write twice.

Migrations (``lock``) run one statement at a time, outside pipeline mode.
``PostgresEngine`` mixes this class in; the connection handling
(``_retrying``, ``_borrow``, ...) is the engine's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from ..errors import DurastateError, OutcomeUnknown, StoreClosed, StoreUnavailable
from .base import (
    WRITE_ROWS,
    EngineBase,
    Kind,
    Later,
    Params,
    PerThread,
    RequirementFailed,
    TransactionFields,
    aborted_error,
)
from .loop import WouldWait
from .postgres_after_commit import commit_then_notify, notify_on
from .postgres_attempts import NEXT_VALUE_RECORDED, NOT_APPLIED, UNRECORDED_ATTEMPT, attempt_id, fetch_result
from .postgres_citus_sql import HAS_2PC_LOG, PENDING_2PC
from .postgres_errors import connection_lost, translate_postgres_error
from .postgres_pool import MANY, RUN, SEND, VALUE, PooledConnection, resend_flight

if TYPE_CHECKING:
    from .postgres_loop import CommitOnLoop

__all__ = ["Commit", "PipelinedTransactions", "ThreadState"]

_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class ThreadState(TransactionFields):
    """One thread's open transaction on a PostgreSQL engine (``TransactionFields`` plus its connection and pipeline)."""

    conn: PooledConnection | None = None
    # The open transaction's attempt id: pending until its first write.
    attempt_pending: bool = False
    attempt: bytes | None = None
    # The transaction runs in pipeline mode (see "Round trips" in the module docstring).
    piped: bool = False
    # Statements sent in the pipeline whose outcome nobody has waited for yet.
    unflushed: bool = False
    # Everything sent before the transaction's first answered round trip
    # (see ``PostgresEngine._flush``); None after it.
    flight: list[tuple[int, str, Any]] | None = None
    # The statement that finds that attempt's row (the table of the engine
    # that wrote it: a shard view's, see ``citus``).
    attempt_lookup: str | None = None
    # Citus mode: channels to NOTIFY once the transaction has committed.
    after_commit: frozenset[str] = frozenset()
    # A ``next_value_later`` whose answer has not been read yet, and the
    # block depth it was sent at (a rollback to a savepoint above undoes it).
    pending_value: Later | None = None
    pending_depth: int = 0
    # The messages of the ``require`` statements sent since the last answer.
    requirements: tuple[str, ...] = ()
    # ``run_without_waiting`` (postgres_loop): on an event loop's thread, every wait raises ``WouldWait``;
    # a committed transaction leaves its COMMIT's answer in ``loop_commit``, a rolled-back one its connection
    # in ``abandoned`` (its ROLLBACK waits: run by a worker).
    no_wait: bool = False
    loop_commit: CommitOnLoop | None = None
    abandoned: list[PooledConnection] | None = None


class Commit:
    """A transaction at its COMMIT: its connection and what settles a COMMIT whose answer failed (``_tx_commit``)."""

    __slots__ = ("attempt", "channels", "conn", "flight", "lookup", "pending", "pid", "piped", "requirements")

    def __init__(
        self,
        conn: PooledConnection,
        attempt: bytes | None,
        piped: bool,
        flight: list[tuple[int, str, Any]] | None,
        lookup: str,
        channels: frozenset[str],
        pending: Later | None,
        requirements: tuple[str, ...],
        pid: int,
    ) -> None:
        self.conn = conn
        self.attempt = attempt
        self.piped = piped
        self.flight = flight
        self.lookup = lookup
        self.channels = channels
        self.pending = pending
        self.requirements = requirements
        # Citus: the backend whose two-phase commits to look for if the COMMIT is lost (module docstring).
        self.pid = pid


# ``require`` in a pipelined transaction: the server fails the statement (and
# so the transaction) when the requirement does not hold. Division by zero
# (SQLSTATE 22012), because PostgreSQL has no function that raises and a
# function of durastate's own would be a schema change; the divisor is not a
# constant (it depends on the rows read), so the planner cannot fold it and
# fail every run. No other durastate statement divides: a 22012 while
# requirements are unanswered is theirs (``_requirement_failed``).
REQUIREMENT = "SELECT 1 / CASE WHEN ({sql}) THEN 1 ELSE 0 END"
_DIVISION_BY_ZERO = "22012"


IN_DOUBT = (
    "connection lost during the COMMIT of a transaction that Citus commits in two phases: it is committed"
    " or not as Citus's 2PC recovery finds it (recover_prepared_transactions(), run every"
    " citus.recover_2pc_interval); until then its outcome is unknown: read what it wrote before retrying it"
)


def two_phase_pending(conn: psycopg.Connection[Any], pid: int) -> bool:
    """Whether the coordinator holds a committed two-phase commit of backend ``pid`` awaiting recovery."""
    row = conn.execute(HAS_2PC_LOG).fetchone()
    if row is None or not row[0]:
        return False  # not a Citus coordinator: no two-phase commit
    row = conn.execute(PENDING_2PC, (str(pid),)).fetchone()
    return bool(row and row[0])


class PipelinedTransactions(EngineBase):
    """Statements inside a transaction and the transaction primitives (see the module docstring)."""

    _tls: PerThread[ThreadState]

    _attempt_insert: str
    _attempt_result: str
    # NEXT_VALUE_RECORDED compiled, and REQUIREMENT around each required statement (_compile_transaction_statements).
    _next_value_recorded: dict[bool, str]
    _requirements: dict[str, str]
    pooler: bool
    citus: bool
    # attempt_retention > 0: writes record attempt rows (PostgresEngine._compile_own_statements).
    _recording: bool

    def _compile_transaction_statements(self) -> None:
        self._next_value_recorded = {first: self.sql(WRITE_ROWS(text)) for first, text in NEXT_VALUE_RECORDED.items()}
        self._requirements = {}

    # The engine's own (PostgresEngine).
    def _run(self, sql: str, params: Params, fetch: int) -> Any:
        raise NotImplementedError

    def _retrying(self, run: Any, replay: Any, began: float | None = None, keep: bool = False) -> Any:
        raise NotImplementedError

    def _unusable(self, exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
        raise NotImplementedError

    def _discard(self, conn: PooledConnection) -> None:
        raise NotImplementedError

    def _give_back(self, conn: PooledConnection) -> None:
        raise NotImplementedError

    def _attempt_found(self, lookup: str, attempt: bytes) -> bool:
        raise NotImplementedError

    def _read_only_refusal(self) -> DurastateError:
        raise NotImplementedError

    def _outcome_unknown(self, error: psycopg.Error, what: str = "write") -> OutcomeUnknown:
        """A write (or a write transaction's COMMIT) whose answer was lost on a store keeping no attempt rows."""
        return OutcomeUnknown(
            f"{self.url}: connection lost before the {what}'s answer came ({error.__class__.__name__}): it may"
            " or may not have been applied, and this store keeps no attempt rows to tell (attempt_retention=0);"
            " read what it would have changed before retrying it"
        )

    # postgres_loop.LoopCommits's (no-wait mode).
    def _idle_connection_begun(self, state: ThreadState, piped: bool, first: str) -> PooledConnection | None:
        raise NotImplementedError

    def _commit_later(self, state: ThreadState) -> None:
        raise NotImplementedError

    def _run_in_transaction(
        self, state: ThreadState, conn: PooledConnection, sql: str, params: Params, fetch: int
    ) -> Any:
        self._check_open_transaction(state)
        if self.read_only and self.pooler and getattr(sql, "kind", None) is not Kind.READ:
            raise self._doom(self._read_only_refusal())
        try:
            if state.attempt_pending and getattr(sql, "kind", None) is not Kind.READ:
                self._record_transaction_attempt(state, conn)
            if not state.piped:
                return fetch_result(conn.run(sql, params), fetch)
            # One round trip for this statement and everything sent before it.
            if state.flight is not None:
                state.flight.append((RUN, sql, params))
            conn.run(sql, params)
            return fetch_result(self._flush(state).statement_cursor, fetch)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None

    def _pipe(self, state: ThreadState, how: int, sql: str, params: Any, *, unflushed: bool = True) -> None:
        """Send ``sql`` in the transaction's pipeline without waiting (``how``: SEND, MANY or VALUE)."""
        conn = state.conn
        assert conn is not None
        if state.flight is not None:
            state.flight.append((how, sql, params))
        if unflushed:
            state.unflushed = True
        if how == MANY:
            conn.send_many(sql, params)
        elif how == VALUE:
            conn.send_value(sql, params)
        else:
            conn.send(sql, params)

    def _flush(self, state: ThreadState) -> PooledConnection:
        """Wait for everything sent so far; the connection it was answered on.

        Until a transaction's first round trip is answered nothing of it
        can have committed, so when that round trip finds the connection's
        node failed (the pooled connection had died, the node went
        read-only), the whole flight is sent again on another connection,
        retried as a read is: the transaction goes on there.
        """
        conn = state.conn
        assert conn is not None
        if state.no_wait:
            raise WouldWait
        try:
            conn.flush()
        except psycopg.Error as exc:
            flight = state.flight
            if flight is None or not self._unusable(exc, conn):
                raise
            conn.abandon_pipeline()
            self._discard(conn)
            self._give_back(conn)
            state.conn = None  # the transaction has no connection until one answers
            try:
                conn = self._retrying(lambda c: resend_flight(c, flight), None, time.monotonic(), keep=True)
            except DurastateError as error:
                if isinstance(error, StoreUnavailable):  # no node took the flight: the server saw no COMMIT
                    error = StoreUnavailable(
                        f"{error} (inside a transaction: nothing was applied, the transaction can be retried)"
                    )
                raise self._doom(error) from None
            state.conn = conn
        state.flight = None
        state.unflushed = False
        state.requirements = ()
        if state.pending_value is not None:
            _resolve(state.pending_value, conn.value_row())
            state.pending_value = None
        return conn

    def require(self, sql: str, params: Params = (), message: str = "a requirement of the transaction") -> None:
        """``Engine.require``: in a transaction, sent with the next round trip (``REQUIREMENT``)."""
        state = self._tls.state
        if state.conn is None or not state.piped:
            super().require(sql, params, message)
            return
        self._check_open_transaction(state)
        wrapped = self._requirement_sql(sql)
        try:
            self._pipe(state, SEND, wrapped, params)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None
        state.requirements = (*state.requirements, message)

    def _requirement_sql(self, sql: str) -> str:
        wrapped = self._requirements.get(sql)
        if wrapped is None:
            # Compiled already: its placeholders and escapes are psycopg's; the text is the facet's, never a caller's.
            wrapped = self._requirements[sql] = REQUIREMENT.format(sql=sql)
        return wrapped

    def _requirement_failed(self, requirements: tuple[str, ...], exc: BaseException) -> RequirementFailed | None:
        """The ``RequirementFailed`` that ``exc`` is, when requirements were unanswered (see ``REQUIREMENT``)."""
        if requirements and getattr(exc, "sqlstate", None) == _DIVISION_BY_ZERO:
            return RequirementFailed(f"{self.url}: requirement failed: {' or '.join(dict.fromkeys(requirements))}")
        return None

    def next_value_later(self, name: str) -> Later:
        """``Engine.next_value_later``: in a pipelined write transaction, sent with the next round trip.

        The statement also writes the value into the transaction's attempt
        row (``NEXT_VALUE_RECORDED``), so a COMMIT whose connection dropped,
        found committed by that row, still answers the value. One value is
        awaited at a time: a second call while one is unanswered waits for
        the first (one round trip). Citus mode: read at once (the attempt
        row there is a shard's, looked up through its own view); so with
        ``attempt_retention=0`` (no attempt row to write it into).
        """
        state = self._tls.state
        conn = state.conn
        if (
            conn is None
            or not state.piped
            or self.citus
            or not self._recording
            or (state.attempt is None and not state.attempt_pending)
        ):
            return super().next_value_later(name)  # outside a pipelined write transaction: at once
        self._check_open_transaction(state)
        if self.read_only and self.pooler:
            raise self._doom(self._read_only_refusal())
        if state.pending_value is not None:
            self._wait_for_answers(state)
        later = Later(wait=lambda: self._await_value(later))
        statements = self._next_value_recorded
        try:
            if state.attempt_pending:
                now = self.now_ms()
                state.attempt = attempt_id(now)
                state.attempt_pending = False
                state.attempt_lookup = self._attempt_result
                self._pipe(state, VALUE, statements[True], (name, state.attempt, now))
            else:
                self._pipe(state, VALUE, statements[False], (name, state.attempt))
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None
        state.pending_value, state.pending_depth = later, state.depth
        return later

    def _await_value(self, later: Later) -> None:
        """``Later.value`` read before its answer came: wait for it now, in its transaction."""
        state = self._tls.state
        conn = state.conn
        if state.pending_value is not later or conn is None or not state.depth:
            return  # not this thread's, or its transaction is over: it stays unanswered
        self._wait_for_answers(state)

    def _wait_for_answers(self, state: ThreadState) -> None:
        """One round trip for everything sent so far (its failure dooms the transaction)."""
        self._check_open_transaction(state)
        try:
            self._flush(state)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None

    def send(self, sql: str, params: Params = ()) -> None:
        """``Engine.send``: in a transaction, the statement goes out with the next round trip.

        Its failure dooms the transaction and is raised by the next
        statement that waits for an answer, or by the commit.
        """
        state = self._tls.state
        conn = state.conn
        if conn is None or not state.piped:
            self._run(sql, params, 0)
            return
        self._check_open_transaction(state)
        if self.read_only and self.pooler and getattr(sql, "kind", None) is not Kind.READ:
            raise self._doom(self._read_only_refusal())
        try:
            if state.attempt_pending and getattr(sql, "kind", None) is not Kind.READ:
                self._record_transaction_attempt(state, conn)
            self._pipe(state, SEND, sql, params)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None

    def _check_open_transaction(self, state: ThreadState) -> None:
        """Refuse a statement in a doomed transaction, or after ``close()``."""
        if state.doomed is not None:
            raise aborted_error(state.doomed)
        if self._closed:
            raise self._doom(StoreClosed(f"{self.url}: store closed inside the transaction"))

    def _failed(self, state: ThreadState, exc: psycopg.Error) -> DurastateError:
        """Translate ``exc``; inside a transaction, also doom it (see ``base.Transaction``).

        A connection whose node failed is closed here, so the rollback gives
        the pool a closed connection to replace instead of one that still
        reaches a dead or demoted node (``_discard``).
        """
        if state.no_wait:
            raise WouldWait  # sent on the loop's thread: whatever failed, a worker runs the call again
        if state.doomed is not None and isinstance(exc, pg_errors.InFailedSqlTransaction):
            return aborted_error(state.doomed)
        failed = self._requirement_failed(state.requirements, exc)
        if failed is not None:
            state.requirements = ()
            return self._doom(failed)
        if state.conn is not None and self._unusable(exc, state.conn):
            self._discard(state.conn)
            # The server never saw a COMMIT: it rolled the transaction back (or refused its write).
            return self._doom(
                StoreUnavailable(
                    f"{self.url}: {' '.join(str(exc).split())} (inside a transaction: nothing was applied,"
                    " the transaction can be retried)"
                )
            )
        return self._doom(translate_postgres_error(exc, self.url, read_only=self.read_only))

    def _record_transaction_attempt(self, state: ThreadState, conn: PooledConnection) -> None:
        """First write of a transaction: note its attempt id inside it.

        If the connection drops during COMMIT, the row's presence tells
        whether the transaction committed (see ``_tx_commit``).
        """
        state.attempt_pending = False
        if not self._recording:  # it wrote; nothing will record whether its COMMIT took effect
            state.attempt = UNRECORDED_ATTEMPT
            return
        now = self.now_ms()
        state.attempt = attempt_id(now)
        state.attempt_lookup = self._attempt_result
        if state.piped:
            self._pipe(state, SEND, self._attempt_insert, (state.attempt, now), unflushed=False)
        else:
            conn.run(self._attempt_insert, (state.attempt, now))

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        """Many rows in one pipeline. Outside a transaction, atomically."""
        if self.read_only and self.pooler:
            raise self._read_only_refusal()
        batch = list(rows)
        if self._tls.state.conn is None:
            with self.transaction():
                self.executemany(sql, batch)
            return
        state = self._tls.state
        conn = state.conn
        assert conn is not None
        self._check_open_transaction(state)
        try:
            if state.attempt_pending:
                self._record_transaction_attempt(state, conn)
            if state.piped:
                self._pipe(state, MANY, sql, batch)
            else:
                with conn.cursor() as cur:
                    cur.executemany(sql, batch)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None

    # -- transaction primitives (the state machine is base.Transaction) -------

    def _tx_begin(self, read: bool, lock: str | None) -> None:
        """``BEGIN`` on a borrowed connection the thread keeps until the end.

        ``lock`` (migrations): an advisory lock per (schema, name), so
        concurrent openers of the same tables migrate one after the other.
        Its key (one bigint) is not ``engine.lock``'s (two ints): it is the
        key every earlier version takes, so old and new processes opening
        one database still migrate one at a time.
        """
        state = self._tls.state
        # Migrations (lock) run DDL one statement at a time; every other
        # transaction is pipelined: BEGIN goes out with its first statement.
        piped = lock is None
        first = _BEGIN_READ if read else "BEGIN"
        conn = self._idle_connection_begun(state, piped, first) if state.no_wait else None

        def begin(conn: PooledConnection) -> PooledConnection:
            try:
                if piped:
                    conn.start_pipeline()
                    conn.send(first)
                    return conn
                conn.run(first)
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || %s))", (lock,))
            except psycopg.Error:
                conn.abandon_pipeline()
                try:
                    conn.run("ROLLBACK")
                except psycopg.Error:
                    pass  # a broken connection: the pool replaces it
                raise
            return conn

        if conn is None:
            # Nothing has happened yet: a BEGIN whose node failed is retried like a read.
            conn = self._retrying(begin, None, keep=True)
        state.flight = [(SEND, first, None)] if piped else None
        state.conn = conn
        state.attempt = None
        state.piped = piped
        state.unflushed = False
        # Migrations run before the attempt table exists; they need no
        # commit-ambiguity check anyway (they are idempotent by version).
        state.attempt_pending = not read and lock is None

    def _take_connection(self) -> tuple[PooledConnection | None, bytes | None]:
        state = self._tls.state
        conn = state.conn
        attempt = state.attempt
        state.conn, state.attempt, state.attempt_pending, state.flight = None, None, False, None
        state.piped = state.unflushed = False
        state.pending_value, state.requirements = None, ()
        return conn, attempt

    def _take_commit(self, state: ThreadState) -> Commit:
        """The open transaction's ``Commit``; the thread is out of it (its connection taken)."""
        commit = Commit(
            state.conn,  # type: ignore[arg-type]  # a transaction without one is doomed: it rolls back instead
            state.attempt,
            state.piped,
            state.flight,
            state.attempt_lookup or self._attempt_result,
            state.after_commit,
            state.pending_value,
            state.requirements,
            0,
        )
        state.attempt_lookup, state.after_commit = None, frozenset()
        conn, _attempt = self._take_connection()
        assert conn is not None
        if self.citus and commit.attempt is not None:
            commit.pid = conn.info.backend_pid
        return commit

    def _tx_commit(self) -> None:
        state = self._tls.state
        if state.no_wait:
            self._commit_later(state)  # the answer is collected on the loop (postgres_loop)
            return
        commit = self._take_commit(state)
        conn = commit.conn
        try:
            if commit.piped:
                # COMMIT goes out with whatever was sent since the last round
                # trip; the sync answers them all (the first failure raises,
                # and the server then skipped the COMMIT: rolled back below).
                channels = commit.channels
                if channels:  # Citus mode: sent behind the COMMIT, so _commit_done sends nothing more
                    commit.channels = frozenset()
                    commit_then_notify(conn, channels)
                else:
                    conn.send("COMMIT")
                    conn.end_pipeline()
                if commit.pending is not None:
                    _resolve(commit.pending, conn.value_row())
            else:
                conn.run("COMMIT")
        except psycopg.Error as commit_error:
            self._commit_failed(commit, commit_error)
            return
        self._commit_done(commit)

    def _commit_done(self, commit: Commit) -> None:
        """A COMMIT answered: the connection back to the pool, after Citus's notifications if a non-pipelined
        COMMIT (a migration's) left any (a pipelined one sent them: ``commit_then_notify``)."""
        if commit.channels:
            notify_on(commit.conn, commit.channels)
        self._give_back(commit.conn)

    def _commit_failed(self, commit: Commit, commit_error: psycopg.Error) -> None:
        """A COMMIT whose answer failed: return once it is known committed (found, or sent again), else raise."""
        conn, attempt, flight, pending, lookup, pid = (
            commit.conn,
            commit.attempt,
            commit.flight,
            commit.pending,
            commit.lookup,
            commit.pid,
        )
        unusable = self._unusable(commit_error, conn)
        if unusable:
            self._discard(conn)
        _discard_transaction(self, conn)
        if attempt is UNRECORDED_ATTEMPT and (unusable or connection_lost(commit_error)):
            # It wrote, and no attempt row can say whether the COMMIT took effect: not sent again.
            raise self._outcome_unknown(commit_error, "transaction's COMMIT") from None
        if flight is not None and unusable:
            # The whole transaction was this one flight: unless its attempt
            # row says it committed, send it all again on another connection.
            flight.append((SEND, "COMMIT", None))
            committed = None if attempt is None else lambda c: self._commit_outcome(c, lookup, attempt, pid, pending)
            self._retrying(lambda c: _resend_transaction(c, flight, pending), committed, time.monotonic())
            return  # Citus mode: its notifications are lost with the connection (waiters poll)
        if attempt is not None and connection_lost(commit_error):
            # The COMMIT may or may not have reached the server. The
            # attempt row, written inside the transaction, says which
            # (and holds a value the transaction took unawaited).
            row = self._retrying(lambda c: c.run(lookup, (attempt,)).fetchone(), None)
            if row is not None:
                if pending is not None:
                    _resolve(pending, (row[0],))
                return  # its notifications are lost with the connection: waiters poll
            if pid and self._retrying(lambda c: two_phase_pending(c, pid), None):
                raise StoreUnavailable(f"{self.url}: {IN_DOUBT}") from None
            raise StoreUnavailable(
                f"{self.url}: connection lost before the transaction committed; "
                "nothing was applied, the transaction can be retried"
            ) from None
        if commit.piped and not connection_lost(commit_error):
            failed = self._requirement_failed(commit.requirements, commit_error)
            if failed is not None:
                raise failed from None
            where = f"{self.url}: transaction rolled back: a statement inside it failed"
            raise translate_postgres_error(commit_error, where, read_only=self.read_only) from None
        raise translate_postgres_error(commit_error, f"{self.url}: commit", read_only=self.read_only) from None

    def _commit_outcome(
        self, conn: PooledConnection, lookup: str, attempt: bytes, pid: int, pending: Later | None
    ) -> Any:
        """``replay`` of a lost one-flight transaction's attempt; in doubt on Citus, raised (module docstring).

        Found, it answers ``pending`` (a ``next_value_later`` of the
        transaction) with the value the attempt row recorded.
        """
        row = conn.run(lookup, (attempt,)).fetchone()
        if row is None:
            if pid and two_phase_pending(conn, pid):
                raise StoreUnavailable(f"{self.url}: {IN_DOUBT}")
            return NOT_APPLIED
        if pending is not None:
            _resolve(pending, (row[0],))
        return True

    def _tx_rollback(self) -> None:
        state = self._tls.state
        state.attempt_lookup, state.after_commit = None, frozenset()
        conn, _attempt = self._take_connection()
        if conn is None:  # lost while its first flight was sent again (_flush)
            return
        if state.no_wait:  # its ROLLBACK waits: a worker runs it (run_without_waiting)
            state.abandoned = [*(state.abandoned or ()), conn]
            return
        _discard_transaction(self, conn)

    def _tx_savepoint(self, name: str) -> None:
        self._savepoint_statement(f"SAVEPOINT {name}")

    def _tx_release(self, name: str) -> None:
        self._savepoint_statement(f"RELEASE SAVEPOINT {name}", release=name)

    def _savepoint_statement(self, statement: str, *, release: str | None = None) -> None:
        state = self._tls.state
        self._check_open_transaction(state)
        conn = state.conn
        assert conn is not None
        try:
            if not state.piped:
                conn.run(statement)
                return
            if release and state.unflushed:
                # A failure sent unawaited inside the block surfaces here:
                # the block rolls back to its savepoint, which contains it
                # (as if the statement had raised inside the block).
                requirements = state.requirements
                try:
                    self._flush(state)
                except psycopg.Error as exc:
                    if connection_lost(exc):
                        raise
                    self._tx_rollback_to(release)
                    raise self._requirement_failed(requirements, exc) or translate_postgres_error(
                        exc, self.url
                    ) from None
            self._pipe(state, SEND, statement, None, unflushed=False)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None

    def _tx_rollback_to(self, name: str) -> None:
        state = self._tls.state
        conn = state.conn
        if conn is None:  # lost while its first flight was sent again: the transaction is doomed
            return
        if state.no_wait:
            raise WouldWait  # its sync waits
        state.requirements = ()
        pending = state.pending_value
        if pending is not None and state.pending_depth > state.depth:
            pending.fail("the value's statement was rolled back with the block that sent it")
            state.pending_value = pending = None
        try:
            if state.piped:
                state.flight = None  # answered: no longer a first flight to send again
                try:
                    conn.sync()  # after a failure the server skips everything up to a sync
                except psycopg.Error:
                    pass  # the failure being rolled back (or the connection: next statement says)
                if pending is not None:  # sent before the block, so answered before its failure
                    state.pending_value = None
                    try:
                        _resolve(pending, conn.value_row())
                    except psycopg.Error:
                        pending.fail("the value's answer was lost with a failure after it")
                conn.send(f"ROLLBACK TO SAVEPOINT {name}")
                conn.send(f"RELEASE SAVEPOINT {name}")
                state.unflushed = True
            else:
                conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                conn.execute(f"RELEASE SAVEPOINT {name}")
        except psycopg.Error:
            pass  # a broken connection: the outer block fails on its next statement


def _resolve(pending: Later, row: Any) -> None:
    """Answer ``pending`` with the value in ``row`` (a ``NEXT_VALUE_RECORDED`` row, or an attempt row's result)."""
    if row is None or row[0] is None:
        pending.fail("no sequence has that name (no migration created it)")
    else:
        pending.set(int(row[0]))


def _resend_transaction(conn: PooledConnection, flight: list[tuple[int, str, Any]], pending: Later | None) -> None:
    """A lost one-flight transaction sent again on ``conn``, to its COMMIT; answers ``pending`` from there."""
    resend_flight(conn, flight, end=True)
    if pending is not None:
        _resolve(pending, conn.value_row())


def _discard_transaction(engine: PipelinedTransactions, conn: PooledConnection) -> None:
    """Roll back (best effort) and return the connection to the pool."""
    conn.abandon_pipeline()
    try:
        conn.run("ROLLBACK")
    except psycopg.Error:
        pass  # a broken connection: the pool discards it on return
    engine._give_back(conn)
