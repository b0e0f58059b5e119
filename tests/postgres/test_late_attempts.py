"""A retried write and its first try still running on the lost backend: the write applies once.

When a connection is lost with a write's outcome unknown, the server may
still be running the write on the backend the client lost (it notices the
closed socket only when it next writes to it). The retry
(``PostgresEngine._retry_write``) finds no record of the attempt and runs
the write again under the same attempt id. Two orders:

* the first try is done but uncommitted when the retry runs: the retry
  waits on it (the attempt id's primary key, or a row lock first); once
  the first try commits, the retry rolls back and answers with the first
  try's recorded result (``postgres_attempts.rerun``);
* the retry commits first: the first try, late, fails on the duplicate
  attempt id and changes nothing.

Both for each single write whose retry relies on an attempt row: a counter
add, a push, a pop. The lost backend is played by a plain connection
running the write's attempt-recording statement inside a transaction the
test commits when the retry is seen waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_attempts import (
    OneRowInsert,
    attempt_args,
    attempt_id,
    decode_rows,
    fetch_counted,
    fetch_result,
)
from durastate.engines.postgres_writes import LostTry

pytestmark = pytest.mark.timeout(120)

# A write: (store) -> (its attempt-recording statement, its parameters, fetch (0 count, 1 one row), and
# whether the statement takes the attempt id and time first: a OneRowInsert).
Write = Callable[[durastate.Store], tuple[str, tuple[Any, ...], int, bool]]


def _variant(sql: str) -> tuple[str, bool]:
    variant = sql.companion  # type: ignore[attr-defined]
    return (variant.sql, True) if isinstance(variant, OneRowInsert) else (variant, False)


def _counter_add(store: durastate.Store) -> tuple[str, tuple[Any, ...], int, bool]:
    statement, first = _variant(store.kv._counter_add)
    assert not first
    return statement, (b"s", b"n", b"c", 5, -(2**63), 2**63 - 6), 1, first


def _push(store: durastate.Store) -> tuple[str, tuple[Any, ...], int, bool]:
    now = store.engine.now_ms()
    statement, first = _variant(store.queues._push)
    assert first  # the attempt row goes in ahead of the insert
    return statement, (b"jobs", b"pushed", now, 5, now), 0, first


def _pop(store: durastate.Store) -> tuple[str, tuple[Any, ...], int, bool]:
    statement, first = _variant(store.queues._pop)
    assert not first
    now = store.engine.now_ms()
    return statement, (b"jobs", now, 0, b"jobs", now, 0), 1, first  # per lane of the claim index: queue, now, floor


def _state(store: durastate.Store) -> tuple[int, list[bytes]]:
    """The counter and every queued payload, in order."""
    payloads = []
    while (payload := store.queues.pop("jobs")) is not None:
        payloads.append(payload)
    return store.kv.counter(b"s", b"n", b"c"), payloads


# What each write leaves when it applied once, from the state the fixture set up (counter 1, jobs [first, second]).
ONCE: dict[str, tuple[Write, Any, tuple[int, list[bytes]]]] = {
    "counter add": (_counter_add, (6,), (6, [b"first", b"second"])),
    "push": (_push, 1, (1, [b"first", b"second", b"pushed"])),
    "pop": (_pop, (b"first",), (1, [b"second"])),
}


@pytest.fixture
def store(pg_url: str) -> Iterator[durastate.Store]:
    s = durastate.open(pg_url)
    s.kv.incr(b"s", b"n", b"c", 1)
    s.queues.push("jobs", [b"first"])
    s.queues.push("jobs", [b"second"])
    yield s
    s.close()


def _retry(
    engine: PostgresEngine, statement: str, params: tuple[Any, ...], attempt: bytes, fetch: int, first: bool
) -> Any:
    """The engine's retry of a write whose first try's connection was lost just now."""
    lost = LostTry(psycopg.OperationalError("the connection was lost"), time.monotonic())
    return engine._retry_write(statement, params, attempt, fetch, lost, first)


def _write(store: durastate.Store, write: str) -> tuple[PostgresEngine, str, tuple[Any, ...], int, bool, bytes]:
    """The store's engine; the write's statement, parameters, fetch, whether it takes the attempt id first; an id."""
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    return (engine, *ONCE[write][0](store), attempt_id(engine.now_ms()))


def _blocked_by(admin: psycopg.Connection[Any], pid: int) -> bool:
    blocked = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
    row = admin.execute(blocked, (pid,)).fetchone()
    return row is not None and row[0] > 0


@pytest.mark.parametrize("write", list(ONCE))
def test_a_retry_waiting_on_its_first_try_answers_with_the_first_tries_result(
    store: durastate.Store, pg_url: str, write: str
) -> None:
    _, answer, once = ONCE[write]
    engine, statement, params, fetch, first, attempt = _write(store, write)
    args = attempt_args(params, attempt, engine.now_ms(), first)
    with psycopg.connect(pg_url, autocommit=True) as lost, psycopg.connect(pg_url, autocommit=True) as admin:
        lost_try = lost.transaction()
        lost_try.__enter__()  # the lost backend's statement, done but not yet committed
        cur = lost.execute(statement, args)
        first_answer = cur.fetchone() if fetch else fetch_result(cur, 0) if first else fetch_counted(cur, 0)
        answers: list[Any] = []
        errors: list[BaseException] = []

        def retry() -> None:
            try:
                answers.append(_retry(engine, statement, params, attempt, fetch, first))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        retrying = threading.Thread(target=retry)
        retrying.start()
        deadline = time.monotonic() + 30
        while not _blocked_by(admin, lost.info.backend_pid) and retrying.is_alive():
            assert time.monotonic() < deadline, "the retry never waited for the first try"
            time.sleep(0.005)
        assert retrying.is_alive(), f"the retry ran to its end beside an uncommitted first try: {answers or errors}"
        lost_try.__exit__(None, None, None)  # the first try commits
        retrying.join()
    assert errors == []
    assert answers == [answer] == [first_answer]
    assert _state(store) == once


@pytest.mark.parametrize("write", list(ONCE))
def test_a_first_try_that_runs_after_its_retry_committed_changes_nothing(
    store: durastate.Store, pg_url: str, write: str
) -> None:
    _, answer, once = ONCE[write]
    engine, statement, params, fetch, first, attempt = _write(store, write)
    assert _retry(engine, statement, params, attempt, fetch, first) == answer  # nothing recorded: it runs, commits
    with psycopg.connect(pg_url, autocommit=True) as late, pytest.raises(psycopg.errors.UniqueViolation):
        late.execute(statement, attempt_args(params, attempt, engine.now_ms(), first))
    assert _state(store) == once


def test_one_columns_values_are_decoded_from_their_binary_array(store: durastate.Store, pg_url: str) -> None:
    """A write returning one column records an array of that column's type; each element is a row."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for values, rows in [
            ([b"\x00\xff", None, b""], "(1, '\\x00ff'::bytea), (2, NULL), (3, ''::bytea)"),
            ([-(2**63), 7], "(1, -9223372036854775808), (2, 7::int8)"),
        ]:
            sql = f"SELECT array_send(array_agg(v ORDER BY o)) FROM (VALUES {rows}) t (o, v)"
            row = conn.execute(sql).fetchone()
            assert row is not None
            assert decode_rows(conn, row[0]) == [(v,) for v in values]
