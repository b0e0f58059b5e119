"""Write transactions sent from the event loop's thread, their COMMIT's answer collected there (``postgres_loop``).

``AsyncCalls.transact_repeatable`` (the LangGraph saver's ``aput`` and
``aput_writes``) runs its function on the loop's thread without waiting;
where it would wait, the attempt is abandoned before its COMMIT and the
function runs again on a worker. Each test records the threads its
function ran on, so it shows which path a call took, and counts a witness
row, so it shows the transaction applied once. The relay (``CuttingProxy``)
cuts the connection at the COMMIT.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines.base import WRITE
from durastate.engines.postgres import PostgresEngine
from durastate.integrations._common import AsyncCalls
from durastate.integrations.langgraph import DurastateSaver

from .proxy import CuttingProxy

pytestmark = pytest.mark.timeout(120)

LOOP = threading.main_thread().name  # asyncio.run runs the loop on the calling (main) thread
WITNESS = WRITE("INSERT INTO witness (n) VALUES (1)")
# Blocks while another transaction holds an uncommitted row 1 in gate: the COMMIT's answer waits for it.
GATED = WRITE("INSERT INTO gate (id) VALUES (1) ON CONFLICT DO NOTHING")
DOUBLE = WRITE("INSERT INTO gate (id) VALUES (7)")  # run twice in one transaction: the second fails


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE witness (n int)")
        conn.execute("CREATE TABLE gate (id int PRIMARY KEY)")
        yield conn


def _open(url: str, pg_url: str, **options: Any) -> durastate.Store:
    durastate.open(pg_url).close()  # migrate without the relay in the way
    store = durastate.open(url, **options)
    pool = store.engine._pool  # type: ignore[attr-defined]
    pool.wait()  # its min_connections connected and idle: the loop takes only an idle one
    return store


@pytest.fixture
def store(pg_url: str, via_proxy: str, admin: psycopg.Connection[Any]) -> Iterator[durastate.Store]:
    """Through the relay, one fresh connection: the first COMMIT's text goes over the wire (``proxy``)."""
    s = _open(via_proxy, pg_url, min_connections=1, max_connections=2)
    yield s
    s.close()


def _witness_count(admin: psycopg.Connection[Any]) -> int:
    row = admin.execute("SELECT count(*) FROM witness").fetchone()
    assert row is not None
    return int(row[0])


def _recording(store: durastate.Store, ran: list[str], *statements: Any) -> Any:
    """A transaction body sending ``statements`` unawaited (``engine.send``), noting the thread it ran on."""
    engine = store.engine
    compiled = [engine.sql(statement) for statement in statements]

    def body() -> None:
        ran.append(threading.current_thread().name)
        for sql in compiled:
            engine.send(sql)

    return body


def test_a_write_transaction_commits_from_the_loop(store: durastate.Store, admin: psycopg.Connection[Any]) -> None:
    ran: list[str] = []
    calls = AsyncCalls(store, "loopcommits")

    async def main() -> None:
        await calls.transact_repeatable(_recording(store, ran, WITNESS))
        await calls.transact_repeatable(_recording(store, ran, WITNESS))

    asyncio.run(main())
    calls.close()
    assert ran == [LOOP, LOOP]
    assert _witness_count(admin) == 2


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_commit_whose_answer_is_lost_applies_once(
    store: durastate.Store, admin: psycopg.Connection[Any], proxy: CuttingProxy, cut: str
) -> None:
    """Reply lost: the attempt row shows it committed, nothing sent again; request lost: the flight sent again."""
    ran: list[str] = []
    calls = AsyncCalls(store, "loopcommits")
    getattr(proxy, f"drop_{cut}")(b"COMMIT")
    asyncio.run(calls.transact_repeatable(_recording(store, ran, WITNESS)))
    calls.close()
    assert proxy.cuts == 1
    assert ran == [LOOP]
    assert _witness_count(admin) == 1


def test_a_failed_commit_raises_to_the_caller_and_applies_nothing(
    store: durastate.Store, admin: psycopg.Connection[Any]
) -> None:
    ran: list[str] = []
    calls = AsyncCalls(store, "loopcommits")
    with pytest.raises(durastate.Conflict):
        asyncio.run(calls.transact_repeatable(_recording(store, ran, WITNESS, DOUBLE, DOUBLE)))
    calls.close()
    assert ran == [LOOP]
    assert _witness_count(admin) == 0


def test_a_statement_whose_answer_is_read_moves_the_call_to_a_worker(
    store: durastate.Store, admin: psycopg.Connection[Any]
) -> None:
    """Abandoned before its COMMIT: nothing of the first attempt applied, its connection back in the pool."""
    ran: list[str] = []
    calls = AsyncCalls(store, "loopcommits")
    send = _recording(store, ran, WITNESS)

    def reads() -> bytes | None:
        send()
        return store.kv.get(b"s", b"n", b"k")

    assert asyncio.run(calls.transact_repeatable(reads)) is None
    calls.close()  # waits for the abandoned attempt's rollback too
    assert ran[0] == LOOP and len(ran) == 2 and ran[1].startswith("loopcommits")
    assert _witness_count(admin) == 1
    stats = store.engine._pool.get_stats()  # type: ignore[attr-defined]
    assert stats["pool_available"] == stats["pool_size"]


