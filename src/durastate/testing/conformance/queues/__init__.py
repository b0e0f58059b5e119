"""Conformance: the ``store.queues`` facet (FIFO, leases, dead letters, waits).

Every test runs on every engine through the ``store`` / ``open_store``
fixtures. Time moves only through the ``clock`` fixture (``FakeClock``):
delays, leases and redelivery are driven by ``clock.advance``. The blocking
``wait=`` tests sequence their threads with events (a spy on the engine's
``wait_for_change`` tells the test the waiter is really waiting), never
with sleeps; their only real-time bound is a generous failure deadline.
"""

from __future__ import annotations

from . import ack_then_claim, checks, delivery
from .ack_then_claim import *  # noqa: F403
from .checks import *  # noqa: F403
from .common import FAILURE_DEADLINE as FAILURE_DEADLINE
from .common import claim as claim
from .common import counts as counts
from .common import pop_all as pop_all
from .common import stats as stats
from .delivery import *  # noqa: F403

__all__ = [*delivery.__all__, *checks.__all__, *ack_then_claim.__all__]
