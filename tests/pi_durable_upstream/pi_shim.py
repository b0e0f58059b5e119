"""Pytest plugin: pi-durable's own test suite, with another storage in place of its storages.

Loaded with ``-p pi_shim`` by ``run.py`` into a pytest run over the tests of
pi-durable-python's sdist. ``PI_SHIM_STORAGE`` picks the storage:

* ``durastate-sqlite``: ``durastate.compat.pi_durable.SqliteStorage`` on an
  SQLite file;
* ``durastate-postgres``: the same on PostgreSQL (``PI_SHIM_POSTGRES_URL``;
  a schema per storage path, as a fresh migration leaves it, emptied
  for a later test when the test ends: see ``_Postgres``);
* ``pi-sqlite``: pi-durable's own ``SqliteStorage`` (the reference run);
* ``pi-memory``: nothing replaced (pi-durable's ``MemoryStorage``).

What is replaced, before any test module is imported:

* ``open_posix_sqlite_storage(path, options)`` (the file-backed storage the
  SQLite suite, crash and reopen tests use): a storage for that path;
  reopening the same path reaches the same data (on PostgreSQL: the same
  schema);
* ``MemoryStorage`` (what every Harness and Session test constructs, and
  subclasses): ``StorageInPlaceOfMemory``, a class with the same sync
  constructor whose async methods run on a fresh storage of the chosen
  kind, opened on first use. ``close()`` closes it; setting ``_closed``
  back to ``False`` (the suite's ``ControlledStorage.reopen``) reopens the
  same data, as a process restart would.

Every storage opened during a test is closed when the test ends.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pi_durable
import pi_durable.storage
import pi_durable.storage.jsonl.storage  # keeps the real MemoryStorage inside JsonlStorage (not replaced)
import pi_durable.storage.memory
import pi_durable.storage.sqlite.posix as posix
import pytest

MODE = os.environ.get("PI_SHIM_STORAGE", "durastate-sqlite")
MODES = ("durastate-sqlite", "durastate-postgres", "pi-sqlite", "pi-memory")
if MODE not in MODES:
    raise RuntimeError(f"PI_SHIM_STORAGE must be one of {', '.join(MODES)}, got {MODE!r}")

_original_open = posix.open_posix_sqlite_storage
_opened: list[Any] = []  # storages opened during the current test
_counter = itertools.count()
_tmp = Path(tempfile.mkdtemp(prefix="pi-shim-"))
atexit.register(shutil.rmtree, _tmp, True)


class _Postgres:
    """A schema per storage path (the file a test names), for that test only.

    From ``postgres_server.SchemaPool``: emptied after the test back to what
    a fresh migration leaves (creating and migrating one costs several times
    what a Harness test then does with its storage; durastate's migrations
    are tested in durastate's own suite). A schema a storage with another
    prefix was opened on is dropped instead.
    """

    def __init__(self) -> None:
        from durastate.testing import postgres_server

        base = os.environ.get("PI_SHIM_POSTGRES_URL")
        if not base:
            raise RuntimeError("PI_SHIM_STORAGE=durastate-postgres needs PI_SHIM_POSTGRES_URL")
        self.pool = postgres_server.schema_pool(base)
        self.urls: dict[str, tuple[str, str]] = {}  # path -> (url, schema) of the current test

    def url_for(self, path: str) -> str:
        if path not in self.urls:
            self.urls[path] = self.pool.take()
        return self.urls[path][0]

    def release_all(self) -> None:
        """End of a test: every schema it used back to the pool."""
        while self.urls:
            _path, (url, schema) = self.urls.popitem()
            self.pool.give_back(url, schema)


_pg: _Postgres | None = _Postgres() if MODE == "durastate-postgres" else None
if _pg is not None:
    atexit.register(_pg.release_all)  # registered after the pool's close: runs before it


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM (``run.stop``) as Ctrl-C: pytest ends the session with its teardowns, then the pool's atexit hook
    drops the schemas (the default action would end the process at once and leave them on the server)."""
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _interrupted)


async def _open_durastate(path: str, options: Any) -> Any:
    from durastate.compat.pi_durable import SqliteStorage

    if _pg is None:
        storage = await SqliteStorage.open(path, options)
    else:
        if options is not None and options.get("prefix") is not None:
            # refused before anything is created, as for a file
            from durastate.compat.pi_durable import validate_sqlite_prefix

            validate_sqlite_prefix(options["prefix"])
        storage = await SqliteStorage.open(_pg.url_for(str(path)), options)
    _opened.append(storage)
    return storage