def test_no_idle_connection_moves_the_call_to_a_worker(store: durastate.Store, admin: psycopg.Connection[Any]) -> None:
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    held = engine._borrow()  # the only idle connection: the loop never waits for the pool
    ran: list[str] = []
    calls = AsyncCalls(store, "loopcommits")
    try:
        asyncio.run(calls.transact_repeatable(_recording(store, ran, WITNESS)))
    finally:
        engine._give_back(held)
    calls.close()
    assert len(ran) == 1 and ran[0].startswith("loopcommits")
    assert _witness_count(admin) == 1


def _gate_held(admin: psycopg.Connection[Any]) -> None:
    """Row 1 of gate inserted, uncommitted: a GATED insert waits until ``admin.rollback()``."""
    admin.autocommit = False
    admin.execute("INSERT INTO gate (id) VALUES (1)")


async def _gated_write_sent(calls: AsyncCalls, store: durastate.Store, ran: list[str]) -> asyncio.Task[None]:
    """A task writing the witness row and a GATED row; returned once its COMMIT went out (its answer waits)."""
    body = _recording(store, ran, WITNESS, GATED)
    sent = asyncio.Event()

    def signalled() -> None:
        body()
        sent.set()

    task = asyncio.create_task(calls.transact_repeatable(signalled))
    await sent.wait()
    return task


def test_a_caller_cancelled_while_the_answer_is_awaited_leaves_it_to_aclose(
    store: durastate.Store, admin: psycopg.Connection[Any]
) -> None:
    ran: list[str] = []
    calls = AsyncCalls(store, "loopcommits")
    _gate_held(admin)

    async def main() -> None:
        task = await _gated_write_sent(calls, store, ran)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        admin.rollback()  # the gate opens: the answer comes, collected on this loop
        await calls.aclose()  # waits for the collection

    asyncio.run(main())
    admin.autocommit = True
    assert ran == [LOOP]
    assert _witness_count(admin) == 1


def test_a_collection_whose_loop_ended_is_finished_by_close(
    store: durastate.Store, admin: psycopg.Connection[Any]
) -> None:
    ran: list[str] = []
    left: list[asyncio.Task[None]] = []
    calls = AsyncCalls(store, "loopcommits")
    _gate_held(admin)

    async def main() -> None:
        left.append(await _gated_write_sent(calls, store, ran))  # asyncio.run then ends with its answer uncollected

    asyncio.run(main())
    admin.rollback()
    admin.autocommit = True
    closing = threading.Thread(target=calls.close)
    closing.start()
    closing.join(60)  # a close that could not finish the collection would wait forever
    assert not closing.is_alive()
    assert ran == [LOOP]
    assert _witness_count(admin) == 1


def test_a_saver_put_whose_commit_answer_is_lost_is_kept(store: durastate.Store, proxy: CuttingProxy) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = DurastateSaver(store)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    proxy.drop_reply(b"COMMIT")

    async def main() -> Any:
        stored = await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        return stored, await saver.aget_tuple(stored)

    stored, found = asyncio.run(main())
    assert proxy.cuts == 1
    assert found is not None and found.config == stored


def test_the_savers_writes_run_once_from_the_loop(store: durastate.Store) -> None:
    """``aput`` and every kind of ``aput_writes`` send everything and await only the COMMIT: one run, on the loop.

    Regular writes are stored only where their key is free (LangGraph's
    ``ON CONFLICT DO NOTHING``), special ones (an error, an interrupt)
    replace: a count waited for in either would abandon the attempt and
    run the call again on a worker (the regression this pins: regular
    writes read their count, and every ``aput_writes`` ran twice).
    """
    from langgraph.checkpoint.base import WRITES_IDX_MAP, empty_checkpoint

    error, interrupt = "__error__", "__interrupt__"
    assert {error, interrupt} <= set(WRITES_IDX_MAP), "LangGraph renamed its special channels"
    saver = DurastateSaver(store)
    ran: list[tuple[str, str]] = []
    for name in ("_put", "put_writes"):
        real = getattr(saver, name)

        def record(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            ran.append((_name, threading.current_thread().name))
            return _real(*args, **kwargs)

        setattr(saver, name, record)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

    async def main() -> Any:
        stored = await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        await saver.aput_writes(stored, [("messages", "a"), ("step", 1)], "regular")
        await saver.aput_writes(stored, [("messages", "again")], "regular")  # its key taken: the first stays
        await saver.aput_writes(stored, [(error, "boom")], "special")
        await saver.aput_writes(stored, [(error, "boom again")], "special")  # replaces
        await saver.aput_writes(stored, [("messages", "b"), (interrupt, "stop")], "mixed")
        return await saver.aget_tuple(stored)

    found = asyncio.run(main())
    assert ran == [("_put", LOOP)] + [("put_writes", LOOP)] * 5
    assert found is not None
    assert sorted((task, channel, value) for task, channel, value in found.pending_writes) == [
        ("mixed", interrupt, "stop"),
        ("mixed", "messages", "b"),
        ("regular", "messages", "a"),
        ("regular", "step", 1),
        ("special", error, "boom again"),
    ]
