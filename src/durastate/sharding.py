"""Route one keyspace over several stores: ``durastate.sharding``.

``ShardedStore`` looks like a ``Store`` (``.kv``, ``.queues``,
``transaction(key)``, ``close()``) and sends every call to one of N stores,
chosen by a stable hash of the call's *shard key*: the ``scope`` for kv
calls, the queue ``name`` for queue calls. A fleet of PostgreSQL servers (or
of SQLite files) then serves one keyspace.

Choice of hash: rendezvous (highest random weight). Each shard has a stable
name (its URL unless you name it); a key goes to the shard with the highest
``blake2b(name, key)``. Adding a shard moves exactly the keys that the new
shard now wins, about 1/(N+1) of them, and removing one moves only that
shard's keys; nothing else ever moves. The hash is keyed by shard *names*,
not positions, so listing the shards in another order changes nothing.

Operations never span shards: one call touches one store, and a transaction
is a transaction of one shard (``transaction(key)``). Keep what must commit
together under one shard key (e.g. one scope).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType

from ._validate import as_bytes, as_name, fail
from .kv import KV, ScopedKV
from .queues import DEFAULT_MAX_ATTEMPTS, Claim, DeadLetter, Queues, QueueStats
from .store import Store, Transaction

__all__ = ["ShardedStore", "rendezvous_owner"]


def _weight(name: bytes, key: bytes) -> int:
    # Length-prefixed so (name, key) pairs can never collide by concatenation.
    h = hashlib.blake2b(digest_size=8, person=b"durastate")
    h.update(len(name).to_bytes(4, "big"))
    h.update(name)
    h.update(key)
    return int.from_bytes(h.digest(), "big")


def rendezvous_owner(names: Sequence[bytes], key: bytes) -> int:
    """Index in ``names`` of the shard that owns ``key`` (highest weight wins).

    Ties (astronomically unlikely) go to the lower name, so the answer does
    not depend on the order of ``names``.
    """
    best = -1
    best_weight = -1
    for i, name in enumerate(names):
        w = _weight(name, key)
        if w > best_weight or (w == best_weight and name < names[best]):
            best, best_weight = i, w
    return best


class ShardedStore:
    """A ``Store``-shaped router over several stores (see the module docstring).

    ``stores``: a sequence of stores (each named by its URL) or a mapping of
    stable shard names to stores. Names must be unique. Name the shards
    when their URLs may change (a moved server keeps its keys only if its
    name stays the same).
    """

    def __init__(self, stores: Sequence[Store] | Mapping[str, Store]) -> None:
        if isinstance(stores, Mapping):
            named = list(stores.items())
        elif isinstance(stores, Sequence) and not isinstance(stores, (str, bytes)):
            named = [(s.url, s) for s in stores]
        else:
            fail(f"stores must be a list of stores or a mapping name -> store, got {type(stores).__name__}")
        if not named:
            fail("a ShardedStore needs at least one store")
        names: list[bytes] = []
        for name, store in named:
            if not isinstance(store, Store):
                fail(f"shard {name!r} is not a durastate Store (got {type(store).__name__})")
            names.append(as_name("shard name", name))
        if len(set(names)) != len(names):
            fail("shard names must be unique (two stores share a URL? name them with a mapping)")
        self.names = [n.decode() for n in names]
        self._names = names
        self.stores = [store for _, store in named]
        self.kv = ShardedKV(self)
        self.queues = ShardedQueues(self)

    def shard_of(self, key: str | bytes) -> int:
        """Index of the store that owns ``key`` (a scope, queue name, ...)."""
        encoded = as_name("shard key", key) if isinstance(key, str) else as_bytes("shard key", key)
        return rendezvous_owner(self._names, encoded)

    def store_for(self, key: str | bytes) -> Store:
        """The store that owns ``key``."""
        return self.stores[self.shard_of(key)]

    def transaction(self, key: str | bytes) -> Transaction:
        """A transaction on the shard that owns ``key`` (one shard only)."""
        return self.store_for(key).transaction()

    def close(self) -> None:
        """Close every shard."""
        for store in self.stores:
            store.close()

    def __enter__(self) -> ShardedStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ShardedKV:
    """``store.kv`` routed by ``scope``. Same methods, same contracts."""

    def __init__(self, router: ShardedStore) -> None:
        self._router = router

    def _kv(self, scope: bytes) -> KV:
        return self._router.stores[rendezvous_owner(self._router._names, as_bytes("scope", scope))].kv

    def get(self, scope: bytes, ns: bytes, key: bytes) -> bytes | None:
        return self._kv(scope).get(scope, ns, key)

    def get_many(self, scope: bytes, ns: bytes, keys: Sequence[bytes]) -> list[bytes | None]:
        return self._kv(scope).get_many(scope, ns, keys)

    def put(self, scope: bytes, ns: bytes, key: bytes, value: bytes, *, ttl: float | None = None) -> None:
        self._kv(scope).put(scope, ns, key, value, ttl=ttl)

    def put_many(
        self, scope: bytes, ns: bytes, items: Iterable[tuple[bytes, bytes]], *, ttl: float | None = None
    ) -> None:
        self._kv(scope).put_many(scope, ns, items, ttl=ttl)

    def scan(
        self,
        scope: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._kv(scope).scan(scope, ns, start=start, end=end, reverse=reverse, limit=limit)

    def drain(self, scope: bytes, ns: bytes) -> list[tuple[bytes, bytes]]:
        return self._kv(scope).drain(scope, ns)

    def delete(
        self,
        scope: bytes,
        ns: bytes,
        keys: Sequence[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        all: bool = False,
    ) -> int:
        return self._kv(scope).delete(scope, ns, keys, start=start, end=end, all=all)

    def clear(self, scope: bytes) -> int:
        return self._kv(scope).clear(scope)

    def append(self, scope: bytes, ns: bytes, key: bytes, value: bytes) -> int:
        return self._kv(scope).append(scope, ns, key, value)

    def log(
        self, scope: bytes, ns: bytes, key: bytes, *, after: int = 0, limit: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        return self._kv(scope).log(scope, ns, key, after=after, limit=limit)

    def incr(self, scope: bytes, ns: bytes, key: bytes, delta: int = 1) -> int:
        return self._kv(scope).incr(scope, ns, key, delta)

    def counter(self, scope: bytes, ns: bytes, key: bytes) -> int:
        return self._kv(scope).counter(scope, ns, key)

    def set_counter(self, scope: bytes, ns: bytes, key: bytes, value: int) -> None:
        self._kv(scope).set_counter(scope, ns, key, value)

    def delete_counter(self, scope: bytes, ns: bytes, key: bytes) -> bool:
        return self._kv(scope).delete_counter(scope, ns, key)

    def scope(self, scope: bytes) -> ScopedKV:
        return self._kv(scope).scope(scope)


class ShardedQueues:
    """``store.queues`` routed by queue name. Same methods, same contracts."""

    def __init__(self, router: ShardedStore) -> None:
        self._router = router

    def _queues(self, name: str | bytes) -> Queues:
        return self._router.store_for(name).queues

    def push(
        self,
        name: str | bytes,
        items: Iterable[bytes],
        *,
        delay: float = 0.0,
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
    ) -> int:
        return self._queues(name).push(name, items, delay=delay, max_attempts=max_attempts)

    def pop(self, name: str | bytes, *, wait: float | None = None) -> bytes | None:
        return self._queues(name).pop(name, wait=wait)

    def claim(self, name: str | bytes, *, lease: float = 30.0, wait: float | None = None) -> Claim | None:
        return self._queues(name).claim(name, lease=lease, wait=wait)

    def clear(self, name: str | bytes) -> int:
        return self._queues(name).clear(name)

    def stats(self, name: str | bytes) -> QueueStats:
        return self._queues(name).stats(name)

    def dead_letters(self, name: str | bytes, *, after: int = 0, limit: int | None = 100) -> list[DeadLetter]:
        return self._queues(name).dead_letters(name, after=after, limit=limit)

    def redrive(self, name: str | bytes, ids: Iterable[int] | None = None) -> int:
        return self._queues(name).redrive(name, ids)

    def delete_dead(self, name: str | bytes, ids: Iterable[int] | None = None) -> int:
        return self._queues(name).delete_dead(name, ids)
