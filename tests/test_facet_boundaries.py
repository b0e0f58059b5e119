"""Facet boundaries: no facet imports another facet or a driver; one error per kind of mistake.

The facets (the registry's, ``durastate.facets.FACETS``) stand side by side
on the engine layer and share only ``_validate`` (limits, text rules,
argument checks), ``_json``, ``_retention``, ``_paging`` and ``errors``.
Every facet is a package ``durastate/<name>/``; every package under
``durastate`` is a facet of the registry or one of ``NOT_FACETS``, so a new
facet package is checked here as soon as it exists (or this test fails
until it is registered). The import check parses every module of every
facet with ``ast``, so it sees imports inside functions and
``TYPE_CHECKING`` blocks too.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate import InvalidRequest, WrongType
from durastate.facets import FACET_NAMES
from durastate.kv import KV, ScopedKV

PACKAGE = Path(durastate.__file__).parent
DRIVERS = ("sqlite3", "psycopg", "psycopg_pool", "durastate.engines.sqlite", "durastate.engines.postgres")
# The packages under durastate that are not facets: the layers below and above them.
NOT_FACETS = {"aio", "cli", "compat", "engines", "examples", "integrations", "testing"}


def packages(root: Path = PACKAGE) -> set[str]:
    """Every package directly under ``root`` (``durastate``)."""
    return {path.parent.name for path in root.glob("*/__init__.py")}


def facet_modules() -> list[tuple[str, Path]]:
    """(facet, path) for every module of every facet package (subpackages included)."""
    return [(facet, path) for facet in FACET_NAMES for path in sorted((PACKAGE / facet).rglob("*.py"))]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, name: str, *, is_package: bool = False) -> Iterator[str]:
    """Absolute names of every module the module ``name`` imports (``from . import x`` yields ``pkg.x`` too)."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = node.module or ""
            if node.level:
                target = f"{base}.{target}" if target else base
            yield target
            yield from (f"{target}.{alias.name}" for alias in node.names)


def crossings(facet: str, source: str, name: str, *, is_package: bool = False) -> list[str]:
    """The imports of module ``name`` (of ``facet``) that reach another facet or a driver."""
    bad = []
    for target in imported_modules(source, name, is_package=is_package):
        for other in FACET_NAMES:
            home = f"durastate.{other}"
            if other != facet and (target == home or target.startswith(home + ".")):
                bad.append(f"{name} imports {target} (facet {other})")
        for driver in DRIVERS:
            if target == driver or target.startswith(driver + "."):
                bad.append(f"{name} imports {target} (a driver)")
    return bad


def test_every_facet_is_a_package_and_every_package_a_known_layer_or_a_facet() -> None:
    assert all((PACKAGE / facet / "__init__.py").is_file() for facet in FACET_NAMES)
    assert packages() - NOT_FACETS == set(FACET_NAMES), "a package that is neither a facet nor in NOT_FACETS"
    assert not (NOT_FACETS & set(FACET_NAMES))
    assert {facet for facet, _ in facet_modules()} == set(FACET_NAMES)


def test_a_new_package_is_seen_by_the_scan(tmp_path: Path) -> None:
    for name in [*FACET_NAMES, *NOT_FACETS, "newfacet"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "module.py").write_text("")
    assert packages(tmp_path) - NOT_FACETS - set(FACET_NAMES) == {"newfacet"}


