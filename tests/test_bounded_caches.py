"""What a store keeps per queue it is asked about stays bounded, however many distinct queues a process names.

A service with millions of queues (one per user, per session) calls push,
claim and pop with ever new names; the queues facet keeps each name checked
(``queues.names.NAMES_KEPT``) and, on PostgreSQL, each queue's claim floor
(``queues.facet._FLOORS_KEPT``). Both are cleared when full: the bounds are
set small here and the caches counted.
"""

from __future__ import annotations

import pytest

import durastate
from durastate.queues import facet


def test_the_queue_name_and_floor_caches_stay_within_their_bounds(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(facet, "NAMES_KEPT", 4)
    monkeypatch.setattr(facet, "_FLOORS_KEPT", 4)
    queues = store.queues
    for i in range(20):
        name = f"user:{i}:inbox"
        queues.push(name, [b"job"])
        claim = queues.claim(name, lease=30)
        assert claim is not None
        claim.ack()
        assert queues.pop(name) is None
        assert len(queues._names) <= 4
        assert len(queues._floors) <= 4  # kept only where the engine's indexes keep dead entries (PostgreSQL)
