"""Conformance: the ``store.events`` facet (a2's event sessions).

One test per rule of the a2 seed's SQL store (``append``, lanes,
``claimAvailable``, ``renewClaims``, ``completeAttempt``, ``failAttempt``,
snapshots, inspection, streaming), then the rules durastate adds
(``claim_any``, dead letters, ``prune``, transactions, bad input). Every
test runs on every engine; time moves only through the ``clock`` fixture.
Expected values are computed from the inputs and the clock, never copied
from engine output.
"""

from __future__ import annotations

from . import appending, reading, torture
from .appending import *  # noqa: F403
from .reading import *  # noqa: F403
from .torture import *  # noqa: F403

__all__ = [*appending.__all__, *reading.__all__, *torture.__all__]
