"""``durastate maintain``: bounded by ``--max-rows``, resumable, each retention on its own facet."""

from __future__ import annotations

from pathlib import Path

import durastate
from durastate.cli.maintenance import run_maintenance
from durastate.testing.clock import FakeClock


def maintain(store: durastate.Store, **options: object) -> dict[str, object]:
    ticks: list[int] = []
    settings: dict[str, object] = {
        "batch": 7,
        "max_rows": None,
        "events_older_than": None,
        "dead_older_than": None,
        "vacuum": False,
        "url": None,
    }
    settings.update(options)
    report = run_maintenance(store, tick=lambda rows, nbytes: ticks.append(rows), **settings)  # type: ignore[arg-type]
    report["ticked"] = sum(ticks)
    return report


def test_expired_rows_go_in_bounded_resumable_runs(tmp_path: Path) -> None:
    clock = FakeClock()
    with durastate.open(tmp_path / "s.db", clock=clock) as store:
        store.kv.put_many(b"cache", b"http", [(b"%03d" % i, b"v") for i in range(50)], ttl=10)
        store.kv.put(b"cache", b"http", b"keep", b"v")
        store.presence.set("room", "alice", {"a": 1, "b": 2}, at_ms=1, seen=1, ttl_ms=1_000)
        store.presence.set("room", "bob", {"c": 3}, at_ms=1, seen=1, ttl_ms=60_000)
        clock.advance(11)
        first = maintain(store, max_rows=20)
        assert first["kv_expired_deleted"] == 20 and first["stopped_at_max_rows"] is True
        assert first["ticked"] == 20
        second = maintain(store, max_rows=None)  # resumes: the rest, then the presence sweep
        assert second["kv_expired_deleted"] == 30 and second["presence_expired_deleted"] == 2
        assert second["stopped_at_max_rows"] is False
        assert str(second["wal_checkpoint"]).startswith("ok")
        third = maintain(store)
        assert third["kv_expired_deleted"] == 0 and third["presence_expired_deleted"] == 0
        assert [k for k, _ in store.kv.scan(b"cache", b"http")] == [b"keep"]
        assert [p.participant for p in store.presence.read("room")] == ["bob"]


def test_dead_letter_retention_and_event_pruning(tmp_path: Path) -> None:
    clock = FakeClock()
    with durastate.open(tmp_path / "s.db", clock=clock) as store:
        q = store.queues
        q.push("jobs", [b"old", b"new"], max_attempts=1)
        for _ in range(2):
            claim = q.claim("jobs", lease=10)
            assert claim is not None
            claim.nack(error="x")
            clock.advance(100)  # "old" died 200 s ago, "new" 100 s ago when maintain runs
        ev = store.events
        ev.append("s", [{"id": f"e{i}", "type": "t", "payload": {}, "settled": True} for i in range(4)])
        ev.put_snapshot("s", "r", 3, {"n": 3})
        report = maintain(store, dead_older_than=150, events_older_than=0, vacuum=True)
        assert report["dead_letters_deleted"] == 1 and report["vacuum"] == "ok"
        assert [d.payload for d in q.dead_letters("jobs")] == [b"new"]
        assert report["events_pruned"] == 3
        assert [e.id for e in ev.read("s")] == ["e3"]
