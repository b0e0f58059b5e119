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
  point order on both engines), and sweeps the namespace's expired rows on
  the way (opportunistic cleanup; the read filters them regardless, and a
  failed sweep never fails the read).

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ._json import dump_json
from ._listing import check_limit, distinct_params, distinct_sql
from ._validate import as_int64, fail
from .engines.base import Migration, Schema
from .errors import DurastateError
from .events import MAX_DURATION_MS, text

if TYPE_CHECKING:
    from .engines.base import Engine

__all__ = ["SCHEMA", "Presence", "PresenceEntry"]

_EXPIRY_INDEX = "CREATE INDEX {p}presence_expiry ON {p}presence (ns, expires_at)"

SCHEMA = Schema(
    facet="presence",
    migrations=(
        Migration(
            per_dialect={
                "sqlite": (
                    "CREATE TABLE {p}presence ("
                    " ns TEXT NOT NULL, participant TEXT NOT NULL, field TEXT NOT NULL, value BLOB NOT NULL,"
                    " seen INTEGER NOT NULL, at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
                    " PRIMARY KEY (ns, participant, field))",
                    _EXPIRY_INDEX,
                ),
                # COLLATE "C": the read order is code point order, as on SQLite.
                "postgresql": (
                    "CREATE TABLE {p}presence ("
                    ' ns TEXT COLLATE "C" NOT NULL, participant TEXT COLLATE "C" NOT NULL,'
                    ' field TEXT COLLATE "C" NOT NULL, value BYTEA NOT NULL,'
                    " seen BIGINT NOT NULL, at BIGINT NOT NULL, expires_at BIGINT NOT NULL,"
                    " PRIMARY KEY (ns, participant, field))",
                    _EXPIRY_INDEX,
                ),
            },
        ),
    ),
)

UPSERT = (
    "INSERT INTO {p}presence (ns, participant, field, value, seen, at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (ns, participant, field) DO UPDATE SET value = excluded.value, seen = excluded.seen,"
    " at = excluded.at, expires_at = excluded.expires_at WHERE {p}presence.at <= excluded.at"
)
DELETE = "DELETE FROM {p}presence WHERE ns = ? AND participant = ? AND field = ? AND at <= ?"
SWEEP = "DELETE FROM {p}presence WHERE ns = ? AND expires_at <= ?"
READ = (
    "SELECT participant, field, value, seen, at, expires_at FROM {p}presence"
    " WHERE ns = ? AND expires_at > ? ORDER BY participant, field"
)


@dataclass(frozen=True)
class PresenceEntry:
    participant: str
    field: str
    value: Any
    seen: int
    at: int  # the writer's time (ms)
    expires_at: int  # the store's time (ms)


class Presence:
    """The presence facet of a ``Store`` (see the module docstring)."""

    def __init__(self, engine: Engine, *, max_value_size: int) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        self._upsert = engine.sql(UPSERT)
        self._delete = engine.sql(DELETE)
        self._sweep = engine.sql(SWEEP)
        self._read = engine.sql(READ)

    def set(self, ns: str, participant: str, values: Mapping[str, Any], *, at_ms: int, seen: int, ttl_ms: int) -> None:
        """Write (or, with ``None``, delete) fields of ``participant`` atomically."""
        ns = text("ns", ns)
        participant = text("participant", participant)
        if not isinstance(values, Mapping):
            fail(f"values must be a mapping of field -> JSON value, got {type(values).__name__}")
        at = as_int64("at_ms", at_ms)
        seen = as_int64("seen", seen)
        ttl = as_int64("ttl_ms", ttl_ms)
        if not 0 <= ttl <= MAX_DURATION_MS:
            fail(f"ttl_ms must be between 0 and {MAX_DURATION_MS}, got {ttl}")
        fields = [
            (
                text("field", field),
                None if value is None else dump_json(f"values[{field!r}]", value, self.max_value_size),
            )
            for field, value in values.items()
        ]
        if not fields:
            return
        engine = self._engine
        expires = engine.now_ms() + ttl
        with engine.transaction():
            for field, blob in fields:
                if blob is None:
                    engine.execute(self._delete, (ns, participant, field, at))
                else:
                    engine.execute(self._upsert, (ns, participant, field, blob, seen, at, expires))

    def read(self, ns: str) -> list[PresenceEntry]:
        """The live fields of the namespace, by participant then field."""
        ns = text("ns", ns)
        engine = self._engine
        now = engine.now_ms()
        if not engine.in_transaction():
            try:
                engine.execute(self._sweep, (ns, now))
            except DurastateError:
                pass  # cleanup only: the read below filters expired rows anyway
        else:
            engine.execute(self._sweep, (ns, now))
        return [
            PresenceEntry(r[0], r[1], orjson.loads(r[2]), int(r[3]), int(r[4]), int(r[5]))
            for r in engine.all(self._read, (ns, now))
        ]

    # -- listing (read-only, for inspectors and exports; see durastate._listing) --

    def namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        """Namespaces that hold fields, in code point order.

        At most ``limit`` (1..10000), all greater than ``after``; page on by
        passing the last one back. A namespace whose fields all expired but
        were not swept yet is still listed (``read`` of it answers ``[]``).
        """
        bound = None if after is None else text("after", after)
        limit = check_limit(limit)
        statement = self._engine.sql(LIST_NAMESPACES[bound is not None])
        return [str(r[0]) for r in self._engine.all(statement, distinct_params((), bound, limit))]

    def peek(self, ns: str) -> list[PresenceEntry]:
        """The live fields of the namespace, like ``read``, without its sweep.

        Writes nothing (``read`` deletes the namespace's expired rows on the
        way), so it runs inside a read-only transaction and suits read-only
        inspectors; expired rows are filtered all the same.
        """
        ns = text("ns", ns)
        engine = self._engine
        return [
            PresenceEntry(r[0], r[1], orjson.loads(r[2]), int(r[3]), int(r[4]), int(r[5]))
            for r in engine.all(self._read, (ns, engine.now_ms()))
        ]


LIST_NAMESPACES = {a: distinct_sql("presence", "ns", after=a) for a in (False, True)}
