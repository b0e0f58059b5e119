"""Agent Framework workflow checkpoints on durastate: ``DurastateCheckpointStorage``.

Implements Agent Framework's ``CheckpointStorage`` protocol
(``agent-framework-core`` 1.26): the async ``save``, ``load``,
``list_checkpoints``, ``delete``, ``get_latest`` and ``list_checkpoint_ids``,
with the results of the framework's own ``InMemoryCheckpointStorage`` and
``FileCheckpointStorage`` for every sequence of calls (a differential test
checks that), on any durastate URL::

    from agent_framework import WorkflowBuilder
    from durastate.integrations.agent_framework import DurastateCheckpointStorage

    storage = DurastateCheckpointStorage(url="sqlite:checkpoints.db")
    workflow = WorkflowBuilder(start_executor=first, checkpoint_storage=storage).build()

Encoding: JSON, never pickle (``_codec``; the framework's own encoding
pickles every non-JSON value). A checkpoint holding a value the codec does
not cover is refused by ``save`` with ``InvalidCheckpoint`` (a
``durastate.InvalidRequest`` and a ``WorkflowCheckpointException``) and
nothing is written. ``allowed_checkpoint_types`` is the framework's option
of the same name (``FileCheckpointStorage``): extra ``"module:qualname"``
classes allowed in checkpoints besides the framework's own types.

Storage: the kv facet, scope ``b"agent-framework"``.

* ``(b"c", <checkpoint id>)``: the checkpoint, compact JSON
  ``{"w": workflow name, "cp": the encoded fields}``.
* ``(b"w" + <workflow name>, <checkpoint id>)``: the workflow's index entry,
  ``{"t": timestamp, "p": previous checkpoint id}``: what ``get_latest``
  needs to choose (the framework's rule: newest timestamp, ties broken by
  the ``previous_checkpoint_id`` lineage, then the greatest id), so it reads
  the index and loads one checkpoint, not all of them.

kv rather than documents or records: a checkpoint is written whole and read
whole by id, never updated field by field, and the protocol has no
compare-and-swap to offer a revision to (``save`` of an existing id replaces
it, as in both framework storages); records' parent-linked entries would fit
the lineage but nothing in the protocol reads it as a chain.

Consistency (several tasks, threads or processes on one store): ``save`` is
one transaction (take a lock on the id, read the id's current workflow, write the checkpoint, write
the index entry, drop the old index entry if the id moves to another
workflow; for an id not stored yet, the usual case, a requirement that it is
absent stands in for the read on PostgreSQL, so the lock, the requirement
and the writes all ride the commit's round trip, and an id found stored
takes the full path in a second transaction), so a checkpoint is never listed under two workflows nor listed
without its data, and a reader sees a checkpoint whole or not at all (the
file storage's ``os.replace`` gives the same for one file, nothing across
its files). Saves of different ids never conflict; two saves of one id
leave the one that committed last, as both framework storages do.

Where it follows the framework storages exactly: ``load`` of a missing id
raises ``CheckpointNotFound`` (a ``WorkflowCheckpointException`` and a
``durastate.NotFound``); ``delete`` returns whether there was one;
``get_latest`` returns ``None`` for a workflow with none; loads return
copies (a new object each call). Order of ``list_checkpoints`` and
``list_checkpoint_ids``: by ``timestamp`` (read as the framework reads it
for ``get_latest``), ties by checkpoint id. The framework stamps a
checkpoint when it makes it, just before saving it, so this is save order
for a workflow's own checkpoints, as the in-memory storage lists them
(first-save order); by id alone it was the ids' (random UUIDs) order. The
file storage's order is the directory's; the protocol promises none. The
index holds the timestamps, so the order costs no extra read.
A stored checkpoint this process cannot decode (its class is no longer
allowed or not imported) is skipped by the listings with a warning, as
``FileCheckpointStorage`` skips such files; ``load`` raises
``UndecodableCheckpoint``, and so does ``get_latest`` when the latest one is
such a checkpoint (it chooses from the index without decoding the others;
the file storage would return an older, decodable one).

Stricter than the framework storages (refused with ``InvalidCheckpoint``,
nothing written): a ``checkpoint`` that is not a ``WorkflowCheckpoint``; a
``checkpoint_id`` or ``workflow_name`` that is not a ``str`` or is too long
for the store's ``max_key_size``; a ``timestamp`` ``datetime.fromisoformat``
cannot read (the in-memory storage accepts it and then fails every
``get_latest`` of that workflow); a checkpoint larger than
``max_value_size``.

Async: each coroutine runs its synchronous twin (``_save`` ...) through the
storage's ``AsyncCalls`` (``durastate.integrations._common``): inline on the
event loop's thread on a SQLite file, on worker threads on PostgreSQL. A
``save`` or ``delete`` whose caller is cancelled is carried to its end
first (``to_the_end``), as ``FileCheckpointStorage`` waits out a write it
started.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from agent_framework import WorkflowCheckpoint
from agent_framework._workflows._checkpoint import _parse_checkpoint_timestamp, _select_latest_checkpoint

from ... import store as _store
from ..._json import dump_json
from ..._validate import as_list, shown
from ...engines.deferred import RequirementFailed
from ...errors import InvalidRequest, StoreClosed
from .._common import StoreHolder, to_the_end
from . import _codec
from ._errors import CheckpointNotFound, InvalidCheckpoint, UndecodableCheckpoint

__all__ = ["SCOPE", "DurastateCheckpointStorage"]

logger = logging.getLogger(__name__)

SCOPE = b"agent-framework"
CHECKPOINTS_NS = b"c"
WORKFLOW_NS_PREFIX = b"w"
_FIELDS = tuple(f for f in WorkflowCheckpoint.__dataclass_fields__)


def _workflow_ns(workflow_name: str) -> bytes:
    return WORKFLOW_NS_PREFIX + workflow_name.encode("utf-8")


def _stamped(index: bytes) -> datetime:
    """An index entry's checkpoint timestamp, as ``get_latest`` compares them (naive ones as UTC)."""
    return _parse_checkpoint_timestamp(orjson.loads(index)["t"])


