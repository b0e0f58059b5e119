"""Strands Agents' bytes-under-keys ``Storage`` on durastate: ``DurastateStorage``.

Implements ``strands.storage.Storage`` (``strands-agents`` 1.62): the async
``write``, ``read``, ``delete``, ``list`` (keys under a prefix, sorted) and
``search`` (the framework's keyword scoring over the stored values, as
``InMemoryStorage`` and ``LocalFileStorage`` do without a search strategy),
plus ``namespace(prefix)``, a view whose keys are relative to the prefix.
What Strands' snapshot session manager, memory and other subsystems persist
through goes here::

    from strands.session import SnapshotSessionManager
    from durastate.integrations.strands import DurastateStorage

    storage = DurastateStorage(url="sqlite:agents.db")

Keys follow the shipped backends' rules, with their own functions
(``_normalize_key`` / ``_normalize_prefix``): runs of ``/`` collapse, leading
and trailing ``/`` are dropped, and an empty key, a ``..`` segment or a
backslash is refused (``InvalidStorageKey``: a ``StorageError`` and a
``durastate.InvalidRequest``). A differential test checks every sequence of
calls against ``InMemoryStorage`` and ``LocalFileStorage``.

Storage: the kv facet, scope ``b"strands/storage"``, one namespace, key = the
normalized key (UTF-8), value = the bytes as given. ``list`` is a key range
scan (``prefix`` up to its successor), in the byte order of UTF-8, which is
the code-point order ``sorted`` gives ``str``. kv because this *is* a
key/value interface; one statement per call.

Stricter: a key or prefix that is not a ``str``, or too long for the store's
``max_key_size``; ``data`` that is not bytes-like; a value larger than
``max_value_size`` (``InvalidStorageKey`` for keys, ``durastate.InvalidRequest``
for data). Async: each coroutine runs its synchronous twin through the
storage's ``AsyncCalls`` (``durastate.integrations._common``).
"""

from __future__ import annotations

import builtins
from typing import Any

from strands.storage.search.keyword import KeywordSearchStrategy
from strands.storage.storage import StorageSearchResult, _normalize_key, _normalize_prefix
from strands.types.exceptions import StorageError

from ... import store as _store
from ..._validate import fail, fail_type
from ...errors import StoreClosed
from .._common import Holder, StoreHolder
from ._errors import InvalidStorageKey

__all__ = ["SCOPE", "DurastateStorage"]

SCOPE = b"strands/storage"
NS = b""


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix`` (``None``: unbounded)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class DurastateStorage(StoreHolder):
    """Strands ``Storage`` on a durastate store (see the module docstring).

    ``url`` opens (and ``close()`` closes) a store; ``store=`` borrows one;
    neither opens the default store.
    """

    def __init__(self, url: str | None = None, *, store: _store.Store | None = None) -> None:
        super().__init__(url, store, name="durastate-strands-storage")
        self._prefix = ""
        self._closed = False

    # -- the framework's Storage protocol ------------------------------------------

    async def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing any value."""
        await self._aio.call(self._write, key, data)

    async def read(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``."""
        return await self._aio.read(self._read, key)

    async def delete(self, key: str) -> None:
        """Remove ``key``; nothing happens if it is absent."""
        await self._aio.call(self._delete, key)

    async def list(self, query: str = "") -> builtins.list[str]:
        """The keys starting with ``query`` (relative to this view's namespace), sorted."""
        return await self._aio.read(self._list, query)

    async def search(self, query: str) -> builtins.list[StorageSearchResult]:
        """Keys scored by the framework's keyword overlap with ``query``, best first."""
        return await KeywordSearchStrategy().search(self, query)

    def namespace(self, prefix: str) -> DurastateStorage:
        """A view of this storage whose keys are relative to ``prefix`` (nested views nest prefixes)."""
        if not isinstance(prefix, str):
            raise InvalidStorageKey(f"prefix must be a str, got {type(prefix).__name__}")
        normalized = self._normalized(_normalize_prefix, prefix).rstrip("/")
        view = object.__new__(DurastateStorage)
        Holder._hold(view, self.store, owned=False, name=self._aio.name)
        view._prefix = f"{self._prefix}{normalized}/" if normalized else self._prefix
        view._closed = False
        return view

    # -- lifecycle -------------------------------------------------------------

    def __repr__(self) -> str:
        view = f" under {self._prefix!r}" if self._prefix else ""
        return f"<DurastateStorage on {self.store.url}{view}{' (closed)' if self._closed else ''}>"

    # -- the synchronous implementation ----------------------------------------

    def _normalized(self, normalize: Any, value: Any) -> str:
        if self._closed:
            raise StoreClosed("DurastateStorage is closed")
        if not isinstance(value, str):
            raise InvalidStorageKey(f"a storage key must be a str, got {type(value).__name__}")
        try:
            normalized: str = normalize(value)
        except StorageError as exc:
            raise InvalidStorageKey(str(exc)) from None
        return normalized

    def _key(self, key: Any) -> bytes:
        full = f"{self._prefix}{self._normalized(_normalize_key, key)}"
        try:
            data = full.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidStorageKey(f"a storage key must be valid unicode (no lone surrogates), got {key!r}") from None
        room = self.store.kv.max_key_size - len(SCOPE) - len(NS)
        if len(data) > room:
            raise InvalidStorageKey(f"storage key is {len(data)} bytes as UTF-8; this store allows {room}")
        return data

    def _write(self, key: str, data: bytes) -> None:
        address = self._key(key)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            fail_type("data", "bytes", data)
        value = bytes(data)
        if len(value) > self.store.kv.max_value_size:
            fail(f"data is {len(value)} bytes; the limit is max_value_size={self.store.kv.max_value_size}")
        self.store.kv.put(SCOPE, NS, address, value)

    def _read(self, key: str) -> bytes | None:
        return self.store.kv.get(SCOPE, NS, self._key(key))

    def _delete(self, key: str) -> None:
        self.store.kv.delete(SCOPE, NS, keys=[self._key(key)])

    def _list(self, query: str) -> builtins.list[str]:
        full = f"{self._prefix}{self._normalized(_normalize_prefix, query)}"
        try:
            prefix = full.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidStorageKey(f"a prefix must be valid unicode (no lone surrogates), got {query!r}") from None
        cut = len(self._prefix)
        with self.store.engine.read_transaction():
            rows = self.store.kv.scan(SCOPE, NS, start=prefix or None, end=_successor(prefix))
            return [key.decode("utf-8")[cut:] for key, _ in rows]
