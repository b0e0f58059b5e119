"""Every statement a facet runs declares its kind (read, write, ...) where it is written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import durastate
from durastate.engines.base import SQL, Kind
from durastate.facets import FACET_NAMES


def compiled_statements(value: Any, path: str) -> Iterator[tuple[str, SQL]]:
    if isinstance(value, SQL):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from compiled_statements(item, f"{path}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from compiled_statements(item, f"{path}[{i}]")


@pytest.mark.parametrize("facet", FACET_NAMES)
def test_every_facet_statement_has_a_declared_kind(facet: str) -> None:
    with durastate.open("memory:") as store:
        found = list(compiled_statements(vars(getattr(store, facet)), facet))
    assert found, f"{facet} compiles no statements?"
    undeclared = [path for path, sql in found if not isinstance(getattr(sql, "kind", None), Kind)]
    assert undeclared == []


def test_every_dialect_fills_every_token() -> None:
    from durastate.engines.base import TOKENS
    from durastate.engines.postgres import POSTGRES_DIALECT
    from durastate.engines.sqlite import SQLITE_DIALECT

    assert set(SQLITE_DIALECT.tokens) == set(TOKENS)
    assert set(POSTGRES_DIALECT.tokens) == set(TOKENS)


def test_argument_tokens_take_their_argument() -> None:
    from durastate.engines.postgres import POSTGRES_DIALECT
    from durastate.engines.sqlite import SQLITE_DIALECT

    template = "INSERT INTO {p}t (id, n) VALUES ({next_value:t_seq}, ?){for_update_of:x}"
    assert SQLITE_DIALECT.compile(template, "ds_") == "INSERT INTO ds_t (id, n) VALUES (NULL, ?)"
    assert (
        POSTGRES_DIALECT.compile(template, "ds_")
        == "INSERT INTO ds_t (id, n) VALUES (ds_next_value('t_seq'), %s) FOR UPDATE OF x"
    )


def test_only_a_bool_declares_a_write_idempotent() -> None:
    from durastate.engines.base import WRITE

    assert WRITE("DELETE FROM {p}kv", idempotent=True).idempotent
    assert not WRITE("DELETE FROM {p}kv").idempotent
    with pytest.raises(durastate.WrongType, match="idempotent must be a bool"):
        WRITE("DELETE FROM {p}kv", idempotent="yes")  # type: ignore[arg-type]


def test_an_idempotent_write_compiles_apart_from_the_same_text_undeclared() -> None:
    """Compiled statements are cached by text: the declaration is part of the key."""
    from durastate.engines.base import WRITE

    with durastate.open("memory:") as store:
        plain = store.engine.sql(WRITE("DELETE FROM {p}kv WHERE scope = ?"))
        idempotent = store.engine.sql(WRITE("DELETE FROM {p}kv WHERE scope = ?", idempotent=True))
    assert (plain.idempotent, idempotent.idempotent) == (False, True)
