"""Async reads at ``durability="full"``: a call declared a read runs on the event loop's thread and changes nothing.

At ``durability="full"`` every commit waits for an fsync, so an async call
that may write runs on a worker thread (``durastate._aio``). A read commits
nothing: the facades' methods declared ``reads`` (``aio._facades``), their
iterators and tails, and the integrations' ``AsyncCalls.read`` still run
inline, as every call does at ``durability="normal"``. Here each declared
facade read is called once with the store's worker hand-off made to fail
(``AsyncRunner.on_thread``): it must complete inline, and the loop thread's
change count (``no_wait_changes``) must not move. The integrations' reads
are checked across the whole suite by ``tests/_read_guard.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate import aio
from durastate._aio import AsyncRunner
from durastate.aio._facades import SPECS
from durastate.engines.sqlite import CAPABILITIES
from durastate.integrations._common import AsyncCalls

Call = Callable[[Any], Awaitable[Any]]

# One call of every facade method declared a read, by (facade, method).
READS: dict[tuple[str, str], Call] = {
    ("AsyncScopedKV", "get"): lambda s: s.kv.scope(b"s").get(b"n", b"k"),
    ("AsyncScopedKV", "get_many"): lambda s: s.kv.scope(b"s").get_many(b"n", [b"k", b"x"]),
    ("AsyncScopedKV", "counter"): lambda s: s.kv.scope(b"s").counter(b"n", b"c"),
    ("AsyncScopedKV", "counters"): lambda s: s.kv.scope(b"s").counters(b"n"),
    ("AsyncScopedKV", "log_keys"): lambda s: s.kv.scope(b"s").log_keys(b"n"),
    ("AsyncScopedKV", "namespaces"): lambda s: s.kv.scope(b"s").namespaces(),
    ("AsyncKV", "get"): lambda s: s.kv.get(b"s", b"n", b"k"),
    ("AsyncKV", "get_many"): lambda s: s.kv.get_many(b"s", b"n", [b"k", b"x"]),
    ("AsyncKV", "counter"): lambda s: s.kv.counter(b"s", b"n", b"c"),
    ("AsyncKV", "counters"): lambda s: s.kv.counters(b"s", b"n"),
    ("AsyncKV", "log_keys"): lambda s: s.kv.log_keys(b"s", b"n"),
    ("AsyncKV", "namespaces"): lambda s: s.kv.namespaces(b"s"),
    ("AsyncKV", "scopes"): lambda s: s.kv.scopes(),
    ("AsyncQueues", "backlog"): lambda s: s.queues.backlog("q"),
    ("AsyncQueues", "dead_letters"): lambda s: s.queues.dead_letters("q"),
    ("AsyncQueues", "names"): lambda s: s.queues.names(),
    ("AsyncQueues", "peek"): lambda s: s.queues.peek("q"),
    ("AsyncQueues", "peek_ready"): lambda s: s.queues.peek_ready("q"),
    ("AsyncQueues", "stats"): lambda s: s.queues.stats("q"),
    ("AsyncDocuments", "describe"): lambda s: s.documents.describe("d"),
    ("AsyncDocuments", "describe_history"): lambda s: s.documents.describe_history("d"),
    ("AsyncDocuments", "history"): lambda s: s.documents.history("d"),
    ("AsyncDocuments", "list"): lambda s: s.documents.list(),
    ("AsyncDocuments", "read"): lambda s: s.documents.read("d"),
    ("AsyncDocuments", "read_as"): lambda s: s.documents.read_as("d", lambda data, revision: (data, revision)),
    ("AsyncDocuments", "read_raw"): lambda s: s.documents.read_raw("d"),
    ("AsyncRecords", "conversation"): lambda s: s.records.conversation(1),
    ("AsyncRecords", "document"): lambda s: s.records.document(1),
    ("AsyncRecords", "document_revisions"): lambda s: s.records.document_revisions(1),
    ("AsyncRecords", "entry"): lambda s: s.records.entry(1),
    ("AsyncRecords", "find_document"): lambda s: s.records.find_document({"scope": {}, "kind": "k"}),
    ("AsyncRecords", "find_latest_head_marker"): lambda s: s.records.find_latest_head_marker(1),
    ("AsyncRecords", "last_seq"): lambda s: s.records.last_seq(),
    ("AsyncRecords", "scan_conversations"): lambda s: s.records.scan_conversations({}, 5),
    ("AsyncRecords", "scan_documents"): lambda s: s.records.scan_documents({"scope": {}}, 5),
    ("AsyncRecords", "scan_entries"): lambda s: s.records.scan_entries({"conversationId": 1}, 5),
    ("AsyncRecords", "scan_submissions"): lambda s: s.records.scan_submissions({}, 5),
    ("AsyncRecords", "scan_tasks"): lambda s: s.records.scan_tasks({}, 5),
    ("AsyncRecords", "submission"): lambda s: s.records.submission(1),
    ("AsyncRecords", "submission_by_request"): lambda s: s.records.submission_by_request(1, "r"),
    ("AsyncRecords", "task"): lambda s: s.records.task(1),
    ("AsyncEvents", "get"): lambda s: s.events.get("e", 1),
    ("AsyncEvents", "list_sessions"): lambda s: s.events.list_sessions(),
    ("AsyncEvents", "list_snapshots"): lambda s: s.events.list_snapshots("e"),
    ("AsyncEvents", "read"): lambda s: s.events.read("e"),
    ("AsyncEvents", "read_after"): lambda s: s.events.read_after("e", 0),
    ("AsyncEvents", "read_events"): lambda s: s.events.read_events("e"),
    ("AsyncEvents", "read_state"): lambda s: s.events.read_state("e", "r"),
    ("AsyncEvents", "lane_backlog"): lambda s: s.events.lane_backlog(),
    ("AsyncEvents", "dead_letters"): lambda s: s.events.dead_letters(),
    ("AsyncPresence", "namespaces"): lambda s: s.presence.namespaces(),
    ("AsyncPresence", "peek"): lambda s: s.presence.peek("p"),
}


def filled(path: Path, durability: str) -> None:
    """A store file holding something for each facet's reads to find (with expired presence rows)."""
    store = durastate.open(path, durability=durability)
    try:
        store.kv.put(b"s", b"n", b"k", b"v")
        store.kv.incr(b"s", b"n", b"c")
        store.kv.append(b"s", b"n", b"log", b"entry")
        store.queues.push("q", [b"item"])
        store.documents.write("d", {"a": 1})
        store.documents.write("d", {"a": 2}, expect=1)
        store.events.append("e", [{"type": "t"}])
    finally:
        store.close()


