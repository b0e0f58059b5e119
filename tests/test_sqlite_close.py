"""``SqliteEngine.close()`` never closes a connection under a statement another thread is running.

It used to close every thread's connection at once; a thread inside
``sqlite3_step`` (say, a reader's ``all()``) then had its connection freed
under it and the process crashed (segfault). Now ``close()`` waits for
running statements (``close_wait`` seconds in all) and leaves a connection
whose statement outlasts that to its own thread, which closes it at its
next call; that call, and every later one, raises ``StoreClosed``.

The stress test runs in a child process, so a crash is an exit code (a
test failure) rather than the end of the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durastate
from durastate import StoreClosed
from durastate.engines.sqlite import SqliteEngine

ROUNDS = 300
WORKERS = 4

# Each round: WORKERS threads run statements in a loop (long reads, writes,
# transactions, drains) until their call raises StoreClosed; the main
# thread closes the store once they have done a random number of calls
# between them (counted under a condition, not timed).
_STRESS = """
import random, sys, threading
import durastate
from durastate import StoreClosed

url, rounds, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(11)


def run_round():
    store = durastate.open(url)
    kv = store.kv
    kv.put_many(b"s", b"n", [(b"%04d" % i, b"x" * 200) for i in range(300)])
    progress = threading.Condition()
    calls = [0]
    outcomes = []

    def call(i, n):
        kind = (i + n) % 4
        if kind == 0:
            list(kv.scan(b"s", b"n"))  # one all() of 300 rows: a long statement
        elif kind == 1:
            kv.put(b"s", b"w", b"%d-%d" % (i, n % 50), b"v")
        elif kind == 2:
            with store.transaction():
                kv.incr(b"s", b"c", b"%d" % i)
                kv.get_many(b"s", b"n", [b"%04d" % k for k in range(0, 300, 7)])
        else:
            kv.drain(b"s", b"d%d" % i)

    def worker(i):
        n = 0
        try:
            while True:
                call(i, n)
                n += 1
                with progress:
                    calls[0] += 1
                    progress.notify_all()
        except StoreClosed:
            outcomes.append("StoreClosed")
        except BaseException as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    target = random.randint(0, 40)
    with progress:
        progress.wait_for(lambda: calls[0] >= target)
    store.close()
    for thread in threads:
        thread.join()
    assert outcomes == ["StoreClosed"] * workers, outcomes
    assert store.engine._connections.by_thread == {} and store.engine._connections.spare == []


for _ in range(rounds):
    run_round()
print("survived", rounds)
"""


def _url(engine: str, tmp_path: Path) -> str:
    return "memory:" if engine == "sqlite-memory" else f"sqlite://{tmp_path / 'state.db'}"


@pytest.mark.parametrize("engine", ["sqlite-file", "sqlite-memory"])
def test_closing_while_threads_run_statements_never_crashes(engine: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_STRESS), _url(engine, tmp_path), str(ROUNDS), str(WORKERS)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert done.stdout.strip() == f"survived {ROUNDS}"


# -- one statement held open inside SQLite by a function that waits ---------------


class _HeldStatement:
    """A thread running ``SELECT held()`` on its own connection until ``release()``.

    ``held()`` is a SQL function registered on that connection: it runs
    inside the statement, so while it waits the thread is in SQLite.
    """

    def __init__(self, store: durastate.Store) -> None:
        self.store = store
        self.entered = threading.Event()
        self.released = threading.Event()
        self.open_inside: list[bool] = []  # was the connection still open when the statement ended?
        self.results: list[object] = []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        self.entered.wait()

    def _held(self) -> int:
        self.entered.set()
        self.released.wait()
        try:
            self.conn.total_changes  # noqa: B018  raises ProgrammingError once closed
            self.open_inside.append(True)
        except Exception:
            self.open_inside.append(False)
        return 7

    def _run(self) -> None:
        engine = self.store.engine
        assert isinstance(engine, SqliteEngine)
        self.conn = engine._thread_connection()
        self.conn.create_function("held", 0, self._held)
        for _ in range(2):  # the held statement, then the call after close()
            try:
                self.results.append(engine.one("SELECT held()"))
            except StoreClosed as exc:
                self.results.append(exc)
            self.entered.set()  # the second call never enters held()
        try:
            self.conn.execute("SELECT 1")
            self.results.append("connection still open")
        except Exception:
            self.results.append("connection closed")

    def release(self) -> None:
        self.released.set()
        self.thread.join()


@pytest.fixture(params=["sqlite-file", "sqlite-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[durastate.Store]:
    opened = durastate.open(_url(request.param, tmp_path))
    yield opened
    opened.close()


class _SignallingGuard:
    """A connection's guard that runs ``on_wait`` when ``close()`` starts waiting for it."""

    def __init__(self, guard: threading.RLock, on_wait: threading.Event) -> None:
        self.guard = guard
        self.on_wait = on_wait

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.on_wait.set()
        return self.guard.acquire(blocking, timeout)

    def release(self) -> None:
        self.guard.release()


def test_close_waits_for_a_running_statement_then_closes_its_connection(store: durastate.Store) -> None:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    held = _HeldStatement(store)
    # The statement goes on only once close() waits for its connection.
    key = id(held.thread)
    thread, conn, guard, state = engine._connections.by_thread[key]
    engine._connections.by_thread[key] = (thread, conn, _SignallingGuard(guard, held.released), state)  # type: ignore[assignment]
    store.close()
    held.thread.join()
    assert held.open_inside == [True]  # not closed while the statement ran
    assert held.results[0] == (7,)
    assert isinstance(held.results[1], StoreClosed)
    assert held.results[2] == "connection closed"


def test_a_statement_that_outlasts_close_wait_keeps_its_connection_until_it_returns(store: durastate.Store) -> None:
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    engine.close_wait = 0.0  # give up on the running statement at once
    held = _HeldStatement(store)
    store.close()  # returns while the statement is still running
    assert store.closed and held.thread.is_alive() and held.open_inside == []
    held.release()
    assert held.open_inside == [True]
    assert held.results[0] == (7,)  # the running statement finished normally
    assert isinstance(held.results[1], StoreClosed)  # its thread's next call is refused...
    assert held.results[2] == "connection closed"  # ...and closed the connection
