"""The SQLite engine's change notification: waiters in this process woken at once, other processes' commits polled.

``SqliteEngine`` mixes this class in (its connections and statements are the
engine's, its transactions ``sqlite_transaction``'s). SQLite has no server to
announce a commit, so ``notify`` wakes this process's waiters only, and only
once the data is visible (inside a transaction, at its commit: the pending
channels are fired by ``SqliteTransactions``); a watch also answers "look
again" every ``poll`` seconds, which is how a commit of another process is
seen. As on PostgreSQL (``postgres_notify``), a notification is a hint:
every waiter re-checks what it waits for.
"""

from __future__ import annotations

from .sqlite_transaction import SqliteTransactions
from .watch import ChangeWatch, LocalChannels

__all__ = ["ChangeNotifications"]


class ChangeNotifications(SqliteTransactions):
    """``notify``, ``watch`` and ``wait_for_change`` of ``SqliteEngine``."""

    # The engine's own (SqliteEngine): reset in a forked child, closed with the engine.
    _channels: LocalChannels

    def notify(self, channel: str, *, announced: bool = False) -> None:
        """Wake this process's waiters on ``channel``.

        Inside a transaction the wake-up is deferred to the commit, so a
        waiter never looks before the data it was woken for is visible.
        (``announced``: the server already announced the write, see
        ``Engine.notify``; SQLite has no server, so it changes nothing.)
        """
        state = self._tls.state
        if state.depth > 0:
            pending = state.pending_notify
            if pending is None:
                state.pending_notify = pending = set()
            pending.add(channel)
            return
        self._channels.fire(channel)

    def watch(self, channel: str, poll: float) -> ChangeWatch:
        """A watch on ``channel`` (``engines.watch``) woken at once by ``notify`` in this process, from any
        thread, sync or async (no thread is held while a coroutine waits); it answers "look again" every
        ``poll`` seconds too, since other processes' commits are not heard.
        """
        return self._channels.watch(channel, poll)

    def wait_for_change(self, channel: str, timeout: float) -> None:
        """Block until ``notify(channel)`` in this process, the store's ``close()``, or ``timeout``.

        A watch registered here, after the caller's check (a waiter that must
        not miss a change registers first: ``watch``), and forgotten when the
        wait ends: nothing is kept per channel. (A condition kept per channel
        ever waited on grew without bound in a process waiting on ever new
        channels, a session's or a queue's each.)
        """
        with self._channels.watch(channel, timeout) as watch:
            watch.wait(timeout)
