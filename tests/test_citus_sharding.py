"""durastate.citus: logical shards as schemas, on plain PostgreSQL and on a Citus cluster.

Every test runs on the PostgreSQL test server (the shards are plain
schemas of one server: routing, the recorded count and atomic transactions
are the same code) and on the Citus coordinator of
``DURASTATE_TEST_CITUS_URL`` (skipped, with that reason, when unset). The
tests that need Citus itself (distributed schemas, a worker killed, a live
move) run only there.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import durastate.citus
from durastate.citus import CitusStore, shard_names
from durastate.errors import ConfigurationError, DurastateError, InvalidRequest, StoreUnavailable
from durastate.testing import plugin, postgres_server

pytestmark = pytest.mark.timeout(300)

SHARDS = 4


def _base(kind: str) -> str:
    if kind == "citus":
        url, reason = postgres_server.citus_url()
        if url is None:
            pytest.skip(reason)
        return url
    return plugin._postgres_base_url()


@pytest.fixture(params=["postgres-schemas", "citus"])
def base_url(request: pytest.FixtureRequest) -> str:
    return _base(request.param)


@pytest.fixture
def citus_base() -> str:
    return _base("citus")


def _drop(base: str, prefix: str) -> None:
    with psycopg.connect(base, autocommit=True) as admin:
        rows = admin.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "shard\\_%",))
        for (schema,) in rows.fetchall():
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.execute(f"DROP TABLE IF EXISTS {prefix}logical_shards")


@pytest.fixture
def open_sharded(request: pytest.FixtureRequest) -> Iterator[Callable[..., CitusStore]]:
    """``open_sharded(base, **options)``: a fresh prefix per test; closed and dropped afterwards."""
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    opened: list[CitusStore] = []
    bases: set[str] = set()

    def factory(base: str, **options: Any) -> CitusStore:
        bases.add(base)
        store = durastate.citus.open(base, prefix=prefix, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
    for base in bases:
        _drop(base, prefix)


SCOPES = [f"scope-{i}".encode() for i in range(120)]


def test_each_key_lives_in_its_shard_schema(base_url: str, open_sharded: Callable[..., CitusStore]) -> None:
    store = open_sharded(base_url, shards=SHARDS)
    prefix = store.coordinator.prefix
    assert store.names == shard_names(prefix, SHARDS)
    for scope in SCOPES:
        store.kv.put(scope, b"ns", b"k", scope)
    with psycopg.connect(base_url, autocommit=True) as admin:
        for shard, name in enumerate(store.names):
            rows = admin.execute(f'SELECT scope FROM "{name}".{prefix}kv').fetchall()
            assert sorted(bytes(r[0]) for r in rows) == sorted(s for s in SCOPES if store.shard_of(s) == shard)
    assert all(store.kv.get(scope, b"ns", b"k") == scope for scope in SCOPES)
    assert store.kv.scopes(limit=1000) == sorted(SCOPES)


def test_shards_share_one_pool(base_url: str, open_sharded: Callable[..., CitusStore]) -> None:
    store = open_sharded(base_url, shards=SHARDS, max_connections=2)
    pools = {id(s.engine._pool) for s in store.stores}  # type: ignore[attr-defined]
    assert pools == {id(store.coordinator._pool)}
    for scope in SCOPES[:20]:
        store.kv.incr(scope, b"ns", b"n")
    store.stores[0].close()  # a shard's close leaves the shared connections alone
    assert store.kv.counter(SCOPES[0], b"ns", b"n") == 1


def test_transaction_over_several_shards_is_all_or_nothing(
    base_url: str, open_sharded: Callable[..., CitusStore]
) -> None:
    store = open_sharded(base_url, shards=SHARDS)
    keys = [next(s for s in SCOPES if store.shard_of(s) == shard) for shard in range(SHARDS)]
    queue = next(f"q{i}" for i in range(100) if store.shard_of(f"q{i}") != store.shard_of(keys[0]))
    with pytest.raises(RuntimeError), store.transaction(keys[0]):
        for key in keys:
            store.kv.put(key, b"ns", b"k", b"doomed")
        store.queues.push(queue, [b"doomed"])
        raise RuntimeError("roll back")
    assert [store.kv.get(key, b"ns", b"k") for key in keys] == [None] * SHARDS
    assert store.queues.peek(queue) == []
    with store.transaction(keys[0]):
        for key in keys:
            store.kv.put(key, b"ns", b"k", b"kept")
        store.queues.push(queue, [b"kept"])
    assert [store.kv.get(key, b"ns", b"k") for key in keys] == [b"kept"] * SHARDS
    assert store.queues.pop(queue) == b"kept"


def test_documents_lock_across_shards(base_url: str, open_sharded: Callable[..., CitusStore]) -> None:
    store = open_sharded(base_url, shards=SHARDS)
    keys = [f"doc-{i}" for i in range(40)]
    spread = [next(k for k in keys if store.shard_of(k) == shard) for shard in range(SHARDS)]
    with store.documents.lock(*spread):
        for key in spread:
            store.documents.write(key, {"v": key})
    assert [store.documents.read(key).data for key in spread] == [{"v": key} for key in spread]  # type: ignore[union-attr]


def test_shard_count_is_fixed_at_creation(base_url: str, open_sharded: Callable[..., CitusStore]) -> None:
    with pytest.raises(ConfigurationError, match="pass shards=N the first time"):
        open_sharded(base_url)
    store = open_sharded(base_url, shards=SHARDS)
    store.kv.put(b"a", b"ns", b"k", b"v")
    with pytest.raises(ConfigurationError, match=f"created with {SHARDS} logical shards.*shards={SHARDS + 1}"):
        open_sharded(base_url, shards=SHARDS + 1)
    again = open_sharded(base_url)  # the recorded count
    assert again.names == store.names and again.kv.get(b"a", b"ns", b"k") == b"v"


@pytest.mark.parametrize("bad", [0, -1, durastate.citus.MAX_SHARDS + 1, "4", True, 2.5])
def test_bad_shard_counts_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidRequest, match="shards"):
        durastate.citus.open("postgresql://127.0.0.1:1/none", shards=bad)


def test_bad_urls_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="coordinator URL"):
        durastate.citus.open("sqlite:///x.db", shards=4)
    with pytest.raises(InvalidRequest, match="coordinator URL"):
        durastate.citus.open("memory:", shards=4)


# -- on Citus itself ---------------------------------------------------------------------


def _placements(admin: psycopg.Connection[Any], schemas: list[str], table: str) -> dict[str, tuple[str, int, int]]:
    """schema -> (node name, node port, shard id) of its ``table``."""
    rows = admin.execute(
        "SELECT table_name::text, nodename, nodeport, shardid FROM citus_shards WHERE citus_table_type = 'schema'"
    ).fetchall()
    found = {}
    for name, host, port, shard in rows:
        schema, _, rel = name.rpartition(".")
        if schema.strip('"') in schemas and rel == table:
            found[schema.strip('"')] = (host, port, shard)
    return found


def test_shards_are_distributed_schemas_spread_over_workers(
    citus_base: str, open_sharded: Callable[..., CitusStore]
) -> None:
    store = open_sharded(citus_base, shards=SHARDS)
    prefix = store.coordinator.prefix
    with psycopg.connect(citus_base, autocommit=True) as admin:
        distributed = {r[0] for r in admin.execute("SELECT schema_name::text FROM citus_schemas")}
        assert set(store.names) <= distributed
        placed = _placements(admin, store.names, prefix + "kv")
    assert set(placed) == set(store.names)
    assert len({(host, port) for host, port, _ in placed.values()}) >= 2  # Citus spread them


def _worker_backends(worker_url: str) -> list[int]:
    with psycopg.connect(worker_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'citus_internal%%'"
            " AND state LIKE 'idle in transaction%%' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [r[0] for r in rows]


def test_cross_shard_transaction_with_a_worker_killed_commits_nothing(
    citus_base: str, open_sharded: Callable[..., CitusStore]
) -> None:
    """A transaction writing shards on both workers; one worker's session killed (SIGKILL: the worker
    restarts) before COMMIT: the commit fails and neither worker has the writes."""
    import os
    import signal
    import time
    from urllib.parse import urlsplit, urlunsplit

    store = open_sharded(citus_base, shards=SHARDS)
    prefix = store.coordinator.prefix
    with psycopg.connect(citus_base, autocommit=True) as admin:
        placed = _placements(admin, store.names, prefix + "kv")
    nodes = sorted({(host, port) for host, port, _ in placed.values()})
    if len(nodes) < 2 or nodes[0][0] not in ("127.0.0.1", "localhost"):
        pytest.skip("needs the shards on two workers on this machine (their backends are killed with a signal)")
    victim = nodes[1]
    shard_on = {node: next(s for s in store.names if placed[s][:2] == node) for node in nodes}
    keys = {node: next(k for k in SCOPES if store.names[store.shard_of(k)] == shard_on[node]) for node in nodes}
    worker_url = urlunsplit(urlsplit(citus_base)._replace(netloc=f"postgres@{victim[0]}:{victim[1]}"))
    with pytest.raises(DurastateError), store.transaction(keys[nodes[0]]):
        for key in keys.values():
            store.kv.put(key, b"ns", b"k", b"half")
        backends = _worker_backends(worker_url)
        assert backends, "the transaction holds a session on the victim worker"
        for pid in backends:
            os.kill(pid, signal.SIGKILL)  # the worker's postmaster resets every session and recovers
    deadline = time.monotonic() + 60
    while True:  # wait until the worker accepts connections again (a condition, not a fixed delay)
        try:
            psycopg.connect(worker_url, connect_timeout=2).close()
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
    for key in keys.values():
        assert store.kv.get(key, b"ns", b"k") is None
    with store.transaction(keys[nodes[0]]):  # and the cluster commits across workers again
        for key in keys.values():
            store.kv.put(key, b"ns", b"k", b"whole")
    assert [store.kv.get(key, b"ns", b"k") for key in keys.values()] == [b"whole", b"whole"]


def _key_on(store: CitusStore, shard: int, stem: str) -> str:
    return next(f"{stem}-{i}" for i in range(10_000) if store.shard_of(f"{stem}-{i}") == shard)


@pytest.mark.slow
def test_live_move_of_a_shard_under_load_loses_and_repeats_nothing(
    citus_base: str, open_sharded: Callable[..., CitusStore]
) -> None:
    """One logical shard moved to the other worker (citus_move_shard_placement, logical replication) while
    threads write to it (kv counter, queue push and pop, event appends, record commits): afterwards every
    acknowledged write is there exactly once."""
    import threading

    store = open_sharded(citus_base, shards=SHARDS, max_connections=8)
    prefix = store.coordinator.prefix
    with psycopg.connect(citus_base, autocommit=True) as admin:
        placed = _placements(admin, store.names, prefix + "kv")
        workers = sorted(
            admin.execute("SELECT nodename, nodeport FROM pg_dist_node WHERE groupid > 0 AND isactive").fetchall()
        )
    if len(workers) < 2:
        pytest.skip("needs two workers")
    moved = store.names[0]
    source = placed[moved]
    target = next(w for w in workers if tuple(w) != source[:2])
    scope, queue, session, tenant = (_key_on(store, 0, stem) for stem in ("scope", "queue", "session", "tenant"))
    shard = store.store_for(tenant)
    rounds = 30
    started = threading.Barrier(5)  # four writers and the mover
    move_done = threading.Event()
    done = {"kv": 0, "pushed": 0, "events": 0, "records": []}
    popped: list[bytes] = []
    errors: list[BaseException] = []

    moved_at: dict[str, int] = {}  # writer -> its op count when the move had returned
    counts: dict[str, int] = {}

    def run(name: str, work: Callable[[int], None]) -> Callable[[], None]:
        def loop() -> None:
            # Writes before the move starts (the barrier), while it runs, and `rounds` more after it returned.
            i = 0
            try:
                while name not in moved_at or i < moved_at[name] + rounds:
                    work(i)
                    i += 1
                    if i == 10:
                        started.wait(120)
                    if move_done.is_set() and name not in moved_at:
                        moved_at[name] = i
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                started.abort()
            counts[name] = i

        return loop

    def kv(i: int) -> None:
        store.kv.incr(scope.encode(), b"ns", b"n")
        done["kv"] += 1

    def queues(i: int) -> None:
        store.queues.push(queue, [f"job-{i}".encode()])
        done["pushed"] += 1
        item = store.queues.pop(queue)
        if item is not None:
            popped.append(item)

    def events(i: int) -> None:
        store.events.append(session, [{"type": "tick", "payload": i}])
        done["events"] += 1

    def records(i: int) -> None:
        ident = shard.records.mint_id()
        shard.records.commit([{"type": "conversation", "value": {"id": ident, "title": f"c{i}"}}])
        done["records"].append(ident)  # type: ignore[attr-defined]

    writers = {"kv": kv, "queues": queues, "events": events, "records": records}
    threads = [threading.Thread(target=run(name, work)) for name, work in writers.items()]
    for thread in threads:
        thread.start()
    started.wait(120)  # every writer is under way
    with psycopg.connect(citus_base, autocommit=True) as admin:
        admin.execute(
            "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, shard_transfer_mode => 'force_logical')",
            (source[2], source[0], source[1], target[0], target[1]),
        )
        after = _placements(admin, store.names, prefix + "kv")[moved]
    move_done.set()
    for thread in threads:
        thread.join(240)
    assert not errors, errors
    assert tuple(after[:2]) == tuple(target), "the shard moved"
    while (item := store.queues.pop(queue)) is not None:
        popped.append(item)
    # Every writer wrote before the move (10 ops, then the barrier), while it ran (> 10 when it returned), after.
    assert min(moved_at.values()) > 10, moved_at
    assert store.kv.counter(scope.encode(), b"ns", b"n") == done["kv"] == counts["kv"]
    pushed = counts["queues"]
    assert sorted(popped) == sorted(f"job-{i}".encode() for i in range(pushed))  # each exactly once
    read = store.events.read(session)
    assert [e.index for e in read] == list(range(1, counts["events"] + 1))
    assert [e.payload for e in read] == list(range(counts["events"]))
    committed = done["records"]
    assert len(committed) == counts["records"] == shard.records.last_seq()  # type: ignore[arg-type]
    assert all(shard.records.conversation(ident) is not None for ident in committed)  # type: ignore[union-attr]
    print(f"live move: ops when the move returned {moved_at}, ops in all {counts}")


# -- killed between PREPARE TRANSACTION and COMMIT PREPARED ------------------------------

# The failpoint: a coordinator whose synchronous_standby_names names a standby that never
# connects makes a commit with synchronous_commit = on wait (wait_event 'SyncRep') after its
# commit record is written and before the transaction's commit callbacks run. For a Citus
# transaction over two workers that is exactly between PREPARE TRANSACTION (the pre-commit
# callback, done on both workers) and COMMIT PREPARED (the commit callback, not sent yet).
# Every other session on the coordinator commits with synchronous_commit = local meanwhile, and
# the maintenance daemon's 2PC recovery is off so that the test runs it itself.
_FAILPOINT = {
    "synchronous_standby_names": "durastate_failpoint",
    "synchronous_commit": "local",
    "citus.recover_2pc_interval": "-1",
}
_PREPARED = "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'citus\\_%%'"


def _until(what: str, check: Callable[[], Any], seconds: float = 60) -> Any:
    """Poll ``check`` until it returns something truthy (a condition, never a fixed delay)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except psycopg.OperationalError:  # a restarting server: not yet
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


