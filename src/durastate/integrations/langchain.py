"""LangChain on durastate: ``DurastateByteStore`` and ``DurastateCache``.

``DurastateByteStore`` is a ``langchain_core.stores.BaseStore[str, bytes]``
(what ``CacheBackedEmbeddings`` and the multi-vector retrievers take), and
``DurastateCache`` is an LLM cache (``langchain_core.caches.BaseCache``, for
``set_llm_cache`` or a model's ``cache=``), both sync and async, on any
durastate URL::

    from langchain_core.globals import set_llm_cache
    from durastate.integrations.langchain import DurastateByteStore, DurastateCache

    store = DurastateByteStore("sqlite:langchain.db", namespace="embeddings")
    set_llm_cache(DurastateCache("sqlite:langchain.db", ttl=86_400))

Install with ``pip install 'durastate[langchain]'``; importing this module
without ``langchain-core`` raises ``ImportError`` naming that extra. Both
pass LangChain's standard suites (``langchain-tests``: ``BaseStoreSyncTests``,
``BaseStoreAsyncTests``, ``SyncCacheTestSuite``, ``AsyncCacheTestSuite``).

Storage: the kv facet, scope ``b"langchain"``. The byte store keeps each key
as its UTF-8 bytes in namespace ``b"store/" + namespace``: ``mget`` is one
``get_many``, ``mset`` one atomic ``put_many`` (all pairs or none),
``mdelete`` one ``delete(keys=)``, and ``yield_keys(prefix=)`` a key-range
scan ``[prefix, next prefix)`` on the index, streamed in pages, keys in
UTF-8 byte order (which is code point order). Ordering needs nothing more,
so neither records nor documents are involved.

The cache keeps one entry per ``(prompt, llm_string)`` in namespace
``b"cache/" + namespace``, under ``sha256(llm_string) + sha256(prompt)``
(prompts can be far longer than a key may be). The entry is JSON holding the
prompt and llm string themselves, checked on every lookup (so even a hash
collision can only miss, never answer for another prompt), and the
generations in LangChain's own serialisation (``langchain_core.load``), never
pickle. Reading them back revives only generation and message classes
(``ALLOWED_OBJECTS``), whatever the stored JSON names, so a tampered
database cannot make a lookup construct anything else; an entry that cannot
be read or revived (garbage, a class outside that list, a newer format) is
a miss, and the next ``update`` replaces it. ``ttl=`` (seconds) makes
entries (or stored bytes) expire; ``clear()`` empties this cache's
namespace only.

Refused with ``durastate.InvalidRequest`` (nothing written): keys, prompts,
llm strings and namespaces that are not ``str``; byte-store values that are
not bytes; cache values that are not a sequence of ``Generation``, or whose
generations hold what ``dumpd`` cannot write as JSON (its "not_implemented"
marker, which ``load`` refuses) or a NaN/infinity; keys too
long for the store's ``max_key_size``, values over ``max_value_size``.

Async: every coroutine runs its synchronous twin through the object's
``AsyncCalls`` (``durastate.integrations._common``): a
``durastate.aio.AsyncStore`` over its store (owned or borrowed) with a runner
of the object's own. On a SQLite file a call runs inline on the event loop's
thread, no thread hop, and moves to a worker thread only when another
connection holds the write lock (the loop never waits for it); on PostgreSQL
it runs on a worker. Writes (``amset``, ``amdelete``, ``aupdate``,
``aclear``) run in one transaction, rolled back if the caller is cancelled
before it commits; reads are plain calls; ``ayield_keys`` steps through the
key scan inline on SQLite, in batches of keys per worker hop elsewhere.
``close()`` (or ``await aclose()``) waits for calls still on worker threads.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import orjson

from .. import store as _store
from .._json import dump_json
from .._validate import as_list, as_seconds, fail
from ._common import StoreHolder

try:
    from langchain_core import messages as lc_messages
    from langchain_core._api import suppress_langchain_beta_warning
    from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
    from langchain_core.load import dumpd, load
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation, GenerationChunk
    from langchain_core.stores import BaseStore
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "durastate.integrations.langchain needs langchain-core: pip install 'durastate[langchain]'"
    ) from exc

__all__ = ["ALLOWED_OBJECTS", "DurastateByteStore", "DurastateCache", "SCOPE"]

SCOPE = b"langchain"
# What a cache lookup may revive: generations and the messages inside them.
_MESSAGE_CLASSES = tuple(
    getattr(lc_messages, f"{kind}{suffix}")
    for kind in ("AI", "Chat", "Function", "Human", "System", "Tool")
    for suffix in ("Message", "MessageChunk")
)
ALLOWED_OBJECTS = (Generation, GenerationChunk, ChatGeneration, ChatGenerationChunk, *_MESSAGE_CLASSES)


def _text(name: str, value: Any) -> bytes:
    if not isinstance(value, str):
        fail(f"{name} must be a str, got {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        fail(f"{name} must be valid unicode (no lone surrogates), got {value!r:.80}")


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key above every key starting with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


class _Namespaced(StoreHolder):
    """``url`` or ``store=``, a ``namespace`` (kv namespace ``_KIND + namespace``) and a ``ttl``."""

    _KIND: bytes

    def __init__(
        self,
        url: str | None = None,
        *,
        store: _store.Store | None = None,
        namespace: str = "default",
        ttl: float | None = None,
    ) -> None:
        self._ns = self._KIND + _text("namespace", namespace)
        self._ttl = None if ttl is None else as_seconds("ttl", ttl, allow_zero=False)
        super().__init__(url, store, name=f"durastate-langchain-{self._KIND.decode().rstrip('/')}")
        self.namespace = namespace


class DurastateByteStore(_Namespaced, BaseStore[str, bytes]):
    """LangChain's ``BaseStore[str, bytes]`` on a durastate store.

    ``DurastateByteStore(url)`` opens its own store (``None``: the default
    ``./.durastate/state.db``); ``store=`` borrows one. Stores with different
    ``namespace`` never see each other's keys. ``ttl`` (seconds) makes every
    value written expire.
    """

    _KIND = b"store/"

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values of ``keys`` (``None`` where absent), parallel to ``keys``."""
        return self.store.kv.get_many(SCOPE, self._ns, [_text("key", k) for k in as_list("keys", keys)])

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        """Set every pair, atomically (later duplicates win)."""
        pairs = []
        for i, pair in enumerate(as_list("key_value_pairs", key_value_pairs)):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                fail(f"key_value_pairs[{i}] must be a (key, value) pair, got {pair!r:.80}")
            key, value = pair
            if not isinstance(value, (bytes, bytearray, memoryview)):
                fail(f"key_value_pairs[{i}] value must be bytes, got {type(value).__name__}")
            pairs.append((_text(f"key_value_pairs[{i}] key", key), bytes(value)))
        self.store.kv.put_many(SCOPE, self._ns, pairs, ttl=self._ttl)

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``; missing keys are ignored."""
        wanted = [_text("key", k) for k in as_list("keys", keys)]
        if wanted:
            self.store.kv.delete(SCOPE, self._ns, keys=wanted)

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """Every key (starting with ``prefix``), in UTF-8 byte order, streamed."""
        yield from self._keys(prefix)

    async def amget(self, keys: Sequence[str]) -> list[bytes | None]:
        return await self._aio.read(self.mget, keys)

    async def amset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        await self._aio.transact(self.mset, key_value_pairs)

    async def amdelete(self, keys: Sequence[str]) -> None:
        await self._aio.transact(self.mdelete, keys)

    def ayield_keys(self, *, prefix: str | None = None) -> AsyncIterator[str]:
        return self._aio.iterate(lambda: self._keys(prefix))

    def _keys(self, prefix: str | None) -> Iterator[str]:
        """The keys as an iterator whose first page is already read (errors surface here)."""
        start = None if prefix is None else _text("prefix", prefix)
        end = None if start is None else _prefix_end(start)
        pairs = self.store.kv.scan(SCOPE, self._ns, start=start or None, end=end)
        return (key.decode("utf-8") for key, _ in pairs)


class DurastateCache(_Namespaced, BaseCache):
    """LangChain's LLM cache (``BaseCache``) on a durastate store.

    ``DurastateCache(url)`` opens its own store (``None``: the default
    ``./.durastate/state.db``); ``store=`` borrows one. Caches with
    different ``namespace`` are separate (``clear()`` empties only its own).
    ``ttl`` (seconds) makes every entry expire.
    """

    _KIND = b"cache/"

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The generations cached for ``(prompt, llm_string)``, or ``None``."""
        data = self.store.kv.get(SCOPE, self._ns, _cache_key(prompt, llm_string))
        if data is None:
            return None
        try:
            entry = orjson.loads(data)
            if entry["prompt"] != prompt or entry["llm_string"] != llm_string:
                return None  # another prompt with the same hashes
            # load() is marked beta and warns on every call; this suppression is a
            # context variable (not the global warnings filter), so thread-safe.
            with suppress_langchain_beta_warning():
                generations = [load(g, allowed_objects=ALLOWED_OBJECTS) for g in entry["generations"]]
        except (ValueError, TypeError, KeyError, NotImplementedError):
            # Not readable or not revivable here (NotImplementedError: dumpd's "not_implemented"
            # marker, which update refuses now): a miss, replaced by the next update.
            return None
        if not all(isinstance(g, Generation) for g in generations):
            return None
        return generations

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Cache ``return_val`` (a sequence of ``Generation``) for ``(prompt, llm_string)``."""
        key = _cache_key(prompt, llm_string)
        generations = as_list("return_val", return_val)
        for i, generation in enumerate(generations):
            if not isinstance(generation, Generation):
                fail(f"return_val[{i}] must be a langchain Generation, got {type(generation).__name__}")
        dumped = [dumpd(g) for g in generations]
        data = dump_json("return_val", {"prompt": prompt, "llm_string": llm_string, "generations": dumped})
        # dumpd writes what it cannot serialise (a datetime, a set, ...) as a "not_implemented"
        # marker that load() refuses: such an entry could never be read back.
        if _NOT_IMPLEMENTED in data:
            for i, g in enumerate(dumped):
                marker = _not_implemented(g)
                if marker is not None:
                    what = ".".join(map(str, marker.get("id") or ())) or "object"
                    fail(
                        f"return_val[{i}] holds a {what} ({marker.get('repr', '?')!s:.80}), which cannot be stored "
                        "as JSON; durastate does not pickle"
                    )
        self.store.kv.put(SCOPE, self._ns, key, data, ttl=self._ttl)

    def clear(self, **kwargs: Any) -> None:
        """Remove every entry of this cache's namespace."""
        self.store.kv.delete(SCOPE, self._ns, all=True)

    async def alookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        return await self._aio.read(self.lookup, prompt, llm_string)

    async def aupdate(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        await self._aio.transact(self.update, prompt, llm_string, return_val)

    async def aclear(self, **kwargs: Any) -> None:
        await self._aio.transact(self.clear)


# How dumpd's marker for an object it cannot serialise looks in compact JSON (a str
# holding this text has its quotes escaped, so only the marker's own key and value match).
_NOT_IMPLEMENTED = b'"type":"not_implemented"'


def _not_implemented(dumped: Any) -> dict[str, Any] | None:
    """The first ``{"lc": 1, "type": "not_implemented", ...}`` marker anywhere in ``dumped``, or None."""
    stack = [dumped]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("lc") == 1 and item.get("type") == "not_implemented":
                return item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _cache_key(prompt: str, llm_string: str) -> bytes:
    llm = hashlib.sha256(_text("llm_string", llm_string)).digest()
    return llm + hashlib.sha256(_text("prompt", prompt)).digest()
