"""Route one keyspace over several stores: ``durastate.sharding``.

``ShardedStore`` looks like a ``Store`` (``.kv``, ``.queues``,
``.documents``, ``.events``, ``.presence``, ``transaction(key)``,
``close()``) and sends every call to one of N stores, chosen by a stable
hash of the call's *shard key*:

=============  ==========================================================
facet          shard key
=============  ==========================================================
kv             ``scope``
queues         the queue ``name``
documents      the document ``key`` (or ``document_shard_key(key)``)
events         ``session_id``
presence       the namespace ``ns``
records        not sharded (see below)
=============  ==========================================================

A ``str`` key hashes by its UTF-8 bytes, so the scope ``b"t1"``, the queue
``"t1"`` and the session ``"t1"`` live on the same shard: name what belongs
together alike and it can commit together.

Choice of hash: rendezvous (highest random weight). Each shard has a stable
name (its URL unless you name it); a key goes to the shard with the highest
``blake2b(name, key)``. Adding a shard moves exactly the keys that the new
shard now wins, about 1/(N+1) of them, and removing one moves only that
shard's keys; nothing else ever moves. The hash is keyed by shard *names*,
not positions, so listing the shards in another order changes nothing.

Transactions never span shards (except on Citus, ``durastate.citus``,
where every logical shard is a schema behind one coordinator connection
and a transaction writing several commits atomically: ``atomic=True``),
and the router says so instead of committing half a change: ``with router.transaction(key):`` opens a
transaction on the shard that owns ``key``; a write made through the router
inside it that routes to *another* shard raises ``CrossShardWrite`` and
dooms the block, so it rolls back on its own shard too (even if the caller
catches the error): nothing is committed anywhere. ``documents.lock(*keys)``
is the same transaction and refuses keys that live on different shards.
Reads of other shards inside the block are allowed and see those shards'
committed state (they are not part of the transaction). Writes made on a
shard ``Store`` directly (``router.stores[i]``, or a ``Claim`` handed out by
a shard) are that store's business: the router cannot see them.

Reads that have no single shard key fan out and merge: ``documents.list``,
``iter_keys`` and ``describe(prefix=)``, ``events.list_sessions``,
``events.dead_letters()`` without a session, ``events.lane_backlog``
(summed per lane), ``events.prune`` and
``events.claim_any`` (which visits the shards in turn, starting from a
different one each call, until it has ``limit`` events). Their results are
in the same order and use the same cursors as on one store.

Why records are not sharded: a pi-durable commit is one atomic batch that
may touch several conversations, forks copy documents across conversation
trees, ids are minted from one store-wide counter and point-in-time reads
use one store-wide commit sequence. Their calls name ids and sequence
numbers, never a key a router could hash (``conversation(id)`` does not
say which shard owns ``id``). Splitting them over shards would break the
contract, so ``router.records`` refuses with this reason;
shard records by tenant yourself with ``router.store_for(tenant).records``.
On Citus (``durastate.citus``) the reason stands even though a transaction
may write several shards atomically: each logical shard is a schema with
its own id counter and commit sequence, so two shards mint the same ids
and their commit numbers share no order. ``store_for(tenant).records`` is
a whole records store in that tenant's schema, and its commits may join a
transaction that writes the tenant's other facets (or other shards).
Their retention is per store too: each store's ``maintain()`` (its own
``Retention``) or ``store.records.prune_document_revisions(...)``.

The routed methods are built from the facets' own methods
(``_routed(Facet.method)``), so their signatures and types are the
facets', checked by mypy, and cannot drift from them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import heapq
import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast, overload

from ._closing import ClosesOnExit
from ._listing import merge_distinct
from ._validate import as_bytes, as_name, fail
from .documents import DEFAULT_LIST_LIMIT, DocumentInfo, DocumentPage, Documents, PrefixInfo
from .errors import InvalidRequest
from .events import Events as EventsFacet
from .events import LaneBacklog, SessionPage, StoredEvent
from .facets import FACET_NAMES
from .kv import KV, ScopedKV
from .presence import Presence
from .queues import Queues
from .store import Store

__all__ = ["CrossShardWrite", "ShardedStore", "rendezvous_owner"]

P = ParamSpec("P")
T = TypeVar("T")


class CrossShardWrite(InvalidRequest):
    """A write inside a sharded transaction routes to a shard other than the transaction's."""


