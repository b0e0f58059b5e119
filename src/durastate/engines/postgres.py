"""The network engine: PostgreSQL through psycopg 3 and psycopg_pool.

Connections come from a pool (``min_connections``..``max_connections``) in
autocommit mode, the most recently returned idle one first
(``postgres_pool``). Outside a transaction every statement borrows a
connection for just that statement, so threads never hold connections
while idle;
inside ``transaction()`` the thread keeps one connection from ``BEGIN`` to
``COMMIT``/``ROLLBACK`` and nested blocks become savepoints, exactly like
the SQLite engine.

Statements are prepared by the server on their first use
(``PREPARE_THRESHOLD`` 0, psycopg's prepared-statement cache) and always run
their generic plan (``plan_cache_mode = force_generic_plan``): facets
compile their texts once, so a hot statement is parsed and planned once per
connection, and the plan that runs is the one the plan tests check
(``durastate.testing.conformance.plans``). Without it the first five runs on
each connection were custom plans, which on a fresh, never-analysed table
of 1e6 rows chose bitmap scans and sorts costing 15-676 ms a call
(bench/RESULTS.md, "Cost at scale").
``executemany`` sends its rows in one pipeline, one round trip.

Durability is the server's: ``durability="normal"`` and ``"full"`` both
leave ``synchronous_commit`` as configured (``on`` by default: a commit is
on disk on the server when the call returns). ``busy_timeout`` becomes the
session's ``lock_timeout``: a statement that waits longer for a row lock
fails with ``StoreUnavailable`` instead of hanging.

Errors are translated by SQLSTATE in ``translate_postgres_error``.

Failover. A statement outside a transaction whose connection was lost, or
whose node cannot take it now (a standby, a node turned read-only, one
shutting down: ``postgres_errors.node_unusable``), is retried on a fresh
connection: the failed one is closed and the pool drained once
(``LifoPool.discard``: its other connections reach the same node), then
tries follow with a growing pause (``RETRY_FIRST_PAUSE`` doubling up to
``RETRY_MAX_PAUSE``) until ``busy_timeout`` (at least
``MIN_RETRY_DEADLINE``) has passed since the call began; then
``StoreUnavailable``. A write is retried under the attempt rules
(``postgres_attempts``): never applied twice. A transaction's ``BEGIN`` is
retried the same way (nothing has happened yet); a failure later inside a
transaction ends it with ``StoreUnavailable`` (nothing was applied,
``_tx_commit`` settles a lost ``COMMIT``) and its connection is discarded
too, so the caller's next call finds the new primary. The pool reconnects
quickly while a server is away (``postgres_pool``).

Fork safety: the pool's connections and worker threads belong to the
process that made them. After ``os.fork()`` the child gets a new pool on
first use; the parent's is left alone (not closed, which would close the
parent's sockets' server sessions).

Waiters. Every waiter (``watch``: queue waits, event streams, sync or
async) is woken through one listening connection per engine, outside the
pool (``postgres_listen``); an idle store sends no statement. Fork: a
child gets its own at its first wait, as it gets its own pool.

Poolers. Behind pgbouncer (or another pooler) in transaction mode each
statement may run on a different server session. The first connect tells
(``postgres_connect.behind_pooler``: the backend pid the pooler announced
is not the server's), and the engine then prepares no statements
(``prepare_threshold=None``), sets no session settings (``lock_timeout``,
``plan_cache_mode``: give them to the role, ``ALTER ROLE ... SET``), waits by
polling instead of ``LISTEN`` (the waiter re-checks every 50 ms), and a
``read_only=True`` store refuses writes itself (by the statements' declared
kinds) instead of setting ``default_transaction_read_only``. A
session-mode pool is detected the same way (a client cannot tell the
modes apart) and treated the same; connect to the server itself to keep
``LISTEN`` and prepared statements.

The engine's other modules, one idea each: ``postgres_connect`` (opening:
the URL, the probe connection, why a connect failed), ``postgres_dialect``
(tokens, key lookups, the announce trigger, catalog queries),
``postgres_errors`` (SQLSTATE to durastate's errors),
``postgres_transaction`` (pipelined transactions: a transaction costs the
round trips it must wait for), ``postgres_attempts``
(the attempt rows that make a retried write apply once), ``postgres_writes``
(the single-write path under those rules, and their pruning) and
``postgres_explain`` (generic plans), ``postgres_listen`` (the
listening connection) and ``postgres_notify`` (``notify``, ``watch``,
``wait_for_change`` over it). Their public names are re-exported here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import psycopg
import psycopg_pool

from .._validate import as_attempt_retention, as_busy_timeout, as_durability, as_pool_sizes
from ..errors import ConfigurationError, InvalidRequest, StoreClosed, StoreUnavailable, WrongType
from . import postgres_clock
from .base import (
    READ,
    SQL,
    WRITE,
    Announce,
    Clock,
    Kind,
    Params,
    PerThread,
    Plan,
    Row,
    Schema,
)
from .capabilities import Capabilities
from .loop import LOOP_LOCK_WAIT
from .loop import running_loop as _running_loop
from .postgres_after_commit import NOTIFY_CHANNELS as NOTIFY_CHANNELS
from .postgres_attempts import ATTEMPT_INSERT as ATTEMPT_INSERT
from .postgres_attempts import ATTEMPT_PRUNE as ATTEMPT_PRUNE
from .postgres_attempts import ATTEMPT_PRUNE_BATCH as ATTEMPT_PRUNE_BATCH
from .postgres_attempts import ATTEMPT_PRUNE_EVERY as ATTEMPT_PRUNE_EVERY
from .postgres_attempts import ATTEMPT_PRUNE_UNTIMED as ATTEMPT_PRUNE_UNTIMED
from .postgres_attempts import ATTEMPT_RESULT as ATTEMPT_RESULT
from .postgres_attempts import ATTEMPT_RETENTION as ATTEMPT_RETENTION
from .postgres_attempts import MAX_ATTEMPT_RETENTION as MAX_ATTEMPT_RETENTION
from .postgres_attempts import MIN_ATTEMPT_RETENTION as MIN_ATTEMPT_RETENTION
from .postgres_attempts import (
    NOT_APPLIED,
    OPAQUE_WRITE,
    UNRECORDED,
    MarkedWrite,
    OneRowInsert,
    attempt_variant,
    fetch_result,
)
from .postgres_citus_sql import citus_statement
from .postgres_clock import CLOCK_GOOD_RTT as CLOCK_GOOD_RTT
from .postgres_clock import CLOCK_SAMPLES as CLOCK_SAMPLES
from .postgres_clock import SERVER_TIME as SERVER_TIME
from .postgres_clock import ServerClock
from .postgres_connect import CONNECT_TIMEOUT, behind_pooler, connect_failure, connect_options, unfillable_pool
from .postgres_dialect import CATALOG, announce_ddl
from .postgres_dialect import LOCK as LOCK
from .postgres_dialect import POSTGRES_DIALECT as POSTGRES_DIALECT
from .postgres_errors import connection_lost as connection_lost
from .postgres_errors import node_unusable
from .postgres_errors import translate_postgres_error as translate_postgres_error
from .postgres_explain import explain_plan
from .postgres_listen import Listener
from .postgres_loop import LOOP_COMMITS, LoopCommits
from .postgres_notify import ChangeNotifications
from .postgres_pool import LifoPool, PooledConnection
from .postgres_queries import STATEMENT_CURSOR
from .postgres_space import reclaim as reclaim_tables
from .postgres_tools import PostgresTools
from .postgres_transaction import ThreadState
from .postgres_vector import EXTENSION_SCHEMA, PostgresVectors, vector_schema
from .postgres_writes import AttemptWrites, LostTry
from .redact import redact_url
from .space import SpaceReport

PREPARE_THRESHOLD = 0
# A statement outside a transaction whose node failed is tried again, pausing RETRY_FIRST_PAUSE seconds before
# the first retry, doubling up to RETRY_MAX_PAUSE, until max(busy_timeout, MIN_RETRY_DEADLINE) seconds have
# passed since its first try (see the module docstring).
RETRY_FIRST_PAUSE = 0.05
RETRY_MAX_PAUSE = 0.5
MIN_RETRY_DEADLINE = 1.0


_ENGINES: weakref.WeakSet[PostgresEngine] = weakref.WeakSet()
_FORK_ORPHANS: list[Any] = []


def _after_fork_in_child() -> None:
    for engine in list(_ENGINES):
        engine._forget_parent_pool()


os.register_at_fork(after_in_child=_after_fork_in_child)


# What PostgreSQL offers; ``max_concurrency`` is each engine's pool size.
# The Citus statement mode (``citus=True``) turns off what Citus refuses on
# distributed tables: triggers, and NOTIFY inside a transaction it may
# commit with two-phase commit (``CITUS_CAPABILITIES``).
CAPABILITIES = Capabilities(
    returning=True,
    upsert=True,
    transactional_ddl=True,
    triggers=True,
    listen_notify=True,
    advisory_locks=True,
    reads_during_writes=True,
    in_memory=False,
    local=False,
    inline_async_calls=False,
    write_attempts=True,
    deferred_answers=True,
    write_ctes=True,
    loop_commits=LOOP_COMMITS,
)
# deferred_answers off: next_value_later answers at once there (PipelinedTransactions.next_value_later).
# loop_commits off: a transaction's notifications go out behind its COMMIT, in its round trip (commit_then_notify),
# which the loop's commit path (_commit_later) does not send.
# write_ctes stays on: a store's tables are all in one schema (a distributed schema lives whole on one node), so a
# statement writing two of them, or one twice, is a router query, which Citus runs with its data-modifying CTEs as
# PostgreSQL does. Checked on a Citus 13.2 cluster (tests/conformance -k citus; the queues' ack-then-claim reaches
# its worker as one statement). Not so a statement whose outer query reads back what its CTE wrote (the
# attempt-recording variant's count or rows): Citus plans that recursively and commits it in two phases, so the
# Citus mode runs those writes in a transaction of their own instead (_compiled).
CITUS_CAPABILITIES = CAPABILITIES.replace(
    triggers=False, notify_in_transaction=False, deferred_answers=False, loop_commits=False
)


# The probe's one question about a new session (_probe): the backend's pid as the server reports it (behind a
# pooler it differs from the one the connection was given: postgres_connect.behind_pooler), the schema the tables
# go in and the search_path it came from (for the error when none exists), and pgvector's schema or NULL.
# psycopg_pool logs every failed background connect at WARNING ("error connecting in ..."): in a process that
# configured no logging, Python's last-resort handler printed each to stderr (hundreds of lines while a pool could
# not fill). The store reports why it cannot connect in its own errors; a process that configures logging still
# gets these records (they propagate as before), only the last-resort printing stops.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

# The connection slots this role may fill (postgres_connect.unfillable_pool): all of max_connections for a superuser,
# the rest for another role (the superuser_reserved_connections are kept back), and for another role no more than
# the login role's and the database's CONNECTION LIMIT (-1: none; a superuser is not held to either). Read in the
# probe's round trip.
_SESSION_FACTS = (
    f"SELECT pg_backend_pid(), current_schema(), current_setting('search_path'), ({EXTENSION_SCHEMA}),"
    " current_setting('max_connections')::int, CASE WHEN current_setting('is_superuser') = 'on' THEN 0"
    " ELSE current_setting('superuser_reserved_connections')::int END,"
    " CASE WHEN current_setting('is_superuser') = 'on' THEN -1"
    " ELSE (SELECT rolconnlimit FROM pg_catalog.pg_roles WHERE rolname = session_user) END,"
    " CASE WHEN current_setting('is_superuser') = 'on' THEN -1"
    " ELSE (SELECT datconnlimit FROM pg_catalog.pg_database WHERE datname = current_database()) END"
)


class PostgresEngine(ServerClock, AttemptWrites, ChangeNotifications, LoopCommits):
    """PostgreSQL behind the ``Engine`` contract (see the module docstring).

    Time: without an injected ``clock``, ``now_ms()`` is the database
    server's clock, so every deadline (leases, delays, TTLs, presence
    expiry) means the same instant to every client, whatever their own
    clocks say. It costs no round trip per call: the offset between this
    machine's clock and the server's ``clock_timestamp()`` is measured when
    each pooled connection is configured (at the midpoint of the round
    trip, so it is right to within half a round trip) and again every
    ``CLOCK_REFRESH`` seconds; ``now_ms()`` is the local clock plus that
    offset. A connection configured later replaces the offset only when
    its round trip was shorter, the offset is older than
    ``CLOCK_REFRESH``, or the two disagree by more than their round trips
    allow (the local clock stepped): one slow round trip on a loaded machine would
    otherwise set this client's clock ahead of another's by half of it,
    and an item it pushed "now" would not be due yet for a worker that
    claims it at once. An injected ``clock`` is used as it is (tests,
    simulations).
    """

    dialect = POSTGRES_DIALECT
    no_limit = POSTGRES_DIALECT.no_limit
    _tls: PerThread[ThreadState]

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "ds_",
        durability: str = "normal",
        busy_timeout: float = 30.0,
        clock: Clock | None = None,
        min_connections: int = 1,
        max_connections: int = 10,
        read_only: bool = False,
        attempt_retention: float = ATTEMPT_RETENTION,
        citus: bool = False,
    ) -> None:
        if not isinstance(citus, bool):
            raise InvalidRequest(f"citus must be True or False, got {citus!r}")
        # The Citus-compatible statement mode (``durastate.citus``): no
        # triggers (Citus refuses them on distributed tables), so inserts are
        # announced by a client NOTIFY sent after the commit that made them.
        self.citus = citus
        self._start_clock(clock)
        self.attempt_retention = as_attempt_retention(attempt_retention)
        # attempt_retention=0: no attempt rows (a write that would record one runs once: UNRECORDED). Set before
        # EngineBase.__init__, which keys the shared compiled statements on it (_statement_cache_key).
        self._recording = self.attempt_retention > 0
        super().__init__(prefix=prefix, clock=self._server_now if clock is None else clock, read_only=read_only)
        as_durability(durability)
        busy_timeout = as_busy_timeout(busy_timeout)
        min_connections, max_connections = as_pool_sizes(min_connections, max_connections)
        self.url = redact_url(url)
        if citus and "://" in self.url:  # reopening store.url keeps the mode
            self.url = "citus://" + self.url.split("://", 1)[1]
        self._conninfo = url
        self._busy_timeout = float(busy_timeout)
        self._min = min_connections
        self._max = max_connections
        self.capabilities = (CITUS_CAPABILITIES if citus else CAPABILITIES).replace(max_concurrency=max_connections)
        self._tls = PerThread(ThreadState)
        self._closed = False
        self._pool_lock = threading.Lock()
        self._pool: LifoPool | None = None
        self._probed = False
        self._vector_schema: str | None = None  # where pgvector is installed, found by _probe
        # Whether the URL reaches the server through a pooler (postgres_connect.behind_pooler), found by the
        # first connect: no prepared statements, no session settings, no LISTEN (see "Poolers" in the docstring).
        self.pooler = False
        # The listening connection shared by every waiter (postgres_listen), made at the first wait.
        self._listener: Listener | None = None
        self._compile_own_statements()
        _ENGINES.add(self)
        self._open_pool()

    def _compile_own_statements(self) -> None:
        """The engine's own statements (locks, catalog, attempt rows), compiled once."""
        self._writes_until_prune = ATTEMPT_PRUNE_EVERY
        self._lock_sql = self.sql(LOCK)
        self._catalog = tuple(self.sql(statement) for statement in CATALOG)
        self._attempt_insert = self.sql(WRITE(ATTEMPT_INSERT))
        self._attempt_result = self.sql(READ(ATTEMPT_RESULT))
        self._attempt_prune = self.sql(WRITE(ATTEMPT_PRUNE))
        self._attempt_prune_untimed = self.sql(WRITE(ATTEMPT_PRUNE_UNTIMED))
        self._compile_transaction_statements()

    # -- the pool ----------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.cursor_factory = STATEMENT_CURSOR  # statements converted once (postgres_queries)
        if self._server_clock:
            self._measure_clock_offset(conn)
        if self.pooler:
            # Each statement may run on another server session: no prepared statements (a name prepared on
            # one session is unknown, or another statement, on the next), and no session settings (they would
            # stay on whichever server session ran them, for other clients; read_only: _read_only_refusal).
            conn.prepare_threshold = None
            return
        conn.prepare_threshold = PREPARE_THRESHOLD
        # The settings in one round trip (several statements, no parameters, never prepared: one simple query).
        settings = [
            f"SET lock_timeout = {int(self._busy_timeout * 1000)}",
            # See the module docstring. Citus cannot plan a generic plan of a
            # data-modifying CTE with parameters (every write's attempt variant):
            # in its mode each execution is planned with its values.
            f"SET plan_cache_mode = {'force_custom_plan' if self.citus else 'force_generic_plan'}",
        ]
        if self.read_only:
            # The server refuses every write (SQLSTATE 25006, ConfigurationError).
            settings.append("SET default_transaction_read_only = on")
        conn.execute("; ".join(settings), prepare=False)

    def _open_pool(self) -> LifoPool:
        with self._pool_lock:
            if self._closed:
                raise StoreClosed(f"{self.url}: store is closed")
            if self._pool is not None:
                return self._pool
            where = f"connecting to {self.url}"
            kwargs = connect_options(self._conninfo, where)
            probe = None if self._probed else self._probe(kwargs, where)
            try:
                pool = LifoPool(
                    self._conninfo,
                    min_size=self._min,
                    max_size=self._max,
                    kwargs=kwargs,
                    configure=self._configure,
                    timeout=max(self._busy_timeout, 1.0),
                    open=False,
                    name=f"durastate-{id(self):x}",
                )
            except BaseException:
                if probe is not None:
                    probe.close()
                raise
            if probe is not None:
                pool.give_first(probe)  # the pool's first connection: one server session fewer per open
            try:
                pool.open(wait=self._min > 0, timeout=min(CONNECT_TIMEOUT, max(self._busy_timeout, 1.0)))
            except Exception as exc:
                pool.close()
                raise translate_postgres_error(exc, f"connecting to {self.url}") from None
            self._pool = pool
            return pool

    def _probe(self, kwargs: dict[str, Any], where: str) -> PooledConnection:
        """Connect and configure one connection ourselves, once, before the pool starts; return it for the pool.

        A misconfigured URL then fails here, at once, with the server's
        message (``postgres_connect.connect_failure``), instead of the pool
        retrying it in the background until its timeout. The connection,
        configured as the pool configures its own and left idle, becomes
        the pool's first (``LifoPool.give_first``); on any failure it is
        closed.
        """
        try:
            conn = PooledConnection.connect(self._conninfo, **kwargs)
        except psycopg.Error as exc:
            raise connect_failure(exc, where) from None
        try:
            row = conn.execute(_SESSION_FACTS).fetchone()
            assert row is not None
            self.pooler = behind_pooler(conn, row[0])
            self._configure(conn)
            self._vector_schema = None if self.citus else vector_schema(row[3])
        except psycopg.Error as exc:
            conn.close()
            raise translate_postgres_error(exc, f"{where}: configuring the session") from None
        except BaseException:
            conn.close()
            raise
        if self.pooler:
            self.capabilities = self.capabilities.replace(listen_notify=False)  # waiters poll (wait_for_change)
        if self._vector_schema is not None:  # pgvector installed (engines.postgres_vector; not in Citus mode)
            self.capabilities = self.capabilities.replace(vector_index=True)
        if row[1] is None:
            conn.close()
            path = row[2]
            raise ConfigurationError(
                f"{where}: no schema of search_path ({path}) exists, so there is nowhere to create the tables;"
                " create it first (CREATE SCHEMA ...) or fix options=-csearch_path= in the URL"
            )
        refusal = None if self.pooler else unfillable_pool(where, self._min, *row[4:8])  # a pooler's clients take none
        if refusal is not None:
            conn.close()
            raise refusal
        self._channels_in = f'"{row[1]}".{self.prefix}'  # channel names (postgres_notify.ChangeNotifications)
        self._probed = True
        return conn

    def _forget_parent_pool(self) -> None:
        # The parent's listener too: its thread is not in this process, its socket is the parent's session.
        _FORK_ORPHANS.append((self._pool, self._tls, self._listener))
        self._pool = None
        self._listener = None
        self._pool_lock = threading.Lock()
        self._tls = PerThread(ThreadState)

    def _borrow(self, timeout: float | None = None) -> PooledConnection:
        on_loop = _running_loop() is not None
        if on_loop and self._tls.state.no_wait:
            self._wait_after_no_wait()  # WouldWait, unless the transaction's COMMIT went out already
        pool = self._pool or self._open_pool()
        try:
            conn = pool.getconn(timeout)
        except Exception as exc:
            if self._closed:
                raise StoreClosed(f"{self.url}: store is closed") from None
            raise translate_postgres_error(exc, self.url) from None
        measured = self._offset_measured_at
        if self._server_clock and measured is not None and time.monotonic() - measured > postgres_clock.CLOCK_REFRESH:
            try:
                self._measure_clock_offset(conn)
            except psycopg.Error:
                pass  # a broken connection: the caller's statement reports it
        if on_loop:
            self._shorten_lock_wait(conn)
        return conn

    def _shorten_lock_wait(self, conn: PooledConnection) -> None:
        """A call on a thread running an event loop waits for a row lock at most ``LOOP_LOCK_WAIT``.

        durastate.aio runs PostgreSQL calls on worker threads, so a call
        here is a sync call made on the loop's thread: while it waits, the
        loop stalls, and a transaction that loop drives (holding the lock)
        can never finish. A short ``lock_timeout`` turns that hang into an
        error within seconds (``postgres_errors`` says why in its message);
        ``_give_back`` puts the store's own back.
        """
        try:
            conn.execute(f"SET lock_timeout = {int(min(LOOP_LOCK_WAIT, self._busy_timeout) * 1000)}")
            conn.lock_wait_shortened = True
        except psycopg.Error:
            pass  # a broken connection: the caller's statement reports it

    def _unusable(self, exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
        """Whether ``exc`` (on ``conn``) means this connection's node cannot serve this store now.

        ``node_unusable`` by the error; or psycopg found ``conn`` broken
        (the server closed it, whatever the code it sent first said).
        """
        return node_unusable(exc, read_only=self.read_only) or (conn is not None and conn.broken)

    def _discard(self, conn: PooledConnection) -> None:
        """Close a connection whose node failed, and drain the pool (``LifoPool.discard``)."""
        pool = self._pool
        if pool is None:
            conn.close()
        else:
            pool.discard(conn)

    def _give_back(self, conn: PooledConnection) -> None:
        if conn.lock_wait_shortened:
            conn.lock_wait_shortened = False
            try:
                conn.execute(f"SET lock_timeout = {int(self._busy_timeout * 1000)}")
            except psycopg.Error:
                conn.close()  # the pool discards it: no connection goes back with the short wait
        pool = self._pool
        if pool is None:  # closed or forked meanwhile
            conn.close()
            return
        try:
            pool.putconn(conn)
        except psycopg_pool.PoolClosed:
            conn.close()

    # -- statements ----------------------------------------------------------
    #
    # Outside a transaction a statement may be retried when its connection is
    # lost: a read is simply run again, a write runs as its attempt-recording
    # variant, so its retry can ask whether it committed (postgres_attempts).

    def _compiled(self, sql: SQL) -> SQL:
        """Attach the attempt-recording variant of a write (``postgres_attempts.attempt_variant``).

        Citus mode: a statement Citus cannot plan is first rewritten into
        an equivalent it can (``postgres_citus.citus_statement``).
        """
        if self.citus:
            # The marked insert is not rewritten for Citus's planner: a marked
            # write keeps the attempt row there (sql.marked left unset).
            reread = sql.reread
            sql = SQL(citus_statement(sql, self._prefix_for(Kind.WRITE)), sql.kind)
            sql.reread = reread
        variant = attempt_variant(sql, self._prefix_for(Kind.WRITE), lean=not self.citus, recording=self._recording)
        if self.citus and type(variant) is str:
            # Citus cannot route a statement that reads back what its data-modifying CTE wrote: it plans it
            # recursively (the rows pulled to the coordinator, the attempt row copied back) and commits it in two
            # phases, ~6 ms on loopback. In a transaction of its own each statement is routed whole and the commit
            # is one phase: ~1.5 ms, two round trips (docs/decisions.md, "Citus mode: a write alone in a transaction").
            variant = OPAQUE_WRITE
        sql.companion = variant
        return sql

    def _statement_cache_key(self) -> Hashable:
        """Shared compiled statements: by class, Citus mode, attempt rows kept and ``{p}`` per kind (all that
        ``_compiled`` reads)."""
        return (type(self), self.citus, self._recording, *(self._prefix_for(kind) for kind in Kind))

    def _run(self, sql: str, params: Params, fetch: int) -> Any:
        """Run one statement; ``fetch``: 0 rowcount, 1 one row, 2 all rows."""
        state = self._tls.state
        conn = state.conn
        if conn is not None:
            return self._run_in_transaction(state, conn, sql, params, fetch)
        if state.depth:  # a transaction whose connection was lost (``_flush``): doomed
            self._check_open_transaction(state)
        try:
            variant = sql.companion  # type: ignore[attr-defined]
        except AttributeError:  # a plain str: no declared kind
            raise WrongType(f"{self.url}: run statements compiled by engine.sql(), got {sql[:80]!r}") from None
        if variant is OPAQUE_WRITE:
            with self.transaction():
                return self._run(sql, params, fetch)
        if variant is not None and self.read_only and self.pooler:
            raise self._read_only_refusal()
        if type(variant) is str:
            return self._write_once(variant, params, fetch)
        if type(variant) is OneRowInsert:
            return self._write_once(variant.sql, params, fetch, first=True)
        if type(variant) is MarkedWrite:
            return self._write_marked(variant, params, fetch)
        if variant is UNRECORDED:
            got = self._first_try(sql, params, fetch, fetch_result)
            if type(got) is LostTry:
                raise self._outcome_unknown(got.error)
            return got
        # A read, a write whose retry re-reads its rows (RereadWrite) or runs it again (RUN_AGAIN). The
        # first try pays no closure; a lost connection goes on to the retry loop.
        got = self._first_try(sql, params, fetch, fetch_result)
        if type(got) is not LostTry:
            return got
        rereading = None if variant is None else lambda c: variant.replay(c, params, fetch)
        return self._retrying(lambda c: fetch_result(c.run(sql, params), fetch), rereading, got.began, failed=got.error)

    def _first_try(self, text: str, args: Params, fetch: int, fetcher: Callable[[Any, int], Any]) -> Any:
        """``fetcher(cursor, fetch)`` of one run on a pooled connection; a ``LostTry`` when the connection was lost."""
        began = time.monotonic()
        conn = self._borrow()
        try:
            return fetcher(conn.run(text, args), fetch)
        except psycopg.Error as exc:
            if not self._unusable(exc, conn):
                raise translate_postgres_error(exc, self.url, read_only=self.read_only) from None
            self._discard(conn)
            return LostTry(exc, began)
        finally:
            self._give_back(conn)

    def _retrying(
        self, run: Any, replay: Any, began: float | None = None, keep: bool = False, failed: Exception | None = None
    ) -> Any:
        """``run(conn)`` on a pooled connection, retried while its node fails (see the module docstring).

        ``began``: the ``time.monotonic()`` of a first try already made (and
        failed), ``None`` to make the first try here. Before each retry of a
        write, ``replay(conn)`` looks for the first attempt's recorded
        outcome and returns it (``NOT_APPLIED`` if none). ``keep``: the
        caller keeps the connection ``run`` succeeded on (``run`` returns it).
        ``failed``: the first try's error. Past the deadline the last error a
        node gave is raised (a pool that found no connection in time only
        when no node answered at all).
        """
        retried = began is not None
        window = max(self._busy_timeout, MIN_RETRY_DEADLINE)
        deadline = (time.monotonic() if began is None else began) + window
        pause = RETRY_FIRST_PAUSE
        node_error: Exception | None = failed  # the last error a node gave
        pool_error: StoreUnavailable | None = None  # the last time no connection came in time
        while True:
            left = deadline - time.monotonic()
            if retried:
                if left <= 0:
                    break
                time.sleep(min(pause, left))
                pause = min(pause * 2, RETRY_MAX_PAUSE)
                left = deadline - time.monotonic()
            try:
                conn = self._borrow(max(left, 0.001))
            except StoreUnavailable as exc:  # nothing connected in time: keep trying until the deadline
                pool_error, retried = exc, True
                continue
            kept = False
            try:
                if retried and replay is not None:
                    outcome = replay(conn)
                    if outcome is not NOT_APPLIED:
                        return outcome
                result = run(conn)
                kept = keep
                return result
            except psycopg.Error as exc:
                if not self._unusable(exc, conn):
                    raise translate_postgres_error(exc, self.url, read_only=self.read_only) from None
                self._discard(conn)
                node_error, retried = exc, True
            finally:
                if not kept:
                    self._give_back(conn)
        where = f"{self.url} (retried for {window:g} s)"
        if node_error is not None:
            raise translate_postgres_error(node_error, where, read_only=self.read_only) from None
        raise StoreUnavailable(f"{pool_error or where} (retried for {window:g} s)") from None

    def _read_only_refusal(self) -> ConfigurationError:
        """A write on a ``read_only`` store behind a pooler, refused here: the server session is not ours to SET."""
        return ConfigurationError(f"{self.url}: this store was opened read_only=True: writes are refused")

    def reclaim_space(self, *, full: bool = False) -> SpaceReport:
        """``VACUUM (ANALYZE)`` of the prefix's tables when ``full`` (``postgres_space``)."""
        if self._tls.state.depth > 0:
            raise InvalidRequest("reclaim_space() inside a transaction: VACUUM cannot run in one")
        if self.read_only or not full:
            return SpaceReport()
        conn = self._borrow()
        try:
            return reclaim_tables(conn.run, self.prefix)
        except psycopg.Error as exc:
            raise translate_postgres_error(exc, self.url) from None
        finally:
            self._give_back(conn)

    def migrate(self, schemas: Iterable[Schema]) -> None:
        """``EngineBase.migrate``, then one batch of expired attempt rows (an idle store's leftovers)."""
        super().migrate(schemas)
        if not self.read_only:
            self._prune_attempts()

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self._run(sql, params, 1)
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        rows: list[Row] = self._run(sql, params, 2)
        return rows

    def execute(self, sql: str, params: Params = ()) -> int:
        count: int = self._run(sql, params, 0)
        return count

    def release_connection(self) -> None:
        """Nothing to release: connections go back to the pool after each call."""
        if self._tls.state.depth > 0:
            raise InvalidRequest("release_connection() inside a transaction would abandon it")

    # -- schema objects, plans and locks ----------------------------------------

    @property
    def tools(self) -> PostgresTools:
        return PostgresTools(self)

    @property
    def vectors(self) -> PostgresVectors:
        return PostgresVectors(self, self._vector_schema)

    def catalog(self) -> list[tuple[str, ...]]:
        """This prefix's schema objects as sorted rows (see ``Engine.catalog``)."""
        pattern = self.prefix.replace("_", "\\_") + "%"
        rows = [row for statement in self._catalog for row in self.all(statement, (pattern,))]
        return sorted(tuple(str(v) for v in row) for row in rows)

    def explain(self, sql: str, params: Params = ()) -> Plan:
        """The generic plan of ``sql`` (see ``Engine.explain``), never running it.

        PostgreSQL 16+: ``EXPLAIN (GENERIC_PLAN)``. Older servers: the
        statement is prepared with ``plan_cache_mode = force_generic_plan``
        and its ``EXECUTE`` explained. All inside a transaction (or a
        savepoint of the caller's) that is rolled back.
        """
        state = self._tls.state
        own = state.conn is None
        conn = self._borrow() if own else state.conn
        assert conn is not None
        try:
            if state.piped:
                conn = self._flush(state)
                state.unflushed = True  # explain_plan's closing ROLLBACK TO goes out unawaited
            return explain_plan(conn, sql, params, in_transaction=not own)
        except psycopg.Error as exc:
            raise translate_postgres_error(exc, f"{self.url}: explain") from None
        finally:
            if own:
                self._give_back(conn)

    def _lock_params(self, name: str) -> tuple[str, str]:
        return name, self.prefix

    def _take_lock(self, name: str) -> None:
        self.one(self._lock_sql, self._lock_params(name))

    def _take_lock_later(self, name: str) -> None:
        # In the pipeline the server runs it before anything sent after it; outside one, at once.
        self.send(self._lock_sql, self._lock_params(name))

    def _announce_ddl(self, announce: Announce) -> tuple[str, ...]:
        # Citus refuses triggers on distributed tables: the client announces (``notify``).
        return announce_ddl(announce) if self.capabilities.triggers else ()

    # -- lifecycle -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the pool. Idempotent; later calls raise ``StoreClosed``."""
        with self._pool_lock:
            if self._closed:
                return
            self._closed = True
            pool, self._pool = self._pool, None
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()  # wakes the waiters: their next check raises StoreClosed
        if pool is not None:
            pool.close()
