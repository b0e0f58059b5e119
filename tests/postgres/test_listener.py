"""Waiters on PostgreSQL share one listening connection (``engines.postgres_listen``).

Every sync and async waiter of a store is woken through the store's one
listening backend, which sends no statement while the store idles, comes
back after the server ends it (and wakes every waiter once, to catch up on
what it missed), and ends with the store. Each store is told apart on the
server by the ``application_name`` its URL gives; its listener is the one
of its backends whose last statement is a ``LISTEN``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

import durastate
from durastate import aio
from durastate.engines import postgres_listen
from durastate.engines.postgres import PostgresEngine
from durastate.engines.watch import ChangeWatch
from durastate.errors import StoreClosed

pytestmark = pytest.mark.timeout(120)

FAILURE_DEADLINE = 60.0  # seconds a condition may take before the test fails (never reached when it works)
LONG_WAIT = 600.0  # a waiter's wait=: longer than any test, so only a wake-up ends it

LISTENERS = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    " AND (query LIKE 'LISTEN %%' OR query LIKE 'UNLISTEN %%')"
)
ACTIVITY = "SELECT pid, query_start, state_change, state FROM pg_stat_activity WHERE application_name = %s ORDER BY pid"


def _named(url: str, name: str) -> str:
    """``url`` with ``application_name=name``: every backend of the store carries it."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["application_name"] = name
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + FAILURE_DEADLINE
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def admin(pg_base_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def name() -> str:
    return f"listen-{uuid.uuid4().hex[:8]}"


def _listener_pids(admin: psycopg.Connection[Any], name: str) -> list[int]:
    return [int(row[0]) for row in admin.execute(LISTENERS, (name,)).fetchall()]


class Waiting:
    """Counts the engine's watches inside a wait: ``all_idle(n)`` once ``n`` waiters sleep with nothing pending."""

    def __init__(self, engine: PostgresEngine, monkeypatch: pytest.MonkeyPatch) -> None:
        self.engine = engine
        self.inside: set[Any] = set()
        self.lock = threading.Lock()
        original = engine.watch
        waiting = self

        class Counted(ChangeWatch):
            reliable = True

            def __init__(self, watch: ChangeWatch) -> None:
                self.inner = watch

            def wait(self, timeout: float) -> bool:
                with waiting.lock:
                    waiting.inside.add(self)
                try:
                    return self.inner.wait(timeout)
                finally:
                    with waiting.lock:
                        waiting.inside.discard(self)

            async def wait_async(self, timeout: float) -> bool:
                with waiting.lock:
                    waiting.inside.add(self)
                try:
                    return await self.inner.wait_async(timeout)
                finally:
                    with waiting.lock:
                        waiting.inside.discard(self)

            def close(self) -> None:
                self.inner.close()

        monkeypatch.setattr(engine, "watch", lambda channel, poll: Counted(original(channel, poll)))

    def all_idle(self, count: int) -> bool:
        """``count`` waiters are inside a wait, on LISTENed channels, none of them woken and not yet running."""
        listener = self.engine._listener
        if listener is None:
            return False
        with self.lock:
            inside = [counted.inner for counted in self.inside]
        with listener._lock:
            listening = set(listener._listening)
        return (
            len(inside) == count
            and all(watch.channel in listening for watch in inside)
            and not any(watch._fired.is_set() for watch in inside)
        )


def _thread(target: Callable[[], Any], results: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(target())
        except BaseException as exc:
            results.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


CHILD = textwrap.dedent(
    """
    import sys
    import durastate

    with durastate.open(sys.argv[1]) as store:
        print("ready", flush=True)
        payload = store.queues.pop("handoff", wait=float(sys.argv[2]))
        print(repr(payload), flush=True)
    """
)


def test_a_waiter_in_another_process_wakes_after_a_commit(pg_url: str, admin: Any, name: str) -> None:
    url = _named(pg_url, name)
    with durastate.open(url) as store:
        store.queues.push("warm-up", [b"x"])  # migrated before the child opens
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, str(LONG_WAIT)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            # Its listener has LISTENed (and so its check found the queue empty, or runs after the push).
            _until(lambda: len(_listener_pids(admin, name)) == 1, "the child's listener to LISTEN")
            store.queues.push("handoff", [b"across processes"])
            out, _ = child.communicate(timeout=FAILURE_DEADLINE)
        finally:
            child.kill()
            child.wait()
        assert out.strip() == repr(b"across processes")
        assert store.queues.pop("handoff") is None  # the child took it


def test_many_sync_and_async_waiters_share_one_listening_backend(
    pg_url: str, admin: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    channels = 6

    async def scenario() -> None:
        # One pooled connection for statements: the listener is not one of the pool's.
        async with await aio.open(_named(pg_url, name), min_connections=1, max_connections=1) as astore:
            store = astore._store
            engine = store.engine
            assert isinstance(engine, PostgresEngine)
            waiting = Waiting(engine, monkeypatch)
            results: list[Any] = []
            threads = [_thread(lambda i=i: store.queues.pop(f"sync-{i}", wait=LONG_WAIT), results) for i in range(3)]
            threads += [
                _thread(lambda i=i: store.queues.claim(f"both-{i}", lease=30, wait=LONG_WAIT), results)
                for i in range(channels)
            ]
            tasks = [asyncio.ensure_future(astore.queues.pop(f"async-{i}", wait=LONG_WAIT)) for i in range(3)]
            tasks += [
                asyncio.ensure_future(astore.queues.claim(f"both-{i}", lease=30, wait=LONG_WAIT))
                for i in range(channels)
            ]
            waiters = len(threads) + len(tasks)
            await asyncio.to_thread(_until, lambda: waiting.all_idle(waiters), "every waiter to wait")
            assert engine._listener is not None
            pids = await asyncio.to_thread(_listener_pids, admin, name)
            assert pids == [engine._listener.backend_pid]  # exactly one backend listens, for all of them
            await asyncio.to_thread(store.queues.push, "sync-0", [b"s0"])
            await astore.queues.push("async-0", [b"a0"])
            for i in range(channels):
                await astore.queues.push(f"both-{i}", [b"b%d" % i, b"c%d" % i])
            for i in (1, 2):
                store.queues.push(f"sync-{i}", [b"s%d" % i])
                store.queues.push(f"async-{i}", [b"a%d" % i])
            got = await asyncio.wait_for(asyncio.gather(*tasks), FAILURE_DEADLINE)
            for thread in threads:
                await asyncio.to_thread(thread.join, FAILURE_DEADLINE)
            assert not any(isinstance(r, BaseException) for r in results), results
            popped = sorted(r for r in [*results, *got] if isinstance(r, bytes))
            claimed = sorted(r.payload for r in [*results, *got] if r is not None and not isinstance(r, bytes))
            assert popped == [b"a0", b"a1", b"a2", b"s0", b"s1", b"s2"]
            assert claimed == sorted(b"%s%d" % (p, i) for p in (b"b", b"c") for i in range(channels))
            assert await asyncio.to_thread(_listener_pids, admin, name) == pids  # still the same one

    asyncio.run(scenario())


def test_an_idle_store_with_waiters_sends_no_statement(
    pg_url: str, admin: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pool of fixed size: one growing in the background would configure new sessions during the window.
    with durastate.open(_named(pg_url, name), min_connections=2, max_connections=2) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        store.queues.push("warm-up", [b"x"])
        waiting = Waiting(engine, monkeypatch)
        results: list[Any] = []
        threads = [_thread(lambda i=i: store.queues.claim(f"idle-{i}", wait=LONG_WAIT), results) for i in range(4)]
        stop = threading.Event()
        stream = store.events.stream("idle-session", stop=stop, poll_interval=0.01)
        threads.append(_thread(lambda: list(stream), results))
        _until(lambda: waiting.all_idle(5), "every waiter to wait")
        before = admin.execute(ACTIVITY, (name,)).fetchall()
        assert len(before) == 3  # the pool's two connections and the listener
        assert len(_listener_pids(admin, name)) == 1
        # A window in which pollers would have run their checks many times (the stream's poll_interval:
        # 10 ms); an idle backend's query_start and state_change move with each statement it runs.
        time.sleep(1.0)
        after = admin.execute(ACTIVITY, (name,)).fetchall()
        assert after == before
        assert all(row[3] == "idle" for row in after)
        stop.set()
        store.events.append("idle-session", [{"type": "t", "payload": {}}])
        for i in range(4):
            store.queues.push(f"idle-{i}", [b"%d" % i])
        for thread in threads:
            thread.join(FAILURE_DEADLINE)
        assert sorted(r.payload for r in results if not isinstance(r, list)) == [b"0", b"1", b"2", b"3"]


def _gate_reconnects(monkeypatch: pytest.MonkeyPatch, listener: Any) -> tuple[threading.Event, threading.Event]:
    """``(gate, reconnecting)``: the listener's next connects wait for ``gate``; ``reconnecting`` once one does."""
    gate, reconnecting = threading.Event(), threading.Event()
    connect = listener._connect

    def gated_connect() -> psycopg.Connection[Any]:
        reconnecting.set()
        gate.wait(FAILURE_DEADLINE)
        return connect()

    monkeypatch.setattr(listener, "_connect", gated_connect)
    return gate, reconnecting


def test_waiters_survive_their_listening_backend_being_terminated(
    pg_url: str, admin: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        async with await aio.open(_named(pg_url, name)) as astore:
            store = astore._store
            engine = store.engine
            assert isinstance(engine, PostgresEngine)
            waiting = Waiting(engine, monkeypatch)
            results: list[Any] = []
            threads = [
                _thread(lambda: store.queues.claim("missed-sync", lease=30, wait=LONG_WAIT), results),
                _thread(lambda: store.queues.claim("later-sync", lease=30, wait=LONG_WAIT), results),
            ]
            tasks = [
                asyncio.ensure_future(astore.queues.pop("missed-async", wait=LONG_WAIT)),
                asyncio.ensure_future(astore.queues.pop("later-async", wait=LONG_WAIT)),
            ]
            await asyncio.to_thread(_until, lambda: waiting.all_idle(4), "every waiter to wait")
            listener = engine._listener
            assert listener is not None
            gate, reconnecting = _gate_reconnects(monkeypatch, listener)
            (pid,) = _listener_pids(admin, name)
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await asyncio.to_thread(reconnecting.wait, FAILURE_DEADLINE)
            assert reconnecting.is_set()
            # Committed while no connection listens: no notification reaches this store. The waiters,
            # woken by the loss, poll until the listener is back, and find the items.
            store.queues.push("missed-sync", [b"missed sync"])
            store.queues.push("missed-async", [b"missed async"])
            await asyncio.wait_for(tasks[0], FAILURE_DEADLINE)
            await asyncio.to_thread(_until, lambda: len(results) == 1, "the sync waiter to poll")
            assert not gate.is_set() and listener.connects == 1
            gate.set()
            later = {engine.channel("queue:" + f"later-{kind}".encode().hex()) for kind in ("sync", "async")}
            await asyncio.to_thread(
                _until, lambda: all(listener.listening(c) for c in later), "the listener to listen again"
            )
            assert len(_listener_pids(admin, name)) == 1 and listener.connects == 2
            # Listening again: later commits wake the others.
            await astore.queues.push("later-async", [b"later async"])
            store.queues.push("later-sync", [b"later sync"])
            await asyncio.wait_for(tasks[1], FAILURE_DEADLINE)
            for thread in threads:
                await asyncio.to_thread(thread.join, FAILURE_DEADLINE)
            assert not any(isinstance(r, BaseException) for r in results), results
            assert [r.payload for r in results] == [b"missed sync", b"later sync"]
            assert [t.result() for t in tasks] == [b"missed async", b"later async"]

    asyncio.run(scenario())


def test_a_reconnected_listener_wakes_every_watch_once_to_catch_up(
    pg_url: str, admin: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with durastate.open(_named(pg_url, name)) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        with engine.watch("catch-up", LONG_WAIT) as watch:
            listener = engine._listener
            assert listener is not None
            channel = engine.channel("catch-up")
            _until(lambda: listener.listening(channel), "the LISTEN")
            assert watch.wait(FAILURE_DEADLINE)  # woken once by its LISTEN
            assert not watch.wait(0)  # and nothing since
            gate, reconnecting = _gate_reconnects(monkeypatch, listener)
            (pid,) = _listener_pids(admin, name)
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            assert reconnecting.wait(FAILURE_DEADLINE)
            assert watch.wait(0)  # woken by the loss: unheard now, it polls
            assert watch.wait(0.01)  # a poll's answer: look again
            gate.set()
            _until(lambda: listener.listening(channel), "the LISTEN again")
            assert watch.wait(FAILURE_DEADLINE)  # woken by the new LISTEN: whatever was missed, look again
            assert not watch.wait(0)  # once


def test_closing_the_store_ends_its_waiters_and_its_listener(
    pg_url: str, admin: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        astore = await aio.open(_named(pg_url, name))
        store = astore._store
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        waiting = Waiting(engine, monkeypatch)
        results: list[Any] = []
        threads = [_thread(lambda i=i: store.queues.pop(f"closing-{i}", wait=LONG_WAIT), results) for i in range(3)]
        task = asyncio.ensure_future(astore.queues.claim("closing-async", wait=LONG_WAIT))
        await asyncio.to_thread(_until, lambda: waiting.all_idle(4), "every waiter to wait")
        listener = engine._listener
        assert listener is not None and listener._thread is not None
        await astore.close()
        for thread in threads:
            await asyncio.to_thread(thread.join, FAILURE_DEADLINE)
            assert not thread.is_alive()
        assert len(results) == 3 and all(isinstance(r, StoreClosed) for r in results), results
        with pytest.raises(StoreClosed):
            await asyncio.wait_for(task, FAILURE_DEADLINE)
        await asyncio.to_thread(listener._thread.join, FAILURE_DEADLINE)
        assert not listener._thread.is_alive()
        await asyncio.to_thread(_until, lambda: not _listener_pids(admin, name), "the listening backend to end")

    asyncio.run(scenario())


def test_a_forked_child_listens_on_its_own_connection(pg_url: str, admin: Any, name: str) -> None:
    with durastate.open(_named(pg_url, name)) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        assert store.queues.pop("parent", wait=0.01) is None  # the parent's listener exists
        listener = engine._listener
        assert listener is not None
        _until(lambda: listener.backend_pid is not None, "the parent's listener to connect")
        parent_pid = listener.backend_pid
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            code = 1
            try:
                popped = store.queues.pop("child", wait=LONG_WAIT)
                listener = engine._listener
                own = listener is not None and listener.backend_pid not in (None, parent_pid)
                os.write(write, b"ok" if popped == b"for the child" and own else repr(popped).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        try:
            _until(lambda: len(_listener_pids(admin, name)) == 2, "the child's own listener")
            store.queues.push("child", [b"for the child"])
            with os.fdopen(read, "rb") as pipe:
                assert pipe.read() == b"ok"
        finally:
            _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        # The parent's listener is untouched: it still wakes the parent's waiters.
        assert engine._listener is not None and engine._listener.backend_pid == parent_pid
        results: list[Any] = []
        thread = _thread(lambda: store.queues.pop("parent", wait=LONG_WAIT), results)
        store.queues.push("parent", [b"for the parent"])
        thread.join(FAILURE_DEADLINE)
        assert results == [b"for the parent"]


def test_channels_past_the_kept_bound_are_unlistened(
    pg_url: str, admin: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_listen, "KEPT_CHANNELS", 3)
    with durastate.open(_named(pg_url, name)) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        for i in range(6):
            assert store.queues.pop(f"many-{i}", wait=0.001) is None
        listener = engine._listener
        assert listener is not None
        kept = {engine.channel(f"queue:{f'many-{i}'.encode().hex()}") for i in (3, 4, 5)}

        def settled() -> bool:
            with listener._lock:
                return set(listener._wanted) == kept and listener._listening == kept

        _until(settled, "the oldest channels to be unlistened")
        # A channel watched again is LISTENed again, and wakes its waiter.
        results: list[Any] = []
        thread = _thread(lambda: store.queues.pop("many-0", wait=LONG_WAIT), results)
        channel = engine.channel("queue:" + b"many-0".hex())
        _until(lambda: channel in listener._listening, "the channel to be LISTENed again")
        store.queues.push("many-0", [b"again"])
        thread.join(FAILURE_DEADLINE)
        assert results == [b"again"]


def test_waiters_take_items_that_come_due_without_a_notification(pg_url: str) -> None:
    """A delayed push and a lapsed lease make an item available with no NOTIFY then: waiters look again."""

    async def scenario() -> None:
        async with await aio.open(pg_url) as astore:
            store = astore._store
            store.queues.push("delayed-sync", [b"later"], delay=0.2)
            await astore.queues.push("delayed-async", [b"later"], delay=0.2)
            store.queues.push("leased", [b"leased"])
            assert store.queues.claim("leased", lease=0.2) is not None  # then never acked: the lease runs out
            results: list[Any] = []
            thread = _thread(lambda: store.queues.pop("delayed-sync", wait=LONG_WAIT), results)
            popped = await asyncio.wait_for(astore.queues.pop("delayed-async", wait=LONG_WAIT), FAILURE_DEADLINE)
            reclaimed = await asyncio.wait_for(astore.queues.claim("leased", wait=LONG_WAIT), FAILURE_DEADLINE)
            await asyncio.to_thread(thread.join, FAILURE_DEADLINE)
            assert results == [b"later"] and popped == b"later"
            assert reclaimed is not None and reclaimed.payload == b"leased" and reclaimed.attempts == 2

    asyncio.run(scenario())


def test_a_store_dropped_without_close_stops_its_listener(pg_url: str, admin: Any, name: str) -> None:
    import gc

    store = durastate.open(_named(pg_url, name))
    assert store.queues.pop("dropped", wait=0.001) is None
    engine = store.engine
    assert isinstance(engine, PostgresEngine) and engine._listener is not None
    thread = engine._listener._thread
    assert thread is not None
    del store, engine
    gc.collect()
    thread.join(FAILURE_DEADLINE)
    assert not thread.is_alive()
    _until(lambda: not _listener_pids(admin, name), "the listening backend to end")
