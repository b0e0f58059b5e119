"""A transaction whose statements carry tens of MB commits on PostgreSQL instead of waiting forever.

The engine sends a transaction's statements in one pipeline and then waits
for their results. psycopg hands a statement to libpq, whose flush on a
non-blocking connection sends only what the socket takes; psycopg's
pipeline loop ends once its last command is handed over, so of a statement
of a few MB the rest could stay in libpq's buffer: the engine then waited
for results while the server waited for the rest of the statement, both
forever (four 20 MB values in one transaction, or one records commit of a
20 MB document; psycopg's own ``Pipeline.sync`` does the same, 3.3.9).
``PooledConnection._sent_whole_gen`` sends the rest before any wait for
results. Each scenario runs in a subprocess with a timeout: a hang fails
the test instead of stalling the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# A healthy run of the scenario takes a few seconds; the hang it exists to catch never ends.
HANG = 120

SCENARIO = textwrap.dedent(
    """
    import asyncio, sys
    import durastate
    from durastate import aio

    URL, MB = sys.argv[1], 20 << 20
    with durastate.open(URL) as store:
        with store.transaction():  # several large statements in one pipeline
            for i in range(4):
                store.kv.put(b"s", b"n", b"k%d" % i, bytes([65 + i]) * MB)
        got = store.kv.get_many(b"s", b"n", [b"k%d" % i for i in range(4)])
        assert [(len(v), v[:1]) for v in got] == [(MB, bytes([65 + i])) for i in range(4)], "transaction"

        # One call whose transaction carries one large statement.
        store.records.commit([{"type": "conversation", "value": {"id": 1, "title": "t" * MB}}])
        conversation = store.records.conversation(1)
        assert conversation is not None and len(conversation["title"]) == MB, "records commit"
        print("sync ok", flush=True)

    async def main() -> None:
        async with aio.open(URL) as astore:
            def puts(sync_store: durastate.Store) -> None:
                for i in range(3):
                    sync_store.kv.put(b"s", b"a", b"k%d" % i, b"z" * MB)

            await astore.transact(puts)
            sizes = [len(v or b"") for v in await astore.kv.get_many(b"s", b"a", [b"k0", b"k1", b"k2"])]
            assert sizes == [MB] * 3, sizes
        print("async ok", flush=True)

    asyncio.run(main())
    """
)


def test_a_transaction_of_large_statements_commits_instead_of_waiting_forever(pg_url: str) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCENARIO, pg_url], capture_output=True, text=True, timeout=HANG, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung: no end within {HANG} s; output so far: {exc.stdout!r} {exc.stderr!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["sync ok", "async ok"], done.stdout
