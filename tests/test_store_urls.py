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


def test_a_sqlite_url_with_a_query_string_is_refused_naming_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url, named in (
        (f"sqlite://{tmp_path}/x/q.db?mode=ro", "'mode'"),
        ("sqlite:q.db?cache=shared&nolock=1", "'cache', 'nolock'"),
        ("sqlite:///:memory:?cache=shared", "'cache'"),
        (f"sqlite://{tmp_path}/q.db?", "empty query string"),
    ):
        with pytest.raises(durastate.ConfigurationError, match=named):
            durastate.open(url)
        with pytest.raises(durastate.ConfigurationError, match=named):
            registry.file_of(url)  # the CLI's parser says the same
    assert list(tmp_path.iterdir()) == []  # nothing created: no q.db?mode=ro, no folder


def test_a_sqlite_url_with_a_fragment_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``#`` starts a URL's fragment: refused like a query string, not taken into the file name (``x.db#frag``)."""
    monkeypatch.chdir(tmp_path)
    for url, named in (
        (f"sqlite://{tmp_path}/x/f.db#frag", "a fragment '#frag'"),
        ("sqlite:f.db#", "an empty fragment"),
        ("sqlite:///:memory:#frag", "a fragment '#frag'"),
        ("sqlite:f.db#part?mode=ro", "a fragment '#part\\?mode=ro'"),  # a "?" inside the fragment is the fragment's
        ("sqlite:f.db?mode=ro#frag", "'mode'"),  # a query first: refused naming its options, as before
    ):
        with pytest.raises(durastate.ConfigurationError, match=named):
            durastate.open(url)
        with pytest.raises(durastate.ConfigurationError, match=named):
            registry.file_of(url)  # the CLI's parser says the same
    assert list(tmp_path.iterdir()) == []  # nothing created: no f.db#frag, no folder


def test_file_and_memory_urls_with_a_rest_are_refused_not_taken_as_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in (f"file:{tmp_path}/x/f.db", "file:f.db", f"file://{tmp_path}/f.db", "FILE:f.db?mode=ro"):
        with pytest.raises(durastate.ConfigurationError, match="file: URLs are not store URLs"):
            durastate.open(url)
    with pytest.raises(durastate.ConfigurationError, match="memory: takes nothing"):
        durastate.open("memory:?cache=shared")
    assert list(tmp_path.iterdir()) == []


def test_a_plain_path_is_taken_literally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for odd in ("odd?name=1.db", "odd#name.db"):
        with durastate.open(str(tmp_path / odd)) as store:  # a str that is not a URL: a file name
            store.kv.put(b"s", b"n", b"k", b"v")
        assert registry.file_of(odd) == odd
    for name in ("sqlite:p.db", "file:p.db", "memory:"):  # a Path object is a path, whatever its text
        with durastate.open(Path(name)) as store:
            assert store.engine.file == tmp_path / name
        assert registry.file_of(Path(name)) == f"./{name}"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == sorted(
        ["odd?name=1.db", "odd#name.db", "sqlite:p.db", "file:p.db", "memory:"]
    )


def test_a2s_sqlite_opener_takes_its_path_as_the_file_it_names(tmp_path: Path) -> None:
    """``compat.a2.sqlite(path)`` takes a path, as its seed does: a name with ``#`` or ``?`` is that file (it made
    a ``sqlite:`` URL of it, refused as a URL with a fragment or a query string)."""
    from durastate.compat import a2

    for name in ("odd#1.db", "odd?x=1.db", "odd:2.db"):
        opened = a2.sqlite(str(tmp_path / name))
        try:
            assert opened._store.engine.file == tmp_path / name
        finally:
            opened.close()
    with pytest.raises(TypeError, match="must not be empty"):
        a2.sqlite("")
