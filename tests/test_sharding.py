"""durastate.sharding over 3 SQLite files and over 3 PostgreSQL databases."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

import durastate
from durastate.facets import FACET_NAMES
from durastate.sharding import CrossShardWrite, ShardedStore, rendezvous_owner
from durastate.testing import plugin

pytestmark = pytest.mark.timeout(180)


def _sqlite_urls(tmp_path: Path) -> Iterator[list[str]]:
    yield [f"sqlite:///{tmp_path / f'shard{i}.db'}" for i in range(4)]


def _postgres_urls() -> Iterator[list[str]]:
    import psycopg

    base = plugin._postgres_base_url()
    names = [f"ds_shard_{uuid.uuid4().hex[:12]}" for _ in range(4)]
    with psycopg.connect(base, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(base)
    try:
        yield [urlunsplit(parts._replace(path=f"/{name}")) for name in names]
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            for name in names:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite-files", "postgres-databases"])
def shard_urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Four separate databases; tests use the first three, then add the fourth."""
    if request.param == "sqlite-files":
        yield from _sqlite_urls(tmp_path)
    else:
        yield from _postgres_urls()


@pytest.fixture
def open_shards(shard_urls: list[str]) -> Iterator[Callable[[list[str]], ShardedStore]]:
    opened: list[ShardedStore] = []

    def factory(urls: list[str]) -> ShardedStore:
        router = ShardedStore({f"shard-{shard_urls.index(u)}": durastate.open(u) for u in urls})
        opened.append(router)
        return router

    yield factory
    for router in opened:
        router.close()


SCOPES = [f"scope-{i}".encode() for i in range(300)]


