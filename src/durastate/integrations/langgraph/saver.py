"""``DurastateSaver``: a LangGraph checkpointer on ``store.kv``, on any durastate URL.

All rows live in one kv scope (``name``, default ``b"langgraph"``) and
namespace, each thread one key range, laid out as ``_layout`` describes (a
checkpoint, the channel values it introduced and its pending writes form
one key range; a value is stored once per version, by the checkpoint that
introduced it). A put is one row, one statement (plus a run marker the
first time this saver puts a run in a thread); checkpoint ids are uuid6
strings, so key order is creation order.

Values are LangGraph's serializer's output (``JsonPlusSerializer`` unless
``serde=`` says otherwise; pickle is never unpickled unless a serializer
built with ``pickle_fallback=True`` is passed), framed with msgpack.

Edge cases and choices:

* ``list``: newest first by checkpoint id; across namespaces (no
  ``checkpoint_ns`` in the config) and across threads (``config=None``)
  the per-namespace scans are merged (one scan per namespace: listing
  everything is O(threads)). ``filter`` is containment on the metadata
  (nested dicts match partially, like PostgreSQL's ``@>``; other values by
  equality).
* ``put_writes``: a ``(task_id, idx)`` already stored is kept (first write
  wins), except for the special channels (errors, interrupts, ...), which
  replace, as in LangGraph's own savers.
* ``prune(strategy="keep_latest")`` keeps the newest checkpoint of every
  namespace with its writes and the values it uses; it refuses threads
  whose checkpoints carry DeltaChannel counters (their history lives in the
  pruned ancestors), like PostgresSaver.
* Thread ids are ``str(thread_id)``; a NUL character in a thread id,
  checkpoint namespace, checkpoint id, channel, task id or task path is
  refused with ``InvalidRequest``.
* Run markers: a put skips the marker of a (thread, run) this saver has
  committed before; any delete of this saver forgets them.
  ``delete_for_runs`` deletes a run's checkpoints but keeps its markers, so
  a saver in another process still putting that run (its marker skipped)
  leaves checkpoints the next ``delete_for_runs`` finds. A run still
  putting into a thread that another saver deletes whole
  (``delete_thread``, ``prune(strategy="delete")``) leaves checkpoints
  that ``delete_for_runs`` of that run no longer finds (``delete_thread``
  does).
* Checkpoints written by format ``v < 4`` savers (pending sends kept in the
  parent's writes) never exist in a durastate store, so no migration of
  them is attempted.
* Async: each ``a*`` method runs its sync twin through durastate's one async
  path (``_bound``): inline on the event loop's thread on a SQLite file,
  writes in one transaction that a cancellation before the commit rolls
  back, ``alist`` an async generator over ``list``.
"""

from __future__ import annotations

import builtins
import heapq
import os
import random
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...errors import InvalidRequest
from ...store import Store
from ._bound import StoreBound
from ._layout import (
    AFTER,
    CHECKPOINT,
    CHECKPOINT_END,
    PRIMITIVES,
    RUN,
    SEP,
    Row,
    ThreadRows,
    checkpoint_key,
    contains,
    envelope,
    inline_value,
    namespaces,
    next_descending,
    pack,
    pending_writes,
    rows_ascending,
    rows_descending,
    text,
    thread_ids,
    unpack,
    value_key,
    with_homes,
)

__all__ = ["DurastateSaver"]

# Reverse scans for the newest checkpoints: rows in the first page per
# checkpoint wanted (itself, a value, a few writes), growing to MAX_PAGE.
ROWS_PER_CHECKPOINT = 5
# get_tuple's latest checkpoint: its row and two writes in the first page (a
# run's last checkpoint has none, an interrupted one a few); more go on in
# doubling pages. Each row read costs ~2,500 instructions to fetch (bench/RESULTS.md "lgpy2").
LATEST_PAGE = 3
FIRST_PAGE = 32
MAX_PAGE = 512
# Rows loaded per batch while listing.
LIST_BATCH = 64
DELTA_COUNTERS = "counters_since_delta_snapshot"
PRUNE_STRATEGIES = ("keep_latest", "delete")
# (thread, run) pairs remembered as marked, at most: past it, forget them all.
MAX_MARKED = 4096
# ThreadRows kept for reuse, at most (a thread's is built and its id checked once): past it, forget them all.
MAX_THREADS = 4096


