"""A store dropped without ``close()`` leaves nothing behind once collected: no thread, no descriptor, no engine.

A long-lived service that opens a store per task and, on some path, forgets
to close it must not accumulate what each store held (docs/decisions.md,
"leak-audit"). Counted, not timed: the threads a store started, the
descriptors naming its file, whether its engine is still alive. A thread is
joined with a deadline that only a failure reaches.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
import weakref
from pathlib import Path

import pytest

import durastate
from durastate import _aio, aio
from durastate.engines.base import Engine

# Seconds the threads a store started may take to end once it is collected (reached only on failure).
FAILURE_DEADLINE = 10.0


def test_an_async_store_dropped_unclosed_ends_its_threads_and_frees_its_engine(store_url: str) -> None:
    before = set(threading.enumerate())

    async def use_and_drop() -> weakref.ref[Engine]:
        store = await aio.open(store_url)
        await store.kv.put(b"s", b"n", b"k", b"v")
        assert await store.kv.get(b"s", b"n", b"k") == b"v"
        async with store.transaction() as tx:  # on a thread pinned to the block
            await tx.kv.put(b"s", b"n", b"t", b"v")
        assert await store.queues.claim("nothing", lease=5, wait=0.01) is None  # PostgreSQL: the listener too
        return weakref.ref(store._store.engine)  # and the store goes with this frame, unclosed

    engine = asyncio.run(use_and_drop())
    # The process's one waker thread (durastate._aio_jobs.Waker) is no store's: it lives as long as the process.
    started = set(threading.enumerate()) - before - {_aio.WAKER._thread}
    assert started  # workers, a pinned thread (and on PostgreSQL the pool's and the listener's)
    gc.collect()
    deadline = time.monotonic() + FAILURE_DEADLINE
    for thread in started:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert [thread.name for thread in started if thread.is_alive()] == []
    assert engine() is None  # its connections closed as sqlite3 and psycopg close a collected connection


def _descriptors_naming(path: Path) -> list[str]:
    """What this process's open descriptors point at, of ``path`` and the files SQLite keeps beside it."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed since
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_file_store_dropped_unclosed_keeps_no_descriptor_of_its_file(tmp_path: Path) -> None:
    path = tmp_path / "dropped.db"
    for _ in range(3):
        store = durastate.open(path)
        store.kv.put(b"s", b"n", b"k", b"v")  # the first write looks at the WAL: the -shm file is opened for it
        assert any(target.startswith(f"{path}-shm") for target in _descriptors_naming(path))
        del store
        gc.collect()
        assert _descriptors_naming(path) == []
