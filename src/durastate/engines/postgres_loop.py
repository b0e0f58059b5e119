"""PostgreSQL transactions sent from an event loop's thread, their COMMIT's answer collected there.

Why: ``durastate.aio`` runs a PostgreSQL call on a worker thread, and each
call hands the GIL to and from the loop's thread at the worker's wake-up
and at every wait for the server. While the loop's thread is busy in an
application's own Python (a LangGraph step), each hand-off can wait up to
the interpreter's switch interval (5 ms). A pure write transaction needs
no answer before its COMMIT (pipeline mode sends without waiting), so it
can be sent from the loop's thread and only the COMMIT's answer waited
for, from the loop's reader callback: no worker, no hand-off.

``run_without_waiting(fn, ...)`` (``Engine``; the async runner's
``call_repeatable``) runs ``fn`` on the calling thread, an event loop's,
with the thread's state in no-wait mode. Every statement is sent; the
first thing that would wait raises ``WouldWait`` before the transaction's
COMMIT was sent: a statement whose answer is read, a flush (a savepoint's
release after unawaited statements, a second ``next_value_later``), a
rollback to a savepoint, a statement outside a transaction, a migration's
lock, a send that failed, no idle pooled connection (``getconn_idle``: the
loop never waits for the pool or connects), a COMMIT that cannot be left
to the loop (Citus's notifications after it, a value taken unawaited, a
shortened lock wait). The attempt is then abandoned (its connection's
ROLLBACK run by a worker, through ``later``) and the caller runs ``fn``
again on a worker: only a function that may run twice takes this path.

A COMMIT sent this way is a ``CommitOnLoop``: its answer collected by a
``LoopCollection`` over ``PooledConnection.end_pipeline_gen``, the same
generator a worker drives with ``Connection.wait`` (``end_pipeline``), so
the protocol is written once. A failed answer goes to a worker with the
sync commit's failure branch unchanged (``_commit_failed``: a lost reply
looked up by the attempt row, a lost one-flight transaction sent again).
Not ``psycopg.waiting.wait_async``: its generator is suspended inside a
coroutine, so a collection whose caller was cancelled, or whose loop
ended, could only be finished by that coroutine; ``LoopCollection`` keeps
the generator's state and advances it from the loop's callbacks (no task,
no future per wait), and ``finish_here()`` drives the rest on any thread.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import psycopg
from psycopg.abc import PQGen
from psycopg.waiting import Ready, Wait

from .loop import Settle, WouldWait
from .postgres_pool import LifoPool, PooledConnection
from .postgres_transaction import Commit, PipelinedTransactions, ThreadState, _discard_transaction

__all__ = ["LOOP_COMMITS", "CommitOnLoop", "LoopCollection", "LoopCommits"]

# The collection waits with poll(2) when it is not on the loop (a zero timeout first, as psycopg does).
LOOP_COMMITS = hasattr(select, "poll")

_READ, _WRITE = int(Wait.R), int(Wait.W)


def _poll(fileno: int, wait: int, timeout_ms: int) -> int:
    """Which of ``wait``'s events ``fileno`` is ready for within ``timeout_ms`` (-1: until one is)."""
    poller = select.poll()
    poller.register(fileno, (select.POLLIN if wait & _READ else 0) | (select.POLLOUT if wait & _WRITE else 0))
    ready = 0
    for _fd, events in poller.poll(timeout_ms):
        if events & ~select.POLLOUT:  # readable, or an error or hang-up the read will report
            ready |= Ready.R
        if events & select.POLLOUT:
            ready |= Ready.W
    return ready


class LoopCollection:
    """Drives a psycopg generator from an event loop's reader and writer callbacks; ``done(error)`` at its end.

    ``finish_here()`` claims what is left and drives it on the calling
    thread, blocking (a loop that will not run again). Exactly one of the
    two ends it; ``done`` is called once, outside the lock.
    """

    __slots__ = ("_done", "_fileno", "_gen", "_lock", "_loop", "_over", "_wait")

    def __init__(self, gen: PQGen[None], fileno: int, done: Callable[[BaseException | None], None]) -> None:
        self._gen = gen
        self._fileno = fileno
        self._done = done
        self._lock = threading.Lock()
        self._loop: Any = None
        self._over = False
        self._wait = 0  # the events the generator waits for now (registered with the loop)

    def start(self, loop: Any) -> None:
        """On ``loop``'s thread: advance as far as the socket allows, then wait in ``loop``."""
        self._loop = loop
        with self._lock:
            ended, error = self._advance(None)
        if ended:
            self._done(error)

    def _on_ready(self, ready: int) -> None:
        with self._lock:
            if self._over:  # claimed by finish_here meanwhile
                return
            self._unregister()
            ended, error = self._advance(ready)
        if ended:
            self._done(error)

    def _advance(self, ready: int | None) -> tuple[bool, BaseException | None]:
        """Under the lock: send ``ready`` in, go on while the socket is ready, register the next wait."""
        gen = self._gen
        try:
            wait = next(gen) if ready is None else gen.send(ready)
            while now := _poll(self._fileno, wait, 0):
                wait = gen.send(now)
        except StopIteration:
            self._over = True
            return True, None
        except BaseException as exc:  # the connection's failure: the commit's failure branch decides
            self._over = True
            return True, exc
        self._wait = wait
        loop, fileno = self._loop, self._fileno
        if wait & _READ:
            loop.add_reader(fileno, self._on_ready, Ready.R)
        if wait & _WRITE:
            loop.add_writer(fileno, self._on_ready, Ready.W)
        return False, None

    def _unregister(self) -> None:
        loop, wait = self._loop, self._wait
        self._wait = 0
        if wait & _READ:
            loop.remove_reader(self._fileno)
        if wait & _WRITE:
            loop.remove_writer(self._fileno)

    def finish_here(self) -> None:
        """Drive what is left on this thread, blocking; nothing if the loop's callbacks ended it already."""
        with self._lock:
            if self._over:
                return
            self._over = True
            wait = self._wait
            self._unregister()  # a closed loop ignores it
        error: BaseException | None = None
        try:
            while True:
                wait = self._gen.send(_poll(self._fileno, wait, -1))
        except StopIteration:
            pass
        except BaseException as exc:
            error = exc
        self._done(error)