def no_hand_off(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every hand-off to a worker fail; the names of the functions that were handed off."""
    handed: list[str] = []

    async def refuse(self: AsyncRunner, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(fn, "__name__", repr(fn)))
        raise AssertionError(f"{fn!r} was handed to a worker")

    monkeypatch.setattr(AsyncRunner, "on_thread", refuse)
    return handed


def run_inline(path: Path, durability: str, call: Call) -> tuple[int, int]:
    """Open ``path`` async, make ``call``; the loop thread's change count before and after."""

    async def main() -> tuple[int, int]:
        store = await aio.open(path, durability=durability)
        try:
            no_wait = store._runner.no_wait_reads
            assert no_wait is not None
            before = no_wait()
            try:
                await call(store)
            except durastate.DurastateError:
                pass  # a read that found nothing to read (an unknown conversation): it ran, inline
            return before, no_wait()
        finally:
            store._store.close()  # AsyncStore.close() would hand the close to a worker, refused here

    return asyncio.run(main())


def test_every_declared_read_has_a_case() -> None:
    declared = {(spec.name, name) for spec in SPECS for name, method in spec.methods.items() if method.reads}
    assert declared == set(READS)


@pytest.mark.parametrize(("facade", "method"), sorted(READS))
def test_a_declared_read_runs_inline_at_full_durability_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, facade: str, method: str
) -> None:
    path = tmp_path / "s.db"
    filled(path, "full")
    handed = no_hand_off(monkeypatch)
    before, after = run_inline(path, "full", READS[facade, method])
    assert handed == []
    assert after == before, f"{facade}.{method} changed {after - before} rows"


