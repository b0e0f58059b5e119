"""``FunctionStorageBackend``: what a bound view needs of a backend (the seed's protocol)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class FunctionStorageBackend(Protocol):
    """What ``BoundStorage`` needs of a backend: the seed's ``FunctionStorage`` protocol.

    ``FunctionStorage`` and ``ShardedStorage`` satisfy it, and so do vgi's
    own backends. A backend that routes remotely by shard key sets a
    ``requires_shard_key = True`` class attribute (read with ``getattr``, so
    it is not part of the protocol).
    """

    def queue_push(self, execution_id: bytes, items: list[bytes], *, shard_key: str = "") -> int: ...

    def queue_pop(self, execution_id: bytes, *, shard_key: str = "") -> bytes | None: ...

    def queue_clear(self, execution_id: bytes, *, shard_key: str = "") -> int: ...

    def state_get_many(
        self, scope_id: bytes, ns: bytes, keys: list[bytes], *, shard_key: str = ""
    ) -> list[bytes | None]: ...

    def state_put_many(
        self, scope_id: bytes, ns: bytes, items: list[tuple[bytes, bytes]], *, shard_key: str = ""
    ) -> None: ...

    def state_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        shard_key: str = "",
    ) -> Iterable[tuple[bytes, bytes]]: ...

    def state_drain(self, scope_id: bytes, ns: bytes, *, shard_key: str = "") -> Iterable[tuple[bytes, bytes]]: ...

    def state_delete(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        shard_key: str = "",
    ) -> int: ...

    def execution_clear(self, scope_id: bytes, *, shard_key: str = "") -> int: ...

    def state_append(self, scope_id: bytes, ns: bytes, key: bytes, item: bytes, *, shard_key: str = "") -> int: ...

    def state_log_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[int, bytes]]: ...

    def state_counter_get(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> int: ...

    def state_counter_add(self, scope_id: bytes, ns: bytes, key: bytes, delta: int, *, shard_key: str = "") -> int: ...

    def state_counter_set(self, scope_id: bytes, ns: bytes, key: bytes, value: int, *, shard_key: str = "") -> None: ...

    def state_counter_delete(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> None: ...
