"""pi-durable's own SQLite storage, as the seed does it, for benchmarks (reference only).

Re-created from the seed (``pi_durable/storage/sqlite/storage.py`` and its
stdlib adapter): the same tables and indexes, the same statements in the
same order, the same JSON encoding, and the seed's async facade: every
statement is an awaitable run in call order by a serial queue of tasks, and
a transaction is ``BEGIN IMMEDIATE`` + a callback awaiting one statement
after another on the loop's thread, then ``COMMIT``. WAL and
``synchronous=NORMAL`` as the seed's adapter configures them.

Only what the benchmark drives is here: ``commit`` of conversation and entry
writes (with the id claims and checks), ``document.create``/``change``,
``scan_entries`` (descending through a fork chain) and ``document`` (base +
deltas). Delta content is applied by the caller-given ``apply`` (the
benchmark passes the same applier durastate uses for its delta format).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

MAX_SAFE_INTEGER = 9_007_199_254_740_991
P = "pi_"

SCHEMA = (
    f"CREATE TABLE {P}metadata (singleton INTEGER PRIMARY KEY CHECK (singleton = 1),"
    " next_id TEXT NOT NULL, next_seq INTEGER NOT NULL) STRICT",
    f"INSERT INTO {P}metadata (singleton, next_id, next_seq) VALUES (1, '2', 1)",
    f"CREATE TABLE {P}record_ids (id INTEGER PRIMARY KEY, record_type TEXT NOT NULL) STRICT",
    f"CREATE TABLE {P}conversations (id INTEGER PRIMARY KEY, owner_conversation_id INTEGER,"
    " owner_task_id INTEGER, record TEXT NOT NULL CHECK (json_valid(record))) STRICT",
    f"CREATE TABLE {P}entries (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL, head INTEGER,"
    " commit_seq INTEGER NOT NULL, record TEXT NOT NULL CHECK (json_valid(record))) STRICT",
    f"CREATE INDEX {P}entries_by_conversation ON {P}entries (conversation_id, id DESC)",
    f"CREATE TABLE {P}documents (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, family INTEGER NOT NULL,"
    " key_value TEXT NOT NULL, scope_kind TEXT NOT NULL, owner_id INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    " retired_at INTEGER, record TEXT NOT NULL CHECK (json_valid(record))) STRICT",
    f"CREATE INDEX {P}documents_by_address ON {P}documents"
    " (kind, scope_kind, owner_id, family, key_value, created_at DESC, retired_at)",
    f"CREATE TABLE {P}revisions (document_id INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,"
    " version INTEGER NOT NULL, content TEXT NOT NULL CHECK (json_valid(content)),"
    " PRIMARY KEY (document_id, seq)) STRICT",
    f"CREATE INDEX {P}revisions_by_kind ON {P}revisions (document_id, kind, seq DESC)",
)


def _encode(value: object) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def _indexed(value: str) -> str:
    return json.dumps(value)


class _Serial:
    """The seed adapter's queue: operations run in call order, each in its own task."""

    def __init__(self) -> None:
        self._tail: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def run(self, operation: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        result: asyncio.Future[Any] = loop.create_future()
        barrier: asyncio.Future[None] = loop.create_future()
        previous, self._tail = self._tail, barrier

        async def runner() -> None:
            if previous is not None:
                await previous
            try:
                result.set_result(await operation())
            except BaseException as error:
                result.set_exception(error)
            finally:
                barrier.set_result(None)

        task = loop.create_task(runner())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return result


class _Executor:
    """Statements on the shared connection; inside a transaction each returns a settled future."""

    def __init__(self, conn: sqlite3.Connection, queue: _Serial | None) -> None:
        self._conn = conn
        self._queue = queue

    def _run(self, operation: Callable[[], Any]) -> asyncio.Future[Any]:
        if self._queue is not None:

            async def call() -> Any:
                return operation()

            return self._queue.run(call)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(operation())
        except BaseException as error:
            future.set_exception(error)
        return future

    def run(self, sql: str, *params: Any) -> asyncio.Future[Any]:
        return self._run(lambda: self._conn.execute(sql, params))

    def get(self, sql: str, *params: Any) -> asyncio.Future[Any]:
        def fetch() -> Any:
            row = self._conn.execute(sql, params).fetchone()
            return None if row is None else dict(row)

        return self._run(fetch)

    def all(self, sql: str, *params: Any) -> asyncio.Future[Any]:
        return self._run(lambda: [dict(r) for r in self._conn.execute(sql, params).fetchall()])


class PiDurableStyleStorage:
    """The seed's storage, the parts the benchmark drives (see the module docstring)."""

    def __init__(self, path: str, apply: Callable[[Any, Any], Any]) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        for statement in SCHEMA:
            self._conn.execute(statement)
        self._queue = _Serial()
        self._db = _Executor(self._conn, self._queue)
        self._apply = apply
        self._next_id = 2

    def transaction(self, callback: Callable[[_Executor], Awaitable[Any]]) -> asyncio.Future[Any]:
        async def run_transaction() -> Any:
            tx = _Executor(self._conn, None)
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = await callback(tx)
                self._conn.execute("COMMIT")
                return result
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

        return self._queue.run(run_transaction)

    async def mint_id(self) -> int:
        value = self._next_id
        self._next_id += 1
        return value

    # -- commit ---------------------------------------------------------------------

    async def commit(self, writes: list[dict[str, Any]]) -> int:
        candidate = self._next_id
        for write in writes:
            if write["type"] in ("conversation", "entry"):
                candidate = max(candidate, write["value"]["id"] + 1)
            elif write["type"] == "document.create":
                candidate = max(candidate, write["record"]["id"] + 1)

        async def run(tx: _Executor) -> int:
            metadata = await tx.get(f"SELECT next_id, next_seq FROM {P}metadata WHERE singleton = 1")
            seq = int(metadata["next_seq"])
            await self._check_ids(tx, writes)
            await self._check_documents(tx, writes)
            for write in writes:
                await self._apply_table_write(tx, write, seq)
            await self._apply_documents(tx, writes, seq)
            await tx.run(
                f"UPDATE {P}metadata SET next_id = ?, next_seq = ? WHERE singleton = 1",
                str(max(int(metadata["next_id"]), candidate)),
                seq + 1,
            )
            return seq

        seq: int = await self.transaction(run)
        self._next_id = max(self._next_id, candidate)
        return seq

    async def _check_ids(self, tx: _Executor, writes: list[dict[str, Any]]) -> None:
        claimed: dict[int, str] = {}
        for write in writes:
            kind = write["type"]
            if kind in ("document.change", "document.retire"):
                continue
            table = "document" if kind == "document.create" else kind
            id = write["record"]["id"] if table == "document" else write["value"]["id"]
            row = await tx.get(f"SELECT record_type FROM {P}record_ids WHERE id = ?", id)
            if row is not None or id in claimed:
                raise RuntimeError(f"ID {id} already taken")
            claimed[id] = table

    async def _check_documents(self, tx: _Executor, writes: list[dict[str, Any]]) -> None:
        for write in writes:
            if write["type"] == "document.create":
                id = write["record"]["id"]
                if await tx.get(f"SELECT record FROM {P}documents WHERE id = ?", id) is not None:
                    raise RuntimeError(f"Document {id} already exists")
                record = write["record"]
                parts = self._address(record)
                current = await tx.get(
                    f"SELECT id FROM {P}documents WHERE kind = ? AND scope_kind = ? AND owner_id = ?"
                    " AND family = ? AND key_value = ? AND retired_at IS NULL LIMIT 1",
                    *parts,
                )
                if current is not None:
                    raise RuntimeError("Document address already has a current incarnation")
            elif write["type"] == "document.change":
                id = write["id"]
                row = await tx.get(f"SELECT record FROM {P}documents WHERE id = ?", id)
                if row is None:
                    raise RuntimeError(f"Unknown document: {id}")
                record = json.loads(row["record"])
                if write["content"]["kind"] == "delta":
                    previous = await tx.get(
                        f"SELECT version FROM {P}revisions WHERE document_id = ? ORDER BY seq DESC LIMIT 1", id
                    )
                    if previous is None or previous["version"] != write["content"]["version"]:
                        raise RuntimeError(f"Document {id} version transition requires a base")
                parts = self._address(record)
                await tx.get(
                    f"SELECT id FROM {P}documents WHERE kind = ? AND scope_kind = ? AND owner_id = ?"
                    " AND family = ? AND key_value = ? AND retired_at IS NULL LIMIT 1",
                    *parts,
                )

    @staticmethod
    def _address(record: dict[str, Any]) -> tuple[Any, ...]:
        scope = record["scope"]
        owner = 0 if scope["kind"] == "session" else scope.get("conversationId", scope.get("taskId"))
        key = record.get("key")
        return (_indexed(record["kind"]), scope["kind"], owner, 0 if key is None else 1, _indexed(key or ""))

    async def _apply_table_write(self, tx: _Executor, write: dict[str, Any], seq: int) -> None:
        kind = write["type"]
        if kind == "conversation":
            value = write["value"]
            await tx.run(f"INSERT OR IGNORE INTO {P}record_ids (id, record_type) VALUES (?, ?)", value["id"], kind)
            owner = value.get("owner")
            await tx.run(
                f"INSERT INTO {P}conversations (id, owner_conversation_id, owner_task_id, record) VALUES (?, ?, ?, ?)",
                value["id"],
                None if owner is None else owner["conversationId"],
                None if owner is None else owner["taskId"],
                _encode(value),
            )
        elif kind == "entry":
            value = write["value"]
            await tx.run(f"INSERT OR IGNORE INTO {P}record_ids (id, record_type) VALUES (?, ?)", value["id"], kind)
            await tx.run(
                f"INSERT INTO {P}entries (id, conversation_id, head, commit_seq, record) VALUES (?, ?, ?, ?, ?)",
                value["id"],
                value["conversationId"],
                value.get("head"),
                seq,
                _encode(value),
            )

    async def _apply_documents(self, tx: _Executor, writes: list[dict[str, Any]], seq: int) -> None:
        for write in writes:
            if write["type"] == "document.create":
                record = {**write["record"], "createdAt": seq}
                id = record["id"]
                kind, scope_kind, owner, family, key = self._address(record)
                await tx.run(f"INSERT OR IGNORE INTO {P}record_ids (id, record_type) VALUES (?, ?)", id, "document")
                await tx.run(
                    f"INSERT INTO {P}documents (id, kind, family, key_value, scope_kind, owner_id, created_at,"
                    " retired_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    id,
                    kind,
                    family,
                    key,
                    scope_kind,
                    owner,
                    seq,
                    None,
                    _encode(record),
                )
                content = write["content"]
            elif write["type"] == "document.change":
                id = write["id"]
                await tx.get(f"SELECT record FROM {P}documents WHERE id = ?", id)
                content = write["content"]
            else:
                continue
            encoded = _encode(content["value"] if content["kind"] == "base" else content["ops"])
            await tx.run(
                f"INSERT INTO {P}revisions (document_id, seq, kind, version, content) VALUES (?, ?, ?, ?, ?)",
                id,
                seq,
                content["kind"],
                content["version"],
                encoded,
            )

    # -- reads ------------------------------------------------------------------------

    async def _conversation(self, id: int) -> Any:
        row = await self._db.get(f"SELECT record FROM {P}conversations WHERE id = ?", id)
        return None if row is None else json.loads(row["record"])

    async def scan_entries(self, query: dict[str, Any], limit: int) -> dict[str, Any]:
        """Newest first through the fork chain (the seed's descending ``scan_entries``, no cursor)."""
        conversation = await self._conversation(query["conversationId"])
        if conversation is None:
            raise RuntimeError(f"Unknown conversation: {query['conversationId']}")
        upper: int | None = None
        values: list[Any] = []
        while True:
            clauses = ["conversation_id = ?"]
            params: list[Any] = [conversation["id"]]
            if upper is not None:
                clauses.append("id <= ?")
                params.append(upper)
            params.append(limit + 1 - len(values))
            rows = await self._db.all(
                f"SELECT record FROM {P}entries WHERE {' AND '.join(clauses)} ORDER BY id DESC LIMIT ?", *params
            )
            values.extend(json.loads(r["record"]) for r in rows)
            parent = conversation.get("parent")
            if len(values) > limit or parent is None:
                break
            upper = parent["at"] if upper is None else min(upper, parent["at"])
            conversation = await self._conversation(parent["conversationId"])
            if conversation is None:
                break
        items = values[:limit]
        page: dict[str, Any] = {"items": items}
        if len(values) > limit:
            page["next"] = {"after": items[-1]["id"], "order": "descending"}
        return page

    async def document(self, id: int, at: int | str = "current") -> Any:
        async def materialize(tx: _Executor) -> Any:
            row = await tx.get(f"SELECT record FROM {P}documents WHERE id = ?", id)
            if row is None:
                return None
            record = json.loads(row["record"])
            upper = MAX_SAFE_INTEGER if at == "current" else at
            base = await tx.get(
                f"SELECT seq, kind, version, content FROM {P}revisions WHERE document_id = ?"
                " AND kind = 'base' AND seq <= ? ORDER BY seq DESC LIMIT 1",
                id,
                upper,
            )
            value = json.loads(base["content"])
            tail = await tx.all(
                f"SELECT seq, kind, version, content FROM {P}revisions WHERE document_id = ?"
                " AND seq > ? AND seq <= ? ORDER BY seq",
                id,
                base["seq"],
                upper,
            )
            for revision in tail:
                if revision["kind"] != "delta" or revision["version"] != base["version"]:
                    raise RuntimeError(f"Document {id} crosses a stored version boundary without a base")
                value = self._apply(value, json.loads(revision["content"]))
            return {"record": record, "version": base["version"], "value": value, "deltasSinceBase": len(tail)}

        return await self.transaction(materialize)

    def close(self) -> None:
        self._conn.close()
