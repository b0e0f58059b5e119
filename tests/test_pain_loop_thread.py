"""Issue 26, pain 7: a sync call on the thread of the event loop that owns the store never hangs.

Peers' users report sync calls made from inside the loop that drives an
async transaction hanging forever (the sync call waits for a lock the
transaction holds; the transaction waits for the loop). In durastate such a
misuse either works or raises a clear ``StoreUnavailable`` (``LockBusy`` on
SQLite) within seconds: a sync call on a loop's thread waits for SQLite's
write lock or a PostgreSQL row lock at most ``LOOP_LOCK_WAIT``
(``engines.loop``). Each scenario runs
in a subprocess with a timeout, so a hang fails the test instead of stalling
the suite. Shutdown: closing a loop with calls still on worker threads
prints no "Event loop is closed".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# A hang is what these tests exist to catch; a healthy run takes a second or two.
HANG = 60

SCENARIO = textwrap.dedent(
    """
    import asyncio, sys
    import durastate
    from durastate import aio
    from durastate.errors import StoreUnavailable

    URL = sys.argv[1]

    async def holder_then_sync_call(same_task: bool) -> str:
        sync_store = durastate.open(URL)
        astore = await aio.open(URL)
        try:
            await astore.kv.put(b"s", b"n", b"k", b"before")
            locked = asyncio.Event()
            release = asyncio.Event()

            async def hold() -> None:
                async with astore.transaction() as tx:
                    await tx.kv.put(b"s", b"n", b"k", b"in-tx")  # the write lock (SQLite) / the row lock
                    # On PostgreSQL a put in a transaction is sent without waiting for its answer; a read
                    # waits for it, so the row lock is held from here on (not only once the put arrives).
                    await tx.kv.get(b"s", b"n", b"k")
                    locked.set()
                    await release.wait()

            if same_task:
                async with astore.transaction() as tx:
                    await tx.kv.put(b"s", b"n", b"k", b"in-tx")
                    await tx.kv.get(b"s", b"n", b"k")  # as in hold(): the lock is held once this returns
                    try:
                        sync_store.kv.put(b"s", b"n", b"k", b"sync")  # the misuse
                        outcome = "worked"
                    except StoreUnavailable as exc:
                        outcome = "refused: " + str(exc)
            else:
                task = asyncio.create_task(hold())
                await locked.wait()
                try:
                    sync_store.kv.put(b"s", b"n", b"k", b"sync")  # the misuse
                    outcome = "worked"
                except StoreUnavailable as exc:
                    outcome = "refused: " + str(exc)
                release.set()
                await task
            assert await astore.kv.get(b"s", b"n", b"k") == b"in-tx", "the transaction committed"
            return outcome
        finally:
            await astore.close()
            sync_store.close()

    for same_task in (True, False):
        print(asyncio.run(holder_then_sync_call(same_task)).replace(chr(10), " "), flush=True)
    """
)

SHUTDOWN = textwrap.dedent(
    """
    import asyncio, sys
    from durastate import aio

    async def main() -> None:
        astore = await aio.open(sys.argv[1])
        for i in range(20):
            asyncio.get_running_loop().create_task(astore.kv.put(b"s", b"n", b"k%d" % i, b"v"))
        await asyncio.sleep(0)  # calls handed out, none awaited: the loop ends under them

    asyncio.run(main())
    print("ended", flush=True)
    """
)


def _run(script: str, url: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-c", script, url], capture_output=True, text=True, timeout=HANG, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung: no end within {HANG} s; output so far: {exc.stdout!r} {exc.stderr!r}")


def test_a_sync_write_on_the_loops_thread_under_an_async_transaction_is_refused_clearly(shared_url: str) -> None:
    done = _run(SCENARIO, shared_url)
    assert done.returncode == 0, done.stderr
    outcomes = done.stdout.splitlines()
    assert len(outcomes) == 2, done.stdout  # same task, then another task
    for outcome in outcomes:
        assert outcome.startswith("refused: "), outcome
        assert "event loop" in outcome and "durastate.aio" in outcome, outcome


def test_a_loop_ending_under_calls_on_workers_prints_no_closed_loop_error(shared_url: str) -> None:
    done = _run(SHUTDOWN, shared_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ended"
    assert "Event loop is closed" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