def test_a_write_at_full_durability_leaves_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: what is not declared a read is handed to a worker at ``durability="full"``, inline at normal."""
    path = tmp_path / "s.db"
    filled(path, "full")
    handed = no_hand_off(monkeypatch)
    with pytest.raises(AssertionError, match="handed to a worker"):
        run_inline(path, "full", lambda s: s.kv.put(b"s", b"n", b"k2", b"v"))
    assert handed == ["put"]
    with pytest.raises(AssertionError, match="handed to a worker"):
        run_inline(path, "full", lambda s: s.presence.read("p"))  # sweeps in passing: not a read
    before, after = run_inline(path, "normal", lambda s: s.kv.put(b"s", b"n", b"k2", b"v"))
    assert after == before + 1


def test_iterators_and_tails_read_inline_at_full_durability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.db"
    filled(path, "full")
    handed = no_hand_off(monkeypatch)

    async def iterate(s: aio.AsyncStore) -> None:
        assert [item async for item in s.kv.scan(b"s", b"n")] == [(b"k", b"v")]
        assert [key async for key in s.documents.iter_keys()] == ["d"]
        stream = s.events.stream("e")
        first = await anext(stream)
        await stream.aclose()
        assert first.index == 1

    run_inline(path, "full", iterate)
    assert handed == []


def test_integration_reads_run_inline_at_full_durability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AsyncCalls.read`` inline, ``AsyncCalls.call`` on a worker, at ``durability="full"``."""
    store = durastate.open(tmp_path / "s.db", durability="full")
    calls = AsyncCalls(store, "test")
    handed = no_hand_off(monkeypatch)

    async def main() -> None:
        assert await calls.read(store.kv.get, b"s", b"n", b"k") is None
        with pytest.raises(AssertionError, match="handed to a worker"):
            await calls.call(store.kv.get, b"s", b"n", b"k")

    try:
        asyncio.run(main())
    finally:
        store.close()
    assert handed == ["get"]


@pytest.mark.parametrize(
    ("calls", "reads", "inline", "inline_reads"),
    [(True, True, True, True), (True, False, True, True), (False, True, False, True), (False, False, False, False)],
)
def test_the_runner_reads_inline_where_the_engine_declares_it(
    calls: bool, reads: bool, inline: bool, inline_reads: bool
) -> None:
    """``inline_async_calls`` runs every call inline, ``inline_async_reads`` reads only, neither nothing."""

    class Declared:
        capabilities = CAPABILITIES.replace(inline_async_calls=calls, inline_async_reads=reads)

        def no_wait_changes(self) -> int:
            return 0

    runner = AsyncRunner(Declared())  # type: ignore[arg-type]
    try:
        assert (runner.inline, runner.inline_reads) == (inline, inline_reads)
    finally:
        runner.close()


def test_memory_stores_never_read_inline() -> None:
    with durastate.open("memory:", durability="full") as store:
        caps = store.engine.capabilities
        assert not caps.inline_async_calls and not caps.inline_async_reads


def test_the_suites_read_guard_fails_a_declared_read_that_writes(tmp_path: Path) -> None:
    """``tests/_read_guard.py``, installed for every test, catches a write declared a read (at either durability)."""
    from _read_guard import ReadWrote

    store = durastate.open(tmp_path / "s.db")
    calls = AsyncCalls(store, "test")

    async def main() -> None:
        with pytest.raises(ReadWrote, match="declared a read but changed 1 rows"):
            await calls.read(store.kv.put, b"s", b"n", b"k", b"v")
        assert await calls.read(store.kv.get, b"s", b"n", b"k") == b"v"

    try:
        asyncio.run(main())
    finally:
        calls.close()
        store.close()


