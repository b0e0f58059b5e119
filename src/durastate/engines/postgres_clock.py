"""The database server's clock, read from the client without a round trip a call (``ServerClock``).

Without an injected ``clock`` every deadline a PostgreSQL store computes
(leases, delays, TTLs, presence expiry) is the server's time, so it means
the same instant to every client, whatever their own clocks say. ``now_ms``
costs no round trip: the offset between this machine's clock and the
server's ``clock_timestamp()`` is measured when each pooled connection is
configured (``_measure_clock_offset``, at the midpoint of the round trip,
so right to within half of it) and kept or replaced by the rules there.
"""

from __future__ import annotations

import math
import time
from typing import Any

import psycopg

from .base import Clock, EngineBase

__all__ = ["CLOCK_GOOD_RTT", "CLOCK_REFRESH", "CLOCK_SAMPLES", "SERVER_TIME", "ServerClock", "local_time"]

# The machine's clock, read through this name so a test can skew one
# engine's view of it (``ServerClock._start_clock`` takes it at construction).
local_time = time.time
# Seconds between re-measurements of the server clock's offset.
CLOCK_REFRESH = 300.0
SERVER_TIME = "SELECT extract(epoch FROM clock_timestamp())::float8"
# The offset read in a round trip is right to within half of it, and on a loaded machine one round trip can take
# tens of milliseconds: a measurement reads the server's clock up to CLOCK_SAMPLES times, stopping at a round trip
# of CLOCK_GOOD_RTT seconds or less, and keeps the shortest's reading.
CLOCK_SAMPLES = 3
CLOCK_GOOD_RTT = 0.001


class ServerClock(EngineBase):
    """``now_ms`` on the server's clock unless a ``clock`` was injected (see the module docstring)."""

    def _start_clock(self, clock: Clock | None) -> None:
        """Before ``EngineBase.__init__``: the server's clock unless ``clock`` is given (then used as it is)."""
        self._local_time = local_time
        self._clock_offset = 0.0  # server clock minus local clock, seconds
        self._offset_measured_at: float | None = None  # time.monotonic() of the last measurement
        self._offset_rtt = math.inf  # seconds: the round trip the offset was read in (_measure_clock_offset)
        self._server_clock = clock is None

    def _server_now(self) -> float:
        """The server's clock, as seconds since the epoch (see the class docstring)."""
        return self._local_time() + self._clock_offset

    def now_ms(self) -> int:
        """``EngineBase.now_ms``; the server clock's case inlined (2-3 reads a write: its cost counts).

        That clock is the machine's plus a measured float offset, always a
        finite number, so the check of an injected clock's answer is skipped.
        """
        if self._server_clock:
            return int((self._local_time() + self._clock_offset) * 1000)
        return super().now_ms()

    def _measure_clock_offset(self, conn: psycopg.Connection[Any]) -> None:
        """Read the server's clock on ``conn`` (``CLOCK_SAMPLES``, ``CLOCK_GOOD_RTT``); keep the offset it gives
        when its round trip was shorter than the kept offset's, when that one is older than ``CLOCK_REFRESH``, or
        when the two disagree by more than their round trips allow (each is right to within half of its own):
        the local clock stepped since, and the kept offset is wrong by the step.

        The round trip is timed on the local clock the offset is for: a
        reading across a step of that clock looks long (forward) or is
        skipped (backward), never kept as short.
        """
        rtt, offset = math.inf, 0.0
        for _ in range(CLOCK_SAMPLES):
            before = self._local_time()
            row = conn.execute(SERVER_TIME).fetchone()
            after = self._local_time()
            assert row is not None
            if 0 <= after - before < rtt:
                rtt, offset = after - before, float(row[0]) - (before + after) / 2
            if rtt <= CLOCK_GOOD_RTT:
                break
        if rtt == math.inf:
            return  # every reading crossed a backward step of the local clock: the next connection reads again
        now = time.monotonic()
        measured = self._offset_measured_at
        if (
            measured is None
            or rtt <= self._offset_rtt
            or now - measured > CLOCK_REFRESH
            or abs(offset - self._clock_offset) > (rtt + self._offset_rtt) / 2
        ):
            self._clock_offset, self._offset_rtt, self._offset_measured_at = offset, rtt, now
