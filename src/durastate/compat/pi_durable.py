"""``durastate.compat.pi_durable``: a drop-in ``SqliteStorage`` for pi-durable.

The seed's storage contract (DESIGN 5.3) on any durastate engine:
``storage = await SqliteStorage.open(url_or_path, {"prefix": "app_"})`` and
then the seed's async methods with the seed's call shapes (every read and
``commit`` take a trailing ``context``, which storage does not use)::

    seq = await storage.commit(writes, context)
    id = await storage.mint_id()
    await storage.entry(entry_id, context)                   # by id
    await storage.entry(conversation_id, entry_id, context)  # through a fork chain
    await storage.close(context)

All logic lives in ``durastate.records`` (the ``store.records`` facet); this
module only runs it through ``durastate._aio.AsyncRunner`` (inline on the
loop's thread for a SQLite file, only the reads at ``durability="full"``,
whose commits wait for the disk; on a pool thread when the file is locked or
for other engines; no transaction ever spans an ``await``; ``close()`` waits
until no pool thread is inside a call, cancelled ones included) and maps
errors to the seed's:

* a refused commit (malformed or colliding batch) raises ``RuntimeError``
  with the reason (the durastate error is its ``__cause__``); a malformed
  one raises ``InvalidCommit``, also a ``ValueError`` (pi-durable's encoder
  raises ``ValueError("Circular reference detected")`` for a value that
  holds itself; so do we);
* a bad read request (bad cursor, limit or point, unknown conversation,
  a point-in-time read of a current-only document) raises
  ``StorageRequestError``. When pi-durable is importable, the class raised
  is also ``pi_durable.errors.StorageRequestError`` (a subclass of both), so
  pi-durable's Session fails only that read, not the Session;
* a database locked past ``busy_timeout_ms`` (and any other "unavailable"
  condition of an SQLite file: disk full, I/O error) raises
  ``SqliteUnavailable``, which is both ``sqlite3.OperationalError`` (what
  pi-durable's storage raises) and ``durastate.StoreUnavailable``; on
  PostgreSQL ``StoreUnavailable`` passes through unchanged;
* any call after ``close()`` raises ``RuntimeError("SqliteStorage is
  closed")``. ``close()`` returns the same future every time; it waits for
  calls already in flight, then (SQLite file) truncates the WAL with
  ``PRAGMA wal_checkpoint(TRUNCATE)`` and closes the store.

Records are JSON objects with the seed's camelCase keys; a cursor is
``{"after": id, "order": "ascending"|"descending"}``; a page is
``{"items": [...], "next"?: cursor}``; document content is
``{"kind": "base", "version", "value"}`` or ``{"kind": "delta", "version",
"ops": [...]}`` with ops in Chord's tuple vocabulary, pi-durable's
(``durastate._chord``); ``at`` is ``"current"`` or a commit sequence. Ids
minted here start at 2 (1 is pi-durable's root conversation). Strings are
stored losslessly, lone surrogates included.

Options (pi-durable's ``PosixSqliteStorageOptions``):

* ``prefix``: the table prefix, checked by pi-durable's rule before
  anything is created: ``^[A-Za-z_][A-Za-z0-9_]*\\Z``, else
  ``ValueError('Invalid SQLite schema prefix "..."')``; a prefix starting
  with ``sqlite_`` (any case) is ``ValueError('SQLite schema prefix "..."
  is reserved')``. Both are ``durastate.InvalidRequest`` (a ``ValueError``).
  An upper-case prefix is used lower-cased (table names are
  case-insensitive: ``App_`` and ``app_`` are the same tables, in
  pi-durable too).
  Without it the tables get durastate's default prefix. As in the seed,
  changing the prefix does not migrate existing data.
* ``busy_timeout_ms`` (default 5000, as pi-durable): how long a call waits
  for a competing writer before raising ``SqliteUnavailable``.
* ``wal_auto_checkpoint_pages`` (default 1000, SQLite's; 0 disables):
  ``PRAGMA wal_autocheckpoint`` on every connection the storage uses.

Refused where pi-durable would accept (listed as the brief allows for
ill-typed input): an option that is not an integer >= 0 (``ValueError``;
pi-durable formats it into a PRAGMA), a prefix longer than 31 characters
(``ValueError``: durastate's limit for every engine), options that are not
a mapping (``StorageRequestError``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import reprlib
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, TypeVar

from .. import store as _store
from .._aio import AsyncRunner
from ..engines.base import validate_prefix
from ..engines.sqlite_tools import SqliteTools
from ..errors import Conflict, DurastateError, InvalidRequest, NotFound, StoreClosed, StoreUnavailable
from ..records import MAX_SAFE_INTEGER
from ._bridge import bridged

__all__ = [
    "InvalidCommit",
    "SqliteStorage",
    "SqliteStorageOptions",
    "SqliteUnavailable",
    "StorageRequestError",
    "validate_sqlite_prefix",
]

T = TypeVar("T")

DEFAULT_PREFIX = "ds_"
DEFAULT_BUSY_TIMEOUT_MS = 5_000  # pi-durable's
DEFAULT_WAL_AUTO_CHECKPOINT_PAGES = 1_000  # SQLite's

# pi-durable's rule, anchored with \Z: "$" would also match before a final newline.
_SQLITE_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class StorageRequestError(Exception):
    """A read request the storage cannot answer as asked (pi-durable's error).

    What is raised is this class combined with pi-durable's own
    ``StorageRequestError`` when pi-durable is importable (``_bridge``).
    """


class InvalidCommit(RuntimeError, ValueError):
    """A commit refused as malformed: pi-durable's ``RuntimeError`` for a bad batch, and a
    ``ValueError`` as its JSON encoder raises for a value JSON cannot hold (a circular reference)."""


class SqliteUnavailable(StoreUnavailable, sqlite3.OperationalError):
    """The SQLite file cannot serve the call now (locked past the busy timeout, disk full, I/O error)."""


class SqliteStorageOptions(TypedDict):
    """Options of ``SqliteStorage.open`` (see the module docstring)."""

    prefix: NotRequired[str]
    busy_timeout_ms: NotRequired[int]
    wal_auto_checkpoint_pages: NotRequired[int]


def _request_error(message: str) -> StorageRequestError:
    """Ours, and pi-durable's own ``StorageRequestError`` too when pi-durable is importable."""
    return bridged(StorageRequestError, "pi_durable.errors", "StorageRequestError")(message)


def validate_sqlite_prefix(prefix: object) -> str:
    """``prefix`` if pi-durable accepts it as a table prefix (and durastate can use it), else ``ValueError``."""
    if not isinstance(prefix, str) or not _SQLITE_PREFIX.match(prefix):
        shown = json.dumps(prefix) if isinstance(prefix, str) else reprlib.repr(prefix)  # bounded for any value
        raise InvalidRequest(f"Invalid SQLite schema prefix {shown}")
    if prefix.lower().startswith("sqlite_"):
        raise InvalidRequest(f"SQLite schema prefix {json.dumps(prefix)} is reserved")
    # Lower-cased: durastate's prefixes are (table names are case-insensitive, so pi-durable's "App_"
    # and "app_" name the same tables too).
    return validate_prefix(prefix.lower())


def _option_count(options: Mapping[str, Any], name: str, default: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequest(f"options[{name!r}] must be an integer >= 0, got {reprlib.repr(value)}")
    return value


def _unavailable(exc: StoreUnavailable) -> StoreUnavailable:
    """An error pi-durable's callers catch as ``sqlite3.OperationalError`` (and ours as ``StoreUnavailable``),
    whatever engine is under the storage: their code was written against SQLite's."""
    return SqliteUnavailable(str(exc))


def _closed() -> RuntimeError:
    return RuntimeError("SqliteStorage is closed")


def _is_safe_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_SAFE_INTEGER


class SqliteStorage:
    """pi-durable's storage contract over a durastate store (see the module docstring)."""

    def __init__(self, store: _store.Store, runner: AsyncRunner, wal_auto_checkpoint_pages: int | None = None) -> None:
        self._store = store
        engine = store.engine
        # A store in one file has a WAL to tune and to leave empty (engines.tools).
        self._file = engine.tools.file is not None
        self._records: Any = store.records
        tools = engine.tools
        if self._file and wal_auto_checkpoint_pages is not None and isinstance(tools, SqliteTools):
            tools.set_wal_autocheckpoint(wal_auto_checkpoint_pages)
        self._runner = runner
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._in_flight = 0
        self._drained: asyncio.Future[None] | None = None

    @staticmethod
    async def open(
        url_or_path: str | os.PathLike[str], options: SqliteStorageOptions | Mapping[str, Any] | None = None
    ) -> SqliteStorage:
        """Open (creating and migrating if needed) storage at a path or store URL.

        Options are checked before anything is created (see the module
        docstring).
        """
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise _request_error(f"options must be a dict, got {type(options).__name__}")
        prefix = DEFAULT_PREFIX if options.get("prefix") is None else validate_sqlite_prefix(options["prefix"])
        busy_timeout_ms = _option_count(options, "busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS)
        pages = _option_count(options, "wal_auto_checkpoint_pages", DEFAULT_WAL_AUTO_CHECKPOINT_PAGES)
        store = await asyncio.to_thread(_store.open, url_or_path, prefix=prefix, busy_timeout=busy_timeout_ms / 1000)
        return SqliteStorage(store, AsyncRunner(store.engine, name="pi-durable"), pages)

    # -- plumbing ------------------------------------------------------------------

    async def _call(self, commit: bool, fn: Callable[..., T], *args: Any) -> T:
        """Run one facet call (``commit``: one that writes) on the pool; close() waits for it.

        A call that only reads (``commit`` false: every lookup and scan) is
        declared a read, so it runs inline on the loop's thread at
        ``durability="full"`` too (``AsyncRunner.call(reads=True)``).
        """
        if self._closed:
            raise _closed()
        self._in_flight += 1
        try:
            # call(), not run(): one coroutine frame fewer on every call.
            return await self._runner.call(fn, args, {}, reads=not commit)
        except StoreClosed as exc:
            raise _closed() from exc
        except StoreUnavailable as exc:
            raise _unavailable(exc) from exc
        except (InvalidRequest, NotFound) as exc:
            if commit:
                raise InvalidCommit(str(exc)) from exc
            raise _request_error(str(exc)) from exc
        except (Conflict, DurastateError) as exc:
            raise RuntimeError(str(exc)) from exc
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._drained is not None and not self._drained.done():
                self._drained.set_result(None)

    # -- commits -------------------------------------------------------------------

    async def commit(self, writes: Sequence[Mapping[str, Any]], context: Any = None) -> int:
        """Apply ``writes`` atomically; the batch's commit sequence number."""
        return await self._call(True, self._records.commit, writes)

    async def mint_id(self) -> int:
        """A fresh id, unique across every process using this store."""
        return await self._call(True, self._records.mint_id)

    # -- table reads ---------------------------------------------------------------

    async def conversation(self, id: int, context: Any = None) -> dict[str, Any] | None:
        return await self._call(False, self._records.conversation, id)

    async def scan_conversations(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None, context: Any = None
    ) -> dict[str, Any]:
        return await self._call(False, self._records.scan_conversations, query, limit, cursor)

    async def entry(self, id_or_conversation_id: int, id_or_context: Any = None, context: Any = None) -> Any:
        """``entry(id, context)`` or ``entry(conversation_id, id, context)``.

        The second shape only finds an entry visible from the conversation
        through its fork chain; an unknown conversation is a
        ``StorageRequestError``.
        """
        if context is None:
            return await self._call(False, self._records.entry, id_or_conversation_id)
        if not _is_safe_int(id_or_context):
            if self._closed:
                raise _closed()
            raise _request_error("Storage.entry() requires an entry ID")
        return await self._call(False, self._records.entry, id_or_context, id_or_conversation_id)

    async def find_latest_head_marker(
        self, conversation_id: int, at_or_before_entry_id: int | None = None, context: Any = None
    ) -> dict[str, Any] | None:
        return await self._call(False, self._records.find_latest_head_marker, conversation_id, at_or_before_entry_id)

    async def scan_entries(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None, context: Any = None
    ) -> dict[str, Any]:
        return await self._call(False, self._records.scan_entries, query, limit, cursor)

    async def task(self, id: int, context: Any = None) -> dict[str, Any] | None:
        return await self._call(False, self._records.task, id)

    async def scan_tasks(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None, context: Any = None
    ) -> dict[str, Any]:
        return await self._call(False, self._records.scan_tasks, query, limit, cursor)

    async def submission(self, id: int, context: Any = None) -> dict[str, Any] | None:
        return await self._call(False, self._records.submission, id)

    async def scan_submissions(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None, context: Any = None
    ) -> dict[str, Any]:
        return await self._call(False, self._records.scan_submissions, query, limit, cursor)

    async def submission_by_request(
        self, conversation_id: int, request_id: str, context: Any = None
    ) -> dict[str, Any] | None:
        return await self._call(False, self._records.submission_by_request, conversation_id, request_id)

    # -- document reads ------------------------------------------------------------

    async def find_document(
        self, address: Mapping[str, Any], at: int | str, context: Any = None
    ) -> dict[str, Any] | None:
        return await self._call(False, self._records.find_document, address, at)

    async def document(self, id: int, at: int | str, context: Any = None) -> dict[str, Any] | None:
        return await self._call(False, self._records.document, id, at)

    async def scan_documents(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None, context: Any = None
    ) -> dict[str, Any]:
        return await self._call(False, self._records.scan_documents, query, limit, cursor)

    # -- closing -------------------------------------------------------------------

    def close(self, context: Any = None) -> asyncio.Future[None]:
        """Refuse new calls, wait for calls in flight, close the store (idempotent)."""
        if self._closing is None:
            self._closed = True
            self._closing = asyncio.ensure_future(self._close())
        return self._closing

    async def _close(self) -> None:
        if self._in_flight > 0:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
        # Waits until no pool thread is inside a call (a cancelled call's
        # thread included); new calls are refused already, so no inline call
        # can start while the store closes on a worker thread.
        await self._runner.aclose()
        await asyncio.to_thread(self._close_store)

    def _close_store(self) -> None:
        """Truncate the WAL (SQLite file), then close the store."""
        if self._file:
            try:
                self._store.engine.tools.checkpoint()
            except DurastateError:
                pass  # already closed: closing matters more
        self._store.close()

    @property
    def closed(self) -> bool:
        return self._closed
