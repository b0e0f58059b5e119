"""Notifications the client sends after the commit they announce (PostgreSQL's Citus mode).

The Citus mode has no triggers (Citus refuses them on distributed tables)
and runs no NOTIFY inside a transaction (Citus refuses to PREPARE, i.e. to
commit across nodes, a transaction that ran one), so the engine sends every
notification itself, one statement for all of a transaction's channels, on
the coordinator, where the listeners are: behind a pipelined transaction's
COMMIT in the same round trip (``commit_then_notify``), or at once on its
own (``notify_on``) after a COMMIT that was not pipelined, or for a write
outside a transaction. Either way a notification is a hint: waiters also
look on their own, so one lost with a broken connection costs them at most
a poll interval and is never an error of the write it announces.
"""

from __future__ import annotations

import psycopg

from .postgres_pool import PooledConnection

__all__ = ["NOTIFY_CHANNELS", "commit_then_notify", "notify_on"]

# One statement for every channel a transaction woke.
NOTIFY_CHANNELS = "SELECT pg_notify(c, '') FROM unnest(%s::text[]) AS c"


def notify_on(conn: PooledConnection, channels: frozenset[str]) -> None:
    """Send ``channels``' notifications on ``conn`` now (autocommit, so at once); a failure is dropped (a hint)."""
    try:
        conn.execute(NOTIFY_CHANNELS, (sorted(channels),))
    except psycopg.Error:
        pass


def commit_then_notify(conn: PooledConnection, channels: frozenset[str]) -> None:
    """COMMIT ``conn``'s pipelined transaction, then ``channels``' notifications, in the COMMIT's round trip.

    The notifications are a statement of their own after the COMMIT, so in
    a transaction of their own on the coordinator (never in the distributed
    one); the server skips them when anything before them failed, the
    COMMIT included, so a rolled-back transaction wakes nobody. Raises what
    failed before or at the COMMIT, as a COMMIT alone would. When only the
    notifications failed (the COMMIT's own answer says it committed), the
    failure is a lost hint, as in ``notify_on``: the commit stands.
    """
    committing = conn.send_watched("COMMIT")
    conn.send(NOTIFY_CHANNELS, (sorted(channels),))
    try:
        conn.end_pipeline()
    except psycopg.Error:
        if committing.statusmessage != "COMMIT":
            raise
