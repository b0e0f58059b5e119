"""The PostgreSQL engine's change notification: ``NOTIFY`` inside transactions, waiters on one listening connection.

``PostgresEngine`` mixes this class in (the pool, the retry loop and the
pipelined transactions are the engine's and ``postgres_transaction``'s).
Notifications are hints: every waiter re-checks what it waits for, so a
notification lost with a connection costs it at most one poll interval.
"""

from __future__ import annotations

import hashlib
import threading
import time
import weakref

import psycopg

from ..errors import StoreClosed
from .postgres_after_commit import notify_on
from .postgres_connect import connect_options, listen_options
from .postgres_listen import Listener, connect_listener
from .postgres_pool import SEND, PooledConnection
from .postgres_transaction import PipelinedTransactions
from .watch import ChangeWatch

__all__ = ["ChangeNotifications", "channel_identifier"]


def channel_identifier(namespace: str, name: str) -> str:
    """``'ds_'`` and 24 hex digits of md5(``namespace:name``): a LISTEN identifier for any ``str`` (lone
    surrogates included, through ``surrogatepass``).
    """
    key = f"{namespace}:{name}".encode("utf-8", "surrogatepass")
    return "ds_" + hashlib.md5(key, usedforsecurity=False).hexdigest()[:24]


class ChangeNotifications(PipelinedTransactions):
    """``channel``, ``notify``, ``watch`` and ``wait_for_change`` of ``PostgresEngine``."""

    _listener: Listener | None
    _pool_lock: threading.Lock
    _conninfo: str
    # '"schema".prefix': what channel names are made of (``channel``), set when the engine first connects
    # (``PostgresEngine._probe``: the schema is the session's ``current_schema()``, where the tables are).
    _channels_in: str | None = None

    # The engine's own (PostgresEngine).
    def _borrow(self, timeout: float | None = None) -> PooledConnection:
        raise NotImplementedError

    def _open_pool(self) -> object:
        raise NotImplementedError

    def channel(self, name: str) -> str:
        """A valid LISTEN/NOTIFY channel identifier for ``name``.

        Made of the store's schema, its prefix and ``name``
        (``channel_identifier('"schema".prefix', name)``), as SQL computes it
        where a trigger announces writes itself (``postgres_dialect``): two
        stores of one prefix in two schemas of a database (a schema per
        tenant) never wake each other's waiters. Any ``str`` names a
        channel: a name with lone surrogates (which no row can hold, so no
        trigger computes it) still gets one, so a waiter on it waits instead
        of failing before the facet refuses the name. Connects first if the
        engine has not yet (the schema is the server's answer).
        """
        namespace = self._channels_in
        if namespace is None:
            self._open_pool()  # its first connection learns the schema (PostgresEngine._probe)
            namespace = self._channels_in
            assert namespace is not None
        return channel_identifier(namespace, name)

    def notify(self, channel: str, *, announced: bool = False) -> None:
        """``NOTIFY`` the channel; delivered by the server at commit, never early.

        ``announced=True`` means a trigger on the written table has already
        queued the notification in the same statement: nothing to send.

        Citus mode (capabilities ``triggers`` and ``notify_in_transaction``
        off): every notification is the client's, and none is sent inside a
        transaction (Citus refuses to PREPARE, i.e. to commit across nodes,
        a transaction that ran NOTIFY): a transaction's are sent, in one
        statement, on its connection right behind its COMMIT, in the same
        round trip (``postgres_after_commit``), on the coordinator, where
        listeners are; the server skips them when the COMMIT fails, and a
        rolled-back transaction sends none. Outside a transaction the write
        has committed already: they go out at once, a round trip of their own.
        """
        capabilities = self.capabilities
        if announced and capabilities.triggers:
            return
        name = self.channel(channel)
        state = self._tls.state
        if not capabilities.notify_in_transaction:
            # Citus mode: after the commit, or now outside a transaction.
            if state.depth:
                state.after_commit = state.after_commit | {name}
            else:
                self._send_notifies(frozenset((name,)))
            return
        statement = f"NOTIFY {name}"
        conn = state.conn
        if conn is None and state.depth:  # a transaction whose connection was lost (``_flush``): doomed
            self._check_open_transaction(state)
        if conn is None:
            # Outside a transaction: no attempt row, a NOTIFY sent twice wakes twice, harmlessly.
            self._retrying(lambda c: c.run(statement), None)
            return
        self._check_open_transaction(state)
        try:
            if state.piped:
                self._pipe(state, SEND, statement, None)  # with the commit's round trip
            else:
                conn.run(statement)
        except psycopg.Error as exc:
            raise self._failed(state, exc) from None

    def _send_notifies(self, channels: frozenset[str]) -> None:
        """Citus mode: NOTIFY ``channels`` now, outside any transaction (see ``notify``)."""
        if not channels:
            return
        conn = self._borrow()
        try:
            notify_on(conn, channels)
        finally:
            self._give_back(conn)

    def watch(self, channel: str, poll: float) -> ChangeWatch:
        """A watch on ``channel`` (``engines.watch``), served by the store's one listening connection.

        See ``postgres_listen``: the connection is the store's own, outside
        the pool, made at the first watch; a waiter holds no pooled
        connection while it waits, and an idle waiter sends no statement.
        Behind a pooler (no ``LISTEN``: ``capabilities.listen_notify`` is
        off) the watch polls every ``poll`` seconds instead.
        """
        if self.pooler:
            return super().watch(channel, poll)
        return self._listening().watch(self.channel(channel), poll)

    def _listening(self) -> Listener:
        listener = self._listener
        if listener is None:
            with self._pool_lock:
                if self._closed:
                    raise StoreClosed(f"{self.url}: store is closed")
                listener = self._listener
                if listener is None:
                    # Autocommit, with TCP keepalives, named (postgres_connect.listen_options).
                    options = listen_options(self._conninfo, connect_options(self._conninfo, self.url))
                    conninfo = self._conninfo
                    self._listener = listener = Listener(
                        lambda: connect_listener(conninfo, options), f"durastate-listen-{id(self):x}"
                    )
                    # A store dropped without close() does not leave its thread and connection behind.
                    weakref.finalize(self, listener.close).atexit = False
        return listener

    def wait_for_change(self, channel: str, timeout: float) -> None:
        """Block until a ``NOTIFY`` on ``channel`` or ``timeout`` seconds; a hint only.

        The watch is registered here, after the caller's check: a waiter
        that must not miss a change registers first (``watch``). Behind a
        pooler: a sleep of at most 50 ms (the caller polls).
        """
        if self.pooler:
            # A LISTEN through a transaction-mode pooler lands on a server session the client leaves at once:
            # nothing would ever arrive. The caller polls instead (queues, events: every 50 ms).
            time.sleep(max(0.0, min(timeout, 0.05)))
            return
        with self.watch(channel, timeout) as watch:
            watch.wait(timeout)
