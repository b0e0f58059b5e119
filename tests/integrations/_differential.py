"""The hypothesis settings of the differential tests (durastate's adapter against the framework's own backends)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def differential(max_examples: int) -> settings:
    """``max_examples`` examples, each a sequence of operations run against every backend.

    The examples share one store from a function-scoped fixture on purpose
    (each works under a fresh prefix or namespace of it, as each gets a
    fresh folder for the file backends), and a store call's time varies with
    the engine and the machine's load: no deadline, no too-slow check.
    """
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
