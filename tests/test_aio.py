"""``durastate.aio``: every facet from async code, transactions, locks, cancellation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate import aio
from durastate._aio import AsyncRunner
from durastate.aio._build import public_methods
from durastate.aio._facades import SPECS
from durastate.engines.watch import ChangeWatch
from durastate.queues import Queues
from durastate.testing import FakeClock
from durastate.testing.locking import WriteLockHolder


def run(url: str, body: Callable[[aio.AsyncStore], Awaitable[Any]], **options: Any) -> Any:
    async def main() -> Any:
        async with await aio.open(url, **options) as store:
            return await body(store)

    return asyncio.run(main())


def test_every_public_sync_method_has_an_async_twin() -> None:
    for spec in SPECS:
        facade = getattr(aio, spec.name)
        missing = [name for name in public_methods(spec.sync) if not hasattr(facade, name)]
        assert missing == [], (spec.name, missing)


def test_kv(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        await s.kv.put(b"s", b"n", b"a", b"1")
        await s.kv.put_many(b"s", b"n", [(b"b", b"2"), (b"c", b"3")])
        assert await s.kv.get(b"s", b"n", b"a") == b"1"
        assert [k async for k, _ in s.kv.scan(b"s", b"n", start=b"b")] == [b"b", b"c"]
        assert [k async for k, _ in s.kv.scan(b"s", b"n", reverse=True, limit=2)] == [b"c", b"b"]
        for i in range(700):  # more than one page
            await s.kv.append(b"s", b"log", b"k", str(i).encode())
        assert [v async for _, v in s.kv.log(b"s", b"log", b"k")] == [str(i).encode() for i in range(700)]
        scoped = s.kv.scope(b"s")
        assert await scoped.incr(b"c", b"x", 5) == 5
        assert [k async for k, _ in scoped.scan(b"n")] == [b"a", b"b", b"c"]
        assert await scoped.clear() > 0
        with pytest.raises(durastate.InvalidRequest):
            await s.kv.put(b"s", b"n", "not-bytes", b"v")  # type: ignore[arg-type]
        with pytest.raises(durastate.InvalidRequest):
            [_ async for _ in s.kv.scan(b"s", "ns")]  # type: ignore[arg-type]

    run(store_url, body)


def test_queues_claim_ack_nack_renew_wait(store_url: str) -> None:
    clock = FakeClock()

    async def body(s: aio.AsyncStore) -> None:
        assert await s.queues.claim("q", lease=10, wait=0.06) is None
        await s.queues.push("q", [b"a", b"b"])
        job = await s.queues.claim("q", lease=10)
        assert job is not None and job.payload == b"a" and job.attempts == 1
        await job.renew()
        await job.ack()
        job = await s.queues.claim("q", lease=10)
        assert job is not None
        await job.nack(error="boom")
        again = await s.queues.claim("q", lease=10)
        assert again is not None and again.attempts == 2
        assert await s.queues.pop("q") is None
        clock.advance(11)
        stale = again
        fresh = await s.queues.claim("q", lease=10)
        assert fresh is not None
        with pytest.raises(durastate.Conflict):
            await stale.ack()
        await fresh.ack()

        async def push_later() -> None:
            await asyncio.sleep(0)
            await s.queues.push("late", [b"x"])

        pusher = asyncio.create_task(push_later())
        assert await s.queues.pop("late", wait=5) == b"x"
        await pusher
        stats = await s.queues.stats("q")
        assert stats.in_flight == 0

    run(store_url, body, clock=clock)


def test_documents_and_lock(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        rev = await s.documents.write("runs/1", {"state": "queued"}, expect=0)
        async with s.documents.lock("runs/1", "runs/2"):
            current = await s.documents.read("runs/1")
            assert current is not None
            await s.documents.write("runs/1", {"state": "running"}, expect=current.revision)
        with pytest.raises(durastate.Conflict):
            await s.documents.write("runs/1", {"state": "lost"}, expect=rev)
        doc = await s.documents.read("runs/1")
        assert doc is not None and doc.data == {"state": "running"}
        with pytest.raises(RuntimeError):
            async with s.documents.lock("runs/1"):
                await s.documents.write("runs/1", {"state": "rolled back"})
                raise RuntimeError("undo")
        doc = await s.documents.read("runs/1")
        assert doc is not None and doc.data == {"state": "running"}
        assert [k async for k in s.documents.iter_keys("runs/")] == ["runs/1"]

    run(store_url, body)


def test_events_records_presence_and_stream(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        await s.events.append("chat", [{"id": "m1", "type": "user", "payload": {"t": "hi"}}])
        claimed = await s.events.claim_available("chat", "w", ttl_ms=30_000)
        assert claimed.outcome == "claimed"
        first = claimed.events[0]
        done = await s.events.complete_attempt(
            "chat", first.index, first.attempt_count, [{"id": "m2", "type": "agent", "payload": 1, "settled": True}]
        )
        assert done.outcome == "completed"
        stream = s.events.stream("chat")
        seen = [(await stream.__anext__()).id, (await stream.__anext__()).id]

        async def later() -> None:
            await s.events.append("chat", [{"id": "m3", "type": "user", "payload": 2}])

        task = asyncio.create_task(later())
        seen.append((await stream.__anext__()).id)
        await task
        await stream.aclose()
        assert seen == ["m1", "m2", "m3"]

        conv = await s.records.mint_id()
        seq = await s.records.commit([{"type": "conversation", "value": {"id": conv}}])
        assert await s.records.last_seq() == seq
        await s.presence.set("room", "alice", {"typing": True}, at_ms=1, seen=1, ttl_ms=60_000)
        assert [p.field for p in await s.presence.read("room")] == ["typing"]

    run(store_url, body)


def test_an_open_stream_ends_when_the_store_closes(store_url: str) -> None:
    async def main() -> list[str]:
        store = await aio.open(store_url)
        await store.events.append("s", [{"id": "a", "type": "t", "payload": 0}])
        got: list[str] = []

        async def consume() -> None:
            async for event in store.events.stream("s"):
                got.append(event.id)

        task = asyncio.create_task(consume())
        while not got:
            await asyncio.sleep(0.01)
        await store.close()
        await task  # ends, no error
        return got

    assert asyncio.run(main()) == ["a"]


STREAMS = 300  # more than a pool of threads for waiting streams (it was 256) would serve


def test_waiting_streams_hold_no_thread_and_each_is_woken(store_url: str) -> None:
    """300 streams wait on quiet sessions without a thread each; an append to the last one still reaches it."""

    async def body(s: aio.AsyncStore) -> None:
        threads_before = threading.active_count()
        streams = [s.events.stream(f"quiet-{i}") for i in range(STREAMS)]
        nexts = [asyncio.ensure_future(stream.__anext__()) for stream in streams]
        await asyncio.sleep(0)  # every stream takes its first step (read, then wait)
        await s.events.append(f"quiet-{STREAMS - 1}", [{"id": "last", "type": "t", "payload": 0}])
        event = await asyncio.wait_for(nexts[-1], 60)
        assert event.id == "last"
        assert threading.active_count() < threads_before + 20  # the runner's workers at most, not a thread each
        assert not any(n.done() for n in nexts[:-1])
        for n in nexts[:-1]:
            n.cancel()
        for stream in streams:
            await stream.aclose()

    run(store_url, body)


def test_transact_commits_and_rolls_back(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        def move(store: durastate.Store, amount: int) -> int:
            store.kv.incr(b"bank", b"acct", b"a", -amount)
            return store.kv.incr(b"bank", b"acct", b"b", amount)

        assert await s.transact(move, 5) == 5

        def fails(store: durastate.Store) -> None:
            store.kv.incr(b"bank", b"acct", b"a", -100)
            raise RuntimeError("no")

        with pytest.raises(RuntimeError):
            await s.transact(fails)
        assert await s.kv.counter(b"bank", b"acct", b"a") == -5
        with pytest.raises(durastate.InvalidRequest):
            await s.transact("not callable")  # type: ignore[arg-type]

    run(store_url, body)


def test_async_transaction_is_isolated_from_other_coroutines(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        inside = asyncio.Event()
        checked = asyncio.Event()
        seen_by_other: list[bytes | None] = []

        async def in_transaction() -> None:
            with pytest.raises(RuntimeError):
                async with s.transaction() as tx:
                    await tx.kv.put(b"s", b"n", b"tx", b"1")
                    await s.kv.put(b"s", b"n", b"ambient", b"1")  # same task: joins the transaction
                    assert await s.kv.get(b"s", b"n", b"tx") == b"1"
                    inside.set()
                    await checked.wait()
                    raise RuntimeError("roll back")

        async def other() -> None:
            await inside.wait()
            seen_by_other.append(await s.kv.get(b"s", b"n", b"tx"))
            seen_by_other.append(await s.kv.get(b"s", b"n", b"ambient"))
            checked.set()

        await asyncio.gather(in_transaction(), other())
        assert seen_by_other == [None, None]
        assert await s.kv.get(b"s", b"n", b"tx") is None
        assert await s.kv.get(b"s", b"n", b"ambient") is None

    if store_url == "memory:":
        pytest.skip("memory: has no WAL: a reader on another connection waits for the open write transaction")
    run(store_url, body)


def test_nested_blocks_and_transact_inside_a_transaction(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        async with s.transaction() as tx:
            await tx.kv.put(b"s", b"n", b"kept", b"1")
            async with tx.transaction() as inner_tx:  # a savepoint
                await inner_tx.kv.put(b"s", b"n", b"inner", b"1")
            await s.transact(lambda store: store.kv.put(b"s", b"n", b"transact", b"1"))
        assert [k async for k, _ in s.kv.scan(b"s", b"n")] == [b"inner", b"kept", b"transact"]

    run(store_url, body)


def test_a_task_started_inside_a_transaction_is_not_part_of_it(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        async with s.transaction() as tx:
            await tx.kv.put(b"s", b"n", b"tx", b"1")
            child = asyncio.create_task(s.kv.get(b"s", b"n", b"tx"))
            assert await child is None

    if store_url == "memory:":
        pytest.skip("memory: has no WAL: a reader on another connection waits for the open write transaction")
    run(store_url, body)


# -- SQLite: never block the loop on a lock held elsewhere -----------------------------


def test_a_locked_file_does_not_block_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    durastate.open(path).close()

    async def main() -> tuple[int, bytes | None, int]:
        async with await aio.open(path) as s:
            holder = await asyncio.to_thread(WriteLockHolder(path).start)
            ticks = 0
            put = asyncio.create_task(s.kv.put(b"s", b"n", b"k", b"v"))
            while ticks < 5:  # the loop keeps running while the put waits for the lock
                await asyncio.sleep(0.01)
                ticks += 1
            assert not put.done()
            assert await s.kv.get(b"s", b"n", b"k") is None  # WAL reads are not blocked
            await asyncio.to_thread(holder.release)
            await put
            return ticks, await s.kv.get(b"s", b"n", b"k"), s._runner._busy

    assert asyncio.run(main()) == (5, b"v", 0)


def _signal_on_worker(facet: Any, name: str) -> threading.Event:
    """An event set when ``facet.name`` starts running on a thread other than this one."""
    started = threading.Event()
    here = threading.current_thread()
    real = getattr(facet, name)

    def traced(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not here:
            started.set()
        return real(*args, **kwargs)

    setattr(facet, name, traced)
    return started


def test_a_cancelled_claim_on_a_locked_file_is_released(tmp_path: Path) -> None:
    path = tmp_path / "cancel.db"
    clock = FakeClock()
    with durastate.open(path) as sync:
        sync.queues.push("q", [b"job"])
        sync.events.append("s", [{"id": "e", "type": "t", "payload": 0}])

    async def main() -> tuple[int, int]:
        async with await aio.open(path, clock=clock) as s:
            holder = await asyncio.to_thread(WriteLockHolder(path).start)
            started = [
                _signal_on_worker(s._store.queues, "claim"),
                _signal_on_worker(s._store.events, "claim_available"),
            ]
            claim = asyncio.create_task(s.queues.claim("q", lease=60))
            claim_events = asyncio.create_task(s.events.claim_available("s", "w", ttl_ms=60_000))
            for event in started:  # both refused on the loop, now running on workers, waiting for the lock
                assert await asyncio.to_thread(event.wait, 30)
            claim.cancel()
            claim_events.cancel()
            await asyncio.to_thread(holder.release)
            await asyncio.to_thread(s._runner.wait_idle)  # the claims ran, then were released
            clock.advance(0.01)
            job = await s.queues.claim("q", lease=60)
            assert job is not None
            again = await s.events.claim_available("s", "w2", ttl_ms=60_000)
            assert again.outcome == "claimed"
            return job.attempts, again.events[0].attempt_count

    assert asyncio.run(main()) == (2, 2)


def test_a_cancelled_transact_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "transact.db"
    durastate.open(path).close()
    entered, proceed = threading.Event(), threading.Event()

    async def main() -> bytes | None:
        async with await aio.open(path) as s:
            # Held at the start: the inline attempt is refused, so the call
            # moves to a worker, where the function can block without
            # blocking the loop.
            holder = await asyncio.to_thread(WriteLockHolder(path).start)

            def write(store: durastate.Store) -> None:
                store.kv.put(b"s", b"n", b"k", b"v")
                entered.set()
                proceed.wait(30)

            task = asyncio.create_task(s.transact(write))
            while s._runner._busy == 0:
                await asyncio.sleep(0.001)
            await asyncio.to_thread(holder.release)
            assert await asyncio.to_thread(entered.wait, 30)  # inside the transaction, the write made
            task.cancel()
            await asyncio.sleep(0)  # one turn of the loop: the task has taken its cancel, and waits for the call
            proceed.set()  # the function returns after its caller was cancelled ...
            with pytest.raises(asyncio.CancelledError):
                await task
            return await s.kv.get(b"s", b"n", b"k")  # ... so the transaction rolled back

    assert asyncio.run(main()) is None


def test_a_cancelled_transaction_block_rolls_back(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        entered = asyncio.Event()

        async def block() -> None:
            async with s.transaction() as tx:
                await tx.kv.put(b"s", b"n", b"k", b"v")
                entered.set()
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(block())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await s.kv.get(b"s", b"n", b"k") is None
        await s.kv.put(b"s", b"n", b"after", b"1")  # the store is not left locked

    run(store_url, body)


class _AnnouncedWatch(ChangeWatch):
    """A queue's watch that sets ``waiting`` when its waiter starts waiting (its try is over)."""

    def __init__(self, inner: ChangeWatch, waiting: threading.Event) -> None:
        self._inner, self._waiting = inner, waiting
        self.reliable = inner.reliable

    def wait(self, timeout: float) -> bool:
        self._waiting.set()
        return self._inner.wait(timeout)

    async def wait_async(self, timeout: float) -> bool:
        self._waiting.set()
        return await self._inner.wait_async(timeout)

    def close(self) -> None:
        self._inner.close()


