"""The integrations' one async path (``integrations._common.AsyncCalls``): where calls run, cancellation, closing.

On a SQLite file an uncontended async call runs on the event loop's thread
(no thread hop); on PostgreSQL on a worker thread, except the LangGraph
saver's writes, sent from the loop's thread without waiting (only their
COMMIT's answer is awaited there: ``AsyncCalls.transact_repeatable``). A cancelled write leaves
nothing behind: the LangGraph saver's and LangChain's writes roll back when
cancelled before they commit; the OpenAI Agents session carries a mutation
to its end (the SDK's rule) and raises the cancellation only once nothing of
it is running. A borrowed store stays open when the integration closes; an
owned one closes after the workers are done.

A ``Blocker`` (``_async_calls``) is another connection's open transaction
holding what the call needs: SQLite's write lock, or PostgreSQL row locks on
the keys the call writes. Calls then wait on a worker thread, where they are
cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")
pytest.importorskip("agents.memory")
pytest.importorskip("langchain_core.stores")

from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.store.base import PutOp

import durastate
from durastate.engines import sqlite_busy
from durastate.engines.sqlite_connections import WriterGate
from durastate.engines.sqlite_transaction import SqliteTransactions
from durastate.integrations._common import Holder
from durastate.integrations.langchain import DurastateByteStore, DurastateCache
from durastate.integrations.langgraph import DurastateSaver, DurastateStore
from durastate.integrations.langgraph._layout import ThreadRows
from durastate.integrations.openai_agents import LAST_ORDINAL_KEY, SCOPE, DurastateSession
from durastate.testing.locking import WriteLockHolder

from ._async_calls import Blocker, busy, cancel_rolls_back, cancel_waits_for_the_outcome, on_a_worker


def checkpoint_args(thread: str, step: int = 1) -> tuple[Any, Any, Any, Any]:
    """``put`` arguments: a first checkpoint of ``thread`` with one stored channel value."""
    checkpoint = create_checkpoint(empty_checkpoint(), None, step)
    checkpoint["channel_values"] = {"messages": [f"hello {step}"]}
    checkpoint["channel_versions"] = {"messages": f"{step:032}.0"}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return config, checkpoint, {"source": "loop", "step": step, "run_id": "r"}, {"messages": f"{step:032}.0"}


def thread_rows(store: durastate.Store, thread: str) -> list[bytes]:
    return [key for key, _ in ThreadRows(store.kv, b"langgraph", thread).scan()]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# -- where calls run ---------------------------------------------------------------


def traced(target: Any, name: str, calls: list[tuple[str, threading.Thread]]) -> None:
    """Record the name and the thread of every call of ``target.name``."""
    real = getattr(target, name)

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, threading.current_thread()))
        return real(*args, **kwargs)

    setattr(target, name, record)


def test_uncontended_calls_run_inline_on_a_sqlite_file_and_on_workers_on_postgres(
    shared_store: durastate.Store, shared_url: str
) -> None:
    saver, memory = DurastateSaver(shared_store), DurastateStore(shared_store)
    session, byte_store = DurastateSession("s", store=shared_store), DurastateByteStore(store=shared_store)
    calls: list[tuple[str, threading.Thread]] = []
    for target, name in [
        (saver, "_put"),  # what put and aput run
        (saver, "put_writes"),
        (saver, "get_tuple"),
        (saver, "list"),
        (memory, "_run"),  # what batch and abatch run, after embedding
        (session, "_add_items"),
        (session, "_get_items"),
        (byte_store, "mset"),
        (byte_store, "_keys"),
    ]:
        traced(target, name, calls)

    async def main() -> threading.Thread:
        config = await saver.aput(*checkpoint_args("t"))
        await saver.aput_writes(config, [("messages", "w")], "task")
        assert (await saver.aget_tuple(config)) is not None
        assert len([t async for t in saver.alist(None)]) == 1
        await memory.aput(("ns",), "k", {"v": 1})
        assert (await memory.aget(("ns",), "k")) is not None
        await session.add_items([user("a")])
        assert await session.get_items() == [user("a")]
        await byte_store.amset([("k", b"v")])
        assert [k async for k in byte_store.ayield_keys()] == ["k"]
        return threading.current_thread()

    loop_thread = asyncio.run(main())
    # put, put_writes, get_tuple, list, batch x2, add, get, mset, keys
    wanted = ["_put", "put_writes", "get_tuple", "list", "_run", "_run", "_add_items", "_get_items", "mset", "_keys"]
    if shared_url.startswith("sqlite"):
        assert calls == [(name, loop_thread) for name in wanted]
    else:
        # The saver's two writes are sent from the loop's thread (transact_repeatable) when a pooled connection
        # is idle; one that would wait (none idle yet, as on a loaded machine) runs on a worker instead, after its
        # attempt on the loop's thread if that had begun (tests/postgres/test_loop_commits.py pins both cases).
        # Every other call waits on a worker.
        repeatable = {"_put", "put_writes"}
        on_loop = [name for name, thread in calls if thread is loop_thread]
        assert set(on_loop) <= repeatable and len(on_loop) == len(set(on_loop))
        moved = {name for name, thread in calls if name in repeatable and thread is not loop_thread}
        assert [name for name, thread in calls if not (thread is loop_thread and name in moved)] == wanted
    for holder in (saver, memory, session, byte_store):
        holder.close()


def test_async_delta_channel_history_is_the_sync_walk(shared_store: durastate.Store) -> None:
    saver = DurastateSaver(shared_store)
    first = saver.put(*checkpoint_args("t"))
    saver.put_writes(first, [("messages", "w1")], "task")
    _, checkpoint, metadata, versions = checkpoint_args("t", step=2)
    second = saver.put(first, checkpoint, metadata, versions)
    wanted = saver.get_delta_channel_history(config=second, channels=["messages"])
    assert wanted["messages"]["writes"] != []
    assert asyncio.run(saver.aget_delta_channel_history(config=second, channels=["messages"])) == wanted
    saver.close()


# -- (a) a cancelled call leaves nothing behind -------------------------------------
#
# On PostgreSQL the saver's writes are sent from the loop's thread when a pooled connection is idle, and
# their COMMIT is out before a cancellation can arrive. Here the blocker's transaction holds the store's
# one connection (min_connections=1, nothing idle), so they run on a worker, held before their commit.


def test_a_cancelled_aput_rolls_back(shared_store: durastate.Store) -> None:
    saver = DurastateSaver(shared_store)
    # The blocker puts another first checkpoint of the same thread: on
    # PostgreSQL the namespace row both write is locked by it.
    blocker = Blocker(shared_store, lambda: saver.put(*checkpoint_args("t", step=2)))

    async def main() -> None:
        await cancel_rolls_back(blocker, saver, "_put", lambda: saver.aput(*checkpoint_args("t")))
        assert thread_rows(shared_store, "t") == []
        config = await saver.aput(*checkpoint_args("t"))  # nothing left locked
        assert (await saver.aget_tuple(config)) is not None

    asyncio.run(main())
    saver.close()


def test_a_cancelled_aput_writes_rolls_back(shared_store: durastate.Store) -> None:
    saver = DurastateSaver(shared_store)
    config = saver.put(*checkpoint_args("t"))
    before = thread_rows(shared_store, "t")
    writes = [("messages", "one"), ("other", "two")]
    blocker = Blocker(shared_store, lambda: saver.put_writes(config, writes, "task"))

    async def main() -> None:
        await cancel_rolls_back(blocker, saver, "put_writes", lambda: saver.aput_writes(config, writes, "task"))
        assert thread_rows(shared_store, "t") == before
        found = await saver.aget_tuple(config)
        assert found is not None and found.pending_writes == []

    asyncio.run(main())
    saver.close()


def test_a_cancelled_langchain_write_rolls_back(shared_store: durastate.Store) -> None:
    byte_store = DurastateByteStore(store=shared_store)
    blocker = Blocker(shared_store, lambda: byte_store.mset([("a", b"blocker")]))

    async def main() -> None:
        await cancel_rolls_back(blocker, byte_store, "mset", lambda: byte_store.amset([("a", b"1"), ("b", b"2")]))
        assert await byte_store.amget(["a", "b"]) == [None, None]

    asyncio.run(main())
    byte_store.close()


def test_a_cancelled_add_items_on_a_worker_writes_its_batch_before_the_cancellation_arrives(
    shared_store: durastate.Store,
) -> None:
    session = DurastateSession("s", store=shared_store)
    batch = [user(str(i)) for i in range(20)]
    # On PostgreSQL the ordinal counter's row lock is what add_items waits for.
    blocker = Blocker(shared_store, lambda: shared_store.kv.incr(SCOPE, b"s", LAST_ORDINAL_KEY, 1))

    async def main() -> None:
        # The SDK's rule: the mutation's outcome first; settled, all of the batch is there.
        await cancel_waits_for_the_outcome(blocker, session, lambda: session.add_items(batch))
        assert session._get_items(None) == batch

    asyncio.run(main())
    session.close()


def test_a_cancelled_add_items_that_never_started_writes_nothing(shared_store: durastate.Store) -> None:
    session = DurastateSession("s", store=shared_store)

    async def main() -> None:
        task = asyncio.create_task(session.add_items([user("never")]))
        task.cancel()  # before its first step
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await session.get_items() == []

    asyncio.run(main())
    session.close()


# -- owned and borrowed stores, closing ---------------------------------------------


def test_closing_waits_for_a_call_on_a_worker_and_leaves_a_borrowed_store_open(
    shared_store: durastate.Store,
) -> None:
    saver = DurastateSaver(shared_store)
    blocker = Blocker(shared_store, lambda: saver.put(*checkpoint_args("t", step=2)))

    async def main() -> None:
        blocker.start()
        put = asyncio.create_task(saver.aput(*checkpoint_args("t")))
        await on_a_worker(saver)
        closing = asyncio.create_task(saver.aclose())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not closing.done()  # the put is still on its worker
        await asyncio.to_thread(blocker.release)
        await closing
        assert busy(saver) == 0
        await put  # it finished before close returned
        with pytest.raises(durastate.StoreClosed, match="durastate-langgraph-langgraph is closed"):
            await saver.aget_tuple(checkpoint_args("t")[0])

    asyncio.run(main())
    assert not shared_store.closed
    assert thread_rows(shared_store, "t") != []  # written by the put close waited for


@pytest.mark.parametrize(
    "make",
    [
        lambda url: DurastateSaver.from_url(url),
        lambda url: DurastateStore.from_url(url),
        lambda url: DurastateSession("s", url=url),
        lambda url: DurastateByteStore(url),
        lambda url: DurastateCache(url),
    ],
    ids=["saver", "store", "session", "byte-store", "cache"],
)
def test_an_owned_store_closes_with_aclose(shared_url: str, make: Callable[[str], Holder]) -> None:
    async def main() -> Holder:
        async with make(shared_url) as holder:
            return holder

    holder = asyncio.run(main())
    assert holder.store.closed and holder._aio.runner.closed


def test_async_writes_on_a_borrowed_store_are_seen_by_its_sync_users(shared_store: durastate.Store) -> None:
    memory = DurastateStore(shared_store)
    asyncio.run(memory.abatch([PutOp(("a",), "k", {"v": 1}), PutOp(("a",), "j", {"v": 2})]))
    assert [item.key for item in memory.search(("a",))] == ["j", "k"]
    memory.close()


# -- (b) another process holding the write lock never stalls the loop ------------------

_HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""
TICK = 0.01
HOLD_TICKS = 200  # ~2 s of ticks while the other process holds the lock


def _record_lock_waits(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The ids of the threads that wait for SQLite's write lock from now on, in any of the engine's three
    ways: SQLite's own busy handler, durastate's backoff loop, the in-process writer gate.
    """
    waited: set[int] = set()
    handler = SqliteTransactions._in_sqlites_handler
    backoff_wait = sqlite_busy.Backoff.wait
    gate_enter = WriterGate.enter

    def in_handler(self: Any, attempt: Any, wait: float) -> Any:
        waited.add(threading.get_ident())
        return handler(self, attempt, wait)

    def backing_off(self: Any) -> bool:
        waited.add(threading.get_ident())
        return backoff_wait(self)

    def enter(self: Any, timeout: float | None) -> bool:
        if timeout is not None:
            waited.add(threading.get_ident())
        return gate_enter(self, timeout)

    monkeypatch.setattr(SqliteTransactions, "_in_sqlites_handler", in_handler)
    monkeypatch.setattr(sqlite_busy.Backoff, "wait", backing_off)
    monkeypatch.setattr(WriterGate, "enter", enter)
    return waited