def test_the_a2_adapters_reads_run_inline_at_full_durability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``compat.a2``'s reads (``read``, ``read_state``, ``inspect``'s listings) inline; its ``append`` on a worker."""
    from durastate.compat.a2 import A2Store

    filled(tmp_path / "s.db", "full")
    store = durastate.open(tmp_path / "s.db", durability="full")
    a2 = A2Store(store)
    handed = no_hand_off(monkeypatch)

    async def main() -> None:
        assert [event.index for event in await a2.read("e")] == [1]
        await a2.read_state("e", "reducer")
        assert [s.session_id for s in (await a2.inspect.list_sessions(prefix="", limit=10)).sessions] == ["e"]
        await a2.inspect.read_events("e", after_index=0, limit=10)
        await a2.inspect.list_snapshots("e")
        with pytest.raises(AssertionError, match="handed to a worker"):
            await a2.append("e", [{"type": "t"}])

    try:
        asyncio.run(main())
    finally:
        store.close()
    assert handed == ["append"]


def test_a_read_on_the_loop_sees_the_write_a_worker_just_committed(tmp_path: Path) -> None:
    """At ``durability="full"`` writes commit on workers, reads run on the loop's own connection: each read sees
    the write awaited before it, also while an iterator on the loop's connection is half consumed."""

    async def main() -> list[int]:
        store = await aio.open(tmp_path / "s.db", durability="full")
        try:
            await store.kv.put_many(b"s", b"n", [(b"k%05d" % i, b"v") for i in range(1500)])  # pages of the scan
            scan = store.kv.scan(b"s", b"n")
            await anext(scan)
            stale = []
            for i in range(50):
                await store.kv.put(b"s", b"m", b"k", b"%d" % i)
                if await store.kv.get(b"s", b"m", b"k") != b"%d" % i:
                    stale.append(i)
                await anext(scan)
            return stale
        finally:
            await store.close()

    assert asyncio.run(main()) == []


def test_the_pi_durable_adapters_reads_run_inline_at_full_durability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compat.pi_durable``'s lookups and scans inline at ``durability="full"``; ``commit`` and ``mint_id`` on a
    worker (they write)."""
    from durastate.compat.pi_durable import SqliteStorage, StorageRequestError

    filled(tmp_path / "s.db", "full")
    store = durastate.open(tmp_path / "s.db", durability="full")
    storage = SqliteStorage(store, AsyncRunner(store.engine, name="pi-durable-test"))
    reads: list[Callable[[], Awaitable[Any]]] = [
        lambda: storage.conversation(1),
        lambda: storage.scan_conversations({}, 5),
        lambda: storage.entry(1),
        lambda: storage.entry(1, 1),
        lambda: storage.find_latest_head_marker(1),
        lambda: storage.scan_entries({"conversationId": 1}, 5),
        lambda: storage.task(1),
        lambda: storage.scan_tasks({}, 5),
        lambda: storage.submission(1),
        lambda: storage.scan_submissions({}, 5),
        lambda: storage.submission_by_request(1, "r"),
        lambda: storage.find_document({"scope": {}, "kind": "k"}, "current"),
        lambda: storage.document(1, "current"),
        lambda: storage.scan_documents({"scope": {}}, 5),
    ]
    handed = no_hand_off(monkeypatch)

    async def main() -> None:
        for read in reads:
            try:
                await read()
            except StorageRequestError:
                pass  # a read that found nothing to read (an unknown conversation): it ran, inline
        with pytest.raises(AssertionError, match="handed to a worker"):
            await storage.mint_id()

    try:
        asyncio.run(main())
    finally:
        store.close()
    assert handed == ["mint_id"]
