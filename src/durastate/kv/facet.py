"""The ``KV`` class: the kv facet of a ``Store`` (the model: ``durastate.kv``); housekeeping, retention and
listing: ``upkeep``."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._chunks import chunk_bounds
from .._paging import stream_pages
from .._validate import (
    INT64_MAX,
    INT64_MIN,
    PAGE_SIZE,
    as_bytes,
    as_int64,
    as_limit,
    as_list,
    as_seconds,
    fail,
    fail_type,
    shown,
)
from ..engines.base import ByCount
from ..errors import StoreUnavailable
from .scoped import ScopedKV
from .statements import (
    APPEND,
    COUNTER_ADD,
    COUNTER_DELETE,
    COUNTER_GET,
    COUNTER_SET,
    DELETE_ALL,
    DRAIN,
    GET,
    KEY_CHUNK,
    LOG_PAGE,
    NO_LIVE_VALUE,
    PRUNE_DUE,
    PUT,
    PUT_CHUNK,
    PUT_CHUNK_BYTES,
    PUT_IF_ABSENT,
    PUT_PERSISTENT,
    TAKE,
    TAKE_FIRST,
    TAKE_LAST,
    delete_keys_sql,
    delete_range_sql,
    get_many_sql,
    put_many_sql,
    scan_sql,
)
from .upkeep import PRUNE_BATCH, Upkeep

if TYPE_CHECKING:
    from ..engines.base import SQL, Engine, Statement

# Housekeeping in passing: every PRUNE_EVERY writes of this process, one
# bounded sweep of up to PRUNE_BATCH expired values (upkeep).
PRUNE_EVERY = 256


class KV(Upkeep):
    """The kv facet of a ``Store`` (the model: the ``durastate.kv`` docstring); housekeeping, retention and
    listing: ``Upkeep``.

    Every method validates its arguments first and raises
    ``durastate.InvalidRequest`` naming the bad one; a rejected call writes
    nothing. Batch writes are atomic: all items land or none does.
    """

    def __init__(self, engine: Engine, *, max_value_size: int, max_key_size: int) -> None:
        self._engine = engine
        self.max_value_size = max_value_size
        self.max_key_size = max_key_size
        self._no_limit = engine.no_limit
        sql = engine.sql
        self._get = sql(GET)
        self._put = sql(PUT)
        self._put_persistent = sql(PUT_PERSISTENT)
        self._drain = sql(DRAIN)
        self._delete_all = sql(DELETE_ALL)
        self._prune_due = sql(PRUNE_DUE)
        self._no_live_value = sql(NO_LIVE_VALUE)
        self._append = sql(APPEND)
        self._log_page = sql(LOG_PAGE)
        self._counter_get = sql(COUNTER_GET)
        self._counter_add = sql(COUNTER_ADD)
        self._counter_set = sql(COUNTER_SET)
        self._counter_delete = sql(COUNTER_DELETE)
        self._scan = {
            (s, e, r): sql(scan_sql(s, e, r)) for s in (False, True) for e in (False, True) for r in (False, True)
        }
        self._delete_range = {(s, e): sql(delete_range_sql(s, e)) for s in (False, True) for e in (False, True)}
        # By key count (1..KEY_CHUNK), compiled at the first call with that count.
        self._get_many = ByCount(lambda n: sql(get_many_sql(n)))
        self._delete_keys = ByCount(lambda n: sql(delete_keys_sql(n)))
        # put_many by (deadline, if_absent), then pair count.
        self._put_many_sql = {
            (deadline, if_absent): ByCount(functools.partial(_compile_put_many, sql, deadline, if_absent))
            for deadline in (False, True)
            for if_absent in (False, True)
        }
        self._writes_until_prune = PRUNE_EVERY
        self._init_upkeep(sql)

    # -- helpers ---------------------------------------------------------------

    def _address(self, scope: Any, ns: Any, key: Any) -> tuple[bytes, bytes, bytes]:
        if type(scope) is not bytes:
            scope = as_bytes("scope", scope)
        if type(ns) is not bytes:
            ns = as_bytes("ns", ns)
        if type(key) is not bytes:
            key = as_bytes("key", key)
        if len(scope) + len(ns) + len(key) > self.max_key_size:
            fail(
                f"scope + ns + key is {len(scope) + len(ns) + len(key)} bytes; "
                f"the limit is max_key_size={self.max_key_size}"
            )
        return scope, ns, key

    def _keys(self, scope: bytes, ns: bytes, keys: Any) -> list[bytes]:
        """``keys`` as a new list of ``bytes``, each checked like ``_address``.

        The common case (every key already ``bytes`` and short enough) is
        checked in two quick passes over the list instead of a method call
        per key, which used to be most of a batch read's Python time.
        """
        wanted = as_list("keys", keys)
        if not wanted:
            return wanted
        for key in wanted:
            if type(key) is not bytes:
                wanted = [k if type(k) is bytes else as_bytes("key", k) for k in wanted]
                break
        if len(scope) + len(ns) + max(map(len, wanted)) > self.max_key_size:
            for key in wanted:
                self._address(scope, ns, key)  # raises, naming the size
        return wanted

    def _value(self, name: str, value: Any) -> bytes:
        data: bytes = value if type(value) is bytes else as_bytes(name, value)
        if len(data) > self.max_value_size:
            fail(f"{name} is {len(data)} bytes; the limit is max_value_size={self.max_value_size}")
        return data

    def _deadline(self, ttl: Any) -> int | None:
        """The expiry instant (ms) of a value written now with ``ttl`` seconds.

        At least 1 ms ahead, so a positive ttl below the clock's resolution
        is not expired on arrival; refused when it would not fit the int64
        column (an astronomically large ttl is a bug, not "forever").
        """
        if ttl is None:
            return None
        seconds = as_seconds("ttl", ttl, allow_zero=False)
        # Compared before the product, which overflows to infinity near float's limit.
        if seconds > INT64_MAX / 1000 or (deadline := self._engine.now_ms() + max(1, int(seconds * 1000))) > INT64_MAX:
            fail(
                f"ttl={shown(ttl)} seconds puts the deadline past the 64-bit millisecond range; omit ttl for no expiry"
            )
        return deadline

    def _after_write(self) -> None:
        """Count a write; every ``PRUNE_EVERY`` writes, drop a few expired keys."""
        self._writes_until_prune -= 1
        if self._writes_until_prune <= 0:
            self._writes_until_prune = PRUNE_EVERY
            self._prune_in_passing()

    def _prune_in_passing(self) -> None:
        """The housekeeping sweep of ``_after_write``; it never fails the write.

        The write has already happened (committed, outside a transaction),
        so a busy or unreachable store here must not make the caller believe
        it failed: the sweep is skipped and a later write tries again. The
        savepoint keeps a failed sweep from dooming a caller's transaction.
        """
        engine = self._engine
        try:
            # Outside a transaction only (a failed read there dooms nothing,
            # and inside one the write lock is held already): nothing
            # expired means no transaction and no write lock.
            if not engine.in_transaction() and engine.one(self._prune_due, (engine.now_ms(),)) is None:
                return
            with engine.transaction():
                self.prune_expired(PRUNE_BATCH)
        except StoreUnavailable:
            pass

    # -- values ----------------------------------------------------------------

    def get(self, scope: bytes, ns: bytes, key: bytes) -> bytes | None:
        """The value at ``(scope, ns, key)``, or ``None`` if absent or expired."""
        if (
            type(scope) is not bytes
            or type(ns) is not bytes
            or type(key) is not bytes
            or len(scope) + len(ns) + len(key) > self.max_key_size
        ):
            scope, ns, key = self._address(scope, ns, key)
        row = self._engine.one(self._get, (scope, ns, key))
        if row is None:
            return None
        if row[1] is not None and row[1] <= self._engine.now_ms():
            return None
        value: bytes = row[0]
        return value

    def get_many(self, scope: bytes, ns: bytes, keys: Sequence[bytes]) -> list[bytes | None]:
        """Values parallel to ``keys`` (``None`` for misses), read consistently."""
        scope = as_bytes("scope", scope)
        ns = as_bytes("ns", ns)
        wanted = self._keys(scope, ns, keys)
        if not wanted:
            return []
        engine = self._engine
        if len(wanted) <= KEY_CHUNK:
            # Repeated keys need no removal: IN (...) matches each row once.
            rows = engine.all(self._get_many[len(wanted)], (scope, ns, *wanted))
        else:
            unique = list(dict.fromkeys(wanted))
            if len(unique) <= KEY_CHUNK:
                rows = engine.all(self._get_many[len(unique)], (scope, ns, *unique))
            else:
                rows = []
                with engine.read_transaction():  # one snapshot across chunks, no write lock
                    for i in range(0, len(unique), KEY_CHUNK):
                        chunk = unique[i : i + KEY_CHUNK]
                        rows.extend(engine.all(self._get_many[len(chunk)], (scope, ns, *chunk)))
        found: dict[bytes, bytes] = {key: value for key, value, expires_at in rows if expires_at is None}
        if len(found) < len(rows):
            # Some rows carry a deadline: only those need the clock.
            now = engine.now_ms()
            for key, value, expires_at in rows:
                if expires_at is not None and expires_at > now:
                    found[key] = value
        return list(map(found.get, wanted))

    def put(self, scope: bytes, ns: bytes, key: bytes, value: bytes, *, ttl: float | None = None) -> None:
        """Store ``value`` at ``(scope, ns, key)``, replacing any previous value.

        ``ttl`` (seconds > 0) makes the value expire; without it the value
        never expires (an earlier deadline on the same key is removed).
        """
        if (
            type(scope) is not bytes
            or type(ns) is not bytes
            or type(key) is not bytes
            or len(scope) + len(ns) + len(key) > self.max_key_size
        ):
            scope, ns, key = self._address(scope, ns, key)
        if type(value) is not bytes or len(value) > self.max_value_size:
            value = self._value("value", value)
        # send: inside a transaction on PostgreSQL the upsert rides the next round trip (nobody reads its count).
        # The blobs as the engine binds them cheapest (the statements are engine_blobs).
        engine = self._engine
        blob = engine.blob_binding()
        if ttl is None:
            engine.send(self._put_persistent, (blob(scope), blob(ns), blob(key), blob(value)))
        else:
            engine.send(self._put, (blob(scope), blob(ns), blob(key), blob(value), self._deadline(ttl)))
        # _after_write, inlined: put is the hottest write.
        self._writes_until_prune -= 1
        if self._writes_until_prune <= 0:
            self._writes_until_prune = PRUNE_EVERY
            self._prune_in_passing()

    def put_many(
        self,
        scope: bytes,
        ns: bytes,
        items: Iterable[tuple[bytes, bytes]],
        *,
        ttl: float | None = None,
        if_absent: bool = False,
    ) -> int:
        """Upsert every ``(key, value)`` pair atomically (later duplicates win); return how many keys were stored.

        ``if_absent=True`` stores only the pairs whose key holds no live
        value (an expired one counts as absent, as in ``put_if_absent``) and
        leaves the others as they are; of duplicates in ``items`` the first
        wins. One statement per ``PUT_CHUNK`` pairs or ``PUT_CHUNK_BYTES`` of
        values (a batch within both needs no transaction), no read. The count: without ``if_absent`` every
        distinct key of ``items``; with it, the keys that were absent (which
        ones is not reported: ``put_if_absent`` tells, one key at a time), so
        a writer that must store all or none compares it with its batch and
        raises inside its transaction. That count is the statement's: inside
        a transaction on PostgreSQL an ``if_absent`` batch waits for its
        answer, where the plain upsert rides the next round trip.
        """
        return self._put_many(scope, ns, items, ttl, if_absent, True)

    def _put_many_sent(self, scope: bytes, ns: bytes, items: Iterable[tuple[bytes, bytes]], *, if_absent: bool) -> None:
        """``put_many`` whose count nobody reads (no ``ttl``): inside a PostgreSQL transaction an ``if_absent``
        batch rides the next round trip as the plain upsert does.

        For an integration's pure write transaction run by
        ``AsyncCalls.transact_repeatable`` (LangGraph's ``aput_writes``):
        there a statement whose answer is waited for abandons the attempt,
        and the whole transaction runs again on a worker thread.
        """
        self._put_many(scope, ns, items, None, if_absent, False)

    def _put_many(
        self,
        scope: bytes,
        ns: bytes,
        items: Iterable[tuple[bytes, bytes]],
        ttl: float | None,
        if_absent: bool,
        counted: bool,
    ) -> int:
        """``put_many``, its count read (``counted``) or not (``_put_many_sent``): the checks, then ``_put_params``."""
        if type(scope) is not bytes:
            scope = as_bytes("scope", scope)
        if type(ns) is not bytes:
            ns = as_bytes("ns", ns)
        if if_absent is not False and if_absent is not True:
            fail_type("if_absent", "a bool", if_absent)
        expires_at = None if ttl is None else self._deadline(ttl)
        key_room = self.max_key_size - len(scope) - len(ns)
        max_value = self.max_value_size
        # Key -> value, one per key (a statement may not touch a row twice):
        # the last of duplicates, or with if_absent the first. The statement's
        # parameters are gathered on the way (rebuilt from ``pairs`` if a key
        # repeats or with a deadline).
        pairs: dict[bytes, bytes] = {}
        keep = pairs.setdefault if if_absent else pairs.__setitem__
        listed = items if type(items) is list else as_list("items", items)
        # Every blob as the engine binds it cheapest (its statements are engine_blobs: put_many_sql); scope
        # and ns made once for all rows (on SQLite a bytearray the driver binds as it is). Asked of the engine
        # here, not kept: KV has 29 instance attributes, and at 30 CPython 3.11 no longer keeps them inline
        # (LOAD_ATTR_WITH_HINT): every attribute read of the facet slows (~1.2k instructions a put_many,
        # callgrind).
        blob = self._engine.blob_binding()
        bound_scope, bound_ns = blob(scope), blob(ns)
        params: list[object] = []
        for i, item in enumerate(listed):
            # Fast path: a (bytes, bytes) tuple within the limits.
            if type(item) is tuple and len(item) == 2:
                key, value = item
                if type(key) is bytes and type(value) is bytes and len(key) <= key_room and len(value) <= max_value:
                    keep(key, value)
                    params += (bound_scope, bound_ns, blob(key), blob(value))
                    continue
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                fail(f"items[{i}] must be a (key, value) pair, got {shown(item)}")
            key, value = self._address(scope, ns, item[0])[2], self._value(f"items[{i}] value", item[1])
            keep(key, value)
            params += (bound_scope, bound_ns, blob(key), blob(value))
        if not pairs:
            return 0
        statements = self._put_many_sql[(expires_at is not None, if_absent)]
        if expires_at is not None:
            params = [
                part
                for key, value in pairs.items()
                for part in (bound_scope, bound_ns, blob(key), blob(value), expires_at)
            ]
            width = 5
        else:
            width = 4
            if len(params) != len(pairs) * 4:  # a key repeated: one row per key
                params = [
                    part for key, value in pairs.items() for part in (bound_scope, bound_ns, blob(key), blob(value))
                ]
        return self._put_params(statements, params, len(pairs), width, if_absent, counted)

    def _put_groups(self, scope: bytes, groups: Sequence[tuple[bytes, list[tuple[bytes, bytes]]]]) -> int:
        """``put_many(scope, ns, pairs, if_absent=True)`` of each ``(ns, pairs)`` group, all in one statement (per
        ``PUT_CHUNK`` pairs): how many pairs were stored.

        For an integration writing rows of two namespaces at once (the
        eventsourcing recorders' event and notification rows, whose count
        tells a duplicate): one statement where ``put_many`` needs one a
        namespace. Each pair is checked as ``put_many`` checks it
        (``InvalidRequest`` before any statement runs), and the keys of a
        group must be distinct: the caller's to ensure (``put_many``
        keeps the first of repeats; here a repeat makes PostgreSQL refuse
        the statement and SQLite count it as not stored). No ``ttl``.
        """
        if type(scope) is not bytes:
            scope = as_bytes("scope", scope)
        blob = self._engine.blob_binding()
        bound_scope = blob(scope)
        max_value = self.max_value_size
        params: list[object] = []
        for ns, pairs in groups:
            if type(ns) is not bytes:
                ns = as_bytes("ns", ns)
            key_room = self.max_key_size - len(scope) - len(ns)
            bound_ns = blob(ns)
            for item in pairs:
                if type(item) is tuple and len(item) == 2:  # put_many's fast path's checks
                    key, value = item
                    if type(key) is bytes and type(value) is bytes and len(key) <= key_room and len(value) <= max_value:
                        params += (bound_scope, bound_ns, blob(key), blob(value))
                        continue
                # Anything else is checked (and copied to bytes) as put_many checks it: its message names the limit.
                if not isinstance(item, (tuple, list)) or len(item) != 2:
                    fail(f"pairs of ns {ns!r} must be (key, value) pairs, got {shown(item)}")
                key, value = self._address(scope, ns, item[0])[2], self._value("value", item[1])
                params += (bound_scope, bound_ns, blob(key), blob(value))
        return self._put_params(self._put_many_sql[(False, True)], params, len(params) // 4, 4, True, True)

    def _put_params(
        self, statements: ByCount, params: list[object], rows: int, width: int, if_absent: bool, counted: bool
    ) -> int:
        """``put_many``'s statements run over ``params`` (``rows`` rows of ``width`` parameters each), one per
        ``PUT_CHUNK`` rows or ``PUT_CHUNK_BYTES`` of values (several: atomic in the caller's transaction or one of
        their own); how many rows were
        stored (with ``if_absent`` and ``counted`` the statements' count, else ``rows``). Not ``counted``: every
        statement is sent (inside a transaction on PostgreSQL it rides the next round trip)."""
        if not rows:
            return 0
        engine = self._engine
        stored = rows
        # The common case, without the general path's list and bound method (the value is each row's 4th).
        if rows <= PUT_CHUNK and (rows == 1 or sum(map(len, params[3::width])) <= PUT_CHUNK_BYTES):  # type: ignore[arg-type]  # blobs
            if if_absent:
                params.append(engine.now_ms())
                if counted:
                    stored = engine.execute(statements[rows], params)
                else:
                    engine.send(statements[rows], params)
            else:
                engine.send(statements[rows], params)
        else:
            run: Callable[[str, Any], Any] = engine.execute if if_absent and counted else engine.send
            tail = (engine.now_ms(),) if if_absent else ()
            # Several statements: atomic in the caller's transaction or one of their own.
            with engine.transaction() if not engine.in_transaction() else contextlib.nullcontext():
                sizes = map(len, params[3::width])  # type: ignore[arg-type]  # blobs
                counts = [
                    run(statements[end - start], (*params[start * width : end * width], *tail))
                    for start, end in chunk_bounds(sizes, PUT_CHUNK, PUT_CHUNK_BYTES)
                ]
            if if_absent and counted:
                stored = sum(counts)
        # _after_write, inlined.
        self._writes_until_prune -= 1
        if self._writes_until_prune <= 0:
            self._writes_until_prune = PRUNE_EVERY
            self._prune_in_passing()
        return stored

    def scan(
        self,
        scope: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Live ``(key, value)`` pairs with ``start <= key < end``, in key order.

        Either bound may be ``None`` (open). ``reverse=True`` yields
        descending keys. ``limit`` caps the number of pairs (``None``: all).
        The first page is read before this returns, so argument errors and
        an unavailable store surface at the call, not at the first ``next``.
        """
        if type(scope) is not bytes:
            scope = as_bytes("scope", scope)
        if type(ns) is not bytes:
            ns = as_bytes("ns", ns)
        if start is not None and type(start) is not bytes:
            start = as_bytes("start", start)
        if end is not None and type(end) is not bytes:
            end = as_bytes("end", end)
        if limit is not None and (type(limit) is not int or not 0 < limit <= PAGE_SIZE):
            limit = as_limit("limit", limit)
        if reverse is not False and reverse is not True:
            fail_type("reverse", "a bool", reverse)
        if limit == 0 or (start is not None and end is not None and start >= end):
            return iter(())
        engine = self._engine
        statements = self._scan
        if limit is not None and limit <= PAGE_SIZE:
            # One page holds every row wanted: read it here, without the pager's closure and calls.
            return iter(
                engine.all(
                    statements[(start is not None, end is not None, reverse)],
                    _scan_params(scope, ns, start, end, engine.now_ms(), limit),
                )
            )

        def fetch(last: tuple[bytes, bytes] | None, want: int) -> list[tuple[bytes, bytes]]:
            nonlocal start, end
            if last is not None:
                if reverse:
                    end = last[0]  # exclusive already
                else:
                    start = last[0] + b"\x00"  # the next possible key after the last one
            return engine.all(
                statements[(start is not None, end is not None, reverse)],
                _scan_params(scope, ns, start, end, engine.now_ms(), want),
            )

        return stream_pages(fetch, limit, PAGE_SIZE)

    def drain(self, scope: bytes, ns: bytes) -> list[tuple[bytes, bytes]]:
        """Atomically remove every pair of the namespace and return the live ones.

        One statement: a concurrent writer's pair is either drained here or
        survives for the next drain, never lost in between. Sorted by key.
        """
        scope = as_bytes("scope", scope)
        ns = as_bytes("ns", ns)
        rows = self._engine.all(self._drain, (scope, ns))
        if not rows:
            return []
        now = self._engine.now_ms()
        live = [(k, v) for k, v, exp in rows if exp is None or exp > now]
        live.sort()
        return live

    def take(self, scope: bytes, ns: bytes, key: bytes) -> bytes | None:
        """Remove the value at ``(scope, ns, key)`` and return it, in one statement.

        ``None`` when absent or expired (an expired row is removed too). Of
        several concurrent ``take`` calls on one key, exactly one gets the
        value; a ``put`` racing with it is either taken or survives.
        """
        scope, ns, key = self._address(scope, ns, key)
        engine = self._engine
        row = engine.one(engine.sql(TAKE), (scope, ns, key))
        if row is None or (row[1] is not None and row[1] <= engine.now_ms()):
            return None
        value: bytes = row[0]
        return value

    def take_first(self, scope: bytes, ns: bytes) -> tuple[bytes, bytes] | None:
        """Remove the live value with the smallest key in ``(scope, ns)`` and return ``(key, value)``, in one
        statement; ``None`` when the namespace holds none (expired values are passed over and left to pruning).

        Of concurrent takers each gets a different pair (on PostgreSQL a
        pair another taker's statement holds is skipped for the next one),
        and a pair a taker got is gone for everyone. A FIFO pop over keys
        that sort in arrival order; ``take_last`` is the LIFO one.
        """
        return self._take_edge(TAKE_FIRST, scope, ns)

    def take_last(self, scope: bytes, ns: bytes) -> tuple[bytes, bytes] | None:
        """``take_first`` of the greatest key: remove the newest pair (keys in arrival order) and return it."""
        return self._take_edge(TAKE_LAST, scope, ns)

    def _take_edge(self, statement: Statement, scope: Any, ns: Any) -> tuple[bytes, bytes] | None:
        if type(scope) is not bytes:
            scope = as_bytes("scope", scope)
        if type(ns) is not bytes:
            ns = as_bytes("ns", ns)
        engine = self._engine
        # Compiled at the call, as take's: KV keeps no more attributes (see put_many).
        row = engine.one(engine.sql(statement), (scope, ns, scope, ns, engine.now_ms()))
        return None if row is None else (bytes(row[0]), bytes(row[1]))

    def put_if_absent(self, scope: bytes, ns: bytes, key: bytes, value: bytes, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if the key holds no live value; True if it was stored.

        One statement: of several concurrent callers on one key exactly one
        gets True. An expired value counts as absent and is replaced.
        ``ttl`` as for ``put``.
        """
        scope, ns, key = self._address(scope, ns, key)
        value = self._value("value", value)
        expires_at = self._deadline(ttl)
        engine = self._engine
        row = engine.one(engine.sql(PUT_IF_ABSENT), (scope, ns, key, value, expires_at, engine.now_ms()))
        self._after_write()
        return row is not None

    def require_absent(self, scope: bytes, ns: bytes, key: bytes) -> None:
        """Fail the open transaction unless ``(scope, ns, key)`` holds no live value (an expired one is absent).

        For a writer that goes in one flight when its key is new and takes a
        slower, precise path when it is not (``engines.deferred``): on
        PostgreSQL the check goes out with the transaction's next round trip,
        and ``RequirementFailed`` (a ``durastate.Conflict``) is raised by the
        next statement that waits, the release of a savepoint around it, or
        the commit; on SQLite at once. Either way the block it leaves rolls
        back. The check is made when the statement runs: a decision that must
        hold until the commit needs a lock taken before it. ``InvalidRequest``
        outside a transaction (it would fail nothing).
        """
        scope, ns, key = self._address(scope, ns, key)
        engine = self._engine
        if not engine.in_transaction():
            fail("require_absent needs an open transaction (store.transaction()): outside one it would fail nothing")
        engine.require(self._no_live_value, (scope, ns, key, engine.now_ms()), "the key holds no value")

    def delete(
        self,
        scope: bytes,
        ns: bytes,
        keys: Sequence[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        all: bool = False,
    ) -> int:
        """Delete the listed ``keys``, or the range ``[start, end)``, or ``all``.

        Exactly one of the three forms must be given (a bare
        ``delete(scope, ns)`` is refused, so a forgotten argument cannot wipe
        a namespace). Returns the number of rows removed (expired rows not
        yet pruned count too).
        """
        scope = as_bytes("scope", scope)
        ns = as_bytes("ns", ns)
        if not isinstance(all, bool):
            fail_type("all", "a bool", all)
        has_range = start is not None or end is not None
        forms = (keys is not None) + has_range + all
        if forms != 1:
            fail("delete needs exactly one of: keys=[...], a start=/end= range, or all=True")
        engine = self._engine
        if all:
            return engine.execute(self._delete_all, (scope, ns))
        if keys is not None:
            unique = list(dict.fromkeys(self._address(scope, ns, k)[2] for k in as_list("keys", keys)))
            if not unique:
                return 0
            if len(unique) <= KEY_CHUNK:
                return engine.execute(self._delete_keys[len(unique)], (scope, ns, *unique))
            removed = 0
            with engine.transaction():
                for i in range(0, len(unique), KEY_CHUNK):
                    chunk = unique[i : i + KEY_CHUNK]
                    removed += engine.execute(self._delete_keys[len(chunk)], (scope, ns, *chunk))
            return removed
        if start is not None:
            start = as_bytes("start", start)
        if end is not None:
            end = as_bytes("end", end)
        params: list[bytes] = [scope, ns]
        if start is not None:
            params.append(start)
        if end is not None:
            params.append(end)
        return engine.execute(self._delete_range[(start is not None, end is not None)], params)

    # -- logs ------------------------------------------------------------------

    def append(self, scope: bytes, ns: bytes, key: bytes, value: bytes) -> int:
        """Append ``value`` to the log of ``(scope, ns, key)``; return its ordinal.

        Ordinals are unique and increasing across every log of the store and
        are never reused, even after ``clear``.
        """
        scope, ns, key = self._address(scope, ns, key)
        value = self._value("value", value)
        row = self._engine.one(self._append, (scope, ns, key, value, self._engine.now_ms()))
        assert row is not None
        ordinal: int = row[0]
        return ordinal

    def log(
        self,
        scope: bytes,
        ns: bytes,
        key: bytes,
        *,
        after: int = 0,
        limit: int | None = None,
    ) -> Iterator[tuple[int, bytes]]:
        """``(ordinal, value)`` entries of one log with ordinal > ``after``, in order.

        Pass the last ordinal seen as ``after`` to continue. Ordinals start
        at 1, so ``after=0`` (or any negative number) reads from the start.
        Streamed in pages like ``scan``.
        """
        scope, ns, key = self._address(scope, ns, key)
        after = as_int64("after", after)
        limit = as_limit("limit", limit)
        if limit == 0:
            return iter(())
        engine = self._engine
        statement = self._log_page

        def fetch(last: tuple[int, bytes] | None, want: int) -> list[tuple[int, bytes]]:
            return engine.all(statement, (scope, ns, key, after if last is None else last[0], want))

        return stream_pages(fetch, limit, PAGE_SIZE)

    # -- counters --------------------------------------------------------------

    def incr(self, scope: bytes, ns: bytes, key: bytes, delta: int = 1) -> int:
        """Atomically add ``delta`` (absent counters start at 0); return the sum.

        Refused with ``InvalidRequest`` (and nothing changed) when the sum
        would leave the signed 64-bit range.
        """
        scope, ns, key = self._address(scope, ns, key)
        if type(delta) is not int or not INT64_MIN <= delta <= INT64_MAX:
            delta = as_int64("delta", delta)
        low = INT64_MIN - delta if delta < 0 else INT64_MIN
        high = INT64_MAX - delta if delta > 0 else INT64_MAX
        row = self._engine.one(self._counter_add, (scope, ns, key, delta, low, high))
        if row is None:
            fail(f"incr by {delta} would overflow the signed 64-bit counter; it was left unchanged")
        total: int = row[0]
        return total

    def counter(self, scope: bytes, ns: bytes, key: bytes) -> int:
        """The counter's value; 0 when it does not exist."""
        scope, ns, key = self._address(scope, ns, key)
        row = self._engine.one(self._counter_get, (scope, ns, key))
        return 0 if row is None else int(row[0])

    def set_counter(self, scope: bytes, ns: bytes, key: bytes, value: int) -> None:
        """Overwrite the counter with ``value``."""
        scope, ns, key = self._address(scope, ns, key)
        self._engine.execute(self._counter_set, (scope, ns, key, as_int64("value", value)))

    def delete_counter(self, scope: bytes, ns: bytes, key: bytes) -> bool:
        """Remove the counter; True if it existed."""
        scope, ns, key = self._address(scope, ns, key)
        return self._engine.execute(self._counter_delete, (scope, ns, key)) > 0

    # -- views -------------------------------------------------------------------

    def scope(self, scope: bytes) -> ScopedKV:
        """A view of this facet with ``scope`` bound (see ``ScopedKV``)."""
        return ScopedKV(self, as_bytes("scope", scope))


def _scan_params(scope: bytes, ns: bytes, start: bytes | None, end: bytes | None, now: int, want: int) -> list[Any]:
    params: list[Any] = [scope, ns]
    if start is not None:
        params.append(start)
    if end is not None:
        params.append(end)
    params.append(now)
    params.append(want)
    return params


def _compile_put_many(sql: Callable[[Any], SQL], deadline: bool, if_absent: bool, count: int) -> SQL:
    return sql(put_many_sql(count, deadline=deadline, if_absent=if_absent))
