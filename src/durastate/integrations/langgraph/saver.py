"""``DurastateSaver``: a LangGraph checkpointer on ``store.kv``, on any durastate URL.

Layout (all in one kv scope, ``name``, default ``b"langgraph"``): each
thread is one kv namespace, ``b"t:" + thread_id``, whose keys start with a
tag byte, so one thread's rows sort together and ``delete_thread`` is one
``kv.delete(..., all=True)``:

* ``n`` + checkpoint_ns: the thread's namespaces (a registry, value empty);
* ``c`` + checkpoint_ns + NUL + checkpoint_id: a checkpoint without its
  non-primitive channel values, with its metadata and parent id;
* ``b`` + checkpoint_ns + NUL + channel + NUL + version: one channel value
  at one version, stored once however many checkpoints use it (what
  PostgresSaver does; primitives - None, str, int, float, bool - stay
  inline in the checkpoint, as there);
* ``c`` + checkpoint_ns + NUL + checkpoint_id + NUL + task_id + NUL + idx:
  one pending write, right after its checkpoint in key order, so one range
  scan reads a checkpoint with its writes (and a reverse scan the newest
  checkpoints with theirs);
* ``r`` + run_id: the thread holds checkpoints of that run (for
  ``delete_for_runs``).

Namespace ``b"threads"`` of the same scope lists the thread ids, for
``list(None)`` and ``delete_for_runs``. Checkpoint ids are uuid6 strings,
so key order is creation order and ``list`` is a reverse range scan.

Values are LangGraph's serializer's output (``JsonPlusSerializer`` unless
``serde=`` says otherwise; pickle is never unpickled unless a serializer
built with ``pickle_fallback=True`` is passed), framed with msgpack.

Edge cases and choices:

* ``list``: newest first by checkpoint id; across namespaces (no
  ``checkpoint_ns`` in the config) and across threads (``config=None``) the
  per-namespace scans are merged, one range scan each. ``filter`` is
  containment on the metadata (nested dicts match partially, like
  PostgreSQL's ``@>``; other values by equality).
* ``put_writes``: a ``(task_id, idx)`` already stored is kept (first write
  wins), except for the special channels (errors, interrupts, ...), which
  replace, as in LangGraph's own savers.
* ``prune(strategy="keep_latest")`` keeps the newest checkpoint of every
  namespace with its writes and the channel values it uses; it refuses
  threads whose checkpoints carry DeltaChannel counters (their history
  lives in the pruned ancestors), like PostgresSaver.
* Thread ids are ``str(thread_id)``; a NUL character in a checkpoint
  namespace, channel or task id is refused with ``InvalidRequest``.
* Checkpoints written by format ``v < 4`` savers (pending sends kept in the
  parent's writes) never exist in a durastate store, so no migration of
  them is attempted.
"""

from __future__ import annotations

import heapq
import os
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from types import TracebackType
from typing import Any, NamedTuple

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...errors import InvalidRequest
from ...store import Store
from ...store import open as open_store
from ._async import AsyncBridge

__all__ = ["DurastateSaver"]

THREADS_NS = b"threads"
THREAD_NS_PREFIX = b"t:"
NAMESPACES = b"n"
CHECKPOINT = b"c"
BLOB = b"b"
CHECKPOINT_END = b"d"
RUN = b"r"
SEP = b"\x00"
# The first byte after SEP: a range [prefix + SEP, prefix + AFTER) holds exactly
# the keys that extend prefix + SEP.
AFTER = b"\x01"
# Reverse scans for the newest checkpoints: rows in the first page per
# checkpoint wanted (itself and a few writes), growing to MAX_PAGE.
ROWS_PER_CHECKPOINT = 4
FIRST_PAGE = 32
MAX_PAGE = 512
# Rows loaded per batch while listing (checkpoints whose values and writes are
# fetched together); alist hands pages of this size across threads.
LIST_BATCH = 64
PRIMITIVES = (str, int, float, bool)
DELTA_COUNTERS = "counters_since_delta_snapshot"
PRUNE_STRATEGIES = ("keep_latest", "delete")


def _pack(value: Any) -> bytes:
    return ormsgpack.packb(value)


