"""Conformance: ``durastate.compat.pi_durable`` behaves as the seed's ``SqliteStorage``.

The semantics are ``store.records``' (tested in ``conformance.records``);
these tests pin what the adapter adds: the async call shapes (both shapes of
``entry``, the trailing ``context``), the error types (``RuntimeError`` for
a refused commit, ``StorageRequestError`` for a bad request), camelCase JSON
records and pages, ``close()`` waiting for calls in flight and refusing
calls afterwards, and the table prefix. Each test drives its own event loop
with ``asyncio.run``; waits use events with deadlines, never sleeps.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from durastate.compat.pi_durable import SqliteStorage, StorageRequestError
from durastate.engines.capabilities import Capabilities
from durastate.engines.sqlite import LockBusy
from durastate.errors import Conflict, InvalidRequest, StoreUnavailable

from .records import base, change, conv_scope, conversation, create, delta, doc_record, entry, submission, task

__all__ = [
    "TestPiDurableClose",
    "TestPiDurableErrorClasses",
    "TestPiDurableErrors",
    "TestPiDurableOpen",
    "TestPiDurableShapes",
    "TestPiDurableSqliteFile",
]

CTX = object()  # the seed's Context: storage never looks at it
DEADLINE = 30.0


def run(store_url: str, body: Callable[[SqliteStorage], Awaitable[Any]], options: Any = None) -> Any:
    """Open storage on ``store_url``, run ``body``, close; in one event loop."""

    async def main() -> Any:
        storage = await SqliteStorage.open(store_url, options)
        try:
            return await body(storage)
        finally:
            await storage.close(CTX)

    return asyncio.run(main())


async def seed(storage: SqliteStorage) -> int:
    return await storage.commit(
        [
            conversation(1),
            *[entry(i, 1, head="h" if i == 3 else None) for i in range(2, 6)],
            conversation(10, parent=(1, 3)),
            entry(11, 10),
            task(20, 1),
            submission(21, 1, request_id="r-1"),
            create(doc_record(30, scope=conv_scope(1), key="k"), base({"a": 1})),
            create(doc_record(31), base({"b": 1})),
        ],
        CTX,
    )


class TestPiDurableShapes:
    def test_seed_call_shapes_and_camel_case_records(self, store_url: str) -> None:
        async def body(s: SqliteStorage) -> None:
            seq = await seed(s)
            assert isinstance(seq, int)
            assert await s.conversation(10, CTX) == conversation(10, parent=(1, 3))["value"]
            assert await s.entry(4, CTX) == {"entry": entry(4, 1)["value"], "commitSeq": seq}
            assert (await s.entry(10, 2, CTX))["entry"]["id"] == 2
            assert await s.entry(10, 4, CTX) is None  # after the fork point
            assert (await s.find_latest_head_marker(10, None, CTX))["id"] == 3  # type: ignore[index]
            page = await s.scan_entries({"conversationId": 10}, 2, None, CTX)
            assert [e["id"] for e in page["items"]] == [11, 3]
            assert page["next"] == {"after": 3, "order": "descending"}
            rest = await s.scan_entries({"conversationId": 10}, 2, page["next"], CTX)
            assert [e["id"] for e in rest["items"]] == [2] and "next" not in rest
            assert (await s.task(20, CTX))["state"] == {"status": "running"}  # type: ignore[index]
            assert [t["id"] for t in (await s.scan_tasks({"conversationId": 1}, 10, None, CTX))["items"]] == [20]
            assert (await s.submission(21, CTX))["requestId"] == "r-1"  # type: ignore[index]
            assert (await s.submission_by_request(1, "r-1", CTX))["id"] == 21  # type: ignore[index]
            assert [x["id"] for x in (await s.scan_submissions({"status": "queued"}, 10, None, CTX))["items"]] == [21]
            assert [c["id"] for c in (await s.scan_conversations({}, 10, None, CTX))["items"]] == [1, 10]
            found = await s.find_document({"kind": "notes", "scope": conv_scope(1), "key": "k"}, "current", CTX)
            assert found is not None and found["id"] == 30 and found["createdAt"] == seq
            later = await s.commit([change(30, delta([["s", ["c"], 2]]))], CTX)
            doc = await s.document(30, "current", CTX)
            assert doc == {"record": found, "version": 1, "value": {"a": 1, "c": 2}, "deltasSinceBase": 1}
            assert (await s.document(30, seq, CTX))["value"] == {"a": 1}  # type: ignore[index]
            assert later == seq + 1
            docs = await s.scan_documents({"scope": {"kind": "session"}, "at": "current"}, 10, None, CTX)
            assert [d["id"] for d in docs["items"]] == [31]

        run(store_url, body)

    def test_mint_id_is_fresh(self, store_url: str) -> None:
        async def body(s: SqliteStorage) -> None:
            await seed(s)
            ids = [await s.mint_id() for _ in range(3)]
            assert ids == sorted(set(ids)) and ids[0] > 31

        run(store_url, body)

    def test_concurrent_calls_on_one_storage(self, store_url: str) -> None:
        async def body(s: SqliteStorage) -> None:
            await s.commit([conversation(1)], CTX)
            ids = [await s.mint_id() for _ in range(20)]
            seqs = await asyncio.gather(*(s.commit([entry(i, 1)], CTX) for i in ids))
            assert sorted(seqs) == list(range(min(seqs), min(seqs) + 20))
            page = await s.scan_entries({"conversationId": 1, "order": "ascending"}, 100, None, CTX)
            assert [e["id"] for e in page["items"]] == ids

        run(store_url, body)


class TestPiDurableErrors:
    @pytest.mark.parametrize(
        "writes",
        [
            [conversation(1)],  # already exists
            [entry(2, 1), entry(2, 1)],
            [change(99, base({}))],
            [{"type": "nope"}],
            [entry(2**53, 1)],
            [change(31, delta([["a", ["missing"], "x"]]))],
        ],
        ids=["exists", "twice", "unknown document", "unknown type", "unsafe id", "ops do not apply"],
    )
    def test_refused_commit_is_a_runtime_error_and_changes_nothing(self, store_url: str, writes: Any) -> None:
        async def body(s: SqliteStorage) -> None:
            seq = await seed(s)
            with pytest.raises(RuntimeError) as info:
                await s.commit([entry(50, 1), *writes], CTX)
            assert isinstance(info.value.__cause__, (Conflict, InvalidRequest))
            assert await s.entry(50, CTX) is None
            assert await s.commit([], CTX) == seq + 1
            assert (await s.document(31, "current", CTX))["value"] == {"b": 1}  # type: ignore[index]

        run(store_url, body)

    @pytest.mark.parametrize(
        "call",
        [
            lambda s: s.scan_entries({"conversationId": 77}, 10, None, CTX),
            lambda s: s.entry(77, 2, CTX),
            lambda s: s.entry(1, "two", CTX),
            lambda s: s.find_latest_head_marker(77, None, CTX),
            lambda s: s.scan_tasks({}, 10, {"after": "x"}, CTX),
            lambda s: s.scan_tasks({"order": "ascending"}, 10, {"after": 1, "order": "descending"}, CTX),
            lambda s: s.scan_documents({"scope": {"kind": "session"}, "at": "current"}, 10, {"after": 2**60}, CTX),
            lambda s: s.scan_conversations({}, 0, None, CTX),
            lambda s: s.document(31, 1, CTX),  # current-only: no history
            lambda s: s.document(30, "yesterday", CTX),
        ],
        ids=[
            "unknown conversation scan",
            "unknown conversation entry",
            "entry id not an int",
            "unknown conversation head",
            "cursor after not an int",
            "cursor of the other order",
            "unsafe cursor",
            "zero limit",
            "history of current-only",
            "bad point",
        ],
    )
    def test_bad_request_is_a_storage_request_error(
        self, store_url: str, call: Callable[[SqliteStorage], Awaitable[Any]]
    ) -> None:
        async def body(s: SqliteStorage) -> None:
            await seed(s)
            with pytest.raises(StorageRequestError):
                await call(s)

        run(store_url, body)


class TestPiDurableOpen:
    @pytest.mark.parametrize(
        ("prefix", "message"),
        [
            ("bad-prefix", 'Invalid SQLite schema prefix "bad-prefix"'),
            ("1abc", "Invalid SQLite schema prefix"),
            ("", 'Invalid SQLite schema prefix ""'),
            ("a;drop", "Invalid SQLite schema prefix"),
            ("pi_\n", "Invalid SQLite schema prefix"),  # "$" would have let the newline through
            ("\npi_", "Invalid SQLite schema prefix"),
            ("sqlite_x", 'SQLite schema prefix "sqlite_x" is reserved'),
            ("SQLite_x", "is reserved"),
            ("x" * 32, "at most 31 characters"),  # durastate's limit on every engine
            (7, "Invalid SQLite schema prefix 7"),
        ],
    )
    def test_bad_prefix_is_a_value_error(self, store_url: str, prefix: Any, message: str) -> None:
        async def main() -> None:
            with pytest.raises(ValueError, match=re.escape(message)):
                await SqliteStorage.open(store_url, {"prefix": prefix})

        asyncio.run(main())

    def test_bad_prefix_creates_nothing(self, tmp_path: Path) -> None:
        async def main() -> None:
            with pytest.raises(ValueError, match="Invalid SQLite schema prefix"):
                await SqliteStorage.open(tmp_path / "nested" / "storage.sqlite", {"prefix": "pi_\n"})

        asyncio.run(main())
        assert not (tmp_path / "nested").exists()

    @pytest.mark.parametrize(
        "options",
        [
            {"busy_timeout_ms": -1},
            {"busy_timeout_ms": 1.5},
            {"wal_auto_checkpoint_pages": "1"},
            {"busy_timeout_ms": True},
        ],
    )
    def test_bad_option_is_a_value_error(self, store_url: str, options: dict[str, Any]) -> None:
        async def main() -> None:
            with pytest.raises(ValueError, match="must be an integer >= 0"):
                await SqliteStorage.open(store_url, options)

        asyncio.run(main())

    def test_minted_ids_start_at_two(self, store_url: str) -> None:
        async def body(s: SqliteStorage) -> None:
            assert await s.mint_id() == 2  # 1 is pi-durable's ROOT_CONVERSATION_ID
            await s.commit([conversation(1)], CTX)

        run(store_url, body)

    def test_prefixes_keep_storages_apart(self, store_url: str, store_capabilities: Capabilities) -> None:
        if store_capabilities.in_memory:
            pytest.skip("every in-memory store is private; nothing to keep apart")

        async def main() -> None:
            a = await SqliteStorage.open(store_url, {"prefix": "app_a_"})
            b = await SqliteStorage.open(store_url, {"prefix": "app_b_"})
            try:
                await a.commit([conversation(1)], CTX)
                assert await b.conversation(1, CTX) is None
                await b.commit([conversation(1), entry(2, 1)], CTX)
                assert await a.entry(2, CTX) is None
            finally:
                await a.close(CTX)
                await b.close(CTX)

        asyncio.run(main())

    def test_reopen_sees_committed_records(self, store_url: str, store_capabilities: Capabilities) -> None:
        if store_capabilities.in_memory:
            pytest.skip("an in-memory store ends with its last close")

        async def main() -> None:
            first = await SqliteStorage.open(store_url, {"prefix": "re_"})
            await seed(first)
            minted = await first.mint_id()
            await first.close(CTX)
            second = await SqliteStorage.open(store_url, {"prefix": "re_"})
            try:
                assert (await second.entry(11, CTX))["entry"]["conversationId"] == 10
                assert await second.mint_id() > minted
            finally:
                await second.close(CTX)

        asyncio.run(main())


class TestPiDurableClose:
    def test_close_waits_for_calls_in_flight_and_refuses_later_calls(self, store_url: str) -> None:
        async def main() -> None:
            s = await SqliteStorage.open(store_url)
            await seed(s)
            started, release = threading.Event(), threading.Event()
            real = s._records.scan_entries

            loop_thread = threading.current_thread()

            def slow_scan(*args: Any) -> Any:
                if threading.current_thread() is loop_thread:
                    # A SQLite file runs calls inline on the loop's thread
                    # first: refuse as a locked file would, so the read
                    # moves to a worker thread and blocks there.
                    raise LockBusy("database is locked (simulated)")
                started.set()
                assert release.wait(DEADLINE), "the test never released the read"
                return real(*args)

            s._records.scan_entries = slow_scan
            read = asyncio.ensure_future(s.scan_entries({"conversationId": 10}, 10, None, CTX))
            assert await asyncio.to_thread(started.wait, DEADLINE)
            closing = s.close(CTX)
            assert s.close(CTX) is closing  # idempotent: the same future
            await asyncio.sleep(0)  # let close() start waiting
            assert not closing.done()
            with pytest.raises(RuntimeError, match="closed"):
                await s.conversation(1, CTX)
            with pytest.raises(RuntimeError, match="closed"):
                await s.commit([], CTX)
            with pytest.raises(RuntimeError, match="closed"):
                await s.mint_id()
            release.set()
            page = await asyncio.wait_for(read, DEADLINE)
            assert [e["id"] for e in page["items"]] == [11, 3, 2]
            await asyncio.wait_for(closing, DEADLINE)
            assert s._store.closed

        asyncio.run(main())

    def test_close_with_nothing_in_flight(self, store_url: str) -> None:
        async def main() -> None:
            s = await SqliteStorage.open(store_url)
            await s.close(CTX)
            assert s.closed
            with pytest.raises(RuntimeError, match="closed"):
                await s.entry(1, CTX)
            await s.close(CTX)

        asyncio.run(main())


def _entry_with_text(id: int, index: int) -> dict[str, Any]:
    return {"type": "entry", "value": {"id": id, "conversationId": 1, "text": "x" * (32 * 1024), "index": index}}


class TestPiDurableSqliteFile:
    """pi-durable's SQLite options on a file: busy timeout, WAL checkpoints, WAL truncation."""

    def test_a_locked_database_raises_sqlite_operational_error(self, tmp_path: Path) -> None:
        path = tmp_path / "storage.sqlite"

        async def main() -> None:
            s = await SqliteStorage.open(path, {"busy_timeout_ms": 20})
            try:
                await s.commit([conversation(1)], CTX)
                blocker = sqlite3.connect(path, isolation_level=None)
                try:
                    blocker.execute("BEGIN IMMEDIATE")
                    with pytest.raises(sqlite3.OperationalError, match="locked") as info:
                        await s.commit([entry(2, 1)], CTX)
                    assert isinstance(info.value, StoreUnavailable)  # durastate's callers catch it too
                    blocker.execute("ROLLBACK")
                finally:
                    blocker.close()
                assert await s.entry(2, CTX) is None  # nothing of the refused commit
                await s.commit([entry(2, 1)], CTX)
            finally:
                await s.close(CTX)

        asyncio.run(main())

    @staticmethod
    async def _write_wal(path: Path, options: dict[str, Any]) -> tuple[int, int]:
        """WAL bytes after 20 commits of 32 KiB, and after close (with a reader still open)."""
        s = await SqliteStorage.open(path, options)
        await s.commit([conversation(1)], CTX)
        for index in range(20):
            await s.commit([_entry_with_text(await s.mint_id(), index)], CTX)
        wal = Path(f"{path}-wal")
        written = wal.stat().st_size
        observer = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        try:
            # A reader that has read keeps the WAL file in place when the storage closes.
            assert observer.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
            page = await s.scan_entries({"conversationId": 1}, 100, None, CTX)
            assert len(page["items"]) == 20
            await s.close(CTX)
            return written, wal.stat().st_size
        finally:
            observer.close()

    def test_wal_auto_checkpoint_pages_bounds_the_wal(self, tmp_path: Path) -> None:
        small, _ = asyncio.run(self._write_wal(tmp_path / "one.sqlite", {"wal_auto_checkpoint_pages": 1}))
        grown, _ = asyncio.run(self._write_wal(tmp_path / "off.sqlite", {"wal_auto_checkpoint_pages": 0}))
        assert small < 512 * 1024  # pi-durable's own bound for this workload
        assert grown > 640 * 1024  # checkpoints off: 20 x 32 KiB stay in the WAL

    def test_close_truncates_the_wal(self, tmp_path: Path) -> None:
        written, after_close = asyncio.run(self._write_wal(tmp_path / "s.sqlite", {}))
        assert written > 0 and after_close == 0


