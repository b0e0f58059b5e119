"""Cancelling calls and closing, hundreds of rounds, in a subprocess (issue 16 item 6).

A connection freed under a thread still inside SQLite crashes the process
(segfault), so each adapter that runs on ``durastate._aio.AsyncRunner``
(``compat.a2``, ``compat.pi_durable``) and ``durastate.aio`` itself runs in
a child process: a crash is an exit code, a test failure. On a SQLite file,
every other round holds the write lock from another connection while the
calls start, so they are on worker threads (waiting for it) when they are
cancelled and the store is closed; the lock is let go from a timer thread
while ``close()`` waits (the rounds: ``durastate.testing.cancel_close``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

ROUNDS = {"sqlite-file": 300, "sqlite-memory": 300, "postgres": 40}

_COMMON = """
import asyncio, sys
from durastate.testing.cancel_close import cancel_then_close
url, rounds = sys.argv[1], int(sys.argv[2])

def cancel_and_close(open_store, calls, close):
    asyncio.run(cancel_then_close(url, rounds, open_store, calls, close))
    print("survived", rounds)
"""

_PI_DURABLE = """
from durastate.compat.pi_durable import SqliteStorage

async def commit(s, n):
    await s.commit([{"type": "conversation", "value": {"id": 1000 + n}}])

async def read(s, n):
    await s.conversation(1000 + n)

async def mint(s, n):
    await s.mint_id()

cancel_and_close(lambda: SqliteStorage.open(url), [commit, read, mint], lambda s: s.close())
"""

_A2 = """
from durastate.compat import a2

async def open_store():
    return a2.open_store(url)

async def append(s, n):
    await s.append("s", [{"type": "t", "payload": n}])

async def claim(s, n):
    await s.claim_available(session_id="s", holder="w", ttl_ms=60_000)

async def read(s, n):
    await s.read_state("s", "r")

async def close(s):
    s.close()

cancel_and_close(open_store, [append, claim, read], close)
"""

_AIO = """
from durastate import aio

async def put(s, n):
    await s.kv.put(b"s", b"n", b"%d" % n, b"v")

async def claim(s, n):
    await s.queues.claim("q", lease=60)

async def transact(s, n):
    await s.transact(lambda st: st.kv.incr(b"s", b"c", b"n"))

cancel_and_close(lambda: aio.open(url), [put, claim, transact], lambda s: s.close())
"""


@pytest.mark.parametrize("adapter", ["pi_durable", "a2", "aio"])
def test_cancel_then_close_never_frees_a_connection_in_use(
    adapter: str, store_url: str, request: pytest.FixtureRequest
) -> None:
    engine = request.node.callspec.params["store_url"]
    script = _COMMON + {"pi_durable": _PI_DURABLE, "a2": _A2, "aio": _AIO}[adapter]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), store_url, str(ROUNDS[engine])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == f"survived {ROUNDS[engine]}"