def _settings_are(url: str, wanted: dict[str, str]) -> bool:
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        return all(conn.execute(f"SHOW {name}").fetchone() == (value,) for name, value in wanted.items())


def _configure_coordinator(url: str, settings: dict[str, str] | None) -> None:
    """ALTER SYSTEM the failpoint on (``settings``) or off (None), and wait until new sessions see it."""
    names = list(_FAILPOINT)
    with psycopg.connect(url, autocommit=True) as admin:
        for name in names:
            if settings is None:
                admin.execute(f"ALTER SYSTEM RESET {name}")
            else:
                admin.execute(f"ALTER SYSTEM SET {name} = '{settings[name]}'")
        admin.execute("SELECT pg_reload_conf()")
    wanted = settings or {"synchronous_standby_names": ""}
    _until("the coordinator's configuration", lambda: _settings_are(url, wanted))


def _prepared_on(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        return [r[0] for r in conn.execute(_PREPARED).fetchall()]


@pytest.mark.parametrize("dies", ["coordinator", "worker"])
def test_killed_between_prepare_and_commit_prepared_is_whole_after_recovery(
    dies: str, citus_base: str, open_sharded: Callable[..., CitusStore]
) -> None:
    """A transaction over shards on both workers stopped after both workers PREPAREd and the coordinator
    wrote its commit record, before COMMIT PREPARED; then either the coordinator's backend is SIGKILLed
    (the coordinator restarts; the client's commit fails, saying its outcome is unknown until recovery,
    never that nothing was applied) or one worker's session is SIGKILLed (that
    worker restarts; COMMIT PREPARED reaches only the other worker). Before Citus's 2PC recovery the
    writes on a worker whose transaction is still prepared are invisible; after
    ``recover_prepared_transactions()`` every write is there on both workers, and nothing stays prepared."""
    import os
    import signal
    import threading
    from urllib.parse import urlsplit, urlunsplit

    with psycopg.connect(citus_base, autocommit=True) as admin:
        if admin.execute("SHOW synchronous_standby_names").fetchone() != ("",):
            pytest.skip("the coordinator already has synchronous standbys configured")
    _configure_coordinator(citus_base, _FAILPOINT)
    try:
        store = open_sharded(citus_base, shards=SHARDS)
        prefix = store.coordinator.prefix
        with psycopg.connect(citus_base, autocommit=True) as admin:
            placed = _placements(admin, store.names, prefix + "kv")
        nodes = sorted({(host, port) for host, port, _ in placed.values()})
        if len(nodes) < 2 or nodes[0][0] not in ("127.0.0.1", "localhost"):
            pytest.skip("needs the shards on two workers on this machine (backends are killed with a signal)")
        workers = {
            node: urlunsplit(urlsplit(citus_base)._replace(netloc=f"postgres@{node[0]}:{node[1]}")) for node in nodes
        }
        for url in workers.values():
            assert _prepared_on(url) == [], "no Citus transaction is left prepared from before"
        shard_on = {node: next(s for s in store.names if placed[s][:2] == node) for node in nodes}
        keys = {node: next(k for k in SCOPES if store.names[store.shard_of(k)] == shard_on[node]) for node in nodes}
        backend: list[int] = []
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                with store.transaction(keys[nodes[0]]):
                    for key in keys.values():
                        store.kv.put(key, b"ns", b"k", b"whole")
                    conn = store.coordinator._local.conn
                    assert conn is not None
                    conn.execute("SET LOCAL synchronous_commit = on")  # this commit alone waits (the failpoint)
                    backend.append(conn.info.backend_pid)
                outcome.append(None)
            except BaseException as exc:  # reported by the test's thread
                outcome.append(exc)

        committer = threading.Thread(target=commit)
        committer.start()

        def waiting_at_failpoint() -> bool:
            with psycopg.connect(citus_base, autocommit=True) as conn:
                row = conn.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (backend[0],)).fetchone()
            return row == ("SyncRep",)

        _until("the commit to wait after PREPARE", lambda: backend and waiting_at_failpoint())
        coordinator_was = _checkpointer(citus_base)
        for url in workers.values():  # both workers hold the transaction PREPAREd
            assert len(_prepared_on(url)) == 1
        if dies == "coordinator":
            os.kill(backend[0], signal.SIGKILL)  # the coordinator restarts: no COMMIT PREPARED is ever sent
            committer.join(120)
            # Not "nothing was applied": the attempt row is prepared (invisible) on a worker, and the
            # coordinator's two-phase commit log says the transaction is in doubt until recovery.
            assert isinstance(outcome[0], StoreUnavailable), outcome
            assert "outcome is unknown" in str(outcome[0]) and "nothing was applied" not in str(outcome[0])
            _until("the coordinator to restart", lambda: _checkpointer(citus_base) not in (None, coordinator_was))
            unfinished = list(workers.values())
        else:
            victim = workers[nodes[1]]
            pids = _until("the victim worker's session", lambda: _worker_sessions(victim))
            victim_was = _checkpointer(victim)
            for pid in pids:
                os.kill(pid, signal.SIGKILL)  # the worker restarts; its PREPAREd transaction survives
            _until("the victim worker to restart", lambda: _checkpointer(victim) not in (None, victim_was))
            with psycopg.connect(citus_base, autocommit=True) as admin:
                admin.execute("SELECT pg_cancel_backend(%s::int)", (backend[0],))  # end the wait: committed locally
            committer.join(120)
            assert outcome == [None], "the coordinator committed; COMMIT PREPARED failed on one worker only"
            assert _prepared_on(workers[nodes[0]]) == []
            unfinished = [victim]
        reader = open_sharded(citus_base)  # fresh connections (the coordinator may have restarted)
        for node, key in keys.items():  # before recovery: what is still prepared is invisible
            expected = None if workers[node] in unfinished else b"whole"
            assert reader.kv.get(key, b"ns", b"k") == expected
        for url in unfinished:
            assert len(_prepared_on(url)) == 1
        with psycopg.connect(citus_base, autocommit=True) as admin:
            recovered = admin.execute("SELECT recover_prepared_transactions()").fetchone()
        assert recovered == (len(unfinished),)
        assert [reader.kv.get(key, b"ns", b"k") for key in keys.values()] == [b"whole", b"whole"]
        assert [_prepared_on(url) for url in workers.values()] == [[], []]
    finally:
        _configure_coordinator(citus_base, None)


def _checkpointer(url: str) -> int | None:
    """The server's checkpointer pid: a crash restart starts a new one."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'").fetchone()
    except psycopg.OperationalError:
        return None
    return None if row is None else int(row[0])


def _worker_sessions(worker_url: str) -> list[int]:
    """The worker's sessions opened by the coordinator (Citus names them citus_internal...)."""
    with psycopg.connect(worker_url, autocommit=True, connect_timeout=2) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE application_name LIKE 'citus_internal%%' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [r[0] for r in rows]
