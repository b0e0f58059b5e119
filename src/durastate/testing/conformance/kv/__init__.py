"""Conformance: the ``store.kv`` facet (values, expiry, logs, counters, views).

Every test runs on every engine through the ``store`` / ``open_store``
fixtures of ``durastate.testing.plugin``. Each class covers one family of
the contract; each test one clause that can break on its own. Expectations
are computed from the inputs (sorted keys, the model in ``TestKVModel``),
never hard-coded engine output.

Time only moves through the ``clock`` fixture (a ``FakeClock``): no test
sleeps. Engine-specific checks (``TestKVIndexUse``, SQLite's query planner)
skip on other engines with the reason.
"""

from __future__ import annotations

from . import checks, logs, values
from .checks import *  # noqa: F403
from .common import expect_invalid as expect_invalid
from .logs import *  # noqa: F403
from .values import *  # noqa: F403

__all__ = [*values.__all__, *logs.__all__, *checks.__all__]
