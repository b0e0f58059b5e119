"""Every statement a facet runs declares its kind (read, write, ...) where it is written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import durastate
from durastate.engines.base import SQL, Kind


def compiled_statements(value: Any, path: str) -> Iterator[tuple[str, SQL]]:
    if isinstance(value, SQL):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from compiled_statements(item, f"{path}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from compiled_statements(item, f"{path}[{i}]")


@pytest.mark.parametrize("facet", ["kv", "queues", "documents", "records", "events", "presence"])
def test_every_facet_statement_has_a_declared_kind(facet: str) -> None:
    with durastate.open("memory:") as store:
        found = list(compiled_statements(vars(getattr(store, facet)), facet))
    assert found, f"{facet} compiles no statements?"
    undeclared = [path for path, sql in found if sql and sql.kind is Kind.OPAQUE]
    assert undeclared == []
