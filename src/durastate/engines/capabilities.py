"""What an engine can do, declared by the engine (``engine.capabilities``).

Callers that behave differently by engine (the async runner, the
conformance suite, the CLI) read these flags instead of probing attributes
(``is_memory``, ``no_wait_changes``) or comparing dialect names and URLs,
so a third-party engine gets the treatment its declaration asks for. An
engine declares what it honours: a flag may be off in a mode of an engine
that has the feature in general (say, PostgreSQL behind a coordinator that
cannot run triggers), so it is read from the engine instance, not its type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """An engine's declared features. Every flag says what callers may rely on."""

    # INSERT/UPDATE/DELETE ... RETURNING (``WRITE_ROWS`` statements) run as
    # one statement. Every engine durastate ships has it; the facets need it.
    returning: bool
    # INSERT ... ON CONFLICT (...) DO UPDATE/NOTHING runs as one statement.
    upsert: bool
    # DDL runs inside a transaction and rolls back with it (a migration that
    # fails halfway leaves nothing behind).
    transactional_ddl: bool
    # The server runs triggers: ``Migration(announce=...)`` installs one that
    # announces inserts itself (``notify(..., announced=True)`` sends nothing).
    triggers: bool
    # ``wait_for_change`` wakes on writes committed by other processes (the
    # server delivers notifications, LISTEN/NOTIFY). False: only this
    # process's ``notify`` wakes it; waiters poll for everything else.
    listen_notify: bool
    # ``lock(name)`` excludes only other holders of ``name`` (in any process).
    # False: it takes a lock wider than the name (SQLite: the one write lock).
    advisory_locks: bool
    # Other threads' reads run (on the last committed state) while a write
    # transaction is open. False: they wait for it to end.
    reads_during_writes: bool
    # The data lives in this engine object only: no other store or process
    # sees it, and it is gone once the engine is closed.
    in_memory: bool
    # Statements run in this process (SQLite): a second statement costs no
    # round trip, so a caller may split a read in two where that writes
    # less. False: each answer read crosses a connection to a server
    # (PostgreSQL, Citus mode included, whose answers are never deferred).
    # Off unless declared: an engine that does not say keeps every caller on
    # the shape that is right over a connection.
    local: bool = False
    # An async front end may run calls on its event loop's thread: the
    # engine provides ``no_wait_changes()`` (a refused lock changes nothing
    # and raises ``LockBusy`` at once, so the call can move to a worker).
    inline_async_calls: bool
    # An async front end may run a call that only reads on its event loop's
    # thread (the engine provides ``no_wait_changes()`` as above), where
    # ``inline_async_calls`` is off: SQLite at ``durability="full"``, whose
    # commits wait for an fsync the loop must not wait for, though a read
    # commits nothing. Callers run reads inline where either flag is on.
    inline_async_reads: bool = False
    # An async front end may run a call that may run twice on its event
    # loop's thread: the engine provides ``run_without_waiting()`` (sends a
    # transaction without waiting, raises ``WouldWait`` before its COMMIT
    # where it would wait, and leaves the COMMIT's answer to the loop).
    loop_commits: bool = False
    # A write outside a transaction whose connection is lost is retried
    # safely, recorded in an attempt row (``attempt_committed(attempt)``).
    write_attempts: bool
    # How many statements the engine runs at once (its connection pool's
    # size); None: one connection per calling thread, no fixed bound.
    max_concurrency: int | None = None
    # A notification may be sent inside a write transaction (delivered at
    # its commit). False (PostgreSQL's Citus mode: Citus refuses to PREPARE,
    # i.e. commit across nodes, a transaction that ran NOTIFY): the engine
    # sends a transaction's notifications right after its COMMIT (PostgreSQL:
    # behind it, in the COMMIT's round trip).
    notify_in_transaction: bool = True
    # A transaction may write several logical shards and commits them
    # together (``durastate.citus``: the shards are schemas behind one
    # coordinator connection). False: ``ShardedStore`` refuses cross-shard writes.
    cross_shard_transactions: bool = False
    # Inside a transaction, statements whose answers nobody waits for go out
    # together with the next one that is waited for (PostgreSQL's pipeline):
    # ``send``, ``require`` and ``next_value_later`` cost no round trip of
    # their own, each answer read costs one. A caller with the choice
    # prefers them there. False: every statement is answered at once (a
    # local engine), so reading an answer costs nothing extra.
    deferred_answers: bool = False
    # ``engine.vectors`` keeps nearest-neighbour indexes in the database
    # (``engines.vectors``: PostgreSQL with the pgvector extension installed
    # in the database when the engine opened). False: callers search exactly.
    vector_index: bool = False
    # A WITH clause may hold INSERT/UPDATE/DELETE (PostgreSQL's data-modifying
    # common table expressions), so several writes run as one statement: one
    # round trip, no transaction. A facet with the choice then compiles and
    # sends a statement written that way. False: it runs the writes in a
    # transaction.
    write_ctes: bool = False
    # A deleted or updated row leaves its index entries behind until a vacuum
    # removes them (PostgreSQL's MVCC; never while an old snapshot is held), so
    # a scan from the head of an index range steps over them: a queue's claim
    # then starts from a floor it keeps (``Queues._floor``). False (SQLite):
    # a delete or update takes its old entries out of the index at once, and
    # the scan needs no floor. On unless declared: the floor is right either way.
    dead_index_entries: bool = True

    def replace(self, **changes: Any) -> Capabilities:
        """A copy with ``changes`` applied (an engine mode that turns features off)."""
        return dataclasses.replace(self, **changes)
