"""Wake latency on PostgreSQL: a waiter in another process, after a commit; polling against listening.

Run it with ``.venv/bin/python bench/pg_wake.py`` (``--help``). The server
comes from ``--url``, else ``DURASTATE_BENCH_POSTGRES_URL``, else
``DURASTATE_TEST_POSTGRES_URL``, else
``postgresql://postgres@127.0.0.1:5432/postgres``; everything happens in a
fresh schema that is dropped at the end.

A waiter process calls ``queues.pop(queue, wait=...)`` on a queue of its own (sync, or the
``durastate.aio`` store's, async) ``--wakes`` times in a row. Before each
call it tells this process, which then pauses a random 20-70 ms (so the
waiter is blocked, at a random phase of any polling cycle), reads
``time.monotonic()`` (one clock for every process of the machine on Linux)
and pushes an item carrying that reading. The waiter takes the difference
when ``pop`` returns: the time from the push being sent to the waiter
holding the item, the push's own commit round trip included.

Paths, each in its own waiter process, interleaved round by round:

* ``listen``: the store's listening connection (``engines.postgres_listen``).
* ``raw`` (sync only): the floor, what a hand-written waiter gets: a
  psycopg connection of its own, ``LISTEN``ing for the whole run, waiting
  in ``notifies()``, then a ``pop`` without ``wait``.
* ``poll``: the path before it, rebuilt here: the waiter re-checks every
  50 ms; sync waiters ``LISTEN`` and ``UNLISTEN`` on a pooled connection in
  each 50 ms cycle, async waiters sleep 50 ms on the loop between checks.

Reported per path and flavour: median and 99th percentile in ms, and the
poll/listen ratio of the medians (> 1: listening wakes faster).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import time
from typing import Any

import psycopg

import durastate
from _postgres import postgres_url
from durastate import aio
from durastate.engines.postgres import PostgresEngine
from durastate.engines.watch import ChangeWatch, PolledWatch
from durastate.testing import postgres_server

WAIT = 30.0  # a pop's wait=: never reached


def _old_wait_for_change(engine: PostgresEngine, channel: str, timeout: float) -> None:
    """The sync wait before the listener: LISTEN and UNLISTEN on a borrowed pooled connection."""
    conn = engine._borrow()
    name = engine.channel(channel)
    try:
        conn.execute(f"LISTEN {name}")
        for _ in conn.notifies(timeout=timeout, stop_after=1):
            break
        conn.execute(f"UNLISTEN {name}")
    finally:
        engine._give_back(conn)


def _use_polling(engine: PostgresEngine) -> None:
    """Turn ``engine``'s waits into the 50 ms polling of before (see the module docstring)."""

    def watch(channel: str, poll: float) -> ChangeWatch:
        return PolledWatch(engine, channel, poll)

    engine.watch = watch  # type: ignore[method-assign]
    engine.wait_for_change = lambda channel, timeout: _old_wait_for_change(engine, channel, timeout)  # type: ignore[method-assign]