def test_a_write_lock_held_by_another_process_never_makes_the_loop_wait(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every integration's async writes wait for another process's lock off the loop: the loop's thread never
    waits for it (the writes do, on workers), ticks on, and its WAL reads are answered meanwhile.
    """
    path = tmp_path / "locked.db"
    url = f"sqlite://{path}"
    store = durastate.open(url)
    saver, memory = DurastateSaver(store), DurastateStore.from_url(url)
    session, cache = DurastateSession("s", url=url), DurastateCache(store=store)
    config = saver.put(*checkpoint_args("t"))
    waited = _record_lock_waits(monkeypatch)

    async def main() -> int:
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert await asyncio.to_thread(holder.stdout.readline) == "held\n"  # type: ignore[union-attr]
            writes = [
                asyncio.create_task(saver.aput(*checkpoint_args("t", step=2))),
                asyncio.create_task(saver.aput_writes(config, [("messages", "w")], "task")),
                asyncio.create_task(memory.aput(("ns",), "k", {"v": 1})),
                asyncio.create_task(session.add_items([user("a")])),
                asyncio.create_task(cache.aupdate("prompt", "llm", [])),
            ]
            reads = asyncio.create_task(saver.aget_tuple(config))  # WAL reads do not wait for the lock
            for _ in range(HOLD_TICKS):  # the loop runs on while the lock is held
                await asyncio.sleep(TICK)
            assert [w.done() for w in writes] == [False] * len(writes)
            assert (await reads) is not None
            holder.stdin.write("\n")  # type: ignore[union-attr]
            holder.stdin.flush()  # type: ignore[union-attr]
            await asyncio.wait_for(asyncio.gather(*writes), 60)
            return threading.get_ident()
        finally:
            holder.kill()
            await asyncio.to_thread(holder.wait)

    # On a thread of its own: the loop's connections are opened while the lock is held.
    with concurrent.futures.ThreadPoolExecutor(1) as loop_thread:
        loop_ident = loop_thread.submit(asyncio.run, main()).result()
    assert loop_ident not in waited
    assert waited  # the writes did wait, on other threads
    assert saver.get_tuple(checkpoint_args("t")[0]) is not None
    assert memory.get(("ns",), "k") is not None
    assert asyncio.run(session.get_items()) == [user("a")]
    assert cache.lookup("prompt", "llm") == []
    for closing in (saver, memory, session, cache):
        closing.close()
    store.close()


def test_a_sync_call_after_an_async_one_on_the_same_thread_still_waits_for_the_lock(tmp_path: Any) -> None:
    path = tmp_path / "mixed.db"
    with DurastateSaver.from_url(path) as saver:
        config = saver.put(*checkpoint_args("t"))
        assert asyncio.run(saver.aget_tuple(config)) is not None  # inline, on this thread
        holder = WriteLockHolder(path).start()
        releasing = threading.Timer(0.2, holder.release)
        releasing.start()
        try:
            saver.put(*checkpoint_args("t", step=2))  # sync: waits up to busy_timeout, as sync calls do
        finally:
            releasing.join()


# -- cancel, then close, many rounds (a crash is an exit code) ------------------------

CANCEL_ROUNDS = {"sqlite-file": 300, "postgres": 40}

_CANCEL_AND_CLOSE = """
import asyncio, sys
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from durastate.integrations.langchain import DurastateByteStore
from durastate.integrations.langgraph import DurastateSaver
from durastate.integrations.openai_agents import DurastateSession
from durastate.testing.cancel_close import cancel_then_close

url, rounds = sys.argv[1], int(sys.argv[2])

def put_args(n):
    checkpoint = create_checkpoint(empty_checkpoint(), None, 1)
    checkpoint["channel_values"] = {"m": [n]}
    checkpoint["channel_versions"] = {"m": "1"}
    return {"configurable": {"thread_id": str(n), "checkpoint_ns": ""}}, checkpoint, {}, {"m": "1"}

async def open_holders():
    return DurastateSaver.from_url(url), DurastateSession("s", url=url), DurastateByteStore(url)

async def close(holders):
    for holder in holders:
        await holder.aclose()

calls = [
    lambda h, n: h[0].aput(*put_args(n)),
    lambda h, n: h[0].aget_tuple(put_args(n)[0]),
    lambda h, n: h[1].add_items([{"n": n}]),
    lambda h, n: h[2].amset([(str(n), b"v")]),
]
asyncio.run(cancel_then_close(url, rounds, open_holders, calls, close, copies=2))
print("survived", rounds)
"""


def test_cancel_then_close_never_frees_a_connection_in_use(shared_url: str, request: pytest.FixtureRequest) -> None:
    rounds = CANCEL_ROUNDS[request.node.callspec.params["shared_url"]]
    done = subprocess.run(
        [sys.executable, "-c", _CANCEL_AND_CLOSE, shared_url, str(rounds)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == f"survived {rounds}"
