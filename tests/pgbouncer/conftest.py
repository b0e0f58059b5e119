"""The conformance suite's kv, queues and records modules through pgbouncer in transaction mode.

``store_url`` and ``shared_url`` are overridden (as a third-party engine
would, see ``durastate.testing.plugin``): a fresh schema on the test server,
reached through one pgbouncer per test process (``durastate.testing.pgbouncer``).
pgbouncer comes from Debian, installed by the suite when it runs as root (CI);
elsewhere, without it, these tests are skipped with the reason.

Left out: the plan checks (parametrized by ``plans.STATISTICS``, fresh or
analyzed tables). Their subject is the server's planner on tables of many
rows each test builds (12-15 s of setup apiece here), which a pooler does
not change; the suite runs them on the server directly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.testing import plugin, postgres_server
from durastate.testing.conformance.plans import STATISTICS
from durastate.testing.pgbouncer import Bouncer, find_pgbouncer


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    kept = [item for item in items if not (item.path.parent == here and _is_plan_check(item))]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _is_plan_check(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(value in STATISTICS for value in callspec.params.values())


@pytest.fixture(scope="session")
def bouncer() -> Iterator[Bouncer]:
    binary, reason = find_pgbouncer()
    if binary is None:
        if os.geteuid() == 0:
            pytest.fail(f"pgbouncer could not be installed: {reason}")
        pytest.skip(f"pgbouncer is not available: {reason}")
    base = plugin._postgres_base_url()
    # Not pytest's tmp_path: pgbouncer runs as the postgres user, which cannot enter root's temporary folders.
    b = Bouncer(base, Path(f"/tmp/durastate-pgbouncer-{os.getpid()}-{time.monotonic_ns()}"), binary)
    b.start()
    yield b
    b.stop()


def _through_bouncer(bouncer: Bouncer, reuse: bool) -> Iterator[str]:
    """A schema reached through ``bouncer``; ``reuse``: from the process's ``SchemaPool`` (see the plugin)."""
    base = plugin._postgres_base_url()
    pool = postgres_server.schema_pool(base) if reuse else None
    url, schema = postgres_server.create_schema(base) if pool is None else pool.take()
    try:
        yield bouncer.url_for(schema)
    finally:
        if pool is None:
            postgres_server.drop_schema(base, schema)
        else:
            pool.give_back(url, schema)


@pytest.fixture(params=["postgres-pgbouncer"])
def store_url(request: pytest.FixtureRequest, bouncer: Bouncer) -> Iterator[str]:
    yield from _through_bouncer(bouncer, reuse=plugin._only_through_store(request))


@pytest.fixture(params=["postgres-pgbouncer"])
def shared_url(bouncer: Bouncer) -> Iterator[str]:
    yield from _through_bouncer(bouncer, reuse=False)
