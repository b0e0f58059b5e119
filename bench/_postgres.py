"""Which PostgreSQL server a bench uses when its command line names none."""

from __future__ import annotations

import os

LOCAL = "postgresql://postgres@127.0.0.1:5432/postgres"


def postgres_url(given: str | None = None) -> str:
    """``given``, else ``DURASTATE_BENCH_POSTGRES_URL``, else ``DURASTATE_TEST_POSTGRES_URL``, else the local server."""
    return (
        given
        or os.environ.get("DURASTATE_BENCH_POSTGRES_URL")
        or os.environ.get("DURASTATE_TEST_POSTGRES_URL")
        or LOCAL
    )