def _unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data)


def _text(name: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidRequest(f"{name} must not contain a NUL character: {value!r:.80}")
    return value.encode()


class _Row(NamedTuple):
    """One stored checkpoint and its writes, not yet deserialized."""

    checkpoint_id: str
    thread_id: str
    checkpoint_ns: str
    parent_id: str | None
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    run_id: str | None
    delta: bool
    writes: list[bytes]


def _decode_row(thread_id: str, checkpoint_ns: str, checkpoint_id: bytes, value: bytes, writes: list[bytes]) -> _Row:
    parent_id, cp_type, cp_bytes, md_type, md_bytes, run_id, delta = _unpack(value)
    return _Row(
        checkpoint_id.decode(),
        thread_id,
        checkpoint_ns,
        parent_id,
        (cp_type, cp_bytes),
        (md_type, md_bytes),
        run_id,
        delta,
        writes,
    )


def _contains(document: Any, wanted: Any) -> bool:
    """PostgreSQL ``@>`` for metadata filters: dicts partially, the rest by equality."""
    if isinstance(wanted, Mapping):
        return isinstance(document, Mapping) and all(
            key in document and _contains(document[key], value) for key, value in wanted.items()
        )
    return bool(document == wanted)


class DurastateSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer (sync and async) on a durastate store.

    ``DurastateSaver(store)`` uses an open store (the caller closes it);
    ``DurastateSaver.from_url(url, **open_options)`` opens one and closes it
    with the saver. ``name`` is the kv scope holding every row (several
    savers can share a store under different names). Use as a context
    manager (sync or async) or call ``close()``.
    """

    def __init__(self, store: Store, *, serde: SerializerProtocol | None = None, name: str = "langgraph") -> None:
        if not isinstance(store, Store):
            raise InvalidRequest(f"store must be a durastate.Store, got {type(store).__name__}")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"name must be a non-empty str, got {name!r}")
        super().__init__(serde=serde)
        self.store = store
        self.name = name
        self._kv = store.kv
        self._scope = name.encode()
        self._owns_store = False
        self._bridge = AsyncBridge(f"durastate-langgraph-{name}")

    @classmethod
    def from_url(
        cls,
        url: str | os.PathLike[str] | None = None,
        *,
        serde: SerializerProtocol | None = None,
        name: str = "langgraph",
        **open_options: Any,
    ) -> DurastateSaver:
        """Open ``url`` (any ``durastate.open`` URL and options); closing the saver closes it."""
        store = open_store(url, **open_options)
        try:
            saver = cls(store, serde=serde, name=name)
        except BaseException:
            store.close()
            raise
        saver._owns_store = True
        return saver

    def close(self) -> None:
        """Stop the async pool; close the store if ``from_url`` opened it. Idempotent."""
        self._bridge.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> DurastateSaver:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> DurastateSaver:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._bridge_close()

    async def _bridge_close(self) -> None:
        # Closing waits for calls in flight: not on the event loop's thread.
        import asyncio

        await asyncio.to_thread(self.close)

    # -- addresses -------------------------------------------------------------

    def _thread_ns(self, thread_id: str) -> bytes:
        return THREAD_NS_PREFIX + thread_id.encode()

    @staticmethod
    def _configurable(config: Any) -> Mapping[str, Any]:
        if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
            raise InvalidRequest(f"config must be a RunnableConfig with a 'configurable' dict, got {config!r:.120}")
        configurable: Mapping[str, Any] = config["configurable"]
        if configurable.get("thread_id") is None:
            raise InvalidRequest("config['configurable'] needs a 'thread_id'")
        return configurable

    def _address(self, config: Any) -> tuple[str, str, bytes, str | None]:
        """(thread_id, checkpoint_ns, encoded checkpoint_ns, checkpoint_id or None)."""
        configurable = self._configurable(config)
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable.get("checkpoint_ns") or ""
        ns = _text("checkpoint_ns", checkpoint_ns)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is not None and not isinstance(checkpoint_id, str):
            raise InvalidRequest(f"checkpoint_id must be a str, got {type(checkpoint_id).__name__}")
        return thread_id, checkpoint_ns, ns, checkpoint_id

    def _threads(self) -> list[str]:
        return [key.decode() for key, _ in self._kv.scan(self._scope, THREADS_NS)]

    def _namespaces(self, tns: bytes) -> list[str]:
        return [key[1:].decode() for key, _ in self._kv.scan(self._scope, tns, start=NAMESPACES, end=b"o")]

    # -- put ---------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` (a child of ``config``'s checkpoint, if any); return its config."""
        thread_id, checkpoint_ns, ns, parent_id = self._address(config)
        if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("id"), str):
            raise InvalidRequest("checkpoint must be a Checkpoint dict with a str 'id'")
        checkpoint_id = checkpoint["id"]
        _text("checkpoint id", checkpoint_id)
        serde = self.serde
        skeleton = dict(checkpoint)
        inline = dict(checkpoint["channel_values"])
        skeleton["channel_values"] = inline
        rows: list[tuple[bytes, bytes]] = []
        for channel, version in new_versions.items():
            if channel in inline and not (inline[channel] is None or isinstance(inline[channel], PRIMITIVES)):
                blob = serde.dumps_typed(inline.pop(channel))
                rows.append((BLOB + ns + SEP + _text("channel", channel) + SEP + str(version).encode(), _pack(blob)))
        for channel in [c for c, v in inline.items() if not (v is None or isinstance(v, PRIMITIVES))]:
            del inline[channel]  # stored with the version that set it
        stored_metadata = get_serializable_checkpoint_metadata(config, metadata)
        run_id = stored_metadata.get("run_id")
        run_id = str(run_id) if run_id is not None else None
        envelope = (
            parent_id,
            *serde.dumps_typed(skeleton),
            *serde.dumps_typed(stored_metadata),
            run_id,
            DELTA_COUNTERS in stored_metadata,
        )
        rows.append((NAMESPACES + ns, b""))
        if run_id is not None:
            rows.append((RUN + run_id.encode(), b""))
        rows.append((CHECKPOINT + ns + SEP + checkpoint_id.encode(), _pack(envelope)))
        # The registry first: a thread listed without rows is harmless, rows
        # of an unlisted thread would be missed by list(None).
        self._kv.put(self._scope, THREADS_NS, thread_id.encode(), b"")
        self._kv.put_many(self._scope, self._thread_ns(thread_id), rows)
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against ``config``'s checkpoint (first write of an index wins)."""
        thread_id, _, ns, checkpoint_id = self._address(config)
        if checkpoint_id is None:
            raise InvalidRequest("put_writes needs config['configurable']['checkpoint_id']")
        prefix = CHECKPOINT + ns + SEP + checkpoint_id.encode() + SEP + _text("task_id", task_id) + SEP
        if not isinstance(task_path, str):
            raise InvalidRequest(f"task_path must be a str, got {type(task_path).__name__}")
        dumps = self.serde.dumps_typed
        rows = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            rows.append((prefix + str(idx).encode(), _pack((task_id, task_path, channel, idx, *dumps(value)))))
        if not rows:
            return
        kv, scope, tns = self._kv, self._scope, self._thread_ns(thread_id)
        if all(channel in WRITES_IDX_MAP for channel, _ in writes):
            kv.put_many(scope, tns, rows)
            return
        with self.store.transaction():
            present = kv.get_many(scope, tns, [key for key, _ in rows])
            missing = [row for row, old in zip(rows, present, strict=True) if old is None]
            if missing:
                kv.put_many(scope, tns, missing)

    # -- read ------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the namespace's latest without a checkpoint_id."""
        thread_id, checkpoint_ns, _, checkpoint_id = self._address(config)
        if checkpoint_id is None:
            row = next(self._rows_desc(thread_id, checkpoint_ns, None, 1), None)
        else:
            row = self._row(thread_id, checkpoint_ns, checkpoint_id)
        return None if row is None else self._load(thread_id, [row])[0]

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of a namespace, a thread (no checkpoint_ns) or all (``None``)."""
        if filter is not None and not isinstance(filter, Mapping):
            raise InvalidRequest(f"filter must be a dict, got {type(filter).__name__}")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidRequest(f"limit must be an int >= 0 or None, got {limit!r}")
        before_id = get_checkpoint_id(before) if before is not None else None
        if before_id is not None:
            _text("before checkpoint_id", before_id)
        only_id: str | None = None
        if config is None:
            sources = [(t, n) for t in self._threads() for n in self._namespaces(self._thread_ns(t))]
        else:
            thread_id, checkpoint_ns, _, only_id = self._address(config)
            if config["configurable"].get("checkpoint_ns") is not None:
                sources = [(thread_id, checkpoint_ns)]
            else:
                sources = [(thread_id, n) for n in self._namespaces(self._thread_ns(thread_id))]
        return self._list(sources, filter or None, before_id, only_id, limit)

    def _list(
        self,
        sources: list[tuple[str, str]],
        filter: Mapping[str, Any] | None,
        before_id: str | None,
        only_id: str | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        if limit == 0:
            return
        # Without a filter no source can contribute more than `limit` rows.
        most = limit if not filter else None
        rows: Iterator[_Row]
        if only_id is not None:
            found = (self._row(t, n, only_id) for t, n in sources if before_id is None or only_id < before_id)
            rows = (row for row in found if row is not None)
        else:
            rows = heapq.merge(
                *(self._rows_desc(t, n, before_id, most) for t, n in sources),
                key=lambda row: row.checkpoint_id,
                reverse=True,
            )
        if filter:
            loads = self.serde.loads_typed
            rows = (row for row in rows if _contains(loads(row.metadata), filter))
        if limit is not None:
            rows = islice(rows, limit)
        while batch := list(islice(rows, LIST_BATCH if limit is None else min(limit, LIST_BATCH))):
            by_thread: dict[str, list[_Row]] = {}
            for row in batch:
                by_thread.setdefault(row.thread_id, []).append(row)
            loaded = {}
            for thread_id, thread_rows in by_thread.items():
                for row, tup in zip(thread_rows, self._load(thread_id, thread_rows), strict=True):
                    loaded[id(row)] = tup
            for row in batch:
                yield loaded[id(row)]

    def _row(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> _Row | None:
        """One checkpoint with its writes: one range scan (the writes' keys extend the checkpoint's)."""
        head = CHECKPOINT + checkpoint_ns.encode() + SEP + checkpoint_id.encode()
        found = list(self._kv.scan(self._scope, self._thread_ns(thread_id), start=head, end=head + AFTER))
        if not found or found[0][0] != head:
            return None
        return _decode_row(thread_id, checkpoint_ns, checkpoint_id.encode(), found[0][1], [v for _, v in found[1:]])

    def _rows_desc(self, thread_id: str, checkpoint_ns: str, before_id: str | None, most: int | None) -> Iterator[_Row]:
        """A namespace's checkpoints newest first, each with its writes, from one reverse scan.

        Read in pages that start small (``most`` checkpoints with a few
        writes each fit in the first) and double, so ``limit=1`` reads a
        handful of rows, not a thread's history.
        """
        kv, scope, tns = self._kv, self._scope, self._thread_ns(thread_id)
        prefix = CHECKPOINT + checkpoint_ns.encode() + SEP
        end = prefix + before_id.encode() if before_id is not None else CHECKPOINT + checkpoint_ns.encode() + AFTER
        page = min(MAX_PAGE, FIRST_PAGE if most is None else most * ROWS_PER_CHECKPOINT)
        skip = len(prefix)
        writes: list[bytes] = []
        writes_of = b""
        while True:
            got = list(kv.scan(scope, tns, start=prefix, end=end, reverse=True, limit=page))
            for key, value in got:
                checkpoint_id, is_write, _ = key[skip:].partition(SEP)
                if is_write:
                    if checkpoint_id != writes_of:
                        writes, writes_of = [], checkpoint_id
                    writes.append(value)
                else:
                    yield _decode_row(
                        thread_id, checkpoint_ns, checkpoint_id, value, writes if writes_of == checkpoint_id else []
                    )
                    writes, writes_of = [], b""
            if len(got) < page:
                return
            end = got[-1][0]
            page = min(MAX_PAGE, page * 2)

    def _load(self, thread_id: str, rows: list[_Row]) -> list[CheckpointTuple]:
        """Tuples for rows of one thread; all their channel values in one read."""
        kv, scope, tns, loads = self._kv, self._scope, self._thread_ns(thread_id), self.serde.loads_typed
        skeletons = [loads(row.checkpoint) for row in rows]
        blob_keys: dict[bytes, None] = {}
        wanted: list[list[tuple[str, bytes]]] = []
        for row, skeleton in zip(rows, skeletons, strict=True):
            head = BLOB + row.checkpoint_ns.encode() + SEP
            inline = skeleton["channel_values"]
            needs = [
                (channel, head + channel.encode() + SEP + str(version).encode())
                for channel, version in skeleton["channel_versions"].items()
                if channel not in inline
            ]
            wanted.append(needs)
            for _, key in needs:
                blob_keys[key] = None
        keys = list(blob_keys)
        if len(keys) == 1:  # the common case: one channel changed (kv.get is the cheaper statement)
            blobs = {keys[0]: kv.get(scope, tns, keys[0])}
        else:
            blobs = dict(zip(keys, kv.get_many(scope, tns, keys), strict=True)) if keys else {}
        result = []
        for row, skeleton, needs in zip(rows, skeletons, wanted, strict=True):
            values = skeleton["channel_values"]
            for channel, key in needs:
                blob = blobs.get(key)
                if blob is not None:
                    blob_type, blob_bytes = _unpack(blob)
                    if blob_type != "empty":
                        values[channel] = loads((blob_type, blob_bytes))
            configurable = {"thread_id": thread_id, "checkpoint_ns": row.checkpoint_ns}
            parent = (
                {"configurable": {**configurable, "checkpoint_id": row.parent_id}}
                if row.parent_id is not None
                else None
            )
            result.append(
                CheckpointTuple(
                    {"configurable": {**configurable, "checkpoint_id": row.checkpoint_id}},
                    skeleton,
                    loads(row.metadata),
                    parent,  # type: ignore[arg-type]
                    self._pending_writes(row.writes),
                )
            )
        return result

    def _pending_writes(self, stored: list[bytes]) -> list[PendingWrite]:
        """Stored writes as ``(task_id, channel, value)``, in ``writes_sort_key`` order."""
        if not stored:
            return []
        loads = self.serde.loads_typed
        unpacked = sorted((_unpack(value) for value in stored), key=lambda w: writes_sort_key(w[1], w[0], w[3]))
        return [(task_id, channel, loads((t, b))) for task_id, _, channel, _, t, b in unpacked]

    # -- deletion and copies ---------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of ``thread_id`` (all namespaces)."""
        thread_id = str(thread_id)
        with self.store.transaction():
            self._kv.delete(self._scope, self._thread_ns(thread_id), all=True)
            self._kv.delete(self._scope, THREADS_NS, keys=[thread_id.encode()])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread onto another (which keeps its own)."""
        source, target = str(source_thread_id), str(target_thread_id)
        if source == target:
            raise InvalidRequest(f"copy_thread needs two different threads, got {source!r} twice")
        with self.store.transaction():
            rows = list(self._kv.scan(self._scope, self._thread_ns(source)))
            if not rows:
                return
            self._kv.put(self._scope, THREADS_NS, target.encode(), b"")
            self._kv.put_many(self._scope, self._thread_ns(target), rows)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (with their writes) that the given runs created, in every thread."""
        if isinstance(run_ids, (str, bytes)) or not isinstance(run_ids, Iterable):
            raise InvalidRequest(f"run_ids must be a list of str, got {type(run_ids).__name__}")
        runs = {str(run_id) for run_id in run_ids}
        if not runs:
            return
        markers = [RUN + run.encode() for run in sorted(runs)]
        with self.store.transaction():
            for thread_id in self._threads():
                tns = self._thread_ns(thread_id)
                present = [
                    key
                    for key, found in zip(markers, self._kv.get_many(self._scope, tns, markers), strict=True)
                    if found is not None
                ]
                if not present:
                    continue
                doomed = [row for row in self._thread_rows(thread_id) if row.run_id in runs]
                self._delete_checkpoints(tns, doomed)
                self._kv.delete(self._scope, tns, keys=present)
                for checkpoint_ns in {row.checkpoint_ns for row in doomed}:
                    self._collect_blobs(thread_id, checkpoint_ns)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: only each namespace's newest checkpoint survives; ``delete``: the threads go."""
        if strategy not in PRUNE_STRATEGIES:
            raise InvalidRequest(f"strategy must be one of {PRUNE_STRATEGIES}, got {strategy!r}")
        if isinstance(thread_ids, (str, bytes)) or not isinstance(thread_ids, Iterable):
            raise InvalidRequest(f"thread_ids must be a list of str, got {type(thread_ids).__name__}")
        threads = list(dict.fromkeys(str(t) for t in thread_ids))
        with self.store.transaction():
            if strategy == "delete":
                for thread_id in threads:
                    self.delete_thread(thread_id)
                return
            plans = []
            for thread_id in threads:
                rows = self._thread_rows(thread_id)
                if any(row.delta for row in rows):
                    raise InvalidRequest(
                        f"keep_latest can't prune thread {thread_id!r}: it uses a DeltaChannel, whose values "
                        "are rebuilt from the ancestors pruning would delete"
                    )
                plans.append((thread_id, rows))
            for thread_id, rows in plans:
                latest: dict[str, str] = {}
                for row in rows:
                    if row.checkpoint_id > latest.get(row.checkpoint_ns, ""):
                        latest[row.checkpoint_ns] = row.checkpoint_id
                doomed = [row for row in rows if row.checkpoint_id != latest[row.checkpoint_ns]]
                if doomed:
                    self._delete_checkpoints(self._thread_ns(thread_id), doomed)
                    for checkpoint_ns in {row.checkpoint_ns for row in doomed}:
                        self._collect_blobs(thread_id, checkpoint_ns)

    def _thread_rows(self, thread_id: str) -> list[_Row]:
        """Every checkpoint of a thread, every namespace, without its writes (one range scan)."""
        rows = []
        for key, value in self._kv.scan(self._scope, self._thread_ns(thread_id), start=CHECKPOINT, end=CHECKPOINT_END):
            checkpoint_ns, _, rest = key[1:].partition(SEP)
            if SEP not in rest:
                rows.append(_decode_row(thread_id, checkpoint_ns.decode(), rest, value, []))
        return rows

    def _delete_checkpoints(self, tns: bytes, rows: list[_Row]) -> None:
        """Delete the checkpoints with their writes (the range their key starts)."""
        for row in rows:
            head = CHECKPOINT + row.checkpoint_ns.encode() + SEP + row.checkpoint_id.encode()
            self._kv.delete(self._scope, tns, start=head, end=head + AFTER)

    def _collect_blobs(self, thread_id: str, checkpoint_ns: str) -> None:
        """Delete the namespace's channel values no remaining checkpoint uses."""
        kv, scope, tns, loads = self._kv, self._scope, self._thread_ns(thread_id), self.serde.loads_typed
        head = BLOB + checkpoint_ns.encode() + SEP
        used = {
            head + channel.encode() + SEP + str(version).encode()
            for row in self._thread_rows(thread_id)
            if row.checkpoint_ns == checkpoint_ns
            for channel, version in loads(row.checkpoint)["channel_versions"].items()
        }
        garbage = [key for key, _ in kv.scan(scope, tns, start=head, end=head[:-1] + AFTER) if key not in used]
        if garbage:
            kv.delete(scope, tns, keys=garbage)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions sort as strings: a zero-padded counter, then a random tie-breaker (as PostgresSaver)."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # -- async: every method through the one bridge ------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._bridge.call(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        rows = await self._bridge.call(lambda: self.list(config, filter=filter, before=before, limit=limit))
        while batch := await self._bridge.call(lambda: list(islice(rows, LIST_BATCH))):
            for tup in batch:
                yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._bridge.call(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._bridge.call(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._bridge.call(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._bridge.call(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._bridge.call(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._bridge.call(self.prune, thread_ids, strategy=strategy)
