"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durastate


@pytest.fixture
def shared_store(shared_url: str) -> Iterator[durastate.Store]:
    """A store on ``shared_url`` (each shareable engine), open for the test and closed after it."""
    with durastate.open(shared_url) as store:
        yield store
