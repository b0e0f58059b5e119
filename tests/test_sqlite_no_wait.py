"""A loop thread's SQLite connection waits for locks again once its event loop has ended.

Inline ``durastate.aio`` calls set the loop thread's connection to busy
timeout 0 (``SqliteEngine.no_wait_changes``). A sync call on that thread
after the loop ended must wait for a held lock as sync calls do: SQLite
refuses its first locked statement at once, the engine puts the busy
timeout back and runs that statement again (``_waits_again``). These tests
go through every statement path a write can take (``execute``, ``one``,
``executemany`` over a list and over a generator, ``BEGIN IMMEDIATE``) and
check both that the call waited for the holder and that it did its work
exactly once. While a loop runs, a sync call on its thread waits at most
``LOOP_LOCK_WAIT`` (``engines.loop``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durastate
from durastate import aio
from durastate._aio import AsyncRunner
from durastate.engines import loop
from durastate.engines.base import DDL, READ, WRITE
from durastate.engines.sqlite import LockBusy, SqliteEngine
from durastate.testing.locking import WriteLockHolder, lock_released_later


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[tuple[durastate.Store, aio.AsyncStore, Path]]:
    """A store, an async store sharing its engine (calls inline on the loop's thread), its file."""
    path = tmp_path / "mixed.db"
    store = durastate.open(path)
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    engine.execute(engine.sql(DDL("CREATE TABLE {p}probe (n INTEGER NOT NULL)")))
    astore = aio.AsyncStore(store, AsyncRunner(engine, workers=2, name="mixed"))
    yield store, astore, path
    astore._runner.close()
    store.close()


def _probe(store: durastate.Store) -> list[int]:
    engine = store.engine
    return sorted(row[0] for row in engine.all(engine.sql(READ("SELECT n FROM {p}probe"))))


def _insert_many(store: durastate.Store, rows: list[tuple[int]] | Iterator[tuple[int]]) -> None:
    engine = store.engine
    engine.executemany(engine.sql(WRITE("INSERT INTO {p}probe (n) VALUES (?)")), rows)


def _in_transaction(store: durastate.Store) -> None:
    with store.transaction():
        store.kv.put(b"s", b"n", b"t", b"v")
        store.kv.incr(b"s", b"c", b"n")


# name -> (the sync write, a check that it landed exactly once)
WRITES: dict[str, tuple[Callable[[durastate.Store], object], Callable[[durastate.Store], bool]]] = {
    "execute": (
        lambda s: s.kv.put(b"s", b"n", b"k", b"v"),
        lambda s: s.kv.get(b"s", b"n", b"k") == b"v",
    ),
    "one (RETURNING)": (
        lambda s: s.kv.incr(b"s", b"c", b"n"),
        lambda s: s.kv.counter(b"s", b"c", b"n") == 1,
    ),
    "executemany (list)": (
        lambda s: _insert_many(s, [(1,), (2,), (3,)]),
        lambda s: _probe(s) == [1, 2, 3],
    ),
    "executemany (generator)": (
        lambda s: _insert_many(s, ((n,) for n in (1, 2, 3))),
        lambda s: _probe(s) == [1, 2, 3],
    ),
    "transaction": (
        _in_transaction,
        lambda s: s.kv.get(b"s", b"n", b"t") == b"v" and s.kv.counter(b"s", b"c", b"n") == 1,
    ),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_a_sync_write_after_the_loop_ended_waits_for_the_lock_and_lands_once(
    mixed: tuple[durastate.Store, aio.AsyncStore, Path], name: str
) -> None:
    store, astore, path = mixed
    write, landed_once = WRITES[name]

    async def inline_call() -> None:
        await astore.kv.put(b"s", b"n", b"warm", b"v")  # leaves this thread's connection at timeout 0

    asyncio.run(inline_call())
    with lock_released_later(path) as released:
        write(store)  # refused at once, then run again with the store's busy timeout: waits for the holder
        assert released.is_set()
    assert landed_once(store)


def test_a_sync_write_on_the_loops_thread_while_it_runs_waits_only_the_loops_lock_wait(
    mixed: tuple[durastate.Store, aio.AsyncStore, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, astore, path = mixed
    monkeypatch.setattr(loop, "LOOP_LOCK_WAIT", 0.2)

    async def main() -> None:
        await astore.kv.put(b"s", b"n", b"warm", b"v")
        holder = await asyncio.to_thread(WriteLockHolder(path).start)  # held past LOOP_LOCK_WAIT
        try:
            with pytest.raises(LockBusy, match=r"waited 0\.2 s"):
                store.kv.put(b"s", b"n", b"k", b"v")  # would block the loop for the busy timeout: refused
            with pytest.raises(LockBusy, match=r"waited 0\.2 s"):
                _in_transaction(store)
        finally:
            await asyncio.to_thread(holder.release)

    asyncio.run(main())
    assert store.kv.get(b"s", b"n", b"k") is None
    assert store.kv.counter(b"s", b"c", b"n") == 0
