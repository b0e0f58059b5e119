"""Conformance: the failures users of peer libraries report, each a test durastate passes (issue 26).

README, "What goes wrong elsewhere, and what durastate does", names each
test here with its pain. Real processes (fork), synchronised by barriers,
every wait with a deadline (``multiprocess``'s plumbing):

* pain 1, "database is locked" at startup: 16 processes open one new store
  at the same instant and each writes: no error, one migration;
* pain 2, migrations at a concurrent start: processes open, at once, a
  store whose schema is one version older than the code's, and one from
  the oldest version still supported: no error, each step applied once
  (a second run of a step would fail its CREATE or ALTER), data intact;
* pain 3, lost updates: processes compare-and-swap one document: every
  increment lands, every lost race is reported to its caller as
  ``Conflict``.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

import durastate
from durastate.engines import registry
from durastate.engines.schema import Schema
from durastate.errors import Conflict
from durastate.store import SCHEMAS

from .multiprocess import SCOPE, WORKER_TIMEOUT, _opened, _Workers, open_at_once

__all__ = ["TestPainConcurrentMigration", "TestPainLostUpdates", "TestPainStartupLocked"]

METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _versions(store: durastate.Store) -> list[tuple[str, int]]:
    engine = store.engine
    rows = engine.all(engine.sql("SELECT facet, version FROM {p}schema ORDER BY facet"))
    return [(str(facet), int(version)) for facet, version in rows]


@pytest.mark.multiprocess
class TestPainStartupLocked:
    """Pain 1: many processes first-opening one new store at once."""

    OPENERS = 16

    def test_sixteen_processes_open_a_new_store_at_once_and_each_writes(self, shared_url: str) -> None:
        with _Workers(METHOD) as workers:
            barrier = workers.ctx.Barrier(self.OPENERS)
            for i in range(self.OPENERS):
                workers.start(f"opener-{i}", open_at_once, shared_url, barrier)
            results = workers.results()
        expected = sorted((schema.facet, schema.version) for schema in SCHEMAS)
        assert all(versions == expected for versions in results.values()), results
        with _opened(shared_url) as store:
            assert store.kv.counter(SCOPE, b"openers", b"count") == self.OPENERS


def _older_store(url: str, keep: int | None) -> None:
    """Build the store at an older schema: each facet's first ``keep`` steps (``None``: all but its last).

    A facet keeps at least its first step (the engine's own core schema
    has one, and the data written here needs kv's).
    """
    engine = registry.create(url, {})
    try:
        older = [
            Schema(schema.facet, schema.migrations[: max(1, len(schema.migrations) - 1 if keep is None else keep)])
            for schema in SCHEMAS
        ]
        assert older != list(SCHEMAS), "no facet has a step to leave out"
        engine.migrate(older)
        engine.execute(
            engine.sql("INSERT INTO {p}kv (scope, ns, key, value) VALUES (?, ?, ?, ?)"),
            (SCOPE, b"kept", b"before", b"from the older schema"),
        )
    finally:
        engine.close()


def open_migrate_and_read(url: str, barrier: Any) -> tuple[list[tuple[str, int]], bytes | None]:
    """Open the older store with every sibling at once (migrating it), then read what it held."""
    barrier.wait(WORKER_TIMEOUT)
    with _opened(url) as store:
        store.kv.incr(SCOPE, b"openers", b"count")
        return _versions(store), store.kv.get(SCOPE, b"kept", b"before")


@pytest.mark.multiprocess
class TestPainConcurrentMigration:
    """Pain 2: processes opening an older store at once migrate it exactly once."""

    OPENERS = 8

    @pytest.mark.parametrize("keep", [None, 1], ids=["one-version-older", "oldest-supported"])
    def test_processes_opening_an_older_store_at_once_migrate_it_once(self, shared_url: str, keep: int | None) -> None:
        _older_store(shared_url, keep)
        with _Workers(METHOD) as workers:
            barrier = workers.ctx.Barrier(self.OPENERS)
            for i in range(self.OPENERS):
                workers.start(f"opener-{i}", open_migrate_and_read, shared_url, barrier)
            results = workers.results()
        expected = sorted((schema.facet, schema.version) for schema in SCHEMAS)
        for name, (versions, kept) in results.items():
            assert versions == expected, name
            assert kept == b"from the older schema", name
        with _opened(shared_url) as store:
            assert store.kv.counter(SCOPE, b"openers", b"count") == self.OPENERS


INCREMENTS = 25


def cas_increment(url: str, barrier: Any) -> int:
    """Add 1 to the shared document's count ``INCREMENTS`` times by compare-and-swap; the conflicts it met."""
    conflicts = 0
    with _opened(url) as store:
        barrier.wait(WORKER_TIMEOUT)
        done = 0
        while done < INCREMENTS:
            current = store.documents.read("counter")
            assert current is not None
            try:
                store.documents.write("counter", {"n": current.data["n"] + 1}, expect=current.revision)
            except Conflict:
                conflicts += 1  # reported: read again and retry
                continue
            done += 1
    return conflicts


@pytest.mark.multiprocess
class TestPainLostUpdates:
    """Pain 3: concurrent writers of one document lose nothing; every lost race is reported."""

    WRITERS = 4

    def test_concurrent_compare_and_swap_loses_no_update(self, shared_url: str) -> None:
        with _opened(shared_url) as store:
            first = store.documents.write("counter", {"n": 0})
        with _Workers(METHOD) as workers:
            barrier = workers.ctx.Barrier(self.WRITERS)
            for i in range(self.WRITERS):
                workers.start(f"writer-{i}", cas_increment, shared_url, barrier)
            results = workers.results()
        with _opened(shared_url) as store:
            final = store.documents.read("counter")
        assert final is not None
        assert final.data["n"] == self.WRITERS * INCREMENTS  # nothing lost
        # Each successful write made exactly one revision: no write landed unreported or twice.
        assert final.revision - first == self.WRITERS * INCREMENTS, results