class CommitOnLoop:
    """A transaction's COMMIT sent from an event loop's thread, its answer collected there (``loop.LoopCommit``).

    ``error``: sending the COMMIT failed already; the failure branch then
    decides at once (``collect`` hands it straight to ``done``).
    """

    __slots__ = ("_collection", "_commit", "_done", "_engine", "_error")

    def __init__(self, engine: LoopCommits, commit: Commit, error: psycopg.Error | None) -> None:
        self._engine = engine
        self._commit = commit
        self._error = error
        self._collection: LoopCollection | None = None
        self._done: Callable[[Settle | None], None] | None = None

    def collect(self, loop: Any, done: Callable[[Settle | None], None]) -> None:
        self._done = done
        if self._error is not None:
            self._collected(self._error)
            return
        conn = self._commit.conn
        collection = self._collection = LoopCollection(conn.end_pipeline_gen(), conn.pgconn.socket, self._collected)
        collection.start(loop)

    def finish_here(self) -> None:
        collection = self._collection
        if collection is not None:
            collection.finish_here()

    def collect_here(self) -> None:
        """The answer waited for on this thread, as a sync commit does (its failure branch raises here)."""
        engine, commit = self._engine, self._commit
        error = self._error
        if error is None:
            try:
                commit.conn.end_pipeline()
            except psycopg.Error as exc:
                error = exc
        if error is not None:
            engine._commit_failed(commit, error)
            return
        engine._commit_done(commit)

    def _collected(self, error: BaseException | None) -> None:
        done = self._done
        assert done is not None
        engine, commit = self._engine, self._commit
        if error is None:
            engine._commit_done(commit)  # the connection back to the pool: never waits
            done(None)
            return
        if not isinstance(error, psycopg.Error):
            error = psycopg.OperationalError(f"collecting the COMMIT's answer failed: {error!r}")
        done(partial(engine._commit_failed, commit, error))


class LoopCommits(PipelinedTransactions):
    """``run_without_waiting`` and the no-wait mode's begin and commit (see the module docstring)."""

    _pool: LifoPool | None

    def run_without_waiting(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        later: Callable[[Callable[[], object]], None],
    ) -> tuple[Any, CommitOnLoop | None]:
        """``Engine.run_without_waiting`` (see the module docstring).

        A transaction already open on this thread (a sync call's): ``fn``
        would be a savepoint of it, which the thread must wait for:
        ``WouldWait`` at once. ``fn`` going on after its COMMIT went out
        (a second transaction, a statement outside one) first waits for
        that COMMIT's answer here, then runs as a sync call on this thread
        (no caller does: ``call_repeatable`` runs one transaction).
        """
        state = self._tls.state
        if state.depth or state.no_wait:
            raise WouldWait
        state.no_wait = True
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            commit = state.loop_commit
            if commit is not None:  # fn raised after its COMMIT went out: its answer, here
                state.loop_commit = None
                commit.collect_here()
            raise
        finally:
            state.no_wait = False
            abandoned, state.abandoned = state.abandoned, None
            for conn in abandoned or ():
                later(partial(_discard_transaction, self, conn))
        commit, state.loop_commit = state.loop_commit, None
        return result, commit

    def _wait_after_no_wait(self) -> None:
        """In no-wait mode, something would wait: ``WouldWait``, or, after the COMMIT went out, its answer here."""
        state = self._tls.state
        commit = state.loop_commit
        if commit is None:
            raise WouldWait
        state.loop_commit = None
        state.no_wait = False  # fn goes on as a sync call on this thread
        commit.collect_here()

    def _idle_connection_begun(self, state: ThreadState, piped: bool, first: str) -> PooledConnection | None:
        """No-wait ``_tx_begin``: an idle pooled connection with ``first`` sent; None once no-wait mode is left."""
        if state.loop_commit is not None:
            self._wait_after_no_wait()
            return None
        pool = self._pool
        conn = None if pool is None or not piped else pool.getconn_idle()
        if conn is None:  # a migration's lock (waits), no pool yet, or none idle: never wait for one here
            raise WouldWait
        try:
            conn.start_pipeline()
            conn.send(first)
        except psycopg.Error:
            state.abandoned = [*(state.abandoned or ()), conn]
            raise WouldWait from None
        return conn

    def _commit_later(self, state: ThreadState) -> None:
        """No-wait ``_tx_commit``: send COMMIT and leave its answer to the loop (``state.loop_commit``).

        A COMMIT whose answer is not all it waits for is not left to it:
        Citus's notifications (sent behind it: ``commit_then_notify``), a value taken
        unawaited (read after it), a shortened lock wait (its reset is a
        round trip), a second COMMIT (``fn`` went on after the first).
        """
        conn = state.conn
        if (
            conn is None
            or not state.piped
            or state.after_commit
            or state.pending_value is not None
            or conn.lock_wait_shortened
            or state.loop_commit is not None
        ):
            self._tx_rollback()  # no-wait: its connection to ``abandoned``
            raise WouldWait
        commit = self._take_commit(state)
        error: psycopg.Error | None = None
        try:
            commit.conn.send("COMMIT")
        except psycopg.Error as exc:  # as a sync commit's: the failure branch decides (on a worker)
            error = exc
        state.loop_commit = CommitOnLoop(self, commit, error)