class DurastateSaver(StoreBound, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer (sync and async) on a durastate store.

    ``DurastateSaver(store)`` uses an open store (the caller closes it);
    ``DurastateSaver.from_url(url, **open_options)`` opens one and closes it
    with the saver. ``name`` is the kv scope holding every row (several
    savers can share a store under different names). Use as a context
    manager (sync or async) or call ``close()``.
    """

    def __init__(self, store: Store, *, serde: SerializerProtocol | None = None, name: str = "langgraph") -> None:
        self._bind(store, name, "langgraph")
        super().__init__(serde=serde)
        self.name = name
        self._kv = store.kv
        self._scope = name.encode()
        # (thread, run) pairs whose run marker this saver has committed: a put
        # of a marked run writes only its checkpoint row. Forgotten whenever
        # this saver deletes (delete_thread, delete_for_runs, prune).
        self._marked: dict[tuple[str, str], None] = {}
        self._thread_rows_of: dict[str, ThreadRows] = {}

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
        return cls.opened(url, open_options, serde=serde, name=name)

    # -- addresses -------------------------------------------------------------

    def _thread(self, thread_id: str) -> ThreadRows:
        """The thread's ``ThreadRows`` (its id checked when first built), reused across calls."""
        thread = self._thread_rows_of.get(thread_id)
        if thread is None:
            thread = ThreadRows(self._kv, self._scope, thread_id)
            if len(self._thread_rows_of) >= MAX_THREADS:
                self._thread_rows_of.clear()
            self._thread_rows_of[thread_id] = thread
        return thread

    @staticmethod
    def _configurable(config: Any) -> Mapping[str, Any]:
        if not _is_mapping(config) or not _is_mapping(config.get("configurable")):
            raise InvalidRequest(f"config must be a RunnableConfig with a 'configurable' dict, got {config!r:.120}")
        configurable: Mapping[str, Any] = config["configurable"]
        if configurable.get("thread_id") is None:
            raise InvalidRequest("config['configurable'] needs a 'thread_id'")
        return configurable

    def _address(self, config: Any) -> tuple[str, str, bytes, str | None]:
        """(thread_id, checkpoint_ns, encoded checkpoint_ns, checkpoint_id or None)."""
        # The common case (dicts, a thread id) checked inline; _configurable checks the rest and explains.
        configurable = config.get("configurable") if type(config) is dict else None
        if type(configurable) is not dict or configurable.get("thread_id") is None:
            configurable = self._configurable(config)
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable.get("checkpoint_ns") or ""
        ns = text("checkpoint_ns", checkpoint_ns) if checkpoint_ns else b""
        checkpoint_id = configurable.get("checkpoint_id")  # get_checkpoint_id(config)
        if checkpoint_id is not None and not isinstance(checkpoint_id, str):
            raise InvalidRequest(f"checkpoint_id must be a str, got {type(checkpoint_id).__name__}")
        return thread_id, checkpoint_ns, ns, checkpoint_id

    def _threads(self) -> builtins.list[str]:
        return builtins.list(thread_ids(self._kv, self._scope))

    def _namespaces(self, thread: ThreadRows) -> builtins.list[str]:
        return builtins.list(namespaces(thread))

    def _loads(self, typed: tuple[str, bytes]) -> Any:
        """The serializer's ``loads_typed``, with a durastate error for pickled data it refuses."""
        try:
            return self.serde.loads_typed(typed)
        except NotImplementedError:
            if typed[0] == "pickle":
                raise InvalidRequest(
                    "this checkpoint holds pickled data, which is never unpickled by default; only if you trust "
                    "the store, read it with serde=JsonPlusSerializer(pickle_fallback=True)"
                ) from None
            raise

    # -- put ---------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` (a child of ``config``'s checkpoint, if any); return its config."""
        stored, marked = self._put(config, checkpoint, metadata, new_versions)
        if marked is not None and not self.store.engine.in_transaction():
            self._mark(marked)  # committed: an enclosing transaction could still roll it back
        return stored

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[RunnableConfig, tuple[str, str] | None]:
        """``put``, and the (thread, run) whose marker it wrote, if it wrote one.

        One row (the envelope with the values this checkpoint introduced) in
        one statement, and a run marker the first time this saver puts a
        checkpoint of a run in a thread.
        """
        thread_id, checkpoint_ns, ns, parent_id = self._address(config)
        if (type(checkpoint) is not dict and not _is_mapping(checkpoint)) or not isinstance(checkpoint.get("id"), str):
            raise InvalidRequest("checkpoint must be a Checkpoint dict with a str 'id'")
        checkpoint_id = checkpoint["id"]
        text("checkpoint id", checkpoint_id)
        key = checkpoint_key(ns, checkpoint_id)
        if type(new_versions) is not dict and not _is_mapping(new_versions):
            raise InvalidRequest(f"new_versions must be a dict, got {type(new_versions).__name__}")
        primitives: dict[str, Any] = {}
        stored_here: dict[str, Any] = {}
        for channel, value in checkpoint["channel_values"].items():
            if value is None or isinstance(value, PRIMITIVES):
                primitives[channel] = value
            else:
                text("channel", channel)
                stored_here[channel] = value
        skeleton = dict(checkpoint)
        skeleton["channel_values"] = primitives
        versions = checkpoint["channel_versions"]
        # Values whose version is not new here live with an ancestor: find
        # which one through the parent (the fallback stores them here).
        inherited = [c for c in stored_here if c not in new_versions]
        homes: dict[str, str] = {}
        thread = self._thread(thread_id)
        stored_metadata = get_serializable_checkpoint_metadata(config, metadata)
        run_id = stored_metadata.get("run_id")
        run_id = str(run_id) if run_id is not None else None
        marked = (thread_id, run_id) if run_id is not None and (thread_id, run_id) not in self._marked else None

        # Reading the parent and writing must see one state: a transaction then
        # (else the one statement, or put_many's own transaction, is enough).
        if inherited:
            with self.store.transaction():
                if parent_id is not None:
                    self._inherit(thread, checkpoint_ns, ns, parent_id, inherited, versions, homes, stored_here)
                self._put_row(thread, key, marked, parent_id, skeleton, stored_metadata, run_id, homes, stored_here)
        else:
            self._put_row(thread, key, marked, parent_id, skeleton, stored_metadata, run_id, homes, stored_here)
        stored: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}
        }
        return stored, marked

    def _inherit(
        self,
        thread: ThreadRows,
        checkpoint_ns: str,
        ns: bytes,
        parent_id: str,
        inherited: builtins.list[str],
        versions: ChannelVersions,
        homes: dict[str, str],
        stored_here: dict[str, Any],
    ) -> None:
        """Move to ``homes`` the ``inherited`` channels whose value the parent (or its home) keeps at this version."""
        found = thread.get(checkpoint_key(ns, parent_id))
        if found is None:
            return
        parent = self._decode(thread.thread_id, checkpoint_ns, parent_id, found)
        parent_versions = self._loads(parent.checkpoint)["channel_versions"]
        for channel in inherited:
            if channel in parent_versions and parent_versions[channel] == versions.get(channel):
                homes[channel] = parent.homes.get(channel, parent_id)
                del stored_here[channel]

    def _put_row(
        self,
        thread: ThreadRows,
        key: bytes,
        marked: tuple[str, str] | None,
        parent_id: str | None,
        skeleton: dict[str, Any],
        metadata: CheckpointMetadata,
        run_id: str | None,
        homes: dict[str, str],
        stored_here: dict[str, Any],
    ) -> None:
        """Write a checkpoint's row (its envelope, with the values ``stored_here``) and the run marker if ``marked``."""
        dumps = self.serde.dumps_typed
        versions = skeleton["channel_versions"]
        value = envelope(
            parent_id,
            dumps(skeleton),
            dumps(metadata),
            run_id,
            DELTA_COUNTERS in metadata,
            homes,
            {c: (str(versions.get(c, "")), *dumps(v)) for c, v in stored_here.items()},
        )
        if marked is not None:
            thread.put_many([(RUN + marked[1].encode(), b""), (key, value)])
        else:
            thread.put(key, value)

    def _mark(self, marked: tuple[str, str]) -> None:
        """Remember that a (thread, run) marker is committed, so later puts of that run skip it."""
        if len(self._marked) >= MAX_MARKED:
            self._marked.clear()
        self._marked[marked] = None

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
        # The common cases inline (a known thread, str ids without NUL): a Python call is a
        # measurable share of a put_writes (bench/RESULTS.md "lgwrites"); ``_thread`` and ``text``
        # build, check and refuse everything else.
        thread = self._thread_rows_of.get(thread_id) or self._thread(thread_id)
        path = (
            task_path.encode() if type(task_path) is str and "\x00" not in task_path else text("task_path", task_path)
        )
        task = task_id.encode() if type(task_id) is str and "\x00" not in task_id else text("task_id", task_id)
        thread.put_writes(ns, checkpoint_id.encode(), path, task, writes, self.serde.dumps_typed)

    # -- read ------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the namespace's latest without a checkpoint_id."""
        thread_id, checkpoint_ns, _, checkpoint_id = self._address(config)
        if checkpoint_id is None:
            row = self._latest(thread_id, checkpoint_ns)
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
            # LangGraph's savers disagree on a negative limit (SqliteSaver: no limit; InMemorySaver: nothing;
            # PostgresSaver: an error): refused rather than guessed.
            raise InvalidRequest(f"limit must be an int >= 0, or None for no limit, got {limit!r}")
        before_id = get_checkpoint_id(before) if before is not None else None
        if before_id is not None:
            text("before checkpoint_id", before_id)
        only_id: str | None = None
        if config is None:
            sources = [(t, n) for t in self._threads() for n in self._namespaces(self._thread(t))]
        else:
            thread_id, checkpoint_ns, _, only_id = self._address(config)
            if config["configurable"].get("checkpoint_ns") is not None:
                sources = [(thread_id, checkpoint_ns)]
            else:
                sources = [(thread_id, n) for n in self._namespaces(self._thread(thread_id))]
        return self._list(sources, filter or None, before_id, only_id, limit)

    def _list(
        self,
        sources: builtins.list[tuple[str, str]],
        filter: Mapping[str, Any] | None,
        before_id: str | None,
        only_id: str | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        if limit == 0:
            return
        # Without a filter no source can contribute more than `limit` rows.
        most = limit if not filter else None
        rows: Iterator[Row]
        if only_id is not None:
            found = (self._row(t, n, only_id) for t, n in sources if before_id is None or only_id < before_id)
            rows = (row for row in found if row is not None)
        elif len(sources) == 1:
            rows = self._rows_desc(*sources[0], before_id, most)
        else:
            rows = heapq.merge(
                *(self._rows_desc(t, n, before_id, most) for t, n in sources),
                key=lambda row: row.checkpoint_id,
                reverse=True,
            )
        if filter:
            loads = self._loads
            rows = (row for row in rows if contains(loads(row.metadata), filter))
        if limit is not None:
            rows = islice(rows, limit)
        while batch := builtins.list(islice(rows, LIST_BATCH if limit is None else min(limit, LIST_BATCH))):
            if len(sources) == 1:
                yield from self._load(batch[0].thread_id, batch)
                continue
            by_thread: dict[str, builtins.list[Row]] = {}
            for row in batch:
                by_thread.setdefault(row.thread_id, []).append(row)
            loaded = {}
            for thread_id, thread_rows in by_thread.items():
                for row, tup in zip(thread_rows, self._load(thread_id, thread_rows), strict=True):
                    loaded[id(row)] = tup
            for row in batch:
                yield loaded[id(row)]

    def _decode(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, value: bytes) -> Row:
        return rows_ascending_one(thread_id, checkpoint_ns, checkpoint_id, value)

    def _row(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> Row | None:
        """One checkpoint with its values and writes: one range scan."""
        head = checkpoint_key(checkpoint_ns.encode(), checkpoint_id)
        found = self._thread(thread_id).scan(head, head + AFTER)
        return next(rows_ascending(thread_id, found), None)

    def _rows_desc(self, thread_id: str, checkpoint_ns: str, before_id: str | None, most: int | None) -> Iterator[Row]:
        """A namespace's checkpoints newest first, with values and writes, from one reverse scan.

        Read in pages that start small (``most`` checkpoints with their rows
        usually fit in the first) and double, so ``limit=1`` reads a
        handful of rows, not a thread's history.
        """
        page = min(MAX_PAGE, FIRST_PAGE if most is None else most * ROWS_PER_CHECKPOINT)
        thread, prefix, end, first = self._first_page(thread_id, checkpoint_ns, before_id, page)
        skip = thread.prefix_size + len(prefix)
        return rows_descending(thread_id, checkpoint_ns, skip, self._pages(thread, prefix, end, first, page))

    def _latest(self, thread_id: str, checkpoint_ns: str) -> Row | None:
        """``next(self._rows_desc(thread_id, checkpoint_ns, None, 1), None)``, without a generator when the first
        page holds the newest checkpoint (it usually does: a generator left suspended costs its close).
        """
        thread, prefix, end, first = self._first_page(thread_id, checkpoint_ns, None, LATEST_PAGE)
        skip = thread.prefix_size + len(prefix)
        row = next_descending(thread_id, checkpoint_ns, skip, iter(first))
        if row is None and len(first) == LATEST_PAGE:
            # The newest checkpoint's rows go on past the first page.
            pages = self._pages(thread, prefix, end, first, LATEST_PAGE)
            row = next(rows_descending(thread_id, checkpoint_ns, skip, pages), None)
        return row

    def _first_page(
        self, thread_id: str, checkpoint_ns: str, before_id: str | None, page: int
    ) -> tuple[ThreadRows, bytes, bytes, builtins.list[tuple[bytes, bytes]]]:
        """(thread, the namespace's checkpoint key prefix, the scan's end, its reverse scan's first ``page`` rows)."""
        thread = self._thread(thread_id)
        ns = checkpoint_ns.encode()
        prefix = CHECKPOINT + ns + SEP
        end = prefix + before_id.encode() if before_id is not None else CHECKPOINT + ns + AFTER
        return thread, prefix, end, builtins.list(thread.scan_absolute(prefix, end, reverse=True, limit=page))

    @staticmethod
    def _pages(
        thread: ThreadRows, prefix: bytes, end: bytes, first: builtins.list[tuple[bytes, bytes]], page: int
    ) -> Iterable[tuple[bytes, bytes]]:
        """The reverse scan's rows from its ``first`` page on; a first page short of full is the whole range."""
        if len(first) < page:
            return first  # no pager (a generator left suspended costs its close)

        def pages(got: builtins.list[tuple[bytes, bytes]], page: int, end: bytes) -> Iterator[tuple[bytes, bytes]]:
            while True:
                yield from got
                if len(got) < page:
                    return
                end = got[-1][0][thread.prefix_size :]
                page = min(MAX_PAGE, page * 2)
                got = builtins.list(thread.scan_absolute(prefix, end, reverse=True, limit=page))

        return pages(first, page, end)

    def _load(self, thread_id: str, rows: builtins.list[Row]) -> builtins.list[CheckpointTuple]:
        """Tuples for rows of one thread; values kept by ancestors in one read."""
        try:
            return self._load_rows(thread_id, rows, self.serde.loads_typed)
        except NotImplementedError as exc:
            if str(exc).endswith("pickle"):
                self._loads(("pickle", b""))  # raises the explanation
            raise

    def _load_rows(
        self, thread_id: str, rows: builtins.list[Row], loads: Callable[[tuple[str, bytes]], Any]
    ) -> builtins.list[CheckpointTuple]:
        skeletons = [loads(row.checkpoint) for row in rows]
        # A value kept by another checkpoint (its home) is in that checkpoint's
        # envelope, or in a value row of its own (older puts, moved values).
        elsewhere: dict[bytes, None] = {}
        for row, skeleton in zip(rows, skeletons, strict=True):
            if not row.homes:
                continue
            ns = row.checkpoint_ns.encode()
            for channel, home in row.homes.items():
                if channel in skeleton["channel_versions"]:
                    elsewhere[value_key(ns, home, channel)] = None
                    elsewhere[checkpoint_key(ns, home)] = None
        far: dict[bytes, bytes | None] = {}
        if elsewhere:
            keys = builtins.list(elsewhere)
            far = dict(zip(keys, self._thread(thread_id).get_many(keys), strict=True))
        result = []
        for row, skeleton in zip(rows, skeletons, strict=True):
            values = skeleton["channel_values"]
            versions = skeleton["channel_versions"]
            for channel, (_, value_type, value_bytes) in row.inline.items():
                if channel in versions and channel not in values:
                    values[channel] = loads((value_type, value_bytes))
            for channel, stored in row.values.items() if row.values else ():
                version, value_type, value_bytes = unpack(stored)
                # A checkpoint put again under its id may have left a value it no longer has.
                if channel in versions and version == str(versions[channel]) and channel not in values:
                    values[channel] = loads((value_type, value_bytes))
            for channel, home in row.homes.items() if row.homes else ():
                if channel not in versions:
                    continue
                ns = row.checkpoint_ns.encode()
                stored_far = far.get(value_key(ns, home, channel))
                found = unpack(stored_far) if stored_far is not None else None
                home_row = far.get(checkpoint_key(ns, home))
                if found is None and home_row is not None:
                    found = inline_value(home_row, channel)
                if found is not None:
                    values[channel] = loads((found[1], found[2]))
            configurable = {"thread_id": thread_id, "checkpoint_ns": row.checkpoint_ns}
            parent = (
                {"configurable": {**configurable, "checkpoint_id": row.parent_id}}
                if row.parent_id is not None
                else None
            )
            writes: builtins.list[PendingWrite] = pending_writes(row.writes, loads) if row.writes else []
            result.append(
                CheckpointTuple(
                    {"configurable": {**configurable, "checkpoint_id": row.checkpoint_id}},
                    skeleton,
                    loads(row.metadata),
                    parent,  # type: ignore[arg-type]
                    writes,
                )
            )
        return result

    # -- deletion and copies ---------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of ``thread_id`` (all namespaces)."""
        thread_id = str(thread_id)
        try:
            self._thread(thread_id).delete_range()
        finally:
            self._marked.clear()

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread onto another (which keeps its own)."""
        source, target = str(source_thread_id), str(target_thread_id)
        if source == target:
            raise InvalidRequest(f"copy_thread needs two different threads, got {source!r} twice")
        with self.store.transaction():
            rows = builtins.list(self._thread(source).scan())
            if rows:
                self._thread(target).put_many(rows)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (with their writes) that the given runs created, in every thread.

        Visits every thread (one indexed read each, more where a run wrote),
        so it costs O(threads); one transaction.
        """
        if isinstance(run_ids, (str, bytes)) or not isinstance(run_ids, Iterable):
            raise InvalidRequest(f"run_ids must be a list of str, got {type(run_ids).__name__}")
        runs = {str(run_id) for run_id in run_ids}
        if not runs:
            return
        markers = [RUN + run.encode() for run in sorted(runs)]
        try:
            self._delete_runs(runs, markers)
        finally:
            self._marked.clear()

    def _delete_runs(self, runs: set[str], markers: builtins.list[bytes]) -> None:
        with self.store.transaction():
            for thread_id in self._threads():
                thread = self._thread(thread_id)
                present = thread.get_many(markers)
                marked = [key for key, found in zip(markers, present, strict=True) if found is not None]
                if marked:
                    # The markers stay: another saver may be putting the run still, its marker skipped.
                    rows = self._thread_rows(thread_id)
                    self._delete_rows(
                        thread, rows, {(r.checkpoint_ns, r.checkpoint_id) for r in rows if r.run_id in runs}
                    )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: only each namespace's newest checkpoint survives; ``delete``: the threads go."""
        if strategy not in PRUNE_STRATEGIES:
            raise InvalidRequest(f"strategy must be one of {PRUNE_STRATEGIES}, got {strategy!r}")
        if isinstance(thread_ids, (str, bytes)) or not isinstance(thread_ids, Iterable):
            raise InvalidRequest(f"thread_ids must be a list of str, got {type(thread_ids).__name__}")
        threads = builtins.list(dict.fromkeys(str(t) for t in thread_ids))
        try:
            self._prune(threads, strategy)
        finally:
            self._marked.clear()

    def _prune(self, threads: builtins.list[str], strategy: str) -> None:
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
                doomed = {
                    (r.checkpoint_ns, r.checkpoint_id) for r in rows if r.checkpoint_id != latest[r.checkpoint_ns]
                }
                self._delete_rows(self._thread(thread_id), rows, doomed)

    def _thread_rows(self, thread_id: str) -> builtins.list[Row]:
        """Every checkpoint of a thread, every namespace, in key order (one range scan)."""
        found = self._thread(thread_id).scan(CHECKPOINT, CHECKPOINT_END)
        return builtins.list(rows_ascending(thread_id, found))

    def _delete_rows(self, thread: ThreadRows, rows: builtins.list[Row], doomed: set[tuple[str, str]]) -> None:
        """Delete the ``doomed`` checkpoints (with their values and writes).

        A survivor whose value a doomed checkpoint keeps gets the value
        first: the oldest such survivor stores it, later ones point to it.
        """
        if not doomed:
            return
        moved: dict[tuple[str, str, str], str] = {}  # (ns, old home, channel) -> new home
        by_id = {(row.checkpoint_ns, row.checkpoint_id): row for row in rows}
        for row in rows:  # ascending: the oldest survivor first
            if (row.checkpoint_ns, row.checkpoint_id) in doomed:
                continue
            ns = row.checkpoint_ns.encode()
            homes = dict(row.homes)
            for channel, home in row.homes.items():
                if (row.checkpoint_ns, home) not in doomed:
                    continue
                new_home = moved.get((row.checkpoint_ns, home, channel))
                if new_home is None:
                    stored = _stored_value(by_id.get((row.checkpoint_ns, home)), channel)
                    if stored is not None:
                        thread.put(value_key(ns, row.checkpoint_id, channel), stored)
                    moved[(row.checkpoint_ns, home, channel)] = row.checkpoint_id
                    del homes[channel]
                else:
                    homes[channel] = new_home
            if homes != row.homes:
                thread.put(checkpoint_key(ns, row.checkpoint_id), with_homes(row, homes))
        for checkpoint_ns, checkpoint_id in sorted(doomed):
            head = checkpoint_key(checkpoint_ns.encode(), checkpoint_id)
            thread.delete_range(head, head + AFTER)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions sort as strings: a counter zero-padded to 12 digits, then a random tie-breaker.

        19 characters, where LangGraph's own savers write 49 (32 digits and
        a 16-digit fraction): a checkpoint carries every channel's version
        and every node's seen versions, so their width decided whether its
        row fit a B-tree page (beyond ~1,000 bytes SQLite moves it to an
        overflow page, ~50 % more per put). Older 32-digit versions still
        read: they parse the same, and any 12-digit version sorts after any
        32-digit one below 10**20, so threads written before keep counting
        up. The order holds to 10**12 - 1 versions of a channel.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:012}.{random.getrandbits(24):06x}"

    # -- async: the sync methods, through the one async path (see ``_bound``) -----

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._aio.read(self.get_tuple, config)

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        return self._aio.iterate(lambda: self.list(config, filter=filter, before=before, limit=limit))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        # LangGraph's default walks the parents with one aget_tuple each;
        # the sync walk in one call is one worker hop (PostgreSQL), not one per parent.
        return await self._aio.read(self.get_delta_channel_history, config=config, channels=channels)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # _put and put_writes change nothing outside the store: they may run twice (transact_repeatable).
        stored, marked = await self._aio.transact_repeatable(self._put, config, checkpoint, metadata, new_versions)
        if marked is not None:
            self._mark(marked)  # transact returned: committed
        return stored

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._aio.transact_repeatable(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._aio.transact(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._aio.transact(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._aio.transact(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._aio.transact(self.prune, thread_ids, strategy=strategy)


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, a dict (the common case) without the ABC's subclass check."""
    return type(value) is dict or isinstance(value, Mapping)


def rows_ascending_one(thread_id: str, checkpoint_ns: str, checkpoint_id: str, value: bytes) -> Row:
    """A checkpoint row alone (no values or writes) from its envelope."""
    return next(rows_ascending(thread_id, [(checkpoint_key(checkpoint_ns.encode(), checkpoint_id), value)]))


def _stored_value(home: Row | None, channel: str) -> bytes | None:
    """The value row's bytes for ``channel`` as ``home`` keeps it (in its envelope or a row of its own)."""
    if home is None:
        return None
    inline = home.inline.get(channel)
    if inline is not None:
        return pack(tuple(inline))
    return home.values.get(channel)
