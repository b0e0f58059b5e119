"""A controllable clock for tests of TTLs, delays and leases."""

from __future__ import annotations

import threading


class FakeClock:
    """A ``time.time`` replacement that only moves when told to.

    Pass it as ``durastate.open(url, clock=clock)``; ``advance(seconds)``
    moves time forward. Thread-safe. Starts at a fixed, realistic epoch
    time so stored timestamps look like real ones.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` (>= 0); return the new time."""
        if seconds < 0:
            raise ValueError("a FakeClock never goes backwards")
        with self._lock:
            self._now += seconds
            return self._now
