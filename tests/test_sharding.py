"""durastate.sharding over 3 SQLite files and over 3 PostgreSQL databases."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

import durastate
from durastate.sharding import ShardedStore, rendezvous_owner
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
