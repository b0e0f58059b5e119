"""Conformance: ``durastate.compat.a2`` (experimental-a2's store), rule by rule.

Written from the seed's ``store-sqlite.ts`` as the seed's own users call
it: async methods, keyword arguments, aware datetimes from an injected
clock, ids from an injected source, ``A2Error`` codes and ``TypeError``
where the seed throws them. Runs on every engine (``open_store(url)``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durastate.compat import a2
from durastate.testing.locking import WriteLockHolder

__all__ = ["TestA2Adapter", "TestA2SeedRanges", "test_a_cancelled_claim_is_released", "test_sqlite_creates_its_folder"]

S = "s1"


class ManualClock:
    def __init__(self) -> None:
        self.current = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, ms: int) -> None:
        self.current += timedelta(milliseconds=ms)


def run(store_url: str, body: Callable[[a2.A2Store, ManualClock], Awaitable[Any]]) -> Any:
    clock = ManualClock()
    counter = itertools.count(1)
    store = a2.open_store(store_url, clock=clock, ids=lambda: f"id-{next(counter)}")

    async def main() -> Any:
        try:
            return await body(store, clock)
        finally:
            store.close()

    return asyncio.run(main())


def ev(type: str = "t", payload: Any = None, **extra: Any) -> dict[str, Any]:
    return {"type": type, "payload": payload, **extra}


class TestA2Adapter:
    def test_append_read_and_ids(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            result = await s.append(S, [ev("a", {"x": 1}), ev("b", id="mine", lane="L")])
            assert result.has_pending is True
            assert [(e.id, e.index, e.type, e.lane) for e in result.events] == [
                ("id-1", 1, "a", None),
                ("mine", 2, "b", "L"),
            ]
            assert all(e.created_at == clock.current for e in result.events)
            assert result.events[0].created_at.tzinfo is not None
            assert await s.read(S) == result.events
            assert [e.index for e in await s.read(S, after_index=1)] == [2]
            assert [e.index for e in await s.read(S, through_index=1)] == [1]
            empty = await s.append("other", [])
            assert (empty.events, empty.has_pending) == ((), False)

        run(store_url, body)

    def test_idempotent_replay_and_partial_duplicates(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            first = await s.append(S, [ev(id="x"), ev(id="y")])
            clock.advance(10)
            assert (await s.append(S, [ev(id="x"), ev(id="y")])).events == first.events
            for batch in ([ev(id="x"), ev(id="z")], [ev(id="q"), ev(id="q")], [ev(id="x"), ev()]):
                with pytest.raises(a2.A2Error) as info:
                    await s.append(S, batch)
                assert info.value.code == "PARTIAL_DUPLICATE_BATCH"
            with pytest.raises(a2.A2Error) as info:
                await s.append("other", [ev(id="x")])
            assert info.value.code == "PARTIAL_DUPLICATE_BATCH"
            assert len(await s.read(S)) == 2

        run(store_url, body)

    def test_attempt_fence(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev()])
            with pytest.raises(TypeError):
                await s.append(S, [ev(cause={"index": 5, "attempt": 1})])
            with pytest.raises(a2.A2Error) as info:
                await s.append(S, [ev(cause={"index": 1, "attempt": 1})])
            assert info.value.code == "SUPERSEDED_ATTEMPT"
            await s.claim_available(session_id=S, holder="w", ttl_ms=100)
            child = await s.append(S, [ev(cause={"index": 1, "attempt": 1, "batch_size": 1})])
            assert child.events[0].cause == a2.EventCause(1, 1, 1)
            clock.advance(100)
            await s.claim_available(session_id=S, holder="w2", ttl_ms=100)
            with pytest.raises(a2.A2Error) as info:
                await s.append(S, [ev(cause={"index": 1, "attempt": 1})])
            assert info.value.code == "SUPERSEDED_ATTEMPT"

        run(store_url, body)

    def test_claim_outcomes_lanes_and_expiry(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            assert (await s.claim_available(session_id=S, holder="w", ttl_ms=5)).outcome == "settled"
            await s.append(S, [ev(lane="L"), ev(lane="L"), ev(), ev()])
            claimed = await s.claim_available(session_id=S, holder="w", ttl_ms=500, exclude_indexes=[4])
            assert claimed.outcome == "claimed"
            assert [(e.index, e.attempt_count, e.claim_holder) for e in claimed.events] == [(1, 1, "w"), (3, 1, "w")]
            assert claimed.events[0].claim_expires_at == clock.current + timedelta(milliseconds=500)
            later = clock.current + timedelta(seconds=10)
            later_ms = (later - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
            at = await s.claim_available(session_id=S, holder="w", ttl_ms=1, expires_at_ms=later_ms)
            assert [(e.index, e.claim_expires_at) for e in at.events] == [(4, later)]
            busy = await s.claim_available(session_id=S, holder="w", ttl_ms=5)
            assert (busy.outcome, busy.retry_at) == ("busy", clock.current + timedelta(milliseconds=500))
            clock.advance(500)
            again = await s.claim_available(session_id=S, holder="w2", ttl_ms=500)
            assert [(e.index, e.attempt_count) for e in again.events] == [(1, 2), (3, 2)]
            done = await s.complete_attempt(session_id=S, index=1, attempt=2, events=[])
            assert done.outcome == "completed"
            assert [e.index for e in (await s.claim_available(session_id=S, holder="w", ttl_ms=5)).events] == [2]

        run(store_url, body)

    def test_renew(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev(), ev()])
            await s.claim_available(session_id=S, holder="w", ttl_ms=100)
            assert await s.renew_claims(session_id=S, holder="w", claims=[], ttl_ms=5) == a2.RenewResult((), ())
            clock.advance(100)
            await s.claim_available(session_id=S, holder="w2", ttl_ms=100, exclude_indexes=[2])
            result = await s.renew_claims(
                session_id=S, holder="w", claims=[{"index": 2, "attempt": 1}, {"index": 1, "attempt": 1}], ttl_ms=50
            )
            assert (result.renewed, result.superseded) == ((), (1,))  # 2 expired: neither
            mine = await s.renew_claims(session_id=S, holder="w2", claims=[{"index": 1, "attempt": 2}], ttl_ms=50)
            assert mine.renewed == (1,)

        run(store_url, body)

    def test_complete_children_retry_and_superseded(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            with pytest.raises(TypeError):
                await s.complete_attempt(session_id=S, index=1, attempt=1, events=[])
            await s.append(S, [ev()])
            await s.claim_available(session_id=S, holder="w", ttl_ms=100)
            children = [ev("c", 1, id="c1"), ev("d", 2, id="c2", settled=True)]
            first = await s.complete_attempt(session_id=S, index=1, attempt=1, events=children)
            assert [(e.index, e.cause) for e in first.events] == [(2, a2.EventCause(1, 1)), (3, a2.EventCause(1, 1))]
            assert first.events[1].processed_at == clock.current
            assert await s.complete_attempt(session_id=S, index=1, attempt=1, events=children) == first
            with pytest.raises(a2.A2Error) as info:
                await s.complete_attempt(session_id=S, index=1, attempt=1, events=children[:1])
            assert info.value.code == "PARTIAL_DUPLICATE_BATCH"
            assert (await s.complete_attempt(session_id=S, index=1, attempt=2, events=[])).outcome == "superseded"
            parent = (await s.read(S, through_index=1))[0]
            assert (parent.processed_by_attempt, parent.returned_event_ids) == (1, ("c1", "c2"))

        run(store_url, body)

    def test_fail_and_dead_letter(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev()])
            with pytest.raises(TypeError):
                await s.fail_attempt(session_id=S, index=9, attempt=1, error="x", max_failures=2)
            await s.claim_available(session_id=S, holder="w", ttl_ms=100)
            failed = await s.fail_attempt(session_id=S, index=1, attempt=1, error="boom", max_failures=2)
            assert failed == a2.FailResult("failed", 1)
            assert await s.fail_attempt(session_id=S, index=1, attempt=1, error="boom", max_failures=2) == failed
            await s.claim_available(session_id=S, holder="w", ttl_ms=100)
            assert await s.fail_attempt(session_id=S, index=1, attempt=1, error="x", max_failures=2) == a2.FailResult(
                "superseded", 1
            )
            dead = await s.fail_attempt(session_id=S, index=1, attempt=2, error="again", max_failures=2)
            assert dead == a2.FailResult("dead_lettered", 2)
            stored = (await s.read(S))[0]
            assert (stored.failed_at, stored.last_error, stored.last_failed_attempt) == (clock.current, "again", 2)
            assert (await s.claim_available(session_id=S, holder="w", ttl_ms=5)).outcome == "settled"

        run(store_url, body)

    def test_snapshots_and_read_state(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev("a"), ev("b"), ev("c")])
            state = await s.read_state(S, "r")
            assert state.snapshot is None and [e.type for e in state.events] == ["a", "b", "c"]
            assert isinstance(state.events[0], a2.Event)
            await s.put_snapshot(S, "r", 2, {"n": 2})
            await s.put_snapshot(S, "r", 1, {"n": 1})  # never backwards
            state = await s.read_state(S, "r")
            assert state.snapshot == a2.Snapshot(2, {"n": 2})
            assert [e.index for e in state.events] == [3]
            assert await s.inspect.list_snapshots(S) == (a2.SnapshotInfo("r", 2, clock.current),)

        run(store_url, body)

    def test_presence(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            past = clock.current - timedelta(hours=1)
            await s.presence.set("ns", "p", {"x": 1, "y": None}, at=past, seen=2, ttl_ms=1000)
            rows = await s.presence.read("ns")
            assert rows == (a2.PresenceRow("p", "x", 1, 2, past, clock.current + timedelta(seconds=1)),)
            await s.presence.set("ns", "p", {"x": 0}, at=past - timedelta(seconds=1), seen=3, ttl_ms=1000)
            assert (await s.presence.read("ns"))[0].value == 1
            with pytest.raises(TypeError):
                await s.presence.set("ns", "p", {"x": 1}, at=datetime(2030, 1, 1), seen=1, ttl_ms=5)
            clock.advance(1000)
            assert await s.presence.read("ns") == ()

        run(store_url, body)

    def test_inspection(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            for name in ("app/a", "app/b", "app/c", "zzz"):
                await s.append(name, [ev(), ev()])
            page = await s.inspect.list_sessions(prefix="app/", limit=2)
            assert [x.session_id for x in page.sessions] == ["app/a", "app/b"] and page.cursor == "app/b"
            rest = await s.inspect.list_sessions(prefix="app/", limit=2, cursor=page.cursor)
            assert [x.session_id for x in rest.sessions] == ["app/c"] and rest.cursor is None
            summary = page.sessions[0]
            assert (summary.event_count, summary.pending_count, summary.first_event_at) == (2, 2, clock.current)
            events = await s.inspect.read_events("app/a", after_index=0, limit=1)
            assert ([e.index for e in events.events], events.through_index) == ([1], 2)

        run(store_url, body)

    def test_stream(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev("a"), ev("b")])
            stream = s.stream(S, start_after=1)
            assert (await anext(stream)).type == "b"
            pending = asyncio.ensure_future(anext(stream))
            await s.append(S, [ev("c")])
            assert (await asyncio.wait_for(pending, timeout=30)).type == "c"
            await stream.aclose()  # type: ignore[attr-defined]

        run(store_url, body)

    def test_store_errors_and_bad_arguments(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            with pytest.raises(TypeError):
                await s.append(S, [{"type": 1, "payload": None}])
            with pytest.raises(TypeError):
                await s.append(S, [ev(payload=float("nan"))])
            with pytest.raises(TypeError):
                await s.claim_available(session_id=S, holder="w", ttl_ms="5")  # type: ignore[arg-type]
            s.close()
            with pytest.raises(a2.A2Error) as info:
                await s.read(S)
            assert info.value.code == "STORE_UNAVAILABLE"

        run(store_url, body)

    def test_list_sessions_limit_zero_is_an_empty_page(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append("app/a", [ev()])
            page = await s.inspect.list_sessions(prefix="app/", limit=0)
            assert (page.sessions, page.cursor) == ((), None)
            with pytest.raises(TypeError):
                await s.inspect.list_sessions(prefix=1, limit=0)  # type: ignore[arg-type]

        run(store_url, body)

    def test_stale_completion_with_malformed_events_is_superseded(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev("a")])
            first = (await s.claim_available(session_id=S, holder="w", ttl_ms=1000)).events[0]
            clock.advance(1001)
            second = (await s.claim_available(session_id=S, holder="w2", ttl_ms=1000)).events[0]
            malformed = [{"type": None, "payload": 1, "id": "x"}]
            stale = await s.complete_attempt(session_id=S, index=1, attempt=first.attempt_count, events=malformed)
            assert stale.outcome == "superseded"
            with pytest.raises(TypeError):  # the live attempt's malformed events are refused
                await s.complete_attempt(session_id=S, index=1, attempt=second.attempt_count, events=malformed)
            done = await s.complete_attempt(session_id=S, index=1, attempt=second.attempt_count, events=[])
            assert done.outcome == "completed"
            again = await s.complete_attempt(session_id=S, index=1, attempt=first.attempt_count, events=malformed)
            assert again.outcome == "superseded"
            with pytest.raises(TypeError):
                await s.complete_attempt(session_id=S, index=9, attempt=1, events=malformed)
            assert [e.id for e in await s.read(S)] == ["id-1"]

        run(store_url, body)

    @pytest.mark.parametrize(
        "bad",
        [
            ev(payload=float("nan")),
            ev(payload={"x": float("inf")}),
            ev(settled=1),
            {"type": None, "payload": 1},
            ev(id="\ud800"),
            ev("\udfff"),
            ev(id=7),
            ev(cause={"index": 1}),
            ev(cause={"index": 1, "attempt": 0}),
            ev(cause={"index": 1, "attempt": 1, "batch_size": 0}),
        ],
        ids=[
            "nan",
            "infinity",
            "settled-int",
            "type-none",
            "surrogate-id",
            "surrogate-type",
            "int-id",
            "cause-no-attempt",
            "cause-attempt-0",
            "cause-batch-0",
        ],
    )
    def test_ill_typed_input_is_refused_and_changes_nothing(self, store_url: str, bad: dict[str, Any]) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev("a")])
            with pytest.raises(TypeError):
                await s.append(S, [ev("b"), bad])
            assert [e.type for e in await s.read(S)] == ["a"]
            with pytest.raises(TypeError):
                await s.append("\ud800", [ev()])

        run(store_url, body)


def ms(at: datetime) -> int:
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


class TestA2SeedRanges:
    """Values ``store.events`` refuses as meaningless but the seed accepts: the adapter does what the seed does."""

    def test_max_failures_zero_or_less_dead_letters_the_first_failure(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev(), ev()])
            await s.claim_available(session_id=S, holder="w", ttl_ms=100)
            zero = await s.fail_attempt(session_id=S, index=1, attempt=1, error="x", max_failures=0)
            negative = await s.fail_attempt(session_id=S, index=2, attempt=1, error="y", max_failures=-1)
            assert zero == negative == a2.FailResult("dead_lettered", 1)
            again = await s.fail_attempt(session_id=S, index=1, attempt=1, error="x", max_failures=0)
            assert again == a2.FailResult("dead_lettered", 1)
            assert [(e.failed_at, e.failure_count) for e in await s.read(S)] == [(clock.current, 1)] * 2
            assert (await s.claim_available(session_id=S, holder="w", ttl_ms=5)).outcome == "settled"

        run(store_url, body)

    def test_any_snapshot_index_is_stored(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev("a"), ev("b")])
            await s.put_snapshot(S, "r", -1, {"n": -1})
            state = await s.read_state(S, "r")
            assert state.snapshot == a2.Snapshot(-1, {"n": -1})
            assert [e.type for e in state.events] == ["a", "b"]  # the events after index -1
            await s.put_snapshot(S, "r", 0, {"n": 0})  # later than -1: replaces it
            await s.put_snapshot(S, "r", -5, "older")  # never backwards
            assert (await s.read_state(S, "r")).snapshot == a2.Snapshot(0, {"n": 0})
            await s.put_snapshot(S, "r", 7, "ahead")  # past the last index: stored, as the seed does
            state = await s.read_state(S, "r")
            assert (state.snapshot, state.events) == (a2.Snapshot(7, "ahead"), ())
            await s.put_snapshot("no-events", "r", 1, "alone")
            assert await s.inspect.list_snapshots("no-events") == (a2.SnapshotInfo("r", 1, clock.current),)

        run(store_url, body)

    def test_a_claim_expired_at_once_is_claimable_again_but_still_completes(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            await s.append(S, [ev(), ev(), ev()])
            claimed = await s.claim_available(session_id=S, holder="w", ttl_ms=0, exclude_indexes=[3])
            assert [(e.index, e.attempt_count, e.claim_holder, e.claim_expires_at) for e in claimed.events] == [
                (1, 1, "w", clock.current),
                (2, 1, "w", clock.current),
            ]
            again = await s.claim_available(session_id=S, holder="w2", ttl_ms=0, exclude_indexes=[2, 3])
            assert [(e.index, e.attempt_count) for e in again.events] == [(1, 2)]
            renew = await s.renew_claims(session_id=S, holder="w", claims=[{"index": 2, "attempt": 1}], ttl_ms=100)
            assert (renew.renewed, renew.superseded) == ((), ())  # not live: not renewed
            done = await s.complete_attempt(session_id=S, index=2, attempt=1, events=[])
            assert done.outcome == "completed"
            past = clock.current - timedelta(seconds=1)
            late = await s.claim_available(session_id=S, holder="w3", ttl_ms=1, expires_at_ms=ms(past))
            assert [(e.index, e.attempt_count, e.claim_expires_at) for e in late.events] == [(1, 3, past), (3, 1, past)]
            negative = await s.claim_available(session_id=S, holder="w4", ttl_ms=-10)
            assert [e.claim_expires_at for e in negative.events] == [clock.current - timedelta(milliseconds=10)] * 2
            renewed = await s.renew_claims(
                session_id=S, holder="w4", claims=[{"index": 1, "attempt": 4}], ttl_ms=-20, expires_at_ms=None
            )
            assert renewed.renewed == ()  # the seed renews only a live lease

        run(store_url, body)

    def test_empty_session_and_event_ids_work(self, store_url: str) -> None:
        async def body(s: a2.A2Store, clock: ManualClock) -> None:
            first = await s.append("", [ev("root")])
            assert [(e.session_id, e.id, e.index) for e in first.events] == [("", "id-1", 1)]
            await s.claim_available(session_id="", holder="w", ttl_ms=100)
            done = await s.complete_attempt(session_id="", index=1, attempt=1, events=[ev("child", id="")])
            assert [(e.id, e.index) for e in done.events] == [("", 2)]
            replay = await s.append("", [ev("child", id="")])
            assert replay.events == done.events
            with pytest.raises(a2.A2Error) as info:
                await s.append("other", [ev(id="")])
            assert info.value.code == "PARTIAL_DUPLICATE_BATCH"
            page = await s.inspect.list_sessions(prefix="", limit=5)
            assert [x.session_id for x in page.sessions] == [""]
            await s.put_snapshot("", "r", 1, "root")
            assert [e.id for e in (await s.read_state("", "r")).events] == [""]

        run(store_url, body)


def test_a_cancelled_claim_is_released(tmp_path: Path) -> None:
    """A claim the caller was cancelled before receiving is released at once (issue 11)."""
    path = tmp_path / "a2.db"
    clock = ManualClock()
    store = a2.open_store(f"sqlite:{path}", clock=clock)

    async def main() -> a2.ClaimResult:
        try:
            await store.append(S, [ev()])
            # Another connection holds the write lock: the claim waits on a worker.
            holder = await asyncio.to_thread(WriteLockHolder(path).start)
            loop_thread = threading.current_thread()
            on_worker = threading.Event()
            real = store._events.claim_available

            def traced(*args: Any, **kwargs: Any) -> Any:
                if threading.current_thread() is not loop_thread:
                    on_worker.set()  # refused on the loop, now on a worker, waiting for the lock
                return real(*args, **kwargs)

            store._events.claim_available = traced  # type: ignore[method-assign]
            claim = asyncio.create_task(store.claim_available(session_id=S, holder="w", ttl_ms=60_000))
            assert await asyncio.to_thread(on_worker.wait, 30)
            claim.cancel()
            await asyncio.to_thread(holder.release)
            await asyncio.to_thread(store._runner.wait_idle)
            return await store.claim_available(session_id=S, holder="w2", ttl_ms=60_000)
        finally:
            store.close()

    again = asyncio.run(main())
    assert again.outcome == "claimed" and again.events[0].attempt_count == 2
    assert again.events[0].claim_holder == "w2"


def test_sqlite_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "nested" / ".a2" / "dev.db"
    store = a2.sqlite(str(path))

    async def main() -> None:
        try:
            await store.append(S, [ev()])
        finally:
            store.close()

    asyncio.run(main())
    assert path.exists()
    memory = a2.sqlite(":memory:")
    memory.close()
