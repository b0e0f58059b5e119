"""The facet registry (``durastate.facets``) is what every front end iterates.

``Store``, ``AsyncStore``, ``ShardedStore`` (tests/test_sharding.py), the
CLI and the boundary guards (tests/test_facet_boundaries.py) take their
facets from ``FACETS``; the typed attributes a type checker needs are
checked against it here, and facets are made at their first use.
"""

from __future__ import annotations

import ast
import asyncio
import threading
import typing
from pathlib import Path

import pytest

import durastate
from durastate import aio
from durastate.aio import _facades
from durastate.cli.inspect import FACET_OF
from durastate.facets import FACET_NAMES, FACETS, chosen, schemas
from durastate.sharding import ShardedStore
from durastate.store import SCHEMAS, Store


def test_names_are_unique_and_every_facet_has_a_schema_of_its_own_name() -> None:
    assert len(set(FACET_NAMES)) == len(FACET_NAMES)
    assert [facet.schema.facet for facet in FACETS] == list(FACET_NAMES)
    assert schemas(FACETS) == SCHEMAS and SCHEMAS[1:] == tuple(facet.schema for facet in FACETS)
    assert chosen(["presence", "kv"]) == tuple(f for f in FACETS if f.name in ("kv", "presence"))  # registry order


def test_store_declares_every_facet_with_its_class() -> None:
    hints = typing.get_type_hints(Store, localns={facet.cls.__name__: facet.cls for facet in FACETS})
    assert {name: hints.get(name) for name in FACET_NAMES} == {facet.name: facet.cls for facet in FACETS}


def test_sharded_store_declares_every_routed_facet() -> None:
    from durastate.sharding import ROUTERS

    hints = typing.get_type_hints(ShardedStore)
    assert {n: hints[n] for n in FACET_NAMES if n in hints} == {
        n: r for n, r in ROUTERS.items() if not isinstance(r, str)
    }


def test_async_store_has_a_typed_facade_for_every_facet() -> None:
    stub = ast.parse(Path(_facades.__file__).with_suffix(".pyi").read_text())
    facets = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "AsyncFacets")
    declared = {ast.unparse(n.target): ast.unparse(n.annotation) for n in facets.body if isinstance(n, ast.AnnAssign)}
    assert declared == _facades.FACADE_OF
    assert set(_facades.FACADE_OF.values()) <= set(aio.__all__), "durastate.aio does not export every facade"


def test_no_table_belongs_to_two_facets_so_the_cli_groups_every_table_once() -> None:
    assert len(FACET_OF) == sum(len(facet.tables) for facet in FACETS)


def test_facets_are_made_at_first_use_once_even_when_threads_race() -> None:
    with durastate.open("memory:") as store:
        assert not any(name in vars(store) for name in FACET_NAMES)  # opening made none
        seen: list[object] = []
        barrier = threading.Barrier(8)

        def first_use() -> None:
            barrier.wait(10)
            seen.append(store.documents)

        threads = [threading.Thread(target=first_use) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(seen) == 8 and all(made is seen[0] for made in seen)
        assert [name for name in FACET_NAMES if name in vars(store)] == ["documents"]


def test_async_store_opens_only_the_facets_named(tmp_path: Path) -> None:
    async def main() -> None:
        async with aio.open(tmp_path / "a.db", facets=["kv"]) as store:
            await store.kv.put(b"s", b"n", b"k", b"v")
            assert await store.kv.get(b"s", b"n", b"k") == b"v"
            with pytest.raises(durastate.ConfigurationError, match=r"store\.events"):
                _ = store.events
            with pytest.raises(AttributeError):
                _ = store.no_such_facet

    asyncio.run(main())