class TestPiDurableErrorClasses:
    def test_storage_request_error_is_pi_durables_own(self, store_url: str) -> None:
        theirs = pytest.importorskip("pi_durable.errors").StorageRequestError

        async def body(s: SqliteStorage) -> None:
            with pytest.raises(theirs) as info:
                await s.scan_tasks({}, 10, {"after": "x"}, CTX)
            assert isinstance(info.value, StorageRequestError)
            assert getattr(info.value, "name", None) == "StorageRequestError"  # set by pi-durable's class
            assert "Invalid storage cursor" in str(info.value)

        run(store_url, body)

    def test_a_value_holding_itself_is_a_value_error_and_changes_nothing(self, store_url: str) -> None:
        circular: dict[str, Any] = {}
        circular["self"] = circular

        async def body(s: SqliteStorage) -> None:
            seq = await seed(s)
            bad = task(50, 1)
            bad["value"]["input"] = circular
            with pytest.raises(ValueError, match="Circular reference") as info:
                await s.commit([entry(51, 1), bad], CTX)
            assert isinstance(info.value, RuntimeError)  # pi-durable's class for a refused commit
            assert await s.entry(51, CTX) is None and await s.task(50, CTX) is None
            assert await s.commit([], CTX) == seq + 1

        run(store_url, body)
