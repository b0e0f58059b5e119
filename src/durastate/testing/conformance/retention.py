"""Conformance: retention on every facet and ``Store.maintain()`` (``durastate.retention``).

Each rule deletes exactly what its contract says and nothing else, in
batches larger runs cross (more rows than ``_retention.BATCH``), respects
its ``limit``, refuses nonsense arguments without changing anything, and
``maintain()`` runs the store's policy with a row budget it can resume.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import durastate
from durastate import InvalidRequest, Retention
from durastate._retention import BATCH
from durastate.kv import SCHEMA as KV_SCHEMA
from durastate.testing.clock import FakeClock

from ._schema_edits import migrate_again, rewind

__all__ = ["TestRetention", "TestRetentionPolicy", "TestRetentionMigration"]

S, N, K = b"scope", b"ns", b"log"


def _log(store: durastate.Store, key: bytes = K) -> list[bytes]:
    return [v for _, v in store.kv.log(S, N, key)]


def _bury(store: durastate.Store, queue: str, payload: bytes) -> None:
    store.queues.push(queue, [payload], max_attempts=1)
    claim = store.queues.claim(queue, lease=30)
    assert claim is not None and claim.payload == payload
    claim.nack()


def _settle(store: durastate.Store, session: str, events: int = 1) -> None:
    store.events.append(session, [{"type": "t"} for _ in range(events)])
    while claimed := store.events.claim_available(session, "w", ttl_ms=60_000, limit=100).events:
        for event in claimed:
            store.events.complete_attempt(session, event.index, event.attempt_count)


class TestRetention:
    def test_trim_logs_removes_what_aged_out_in_every_log(self, store: durastate.Store, clock: FakeClock) -> None:
        for i in range(BATCH + 10):  # more than one batch
            store.kv.append(S, N, K, b"old%d" % i)
        store.kv.append(S, N, b"other", b"old")
        clock.advance(100)
        kept = [store.kv.append(S, N, K, b"new%d" % i) for i in range(3)]
        assert store.kv.trim_logs(50) == BATCH + 11
        assert _log(store) == [b"new0", b"new1", b"new2"]
        assert _log(store, b"other") == []
        assert store.kv.append(S, N, K, b"next") > max(kept)  # ordinals are never reused
        assert store.kv.trim_logs(50) == 0

    def test_trim_logs_honours_its_limit(self, store: durastate.Store, clock: FakeClock) -> None:
        for i in range(10):
            store.kv.append(S, N, K, b"%d" % i)
        clock.advance(10)
        assert store.kv.trim_logs(1, limit=4) == 4
        assert _log(store) == [b"%d" % i for i in range(4, 10)]

    def test_trim_log_keeps_the_newest(self, store: durastate.Store, clock: FakeClock) -> None:
        for i in range(BATCH + 20):
            store.kv.append(S, N, K, b"%d" % i)
        store.kv.append(S, N, b"other", b"x")
        assert store.kv.trim_log(S, N, K, keep_last=3) == BATCH + 17
        assert _log(store) == [b"%d" % i for i in range(BATCH + 17, BATCH + 20)]
        assert _log(store, b"other") == [b"x"]
        assert store.kv.trim_log(S, N, K, keep_last=5) == 0  # already short enough

    def test_trim_log_with_both_rules_keeps_what_either_keeps(self, store: durastate.Store, clock: FakeClock) -> None:
        for i in range(5):
            store.kv.append(S, N, K, b"old%d" % i)
        clock.advance(100)
        for i in range(5):
            store.kv.append(S, N, K, b"new%d" % i)
        # Outside the newest 2 AND older than 50 s: only the five old ones go.
        assert store.kv.trim_log(S, N, K, keep_last=2, older_than=50) == 5
        assert _log(store) == [b"new%d" % i for i in range(5)]
        # older_than=0: strictly older than now; entries of this very millisecond stay.
        assert store.kv.trim_log(S, N, K, older_than=0) == 0
        clock.advance(1)
        assert store.kv.trim_log(S, N, K, older_than=0) == 5
        assert _log(store) == []

    def test_bad_retention_arguments_change_nothing(self, store: durastate.Store, clock: FakeClock) -> None:
        store.kv.append(S, N, K, b"x")
        clock.advance(10)
        for bad in (-1, float("nan"), float("inf"), True, "5", None):
            with pytest.raises(InvalidRequest):
                store.kv.trim_logs(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidRequest):
                store.queues.expire_dead(bad)  # type: ignore[arg-type]
        for bad_keep in (0, -1, 1.5, True):
            with pytest.raises(InvalidRequest):
                store.kv.trim_log(S, N, K, keep_last=bad_keep)  # type: ignore[arg-type]
            with pytest.raises(InvalidRequest):
                store.documents.prune_backups(bad_keep)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="keep_last"):
            store.kv.trim_log(S, N, K)
        with pytest.raises(InvalidRequest):
            store.events.prune_sessions(-1)
        with pytest.raises(InvalidRequest):
            store.presence.sweep_expired(limit=-1)
        assert _log(store) == [b"x"]

    def test_expire_dead_drops_only_old_dead_letters(self, store: durastate.Store, clock: FakeClock) -> None:
        for i in range(3):
            _bury(store, "a", b"old%d" % i)
        _bury(store, "b", b"old-b")
        clock.advance(100)
        _bury(store, "a", b"new")
        assert store.queues.expire_dead(50) == 4
        assert [d.payload for d in store.queues.dead_letters("a")] == [b"new"]
        assert store.queues.dead_letters("b") == []
        assert store.queues.expire_dead(50, limit=1) == 0

    def test_prune_backups_keeps_the_newest_slots(self, store: durastate.Store) -> None:
        for i in range(4):
            store.documents.write("k", {"v": i})
            store.documents.clear("k")
        store.documents.write("k.bakery", {"not": "a backup"})
        assert [k for k in store.documents.iter_keys("k")] == ["k.bak", "k.bak.1", "k.bak.2", "k.bak.3", "k.bakery"]
        assert store.documents.prune_backups(2) == 2
        assert list(store.documents.iter_keys("k")) == ["k.bak.2", "k.bak.3", "k.bakery"]
        raw = store.documents.read_raw("k.bak.3")
        assert raw is not None and b'"v":3' in raw.payload

    def test_delete_session_removes_everything_of_it(self, store: durastate.Store) -> None:
        store.events.append("gone", [{"type": "t"} for _ in range(BATCH + 5)])
        store.events.put_snapshot("gone", "r", 3, {"n": 3})
        claimed = store.events.claim_available("gone", "w", ttl_ms=60_000, limit=1).events
        store.events.fail_attempt("gone", claimed[0].index, claimed[0].attempt_count, "boom", 1)
        store.events.append("kept", [{"type": "t"}])
        assert store.events.delete_session("gone") == BATCH + 5
        assert store.events.read("gone") == []
        assert store.events.list_snapshots("gone") == []
        assert store.events.dead_letters("gone") == []
        assert [s.session_id for s in store.events.list_sessions().sessions] == ["kept"]
        assert store.events.append("gone", [{"type": "t"}]).events[0].index == 1  # a new session
        assert store.events.delete_session("never") == 0

    def test_prune_sessions_removes_only_settled_old_sessions(self, store: durastate.Store, clock: FakeClock) -> None:
        _settle(store, "settled", 3)
        store.events.append("pending", [{"type": "t"}])
        store.events.append("dead", [{"type": "t"}])
        (event,) = store.events.claim_available("dead", "w", ttl_ms=60_000).events
        store.events.fail_attempt("dead", event.index, event.attempt_count, "x", 1)
        clock.advance(100)
        _settle(store, "recent", 2)
        assert store.events.prune_sessions(50_000) == 1
        assert [s.session_id for s in store.events.list_sessions().sessions] == ["dead", "pending", "recent"]
        clock.advance(100)
        assert store.events.prune_sessions(50_000, limit=1) == 1
        assert [s.session_id for s in store.events.list_sessions().sessions] == ["dead", "pending"]

    def test_presence_remove_and_sweep_expired(self, store: durastate.Store, clock: FakeClock) -> None:
        for ns in ("a", "b", "c"):
            store.presence.set(ns, "short", {"x": 1}, at_ms=1, seen=1, ttl_ms=1_000)
            store.presence.set(ns, "long", {"x": 1, "y": 2}, at_ms=1, seen=1, ttl_ms=10**9)
        assert store.presence.remove("a", "long") == 2
        assert store.presence.remove("a", "nobody") == 0
        clock.advance(10)
        assert store.presence.sweep_expired(limit=2) == 2
        assert store.presence.sweep_expired() == 1
        assert [(e.participant, e.field) for e in store.presence.read("b")] == [("long", "x"), ("long", "y")]
        assert store.presence.read("a") == []


class TestRetentionPolicy:
    def test_capped_clear_keeps_the_newest_backups(self, open_store: Callable[..., durastate.Store]) -> None:
        store = open_store(retention=Retention(max_backups=2))
        backups = []
        for i in range(5):
            store.documents.write("k", {"v": i})
            backups.append(store.documents.clear("k"))
        assert backups == ["k.bak", "k.bak.1", "k.bak.1", "k.bak.1", "k.bak.1"]
        assert list(store.documents.iter_keys("k")) == ["k.bak", "k.bak.1"]
        older, newer = store.documents.read_raw("k.bak"), store.documents.read_raw("k.bak.1")
        assert older is not None and b'"v":3' in older.payload
        assert newer is not None and b'"v":4' in newer.payload

    def test_maintain_runs_the_policy_within_its_budget(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        policy = Retention(kv_log_max_age=60, dead_letter_max_age=60, settled_session_max_age=60, max_backups=1)
        store = open_store(clock=clock, retention=policy)
        for i in range(10):
            store.kv.append(S, N, K, b"%d" % i)
        store.kv.put(S, N, b"ttl", b"v", ttl=1)
        _bury(store, "q", b"dead")
        _settle(store, "done")
        store.documents.write("d", {"v": 1})
        store.documents.clear("d")
        clock.advance(120)
        store.kv.append(S, N, K, b"fresh")
        partial = store.maintain(max_rows=5)
        assert partial.finished is False and partial.total() == 5
        rest = store.maintain()
        assert rest.finished is True
        total = partial.total() + rest.total()
        assert total == 1 + 10 + 1 + 1  # the expired value, old log entries, the dead letter, the session
        assert _log(store) == [b"fresh"]
        assert store.queues.dead_letters("q") == []
        assert store.events.list_sessions().sessions == ()
        assert list(store.documents.iter_keys("d")) == ["d.bak"]  # within the cap: kept
        assert store.maintain().total() == 0

    def test_maintain_refuses_inside_a_transaction_and_bad_policies(
        self, open_store: Callable[..., durastate.Store]
    ) -> None:
        store = open_store()
        with pytest.raises(InvalidRequest, match="inside a transaction"), store.transaction():
            store.maintain()
        with pytest.raises(InvalidRequest):
            store.maintain(max_rows=0)
        for bad in ({"kv_log_max_age": -1}, {"dead_letter_max_age": float("nan")}, {"max_backups": 0}):
            with pytest.raises(InvalidRequest):
                Retention(**bad)
        with pytest.raises(InvalidRequest, match="Retention"):
            open_store(retention={"kv_log_max_age": 1})


class TestRetentionMigration:
    def test_logs_from_before_append_times_count_as_old(
        self, open_store: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        store = open_store(clock=clock)
        store.kv.append(S, N, K, b"before")
        # The database as the previous version left it, then migrated again.
        rewind(
            store.engine,
            KV_SCHEMA,
            1,
            "DROP INDEX {p}kv_log_attempt",
            "ALTER TABLE {p}kv_log DROP COLUMN attempt",
            "ALTER TABLE {p}kv_log DROP COLUMN created_at",
        )
        store = migrate_again(store, KV_SCHEMA, lambda: open_store(clock=clock))
        store.kv.append(S, N, K, b"after")
        assert store.kv.trim_logs(3600) == 1
        assert _log(store) == [b"after"]
