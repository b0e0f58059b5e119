"""The conformance suite also runs on PostgreSQL in the Citus statement mode (``citus://``).

``store_url`` and ``shared_url`` are the plugin's, widened by
``plugin.CITUS_ENGINE``: a Citus coordinator when ``DURASTATE_TEST_CITUS_URL``
is set, else the plain PostgreSQL server in that mode, so the mode cannot
rot between runs on a real cluster. Only this suite is widened: the other
tests that take a store URL check the engines themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.testing import plugin


@pytest.fixture(params=[*plugin.ENGINES, plugin.CITUS_ENGINE])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store URL for each engine, Citus mode included."""
    yield from plugin._url_for(request.param, tmp_path, reuse=plugin._only_through_store(request))


@pytest.fixture(params=[*plugin.SHARED_ENGINES, plugin.CITUS_ENGINE])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL that several stores and processes can open, Citus mode included."""
    yield from plugin._url_for(request.param, tmp_path)
