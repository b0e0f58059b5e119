"""The ``Presence`` class: the presence facet of a ``Store`` (the model: ``durastate.presence``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import orjson

from .._chunks import STATEMENT_BYTES, chunk_bounds
from .._json import dump_json
from .._listing import check_limit, distinct_params, distinct_sql
from .._retention import BATCH
from .._validate import MAX_DURATION_MS, MAX_NAME_SIZE, as_int64, as_limit, fail, fail_type, text
from ..engines.base import READ, WRITE, ByCount, KeyLookup, Migration, Row, Schema, Statement
from ..errors import DurastateError

if TYPE_CHECKING:
    from ..engines.base import Engine

# The public names are the package's (durastate.presence.__all__).

_EXPIRY_INDEX = "CREATE INDEX {p}presence_expiry ON {p}presence (ns, expires_at)"

SCHEMA = Schema(
    facet="presence",
    migrations=(
        Migration(
            statements=(
                # {key_text}: the read order is code point order on every engine.
                "CREATE TABLE {p}presence ("
                " ns {key_text} NOT NULL, participant {key_text} NOT NULL, field {key_text} NOT NULL,"
                " value {blob} NOT NULL, seen {int64} NOT NULL, at {int64} NOT NULL, expires_at {int64} NOT NULL,"
                " PRIMARY KEY (ns, participant, field))",
                _EXPIRY_INDEX,
            ),
        ),
    ),
)

# Fields per statement: a ``set`` of more fields is several statements in
# one transaction. 2 parameters a field and 5 for the participant, well
# under both engines' bound-parameter limits.
FIELD_CHUNK = 128
# And the most value bytes a statement carries (a larger value goes alone):
# see ``durastate._chunks``.
CHUNK_BYTES = STATEMENT_BYTES


def upsert_sql(count: int) -> Statement:
    """One upsert of ``count`` fields of one participant (params: ns, participant, seen, at, expires_at, then
    field and value of each field; the fields distinct).

    A field is overwritten unless the stored one has a strictly newer
    ``at``. The participant's columns are bound once and the fields come as
    a ``VALUES`` list (its columns ``column1``, ``column2`` on both
    engines): one statement and one round trip for a whole chunk, where one
    statement per field cost PostgreSQL a round trip each (bench/RESULTS.md,
    "Presence: many fields on PostgreSQL"). ``WHERE true``: SQLite's parser
    needs it before ``ON CONFLICT`` after a ``SELECT``.
    """
    fields = ", ".join(["(?, ?)"] * count)
    return WRITE(
        "INSERT INTO {p}presence (ns, participant, field, value, seen, at, expires_at)"
        f" SELECT ?, ?, f.column1, f.column2, ?, ?, ? FROM (VALUES {fields}) AS f WHERE true"
        " ON CONFLICT (ns, participant, field) DO UPDATE SET value = excluded.value, seen = excluded.seen,"
        " at = excluded.at, expires_at = excluded.expires_at WHERE {p}presence.at <= excluded.at"
    )


def delete_sql(count: int) -> KeyLookup:
    """The deletion of ``count`` fields of one participant unless the stored one is newer (params: ns,
    participant, the fields, then at): one index probe per field, written by the engine (``KeyLookup``)."""
    return KeyLookup("presence", "", ("ns", "participant"), "field", count, "text", delete=True, condition="at <= ?")


UPSERT = upsert_sql(1)
DELETE = delete_sql(1)
SWEEP = WRITE("DELETE FROM {p}presence WHERE ns = ? AND expires_at <= ?")
# Retention: one participant's fields; expired rows of any namespace in batches.
REMOVE = WRITE("DELETE FROM {p}presence WHERE ns = ? AND participant = ?")
SWEEP_ANY = WRITE(
    "DELETE FROM {p}presence WHERE (ns, participant, field) IN"
    " (SELECT ns, participant, field FROM {p}presence WHERE expires_at <= ? LIMIT ?)"
)
# Every row of the namespace, expired ones too, in primary key order: the
# caller drops the expired rows and learns from them whether to sweep, in
# one statement and without a sort (filtering on expires_at in SQL made
# the planner read the expiry index and sort; a second statement on that
# index told whether to sweep).
READ_NS = READ(
    "SELECT participant, field, value, seen, at, expires_at FROM {p}presence WHERE ns = ? ORDER BY participant, field"
)


@dataclass(frozen=True)
class PresenceEntry:
    participant: str
    field: str
    value: Any
    seen: int
    at: int  # the writer's time (ms)
    expires_at: int  # the store's time (ms)


def _live(rows: list[Row], now: int) -> list[PresenceEntry]:
    """``PresenceEntry`` values of the ``READ_NS`` rows that expire after ``now``.

    Each instance gets its ``__dict__`` in one C-level step: the frozen
    dataclass's ``__init__`` sets its six attributes one
    ``object.__setattr__`` call at a time, which was a third of a
    20-field ``read``. The instances are the same (equality,
    ``repr``, pickling and ``dataclasses.replace`` all go through
    ``__dict__``). The integer columns come back as ``int`` from both
    engines.
    """
    loads = orjson.loads
    states = [
        {"participant": who, "field": field, "value": loads(value), "seen": seen, "at": at, "expires_at": expires}
        for who, field, value, seen, at, expires in rows
        if expires > now
    ]
    entries: list[PresenceEntry] = list(map(_new, repeat(PresenceEntry, len(states))))
    deque(map(_set, entries, repeat("__dict__"), states), 0)  # deque(..., 0): run the map, keep nothing
    return entries


_new = object.__new__
_set = object.__setattr__


class Presence:
    """The presence facet of a ``Store`` (see the module docstring)."""

    def __init__(self, engine: Engine, *, max_value_size: int) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        sql = engine.sql
        # By field count (1..FIELD_CHUNK), compiled at the first call with that count.
        self._upserts = ByCount(lambda n: sql(upsert_sql(n)))
        self._deletes = ByCount(lambda n: sql(delete_sql(n)))
        self._sweep = engine.sql(SWEEP)
        self._read = engine.sql(READ_NS)
        self._remove = engine.sql(REMOVE)
        self._sweep_any = engine.sql(SWEEP_ANY)

    def set(self, ns: str, participant: str, values: Mapping[str, Any], *, at_ms: int, seen: int, ttl_ms: int) -> None:
        """Write (or, with ``None``, delete) fields of ``participant`` atomically.

        Every argument is checked before anything is written. The fields go
        out as one statement per ``FIELD_CHUNK`` writes (or ``CHUNK_BYTES``
        of values) and one per ``FIELD_CHUNK`` deletions, several in one
        transaction, none waiting for its answer: on PostgreSQL a set is one
        round trip whatever its size; inside the caller's transaction there
        its statements ride the transaction's next round trip (a failure of
        theirs is raised by the next statement that waits, or by the commit:
        ``Engine.send``).
        """
        ns = text("ns", ns)
        participant = text("participant", participant)
        if not isinstance(values, Mapping):
            fail_type("values", "a mapping of field -> JSON value", values)
        at = as_int64("at_ms", at_ms)
        seen = as_int64("seen", seen)
        ttl = as_int64("ttl_ms", ttl_ms)
        if not 0 <= ttl <= MAX_DURATION_MS:
            fail(f"ttl_ms must be between 0 and {MAX_DURATION_MS}, got {ttl}")
        upserts: list[tuple[str, bytes]] = []
        deletes: list[str] = []
        max_value_size = self.max_value_size
        for field, value in values.items():
            if value is None:
                deletes.append(text("field", field))
            else:
                upserts.append((text("field", field), dump_json(f"values[{field!r}]", value, max_value_size)))
        if not upserts and not deletes:
            return
        engine = self._engine
        expires = engine.now_ms() + ttl
        # Several statements in a transaction of their own (or the caller's): one set stays atomic.
        statements = [
            (self._upserts[end - start], (ns, participant, seen, at, expires, *chain.from_iterable(upserts[start:end])))
            for start, end in chunk_bounds((len(value) for _field, value in upserts), FIELD_CHUNK, CHUNK_BYTES)
        ]
        statements += [
            (self._deletes[len(chunk)], (ns, participant, *chunk, at))
            for chunk in (deletes[start : start + FIELD_CHUNK] for start in range(0, len(deletes), FIELD_CHUNK))
        ]
        if len(statements) == 1:
            engine.send(*statements[0])
            return
        with engine.transaction():
            for statement, params in statements:
                engine.send(statement, params)

    def read(self, ns: str) -> list[PresenceEntry]:
        """The live fields of the namespace, by participant then field."""
        if type(ns) is not str or not ns.isascii() or len(ns) > MAX_NAME_SIZE or "\x00" in ns:
            ns = text("ns", ns)  # the common case checked inline, the rest (and the errors) by text()
        engine = self._engine
        now = engine.now_ms()
        rows = engine.all(self._read, (ns,))
        entries = _live(rows, now)
        # Cleanup in passing, outside transactions only (a read inside one,
        # a read-only one included, must not write) and only when a row
        # has expired: a read never waits for the write lock otherwise.
        if len(entries) < len(rows) and not engine.in_transaction():
            try:
                engine.execute(self._sweep, (ns, now))
            except DurastateError:
                pass  # cleanup only: the expired rows were left out of the result anyway
        return entries

    def remove(self, ns: str, participant: str) -> int:
        """Remove every field of ``participant`` in ``ns`` now, whatever their times; return how many.

        Unlike ``set`` with ``None`` values (a write that loses to a newer
        one), this is the participant leaving: nothing of it is kept, no
        tombstone either (an older ``set`` arriving later writes again).
        """
        return self._engine.execute(self._remove, (text("ns", ns), text("participant", participant)))

    def sweep_expired(self, *, limit: int | None = None) -> int:
        """Delete expired fields of every namespace (``read`` sweeps only its own); return how many.

        In batches of ``durastate._retention.BATCH`` rows, each its own short
        commit, at most ``limit`` in all.
        """
        limit = as_limit("limit", limit)
        engine = self._engine
        removed = 0
        while limit is None or removed < limit:
            want = BATCH if limit is None else min(BATCH, limit - removed)
            n = engine.execute(self._sweep_any, (engine.now_ms(), want))
            removed += n
            if n < want:
                break
        return removed

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
        now = engine.now_ms()
        return _live(engine.all(self._read, (ns,)), now)


LIST_NAMESPACES = {a: distinct_sql("presence", "ns", after=a) for a in (False, True)}