@pytest.mark.parametrize(("facet", "path"), facet_modules(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_no_facet_imports_another_facet_or_a_driver(facet: str, path: Path) -> None:
    source = path.read_text()
    assert crossings(facet, source, module_name(path), is_package=path.name == "__init__.py") == []


@pytest.mark.parametrize(
    ("source", "crossing"),
    [
        ("from .events import MAX_DURATION_MS, text", "durastate.events"),
        ("from . import documents", "durastate.documents"),
        ("from durastate.kv import KV", "durastate.kv"),
        ("import sqlite3", "sqlite3"),
        ("def f():\n    import psycopg", "psycopg"),
        ("from .engines.postgres import PostgresEngine", "durastate.engines.postgres"),
        ("from ..events.rows import COLUMNS", "durastate.events.rows"),
    ],
)
def test_the_check_catches_each_kind_of_crossing(source: str, crossing: str) -> None:
    # As a module of presence (the last case: a module of a presence package).
    name = "durastate.presence.facet" if source.startswith("from ..") else "durastate.presence"
    found = crossings("presence", source, name)
    assert any(f"imports {crossing} " in line for line in found), found


def test_a_facet_may_import_its_own_modules_and_the_shared_ones() -> None:
    source = "from .rows import COLUMNS\nfrom .._validate import text\nfrom ..engines.base import READ"
    assert crossings("events", source, "durastate.events.facet") == []


# -- the scoped kv view cannot drift from the facet ----------------------------


def scoped_methods() -> list[str]:
    """Public KV methods whose first argument is ``scope``: each has a ScopedKV twin."""
    names = []
    for name, method in inspect.getmembers(KV, inspect.isfunction):
        parameters = list(inspect.signature(method).parameters)
        if not name.startswith("_") and parameters[1:2] == ["scope"] and name != "scope":
            names.append(name)
    return names


def test_scoped_methods_are_found() -> None:
    assert {"get", "put", "scan", "delete", "clear", "append", "log", "incr", "trim_log"} <= set(scoped_methods())


@pytest.mark.parametrize("name", scoped_methods())
def test_scoped_kv_has_every_scoped_method_with_the_same_signature(name: str) -> None:
    facet = inspect.signature(getattr(KV, name))
    assert hasattr(ScopedKV, name), f"ScopedKV has no {name}() (KV.{name}{facet})"
    view = inspect.signature(getattr(ScopedKV, name))
    without_scope = facet.replace(parameters=[p for p in facet.parameters.values() if p.name != "scope"])
    assert str(view) == str(without_scope)


def test_scoped_kv_has_no_method_the_facet_lacks() -> None:
    own = {name for name, _ in inspect.getmembers(ScopedKV, inspect.isfunction) if not name.startswith("_")}
    assert own <= set(scoped_methods())


# -- the same mistake raises the same error everywhere -------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[durastate.Store]:
    with durastate.open(tmp_path / "boundaries.db") as opened:
        yield opened


TOO_LONG = "x" * 5000

# (facet call, argument named in the message): each takes one bad argument.
NAMED_ARGUMENTS: list[tuple[str, Callable[[durastate.Store, Any], Any], str]] = [
    ("documents.read", lambda s, v: s.documents.read(v), "key"),
    ("documents.write", lambda s, v: s.documents.write(v, {}), "key"),
    ("events.read", lambda s, v: s.events.read(v), "session_id"),
    ("events.list_snapshots", lambda s, v: s.events.list_snapshots(v), "session_id"),
    ("presence.read", lambda s, v: s.presence.read(v), "ns"),
    ("presence.remove", lambda s, v: s.presence.remove("ns", v), "participant"),
]


@pytest.mark.parametrize(("where", "call", "argument"), NAMED_ARGUMENTS, ids=[c[0] for c in NAMED_ARGUMENTS])
def test_a_wrong_type_is_wrong_type_everywhere(
    store: durastate.Store, where: str, call: Callable[[durastate.Store, Any], Any], argument: str
) -> None:
    for value in (1, b"bytes", None):
        with pytest.raises(WrongType) as caught:
            call(store, value)
        assert isinstance(caught.value, TypeError) and isinstance(caught.value, InvalidRequest)
        assert type(caught.value) is WrongType
        assert str(caught.value) == f"{argument} must be a str, got {type(value).__name__}"


@pytest.mark.parametrize(("where", "call", "argument"), NAMED_ARGUMENTS, ids=[c[0] for c in NAMED_ARGUMENTS])
def test_a_bad_name_is_invalid_request_everywhere(
    store: durastate.Store, where: str, call: Callable[[durastate.Store, Any], Any], argument: str
) -> None:
    cases = [
        (TOO_LONG, rf"^{argument} is 5000 bytes; the limit is \d+$"),
        ("a\x00b", rf"^{argument} must not contain NUL characters, got 'a\\x00b'$"),
        ("\ud800", rf"^{argument} must be valid unicode \(no lone surrogates\), got "),
    ]
    for value, message in cases:
        with pytest.raises(InvalidRequest) as caught:
            call(store, value)
        assert type(caught.value) is InvalidRequest, caught.value
        assert re.search(message, str(caught.value)), str(caught.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.kv.get("scope", b"n", b"k"),
        lambda s: s.kv.put(b"s", b"n", b"k", "value"),
        lambda s: s.queues.push(1, b"payload"),
        lambda s: s.queues.push("q", "payload"),
        lambda s: s.events.read("s", after_index="1"),
        lambda s: s.documents.list("p", limit="1"),
        lambda s: s.kv.scan(b"s", b"n", reverse=1),
    ],
)
def test_other_wrong_types_are_wrong_type(store: durastate.Store, call: Callable[[durastate.Store], Any]) -> None:
    with pytest.raises(WrongType, match=r" must be .+, got \w+$"):
        call(store)


def test_invalid_document_keeps_its_meaning(store: durastate.Store) -> None:
    from durastate.documents import InvalidDocument

    with pytest.raises(InvalidDocument):
        store.documents.write("k", {"v": {1, 2}})
    with pytest.raises(WrongType) as caught:
        store.documents.read(1)  # type: ignore[arg-type]
    assert not isinstance(caught.value, InvalidDocument)