def test_each_scope_lives_on_exactly_its_owner(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    for scope in SCOPES:
        router.kv.put(scope, b"ns", b"k", scope)
        router.kv.incr(scope, b"ns", b"hits")
    for scope in SCOPES:
        owner = router.shard_of(scope)
        for i, store in enumerate(router.stores):
            expected = scope if i == owner else None
            assert store.kv.get(scope, b"ns", b"k") == expected
        assert router.kv.counter(scope, b"ns", b"hits") == 1
    per_shard = [sum(1 for s in SCOPES if router.shard_of(s) == i) for i in range(3)]
    assert min(per_shard) > len(SCOPES) // 6, per_shard  # all three shards are used


def test_adding_a_shard_moves_only_keys_to_the_new_shard(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    three = open_shards(shard_urls[:3])
    four = open_shards(shard_urls)
    moved = 0
    for scope in SCOPES:
        before, after = three.shard_of(scope), four.shard_of(scope)
        if before != after:
            assert after == 3, "a key moved between two old shards"
            moved += 1
    assert 0 < moved < len(SCOPES) // 2


def test_order_of_shards_does_not_matter() -> None:
    names = [b"a", b"b", b"c"]
    for i in range(200):
        key = str(i).encode()
        assert names[rendezvous_owner(names, key)] == list(reversed(names))[rendezvous_owner(names[::-1], key)]


def test_queues_and_transactions_stay_on_one_shard(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    for q in ("jobs-a", "jobs-b", "jobs-c", "jobs-d"):
        router.queues.push(q, [q.encode()])
        owner = router.store_for(q)
        assert owner.queues.stats(q).ready == 1
        claim = router.queues.claim(q, lease=30)
        assert claim is not None and claim.payload == q.encode()
        with router.transaction(q):
            owner.kv.incr(q.encode(), b"done", b"n")
            claim.ack()
        assert router.queues.stats(q).ready == 0
    with pytest.raises(RuntimeError), router.transaction(b"scope-1"):
        router.kv.put(b"scope-1", b"ns", b"k", b"v")
        raise RuntimeError("roll back")
    assert router.kv.get(b"scope-1", b"ns", b"k") is None


def test_bad_shard_lists_are_refused(tmp_path: Path) -> None:
    with pytest.raises(durastate.InvalidRequest):
        ShardedStore([])
    s = durastate.open(tmp_path / "a.db")
    try:
        with pytest.raises(durastate.InvalidRequest, match="unique"):
            ShardedStore([s, s])
        with pytest.raises(durastate.InvalidRequest):
            ShardedStore({"x": "not a store"})  # type: ignore[dict-item]
        with pytest.raises(durastate.InvalidRequest):
            ShardedStore([s]).kv.get("str scope", b"ns", b"k")  # type: ignore[arg-type]
    finally:
        s.close()


def test_vgi_sharded_storage_routes_shard_keys_to_separate_databases(shard_urls: list[str]) -> None:
    from durastate.compat.vgi import ShardedStorage

    urls = shard_urls[:3]
    storage = ShardedStorage(shards={f"db{i}": url for i, url in enumerate(urls)})
    try:
        shard_keys = [f"att-{i:032x}" for i in range(40)]
        for key in shard_keys:
            storage.state_put_many(b"exec", b"ns", [(b"k", key.encode())], shard_key=key)
            storage.queue_push(b"exec", [key.encode()], shard_key=key)
            storage.state_counter_add(b"exec", b"ns", b"c", 1, shard_key=key)
        used = set()
        for key in shard_keys:
            # Each shard key sees only its own rows...
            assert storage.state_get_many(b"exec", b"ns", [b"k"], shard_key=key) == [key.encode()]
            assert storage.state_counter_get(b"exec", b"ns", b"c", shard_key=key) == 1
            assert storage.queue_pop(b"exec", shard_key=key) == key.encode()
            # ...and they live in exactly one database: the owner's.
            owner = rendezvous_owner([b"db0", b"db1", b"db2"], key.encode())
            used.add(owner)
            holders = [
                i
                for i, store in enumerate(storage.stores)
                if any(v == key.encode() for _, v in store.kv.scan(key.encode() + b"\x1f" + b"exec", b"ns"))
            ]
            assert holders == [owner]
        assert used == {0, 1, 2}
    finally:
        storage.__exit__(None, None, None)


def test_vgi_sharded_storage_refuses_bad_shard_lists(tmp_path: Path) -> None:
    from durastate.compat.vgi import ShardedStorage

    with pytest.raises(ValueError):
        ShardedStorage(shards=[])
    with pytest.raises(ValueError):
        ShardedStorage(str(tmp_path / "a.db"), shards=[str(tmp_path / "b.db")])
    with pytest.raises(ValueError):
        ShardedStorage(shards=[str(tmp_path / "a.db"), str(tmp_path / "a.db")])


# -- honest sharding: transactions never span shards ----------------------------


def _two_keys_on_different_shards(router: ShardedStore) -> tuple[bytes, bytes]:
    first = SCOPES[0]
    other = next(s for s in SCOPES if router.shard_of(s) != router.shard_of(first))
    return first, other


def _nothing_anywhere(router: ShardedStore, *scopes: bytes) -> bool:
    return all(store.kv.get(s, b"ns", b"k") is None for store in router.stores for s in scopes)


def test_a_write_to_another_shard_inside_a_transaction_is_refused_and_nothing_commits(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    here, there = _two_keys_on_different_shards(router)
    # The refusal propagates: the block rolls back on its own shard.
    with pytest.raises(CrossShardWrite, match="never spans shards"), router.transaction(here):
        router.kv.put(here, b"ns", b"k", b"1")
        router.kv.put(there, b"ns", b"k", b"2")
    assert _nothing_anywhere(router, here, there)
    # The caller catches the refusal: the block still commits nothing.
    with pytest.raises(CrossShardWrite, match="rolled back"), router.transaction(here):
        router.kv.put(here, b"ns", b"k", b"1")
        try:
            router.queues.push(there.decode(), [b"job"])
        except CrossShardWrite:
            pass
    assert _nothing_anywhere(router, here, there)
    assert router.queues.stats(there.decode()).ready == 0
    # Writes that stay on the shard commit together; reads elsewhere are allowed.
    with router.transaction(here):
        router.kv.put(here, b"ns", b"k", b"1")
        router.kv.incr(here, b"ns", b"n")
        assert router.kv.get(there, b"ns", b"k") is None
    assert router.kv.get(here, b"ns", b"k") == b"1"
    # A nested transaction on another shard is refused before it opens.
    with pytest.raises(CrossShardWrite), router.transaction(here), router.transaction(there):
        pass
    # The guard ends with the block.
    router.kv.put(there, b"ns", b"k", b"2")
    assert router.store_for(there).kv.get(there, b"ns", b"k") == b"2"


def test_scoped_views_are_routed_and_guarded_too(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    here, there = _two_keys_on_different_shards(router)
    view = router.kv.scope(there)
    with pytest.raises(CrossShardWrite), router.transaction(here):
        view.put(b"ns", b"k", b"v")
    assert _nothing_anywhere(router, there)
    view.put(b"ns", b"k", b"v")
    assert router.store_for(there).kv.get(there, b"ns", b"k") == b"v"


def test_documents_route_by_key_and_list_merges_every_shard(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore], tmp_path: Path
) -> None:
    router = open_shards(shard_urls[:3])
    single = durastate.open(tmp_path / "single.db")
    try:
        keys = [f"doc/{i:03d}" for i in range(60)] + ["other"]
        for i, key in enumerate(keys):
            assert router.documents.write(key, {"i": i}) == single.documents.write(key, {"i": i})
        assert {router.shard_of(k) for k in keys} == {0, 1, 2}
        for key in keys:
            holders = [i for i, s in enumerate(router.stores) if s.documents.read(key) is not None]
            assert holders == [router.shard_of(key)]
        # Paging over the merged shards gives exactly what one store gives.
        for limit in (1, 7, 60, 100):
            merged, alone = [], []
            cursor_a: str | None = None
            cursor_b: str | None = None
            while True:
                page_a = router.documents.list("doc/", limit=limit, cursor=cursor_a)
                page_b = single.documents.list("doc/", limit=limit, cursor=cursor_b)
                assert page_a == page_b
                merged += page_a.items
                alone += page_b.items
                cursor_a, cursor_b = page_a.cursor, page_b.cursor
                if cursor_a is None:
                    break
            assert merged == alone and len(merged) == 60
        assert list(router.documents.iter_keys("doc/")) == list(single.documents.iter_keys("doc/"))
        assert router.documents.describe(prefix="doc/") == single.documents.describe(prefix="doc/")
        assert router.documents.describe("other") == single.documents.describe("other")
        with pytest.raises(durastate.InvalidRequest, match="exactly one"):
            router.documents.describe()  # type: ignore[call-overload]
    finally:
        single.close()


def test_document_locks_cover_one_shard(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    a = "k-0"
    b = next(f"k-{i}" for i in range(1, 100) if router.shard_of(f"k-{i}") != router.shard_of(a))
    with pytest.raises(CrossShardWrite, match="several shards"):
        router.documents.lock(a, b)
    with pytest.raises(durastate.InvalidRequest, match="at least one key"):
        router.documents.lock()
    with pytest.raises(CrossShardWrite, match="rolled back"), router.documents.lock(a):
        router.documents.write(a, {"v": 1})
        with pytest.raises(CrossShardWrite):
            router.documents.write(b, {"v": 1})
        router.documents.write(a, {"v": 2})
    assert router.documents.read(a) is None and router.documents.read(b) is None
    # With a shard-key mapping, every document of a tenant lives together.
    stores = {f"shard-{i}": s for i, s in enumerate(router.stores)}
    tenants = ShardedStore(stores, document_shard_key=lambda key: key.split("/")[0])
    with tenants.documents.lock("t1/a", "t1/b"):
        tenants.documents.write("t1/a", {"v": 1})
        tenants.documents.write("t1/b", {"v": 1})
    owner = tenants.store_for("t1")
    assert owner.documents.read("t1/a") is not None and owner.documents.read("t1/b") is not None


def test_events_route_by_session_and_cross_session_calls_fan_out(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    sessions = [f"s-{i:02d}" for i in range(12)]
    assert len({router.shard_of(s) for s in sessions}) == 3
    for s in sessions:
        router.events.append(s, [{"type": "t", "payload": s}])
        assert [i for i, st in enumerate(router.stores) if st.events.get(s, 1) is not None] == [router.shard_of(s)]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = router.events.list_sessions("s-", limit=5, cursor=cursor)
        seen += [summary.session_id for summary in page.sessions]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == sessions
    claimed = router.events.claim_any("worker", ttl_ms=60_000, limit=len(sessions))
    assert sorted(e.session_id for e in claimed) == sessions
    assert router.events.claim_any("worker", ttl_ms=60_000, limit=5) == []
    first = claimed[0]
    assert router.events.fail_attempt(first.session_id, first.index, first.attempt_count, "boom", 1).outcome == (
        "dead_lettered"
    )
    assert [(e.session_id, e.index) for e in router.events.dead_letters()] == [(first.session_id, first.index)]
    # Inside a transaction, a session on another shard is refused.
    other = next(s for s in sessions if router.shard_of(s) != router.shard_of(first.session_id))
    with pytest.raises(CrossShardWrite), router.transaction(first.session_id):
        router.events.append(first.session_id, [{"type": "t"}])
        router.events.append(other, [{"type": "t"}])
    assert len(router.events.read(first.session_id)) == 1 and len(router.events.read(other)) == 1


def test_presence_routes_by_namespace_and_records_refuse_with_the_reason(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    for ns in ("room-a", "room-b", "room-c", "room-d"):
        router.presence.set(ns, "alice", {"x": ns}, at_ms=1, seen=1, ttl_ms=10**9)
        assert [(e.participant, e.field, e.value) for e in router.presence.read(ns)] == [("alice", "x", ns)]
        assert router.store_for(ns).presence.read(ns) != []
    with pytest.raises(durastate.InvalidRequest, match="records are not sharded"):
        _ = router.records


@pytest.mark.parametrize("facet", FACET_NAMES)
def test_every_facet_is_routed_or_refused_and_every_public_method_routed(facet: str, tmp_path: Path) -> None:
    """The router cannot silently miss a facet of the registry, or a method a facet gains (mypy checks signatures)."""
    import inspect

    from durastate import sharding

    assert facet in sharding.ROUTERS, f"durastate.sharding.ROUTERS has no entry for the facet {facet!r}"
    routed = sharding.ROUTERS[facet]
    with durastate.open(tmp_path / "x.db") as s:
        facet_type = type(getattr(s, facet))
        router = ShardedStore([s])
        if isinstance(routed, str):  # not sharded: refused with the reason
            with pytest.raises(durastate.InvalidRequest, match=re.escape(routed)):
                getattr(router, facet)
            return
        assert type(getattr(router, facet)) is routed
    public = {n for n, v in inspect.getmembers(facet_type) if not n.startswith("_") and callable(v)}
    public -= {"statements", "channel"}  # the compiled statement texts; a static channel-name helper
    missing = sorted(n for n in public if not hasattr(routed, n))
    assert missing == []


def test_listings_merge_over_every_shard(
    open_shards: Callable[[list[str]], ShardedStore], shard_urls: list[str]
) -> None:
    router = open_shards(shard_urls[:3])
    scopes = [b"tenant-%02d" % i for i in range(12)]
    for scope in scopes:
        router.kv.put(scope, b"ns-" + scope[-2:], b"k", b"v")
        router.queues.push(scope.decode(), [b"job"])
        router.presence.set(scope.decode(), "alice", {"here": True}, at_ms=1, seen=1, ttl_ms=10**9)
    assert len({router.shard_of(s) for s in scopes}) > 1  # the names really are spread out
    assert router.kv.scopes() == scopes
    assert router.kv.scopes(after=scopes[4], limit=3) == scopes[5:8]
    assert router.kv.namespaces(scopes[3]) == [b"ns-03"]
    assert router.queues.names(limit=5) == scopes[:5]
    assert [i.payload for i in router.queues.peek("tenant-07")] == [b"job"]
    assert router.presence.namespaces(after="tenant-09") == ["tenant-10", "tenant-11"]
    assert [p.participant for p in router.presence.peek("tenant-02")] == ["alice"]


def test_lane_backlog_sums_every_shard_and_queue_backlog_routes(
    shard_urls: list[str], open_shards: Callable[[list[str]], ShardedStore]
) -> None:
    router = open_shards(shard_urls[:3])
    sessions = [f"s{i}" for i in range(12)]
    assert len({router.shard_of(s) for s in sessions}) > 1
    for i, session in enumerate(sessions):
        router.events.append(session, [{"type": "t", "lane": "tools" if i % 2 else None}])
    merged, capped = router.events.lane_backlog()
    per_shard = [store.events.lane_backlog()[0] for store in router.stores]
    assert not capped
    assert [(b.lane, b.ready, b.dead) for b in merged] == [(None, 6, 0), ("tools", 6, 0)]
    for backlog in merged:
        starts = [b.oldest_ready_at for shard in per_shard for b in shard if b.lane == backlog.lane]
        assert backlog.oldest_ready_at == min(s for s in starts if s is not None)
    router.queues.push("q-1", [b"a", b"b"])
    assert router.queues.backlog("q-1") == router.store_for("q-1").queues.backlog("q-1")