def _name_hasher(name: bytes) -> Any:
    """blake2b fed with the shard name: each key's weight continues a copy of it."""
    # Length-prefixed so (name, key) pairs can never collide by concatenation.
    h = hashlib.blake2b(digest_size=8, person=b"durastate")
    h.update(len(name).to_bytes(4, "big"))
    h.update(name)
    return h


def _owner(hashers: Sequence[Any], names: Sequence[bytes], key: bytes) -> int:
    best = -1
    best_weight = -1
    for i, hasher in enumerate(hashers):
        h = hasher.copy()
        h.update(key)
        w = int.from_bytes(h.digest(), "big")
        if w > best_weight or (w == best_weight and names[i] < names[best]):
            best, best_weight = i, w
    return best


def rendezvous_owner(names: Sequence[bytes], key: bytes) -> int:
    """Index in ``names`` of the shard that owns ``key`` (highest weight wins).

    Ties (astronomically unlikely) go to the lower name, so the answer does
    not depend on the order of ``names``. One hash per shard: a router
    keeps the names' hashers and a cache of recent keys (``ShardedStore``).
    """
    return _owner([_name_hasher(name) for name in names], names, key)


# Keys whose owner a router remembers; past it the memory starts over. A
# routing decision hashes the key once per shard (about 1 us each), so at
# 128 logical shards an uncached decision costs more than a local write.
OWNER_CACHE = 65_536


def _shard_key(key: Any, what: str = "shard key") -> bytes:
    return as_name(what, key) if isinstance(key, str) else as_bytes(what, key)


class _Nested:
    """Context managers entered in order and left in reverse, as one."""

    __slots__ = ("_managers", "_stack")

    def __init__(self, managers: list[Any]) -> None:
        self._managers = managers

    def __enter__(self) -> None:
        with contextlib.ExitStack() as stack:
            for manager in self._managers:
                stack.enter_context(manager)
            self._stack = stack.pop_all()

    def __exit__(self, *exc: Any) -> bool | None:
        return self._stack.__exit__(*exc)


class _OpenTransaction:
    """The router transaction open in this context (thread or task)."""

    __slots__ = ("refusal", "router", "shard")

    def __init__(self, router: ShardedStore, shard: int) -> None:
        self.router = router
        self.shard = shard
        self.refusal: CrossShardWrite | None = None


_OPEN: contextvars.ContextVar[_OpenTransaction | None] = contextvars.ContextVar("durastate_shard_tx", default=None)


class ShardTransaction:
    """``with router.transaction(key) as shard_store:`` (see the module docstring).

    Wraps a transaction (or ``documents.lock``) of the owning shard and
    refuses, for its duration, router writes that route elsewhere.
    """

    __slots__ = ("_guard", "_inner", "_router", "_shard", "_token")

    def __init__(self, router: ShardedStore, shard: int, inner: Any) -> None:
        self._router = router
        self._shard = shard
        self._inner = inner

    def __enter__(self) -> Store:
        outer = _OPEN.get()
        if (
            outer is not None
            and outer.router is self._router
            and outer.shard != self._shard
            and not self._router.atomic
        ):
            raise CrossShardWrite(
                f"a transaction on shard {self._router.names[self._shard]!r} cannot open inside one on shard "
                f"{self._router.names[outer.shard]!r}: transactions never span shards"
            )
        self._inner.__enter__()
        self._token: contextvars.Token[_OpenTransaction | None] | None
        if outer is not None and outer.router is self._router:
            self._guard = outer
            self._token = None  # nested: the outer block owns the guard
        else:
            self._guard = _OpenTransaction(self._router, self._shard)
            self._token = _OPEN.set(self._guard)
        return self._router.stores[self._shard]

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _OPEN.reset(self._token)
        refusal = self._guard.refusal
        if exc_type is None and refusal is not None and self._token is not None:
            # A refused cross-shard write was caught inside the block: the
            # change it belonged to is incomplete, so none of it commits.
            doomed = CrossShardWrite(f"sharded transaction rolled back: {refusal}")
            self._inner.__exit__(CrossShardWrite, doomed, None)
            raise doomed
        self._inner.__exit__(exc_type, exc, tb)


