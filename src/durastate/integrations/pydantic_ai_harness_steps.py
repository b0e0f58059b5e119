"""pydantic-ai-harness step persistence on durastate: ``DurastateStepStore`` (extra ``[pydantic-ai]``).

A ``pydantic_ai_harness.step_persistence.StepStore`` for the harness's
``StepPersistence`` capability on any durastate URL, built and tested
against ``pydantic-ai-harness`` 0.36.0 (``InMemoryStepStore`` is the
reference a differential test runs against)::

    from pydantic_ai_harness.step_persistence import StepPersistence
    from durastate.integrations.pydantic_ai_harness import DurastateStepStore

    steps = StepPersistence(store=DurastateStepStore(url="sqlite:agents.db"))

Storage (kv values, scope ``b"pydantic-ai-harness"``, namespaces suffixed
with ``b"/" + name``; all JSON, the harness's own field codecs):

* **runs**: namespace ``b"run"``, key the run id -> the ``RunRecord``.
  ``register_run`` replaces, as the reference does. ``list_runs`` reads
  every run and sorts by ``started_at`` (runs with equal ``started_at``
  come in run id order; the reference keeps registration order).
* **events**: a kv log per run (namespace ``b"ev"``), in append order; an
  event with an ``idempotency_key`` also claims ``run id + NUL + key`` in
  namespace ``b"evk"`` (``put_if_absent``, same transaction): a retried
  append is dropped, by any number of processes at once.
* **snapshots**: each a kv value (namespace ``b"snap"``, key ``run id +
  NUL + sequence``): a JSON header line, then the messages as
  ``ModelMessagesTypeAdapter`` writes them. The run's index (sequences,
  states, idempotency keys, the key high-water mark the reference keeps)
  is a document ``pydantic-ai-harness/s/<name>/<run id>``; ``save_snapshot``
  holds the documents lock on it (``documents.lock``) so concurrent saves of
  one run serialise, and applies the reference's rules: a key below the
  high-water sequence or already saved is dropped, and with
  ``max_snapshots_per_run`` the harness's own retain rule
  (``_retained_seqs``) picks what stays. ``latest_snapshot`` reads the index
  and one value.
* **tool effects**: namespace ``b"tool"``, key ``run id + NUL + tool call
  id``: the latest record. ``list_unresolved_tool_effects`` scans the run's
  keys (in tool call id order; the reference keeps first-record order).
* **media**: as the harness's own step stores, a snapshot part at or above
  ``media_threshold_bytes`` (default 64 KiB: a ``BinaryContent``'s bytes, a
  long text or tool return) is stored once in a content-addressed
  ``MediaStore`` and the snapshot keeps a marker (the harness's
  ``externalize_media`` / ``restore_media`` walkers, so the marker shape is
  the harness's). ``media_store="auto"`` (the default, as the harness's
  ``SqliteStepStore`` keeps its blobs in its own file) is a
  ``DurastateMediaStore`` on the same store: the blobs are written in the
  snapshot's transaction (a refused or dropped snapshot stores none) and
  read with it. Any other ``MediaStore`` (S3, the harness's, a
  ``DurastateMediaStore`` on another store) is called as the harness calls
  it, before the save and after the read; ``None`` keeps every part inline.
  Snapshots pruned by ``max_snapshots_per_run`` leave their blobs (they may
  be shared; the harness's stores keep them too).

Refused (``durastate.InvalidRequest``, nothing written): a record that is not
the harness's type, ids that are not ``str`` or hold NUL, values the
harness's codecs cannot read back (a non-``str`` metadata value), messages
JSON cannot hold (NaN, infinities). The harness's ``_store`` helpers used
here are private to it: the pin (0.36.0) is why they are safe to import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal

import orjson

from .. import store as _store
from .._validate import fail, fail_type, positive, text
from ..errors import InvalidRequest
from ._common import StoreHolder
from .pydantic_ai_harness_media import NO_CONTEXT, DurastateMediaStore, MediaNotFound
from .pydantic_ai_messages import messages_json

try:
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai_harness.media import MediaContext, MediaStore, externalize_media, media_uri_for, restore_media
    from pydantic_ai_harness.step_persistence import (
        ContinuableSnapshot,
        RunRecord,
        StepEvent,
        ToolEffectRecord,
    )
    from pydantic_ai_harness.step_persistence._store import (
        _event_from_dict,
        _event_to_dict,
        _retained_seqs,
        _run_from_dict,
        _run_to_dict,
        _snapshot_key_sequence,
        _tool_effect_from_dict,
        _tool_effect_to_dict,
        _validate_max_snapshots,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "durastate.integrations.pydantic_ai_harness needs pydantic-ai-harness: "
        f"pip install 'durastate[pydantic-ai]' ({exc})"
    ) from exc

__all__ = ["DurastateStepStore"]

SCOPE = b"pydantic-ai-harness"
RUNS, EVENTS, EVENT_KEYS, SNAPSHOTS, TOOLS = b"run", b"ev", b"evk", b"snap", b"tool"
INDEXES = "pydantic-ai-harness/s/"  # + name + "/" + run id: the run's snapshot index document
FORMAT = 1  # the layout of every value and index here; a later layout reads this one or migrates it
MEDIA_THRESHOLD_BYTES = 64 * 1024  # the harness's step stores' default
# What the harness's walker leaves for an externalised part: its marker key, and the blob's URI.
_MARKER = b'"__harness_external_media__"'
_MEDIA_URI = re.compile(rb"media\+sha256://[0-9a-f]{64}")


def _checked(what: str, value: Any, kind: type, to_dict: Callable[[Any], dict[str, object]]) -> bytes:
    """``value`` (a ``kind``) as stored JSON, refused unless the harness's codec reads it back."""
    if not isinstance(value, kind):
        fail_type(what, f"a pydantic_ai_harness {kind.__name__}", value)
    record: Any = value  # isinstance on a type variable narrows to object; the fields are the harness's
    text(f"{what}.run_id", record.run_id, limit=None)  # ids become key bytes: no NUL, no lone surrogates
    if kind is ToolEffectRecord:
        text(f"{what}.tool_call_id", record.tool_call_id, limit=None)
    try:
        data = to_dict(value)
        blob = orjson.dumps(data)
        _DECODERS[kind](orjson.loads(blob))
    except (ValueError, TypeError, ValidationError, orjson.JSONEncodeError) as exc:
        raise InvalidRequest(f"{what} cannot be stored as JSON: {exc}") from None
    return blob


