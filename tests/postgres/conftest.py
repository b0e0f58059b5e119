"""Fixtures for the PostgreSQL-only tests (the engine's own guarantees)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durastate.testing import plugin, postgres_server


@pytest.fixture
def pg_base_url() -> str:
    return plugin._postgres_base_url()


@pytest.fixture
def pg_url(pg_base_url: str) -> Iterator[str]:
    """A fresh schema on the test server, dropped afterwards."""
    url, schema = postgres_server.create_schema(pg_base_url)
    try:
        yield url
    finally:
        postgres_server.drop_schema(pg_base_url, schema)