def waiter(url: str, path: str, flavour: str, wakes: int) -> None:
    """The waiter process: ``wakes`` pops, a line to stdout before each, the latencies (s) as JSON at the end."""
    latencies: list[float] = []

    def took(payload: bytes | None) -> None:
        assert payload is not None, f"a pop timed out ({path}, {flavour}, after {len(latencies)})"
        latencies.append(time.monotonic() - struct.unpack("d", payload)[0])

    if path == "raw":
        # The floor: a connection of its own LISTENing for the whole run, psycopg's notifies(), then a pop.
        with durastate.open(url) as store, psycopg.connect(url, autocommit=True) as conn:
            engine = store.engine
            assert isinstance(engine, PostgresEngine)
            conn.execute(f"LISTEN {engine.channel('queue:' + _queue(flavour, path).encode().hex())}")
            for _ in range(wakes):
                print("ready", flush=True)
                payload = store.queues.pop(_queue(flavour, path))
                while payload is None:
                    for _ in conn.notifies(timeout=WAIT, stop_after=1):
                        break
                    payload = store.queues.pop(_queue(flavour, path))
                took(payload)
    elif flavour == "sync":
        with durastate.open(url) as store:
            engine = store.engine
            assert isinstance(engine, PostgresEngine)
            if path == "poll":
                _use_polling(engine)
            for _ in range(wakes):
                print("ready", flush=True)
                took(store.queues.pop(_queue(flavour, path), wait=WAIT))
    else:

        async def run() -> None:
            async with await aio.open(url) as astore:
                engine = astore._store.engine
                assert isinstance(engine, PostgresEngine)
                if path == "poll":
                    _use_polling(engine)
                for _ in range(wakes):
                    print("ready", flush=True)
                    took(await astore.queues.pop(_queue(flavour, path), wait=WAIT))

        asyncio.run(run())
    print(json.dumps(latencies), flush=True)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=None)
    parser.add_argument("--wakes", type=int, default=200, help="wakes per path and flavour")
    parser.add_argument("--role", default="main", help=argparse.SUPPRESS)
    parser.add_argument("--path", default="listen", help=argparse.SUPPRESS)
    parser.add_argument("--flavour", default="sync", help=argparse.SUPPRESS)
    args = parser.parse_args()
    base = postgres_url(args.url)
    if args.role == "waiter":
        waiter(base, args.path, args.flavour, args.wakes)
        return
    url, schema = postgres_server.create_schema(base)
    try:
        results = run_all(url, args.wakes)
    finally:
        postgres_server.drop_schema(base, schema)
    print(f"{'flavour':8} {'path':7} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}")
    for flavour in ("sync", "async"):
        for path in ("raw", "poll", "listen"):
            if (flavour, path) not in results:
                continue
            values = [v * 1000 for v in results[(flavour, path)]]
            print(
                f"{flavour:8} {path:7} {statistics.median(values):10.2f} {_percentile(values, 0.99):8.2f}"
                f" {max(values):8.2f}"
            )
        ratio = statistics.median(results[(flavour, "poll")]) / statistics.median(results[(flavour, "listen")])
        print(f"{flavour:8} median poll/listen: {ratio:.1f}x")
    floor = statistics.median(results[("sync", "raw")]) / statistics.median(results[("sync", "listen")])
    print(f"sync     median raw/listen: {floor:.2f}x")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def run_all(url: str, wakes: int) -> dict[tuple[str, str], list[float]]:
    """Every path and flavour's waiter process, fed one push at a time, round-robin."""
    kinds = [("sync", "raw")] + [(flavour, path) for flavour in ("sync", "async") for path in ("poll", "listen")]
    with durastate.open(url) as store:
        store.queues.push("warm-up", [b""])  # migrated before the waiters open
        procs: dict[tuple[str, str], Any] = {}
        for flavour, path in kinds:
            command = [sys.executable, __file__, "--role", "waiter", "--url", url, "--path", path]
            procs[(flavour, path)] = subprocess.Popen(
                [*command, "--flavour", flavour, "--wakes", str(wakes)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
        try:
            order = list(kinds)
            for _ in range(wakes):
                random.shuffle(order)
                for kind in order:
                    proc = procs[kind]
                    assert proc.stdout.readline().strip() == "ready"
                    time.sleep(random.uniform(0.02, 0.07))
                    _push(store, kind)
            results = {}
            for kind, proc in procs.items():
                out, _ = proc.communicate(timeout=120)
                results[kind] = json.loads(out.strip().splitlines()[-1])
            return results
        finally:
            for proc in procs.values():
                proc.kill()


def _queue(flavour: str, path: str) -> str:
    """Each waiter pops a queue of its own."""
    return f"wake-{flavour}-{path}"


def _push(store: durastate.Store, kind: tuple[str, str]) -> None:
    store.queues.push(_queue(*kind), [struct.pack("d", time.monotonic())])


if __name__ == "__main__":
    main()
