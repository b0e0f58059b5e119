"""``store.presence``: who is here, field by field, with expiry (a2's presence).

A namespace (``ns``) holds participants; each participant has named fields
with JSON values::

    store.presence.set("room/1", "alice", {"cursor": 12, "typing": True}, at_ms=t, seen=3, ttl_ms=30_000)
    store.presence.set("room/1", "alice", {"typing": None}, at_ms=t2, seen=4, ttl_ms=30_000)   # delete a field
    store.presence.read("room/1")   # [PresenceEntry(participant, field, value, seen, at, expires_at), ...]

Rules (the a2 seed's):

* **Field-wise last-writer-wins** on the sender's ``at_ms``: a field is
  overwritten unless the stored value has a strictly newer ``at``; ties go
  to the incoming write. A ``None`` value deletes the field under the same
  rule. One ``set`` is atomic; an empty ``values`` does nothing.
* **Expiry is anchored on the store's clock**, never on the sender's ``at``:
  a field written now lives ``ttl_ms`` from the store's now.
* ``read`` returns the live fields ordered by participant then field (code
  point order on both engines). Outside a transaction it also sweeps the
  namespace's expired rows on the way, when there are any (opportunistic
  cleanup; the read filters them regardless, a failed sweep never fails
  the read, and with nothing expired the read writes nothing).

Decisions where the seed is silent: times are integer epoch milliseconds
(the a2 adapter converts them to datetimes); ``seen`` is an int64;
namespaces, participants and fields are ``str`` (no NUL, no lone
surrogates, at most ``MAX_NAME_SIZE`` UTF-8 bytes each); values are JSON
(orjson, at most the store's ``max_value_size``). A deletion leaves no
tombstone (as in the seed): an older write arriving after it recreates the
field.

Inspection (read-only): ``namespaces()`` lists namespaces; ``peek(ns)`` reads
like ``read`` without its sweep, so it writes nothing.
"""

from __future__ import annotations

from .facet import CHUNK_BYTES as CHUNK_BYTES
from .facet import DELETE as DELETE
from .facet import FIELD_CHUNK as FIELD_CHUNK
from .facet import LIST_NAMESPACES as LIST_NAMESPACES
from .facet import READ_NS as READ_NS
from .facet import REMOVE as REMOVE
from .facet import SCHEMA as SCHEMA
from .facet import SWEEP as SWEEP
from .facet import SWEEP_ANY as SWEEP_ANY
from .facet import UPSERT as UPSERT
from .facet import Presence as Presence
from .facet import PresenceEntry as PresenceEntry
from .facet import delete_sql as delete_sql
from .facet import upsert_sql as upsert_sql

__all__ = ["SCHEMA", "Presence", "PresenceEntry"]
