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
loop's thread for a SQLite file, on a pool thread when the file is locked or
for other engines; no transaction ever spans an ``await``; ``close()`` waits
until no pool thread is inside a call, cancelled ones included) and maps
errors to the seed's:

* a refused commit (malformed or colliding batch) raises ``RuntimeError``
  with the reason (the durastate error is its ``__cause__``);
* a bad read request (bad cursor, limit or point, unknown conversation,
  a point-in-time read of a current-only document) raises
  ``StorageRequestError``;
* any call after ``close()`` raises ``RuntimeError("SqliteStorage is
  closed")``. ``close()`` returns the same future every time; it waits for
  calls already in flight, then closes the store.

Records are JSON objects with the seed's camelCase keys; a cursor is
``{"after": id, "order": "ascending"|"descending"}``; a page is
``{"items": [...], "next"?: cursor}``; document content is
``{"kind": "base", "version", "value"}`` or ``{"kind": "delta", "version",
"ops": [RFC 6902 ops]}``; ``at`` is ``"current"`` or a commit sequence.

``options["prefix"]`` is the table prefix (validated: letters, digits and
underscores, at most 31 characters, not starting with a digit; a bad one is
a ``StorageRequestError``). Without it the tables get durastate's default
prefix. As in the seed, changing the prefix does not migrate existing data.
``StoreUnavailable`` (engine down, locked past the busy timeout) passes
through unchanged: it is not a verdict on the request.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, TypeVar

from .. import store as _store
from .._aio import AsyncRunner
from ..engines.base import validate_prefix
from ..errors import Conflict, DurastateError, InvalidRequest, NotFound, StoreClosed, StoreUnavailable
from ..records import MAX_SAFE_INTEGER, Records

__all__ = ["SqliteStorage", "SqliteStorageOptions", "StorageRequestError"]

T = TypeVar("T")

DEFAULT_PREFIX = "ds_"


class StorageRequestError(Exception):
    """A read request the storage cannot answer as asked (pi-durable's error)."""


class SqliteStorageOptions(TypedDict):
    """Options of ``SqliteStorage.open``: ``prefix`` namespaces every table."""

    prefix: NotRequired[str]


def _closed() -> RuntimeError:
    return RuntimeError("SqliteStorage is closed")


def _is_safe_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_SAFE_INTEGER


class SqliteStorage:
    """pi-durable's storage contract over a durastate store (see the module docstring)."""

    def __init__(self, store: _store.Store, runner: AsyncRunner) -> None:
        self._store = store
        self._records: Records = store.records
        self._runner = runner
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._in_flight = 0
        self._drained: asyncio.Future[None] | None = None

    @staticmethod
    async def open(
        url_or_path: str | os.PathLike[str], options: SqliteStorageOptions | Mapping[str, Any] | None = None
    ) -> SqliteStorage:
        """Open (creating and migrating if needed) storage at a path or store URL."""
        prefix = DEFAULT_PREFIX
        if options is not None:
            if not isinstance(options, Mapping):
                raise StorageRequestError(f"options must be a dict, got {type(options).__name__}")
            if options.get("prefix") is not None:
                prefix = options["prefix"]
        try:
            validate_prefix(prefix)
        except InvalidRequest as exc:
            raise StorageRequestError(str(exc)) from exc
        store = await asyncio.to_thread(_store.open, url_or_path, prefix=prefix)
        return SqliteStorage(store, AsyncRunner(store.engine, name="pi-durable"))

    # -- plumbing ------------------------------------------------------------------

    async def _call(self, commit: bool, fn: Callable[..., T], *args: Any) -> T:
        """Run one facet call on the pool; close() waits for it."""
        if self._closed:
            raise _closed()
        self._in_flight += 1
        try:
            return await self._runner.run(fn, *args)
        except StoreClosed as exc:
            raise _closed() from exc
        except StoreUnavailable:
            raise
        except (InvalidRequest, NotFound) as exc:
            if commit:
                raise RuntimeError(str(exc)) from exc
            raise StorageRequestError(str(exc)) from exc
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
            raise StorageRequestError("Storage.entry() requires an entry ID")
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
        # thread included), then closes on the loop's thread, where no
        # inline call can be running now.
        await self._runner.aclose()
        self._store.close()

    @property
    def closed(self) -> bool:
        return self._closed