class DurastateCheckpointStorage(StoreHolder):
    """Agent Framework ``CheckpointStorage`` on a durastate store (see the module docstring).

    ``url`` opens (and ``close()`` closes) a store; ``store=`` borrows one
    (left open); neither opens the default store. ``allowed_checkpoint_types``:
    extra ``"module:qualname"`` classes allowed in checkpoints.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        store: _store.Store | None = None,
        allowed_checkpoint_types: Iterable[str] | None = None,
    ) -> None:
        allowed = (
            [] if allowed_checkpoint_types is None else as_list("allowed_checkpoint_types", allowed_checkpoint_types)
        )
        for entry in allowed:
            if not isinstance(entry, str) or ":" not in entry:
                raise InvalidCheckpoint(
                    f"allowed_checkpoint_types entries must be 'module:qualname' strings, got {shown(entry)}"
                )
        super().__init__(url, store, name="durastate-agent-framework")
        self._allowed = frozenset(allowed)
        self._decode = _codec.Decoder(self._allowed)
        self._closed = False

    # -- the framework's CheckpointStorage protocol ---------------------------

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        """Store a copy of ``checkpoint`` (replacing one with the same id); return its id."""
        return await to_the_end(self._aio.call(self._save, checkpoint))

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """The checkpoint with this id (a new copy); ``CheckpointNotFound`` if there is none."""
        return await self._aio.read(self._load, checkpoint_id)

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        """Every checkpoint of ``workflow_name`` (copies), by timestamp (save order), ties by id."""
        return await self._aio.read(self._list_checkpoints, workflow_name)

    async def delete(self, checkpoint_id: str) -> bool:
        """Remove the checkpoint; whether there was one."""
        return await to_the_end(self._aio.call(self._delete, checkpoint_id))

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        """The workflow's latest checkpoint by the framework's rule, or ``None`` when it has none."""
        return await self._aio.read(self._get_latest, workflow_name)

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        """The ids of the workflow's checkpoints, in ``list_checkpoints``'s order."""
        return await self._aio.read(self._list_checkpoint_ids, workflow_name)

    # -- lifecycle -------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<DurastateCheckpointStorage on {self.store.url}{' (closed)' if self._closed else ''}>"

    # -- checks ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("DurastateCheckpointStorage is closed")

    def _text(self, name: str, value: Any, room: int) -> bytes:
        if not isinstance(value, str):
            raise InvalidCheckpoint(f"{name} must be a str, got {type(value).__name__}")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidCheckpoint(f"{name} must be valid unicode (no lone surrogates), got {shown(value)}") from None
        if len(data) > room:
            raise InvalidCheckpoint(
                f"{name} is {len(data)} bytes as UTF-8; with this store's max_key_size it may be at most {room}"
            )
        return data

    def _room(self, ns_size: int) -> int:
        return self.store.kv.max_key_size - len(SCOPE) - ns_size

    def _id(self, checkpoint_id: Any) -> bytes:
        return self._text("checkpoint_id", checkpoint_id, self._room(len(CHECKPOINTS_NS)))

    def _workflow(self, workflow_name: Any) -> bytes:
        if not isinstance(workflow_name, str):
            raise InvalidCheckpoint(f"workflow_name must be a str, got {type(workflow_name).__name__}")
        return WORKFLOW_NS_PREFIX + self._text("workflow_name", workflow_name, self._room(len(WORKFLOW_NS_PREFIX)))

    # -- the synchronous implementation ----------------------------------------

    def _encode(self, checkpoint: Any) -> tuple[bytes, bytes, bytes, bytes]:
        """(id key, workflow namespace, checkpoint JSON, index JSON); nothing touched yet."""
        if not isinstance(checkpoint, WorkflowCheckpoint):
            raise InvalidCheckpoint(f"checkpoint must be a WorkflowCheckpoint, got {type(checkpoint).__name__}")
        key = self._id(checkpoint.checkpoint_id)
        ns = self._workflow(checkpoint.workflow_name)
        if len(key) > self._room(len(ns)):
            raise InvalidCheckpoint(
                f"checkpoint_id and workflow_name together are {len(key) + len(ns)} bytes as UTF-8; with this "
                f"store's max_key_size they may be at most {self._room(0)}"
            )
        previous = checkpoint.previous_checkpoint_id
        if previous is not None and not isinstance(previous, str):
            raise InvalidCheckpoint(f"previous_checkpoint_id must be a str or None, got {type(previous).__name__}")
        try:
            datetime.fromisoformat(checkpoint.timestamp)
        except (TypeError, ValueError):
            raise InvalidCheckpoint(
                f"checkpoint {checkpoint.checkpoint_id!r}: timestamp must be ISO 8601 text, got "
                f"{shown(checkpoint.timestamp)}"
            ) from None
        fields = {}
        for name in _FIELDS:
            try:
                fields[name] = _codec.encode(getattr(checkpoint, name), self._allowed)
            except _codec.UnencodableValue as exc:
                raise InvalidCheckpoint(
                    f"checkpoint {checkpoint.checkpoint_id!r} cannot be saved: {name}{exc}"
                ) from None
        try:
            # The codec tags non-finite floats and ints past 64 bits: no number left to check.
            data = dump_json(
                "checkpoint",
                {"w": checkpoint.workflow_name, "cp": fields},
                self.store.kv.max_value_size,
                numbers_checked=True,
            )
        except InvalidRequest as exc:
            raise InvalidCheckpoint(f"checkpoint {checkpoint.checkpoint_id!r} cannot be saved: {exc}") from None
        index = orjson.dumps({"t": checkpoint.timestamp, "p": previous})
        return key, ns, data, index

    def _lock(self, key: bytes, *, later: bool = False) -> None:
        # Writers of one id one at a time, before anything is read: the id's current workflow is
        # then read after the previous writer committed, and writers never take the checkpoint row
        # and two index rows in different orders (on PostgreSQL that deadlocked).
        name = f"durastate-agent-framework-checkpoint:{key.hex()}"
        if later:
            self.store.engine.lock_later(name)
        else:
            self.store.engine.lock(name)

    def _save(self, checkpoint: WorkflowCheckpoint) -> str:
        self._check_open()
        key, ns, data, index = self._encode(checkpoint)
        kv = self.store.kv
        if self.store.engine.capabilities.deferred_answers:
            # A new id (the framework mints one per checkpoint) has no index row to move: a requirement
            # that it is absent instead of a read, and the lock, the requirement and both writes ride
            # the COMMIT's round trip. Where every answer comes at once (SQLite) the read costs no more.
            try:
                with self.store.transaction():
                    self._lock(key, later=True)  # the requirement runs after it on the server
                    kv.require_absent(SCOPE, CHECKPOINTS_NS, key)
                    kv.put(SCOPE, CHECKPOINTS_NS, key, data)
                    kv.put(SCOPE, ns, key, index)
                return checkpoint.checkpoint_id
            except RequirementFailed:
                pass  # the id is stored already: nothing was written; read its workflow and move it
        with self.store.transaction():
            self._lock(key)
            old = kv.get(SCOPE, CHECKPOINTS_NS, key)
            if old is not None:
                old_ns = _workflow_ns(orjson.loads(old)["w"])
                if old_ns != ns:
                    kv.delete(SCOPE, old_ns, keys=[key])
            kv.put(SCOPE, CHECKPOINTS_NS, key, data)
            kv.put(SCOPE, ns, key, index)
        return checkpoint.checkpoint_id

    def _decode_checkpoint(self, data: bytes) -> WorkflowCheckpoint:
        try:
            fields = self._decode(orjson.loads(data)["cp"])
        except _codec.UndecodableValue as exc:
            raise UndecodableCheckpoint(f"stored checkpoint cannot be loaded: {exc}") from None
        return WorkflowCheckpoint(**fields)

    def _load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        self._check_open()
        data = self.store.kv.get(SCOPE, CHECKPOINTS_NS, self._id(checkpoint_id))
        if data is None:
            raise CheckpointNotFound(f"No checkpoint found with ID {checkpoint_id}")
        return self._decode_checkpoint(data)

    def _index(self, workflow_name: str) -> list[tuple[bytes, bytes]]:
        return list(self.store.kv.scan(SCOPE, self._workflow(workflow_name)))

    def _list_checkpoints(self, workflow_name: str) -> list[WorkflowCheckpoint]:
        self._check_open()
        kv = self.store.kv
        with self.store.engine.read_transaction():  # the index and the checkpoints from one snapshot
            keys = [key for _, key in sorted((_stamped(index), key) for key, index in self._index(workflow_name))]
            stored = kv.get_many(SCOPE, CHECKPOINTS_NS, keys) if keys else []
        checkpoints = []
        for key, data in zip(keys, stored, strict=True):
            if data is None:  # cannot happen: index and data are written and removed together
                continue
            try:
                checkpoints.append(self._decode_checkpoint(data))
            except UndecodableCheckpoint as exc:
                logger.warning("skipping checkpoint %r: %s", key.decode("utf-8"), exc)
        return checkpoints

    def _list_checkpoint_ids(self, workflow_name: str) -> list[str]:
        # The file storage lists only checkpoints it can decode; so do we.
        return [checkpoint.checkpoint_id for checkpoint in self._list_checkpoints(workflow_name)]

    def _delete(self, checkpoint_id: str) -> bool:
        self._check_open()
        key = self._id(checkpoint_id)
        kv = self.store.kv
        with self.store.transaction():
            self._lock(key)
            old = kv.get(SCOPE, CHECKPOINTS_NS, key)
            if old is None:
                return False
            kv.delete(SCOPE, CHECKPOINTS_NS, keys=[key])
            kv.delete(SCOPE, _workflow_ns(orjson.loads(old)["w"]), keys=[key])
        return True

    def _get_latest(self, workflow_name: str) -> WorkflowCheckpoint | None:
        self._check_open()
        kv = self.store.kv
        with self.store.engine.read_transaction():
            index = self._index(workflow_name)
            if not index:
                return None
            # Stand-ins carrying only what the framework's rule reads (timestamp, lineage, id).
            stand_ins = []
            for key, entry in index:
                fields = orjson.loads(entry)
                stand_ins.append(
                    WorkflowCheckpoint(
                        workflow_name=workflow_name,
                        graph_signature_hash="",
                        checkpoint_id=key.decode("utf-8"),
                        previous_checkpoint_id=fields["p"],
                        timestamp=fields["t"],
                    )
                )
            latest = _select_latest_checkpoint(stand_ins)
            data = kv.get(SCOPE, CHECKPOINTS_NS, latest.checkpoint_id.encode("utf-8"))
        assert data is not None  # written and removed with its index entry, read in one snapshot
        return self._decode_checkpoint(data)
