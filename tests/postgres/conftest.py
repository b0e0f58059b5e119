"""Fixtures for the PostgreSQL-only tests (the engine's own guarantees)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from durastate.testing import plugin, postgres_server

from .proxy import CuttingProxy


@pytest.fixture
def pg_base_url() -> str:
    return plugin._postgres_base_url()


def _fresh_schema(pg_base_url: str) -> Iterator[str]:
    """The URL of a fresh schema on the test server, dropped afterwards."""
    url, schema = postgres_server.create_schema(pg_base_url)
    try:
        yield url
    finally:
        postgres_server.drop_schema(pg_base_url, schema)


@pytest.fixture
def pg_url(pg_base_url: str) -> Iterator[str]:
    """A fresh schema on the test server, dropped afterwards."""
    yield from _fresh_schema(pg_base_url)


@pytest.fixture
def second_pg_url(pg_base_url: str) -> Iterator[str]:
    """Another fresh schema on the test server (a second tenant of one database), dropped afterwards."""
    yield from _fresh_schema(pg_base_url)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[CuttingProxy]:
    """A relay in front of ``pg_url``'s server that cuts a connection on cue (``proxy.CuttingProxy``)."""
    parts = urlsplit(pg_url)
    p = CuttingProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield p
    p.close()


@pytest.fixture
def via_proxy(pg_url: str, proxy: CuttingProxy) -> str:
    """``pg_url`` through ``proxy``."""
    parts = urlsplit(pg_url)
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0] + "@" if len(netloc) == 2 else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