def test_a_cancelled_wait_holds_nothing(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Cancelled while it waits (its empty try over): a cancel during the try may deliver the item and
    # release it again (counted), which is the claim's own cancellation contract, not this test's.
    waiting_now = threading.Event()
    watch = Queues._watch
    monkeypatch.setattr(Queues, "_watch", lambda self, name: _AnnouncedWatch(watch(self, name), waiting_now))

    async def body(s: aio.AsyncStore) -> None:
        waiting = asyncio.create_task(s.queues.claim("q", lease=30, wait=30))
        while not waiting_now.is_set():
            await asyncio.sleep(0.001)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await s.queues.push("q", [b"job"])
        job = await s.queues.claim("q", lease=30)
        assert job is not None and job.attempts == 1  # the cancelled wait never took it

    run(store_url, body)


def test_calls_after_close_raise_store_closed(store_url: str) -> None:
    async def main() -> None:
        s = await aio.open(store_url)
        await s.close()
        await s.close()  # idempotent
        with pytest.raises(durastate.StoreClosed):
            await s.kv.get(b"s", b"n", b"k")
        with pytest.raises(durastate.StoreClosed):
            await s.transact(lambda store: None)
        with pytest.raises(durastate.StoreClosed):
            async with s.transaction():
                pass

    asyncio.run(main())


def test_200_coroutines_over_a_small_pool_complete(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        async def worker(n: int) -> None:
            for i in range(3):
                await s.kv.put(b"s", b"n", b"%d-%d" % (n, i), b"v")
                assert await s.kv.get(b"s", b"n", b"%d-%d" % (n, i)) == b"v"
            await s.kv.incr(b"s", b"c", b"done")

        await asyncio.gather(*(worker(n) for n in range(200)))
        assert await s.kv.counter(b"s", b"c", b"done") == 200

    run(store_url, body, max_connections=10)


def test_open_takes_every_option_of_durastate_open() -> None:
    import inspect

    from durastate.store import OpenOptions

    keywords = {name for name, p in inspect.signature(durastate.open).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert set(OpenOptions.__annotations__) == keywords


def test_open_passes_retention_and_read_only_and_maintains(tmp_path: Path) -> None:
    path = tmp_path / "state.db"

    async def main() -> None:
        clock = FakeClock()
        async with await aio.open(path, retention=durastate.Retention(kv_log_max_age=60), clock=clock) as s:
            await s.kv.append(b"s", b"n", b"log", b"old")
            clock.advance(120)
            await s.kv.append(b"s", b"n", b"log", b"new")
            report = await s.maintain()
            assert report.log_entries == 1 and report.finished
        async with await aio.open(path, read_only=True, clock=clock) as ro:
            assert [value async for _, value in ro.kv.log(b"s", b"n", b"log")] == [b"new"]
            with pytest.raises(durastate.ConfigurationError):
                await ro.kv.append(b"s", b"n", b"log", b"x")
        with pytest.raises(durastate.ConfigurationError):
            await aio.open(path, workers=0)

    asyncio.run(main())


def test_sync_calls_on_the_loops_thread_wait_for_locks_again_after_inline_calls(tmp_path: Path) -> None:
    """Inline calls run with busy timeout 0; a sync call on the same thread afterwards waits as sync calls do."""
    path = tmp_path / "mixed.db"
    with durastate.open(path) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        astore = aio.AsyncStore(store, AsyncRunner(store.engine, workers=2, name="mixed"))

        async def inline_calls() -> None:
            assert await astore.kv.get(b"s", b"n", b"k") == b"v"
            await astore.kv.put(b"s", b"n", b"k2", b"v2")

        for _ in range(2):  # and back again: the next inline call refuses to wait again
            asyncio.run(inline_calls())
            holder = WriteLockHolder(path).start()
            released = threading.Event()

            def release(holder: WriteLockHolder = holder, released: threading.Event = released) -> None:
                released.set()  # before the lock goes: a write that waited for it ends after this
                holder.release()

            releaser = threading.Timer(0.2, release)
            releaser.start()
            try:
                store.kv.put(b"s", b"n", b"k3", b"v3")  # waits for the holder instead of raising LockBusy
                assert released.is_set()
            finally:
                releaser.join()

        async def refused_inline_then_worker() -> None:
            holder = await asyncio.to_thread(WriteLockHolder(path).start)
            put = asyncio.create_task(astore.kv.put(b"s", b"n", b"k4", b"v4"))
            await asyncio.sleep(0)
            assert not put.done()  # handed to a worker: the inline try was refused at once
            await asyncio.to_thread(holder.release)
            await put

        asyncio.run(refused_inline_then_worker())
        assert store.kv.get(b"s", b"n", b"k4") == b"v4"
        astore._runner.close()
