"""Housekeeping, retention and listing of the kv facet (``Upkeep``, a base of ``KV``).

What operators, inspectors, exports and maintenance run, apart from the
data path itself (``facet``: values, logs and counters read and written):
clearing a scope, pruning expired values, trimming logs by age or length,
and listing scopes, namespaces, log keys and counters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._listing import check_limit, distinct_params, distinct_sql, merge_distinct
from .._retention import BATCH, as_age_ms, as_keep, trim_oldest
from .._validate import INT64_MAX, as_bytes, as_limit, fail
from .statements import (
    CLEAR_COUNTERS,
    CLEAR_LOGS,
    CLEAR_VALUES,
    COUNTER_PAGE,
    LISTED_TABLES,
    LOG_DELETE_THROUGH,
    LOG_NTH_NEWEST,
    LOG_OLDEST,
    LOG_TRIM_KEY,
    PRUNE,
)

if TYPE_CHECKING:
    from ..engines.base import SQL, Engine, Statement

# Expired values deleted per statement by prune_expired (and the facet's sweep in passing).
PRUNE_BATCH = 64


class Upkeep:
    """Housekeeping, retention and listing; ``KV`` runs ``_init_upkeep`` when it starts."""

    _engine: Engine

    if TYPE_CHECKING:

        def _address(self, scope: object, ns: object, key: object) -> tuple[bytes, bytes, bytes]: ...

    def _init_upkeep(self, sql: Callable[[Statement], SQL]) -> None:
        self._prune = sql(PRUNE)
        self._clear = (sql(CLEAR_VALUES), sql(CLEAR_LOGS), sql(CLEAR_COUNTERS))
        self._log_oldest = sql(LOG_OLDEST)
        self._log_delete_through = sql(LOG_DELETE_THROUGH)
        self._log_nth_newest = sql(LOG_NTH_NEWEST)
        self._log_trim_key = sql(LOG_TRIM_KEY)

    # -- housekeeping ------------------------------------------------------------

    def clear(self, scope: bytes) -> int:
        """Delete every value, log entry and counter of ``scope``, atomically.

        Returns the total number of rows removed. Queues are not touched.
        """
        scope = as_bytes("scope", scope)
        engine = self._engine
        with engine.transaction():
            return sum(engine.execute(statement, (scope,)) for statement in self._clear)

    def prune_expired(self, limit: int | None = None) -> int:
        """Delete up to ``limit`` expired values (all of them when ``None``).

        Works in bounded batches, each its own short transaction, so a big
        sweep never holds the write lock for long. Returns rows removed.
        """
        limit = as_limit("limit", limit)
        removed = 0
        while limit is None or removed < limit:
            batch = PRUNE_BATCH if limit is None else min(PRUNE_BATCH, limit - removed)
            n = self._engine.execute(self._prune, (self._engine.now_ms(), batch))
            removed += n
            if n < batch:
                break
        return removed

    # -- retention (logs) ---------------------------------------------------------------

    def trim_logs(self, older_than: float, *, limit: int | None = None) -> int:
        """Delete log entries appended more than ``older_than`` seconds ago, in every log.

        From the oldest ordinal up, ``durastate._retention.BATCH`` entries per
        statement (each its own short commit), at most ``limit`` in all;
        returns how many went. Entries appended before durastate recorded
        append times (schema 2 of this facet) count as old. Ordinals are
        never reused: a trimmed log goes on from where it was.
        """
        cutoff = self._engine.now_ms() - as_age_ms("older_than", older_than)
        limit = as_limit("limit", limit)
        return trim_oldest(self._engine, self._log_oldest, self._log_delete_through, cutoff, limit)

    def trim_log(
        self, scope: bytes, ns: bytes, key: bytes, *, keep_last: int | None = None, older_than: float | None = None
    ) -> int:
        """Delete old entries of one log: all but the newest ``keep_last``, and/or those older than ``older_than`` s.

        With both, an entry goes when it is outside the newest ``keep_last``
        *and* older than ``older_than`` (the stricter of the two keeps it).
        One of them is required. Bounded batches; returns how many went.
        """
        scope, ns, key = self._address(scope, ns, key)
        if keep_last is None and older_than is None:
            fail("trim_log() needs keep_last=, older_than= or both")
        engine = self._engine
        # Both checked before either is used: a refused call changes nothing, whichever argument is wrong.
        age_ms = None if older_than is None else as_age_ms("older_than", older_than)
        below = INT64_MAX
        if keep_last is not None:
            keep = as_keep("keep_last", keep_last)
            if keep > INT64_MAX:
                return 0  # no log can hold more entries (nor can the count be bound to a statement)
            row = engine.one(self._log_nth_newest, (scope, ns, key, keep - 1))
            if row is None:
                return 0  # the log holds at most keep_last entries
            below = int(row[0])
        cutoff = INT64_MAX if age_ms is None else engine.now_ms() - age_ms
        removed = 0
        while True:
            n = engine.execute(self._log_trim_key, (scope, ns, key, below, cutoff, BATCH))
            removed += n
            if n < BATCH:
                return removed

    # -- listing (read-only, for inspectors and exports; see durastate._listing) --

    def scopes(self, *, after: bytes | None = None, limit: int = 100) -> list[bytes]:
        """The scopes that hold any value, log entry or counter, in bytes order.

        At most ``limit`` (1..10000) scopes, all greater than ``after``; page
        on by passing the last one back. Not a snapshot; a scope whose only
        rows are expired values not yet pruned is still listed.
        """
        bound = None if after is None else as_bytes("after", after)
        limit = check_limit(limit)
        statements = self._list_scopes[bound is not None]
        params = distinct_params((), bound, limit)
        return merge_distinct(([bytes(r[0]) for r in self._engine.all(s, params)] for s in statements), limit)

    def namespaces(self, scope: bytes, *, after: bytes | None = None, limit: int = 100) -> list[bytes]:
        """The namespaces of ``scope`` (values, logs or counters), like ``scopes``."""
        scope = as_bytes("scope", scope)
        bound = None if after is None else as_bytes("after", after)
        limit = check_limit(limit)
        statements = self._list_namespaces[bound is not None]
        params = distinct_params((scope,), bound, limit)
        return merge_distinct(([bytes(r[0]) for r in self._engine.all(s, params)] for s in statements), limit)

    def log_keys(self, scope: bytes, ns: bytes, *, after: bytes | None = None, limit: int = 100) -> list[bytes]:
        """The keys of ``ns`` that hold a log (one entry or more), in bytes order.

        At most ``limit`` (1..10000) keys, all greater than ``after``; page on
        by passing the last one back. One index seek per key listed (the
        entries themselves are not read: ``log`` reads them). Not a snapshot.
        """
        scope, ns = as_bytes("scope", scope), as_bytes("ns", ns)
        bound = None if after is None else as_bytes("after", after)
        limit = check_limit(limit)
        rows = self._engine.all(self._list_log_keys[bound is not None], distinct_params((scope, ns), bound, limit))
        return [bytes(r[0]) for r in rows]

    def counters(
        self, scope: bytes, ns: bytes, *, after: bytes | None = None, limit: int = 100
    ) -> list[tuple[bytes, int]]:
        """``(key, value)`` of the counters of ``ns``, in key order.

        At most ``limit`` (1..10000), all with a key greater than ``after``;
        page on by passing the last key back. Not a snapshot.
        """
        scope, ns = as_bytes("scope", scope), as_bytes("ns", ns)
        limit = check_limit(limit)
        engine = self._engine
        if after is None:
            rows = engine.all(self._counter_page[False], (scope, ns, limit))
        else:
            rows = engine.all(self._counter_page[True], (scope, ns, as_bytes("after", after), limit))
        return [(bytes(r[0]), int(r[1])) for r in rows]

    @functools.cached_property
    def _list_log_keys(self) -> dict[bool, str]:
        return {a: self._engine.sql(distinct_sql("kv_log", "key", ("scope", "ns"), after=a)) for a in (False, True)}

    @functools.cached_property
    def _counter_page(self) -> dict[bool, str]:
        return {a: self._engine.sql(COUNTER_PAGE[a]) for a in (False, True)}

    @functools.cached_property
    def _list_scopes(self) -> dict[bool, list[str]]:
        return {a: [self._engine.sql(distinct_sql(t, "scope", after=a)) for t in LISTED_TABLES] for a in (False, True)}

    @functools.cached_property
    def _list_namespaces(self) -> dict[bool, list[str]]:
        return {
            a: [self._engine.sql(distinct_sql(t, "ns", ("scope",), after=a)) for t in LISTED_TABLES]
            for a in (False, True)
        }
