"""The bound views: ``BoundStorage`` (one execution) and ``TransactionBoundStorage``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import _arrow
from ._checks import _as_int
from .backend import FunctionStorageBackend
from .namespaces import FrameworkNS, _coerce_ns, _resolve_shard_key

if TYPE_CHECKING:
    import pyarrow as pa


class TransactionBoundStorage:
    """Transaction-scoped state: ``scope_id = transaction_opaque_data``, ``ns = b"txn"``.

    Get one with ``BoundStorage.transaction(transaction_opaque_data)``, or
    build it with an ``attach_plaintext`` (shard key derived as for
    ``BoundStorage``) or an already resolved ``shard_key``.
    """

    _NS = b"txn"

    def __init__(
        self,
        storage: FunctionStorageBackend,
        transaction_opaque_data: bytes,
        *,
        request: Any = None,
        attach_plaintext: bytes | None = None,
        shard_key: str | None = None,
    ) -> None:
        self._base = storage
        self._transaction_opaque_data = transaction_opaque_data
        if shard_key is None:
            origin = (
                f"TransactionBoundStorage({type(request).__name__})"
                if request is not None
                else "TransactionBoundStorage"
            )
            shard_key = _resolve_shard_key(storage, attach_plaintext, origin)
        self._shard_key = shard_key

    def get(self, keys: list[bytes]) -> list[bytes | None]:
        """Values parallel to ``keys`` (``None`` for misses)."""
        return self._base.state_get_many(self._transaction_opaque_data, self._NS, keys, shard_key=self._shard_key)

    def get_one(self, key: bytes) -> bytes | None:
        """One value, or ``None``."""
        return self.get([key])[0]

    def put(self, items: list[tuple[bytes, bytes]]) -> None:
        """Upsert a batch of ``(key, value)`` pairs atomically."""
        self._base.state_put_many(self._transaction_opaque_data, self._NS, items, shard_key=self._shard_key)

    def put_one(self, key: bytes, value: bytes) -> None:
        """Upsert one pair."""
        self.put([(key, value)])

    def clear(self) -> None:
        """Drop everything of this transaction (every namespace, logs and counters too)."""
        self._base.execution_clear(self._transaction_opaque_data, shard_key=self._shard_key)


class BoundStorage:
    """A backend bound to one ``execution_id`` (and its attach's shard key).

    ``attach_plaintext`` is the unwrapped attach (``uuid(16) ||
    catalog_bytes``); the shard key is derived from its UUID (see
    ``_resolve_shard_key``). ``request`` only labels the derivation in debug
    logs. Every ``state_*``/``counter_*`` method checks its namespace with
    ``_coerce_ns`` before calling the backend.
    """

    def __init__(
        self,
        storage: FunctionStorageBackend,
        execution_id: bytes,
        *,
        request: Any = None,
        attach_plaintext: bytes | None = None,
    ) -> None:
        self._base = storage
        self._execution_id = execution_id
        origin = f"BoundStorage({type(request).__name__})" if request is not None else "BoundStorage"
        self._shard_key = _resolve_shard_key(storage, attach_plaintext, origin)

    def transaction(self, transaction_opaque_data: bytes) -> TransactionBoundStorage:
        """A transaction-scoped view on the same backend and shard."""
        return TransactionBoundStorage(self._base, transaction_opaque_data, shard_key=self._shard_key)

    # -- work queue --------------------------------------------------------------

    def queue_push(self, items: list[bytes]) -> int:
        """Append work items to this execution's queue; return how many."""
        return self._base.queue_push(self._execution_id, items, shard_key=self._shard_key)

    def queue_push_batches(self, batches: list[pa.RecordBatch]) -> int:
        """Serialise Arrow record batches (IPC stream) and push them as work items.

        ``TypeError`` (nothing pushed) for ``batches`` that is not a list of
        ``RecordBatch`` (a single batch included: the seed iterated its columns).
        """
        return self.queue_push([self.serialize_record_batch(b) for b in _arrow.record_batches(batches)])

    def queue_pop(self) -> bytes | None:
        """Remove and return the next work item, or ``None``."""
        return self._base.queue_pop(self._execution_id, shard_key=self._shard_key)

    def queue_pop_batch(self) -> pa.RecordBatch | None:
        """Pop one work item and deserialise it as an Arrow record batch (or ``None``)."""
        data = self.queue_pop()
        if data is None:
            return None
        return self.deserialize_record_batch(data)

    def queue_clear(self) -> int:
        """Delete the remaining work items; return how many."""
        return self._base.queue_clear(self._execution_id, shard_key=self._shard_key)

    # -- state (scope_id = execution_id) ------------------------------------------

    def state_get(self, ns: bytes | FrameworkNS, key: bytes) -> bytes | None:
        """One value, or ``None``."""
        return self._base.state_get_many(self._execution_id, _coerce_ns(ns), [key], shard_key=self._shard_key)[0]

    def state_get_many(self, ns: bytes | FrameworkNS, keys: list[bytes]) -> list[bytes | None]:
        """Values parallel to ``keys``."""
        return self._base.state_get_many(self._execution_id, _coerce_ns(ns), keys, shard_key=self._shard_key)

    def state_put(self, ns: bytes | FrameworkNS, key: bytes, value: bytes) -> None:
        """Upsert one pair."""
        self._base.state_put_many(self._execution_id, _coerce_ns(ns), [(key, value)], shard_key=self._shard_key)

    def state_put_many(self, ns: bytes | FrameworkNS, items: list[tuple[bytes, bytes]]) -> None:
        """Upsert a batch atomically."""
        self._base.state_put_many(self._execution_id, _coerce_ns(ns), items, shard_key=self._shard_key)

    def state_scan(
        self,
        ns: bytes | FrameworkNS,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterable[tuple[bytes, bytes]]:
        """Pairs in ``[start, end)`` by key (descending with ``reverse``), up to ``limit``."""
        return self._base.state_scan(
            self._execution_id,
            _coerce_ns(ns),
            start=start,
            end=end,
            reverse=reverse,
            limit=limit,
            shard_key=self._shard_key,
        )

    def state_drain(self, ns: bytes | FrameworkNS) -> Iterable[tuple[bytes, bytes]]:
        """Atomically remove and return every pair of the namespace."""
        return self._base.state_drain(self._execution_id, _coerce_ns(ns), shard_key=self._shard_key)

    def state_delete(
        self,
        ns: bytes | FrameworkNS,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
    ) -> int:
        """Delete ``keys``, the range ``[start, end)``, or the whole namespace; return the count."""
        return self._base.state_delete(
            self._execution_id, _coerce_ns(ns), keys, start=start, end=end, shard_key=self._shard_key
        )

    def execution_clear(self) -> int:
        """Delete every state, log and counter row of this execution; return the count."""
        return self._base.execution_clear(self._execution_id, shard_key=self._shard_key)

    def state_append(self, ns: bytes | FrameworkNS, key: bytes, item: bytes) -> int:
        """Append to the ``(ns, key)`` log; return the ordinal (a retried call appends twice)."""
        return self._base.state_append(self._execution_id, _coerce_ns(ns), key, item, shard_key=self._shard_key)

    def state_log_scan(
        self,
        ns: bytes | FrameworkNS,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
    ) -> list[tuple[int, bytes]]:
        """``(id, value)`` entries of the ``(ns, key)`` log with ``id > after_id``."""
        return self._base.state_log_scan(
            self._execution_id, _coerce_ns(ns), key, after_id=after_id, limit=limit, shard_key=self._shard_key
        )

    # -- counters ------------------------------------------------------------------

    def counter_get(self, ns: bytes | FrameworkNS, key: bytes) -> int:
        """The counter's value (0 when absent)."""
        return self._base.state_counter_get(self._execution_id, _coerce_ns(ns), key, shard_key=self._shard_key)

    def counter_add(self, ns: bytes | FrameworkNS, key: bytes, delta: int) -> int:
        """Atomically add ``delta``; return the new value."""
        return self._base.state_counter_add(self._execution_id, _coerce_ns(ns), key, delta, shard_key=self._shard_key)

    def counter_set(self, ns: bytes | FrameworkNS, key: bytes, value: int) -> None:
        """Overwrite the counter."""
        self._base.state_counter_set(self._execution_id, _coerce_ns(ns), key, value, shard_key=self._shard_key)

    def counter_delete(self, ns: bytes | FrameworkNS, key: bytes) -> None:
        """Delete the counter (no-op when absent)."""
        self._base.state_counter_delete(self._execution_id, _coerce_ns(ns), key, shard_key=self._shard_key)

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def pack_int_key(i: int) -> bytes:
        """``i`` as 8 bytes, little-endian, signed: the canonical int key encoding.

        ``OverflowError`` outside the int64 range; ``TypeError`` for non-ints.
        Note: little-endian keys do not sort numerically in ``state_scan``.
        """
        return _as_int("i", i).to_bytes(8, "little", signed=True)

    @staticmethod
    def serialize_record_batch(batch: pa.RecordBatch) -> bytes:
        """``batch`` as Arrow IPC stream bytes (needs the ``[arrow]`` extra); ``TypeError`` for a non-batch."""
        return _arrow.serialize_record_batch(batch)

    @staticmethod
    def deserialize_record_batch(data: bytes) -> pa.RecordBatch:
        """The first record batch of Arrow IPC stream ``data`` (needs the ``[arrow]`` extra).

        ``TypeError`` for ``None``, a ``str`` or a path (pyarrow would open a local file).
        """
        return _arrow.deserialize_record_batch(data)
