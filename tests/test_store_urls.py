"""One parser of store URLs (``engines.registry``), one default path, shared by ``open`` and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

import durastate
from durastate.cli._common import is_postgres, sqlite_file
from durastate.engines import registry
from durastate.store import DEFAULT_PATH


@pytest.mark.parametrize(
    ("url", "file"),
    [
        (None, registry.DEFAULT_PATH),
        ("state.db", "state.db"),
        ("sqlite:///abs/state.db", "/abs/state.db"),
        ("sqlite:rel/state.db", "rel/state.db"),
        (Path("dir/state.db"), "dir/state.db"),
        ("memory:", None),
        (":memory:", None),
        ("sqlite:///:memory:", None),
        ("postgresql://u@h/db", None),
        ("citus://u@h/db", None),  # another engine's scheme is no file (the CLI once made one of it)
    ],
)
def test_file_of(url: str | Path | None, file: str | None) -> None:
    assert registry.file_of(url) == file
    if not isinstance(url, Path):
        assert sqlite_file(url) == (None if file is None else Path(file))


def test_one_default_path() -> None:
    assert DEFAULT_PATH == Path(registry.DEFAULT_PATH) == sqlite_file(None)


def test_a_malformed_sqlite_url_is_refused_as_open_refuses_it() -> None:
    with pytest.raises(durastate.InvalidRequest, match="sqlite:///absolute"):
        registry.file_of("sqlite://relative/state.db")
    with pytest.raises(durastate.InvalidRequest, match="sqlite:///absolute"):
        durastate.open("sqlite://relative/state.db")


def test_is_postgres_by_the_registry_scheme() -> None:
    assert is_postgres("postgresql://u@h/db") and is_postgres("postgres://u@h/db")
    assert not is_postgres("citus://u@h/db") and not is_postgres("state.db") and not is_postgres(None)
