"""Pytest fixtures of the conformance suite.

Every conformance test opens its stores through ONE factory,
``durastate_open(url, **options)`` (default: ``durastate.open``), by way of
``open_store(**options)`` (the test's ``store_url``) or
``open_shared(**options)`` (the test's ``shared_url``); both close what they
opened at teardown. Worker processes open ``shared_url`` with
``durastate.open`` (the engine's scheme must be registered in them too, e.g.
by an entry point: see ``docs/third-party-engine.md``).

``store_url`` is parametrized over ``ENGINES``: ``sqlite-file`` (a fresh
file per test), ``sqlite-memory`` and ``postgres`` (a schema per test on the
server ``durastate.testing.postgres_server`` finds: a new one, or, for a
test that reaches its store only through the ``store`` fixture, one that an
earlier test used, emptied back to what a fresh migration leaves, see
``postgres_server.SchemaPool``). ``shared_url``
is the subset whose data other stores and processes can see (no memory).
When no PostgreSQL server can be found, its parameters are skipped with the
reason, and the reason is repeated in the terminal summary.

A third-party engine runs the suite by overriding ``store_url`` and
``shared_url`` in its ``conftest.py`` (fresh, empty URLs of its scheme), and
``durastate_open`` if opening a store needs more than its URL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines.capabilities import Capabilities

from . import postgres_server
from .clock import FakeClock
from .conformance.plans import STATISTICS

ENGINES = ["sqlite-file", "sqlite-memory", "postgres"]
SHARED_ENGINES = ["sqlite-file", "postgres"]
# The conformance suite adds PostgreSQL in the Citus statement mode
# (``citus://``, see ``durastate.citus``): on the Citus coordinator of
# ``DURASTATE_TEST_CITUS_URL`` when set (each test's schema is then a
# distributed schema), else on the plain PostgreSQL server, so the mode is
# checked on every run. tests/conformance/conftest.py widens ``store_url``
# and ``shared_url`` with it.
CITUS_ENGINE = "citus"

_pg_skip_reason: list[str] = []


def _postgres_base_url() -> str:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install 'durastate[postgres]')"
        _pg_skip_reason[:] = [reason]
        pytest.skip(reason)
    url, reason = postgres_server.server_url()
    if url is None:
        _pg_skip_reason[:] = [reason]
        pytest.skip(f"PostgreSQL half skipped: {reason}")
    return url


def _url_for(engine: str, tmp_path: Path, reuse: bool = False) -> Iterator[str]:
    if engine == "sqlite-file":
        yield f"sqlite://{tmp_path / 'state.db'}"  # sqlite:///abs/path
    elif engine == "sqlite-memory":
        yield "memory:"
    elif engine in ("postgres", CITUS_ENGINE):
        citus = engine == CITUS_ENGINE
        base = (postgres_server.citus_url()[0] if citus else None) or _postgres_base_url()
        pool = postgres_server.schema_pool(base, citus=citus) if reuse else None
        url, schema = postgres_server.create_schema(base) if pool is None else pool.take()
        try:
            yield postgres_server.as_citus(url) if citus else url
        finally:
            if pool is None:
                postgres_server.drop_schema(base, schema)
            else:
                pool.give_back(url, schema)
    else:  # pragma: no cover
        raise ValueError(engine)


# Fixtures that hand a test the URL itself, or open stores on it as the test asks.
_OPENERS = frozenset({"store_url", "open_store", "shared_url", "open_shared"})


def _only_through_store(request: pytest.FixtureRequest) -> bool:
    """Whether the test reaches its store only through the ``store`` fixture, and is no plan check.

    Such a test sees a store exactly as ``durastate.open`` left it: how it
    got there (migrating an empty schema or finding a current one) is not
    its subject, so on PostgreSQL it may get a schema from the
    ``SchemaPool``. A test that takes the URL or opens stores itself (any
    fixture on its way does), or checks plans on fresh tables, gets a new
    schema.
    """
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and any(value in STATISTICS for value in callspec.params.values()):
        return False
    info = getattr(request.node, "_fixtureinfo", None)
    if info is None:
        return False
    seen: set[str] = set()
    todo = list(info.argnames)
    while todo:
        name = todo.pop()
        if name in seen or name == "store":
            seen.add(name)
            continue
        if name in _OPENERS:
            return False
        seen.add(name)
        for definition in info.name2fixturedefs.get(name, ()):
            todo.extend(definition.argnames)
    return "store" in seen


@pytest.fixture(params=ENGINES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store URL for each engine (see ``_only_through_store`` for PostgreSQL's pool)."""
    yield from _url_for(request.param, tmp_path, reuse=_only_through_store(request))


@pytest.fixture(params=SHARED_ENGINES)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL that several stores and processes can open."""
    yield from _url_for(request.param, tmp_path)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def durastate_open() -> Callable[..., durastate.Store]:
    """The one way the suite opens a store: ``durastate_open(url, **options)``."""
    return durastate.open


def _stores_of(open_url: Callable[..., durastate.Store], url: str) -> Iterator[Callable[..., durastate.Store]]:
    """Yield ``factory(**options)`` opening ``url``; close every store it opened afterwards."""
    opened: list[durastate.Store] = []

    def factory(**options: Any) -> durastate.Store:
        s = open_url(url, **options)
        opened.append(s)
        return s

    yield factory
    for s in opened:
        s.close()


@pytest.fixture
def open_store(
    store_url: str, durastate_open: Callable[..., durastate.Store]
) -> Iterator[Callable[..., durastate.Store]]:
    """``open_store(**options)`` opens the test's ``store_url``; all closed at teardown."""
    yield from _stores_of(durastate_open, store_url)


@pytest.fixture
def open_shared(
    shared_url: str, durastate_open: Callable[..., durastate.Store]
) -> Iterator[Callable[..., durastate.Store]]:
    """``open_shared(**options)`` opens the test's ``shared_url``; all closed at teardown."""
    yield from _stores_of(durastate_open, shared_url)


@pytest.fixture
def store_capabilities(store_url: str, durastate_open: Callable[..., durastate.Store]) -> Capabilities:
    """What the engine behind ``store_url`` declares (``engine.capabilities``), for tests that skip by it.

    Opens (and closes) one store on the URL to ask; a test that must find
    the URL untouched asks a store it opens itself instead.
    """
    with durastate_open(store_url) as opened:
        return opened.engine.capabilities


@pytest.fixture
def store(open_store: Callable[..., durastate.Store], clock: FakeClock) -> durastate.Store:
    """A store on each engine, driven by the test's ``clock``."""
    return open_store(clock=clock)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _pg_skip_reason:
        terminalreporter.write_sep("!", "PostgreSQL half of the suite was SKIPPED", red=True, bold=True)
        terminalreporter.write_line(_pg_skip_reason[0])


def pytest_configure(config: Any) -> None:
    # The suite's marks, so a third-party project needs no ini of its own.
    config.addinivalue_line("markers", "multiprocess: spawns several processes against one store")
    config.addinivalue_line("markers", "slow: longer-running tests")
