"""Conformance: ``durastate.open(facets=...)`` creates, migrates and hands out only the facets named.

Each facet of the registry (``durastate.facets.FACETS``) creates exactly the
tables it declares; a store opened with some facets has only their tables
(and the engine's own), refuses the others with ``ConfigurationError``, and
gets the rest when opened later with them. Nothing here names an engine.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import durastate
from durastate.engines.base import CORE_SCHEMA, READ
from durastate.facets import FACET_NAMES, FACETS
from durastate.testing.clock import FakeClock

__all__ = ["TestFacetSelection"]

ALL_TABLES = {table for facet in FACETS for table in facet.tables}


def tables_of(store: durastate.Store) -> set[str]:
    """The facet tables (without prefix) the store's database has, asked through the engine."""
    engine = store.engine
    exists = engine.sql(READ(engine.dialect.table_exists))
    return {table for table in ALL_TABLES if engine.one(exists, (engine.prefix + table,)) is not None}


def versions_of(store: durastate.Store) -> dict[str, int]:
    engine = store.engine
    return {str(f): int(v) for f, v in engine.all(engine.sql(READ("SELECT facet, version FROM {p}schema")))}


class TestFacetSelection:
    @pytest.mark.parametrize("name", FACET_NAMES)
    def test_each_facet_creates_exactly_its_declared_tables(
        self, open_shared: Callable[..., durastate.Store], name: str
    ) -> None:
        store = open_shared(facets=[name])
        facet = next(f for f in FACETS if f.name == name)
        assert store.facets == (name,)
        assert tables_of(store) == set(facet.tables)
        assert versions_of(store) == {CORE_SCHEMA.facet: CORE_SCHEMA.version, name: facet.schema.version}

    def test_other_facets_are_refused_and_come_with_a_later_open(
        self, open_shared: Callable[..., durastate.Store], clock: FakeClock
    ) -> None:
        narrow = open_shared(facets=["kv", "queues"], clock=clock)
        assert narrow.facets == ("kv", "queues")
        narrow.kv.put(b"s", b"n", b"k", b"v")
        narrow.queues.push("q", [b"job"])
        for other in ("documents", "records", "events", "presence"):
            with pytest.raises(durastate.ConfigurationError, match=rf"store\.{other}: this store was opened with"):
                getattr(narrow, other)
        with pytest.raises(AttributeError):
            _ = narrow.no_such_facet
        report = narrow.maintain()  # the rules of facets it lacks are skipped, not failed
        assert report.finished and report.total() == 0
        narrow.close()
        full = open_shared(clock=clock)  # every facet: the missing ones are created now
        assert full.facets == FACET_NAMES
        assert tables_of(full) == ALL_TABLES
        assert full.kv.get(b"s", b"n", b"k") == b"v"
        full.events.append("session", [{"type": "t"}])
        assert full.maintain().finished

    def test_read_only_needs_only_the_facets_it_names(self, open_shared: Callable[..., durastate.Store]) -> None:
        open_shared(facets=["kv"]).kv.put(b"s", b"n", b"k", b"v")
        reader = open_shared(facets=["kv"], read_only=True)
        assert reader.kv.get(b"s", b"n", b"k") == b"v"
        # Not naming any: the facets the database has (a read-only store cannot create the others).
        everything = open_shared(read_only=True)
        assert everything.facets == ("kv",)
        assert everything.kv.get(b"s", b"n", b"k") == b"v"
        with pytest.raises(durastate.ConfigurationError, match="opened read_only, but its schema"):
            open_shared(facets=["kv", "queues"], read_only=True)  # named, and missing

    @pytest.mark.parametrize(
        ("facets", "message"),
        [
            ("kv", "facets must be a list of facet names"),
            (["kv", "nope"], "facets: no facet named 'nope'"),
            ([], "facets must name at least one facet"),
            ([1], "facets: no facet named 1"),
            (42, "facets must be a list of facet names"),
        ],
    )
    def test_bad_facet_lists_are_refused_before_anything_is_created(
        self, open_shared: Callable[..., durastate.Store], facets: object, message: str
    ) -> None:
        with pytest.raises(durastate.ConfigurationError, match=message):
            open_shared(facets=facets)
        assert tables_of(open_shared(facets=["presence"])) == {"presence"}  # the refused open created nothing
