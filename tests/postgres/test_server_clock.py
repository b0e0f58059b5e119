"""On PostgreSQL every deadline is the server's clock: clients with skewed clocks agree.

A skewed machine is simulated by skewing the local time source one engine
reads (``engines.postgres.local_time``, taken at construction).
"""

from __future__ import annotations

import time

import pytest

import durastate
from durastate.engines import postgres
from durastate.testing.clock import FakeClock

SKEW = 60.0


def _open_skewed(pg_url: str, monkeypatch: pytest.MonkeyPatch, skew: float) -> durastate.Store:
    with monkeypatch.context() as patch:
        patch.setattr(postgres, "local_time", lambda: time.time() + skew)
        return durastate.open(pg_url)


def test_a_client_whose_clock_runs_fast_does_not_reclaim_a_held_item(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with durastate.open(pg_url) as holder, _open_skewed(pg_url, monkeypatch, SKEW) as fast:
        holder.queues.push("jobs", [b"job"])
        held = holder.queues.claim("jobs", lease=30)
        assert held is not None and held.attempts == 1
        assert fast.queues.claim("jobs", lease=30) is None, "the lease has 30 s left on the server's clock"
        held.ack()  # the holder still owns it: no Conflict
        assert fast.queues.claim("jobs") is None


def test_a_push_from_a_client_whose_clock_runs_fast_is_not_delayed(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open_skewed(pg_url, monkeypatch, SKEW) as fast, durastate.open(pg_url) as worker:
        fast.queues.push("jobs", [b"now"])
        claim = worker.queues.claim("jobs")
        assert claim is not None and claim.payload == b"now"


def test_skewed_clients_agree_on_now(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _open_skewed(pg_url, monkeypatch, SKEW) as fast, _open_skewed(pg_url, monkeypatch, -SKEW) as slow:
        # Both within a round trip of the server's clock: far closer than the 120 s between their machines.
        assert abs(fast.engine.now_ms() - slow.engine.now_ms()) < SKEW * 1000


def test_an_injected_clock_is_used_as_it_is(pg_url: str) -> None:
    clock = FakeClock(start=1_000_000.0)
    with durastate.open(pg_url, clock=clock) as store:
        assert store.engine.now_ms() == 1_000_000_000
        clock.advance(1.5)
        assert store.engine.now_ms() == 1_000_001_500


def test_the_offset_is_measured_again_after_the_local_clock_steps(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An NTP step on the client is corrected at the next refresh (here: every borrow)."""
    skew = [0.0]
    reference = durastate.open(pg_url)  # reads the real local clock
    monkeypatch.setattr(postgres, "CLOCK_REFRESH", 0.0)
    monkeypatch.setattr(postgres, "local_time", lambda: time.time() + skew[0])
    with durastate.open(pg_url) as store, reference:
        skew[0] = SKEW  # this machine's clock jumps a minute ahead
        store.kv.get(b"s", b"n", b"k")  # any statement borrows a connection, which re-measures
        assert abs(store.engine.now_ms() - reference.engine.now_ms()) < SKEW * 1000 / 2
