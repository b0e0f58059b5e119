"""One listening connection per PostgreSQL store, shared by every waiter.

Waiters (``engines.watch``: queue waits, event streams, async or not)
register a ``ListenWatch`` on a channel; one ``Listener`` per engine keeps a
connection of its own, outside the statement pool (it never counts against
``max_connections``), runs ``LISTEN`` on the channels its waiters want, and
hands each notification to the watches on its channel. One thread serves it
(``durastate-listen``), blocked in ``select()`` on the connection's socket
and a wake-up pipe: an idle store sends no statement and no poll (TCP
keepalives, not statements, find a connection that died silently).

The guarantee a waiter relies on: a notification sent after its watch was
registered reaches the watch, or the watch is woken another way (so its
next check catches up):

* A channel not yet listened when a watch registers is ``LISTEN``ed by the
  thread, and every watch on it is woken once the ``LISTEN`` returned: a
  check made before could have missed a commit.
* A channel already listened stays listened while it has watches: a
  notification for it after the registration is dispatched to the watch.
* The connection lost (the server restarted, failed over, or a
  ``pg_terminate_backend``): every watch is woken, and until its channel is
  listened again it polls (its wait answers "look again" every ``poll``
  seconds, as a waiter without a listener does), so a listener that cannot
  come back (a server out of connection slots) never leaves a waiter
  deaf. The thread reconnects (pausing ``RECONNECT_FIRST_PAUSE`` doubling to
  ``RECONNECT_MAX_PAUSE`` between tries), ``LISTEN``s every wanted channel
  again, and that wakes every watch once more, so each catches up on a
  commit made between its last poll and the ``LISTEN``. A watch whose
  channel's first ``LISTEN`` is still on its way polls the same way.
* ``close()``: the thread stops, its connection is closed, and every watch
  is woken; its caller's next check raises ``StoreClosed``.

Which channels stay listened: a channel whose last watch closed stays
``LISTEN``ed (a waiter loop registering again costs no round trip) until
more than ``KEPT_CHANNELS`` channels are; then the least recently watched
ones without watches are ``UNLISTEN``ed. A kept channel's notifications
still arrive (a busy queue nobody waits on costs the listener a message a
commit); ``KEPT_CHANNELS`` bounds that set.

Fork: the listener belongs to the process that made it; the engine gives a
child process a new one on its first wait (``PostgresEngine``).
"""

from __future__ import annotations

import os
import select
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq.abc import PGconn

from .watch import FiredWatch, forget

__all__ = ["KEPT_CHANNELS", "ListenWatch", "Listener", "connect_listener"]

# Channels kept LISTENed without a watch (see the module docstring).
KEPT_CHANNELS = 256
# Pauses between reconnect tries (seconds).
RECONNECT_FIRST_PAUSE = 0.05
RECONNECT_MAX_PAUSE = 2.0
# Seconds close() waits for the thread to end (it may be inside a connect).
CLOSE_JOIN = 2.0


# The listening session idles by design: a server's idle_session_timeout (PostgreSQL 14+, perhaps set for
# the role or in the URL to end abandoned sessions) would end it again and again; it is turned off for it.
NO_IDLE_TIMEOUT = "SET idle_session_timeout = 0"
IDLE_TIMEOUT_SINCE = 140000  # server_version


def connect_listener(conninfo: str, options: dict[str, Any]) -> psycopg.Connection[Any]:
    """A listening connection: ``psycopg.connect(conninfo, **options)`` (autocommit), without idle timeout."""
    conn = psycopg.connect(conninfo, **options)
    try:
        if conn.info.server_version >= IDLE_TIMEOUT_SINCE:
            conn.execute(NO_IDLE_TIMEOUT)
    except BaseException:
        conn.close()
        raise
    return conn


class ListenWatch(FiredWatch):
    """A watch woken by its ``Listener`` (see the module docstring); ``reliable``."""

    reliable = True

    def __init__(self, listener: Listener | None, channel: str, poll: float) -> None:
        super().__init__(poll)
        self.channel = channel
        self._listener = listener

    def _heard(self) -> bool:
        """Whether the listener listens on the channel now; if not (lost, not yet back), the waiter polls."""
        listener = self._listener
        return listener is not None and listener.listening(self.channel)

    def _quiet(self, timeout: float) -> tuple[float, bool]:
        heard = self._heard()
        return (timeout if heard else min(timeout, self._poll)), not heard

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.release(self)


