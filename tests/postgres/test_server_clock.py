"""On PostgreSQL every deadline is the server's clock: clients with skewed clocks agree.

A skewed machine is simulated by skewing the local time source one engine
reads (``engines.postgres_clock.local_time``, taken at construction).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines import postgres, postgres_clock
from durastate.testing.clock import FakeClock

SKEW = 60.0


def _open_skewed(pg_url: str, monkeypatch: pytest.MonkeyPatch, skew: float) -> durastate.Store:
    with monkeypatch.context() as patch:
        patch.setattr(postgres_clock, "local_time", lambda: time.time() + skew)
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


def test_a_connection_measured_while_the_process_stalled_does_not_set_its_clock_ahead(pg_url: str) -> None:
    """A connection configured on a loaded machine: the process stalls 200 ms between reading its clock and
    sending the query. That reading alone would put this client's clock 100 ms ahead of the server's, and an item
    it pushed would not be due yet for a worker claiming at once (a CI failure). The measurement reads the clock
    again and keeps the short round trip (and a slower measurement that agrees with the kept one does not
    replace it)."""
    with durastate.open(pg_url) as stalled, durastate.open(pg_url) as worker:
        engine = stalled.engine
        assert isinstance(engine, postgres.PostgresEngine)
        readings = itertools.count()
        engine._local_time = lambda: time.time() - (0.2 if next(readings) == 0 else 0.0)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            engine._measure_clock_offset(conn)
        assert abs(engine.now_ms() - worker.engine.now_ms()) < 50
        stalled.queues.push("jobs", [b"now"])
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
    monkeypatch.setattr(postgres_clock, "CLOCK_REFRESH", 0.0)
    monkeypatch.setattr(postgres_clock, "local_time", lambda: time.time() + skew[0])
    with durastate.open(pg_url) as store, reference:
        skew[0] = SKEW  # this machine's clock jumps a minute ahead
        store.kv.get(b"s", b"n", b"k")  # any statement borrows a connection, which re-measures
        assert abs(store.engine.now_ms() - reference.engine.now_ms()) < SKEW * 1000 / 2


class _ServerClock:
    """A stand-in connection whose ``SERVER_TIME`` answers are scripted; counts the readings."""

    def __init__(self, *readings: float) -> None:
        self._readings = list(readings)
        self.reads = 0

    def execute(self, sql: str) -> _ServerClock:
        assert sql == postgres.SERVER_TIME
        self.reads += 1
        return self

    def fetchone(self) -> tuple[float]:
        return (self._readings.pop(0),)


def _local_clock(*times: float) -> Any:
    readings = iter(times)
    return lambda: next(readings)


@pytest.fixture
def engine(pg_url: str) -> Iterator[Any]:
    with durastate.open(pg_url) as store:
        engine = store.engine
        assert isinstance(engine, postgres.PostgresEngine)
        yield engine


def test_the_shortest_round_trip_of_a_measurement_sets_the_offset(engine: Any) -> None:
    # Local clock 1000 s behind the server's; the first reading's round trip took 200 ms (its midpoint 100 ms off
    # the server's reading), the second's 0.4 ms: within CLOCK_GOOD_RTT, so no third reading.
    engine._offset_measured_at = None
    server = _ServerClock(2000.3, 2000.5)
    engine._local_time = _local_clock(1000.0, 1000.2, 1000.4998, 1000.5002)
    engine._measure_clock_offset(server)
    assert server.reads == 2
    assert engine._clock_offset == pytest.approx(1000.0, abs=1e-6)
    assert engine._offset_rtt == pytest.approx(0.0004, abs=1e-9)


def test_a_later_slower_measurement_keeps_the_offset_until_it_is_old(engine: Any) -> None:
    engine._offset_measured_at = None
    engine._local_time = _local_clock(1000.0, 1000.0004)
    engine._measure_clock_offset(_ServerClock(2000.0002))
    assert engine._clock_offset == pytest.approx(1000.0, abs=1e-6)
    # Three slow readings (50 ms round trips, each 20 ms off): the kept offset stays.
    engine._local_time = _local_clock(1001.0, 1001.05, 1002.0, 1002.05, 1003.0, 1003.05)
    slow = _ServerClock(2001.045, 2002.045, 2003.045)
    engine._measure_clock_offset(slow)
    assert slow.reads == postgres.CLOCK_SAMPLES
    assert engine._clock_offset == pytest.approx(1000.0, abs=1e-6)
    # A shorter round trip than the kept one replaces it.
    engine._local_time = _local_clock(1004.0, 1004.0002)
    engine._measure_clock_offset(_ServerClock(2004.0011))
    assert engine._clock_offset == pytest.approx(1000.001, abs=1e-6)
    # Once the kept offset is older than CLOCK_REFRESH, any measurement replaces it (the clocks drift apart).
    engine._offset_measured_at -= postgres_clock.CLOCK_REFRESH + 1
    engine._local_time = _local_clock(1005.0, 1005.05, 1006.0, 1006.05, 1007.0, 1007.05)
    engine._measure_clock_offset(_ServerClock(2005.045, 2006.045, 2007.045))
    assert engine._clock_offset == pytest.approx(1000.02, abs=1e-6)


def test_a_slower_measurement_that_disagrees_with_the_kept_offset_replaces_it_at_once(engine: Any) -> None:
    """Two offsets are each right to within half their round trip; further apart than that, the local clock
    stepped in between (an NTP correction) and the kept one is wrong by the step: the new one is kept, slower or
    not, without waiting for CLOCK_REFRESH."""
    engine._offset_measured_at = None
    engine._local_time = _local_clock(1000.0, 1000.0004)
    engine._measure_clock_offset(_ServerClock(2000.0002))
    # Slow readings (50 ms round trips) that agree with it to within 25 ms: kept as it is.
    engine._local_time = _local_clock(1001.0, 1001.05, 1002.0, 1002.05, 1003.0, 1003.05)
    engine._measure_clock_offset(_ServerClock(2001.045, 2002.045, 2003.045))
    assert engine._clock_offset == pytest.approx(1000.0, abs=1e-6)
    # The local clock steps 60 s ahead: the same slow readings now disagree by a minute.
    engine._local_time = _local_clock(1064.0, 1064.05, 1065.0, 1065.05, 1066.0, 1066.05)
    engine._measure_clock_offset(_ServerClock(2004.025, 2005.025, 2006.025))
    assert engine._clock_offset == pytest.approx(940.0, abs=1e-6)


def test_a_reading_across_a_backward_step_of_the_local_clock_is_never_kept(engine: Any) -> None:
    engine._offset_measured_at = None
    engine._local_time = _local_clock(1000.0, 999.0, 1001.0, 1001.0004)
    server = _ServerClock(2000.0, 2001.0002)
    engine._measure_clock_offset(server)
    assert server.reads == 2
    assert engine._clock_offset == pytest.approx(1000.0, abs=1e-6)