def _routed(
    facet: str, *, write: bool
) -> Callable[[Callable[Concatenate[Any, P], T]], Callable[Concatenate[_ShardedFacet, P], T]]:
    """Turn the facet method ``method(self, key, ...)`` into a router method.

    The router method takes the same arguments, picks the store by the
    first one (the shard key) and calls the same method of that store's
    ``facet``. ``write``: refused inside a transaction on another shard.
    """

    def wrap(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[_ShardedFacet, P], T]:
        name = method.__name__
        key_name = list(inspect.signature(method).parameters)[1]

        @functools.wraps(method)
        def call(self: _ShardedFacet, /, *args: P.args, **kwargs: P.kwargs) -> T:
            key = args[0] if args else kwargs.get(key_name)
            store = self._router._route(self._key_of(key), write=write, what=key_name)
            bound: Callable[P, T] = getattr(getattr(store, facet), name)
            return bound(*args, **kwargs)

        return call

    return wrap


class _ShardedFacet:
    """Base of the routed facets: holds the router."""

    __slots__ = ("_router",)

    def __init__(self, router: ShardedStore) -> None:
        self._router = router

    def _key_of(self, key: Any) -> Any:
        return key


_kv_read = _routed("kv", write=False)
_kv_write = _routed("kv", write=True)


class ShardedKV(_ShardedFacet):
    """``store.kv`` routed by ``scope``. Same methods, same contracts."""

    __slots__ = ()

    get = _kv_read(KV.get)
    get_many = _kv_read(KV.get_many)
    scan = _kv_read(KV.scan)
    log = _kv_read(KV.log)
    counter = _kv_read(KV.counter)
    put = _kv_write(KV.put)
    put_many = _kv_write(KV.put_many)
    put_if_absent = _kv_write(KV.put_if_absent)
    require_absent = _kv_write(KV.require_absent)
    take = _kv_write(KV.take)
    take_first = _kv_write(KV.take_first)
    take_last = _kv_write(KV.take_last)
    drain = _kv_write(KV.drain)
    delete = _kv_write(KV.delete)
    clear = _kv_write(KV.clear)
    append = _kv_write(KV.append)
    incr = _kv_write(KV.incr)
    set_counter = _kv_write(KV.set_counter)
    delete_counter = _kv_write(KV.delete_counter)
    namespaces = _kv_read(KV.namespaces)
    log_keys = _kv_read(KV.log_keys)
    counters = _kv_read(KV.counters)

    def scopes(self, *, after: bytes | None = None, limit: int = 100) -> list[bytes]:
        """As ``KV.scopes``, merged over every shard in bytes order (same paging)."""
        return merge_distinct((s.kv.scopes(after=after, limit=limit) for s in self._router.stores), limit)

    trim_log = _kv_write(KV.trim_log)

    def prune_expired(self, limit: int | None = None) -> int:
        """``KV.prune_expired`` on every shard in turn, ``limit`` in all; the total removed."""
        return self._router._on_every_shard(lambda store, left: store.kv.prune_expired(left), limit)

    def trim_logs(self, older_than: float, *, limit: int | None = None) -> int:
        """``KV.trim_logs`` on every shard in turn, ``limit`` in all."""
        return self._router._on_every_shard(lambda store, left: store.kv.trim_logs(older_than, limit=left), limit)

    def scope(self, scope: bytes) -> ScopedKV:
        """A view with ``scope`` bound; its calls are routed (and guarded) like these."""
        as_bytes("scope", scope)
        # ScopedKV only calls KV methods, which this class has with the same signatures.
        return ScopedKV(cast(KV, self), scope)


_queue_read = _routed("queues", write=False)
_queue_write = _routed("queues", write=True)


