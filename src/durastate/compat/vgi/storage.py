"""``FunctionStorage`` (alias ``FunctionStorageSqlite``): the seed's backend on a durastate store."""

from __future__ import annotations

import hashlib
import os
import weakref
from types import TracebackType
from typing import Any

import durastate
from durastate.errors import InvalidRequest
from durastate.queues import MAX_NAME_SIZE as _MAX_QUEUE_NAME_SIZE

from ._checks import (
    _INT64_MAX,
    _address_checks,
    _as_bytes,
    _as_bytes_list,
    _as_int,
    _as_int64,
    _as_limit,
    _as_optional_bytes,
    _as_optional_bytes_list,
    _as_pairs,
    _check_limit,
    _seed_error,
)

# Native queue name of an execution's work queue: this prefix + execution_id;
# an id too long for that is addressed by its SHA-256 under the other prefix.
_QUEUE_PREFIX = b"vgi/"
_HASHED_QUEUE_PREFIX = b"vgi#"
_QUEUE_ID_ROOM = _MAX_QUEUE_NAME_SIZE - len(_QUEUE_PREFIX)


def _frozen_clock() -> float:
    """The compat store's clock: always the epoch (see the module docstring)."""
    return 0.0


def _get_default_db_path() -> str:
    """The seed's default database: ``user_state_dir("vgi")/vgi_storage.db``.

    Creates the folder. Resolved to an absolute path.
    """
    from pathlib import Path

    from platformdirs import user_state_dir

    state_dir = Path(user_state_dir("vgi"))
    state_dir.mkdir(parents=True, exist_ok=True)
    return str((state_dir / "vgi_storage.db").resolve())


def _open_store(db_path: str | os.PathLike[str]) -> durastate.Store:
    if db_path == "" or (isinstance(db_path, os.PathLike) and os.fspath(db_path) == ""):
        raise ValueError("db_path must not be empty (pass None for the default location or ':memory:')")
    return durastate.open(
        db_path,
        clock=_frozen_clock,
        max_value_size=None,  # as large as the engine takes (SQLite ~1 GB, PostgreSQL 10**9 bytes)
        max_key_size=None,  # as large as the engine can index
    )


