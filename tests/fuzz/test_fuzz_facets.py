"""Fuzz every public entry point of every facet: only documented errors, refusals change nothing.

For each public method of ``kv``, ``queues``, ``documents``, ``events``,
``records`` and ``presence``, hypothesis draws arguments from the method's
own type hints mixed with hostile values (wrong types, huge and empty
sizes, unicode with lone surrogates and NUL, NaN and infinities, int64
edges and beyond, deeply nested JSON). Every call must either return or
raise a ``durastate.DurastateError``; when it raises, a raw dump of every
table (read with the driver, outside durastate) must equal the dump taken
before the call. The engine's own bookkeeping (the PostgreSQL attempt
table) is not user data and is left out.

``DURASTATE_FUZZ_EXAMPLES`` sets the examples per method (CI: 25 on SQLite, 8 on PostgreSQL; ``make
fuzz`` runs a longer budget).
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import sqlite3
import types
import typing
from collections import abc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durastate
from durastate.testing import plugin, postgres_server

EXAMPLES = int(os.environ.get("DURASTATE_FUZZ_EXAMPLES", "25"))
# Each PostgreSQL example dumps every table over a new connection (~0.4 s): CI gives it fewer examples.
POSTGRES_EXAMPLES = int(os.environ.get("DURASTATE_FUZZ_EXAMPLES", "8"))
INT64 = 2**63

# Methods that block or hand out a context manager / live stream: fuzzed
# through their arguments' validation only where that cannot hang.
SKIPPED = {
    ("events", "stream"),  # runs until stopped
    ("documents", "lock"),  # a context manager (its keys are checked by the transaction tests)
    ("kv", "scope"),  # a view; its methods are kv's
    ("events", "channel"),  # a static name helper
    ("documents", "statements"),  # compiled statement texts
}
# Parameters that make a call wait: only values that must be refused (or no wait).
WAITING = {"wait", "timeout", "poll_interval"}

HOSTILE_TEXT = st.sampled_from(["", "\x00", "\ud800", "a\udfffb", "é" * 3000, "x" * 70_000, " ", "\n"])
HOSTILE_NUMBERS = st.sampled_from(
    [0, -1, 1, INT64 - 1, INT64, -INT64, -INT64 - 1, 2**64, math.nan, math.inf, -math.inf, 1e300, -0.0, 0.5, True]
)
HOSTILE = st.one_of(
    HOSTILE_TEXT,
    HOSTILE_NUMBERS,
    st.sampled_from([None, b"", b"\x00" * 3, b"x" * 70_000, [], {}, (), object(), {"a": math.nan}, [[[[[]]]]]]),
)


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"d": value}
    return value


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
) | st.sampled_from([_deep(200), _deep(2000)])


def _for_hint(hint: Any) -> st.SearchStrategy[Any]:
    """Plausible values of ``hint``, built recursively (JSON for ``Any``, hostile values for the unknown)."""
    if hint is Any or hint is inspect.Parameter.empty or hint is object:
        return JSON
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_for_hint(a) for a in args))
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (list, set, frozenset, abc.Iterable, abc.Sequence, abc.Collection):
        return st.lists(_for_hint(args[0]) if args else JSON, max_size=5)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        key, value = args if args else (str, Any)
        return st.dictionaries(_for_hint(key), _for_hint(value), max_size=5)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_for_hint(args[0]), max_size=4).map(tuple)
        return st.tuples(*(_for_hint(a) for a in args))
    if origin is abc.Callable or hint is abc.Callable:
        return st.just(lambda *a, **k: "x")
    if isinstance(hint, type) and hint in (bytes, str, int, float, bool, type(None)):
        return st.from_type(hint)
    return HOSTILE


def _arguments(method: Callable[..., Any]) -> st.SearchStrategy[dict[str, Any]]:
    hints = typing.get_type_hints(method)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, param in inspect.signature(method).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in WAITING:
            values: st.SearchStrategy[Any] = st.sampled_from([-1.0, math.nan, math.inf, -math.inf, "1", True])
        elif name == "stop":
            values = st.sampled_from([object(), "stop", 1])
        else:
            values = st.one_of(_for_hint(hints.get(name, Any)), HOSTILE)
        if param.default is param.empty:
            fields[name] = values
        else:
            optional[name] = values
    return st.fixed_dictionaries(fields, optional=optional)


def _public_methods(store: durastate.Store) -> list[tuple[str, str]]:
    found = []
    for facet in ("kv", "queues", "documents", "events", "records", "presence"):
        for name, member in inspect.getmembers(type(getattr(store, facet))):
            if not name.startswith("_") and callable(member) and (facet, name) not in SKIPPED:
                found.append((facet, name))
    return found


with durastate.open("memory:") as _probe:
    METHODS = _public_methods(_probe)


# -- raw snapshots, read with the drivers ---------------------------------------


def _sqlite_snapshot(path: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{t}"')) for t in tables}
    finally:
        conn.close()


def _postgres_snapshot(url: str) -> dict[str, list[str]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        ]
        return {
            t: sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{t}"'))
            for t in tables
            if not t.endswith("attempt")
        }


@pytest.fixture(scope="module", params=["sqlite-file", "postgres"])
def fuzz_target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[durastate.Store, Callable[[], dict[str, list[str]]]]]:
    """A store with some data in every facet, and a function that dumps it raw."""
    if request.param == "sqlite-file":
        path = tmp_path_factory.mktemp("fuzz") / "state.db"
        url = f"sqlite://{path}"
        snapshot: Callable[[], dict[str, list[str]]] = lambda: _sqlite_snapshot(path)  # noqa: E731
        drop: Callable[[], None] = lambda: None  # noqa: E731
    else:
        base = plugin._postgres_base_url()
        url, schema = postgres_server.create_schema(base)
        snapshot = lambda: _postgres_snapshot(url)  # noqa: E731
        drop = lambda: postgres_server.drop_schema(base, schema)  # noqa: E731
    store = durastate.open(url, max_value_size=1 << 20)
    _fill(store)
    try:
        yield store, snapshot
    finally:
        store.close()
        drop()


def _fill(store: durastate.Store) -> None:
    store.kv.put_many(b"s", b"n", [(b"a", b"1"), (b"b", b"2")])
    store.kv.append(b"s", b"n", b"log", b"x")
    store.kv.incr(b"s", b"n", b"c", 5)
    store.queues.push("q", [b"job"])
    store.documents.write("doc", {"v": 1})
    store.events.append("sess", [{"type": "t", "payload": 1}])
    store.records.commit([{"type": "conversation", "value": {"id": 1, "title": "c"}}])
    store.presence.set("room", "p", {"x": 1}, at_ms=1, seen=1, ttl_ms=10**9)


def _consume(result: Any) -> Any:
    """Run a lazy result (scans and logs are generators) far enough to validate."""
    if isinstance(result, Iterator):
        return list(itertools.islice(result, 3))
    return result


@pytest.mark.parametrize(("facet", "method"), METHODS, ids=[f"{f}.{m}" for f, m in METHODS])
def test_only_documented_errors_and_refusals_change_nothing(
    fuzz_target: tuple[durastate.Store, Callable[[], dict[str, list[str]]]], facet: str, method: str
) -> None:
    store, snapshot = fuzz_target
    bound = getattr(getattr(store, facet), method)
    strategy = _arguments(getattr(type(getattr(store, facet)), method))

    @settings(
        max_examples=EXAMPLES if store.engine.dialect.name == "sqlite" else POSTGRES_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(arguments=strategy)
    def call(arguments: dict[str, Any]) -> None:
        before = snapshot()
        try:
            _consume(bound(**arguments))
        except durastate.DurastateError:
            after = snapshot()
            changed = {t for t in before.keys() | after.keys() if before.get(t) != after.get(t)}
            assert not changed, f"{facet}.{method}(**{arguments!r:.300}) was refused but changed {sorted(changed)}"
        except Exception as exc:
            raise AssertionError(
                f"{facet}.{method}(**{arguments!r:.300}) raised {type(exc).__name__}, not a durastate error: {exc}"
            ) from exc

    call()