class ShardedQueues(_ShardedFacet):
    """``store.queues`` routed by queue name. Same methods, same contracts.

    A ``Claim`` belongs to its shard: ``ack``/``nack``/``renew`` go straight
    to it.
    """

    __slots__ = ()

    stats = _queue_read(Queues.stats)
    dead_letters = _queue_read(Queues.dead_letters)
    peek = _queue_read(Queues.peek)
    push = _queue_write(Queues.push)
    pop = _queue_write(Queues.pop)
    claim = _queue_write(Queues.claim)
    clear = _queue_write(Queues.clear)
    redrive = _queue_write(Queues.redrive)
    delete_dead = _queue_write(Queues.delete_dead)
    peek_ready = _queue_read(Queues.peek_ready)
    backlog = _queue_read(Queues.backlog)

    def names(self, *, after: str | bytes | None = None, limit: int = 100) -> list[bytes]:
        """As ``Queues.names``, merged over every shard in bytes order (same paging)."""
        return merge_distinct((s.queues.names(after=after, limit=limit) for s in self._router.stores), limit)

    def expire_dead(self, older_than: float, *, limit: int | None = None) -> int:
        """``Queues.expire_dead`` on every shard in turn, ``limit`` in all."""
        return self._router._on_every_shard(lambda store, left: store.queues.expire_dead(older_than, limit=left), limit)


_doc_read = _routed("documents", write=False)
_doc_write = _routed("documents", write=True)