class FunctionStorage:
    """vgi's ``FunctionStorageSqlite`` on any durastate engine (see the module docstring).

    Thread-safe and usable from many processes on one file or server. Every
    method validates its arguments first (``TypeError`` for wrong types,
    ``ValueError`` for wrong values) and changes nothing when it raises.
    ``shard_key`` is accepted everywhere and ignored. The arguments are
    validated once, by the facet the method calls; the adapter's own checks
    run only when the facet refuses a call, to raise the seed's error type
    (see ``_seed_error``).
    """

    db_path: str | os.PathLike[str]

    def __init__(self, db_path: str | os.PathLike[str] | None = None) -> None:
        """Open (creating if needed) the storage.

        ``db_path``: a file path, a durastate URL, ``":memory:"`` (a private
        in-memory database that lives as long as this object) or ``None``
        (``platformdirs.user_state_dir("vgi")/vgi_storage.db``, folder created).
        """
        if db_path is not None and not isinstance(db_path, (str, os.PathLike)):
            raise TypeError(f"db_path must be a str, a path or None, got {type(db_path).__name__}")
        self.db_path = db_path if db_path is not None else _get_default_db_path()
        self._adopt(_open_store(self.db_path), owned=True)

    @classmethod
    def from_store(cls, store: durastate.Store) -> FunctionStorage:
        """A ``FunctionStorage`` over an already open ``store``, which stays the caller's.

        Closing this object (or leaving its ``with`` block) does not close
        ``store``. Caveat: ``store``'s clock orders the work queue; open it
        with a constant clock (as ``FunctionStorage()`` does) unless every
        process sharing it has a well-synchronised clock.
        """
        if not isinstance(store, durastate.Store):
            raise TypeError(f"store must be a durastate.Store, got {type(store).__name__}")
        self = cls.__new__(cls)
        self.db_path = store.url
        self._adopt(store, owned=False)
        return self

    def _adopt(self, store: durastate.Store, *, owned: bool) -> None:
        self.store = store
        self._kv = store.kv
        self._queues = store.queues
        self._owned = owned
        # Release connections (a PostgreSQL pool) when this object is dropped,
        # as the seed's connections were released with it.
        self._finalizer = weakref.finalize(self, store.close) if owned else None

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Close the calling thread's connection, like the seed; the storage stays usable.

        The thread's next call opens a fresh connection; other threads are
        unaffected and an in-memory database keeps its data. To release every
        connection, leave the storage's ``with`` block.
        """
        self.store.engine.release_connection()

    def __enter__(self) -> FunctionStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the underlying store (every thread's connections) if this object opened it."""
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        return f"<durastate.compat.vgi.FunctionStorage {self.store.url}>"

    # -- work queue --------------------------------------------------------------
    # Every method hands its arguments to the facet, which validates them
    # once; only a call the facet refuses runs the adapter's own checks, to
    # raise the seed's error type for what was wrong (see ``_seed_error``).

    @staticmethod
    def _queue_name(execution_id: Any) -> bytes:
        """The native queue of ``execution_id``: ``b"vgi/" + execution_id``.

        An id too long for a native queue name (``queues.MAX_NAME_SIZE``
        bytes with the prefix) is addressed by its SHA-256 digest under
        ``b"vgi#"`` instead, so any length works; the two prefixes differ, so
        a hashed name never meets a plain one.
        """
        eid: bytes = execution_id if type(execution_id) is bytes else _as_bytes("execution_id", execution_id)
        if len(eid) > _QUEUE_ID_ROOM:
            return _HASHED_QUEUE_PREFIX + hashlib.sha256(eid).digest()
        return _QUEUE_PREFIX + eid

    def queue_push(self, execution_id: bytes, items: list[bytes], *, shard_key: str = "") -> int:
        """Append ``items`` (bytes) to the execution's FIFO queue, atomically; return how many."""
        name = self._queue_name(execution_id)
        try:
            return self._queues.push(
                name, items if type(items) is list else _as_bytes_list("items", items), max_attempts=None
            )
        except InvalidRequest:
            _seed_error((_as_bytes_list, "items", items))
            raise

    def queue_pop(self, execution_id: bytes, *, shard_key: str = "") -> bytes | None:
        """Remove and return the oldest item; ``None`` when empty or never pushed."""
        return self._queues.pop(self._queue_name(execution_id))

    def queue_clear(self, execution_id: bytes, *, shard_key: str = "") -> int:
        """Delete every remaining item of the execution's queue; return how many."""
        return self._queues.clear(self._queue_name(execution_id))

    # -- state ---------------------------------------------------------------------

    def state_get_many(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes],
        *,
        shard_key: str = "",
    ) -> list[bytes | None]:
        """Values parallel to ``keys`` (``None`` for misses); ``[]`` for no keys."""
        try:
            if type(keys) is not list:
                return self._kv.get_many(scope_id, ns, _as_bytes_list("keys", keys))
            if len(keys) == 1:  # BoundStorage.state_get: the one-key statement
                return [self._kv.get(scope_id, ns, keys[0])]
            return self._kv.get_many(scope_id, ns, keys)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns), (_as_bytes_list, "keys", keys))
            raise

    def state_put_many(
        self,
        scope_id: bytes,
        ns: bytes,
        items: list[tuple[bytes, bytes]],
        *,
        shard_key: str = "",
    ) -> None:
        """Upsert every ``(key, value)`` pair atomically (a later duplicate key wins)."""
        kv = self._kv
        try:
            if type(items) is not list:
                kv.put_many(scope_id, ns, _as_pairs("items", items))
            elif len(items) == 1 and type(items[0]) is tuple and len(items[0]) == 2:
                kv.put(scope_id, ns, items[0][0], items[0][1])  # BoundStorage.state_put
            else:
                kv.put_many(scope_id, ns, items)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns), (_as_pairs, "items", items))
            raise

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
        """``(key, value)`` pairs with ``start <= key < end``, by unsigned key bytes.

        Either bound ``None`` is open; ``reverse`` (truthy) orders descending;
        ``limit`` caps the count (``None``: all, ``0``: none).
        """
        if type(limit) is not int and limit is not None:
            limit = _as_limit(limit)
        try:
            return list(self._kv.scan(scope_id, ns, start=start, end=end, reverse=bool(reverse), limit=limit))
        except InvalidRequest:
            _seed_error(
                (_as_bytes, "scope_id", scope_id),
                (_as_bytes, "ns", ns),
                (_as_optional_bytes, "start", start),
                (_as_optional_bytes, "end", end),
                (_check_limit, "limit", limit),
            )
            raise

    def state_drain(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        shard_key: str = "",
    ) -> list[tuple[bytes, bytes]]:
        """Atomically remove every pair of the namespace; return them sorted by key."""
        try:
            return self._kv.drain(scope_id, ns)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns))
            raise

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
        """Delete ``keys``, or the range ``[start, end)``, or (neither) the whole namespace.

        ``keys`` together with a bound raises ``ValueError``. Returns the
        number of rows removed; deleting what is absent is a no-op.
        """
        if keys is not None and (start is not None or end is not None):
            raise ValueError("state_delete: keys and start/end are mutually exclusive")
        kv = self._kv
        try:
            if keys is not None:
                doomed = keys if type(keys) is list else _as_bytes_list("keys", keys)
                if doomed:
                    return kv.delete(scope_id, ns, doomed)
                # Nothing to delete, so no facet call to check the address.
                _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns))
                return 0
            if start is None and end is None:
                return kv.delete(scope_id, ns, all=True)
            return kv.delete(scope_id, ns, start=start, end=end)
        except InvalidRequest:
            _seed_error(
                (_as_bytes, "scope_id", scope_id),
                (_as_bytes, "ns", ns),
                (_as_optional_bytes_list, "keys", keys),
                (_as_optional_bytes, "start", start),
                (_as_optional_bytes, "end", end),
            )
            raise

    def execution_clear(
        self,
        scope_id: bytes,
        *,
        shard_key: str = "",
    ) -> int:
        """Delete every state, log and counter row of ``scope_id``; return how many. Queues stay."""
        try:
            return self._kv.clear(scope_id)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id))
            raise

    # -- append-only logs -------------------------------------------------------

    def state_append(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        item: bytes,
        *,
        shard_key: str = "",
    ) -> int:
        """Append ``item`` to the log of ``(scope_id, ns, key)``; return its ordinal.

        Ordinals increase across every log of the database and are never reused.
        """
        try:
            return self._kv.append(scope_id, ns, key, item)
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_as_bytes, "item", item))
            raise

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
        """``(id, value)`` entries of one log with ``id > after_id``, ascending.

        ``after_id=-1`` reads from the start; pass the last id seen to page on.
        ``limit`` caps the count (``None``: all).
        """
        after = after_id if type(after_id) is int else _as_int("after_id", after_id)
        if type(limit) is not int and limit is not None:
            limit = _as_limit(limit)
        if after > _INT64_MAX:
            _seed_error(*_address_checks(scope_id, ns, key), (_check_limit, "limit", limit))
            return []  # no ordinal can follow it
        try:
            return list(self._kv.log(scope_id, ns, key, after=after if after >= -1 else -1, limit=limit))
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_check_limit, "limit", limit))
            raise

    # -- counters ------------------------------------------------------------------

    def state_counter_get(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> int:
        """The int64 counter at ``(scope_id, ns, key)``; 0 when absent."""
        try:
            return self._kv.counter(scope_id, ns, key)
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key))
            raise

    def state_counter_add(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        delta: int,
        *,
        shard_key: str = "",
    ) -> int:
        """Atomically add ``delta`` (absent counts as 0) and return the new value.

        A sum outside the int64 range raises ``ValueError`` and changes nothing.
        """
        try:
            return self._kv.incr(scope_id, ns, key, delta if type(delta) is int else _as_int64("delta", delta))
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_as_int64, "delta", delta))
            raise

    def state_counter_set(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        value: int,
        *,
        shard_key: str = "",
    ) -> None:
        """Overwrite the counter with ``value`` (creating it)."""
        try:
            self._kv.set_counter(scope_id, ns, key, value if type(value) is int else _as_int64("value", value))
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_as_int64, "value", value))
            raise

    def state_counter_delete(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> None:
        """Delete the counter (no-op when absent)."""
        try:
            self._kv.delete_counter(scope_id, ns, key)
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key))
            raise


FunctionStorageSqlite = FunctionStorage
