"""``ShardedStorage`` (alias ``ShardedSqliteStorage``): shards kept apart, in one store or several."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import durastate
from durastate.sharding import rendezvous_owner

from ._checks import _as_bytes, _as_shard_key
from .storage import FunctionStorage


def _named_shards(shards: Any) -> list[tuple[bytes, str | os.PathLike[str]]]:
    """``ShardedStorage``'s ``shards=`` as ``(name as UTF-8, path or URL)`` pairs, checked.

    A list names each database by its path; a mapping by its (``str()``-ed)
    keys. ``TypeError`` for anything but a list or mapping of paths/URLs (a
    lone ``str`` would be iterated character by character), ``ValueError``
    for a name with no UTF-8 form.
    """
    by_name = isinstance(shards, Mapping)
    if not by_name and (
        isinstance(shards, (str, bytes, bytearray, memoryview, os.PathLike)) or not isinstance(shards, Iterable)
    ):
        raise TypeError(
            f"shards must be a list of paths/URLs or a mapping of names to them, got {type(shards).__name__}"
        )
    named = []
    for i, item in enumerate(shards.items() if by_name else shards):
        name, url = item if by_name else (None, item)
        if not isinstance(url, (str, os.PathLike)):
            raise TypeError(f"shards[{i}] must be a path or URL (str or os.PathLike), got {type(url).__name__}")
        label = str(name if by_name else os.fspath(url))
        try:
            named.append((label.encode("utf-8"), url))
        except UnicodeEncodeError:
            raise ValueError(f"shards: the name {label!r} is not valid text (a lone surrogate)") from None
    return named


class ShardedStorage:
    """A backend that isolates shards like vgi's ``ShardedSqliteStorage`` (a debug aid).

    ``FunctionStorage`` ignores ``shard_key`` (one shared keyspace), which
    hides shard-routing bugs that only bite truly sharded backends. This one
    honours it: an operation under shard A never sees what was written under
    shard B (state, logs, counters, queues), while results are unchanged
    (keys, values and items come back exactly as written). ``""`` is a shard
    like any other; ``shard_key`` must be a ``str`` (``TypeError``) with a UTF-8
    form (``ValueError`` for a lone surrogate).

    By default every shard lives in one inner ``FunctionStorage``
    (``db_path``, default ``":memory:"`` as in the seed). Beyond the seed,
    ``shards=`` spreads the shards over several real databases, as vgi's
    cloud backend spreads them over Durable Objects: a list of paths/URLs
    (or a mapping of stable names to them); each ``shard_key`` goes to one of
    them by rendezvous hash (``durastate.sharding.rendezvous_owner``), so
    adding a database moves only the shard keys it wins (anything but such a
    list or mapping is a ``TypeError``). In both modes the
    scope / execution ids are also prefixed with
    ``shard_key.encode() + b"\\x1f"``, so shard keys that share a database
    stay isolated. ``VGI_SQLITE_SHARD_LOG=1`` (read at construction) logs each
    operation's shard and scope to ``vgi.storage.sqlite_shard``.
    """

    _SEP = b"\x1f"  # unit separator: absent from attach and execution id bytes

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        shards: Sequence[str | os.PathLike[str]] | Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        if shards is not None and db_path is not None:
            raise ValueError("ShardedStorage: pass db_path or shards, not both")
        if shards is None:
            self._shards = [FunctionStorage(db_path=db_path or ":memory:")]
            self._names = [b"default"]
        else:
            named = _named_shards(shards)
            if not named:
                raise ValueError("ShardedStorage: shards must name at least one database")
            self._names = [name for name, _ in named]
            if len(set(self._names)) != len(self._names):
                raise ValueError("ShardedStorage: shard names must be unique")
            self._shards = []
            try:
                for _, url in named:
                    self._shards.append(FunctionStorage(db_path=url))
            except BaseException:
                for opened in self._shards:
                    opened.__exit__(None, None, None)
                raise
        self._inner = self._shards[0]
        self._log = logging.getLogger("vgi.storage.sqlite_shard")
        self._dbg_on = os.environ.get("VGI_SQLITE_SHARD_LOG") == "1"

    @property
    def db_path(self) -> str | os.PathLike[str]:
        """The (first) database's path or URL."""
        return self._inner.db_path

    @property
    def store(self) -> durastate.Store:
        """The durastate store holding the shards (the first one with ``shards=``)."""
        return self._inner.store

    @property
    def stores(self) -> list[durastate.Store]:
        """Every database's store, in the order given."""
        return [shard.store for shard in self._shards]

    def _route(
        self, op: str, shard_key: str, id_bytes: bytes, id_name: str = "scope_id"
    ) -> tuple[FunctionStorage, bytes]:
        """The storage holding ``shard_key``'s rows, and ``id_bytes`` as addressed there."""
        encoded = _as_shard_key(shard_key)
        scope = _as_bytes(id_name, id_bytes)
        if self._dbg_on:
            self._log.warning("op=%s shard=%s scope=%s", op, shard_key, scope.hex()[:16])
        inner = self._inner if len(self._shards) == 1 else self._shards[rendezvous_owner(self._names, encoded)]
        return inner, encoded + self._SEP + scope

    def close(self) -> None:
        """Close the calling thread's connections; the storage stays usable."""
        for shard in self._shards:
            shard.close()

    def __enter__(self) -> ShardedStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close every store this object opened."""
        for shard in self._shards:
            shard.__exit__(exc_type, exc, tb)

    # -- work queue --------------------------------------------------------------

    def queue_push(self, execution_id: bytes, items: list[bytes], *, shard_key: str = "") -> int:
        inner, eid = self._route("queue_push", shard_key, execution_id, "execution_id")
        return inner.queue_push(eid, items)

    def queue_pop(self, execution_id: bytes, *, shard_key: str = "") -> bytes | None:
        inner, eid = self._route("queue_pop", shard_key, execution_id, "execution_id")
        return inner.queue_pop(eid)

    def queue_clear(self, execution_id: bytes, *, shard_key: str = "") -> int:
        inner, eid = self._route("queue_clear", shard_key, execution_id, "execution_id")
        return inner.queue_clear(eid)

    # -- state ---------------------------------------------------------------------

    def state_get_many(
        self, scope_id: bytes, ns: bytes, keys: list[bytes], *, shard_key: str = ""
    ) -> list[bytes | None]:
        inner, scope = self._route("state_get_many", shard_key, scope_id)
        return inner.state_get_many(scope, ns, keys)

    def state_put_many(
        self, scope_id: bytes, ns: bytes, items: list[tuple[bytes, bytes]], *, shard_key: str = ""
    ) -> None:
        inner, scope = self._route("state_put_many", shard_key, scope_id)
        inner.state_put_many(scope, ns, items)

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
    ) -> list[tuple[bytes, bytes]]:
        inner, scope = self._route("state_scan", shard_key, scope_id)
        return inner.state_scan(scope, ns, start=start, end=end, reverse=reverse, limit=limit)

    def state_drain(self, scope_id: bytes, ns: bytes, *, shard_key: str = "") -> list[tuple[bytes, bytes]]:
        inner, scope = self._route("state_drain", shard_key, scope_id)
        return inner.state_drain(scope, ns)

    def state_delete(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        shard_key: str = "",
    ) -> int:
        inner, scope = self._route("state_delete", shard_key, scope_id)
        return inner.state_delete(scope, ns, keys, start=start, end=end)

    def execution_clear(self, scope_id: bytes, *, shard_key: str = "") -> int:
        inner, scope = self._route("execution_clear", shard_key, scope_id)
        return inner.execution_clear(scope)

    # -- logs and counters ------------------------------------------------------------

    def state_append(self, scope_id: bytes, ns: bytes, key: bytes, item: bytes, *, shard_key: str = "") -> int:
        inner, scope = self._route("state_append", shard_key, scope_id)
        return inner.state_append(scope, ns, key, item)

    def state_log_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[int, bytes]]:
        inner, scope = self._route("state_log_scan", shard_key, scope_id)
        return inner.state_log_scan(scope, ns, key, after_id=after_id, limit=limit)

    def state_counter_get(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> int:
        inner, scope = self._route("state_counter_get", shard_key, scope_id)
        return inner.state_counter_get(scope, ns, key)

    def state_counter_add(self, scope_id: bytes, ns: bytes, key: bytes, delta: int, *, shard_key: str = "") -> int:
        inner, scope = self._route("state_counter_add", shard_key, scope_id)
        return inner.state_counter_add(scope, ns, key, delta)

    def state_counter_set(self, scope_id: bytes, ns: bytes, key: bytes, value: int, *, shard_key: str = "") -> None:
        inner, scope = self._route("state_counter_set", shard_key, scope_id)
        inner.state_counter_set(scope, ns, key, value)

    def state_counter_delete(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> None:
        inner, scope = self._route("state_counter_delete", shard_key, scope_id)
        inner.state_counter_delete(scope, ns, key)


ShardedSqliteStorage = ShardedStorage