class Listener:
    """The listening connection and its thread (see the module docstring).

    ``connect()`` opens an autocommit connection to the server itself (the
    engine's URL, with keepalives); it is called on the listener's thread.
    Nothing connects before the first ``watch``.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], name: str) -> None:
        self._connect = connect
        self._name = name
        self._lock = threading.Lock()
        self._watches: dict[str, set[ListenWatch]] = {}
        # Channels to be listened (with watches, or kept), least recently watched first.
        self._wanted: OrderedDict[str, None] = OrderedDict()
        # Channels LISTENed on the current connection (the thread adds them once the LISTEN returned).
        self._listening: set[str] = set()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()  # a forked child's copy is the parent's: never touched there
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        # The listening connection's server process id while connected (tests, operators).
        self.backend_pid: int | None = None
        # Connections made so far (the first, then one per reconnect).
        self.connects = 0

    # -- the waiters' side --------------------------------------------------

    def watch(self, channel: str, poll: float) -> ListenWatch:
        """A watch on ``channel`` (a valid identifier), registered now; polling every ``poll`` s while unheard."""
        watch = ListenWatch(self, channel, poll)
        with self._lock:
            if self._closed:
                watch._listener = None
                watch.fire()  # the caller's check raises StoreClosed
                return watch
            self._watches.setdefault(channel, set()).add(watch)
            self._wanted[channel] = None
            self._wanted.move_to_end(channel)
            ready = channel in self._listening
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
        if not ready:
            self._poke()
        return watch

    def listening(self, channel: str) -> bool:
        """Whether ``channel`` is LISTENed on the connection now (a lost one is found out at its next read)."""
        return channel in self._listening

    def release(self, watch: ListenWatch) -> None:
        """Forget ``watch``; past ``KEPT_CHANNELS`` channels, the oldest unwatched ones are dropped."""
        with self._lock:
            forget(self._watches, watch.channel, watch)
            excess = len(self._wanted) - KEPT_CHANNELS
            dropped = False
            if excess > 0:
                for channel in [c for c in self._wanted if c not in self._watches][:excess]:
                    del self._wanted[channel]
                    dropped = dropped or channel in self._listening
        if dropped:
            self._poke()

    def close(self) -> None:
        """Stop the thread, close the connection, wake every watch. Idempotent; nothing in a forked child."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            watches = [w for ws in self._watches.values() for w in ws]
            self._watches.clear()
            thread = self._thread
        for watch in watches:
            watch._listener = None
            watch.fire()
        self._poke()
        if thread is None:
            self._close_pipe()
        elif thread is not threading.current_thread():
            thread.join(CLOSE_JOIN)  # the thread closes the pipe as it ends

    def _poke(self) -> None:
        try:
            os.write(self._wake_write, b"x")
        except (BlockingIOError, OSError):  # full (a wake-up is pending anyway) or closed
            pass

    def _close_pipe(self) -> None:
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- the thread ------------------------------------------------------------

    def _serve(self) -> None:
        pause = RECONNECT_FIRST_PAUSE
        try:
            while not self._closed:
                conn: psycopg.Connection[Any] | None = None
                try:
                    conn = self._connect()
                    self.connects += 1
                    self.backend_pid = conn.info.backend_pid
                    conn.add_notify_handler(lambda notify: self._dispatch(notify.channel))
                    pause = RECONNECT_FIRST_PAUSE
                    self._listen_on(conn)
                except (psycopg.Error, OSError):
                    pass  # lost, or could not connect: try again after a pause
                finally:
                    with self._lock:
                        self._listening.clear()
                        woken = [w for ws in self._watches.values() for w in ws]
                    self.backend_pid = None
                    if conn is not None:
                        conn.close()
                for watch in woken:  # unheard now: they poll until the channels are listened again
                    watch.fire()
                if self._closed:
                    break
                self._sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_PAUSE)
        finally:
            self._close_pipe()

    def _sleep(self, seconds: float) -> None:
        """Pause between reconnects; ``close()`` (a poke) ends it early."""
        readable, _, _ = select.select([self._wake_read], [], [], seconds)
        if readable:
            self._drain_pipe()

    def _drain_pipe(self) -> None:
        try:
            os.read(self._wake_read, 4096)
        except OSError:
            pass

    def _listen_on(self, conn: psycopg.Connection[Any]) -> None:
        """Keep ``conn``'s LISTENs equal to the wanted channels and dispatch what arrives, until closed."""
        pgconn = conn.pgconn
        while True:
            with self._lock:
                if self._closed:
                    return
                start = [c for c in self._wanted if c not in self._listening]
                stop = [c for c in self._listening if c not in self._wanted]
                # Unlistened before the UNLISTEN goes out: a watch registering meanwhile asks for a new LISTEN.
                self._listening.difference_update(stop)
            for channel in stop:
                conn.execute(f"UNLISTEN {channel}")
            for channel in start:
                conn.execute(f"LISTEN {channel}")
                with self._lock:
                    self._listening.add(channel)
                    woken = list(self._watches.get(channel, ()))
                for watch in woken:  # their checks may predate the LISTEN: look again
                    watch.fire()
            # A notification that came in with a statement's answer is in libpq's buffer, not the socket's:
            # select() would not see it. Parse and dispatch what is buffered first.
            self._dispatch_buffered(pgconn)
            readable, _, _ = select.select([pgconn.socket, self._wake_read], [], [])
            if self._wake_read in readable:
                self._drain_pipe()
            if pgconn.socket in readable:
                pgconn.consume_input()  # raises once the connection is lost
                self._dispatch_buffered(pgconn)
                if pgconn.status != psycopg.pq.ConnStatus.OK:
                    raise psycopg.OperationalError("the listening connection was lost")

    def _dispatch_buffered(self, pgconn: PGconn) -> None:
        while (notify := pgconn.notifies()) is not None:
            self._dispatch(notify.relname.decode())

    def _dispatch(self, channel: str) -> None:
        with self._lock:
            woken = list(self._watches.get(channel, ()))
        for watch in woken:
            watch.fire()
