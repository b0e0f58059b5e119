"""``ScopedKV``: ``store.kv`` with one scope bound (``KV.scope(scope)``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .facet import KV


class ScopedKV:
    """``store.kv`` with one scope bound: the same methods without ``scope``.

    ``clear()`` wipes the bound scope.
    """

    __slots__ = ("_kv", "scope_id")

    def __init__(self, kv: KV, scope: bytes) -> None:
        self._kv = kv
        self.scope_id = scope

    def get(self, ns: bytes, key: bytes) -> bytes | None:
        return self._kv.get(self.scope_id, ns, key)

    def get_many(self, ns: bytes, keys: Sequence[bytes]) -> list[bytes | None]:
        return self._kv.get_many(self.scope_id, ns, keys)

    def put(self, ns: bytes, key: bytes, value: bytes, *, ttl: float | None = None) -> None:
        self._kv.put(self.scope_id, ns, key, value, ttl=ttl)

    def put_many(
        self, ns: bytes, items: Iterable[tuple[bytes, bytes]], *, ttl: float | None = None, if_absent: bool = False
    ) -> int:
        return self._kv.put_many(self.scope_id, ns, items, ttl=ttl, if_absent=if_absent)

    def scan(
        self,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._kv.scan(self.scope_id, ns, start=start, end=end, reverse=reverse, limit=limit)

    def drain(self, ns: bytes) -> list[tuple[bytes, bytes]]:
        return self._kv.drain(self.scope_id, ns)

    def take(self, ns: bytes, key: bytes) -> bytes | None:
        return self._kv.take(self.scope_id, ns, key)

    def take_first(self, ns: bytes) -> tuple[bytes, bytes] | None:
        return self._kv.take_first(self.scope_id, ns)

    def take_last(self, ns: bytes) -> tuple[bytes, bytes] | None:
        return self._kv.take_last(self.scope_id, ns)

    def put_if_absent(self, ns: bytes, key: bytes, value: bytes, *, ttl: float | None = None) -> bool:
        return self._kv.put_if_absent(self.scope_id, ns, key, value, ttl=ttl)

    def require_absent(self, ns: bytes, key: bytes) -> None:
        self._kv.require_absent(self.scope_id, ns, key)

    def delete(
        self,
        ns: bytes,
        keys: Sequence[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        all: bool = False,
    ) -> int:
        return self._kv.delete(self.scope_id, ns, keys, start=start, end=end, all=all)

    def clear(self) -> int:
        return self._kv.clear(self.scope_id)

    def trim_log(self, ns: bytes, key: bytes, *, keep_last: int | None = None, older_than: float | None = None) -> int:
        return self._kv.trim_log(self.scope_id, ns, key, keep_last=keep_last, older_than=older_than)

    def append(self, ns: bytes, key: bytes, value: bytes) -> int:
        return self._kv.append(self.scope_id, ns, key, value)

    def log(self, ns: bytes, key: bytes, *, after: int = 0, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
        return self._kv.log(self.scope_id, ns, key, after=after, limit=limit)

    def incr(self, ns: bytes, key: bytes, delta: int = 1) -> int:
        return self._kv.incr(self.scope_id, ns, key, delta)

    def counter(self, ns: bytes, key: bytes) -> int:
        return self._kv.counter(self.scope_id, ns, key)

    def set_counter(self, ns: bytes, key: bytes, value: int) -> None:
        self._kv.set_counter(self.scope_id, ns, key, value)

    def delete_counter(self, ns: bytes, key: bytes) -> bool:
        return self._kv.delete_counter(self.scope_id, ns, key)

    def namespaces(self, *, after: bytes | None = None, limit: int = 100) -> list[bytes]:
        return self._kv.namespaces(self.scope_id, after=after, limit=limit)

    def log_keys(self, ns: bytes, *, after: bytes | None = None, limit: int = 100) -> list[bytes]:
        return self._kv.log_keys(self.scope_id, ns, after=after, limit=limit)

    def counters(self, ns: bytes, *, after: bytes | None = None, limit: int = 100) -> list[tuple[bytes, int]]:
        return self._kv.counters(self.scope_id, ns, after=after, limit=limit)
