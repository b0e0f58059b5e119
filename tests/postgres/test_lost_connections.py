"""Connections the server drops: every facet's next call succeeds, sync and async, and waiters keep waiting.

The server ends a store's sessions (``pg_terminate_backend`` on every
backend of its pool and its listening connection, or an
``idle_session_timeout`` of one second while the store sits idle, as a
proxy dropping idle connections during a long LLM call would); the store
finds out on its next statement, discards the dead connections (the pool
refills) and retries under the attempt rules. Each store is told apart on
the server by the ``application_name`` its URL gives.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

import durastate
from durastate import aio

pytestmark = pytest.mark.timeout(120)

# One call of every facet: (name, call(store, i)); the async store's methods return awaitables.
CALLS: list[tuple[str, Callable[[Any, int], Any]]] = [
    ("kv.put", lambda s, i: s.kv.put(b"s", b"n", b"k%d" % i, b"v")),
    ("kv.get", lambda s, i: s.kv.get(b"s", b"n", b"k%d" % i)),
    ("kv.incr", lambda s, i: s.kv.incr(b"s", b"n", b"counter")),
    ("kv.append", lambda s, i: s.kv.append(b"s", b"n", b"log", b"%d" % i)),
    ("queues.push", lambda s, i: s.queues.push("q", [b"%d" % i])),
    ("queues.claim", lambda s, i: s.queues.claim("q", lease=30)),
    ("documents.write", lambda s, i: s.documents.write(f"doc-{i}", {"i": i})),
    ("documents.read", lambda s, i: s.documents.read(f"doc-{i}")),
    ("events.append", lambda s, i: s.events.append(f"session-{i}", [{"type": "t", "payload": {"i": i}}])),
    ("events.claim", lambda s, i: s.events.claim_available(f"session-{i}", "holder", ttl_ms=30_000)),
    ("records.commit", lambda s, i: s.records.commit([{"type": "conversation", "value": {"id": 1000 + i}}])),
    ("records.last_seq", lambda s, i: s.records.last_seq()),
    ("presence.set", lambda s, i: s.presence.set("room", f"p{i}", {"on": True}, at_ms=1, seen=1, ttl_ms=60_000)),
]


def _with_params(url: str, name: str, *startup: str) -> str:
    """``url`` with ``application_name=name`` and ``-c`` startup settings added to its options."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["application_name"] = name
    query["options"] = " ".join([query.get("options", ""), *(f"-c{s}" for s in startup)]).strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _backends(admin: psycopg.Connection[Any], name: str) -> int:
    row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


def _terminate_all(admin: psycopg.Connection[Any], name: str) -> int:
    """Terminate every backend of the store called ``name``; return how many, once those have exited.

    It waits for the terminated backends themselves, not for the store to have none: the store's pool
    reconnects within a fraction of a second, so its backend count may never be seen at zero.
    """
    mine = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    pids = [row[0] for row in admin.execute(mine, (name,)).fetchall()]
    admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
    alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
    _until(lambda: admin.execute(alive, (pids,)).fetchone()[0] == 0, f"the backends of {name} to exit")
    return len(pids)


def _until(ready: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def admin(pg_base_url: str) -> Any:
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        yield conn


def _run_calls_sync(store: durastate.Store, round_: int) -> None:
    for name, call in CALLS:
        try:
            call(store, round_)
        except durastate.DurastateError as exc:
            pytest.fail(f"{name} after the connections were dropped: {exc!r}")


async def _run_calls_async(store: Any, round_: int) -> None:
    for name, call in CALLS:
        try:
            await call(store, round_)
        except durastate.DurastateError as exc:
            pytest.fail(f"async {name} after the connections were dropped: {exc!r}")


def test_every_facet_survives_its_backends_being_terminated(pg_url: str, admin: Any) -> None:
    name = f"lost-{uuid.uuid4().hex[:8]}"
    with durastate.open(_with_params(pg_url, name), min_connections=4) as store:
        _run_calls_sync(store, 0)
        assert _terminate_all(admin, name) >= 4
        _run_calls_sync(store, 1)
        assert _terminate_all(admin, name) >= 1  # and again: the refilled pool is a new generation
        _run_calls_sync(store, 2)
        assert store.kv.counter(b"s", b"n", b"counter") == 3  # each increment applied once


def test_every_async_facet_survives_its_backends_being_terminated(pg_url: str, admin: Any) -> None:
    name = f"lost-{uuid.uuid4().hex[:8]}"

    async def scenario() -> int:
        async with await aio.open(_with_params(pg_url, name), min_connections=4) as store:
            await _run_calls_async(store, 0)
            assert await asyncio.to_thread(_terminate_all, admin, name) >= 4
            await _run_calls_async(store, 1)
            return int(await store.kv.counter(b"s", b"n", b"counter"))

    assert asyncio.run(scenario()) == 2


def test_an_idle_store_whose_sessions_timed_out_raises_nothing(pg_url: str, admin: Any) -> None:
    name = f"idle-{uuid.uuid4().hex[:8]}"
    url = _with_params(pg_url, name, "idle_session_timeout=1000")
    with durastate.open(url, min_connections=3) as store:
        _run_calls_sync(store, 0)
        _until(lambda: _backends(admin, name) == 0, "the server to end the idle sessions")
        _run_calls_sync(store, 1)

    async def scenario() -> None:
        async with await aio.open(url, min_connections=3) as astore:
            await _run_calls_async(astore, 2)
            await asyncio.to_thread(_until, lambda: _backends(admin, name) == 0, "the idle sessions to end")
            await _run_calls_async(astore, 3)

    asyncio.run(scenario())


def test_a_waiter_keeps_waiting_when_its_listening_connection_is_terminated(pg_url: str, admin: Any) -> None:
    name = f"waiter-{uuid.uuid4().hex[:8]}"
    with durastate.open(_with_params(pg_url, name), min_connections=2) as store:
        got: list[Any] = []
        failed: list[BaseException] = []

        def waiter() -> None:
            try:
                got.append(store.queues.claim("wake", lease=30, wait=60))
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=waiter)
        thread.start()
        listening = (
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND query LIKE 'LISTEN%%'"
            " AND state = 'idle'"
        )
        _until(lambda: admin.execute(listening, (name,)).fetchone()[0] >= 1, "the waiter to LISTEN")
        _terminate_all(admin, name)
        # It noticed, and waits again on a new connection (no error reached it).
        _until(lambda: admin.execute(listening, (name,)).fetchone()[0] >= 1, "the waiter to LISTEN again")
        assert not failed, "".join(traceback.format_exception(failed[0]))  # where an error came from, if one did
        assert not got
        store.queues.push("wake", [b"after"])
        thread.join(timeout=60)
        assert not failed, failed
        assert got and got[0] is not None and got[0].payload == b"after"
