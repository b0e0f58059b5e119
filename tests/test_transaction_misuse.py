"""A transaction object used against its protocol: refused with ``InvalidRequest``, the open block left intact.

One ``store.transaction()`` object is one block at a time: entering it again
while it is open (nested in itself, or from another thread) is refused and
the open block goes on as if the refused call never happened; once it has
ended it may be entered again. Leaving it when it is not open, from a
thread that did not enter it, is refused too, committing and rolling back
nothing. Ending it before a block opened inside it has ended (out of order)
rolls both back and says so (with an exception passing, lets that one go
on): the thread is left with no block open, and the inner block's late end
is refused. The same for
``aio``'s ``async with store.transaction()``, for a ``documents.lock(...)``
block (sync and async), and ``transact`` refuses async functions (they
would silently do nothing).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import durastate
from durastate import InvalidRequest, aio

SCOPE, NS = b"s", b"n"


def keys(store: durastate.Store) -> list[bytes]:
    return [key for key, _ in store.kv.scan(SCOPE, NS)]


def in_other_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` run on a new thread: its result, or the exception it raised."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed back to the test
            out.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return out[0]


# -- sync ---------------------------------------------------------------------------------


def test_entering_an_open_transaction_again_is_refused_and_the_outer_block_commits(store: durastate.Store) -> None:
    tx = store.transaction()
    with tx:
        store.kv.put(SCOPE, NS, b"outer", b"1")
        with pytest.raises(InvalidRequest, match=r"already open.*store\.transaction\(\) again"), tx:
            store.kv.put(SCOPE, NS, b"never", b"1")  # pragma: no cover - the entry is refused
        with store.transaction():  # a savepoint of its own, around the same refusal
            store.kv.put(SCOPE, NS, b"nested", b"1")
            with pytest.raises(InvalidRequest, match="already open"):
                tx.__enter__()
        assert store.engine.in_transaction()
        store.kv.put(SCOPE, NS, b"outer-after", b"1")
    assert not store.engine.in_transaction()
    store.kv.put(SCOPE, NS, b"after", b"1")  # the thread is usable
    assert keys(store) == [b"after", b"nested", b"outer", b"outer-after"]


def test_a_transaction_object_is_entered_again_once_it_has_ended(store: durastate.Store) -> None:
    tx = store.transaction()
    with tx:
        store.kv.put(SCOPE, NS, b"first", b"1")
        with pytest.raises(InvalidRequest, match="already open"):
            tx.__enter__()
    with pytest.raises(RuntimeError), tx:
        store.kv.put(SCOPE, NS, b"rolled-back", b"1")
        raise RuntimeError("roll back")
    with tx:
        store.kv.put(SCOPE, NS, b"third", b"1")
        with tx.__class__(store):  # a fresh object nests as a savepoint, as store.transaction() does
            store.kv.put(SCOPE, NS, b"nested", b"1")
    assert keys(store) == [b"first", b"nested", b"third"]


def test_entering_a_transaction_open_on_another_thread_is_refused(store: durastate.Store) -> None:
    tx = store.transaction()
    with ThreadPoolExecutor(max_workers=1) as other:
        # The other thread has written before: its connection is open, as a busy worker's is (on SQLite
        # the entry would otherwise take the fast path of a write transaction).
        other.submit(store.kv.put, SCOPE, NS, b"other", b"1").result()
        with tx:
            store.kv.put(SCOPE, NS, b"owner", b"1")
            with pytest.raises(InvalidRequest, match="already open"):
                other.submit(tx.__enter__).result()
            assert not other.submit(store.engine.in_transaction).result()  # the other thread began nothing
            store.kv.put(SCOPE, NS, b"owner-after", b"1")
        other.submit(store.kv.put, SCOPE, NS, b"other-after", b"1").result()  # and it holds no lock
    assert keys(store) == [b"other", b"other-after", b"owner", b"owner-after"]


@pytest.mark.parametrize("make", ["store", "engine", "engine-read"])
def test_exit_without_enter_or_twice_is_refused(store: durastate.Store, make: str) -> None:
    def fresh() -> Any:
        if make == "store":
            return store.transaction()
        return store.engine.read_transaction() if make == "engine-read" else store.engine.transaction()

    tx = fresh()
    with pytest.raises(InvalidRequest, match="never entered"):
        tx.__exit__(None, None, None)
    with tx:
        pass
    with pytest.raises(InvalidRequest, match="not open: it ended already"):
        tx.__exit__(None, None, None)
    with store.transaction():  # inside another block, the refusal touches that block neither
        store.kv.put(SCOPE, NS, b"kept", b"1")
        with pytest.raises(InvalidRequest, match="never entered"):
            fresh().__exit__(RuntimeError, RuntimeError("x"), None)
        assert store.engine.in_transaction()
    assert keys(store) == [b"kept"]


@pytest.mark.parametrize("how", ["normally", "with an exception"])
def test_exit_on_another_thread_is_refused_and_the_owner_ends_the_transaction(
    store: durastate.Store, store_url: str, how: str
) -> None:
    tx = store.transaction()
    tx.__enter__()
    try:
        store.kv.put(SCOPE, NS, b"owner", b"1")
        args = (None, None, None) if how == "normally" else (RuntimeError, RuntimeError("x"), None)
        refused = in_other_thread(lambda: tx.__exit__(*args))
        assert isinstance(refused, InvalidRequest), refused
        assert "thread that entered it" in str(refused)
        assert store.engine.in_transaction()  # still open here, nothing committed nor rolled back
        if store_url != "memory:":  # memory: no WAL, a reader on another connection would wait for the writer
            assert in_other_thread(lambda: store.kv.get(SCOPE, NS, b"owner")) is None
        store.kv.put(SCOPE, NS, b"owner-after", b"1")
    except BaseException:
        tx.__exit__(None, None, None)
        raise
    tx.__exit__(None, None, None)
    assert not store.engine.in_transaction()
    assert keys(store) == [b"owner", b"owner-after"]
    if store_url != "memory:":
        assert in_other_thread(lambda: store.kv.get(SCOPE, NS, b"owner-after")) == b"1"


# Blocks that open a transaction (or a savepoint of the thread's): a store's, the engine's, the documents lock.
BLOCKS: dict[str, Callable[[durastate.Store], Any]] = {
    "store": lambda store: store.transaction(),
    "engine": lambda store: store.engine.transaction(),
    "lock": lambda store: store.documents.lock("doc"),
}


@pytest.mark.parametrize(
    ("outer", "inner"), [("store", "store"), ("engine", "store"), ("lock", "store"), ("store", "lock")]
)
def test_ending_a_block_before_one_opened_inside_it_rolls_both_back_and_says_so(
    store: durastate.Store, store_url: str, outer: str, inner: str
) -> None:
    store.kv.put(SCOPE, NS, b"before", b"1")
    a, b = BLOCKS[outer](store), BLOCKS[inner](store)
    a.__enter__()
    store.kv.put(SCOPE, NS, b"outer", b"1")
    b.__enter__()
    store.kv.put(SCOPE, NS, b"inner", b"1")
    with pytest.raises(InvalidRequest, match=r"opened inside it was still open .* rolled back, nothing of them"):
        a.__exit__(None, None, None)
    assert not store.engine.in_transaction()  # the thread is as before the block: nothing left open
    store.kv.put(SCOPE, NS, b"after", b"1")  # committed at once, not kept in a block nobody ends
    if store_url != "memory:":
        assert in_other_thread(lambda: store.kv.get(SCOPE, NS, b"after")) == b"1"
    with pytest.raises(InvalidRequest, match="ended already: the block it was opened in ended first"):
        b.__exit__(None, None, None)  # the inner block ended with the outer one
    assert keys(store) == [b"after", b"before"]
    with a, b:  # both objects are new blocks again
        store.kv.put(SCOPE, NS, b"again", b"1")
    assert keys(store) == [b"after", b"again", b"before"]


def test_with_an_exception_passing_a_block_ended_out_of_order_rolls_back_and_lets_it_go_on(
    store: durastate.Store,
) -> None:
    a, b = store.transaction(), store.transaction()
    a.__enter__()
    store.kv.put(SCOPE, NS, b"outer", b"1")
    b.__enter__()
    a.__exit__(RuntimeError, RuntimeError("x"), None)  # rolled back as the exception asks; it goes on
    assert not store.engine.in_transaction()
    with pytest.raises(InvalidRequest, match="ended already"):
        b.__exit__(RuntimeError, RuntimeError("inner fails"), None)
    assert keys(store) == []


def test_a_nested_block_ended_out_of_order_rolls_back_to_its_own_start(store: durastate.Store) -> None:
    with store.transaction():
        store.kv.put(SCOPE, NS, b"outer", b"1")
        b, c = store.transaction(), store.transaction()
        b.__enter__()
        store.kv.put(SCOPE, NS, b"middle", b"1")
        c.__enter__()
        store.kv.put(SCOPE, NS, b"inner", b"1")
        with pytest.raises(InvalidRequest, match="out of order"):
            b.__exit__(None, None, None)
        assert store.engine.in_transaction()  # the outermost block is still open, its own writes kept
        # A new block opened to the abandoned one's depth is not ended by the abandoned one's late exit.
        with store.transaction():
            store.kv.put(SCOPE, NS, b"new", b"1")
            with pytest.raises(InvalidRequest, match="ended already"):
                c.__exit__(None, None, None)
            store.kv.put(SCOPE, NS, b"new-after", b"1")
    assert keys(store) == [b"new", b"new-after", b"outer"]


def test_a_generator_abandoned_inside_a_block_loses_nothing_written_after_it(
    store: durastate.Store, store_url: str
) -> None:
    # The case that made out-of-order ends roll back rather than be refused with the blocks left open: then the
    # outer block's refusal left a transaction open that nobody would end, and every later write of the thread
    # was lost at close.
    def rows() -> Iterator[int]:
        with store.transaction():
            store.kv.put(SCOPE, NS, b"inner", b"1")
            yield 1
            yield 2

    with pytest.raises(InvalidRequest, match="out of order"), store.transaction():
        store.kv.put(SCOPE, NS, b"outer", b"1")
        running = rows()
        next(running)
    with pytest.raises(InvalidRequest, match="ended already"):
        running.close()
    store.kv.put(SCOPE, NS, b"after", b"1")
    assert not store.engine.in_transaction()
    if store_url != "memory:":
        assert in_other_thread(lambda: store.kv.get(SCOPE, NS, b"after")) == b"1"
    assert keys(store) == [b"after"]


# -- the documents lock used as a block --------------------------------------------------


def test_a_documents_lock_nests_and_the_same_lock_entered_twice_is_refused_leaving_it_held(
    store: durastate.Store,
) -> None:
    with store.documents.lock("a"), store.documents.lock("a"):  # nested calls: savepoints, as documented
        store.documents.write("a", {"v": 1})
    lock = store.documents.lock("a")
    with lock:
        store.documents.write("a", {"v": 2})
        with pytest.raises(InvalidRequest, match=r"already open.*documents\.lock\(\.\.\.\) again"), lock:
            store.documents.write("a", {"v": 99})  # pragma: no cover - the entry is refused
        refused = in_other_thread(lock.__enter__)  # from another thread too
        assert isinstance(refused, InvalidRequest) and "already open" in str(refused), refused
        assert store.engine.in_transaction()  # the outer block is open, its lock held
        store.documents.write("a", {"v": 3})
    assert not store.engine.in_transaction()
    document = store.documents.read("a")
    assert document is not None and document.data == {"v": 3}
    with lock:  # ended: entered again, a new block
        store.documents.write("a", {"v": 4})
    document = store.documents.read("a")
    assert document is not None and document.data == {"v": 4}


def test_a_documents_lock_ended_when_not_open_or_from_another_thread_ends_nothing(store: durastate.Store) -> None:
    lock = store.documents.lock("a")
    with pytest.raises(InvalidRequest, match="not open"):
        lock.__exit__(None, None, None)
    assert not store.engine.in_transaction()  # no transaction was begun by the refusal
    lock.__enter__()
    try:
        store.documents.write("a", {"v": 1})
        refused = in_other_thread(lambda: lock.__exit__(None, None, None))
        assert isinstance(refused, InvalidRequest), refused
        assert "thread that entered it" in str(refused)
        assert store.engine.in_transaction()
        store.documents.write("a", {"v": 2})
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    lock.__exit__(None, None, None)
    assert not store.engine.in_transaction()
    with pytest.raises(InvalidRequest, match="not open"):
        lock.__exit__(None, None, None)
    document = store.documents.read("a")
    assert document is not None and document.data == {"v": 2}


# -- async --------------------------------------------------------------------------------


def run(url: str, body: Callable[[aio.AsyncStore], Awaitable[Any]], **options: Any) -> Any:
    async def main() -> Any:
        async with await aio.open(url, **options) as store:
            return await body(store)

    return asyncio.run(main())


async def async_keys(s: aio.AsyncStore) -> list[bytes]:
    return [key async for key, _ in s.kv.scan(SCOPE, NS)]


def test_async_entering_an_open_transaction_again_is_refused_and_the_outer_block_commits(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        tx = s.transaction()
        async with tx as view:
            await s.kv.put(SCOPE, NS, b"outer", b"1")
            with pytest.raises(InvalidRequest, match=r"already open.*store\.transaction\(\) again"):
                async with tx:
                    await s.kv.put(SCOPE, NS, b"never", b"1")  # pragma: no cover - the entry is refused
            async with view.transaction() as nested:  # a new object nests as a savepoint
                await nested.kv.put(SCOPE, NS, b"nested", b"1")
            await view.kv.put(SCOPE, NS, b"outer-after", b"1")
        # Committed, and nothing left open or locked: a write, and another transaction, go through.
        await s.kv.put(SCOPE, NS, b"after", b"1")
        async with s.transaction() as other:
            await other.kv.put(SCOPE, NS, b"other", b"1")
        async with tx:  # ended: entered again, a new block
            await s.kv.put(SCOPE, NS, b"reused", b"1")
        assert await async_keys(s) == [b"after", b"nested", b"other", b"outer", b"outer-after", b"reused"]

    run(store_url, body, busy_timeout=2)


def test_async_entering_a_transaction_open_in_another_task_is_refused(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        tx = s.transaction()
        async with tx:
            await s.kv.put(SCOPE, NS, b"owner", b"1")

            async def enter_it() -> None:
                async with tx:
                    pass  # pragma: no cover - the entry is refused

            with pytest.raises(InvalidRequest, match="already open"):
                await asyncio.create_task(enter_it())
            await s.kv.put(SCOPE, NS, b"owner-after", b"1")
        await s.kv.put(SCOPE, NS, b"after", b"1")
        assert await async_keys(s) == [b"after", b"owner", b"owner-after"]

    run(store_url, body, busy_timeout=2)


@pytest.mark.parametrize("inner", ["transaction", "lock"])
def test_async_ending_a_transaction_before_one_opened_inside_it_rolls_both_back(store_url: str, inner: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        a = s.transaction()
        b = s.transaction() if inner == "transaction" else s.documents.lock("doc")
        await a.__aenter__()
        await s.kv.put(SCOPE, NS, b"outer", b"1")
        await b.__aenter__()
        await s.kv.put(SCOPE, NS, b"inner", b"1")
        with pytest.raises(InvalidRequest, match="out of order"):
            await a.__aexit__(None, None, None)
        with pytest.raises(InvalidRequest):
            await b.__aexit__(None, None, None)  # ended with the outer block
        # Nothing left open, pinned or locked: a write, and another transaction, go through.
        await s.kv.put(SCOPE, NS, b"after", b"1")
        async with s.transaction() as other:
            await other.kv.put(SCOPE, NS, b"other", b"1")
        assert await async_keys(s) == [b"after", b"other"]

    run(store_url, body, busy_timeout=2)


def test_async_exit_without_enter_is_refused(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        tx = s.transaction()
        with pytest.raises(InvalidRequest, match="not open"):
            await tx.__aexit__(None, None, None)
        async with tx:
            await s.kv.put(SCOPE, NS, b"k", b"1")
        with pytest.raises(InvalidRequest, match="not open"):
            await tx.__aexit__(None, None, None)
        lock = s.documents.lock("c", "d")
        with pytest.raises(InvalidRequest, match="not open"):
            await lock.__aexit__(None, None, None)
        async with lock:
            with pytest.raises(InvalidRequest, match=r"already open.*lock\(\.\.\.\) again"):
                await lock.__aenter__()
        assert await async_keys(s) == [b"k"]

    run(store_url, body)


def test_transact_refuses_a_coroutine_function_before_anything_runs(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        ran: list[bool] = []

        async def writes(st: durastate.Store) -> None:  # pragma: no cover - never called
            ran.append(True)
            st.kv.put(SCOPE, NS, b"async", b"1")

        with pytest.raises(InvalidRequest, match=r"sync function.*coroutine function.*writes"):
            await s.transact(writes)  # type: ignore[arg-type]
        assert ran == []
        assert await async_keys(s) == []

    run(store_url, body)


def test_transact_refuses_a_coroutine_returned_and_rolls_back(store_url: str) -> None:
    async def body(s: aio.AsyncStore) -> None:
        made: list[Coroutine[Any, Any, None]] = []

        async def later() -> None:  # pragma: no cover - never awaited
            pass

        def writes_then_returns_a_coroutine(st: durastate.Store) -> Coroutine[Any, Any, None]:
            st.kv.put(SCOPE, NS, b"sync-part", b"1")
            coroutine = later()
            made.append(coroutine)
            return coroutine

        with pytest.raises(InvalidRequest, match=r"returned a coroutine.*rolled back"):
            await s.transact(writes_then_returns_a_coroutine)
        assert made[0].cr_frame is None  # closed: no "never awaited" warning later
        assert await async_keys(s) == []
        async with s.transaction() as tx:  # inside a block: the savepoint rolls back, the block goes on
            await tx.kv.put(SCOPE, NS, b"kept", b"1")
            with pytest.raises(InvalidRequest, match="returned a coroutine"):
                await tx.transact(writes_then_returns_a_coroutine)
            assert made[1].cr_frame is None
        assert await async_keys(s) == [b"kept"]

    run(store_url, body)
