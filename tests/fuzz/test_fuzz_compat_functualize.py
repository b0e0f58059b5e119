"""Fuzz every public entry point of ``durastate.compat.functualize``: documented refusals only, nothing changed.

Entry points: ``SQLiteSubstrate(path)``, its six port methods (``read``,
``write``, ``lock`` entered and left, ``clear``, ``delete``, ``describe``)
and ``close``; ``SQLiteStatePlugin`` called with an app and its
``APP_READY`` hook run with hostile configuration (the database path,
``fresh_root``, an app that refuses the install).

Keys are drawn from the keys the store holds (a readable document, one
planted with a payload that is not JSON, backups), text with NUL, lone
surrogates and huge sizes, and wrong types; payloads from dicts of JSON
(NaN, infinities, integers past 64 bits, deep nesting, non-``str`` keys,
unserialisable values) and wrong types; ``expect`` from revisions around
the stored ones, int64 edges and wrong types.

The adapter's contract (its module docstring): ``TypeError`` for types,
``ValueError`` (``durastate.InvalidRequest``) for values,
``SubstrateUnreadableError`` for a stored payload that is not a JSON
object, as the seed; from the plugin's hook, functualize's
``SubstrateInstallError`` (functualize 0.4 is installed). Never a driver
error; a refused call changes nothing (a raw dump of every table is
compared).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from durastate.compat.functualize import SQLiteStatePlugin, SQLiteSubstrate, SubstrateUnreadableError

from ._machinery import (
    HOSTILE,
    INT64,
    JSON,
    Target,
    check_refusal,
    dumping,
    fuzz_calls,
    fuzz_target,
    public_methods,
)

__all__ = ["fuzz_target"]

KEYS = st.one_of(
    st.sampled_from(["doc", "bad", "doc.bak", "scope-state/run-1", "scope-state/", "", "/", "k" * 2049, "a%", "a_"]),
    st.text(max_size=12),
    HOSTILE,
)
PAYLOADS = st.one_of(
    st.dictionaries(st.text(max_size=6), JSON, max_size=4),
    st.sampled_from(
        [
            {"n": math.nan},
            {"i": INT64},
            {1: "not a str key"},
            {"s": "\ud800"},
            {"\ud800": 1},
            {"set": {1, 2}},
            {"b": b"bytes"},
            {"t": datetime.datetime(2024, 1, 1)},
            {"x": "y" * 70_000},
        ]
    ),
    HOSTILE,
)
REVISIONS = st.one_of(st.integers(-3, 5), st.sampled_from([INT64 - 1, INT64, 2**64, 1.0, "1", True, None]), HOSTILE)
ALLOWED: tuple[type[BaseException], ...] = (TypeError, ValueError, SubstrateUnreadableError)


@pytest.fixture(scope="module")
def substrate(fuzz_target: Target) -> Iterator[SQLiteSubstrate]:
    opened = SQLiteSubstrate(fuzz_target.url)
    opened.write("doc", {"v": 1})
    opened.write("scope-state/run-1", {"step": 2})
    opened.write("doc.bak", {"old": True})
    # A payload the seed's own reader refuses (not JSON): read raises, clear moves it aside.
    fuzz_target.insert("ds_documents", {"key": "bad", "payload": b"{not json", "revision": 1})
    try:
        yield opened
    finally:
        opened.close()


@dataclass(frozen=True)
class Entry:
    name: str
    draw: st.SearchStrategy[dict[str, Any]]
    call: Callable[[SQLiteSubstrate, Target, dict[str, Any]], Any]
    allowed: tuple[type[BaseException], ...] = ALLOWED


def _lock(s: SQLiteSubstrate, t: Target, kw: dict[str, Any]) -> None:
    with s.lock(*kw["keys"]):
        if kw.get("write") is not None:
            s.write("doc", kw["write"])


def _open(s: SQLiteSubstrate, t: Target, kw: dict[str, Any]) -> None:
    path = t.url if kw["path"] == "TARGET" else kw["path"]
    with SQLiteSubstrate(path) as opened:
        opened.describe("doc")


def _close(s: SQLiteSubstrate, t: Target, kw: dict[str, Any]) -> None:
    opened = SQLiteSubstrate(t.url)
    opened.close()
    opened.close()  # twice is fine


class _Registry:
    def __init__(self) -> None:
        self.hooks: list[Callable[[Any], None]] = []

    def register_global(self, event: Any, hook: Callable[[Any], None]) -> None:
        self.hooks.append(hook)


class _Configuration:
    def __init__(self, db_path: Any) -> None:
        self.db_path = db_path

    def resolve_model(self, section: str, model: Any) -> Any:
        return model(db_path=self.db_path)


class _App:
    """What the plugin touches of a functualize app (0.4: ``install_substrate``)."""

    def __init__(self, fresh_root: Any, db_path: Any, install: str) -> None:
        self.hook_registry = _Registry()
        self.configuration = _Configuration(db_path)
        self.fresh_root = fresh_root
        self.installed: list[Any] = []
        if install == "accepts":
            self.install_substrate = self.installed.append
        elif install == "refuses":
            self.install_substrate = self._refuse

    def _refuse(self, substrate: Any) -> None:
        raise RuntimeError("the substrate was already resolved")


def _plugin(s: SQLiteSubstrate, t: Target, kw: dict[str, Any]) -> None:
    db_path = t.url if kw["db_path"] == "TARGET" else kw["db_path"]
    app = _App(kw["fresh_root"], db_path, kw["install"])
    plugin = SQLiteStatePlugin()
    plugin(app)
    try:
        for hook in app.hook_registry.hooks:
            hook(app)
    finally:
        if plugin.substrate is not None:
            plugin.substrate.close()


def _install_error() -> type[BaseException]:
    from functualize._types.errors import SubstrateInstallError

    error: type[BaseException] = SubstrateInstallError
    return error


PATHS = st.one_of(
    st.just("TARGET"),
    st.sampled_from(["rel.db", "sub/dir/x.db", "", "\x00", "\ud800", "a" * 300, "memory:", ":memory:", "sqlite:x.db"]),
    st.sampled_from([Path("p.db"), b"b.db", 5, None, object()]),
)


def _method(name: str) -> Callable[[SQLiteSubstrate, Target, dict[str, Any]], Any]:
    return lambda s, t, kw: getattr(s, name)(**kw)


ENTRIES = [
    Entry("SQLiteSubstrate.read", st.fixed_dictionaries({"key": KEYS}), _method("read")),
    Entry(
        "SQLiteSubstrate.write",
        st.fixed_dictionaries({"key": KEYS, "payload": PAYLOADS}, optional={"expect": REVISIONS}),
        _method("write"),
    ),
    Entry(
        "SQLiteSubstrate.lock",
        st.fixed_dictionaries({"keys": st.lists(KEYS, max_size=4)}, optional={"write": st.one_of(st.none(), PAYLOADS)}),
        _lock,
    ),
    Entry("SQLiteSubstrate.clear", st.fixed_dictionaries({"key": KEYS}), _method("clear")),
    Entry("SQLiteSubstrate.delete", st.fixed_dictionaries({"key": KEYS}), _method("delete")),
    Entry("SQLiteSubstrate.describe", st.fixed_dictionaries({"key": KEYS}), _method("describe")),
    Entry("SQLiteSubstrate.close", st.fixed_dictionaries({}), _close),
    Entry("SQLiteSubstrate()", st.fixed_dictionaries({"path": PATHS}), _open),
    Entry(
        "SQLiteStatePlugin()(app)",
        st.fixed_dictionaries(
            {
                "fresh_root": st.one_of(st.just("."), st.just("proj"), HOSTILE),
                "db_path": st.one_of(st.none(), PATHS),
                "install": st.sampled_from(["accepts", "refuses", "attribute"]),
            }
        ),
        _plugin,
        allowed=(_install_error(),),
    ),
]


# Entry points that open a store on the target (and may create tables there).
OPENERS = {"SQLiteSubstrate()", "SQLiteSubstrate.close", "SQLiteStatePlugin()(app)"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_functualize_refuses_only_as_documented_and_refusals_change_nothing(
    fuzz_target: Target, substrate: SQLiteSubstrate, entry: Entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths land here
    dump = dumping(fuzz_target.dump, entry.name in OPENERS)
    fuzz_calls(
        fuzz_target.dialect,
        entry.name,
        entry.draw,
        dump,
        lambda kwargs: entry.call(substrate, fuzz_target, kwargs),
        lambda label, exc, before: check_refusal(label, exc, before, dump, entry.allowed),
    )


def test_every_public_entry_point_is_fuzzed() -> None:
    names = {e.name for e in ENTRIES}
    assert {f"SQLiteSubstrate.{n}" for n in public_methods(SQLiteSubstrate)} <= names
    assert public_methods(SQLiteStatePlugin) == [] and "SQLiteStatePlugin()(app)" in names
