"""Suite-wide hooks: long tests first, and what parallel runs (pytest-xdist, ``make test``) need.

``make test`` runs the suite in several worker processes (``-n``, load
scheduling one test at a time, so the queue is taken in collection order).
Long tests go to the front of that queue (``slow`` first, then
``multiprocess``, each the longest ``timeout`` first), so no worker starts
one near the end while the others sit idle: pi-durable's own suite first
of all (minutes of subprocesses, mostly waiting). Without xdist the order is the same, and pi-durable's suite
is started as soon as collection selects it, to run beside the rest.

Under xdist, the controller finds (or starts) the PostgreSQL server once
and hands its URL to the workers through ``DURASTATE_TEST_POSTGRES_URL``,
so they share one throwaway cluster instead of making one each.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest_plugins = ["durastate.testing.plugin"]

# The queue's front, in this order; everything else keeps its collected order behind them.
_FIRST_MARKS = ("slow", "multiprocess")


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


# (server URL, run database URL) when this process made a database for the run (pytest_configure).
_run_database: list[tuple[str, str]] = []


def pytest_configure(config: pytest.Config) -> None:
    """Install the read guard (``tests/_read_guard.py``). Under xdist (in the controller), find the server once
    for every worker; given a server (``DURASTATE_TEST_POSTGRES_URL``), make the run a database of its own there,
    dropped at the end (``postgres_server.run_database``): the schemas of a run then never bloat the given
    database's catalogs."""
    import _read_guard

    _read_guard.install()
    if _is_xdist_worker(config):
        return
    from durastate.testing import postgres_server

    given = os.environ.get(postgres_server.ENV_URL)
    if given:
        run_url, _reason = postgres_server.run_database(given)  # on refusal the run uses the given database
        if run_url != given:
            _run_database.append((given, run_url))
            os.environ[postgres_server.ENV_URL] = run_url
            postgres_server._cached = None  # found again, from the environment
    elif getattr(config.option, "numprocesses", None):
        url, _reason = postgres_server.server_url()  # the reason is reported again by each worker's skips
        if url is not None:
            os.environ.setdefault(postgres_server.ENV_URL, url)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Drop the run's database, after every worker and subprocess of the run has finished."""
    from durastate.testing import postgres_server

    for given, run_url in _run_database:
        postgres_server.drop_run_database(given, run_url)
        os.environ[postgres_server.ENV_URL] = given
    _run_database.clear()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    """Long tests first, the longer timeout first within a mark (a stable sort: every xdist worker must collect
    the same order)."""

    def rank(item: Any) -> tuple[int, float]:
        timeout = item.get_closest_marker("timeout")
        longest = -float(timeout.args[0]) if timeout is not None and timeout.args else 0.0
        for position, mark in enumerate(_FIRST_MARKS):
            if item.get_closest_marker(mark) is not None:
                return position, longest
        return len(_FIRST_MARKS), 0.0

    items.sort(key=rank)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist, start pi-durable's own suite (subprocesses, minutes long) as soon as the test that checks
    it is selected, so it runs beside the rest of the suite instead of after it. Under xdist the test starts them
    itself: it is first in the queue, and a worker is free to wait for them."""
    if _is_xdist_worker(session.config) or session.config.option.collectonly:
        return
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__.endswith("test_pi_durable_upstream"):
            module.start_in_background()
            return