class ShardedDocuments(_ShardedFacet):
    """``store.documents`` routed by key (or ``document_shard_key(key)``).

    ``list``, ``iter_keys`` and ``describe(prefix=)`` merge every shard;
    ``lock`` needs keys that live on one shard.
    """

    __slots__ = ()

    def _key_of(self, key: Any) -> Any:
        mapper = self._router._document_shard_key
        if mapper is None or not isinstance(key, str):
            return key
        return mapper(key)

    read = _doc_read(Documents.read)
    read_as = _doc_read(Documents.read_as)
    read_raw = _doc_read(Documents.read_raw)
    history = _doc_read(Documents.history)
    describe_history = _doc_read(Documents.describe_history)
    write = _doc_write(Documents.write)
    delete = _doc_write(Documents.delete)
    clear = _doc_write(Documents.clear)

    @overload
    def describe(self, key: str) -> DocumentInfo | None: ...

    @overload
    def describe(self, *, prefix: str) -> PrefixInfo: ...

    def describe(self, key: str | None = None, *, prefix: str | None = None) -> DocumentInfo | PrefixInfo | None:
        """As ``Documents.describe``; ``prefix=`` sums over every shard."""
        if (key is None) == (prefix is None):
            fail("describe() takes a key or prefix=, exactly one of them")
        if key is not None:
            return self._router._route(self._key_of(key), write=False, what="key").documents.describe(key)
        assert prefix is not None
        infos = [store.documents.describe(prefix=prefix) for store in self._router.stores]
        return PrefixInfo(sum(i.count for i in infos), sum(i.size for i in infos))

    def list(self, prefix: str = "", *, limit: int = DEFAULT_LIST_LIMIT, cursor: str | None = None) -> DocumentPage:
        """As ``Documents.list``, merged over every shard in key order (same cursors)."""
        pages = [store.documents.list(prefix, limit=limit, cursor=cursor) for store in self._router.stores]
        merged = list(itertools.islice(heapq.merge(*(p.items for p in pages), key=lambda i: i.key), limit + 1))
        more = len(merged) > limit or any(p.cursor is not None for p in pages)
        items = merged[:limit]
        return DocumentPage(items, items[-1].key if more and items else None)

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with ``prefix`` on every shard, in order, streamed."""
        return heapq.merge(*(store.documents.iter_keys(prefix) for store in self._router.stores))

    def prune_backups(self, keep: int, *, limit: int | None = None) -> int:
        """``Documents.prune_backups`` on every shard in turn, ``limit`` in all."""
        return self._router._on_every_shard(lambda store, left: store.documents.prune_backups(keep, limit=left), limit)

    def prune_history(self, keep: int, *, older_than: float | None = None, limit: int | None = None) -> int:
        """``Documents.prune_history`` on every shard in turn, ``limit`` in all."""
        return self._router._on_every_shard(
            lambda store, left: store.documents.prune_history(keep, older_than=older_than, limit=left), limit
        )

    def lock(self, *keys: str) -> ShardTransaction:
        """``Documents.lock`` on the one shard that owns every key named."""
        if not keys:
            fail("lock() on a ShardedStore needs at least one key: the keys choose the shard")
        router = self._router
        by_shard: dict[int, list[str]] = {}
        for key in keys:
            by_shard.setdefault(router.shard_of(self._key_of(key)), []).append(key)
        if len(by_shard) > 1 and not router.atomic:
            names = sorted(router.names[i] for i in by_shard)
            raise CrossShardWrite(f"lock{keys!r:.200} names keys on several shards ({', '.join(names)})")
        # Atomic stores (one shared transaction): each shard's lock, nested,
        # always in shard order so two lockers never wait for each other in a cycle.
        shards = sorted(by_shard)
        locks = [router.stores[shard].documents.lock(*by_shard[shard]) for shard in shards]
        return ShardTransaction(router, shards[0], locks[0] if len(locks) == 1 else _Nested(locks))


_event_read = _routed("events", write=False)
_event_write = _routed("events", write=True)


class ShardedEvents(_ShardedFacet):
    """``store.events`` routed by ``session_id``; cross-session calls fan out."""

    __slots__ = ("_next_start",)

    def __init__(self, router: ShardedStore) -> None:
        super().__init__(router)
        self._next_start = itertools.count()

    read = _event_read(EventsFacet.read)
    get = _event_read(EventsFacet.get)
    read_state = _event_read(EventsFacet.read_state)
    read_events = _event_read(EventsFacet.read_events)
    read_after = _event_read(EventsFacet.read_after)
    list_snapshots = _event_read(EventsFacet.list_snapshots)
    stream = _event_read(EventsFacet.stream)
    append = _event_write(EventsFacet.append)
    claim_available = _event_write(EventsFacet.claim_available)
    renew_claims = _event_write(EventsFacet.renew_claims)
    complete_attempt = _event_write(EventsFacet.complete_attempt)
    fail_attempt = _event_write(EventsFacet.fail_attempt)
    put_snapshot = _event_write(EventsFacet.put_snapshot)
    redrive = _event_write(EventsFacet.redrive)
    discard = _event_write(EventsFacet.discard)
    delete_session = _event_write(EventsFacet.delete_session)

    def prune_sessions(self, settled_for_ms: int, *, limit: int | None = None) -> int:
        """``Events.prune_sessions`` on every shard in turn, ``limit`` sessions in all."""
        return self._router._on_every_shard(
            lambda store, left: store.events.prune_sessions(settled_for_ms, limit=left), limit
        )

    def claim_any(
        self, holder: str, ttl_ms: int | None = None, *, expires_at_ms: int | None = None, limit: int = 1
    ) -> list[StoredEvent]:
        """As ``Events.claim_any``: shards in turn (a new first shard each call) until ``limit`` are claimed."""
        stores = self._router.stores
        start = next(self._next_start) % len(stores)
        claimed: list[StoredEvent] = []
        for i in range(len(stores)):
            shard = (start + i) % len(stores)
            self._router._check_write(shard)
            claimed += stores[shard].events.claim_any(
                holder, ttl_ms, expires_at_ms=expires_at_ms, limit=limit - len(claimed)
            )
            if len(claimed) >= limit:
                break
        return sorted(claimed, key=lambda e: (e.session_id, e.index))

    def list_sessions(self, prefix: str = "", limit: int = 100, cursor: str | None = None) -> SessionPage:
        """As ``Events.list_sessions``, merged over every shard in id order (same cursors)."""
        pages = [store.events.list_sessions(prefix, limit, cursor) for store in self._router.stores]
        merged = list(
            itertools.islice(heapq.merge(*(p.sessions for p in pages), key=lambda s: s.session_id), limit + 1)
        )
        more = len(merged) > limit or any(p.cursor is not None for p in pages)
        sessions = tuple(merged[:limit])
        return SessionPage(sessions, sessions[-1].session_id if more and sessions else None)

    def dead_letters(
        self, session_id: str | None = None, *, after: tuple[str, int] | int | None = None, limit: int = 100
    ) -> list[StoredEvent]:
        """As ``Events.dead_letters``; without a session, merged over every shard."""
        if session_id is not None:
            return self._router._route(session_id, write=False).events.dead_letters(
                session_id, after=after, limit=limit
            )
        lists = [store.events.dead_letters(after=after, limit=limit) for store in self._router.stores]
        return list(itertools.islice(heapq.merge(*lists, key=lambda e: (e.session_id, e.index)), limit))

    def lane_backlog(self, *, limit: int = 10_000) -> tuple[list[LaneBacklog], bool]:
        """As ``Events.lane_backlog``, summed per lane over every shard (each shard counts up to ``limit``).

        ``ready``, ``expired_claims`` and ``dead`` are the shards' sums,
        ``oldest_ready_at`` the earliest of theirs; the flag is True when
        any shard reached ``limit`` (its counts are then lower bounds).
        """
        lanes: dict[str | None, list[LaneBacklog]] = {}
        capped = False
        for store in self._router.stores:
            found, shard_capped = store.events.lane_backlog(limit=limit)
            capped = capped or shard_capped
            for entry in found:
                lanes.setdefault(entry.lane, []).append(entry)
        merged = []
        for lane, entries in sorted(lanes.items(), key=lambda item: (item[0] is not None, item[0] or "")):
            oldest = [e.oldest_ready_at for e in entries if e.oldest_ready_at is not None]
            merged.append(
                LaneBacklog(
                    lane,
                    sum(e.ready for e in entries),
                    sum(e.expired_claims for e in entries),
                    min(oldest) if oldest else None,
                    sum(e.dead for e in entries),
                )
            )
        return merged, capped

    def prune(self, **options: Any) -> int:
        """``Events.prune`` on every shard (same options); the total deleted."""
        for shard in range(len(self._router.stores)):
            self._router._check_write(shard)
        return sum(store.events.prune(**options) for store in self._router.stores)


_presence_read = _routed("presence", write=False)
_presence_write = _routed("presence", write=True)


class ShardedPresence(_ShardedFacet):
    """``store.presence`` routed by namespace."""

    __slots__ = ()

    read = _presence_read(Presence.read)
    set = _presence_write(Presence.set)
    remove = _presence_write(Presence.remove)

    def sweep_expired(self, *, limit: int | None = None) -> int:
        """``Presence.sweep_expired`` on every shard in turn, ``limit`` in all."""
        return self._router._on_every_shard(lambda store, left: store.presence.sweep_expired(limit=left), limit)

    peek = _presence_read(Presence.peek)

    def namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        """As ``Presence.namespaces``, merged over every shard in code point order."""
        return merge_distinct((s.presence.namespaces(after=after, limit=limit) for s in self._router.stores), limit)


# The router of every facet of the registry (durastate.facets.FACETS), by
# name, or for a facet that is not sharded the reason ``ShardedStore.<name>``
# refuses with. A test fails while a facet of the registry is missing here.
ROUTERS: dict[str, type[_ShardedFacet] | str] = {
    "kv": ShardedKV,
    "queues": ShardedQueues,
    "documents": ShardedDocuments,
    "records": (
        "records are not sharded: their calls name record ids and commit sequence numbers, never a shard key "
        "(an id does not say which shard owns it), and each shard mints its own ids and numbers its own commits "
        "(one counter and one sequence per store, per schema on Citus too), so ids collide across shards and "
        "point-in-time reads and forks across shards have no common order; keep a tenant's records in one "
        "shard: router.store_for(tenant).records"
    ),
    "events": ShardedEvents,
    "presence": ShardedPresence,
}


class ShardedStore(ClosesOnExit):
    """A ``Store``-shaped router over several stores (see the module docstring).

    ``stores``: a sequence of stores (each named by its URL) or a mapping of
    stable shard names to stores. Names must be unique. Name the shards
    when their URLs may change (a moved server keeps its keys only if its
    name stays the same). ``document_shard_key``: maps a document key to
    the key that picks its shard (for example ``lambda k: k.split("/")[0]``
    keeps every document of one tenant together, so ``lock`` can cover
    them); by default the document key itself.
    """

    # The routed facets (ROUTERS), set by __init__.
    kv: ShardedKV
    queues: ShardedQueues
    documents: ShardedDocuments
    events: ShardedEvents
    presence: ShardedPresence

    def __init__(
        self,
        stores: Sequence[Store] | Mapping[str, Store],
        *,
        document_shard_key: Callable[[str], str] | None = None,
        atomic: bool = False,
    ) -> None:
        if isinstance(stores, Mapping):
            named = list(stores.items())
        elif isinstance(stores, Sequence) and not isinstance(stores, (str, bytes)):
            named = [(s.url, s) for s in stores]
        else:
            fail(f"stores must be a list of stores or a mapping name -> store, got {type(stores).__name__}")
        if not named:
            fail("a ShardedStore needs at least one store")
        if document_shard_key is not None and not callable(document_shard_key):
            fail(f"document_shard_key must be callable (str -> str), got {type(document_shard_key).__name__}")
        names: list[bytes] = []
        for name, store in named:
            if not isinstance(store, Store):
                fail(f"shard {name!r} is not a durastate Store (got {type(store).__name__})")
            names.append(as_name("shard name", name))
        if len(set(names)) != len(names):
            fail("shard names must be unique (two stores share a URL? name them with a mapping)")
        if not isinstance(atomic, bool):
            fail(f"atomic must be True or False, got {atomic!r}")
        if atomic and not all(store.engine.capabilities.cross_shard_transactions for _, store in named):
            fail("atomic=True needs stores that share one transaction (capability cross_shard_transactions)")
        # Every store shares one transaction (durastate.citus): writes to
        # several shards inside it commit together, so none is refused.
        self.atomic = atomic
        self.names = [n.decode() for n in names]
        self._names = names
        self._hashers = [_name_hasher(name) for name in names]
        self._owners: dict[bytes, int] = {}
        self.stores = [store for _, store in named]
        self._document_shard_key = document_shard_key
        for facet in FACET_NAMES:
            router = ROUTERS[facet]
            if not isinstance(router, str):
                setattr(self, facet, router(self))

    def __getattr__(self, name: str) -> Any:
        # Only reached for what __init__ did not set: a facet that is not sharded.
        refusal = ROUTERS.get(name)
        if isinstance(refusal, str):
            raise InvalidRequest(refusal)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def shard_of(self, key: str | bytes) -> int:
        """Index of the store that owns ``key`` (a scope, queue name, session, ...)."""
        return self._owner_of(_shard_key(key))

    def _owner_of(self, key: bytes) -> int:
        owner = self._owners.get(key)
        if owner is None:
            owner = _owner(self._hashers, self._names, key)
            if len(self._owners) >= OWNER_CACHE:
                self._owners.clear()
            self._owners[key] = owner
        return owner

    def store_for(self, key: str | bytes) -> Store:
        """The store that owns ``key``."""
        return self.stores[self.shard_of(key)]

    def _check_write(self, shard: int) -> None:
        """Refuse (and doom) a write to ``shard`` inside a transaction on another shard."""
        open_tx = _OPEN.get()
        if open_tx is None or open_tx.router is not self or open_tx.shard == shard or self.atomic:
            return
        refusal = CrossShardWrite(
            f"this write routes to shard {self.names[shard]!r}, but the open sharded transaction is on shard "
            f"{self.names[open_tx.shard]!r}: a transaction never spans shards (nothing is committed)"
        )
        if open_tx.refusal is None:
            open_tx.refusal = refusal
        raise refusal

    def _on_every_shard(self, run: Callable[[Store, int | None], int], limit: int | None) -> int:
        """``run(store, rows_left)`` on each shard in turn (a write on each), until ``limit`` rows in all."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            fail(f"limit must be None or an int >= 0, got {limit!r}")
        done = 0
        for shard, store in enumerate(self.stores):
            if limit is not None and done >= limit:
                break
            self._check_write(shard)
            done += run(store, None if limit is None else limit - done)
        return done

    def _route(self, key: Any, *, write: bool, what: str = "shard key") -> Store:
        shard = self._owner_of(_shard_key(key, what))
        if write:
            self._check_write(shard)
        return self.stores[shard]

    def transaction(self, key: str | bytes) -> ShardTransaction:
        """A transaction on the shard that owns ``key``; writes routed elsewhere are refused."""
        shard = self.shard_of(key)
        return ShardTransaction(self, shard, self.stores[shard].transaction())

    def close(self) -> None:
        """Close every shard."""
        for store in self.stores:
            store.close()