async def _open_pi(path: str, options: Any) -> Any:
    storage = await _original_open(path, options)
    _opened.append(storage)
    return storage


_open = _open_pi if MODE == "pi-sqlite" else _open_durastate


async def open_posix_sqlite_storage(path: str, options: Any = None) -> Any:
    """In place of pi-durable's: the chosen storage for ``path``."""
    return await _open(path, options)


class StorageInPlaceOfMemory:
    """``MemoryStorage()`` for the suite: a fresh storage of the chosen kind (see the module docstring)."""

    def __init__(self) -> None:
        self._path = str(_tmp / f"memory-{next(_counter)}.sqlite")
        self._inner: Any = None
        self._is_closed = False

    @property
    def _closed(self) -> bool:
        return self._is_closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self._is_closed = value

    async def _storage(self) -> Any:
        if self._is_closed:
            raise RuntimeError("SqliteStorage is closed")
        if self._inner is None:
            self._inner = await _open(self._path, None)
        return self._inner

    async def commit(self, writes: Any, context: Any) -> Any:
        return await (await self._storage()).commit(writes, context)

    async def mint_id(self) -> int:
        return int(await (await self._storage()).mint_id())

    async def conversation(self, id: Any, context: Any) -> Any:
        return await (await self._storage()).conversation(id, context)

    async def scan_conversations(self, query: Any, limit: int, cursor: Any, context: Any) -> Any:
        return await (await self._storage()).scan_conversations(query, limit, cursor, context)

    async def entry(self, *args: Any) -> Any:
        return await (await self._storage()).entry(*args)

    async def find_latest_head_marker(self, conversation_id: Any, at: Any, context: Any) -> Any:
        return await (await self._storage()).find_latest_head_marker(conversation_id, at, context)

    async def scan_entries(self, query: Any, limit: int, cursor: Any, context: Any) -> Any:
        return await (await self._storage()).scan_entries(query, limit, cursor, context)

    async def task(self, id: Any, context: Any) -> Any:
        return await (await self._storage()).task(id, context)

    async def scan_tasks(self, query: Any, limit: int, cursor: Any, context: Any) -> Any:
        return await (await self._storage()).scan_tasks(query, limit, cursor, context)

    async def submission(self, id: Any, context: Any) -> Any:
        return await (await self._storage()).submission(id, context)

    async def scan_submissions(self, query: Any, limit: int, cursor: Any, context: Any) -> Any:
        return await (await self._storage()).scan_submissions(query, limit, cursor, context)

    async def submission_by_request(self, conversation_id: Any, request_id: str, context: Any) -> Any:
        return await (await self._storage()).submission_by_request(conversation_id, request_id, context)

    async def find_document(self, address: Any, at: Any, context: Any) -> Any:
        return await (await self._storage()).find_document(address, at, context)

    async def document(self, id: Any, at: Any, context: Any) -> Any:
        return await (await self._storage()).document(id, at, context)

    async def scan_documents(self, query: Any, limit: int, cursor: Any, context: Any) -> Any:
        return await (await self._storage()).scan_documents(query, limit, cursor, context)

    async def close(self, context: Any) -> None:
        self._is_closed = True
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.close(context)


if MODE != "pi-memory":
    posix.open_posix_sqlite_storage = open_posix_sqlite_storage  # type: ignore[assignment]
    pi_durable.MemoryStorage = StorageInPlaceOfMemory  # type: ignore[misc,assignment]
    pi_durable.storage.MemoryStorage = StorageInPlaceOfMemory  # type: ignore[misc,assignment]
    pi_durable.storage.memory.MemoryStorage = StorageInPlaceOfMemory  # type: ignore[misc,assignment]


# Minutes on any storage (20,000 tasks, each ended by its own commit): first in the queue, so that
# under pytest-xdist it does not start last while the other workers have nothing left to do.
_LONGEST = "test_harness_scheduler_retention.py::test_forgets_a_deep_chain_of_ended_tasks_without_recursion"


def pytest_collection_modifyitems(items: list[Any]) -> None:
    items.sort(key=lambda item: item.nodeid != _LONGEST)


@pytest.fixture(autouse=True)
def _close_storages_opened_by_the_test() -> Iterator[None]:
    yield
    while _opened:
        _close_now(_opened.pop())
    if _pg is not None:
        _pg.release_all()


def _close_now(storage: Any) -> None:
    """Close a storage the test left open, without its (finished) event loop."""
    if storage._closing is not None:
        return  # the test closed it
    storage._closed = True
    if MODE == "pi-sqlite":
        storage._db._close()
    else:
        storage._runner.close(wait=True)
        storage._close_store()