_DECODERS: dict[type, Callable[[dict[str, object]], Any]] = {
    RunRecord: _run_from_dict,
    StepEvent: _event_from_dict,
    ToolEffectRecord: _tool_effect_from_dict,
}


def _run_key(run_id: Any) -> bytes:
    return text("run_id", run_id, limit=None).encode()


def _bool(name: str, value: Any) -> bool:
    if type(value) is not bool:
        fail_type(name, "a bool", value)
    return value


class _Gathered:
    """A ``MediaStore`` for the harness's walkers that touches no storage.

    ``put`` gathers the blobs (written later, in the snapshot's transaction);
    ``get`` answers from blobs read with the snapshot.
    """

    def __init__(self, fetched: Mapping[str, bytes] | None = None) -> None:
        self.blobs: dict[str, tuple[bytes, MediaContext]] = {}
        self._fetched = fetched or {}

    async def put(self, data: bytes, *, context: MediaContext = NO_CONTEXT) -> str:
        uri = media_uri_for(data)
        self.blobs.setdefault(uri, (data, context))
        return uri

    async def get(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> bytes:
        try:
            return self._fetched[uri]
        except KeyError:
            raise MediaNotFound(f"media not found: {uri}") from None

    async def exists(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> bool:
        return uri in self._fetched or uri in self.blobs

    async def public_url(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> str | None:
        return None

    async def get_metadata(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> Mapping[str, str]:
        return {}


class DurastateStepStore(StoreHolder):
    """pydantic-ai-harness's ``StepStore`` on a durastate store (contract: the module docstring).

    ``url=`` opens (and ``close()`` closes) its own store; ``store=`` borrows
    one. ``name`` separates step logs sharing one store;
    ``max_snapshots_per_run`` bounds each run's snapshots as the harness's
    stores do (``None``: keep all). ``media_store`` (``"auto"``, ``None`` or
    a harness ``MediaStore``) and ``media_threshold_bytes``: where snapshot
    parts of that size or more go (the module docstring); ``media_store``
    is the store in use (``"auto"``: the ``DurastateMediaStore`` made here,
    closed with this).
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        store: _store.Store | None = None,
        name: str = "steps",
        max_snapshots_per_run: int | None = None,
        media_store: MediaStore | Literal["auto"] | None = "auto",
        media_threshold_bytes: int = MEDIA_THRESHOLD_BYTES,
    ) -> None:
        name = text("name", name)
        if not name or "/" in name:
            fail(f"name must be a non-empty str without '/', got {name!r}")
        try:
            _validate_max_snapshots(max_snapshots_per_run)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        if isinstance(media_store, str) and media_store != "auto":
            fail(f"media_store must be 'auto', None or a MediaStore, got {media_store!r}")
        if media_store is not None and not isinstance(media_store, (str, MediaStore)):
            fail_type("media_store", "'auto', None or a pydantic_ai_harness MediaStore", media_store)
        self.media_threshold_bytes = positive("media_threshold_bytes", media_threshold_bytes)
        super().__init__(url, store, name="durastate-pydantic-ai-harness-steps")
        self._owns_media = media_store == "auto"
        self.media_store: MediaStore | None = (
            DurastateMediaStore(store=self.store) if isinstance(media_store, str) else media_store
        )
        # The media store whose blobs ride the snapshot's own transaction: one on this very store.
        self._media_here = (
            self.media_store
            if isinstance(self.media_store, DurastateMediaStore) and self.media_store.store is self.store
            else None
        )
        self.name = name
        self.max_snapshots_per_run = max_snapshots_per_run
        suffix = b"/" + name.encode()
        self._runs, self._events, self._event_keys = RUNS + suffix, EVENTS + suffix, EVENT_KEYS + suffix
        self._snapshots, self._tools = SNAPSHOTS + suffix, TOOLS + suffix
        self._indexes = INDEXES + name + "/"

    def __repr__(self) -> str:
        closed = " (closed)" if self._aio.runner.closed else ""
        return f"<DurastateStepStore {self.name!r} on {self.store.url}{closed}>"

    def close(self) -> None:
        """Refuse further calls; close the ``"auto"`` media store, then the store if this object opened it."""
        if self._owns_media and isinstance(self.media_store, DurastateMediaStore):
            self.media_store.close()
        super().close()

    async def aclose(self) -> None:
        """``close()`` for async code."""
        if self._owns_media and isinstance(self.media_store, DurastateMediaStore):
            await self.media_store.aclose()
        await super().aclose()

    # -- the harness's StepStore ---------------------------------------------------------

    async def register_run(self, record: RunRecord) -> None:
        """Store (or replace) the run's record."""
        await self._aio.call(self._register_run_sync, record)

    async def get_run(self, *, run_id: str) -> RunRecord | None:
        """The run's record, or ``None``."""
        return await self._aio.read(self._get_run_sync, run_id)

    async def list_runs(
        self, *, parent_run_id: str | None = None, conversation_id: str | None = None
    ) -> list[RunRecord]:
        """The runs matching both filters (``None``: any), by ``started_at``."""
        return await self._aio.read(self._list_runs_sync, parent_run_id, conversation_id)

    async def append_event(self, event: StepEvent) -> None:
        """Append ``event`` to its run's log, unless its ``idempotency_key`` is already there."""
        await self._aio.call(self._append_event_sync, event)

    async def list_events(self, *, run_id: str) -> list[StepEvent]:
        """The run's events in append order."""
        return await self._aio.read(self._list_events_sync, run_id)

    async def save_snapshot(self, snapshot: ContinuableSnapshot) -> None:
        """Keep ``snapshot`` (unless its ``idempotency_key`` was saved or is below the high-water mark)."""
        header, messages = self._snapshot_parts(snapshot)
        blobs: dict[str, tuple[bytes, MediaContext]] = {}
        # A part at the threshold makes the messages' JSON at least that long: below it, nothing to walk.
        if self.media_store is not None and len(messages) >= self.media_threshold_bytes:
            gathered = _Gathered() if self._media_here is not None else None
            tree = await externalize_media(
                json.loads(messages),
                media_store=gathered or self.media_store,
                threshold_bytes=self.media_threshold_bytes,
            )
            messages = json.dumps(tree, separators=(",", ":")).encode()
            blobs = gathered.blobs if gathered is not None else {}
        await self._aio.call(self._save_snapshot_sync, snapshot, header + b"\n" + messages, blobs)

    async def latest_snapshot(self, *, run_id: str, include_interrupted: bool = False) -> ContinuableSnapshot | None:
        """The newest ``complete`` snapshot (any state with ``include_interrupted``), or ``None``."""
        found = await self._read_snapshots(run_id, include_interrupted, latest=True)
        return found[0] if found else None

    async def list_snapshots(self, *, run_id: str, include_interrupted: bool = False) -> list[ContinuableSnapshot]:
        """The run's retained snapshots in write order (``interrupted`` ones only with ``include_interrupted``)."""
        return await self._read_snapshots(run_id, include_interrupted, latest=False)

    async def record_tool_effect(self, record: ToolEffectRecord) -> None:
        """Store ``record`` as the tool call's latest status."""
        await self._aio.call(self._record_tool_effect_sync, record)

    async def get_tool_effect(self, *, run_id: str, tool_call_id: str) -> ToolEffectRecord | None:
        """The tool call's latest record, or ``None``."""
        return await self._aio.read(self._get_tool_effect_sync, run_id, tool_call_id)

    async def list_unresolved_tool_effects(self, *, run_id: str) -> list[ToolEffectRecord]:
        """The run's tool calls whose latest record is ``started``."""
        return await self._aio.read(self._unresolved_sync, run_id)

    # -- implementation ------------------------------------------------------------------

    def _register_run_sync(self, record: Any) -> None:
        blob = _checked("record", record, RunRecord, _run_to_dict)
        self.store.kv.put(SCOPE, self._runs, record.run_id.encode(), blob)

    def _get_run_sync(self, run_id: Any) -> RunRecord | None:
        blob = self.store.kv.get(SCOPE, self._runs, _run_key(run_id))
        return None if blob is None else _run_from_dict(orjson.loads(blob))

    def _list_runs_sync(self, parent_run_id: Any, conversation_id: Any) -> list[RunRecord]:
        if parent_run_id is not None:
            text("parent_run_id", parent_run_id, limit=None)
        if conversation_id is not None:
            text("conversation_id", conversation_id, limit=None)
        records = [_run_from_dict(orjson.loads(blob)) for _, blob in self.store.kv.scan(SCOPE, self._runs)]
        chosen = [
            r
            for r in records
            if (parent_run_id is None or r.parent_run_id == parent_run_id)
            and (conversation_id is None or r.conversation_id == conversation_id)
        ]
        return sorted(chosen, key=lambda r: r.started_at)

    def _append_event_sync(self, event: Any) -> None:
        blob = _checked("event", event, StepEvent, _event_to_dict)
        run = event.run_id.encode()
        with self.store.transaction():
            if event.idempotency_key is not None:
                claim = run + b"\0" + text("event.idempotency_key", event.idempotency_key, limit=None).encode()
                if not self.store.kv.put_if_absent(SCOPE, self._event_keys, claim, b""):
                    return  # a retried append: the reference drops it too
            self.store.kv.append(SCOPE, self._events, run, blob)

    def _list_events_sync(self, run_id: Any) -> list[StepEvent]:
        log = self.store.kv.log(SCOPE, self._events, _run_key(run_id))
        return [_event_from_dict(orjson.loads(blob)) for _, blob in log]

    @staticmethod
    def _snapshot_parts(snapshot: Any) -> tuple[bytes, bytes]:
        """``snapshot``'s stored header line and messages JSON; ``InvalidRequest`` if it cannot be stored."""
        if not isinstance(snapshot, ContinuableSnapshot):
            fail_type("snapshot", "a pydantic_ai_harness ContinuableSnapshot", snapshot)
        _run_key(snapshot.run_id)
        key = snapshot.idempotency_key
        if key is not None:
            text("snapshot.idempotency_key", key, limit=None)
        if snapshot.state not in ("complete", "interrupted"):
            fail(f"snapshot.state must be 'complete' or 'interrupted', got {snapshot.state!r}")
        header = {
            "f": FORMAT,
            "step_index": snapshot.step_index,
            "conversation_id": snapshot.conversation_id,
            "parent_run_id": snapshot.parent_run_id,
            "agent_name": snapshot.agent_name,
            "timestamp": snapshot.timestamp.isoformat() if hasattr(snapshot.timestamp, "isoformat") else None,
            "state": snapshot.state,
            "idempotency_key": key,
        }
        if type(header["step_index"]) is not int or header["timestamp"] is None:
            fail("snapshot.step_index must be an int and snapshot.timestamp a datetime")
        for field in ("conversation_id", "parent_run_id", "agent_name"):
            if header[field] is not None:
                text(f"snapshot.{field}", header[field], limit=None)
        return orjson.dumps(header), messages_json(snapshot.messages, "snapshot.messages")

    def _save_snapshot_sync(
        self, snapshot: ContinuableSnapshot, blob: bytes, blobs: Mapping[str, tuple[bytes, MediaContext]]
    ) -> None:
        run, key = snapshot.run_id.encode(), snapshot.idempotency_key
        index_key = self._indexes + snapshot.run_id
        with self.store.documents.lock(index_key):
            found = self.store.documents.read(index_key)
            index = found.data if found is not None else {"f": FORMAT, "next": 1, "high": None, "snaps": []}
            if key is not None and not self._admit(index, key):
                return
            if blobs and self._media_here is not None:  # kept only with the snapshot that holds their markers
                self._media_here.put_many_sync(blobs)
            seq = index["next"]
            index["next"] = seq + 1
            index["snaps"].append([seq, snapshot.state, key])
            self.store.kv.put(SCOPE, self._snapshots, run + b"\0" + seq.to_bytes(8, "big"), blob)
            keep = self.max_snapshots_per_run
            if keep is not None and len(index["snaps"]) > keep:
                retained = _retained_seqs([(s, state) for s, state, _ in index["snaps"]], keep)
                dropped = [run + b"\0" + s.to_bytes(8, "big") for s, _, _ in index["snaps"] if s not in retained]
                if dropped:  # the retain set may be keep + 1 (the newest complete below the window)
                    self.store.kv.delete(SCOPE, self._snapshots, dropped)
                index["snaps"] = [entry for entry in index["snaps"] if entry[0] in retained]
            self.store.documents.write(index_key, index)

    @staticmethod
    def _admit(index: dict[str, Any], key: str) -> bool:
        """The reference's rule for a keyed snapshot: whether to keep it (``index``'s high-water mark updated)."""
        sequence = _snapshot_key_sequence(key)
        high = index["high"]
        if (
            sequence is not None
            and high is not None
            and (sequence < high[0] or (sequence == high[0] and key in high[1]))
        ):
            return False
        if any(entry[2] == key for entry in index["snaps"]):
            return False
        if sequence is not None:
            # As the reference: only keys at the highest sequence are kept, older ones all refused.
            if high is None or sequence > high[0]:
                index["high"] = [sequence, [key]]
            else:
                high[1].append(key)
        return True

    async def _read_snapshots(
        self, run_id: Any, include_interrupted: Any, *, latest: bool
    ) -> list[ContinuableSnapshot]:
        blobs, fetched = await self._aio.read(self._snapshot_blobs_sync, run_id, include_interrupted, latest)
        return [await self._snapshot(run_id, blob, fetched) for blob in blobs]

    def _snapshot_blobs_sync(
        self, run_id: Any, include_interrupted: Any, latest: bool
    ) -> tuple[list[bytes], dict[str, bytes]]:
        """The stored snapshots (the newest only, with ``latest``), and the blobs of this store they refer to."""
        run = _run_key(run_id)
        include = _bool("include_interrupted", include_interrupted)
        found = self.store.documents.read(self._indexes + run_id)
        entries = [] if found is None else [s for s, state, _ in found.data["snaps"] if include or state == "complete"]
        if latest:
            entries = entries[-1:]
        values = self.store.kv.get_many(SCOPE, self._snapshots, [run + b"\0" + s.to_bytes(8, "big") for s in entries])
        # A value pruned by a save between the two reads is skipped (it is no longer retained).
        blobs = [blob for blob in values if blob is not None]
        fetched: dict[str, bytes] = {}
        if self._media_here is not None:
            uris = {uri.decode() for blob in blobs if _MARKER in blob for uri in _MEDIA_URI.findall(blob)}
            fetched = self._media_here.get_many_sync(sorted(uris)) if uris else {}
        return blobs, fetched

    async def _snapshot(self, run_id: str, blob: bytes, fetched: Mapping[str, bytes]) -> ContinuableSnapshot:
        head, _, messages = blob.partition(b"\n")
        header = orjson.loads(head)
        if self.media_store is not None and _MARKER in messages:  # the harness's walker puts the parts back
            media = _Gathered(fetched) if self._media_here is not None else self.media_store
            restored = await restore_media(json.loads(messages), media_store=media)
            parsed = ModelMessagesTypeAdapter.validate_python(restored)
        else:
            parsed = ModelMessagesTypeAdapter.validate_json(messages)
        return ContinuableSnapshot(
            run_id=run_id,
            step_index=header["step_index"],
            messages=parsed,
            conversation_id=header["conversation_id"],
            parent_run_id=header["parent_run_id"],
            agent_name=header["agent_name"],
            timestamp=datetime.fromisoformat(header["timestamp"]),
            state=header["state"],
            idempotency_key=header["idempotency_key"],
        )

    def _record_tool_effect_sync(self, record: Any) -> None:
        blob = _checked("record", record, ToolEffectRecord, _tool_effect_to_dict)
        self.store.kv.put(SCOPE, self._tools, record.run_id.encode() + b"\0" + record.tool_call_id.encode(), blob)

    def _get_tool_effect_sync(self, run_id: Any, tool_call_id: Any) -> ToolEffectRecord | None:
        tool = text("tool_call_id", tool_call_id, limit=None).encode()
        blob = self.store.kv.get(SCOPE, self._tools, _run_key(run_id) + b"\0" + tool)
        return None if blob is None else _tool_effect_from_dict(orjson.loads(blob))

    def _unresolved_sync(self, run_id: Any) -> list[ToolEffectRecord]:
        run = _run_key(run_id)
        rows = self.store.kv.scan(SCOPE, self._tools, start=run + b"\0", end=run + b"\x01")
        records = [_tool_effect_from_dict(orjson.loads(blob)) for _, blob in rows]
        return [r for r in records if r.status == "started"]
