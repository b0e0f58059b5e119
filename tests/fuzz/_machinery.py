"""What every fuzz module shares: hostile values, strategies from type hints, raw dumps, the verdict.

* ``HOSTILE`` (wrong types, huge and empty sizes, unicode with lone
  surrogates and NUL, NaN and infinities, int64 edges and beyond, deep
  nesting), ``JSON``, ``for_hint(hint)`` and ``arguments(method)``: a
  method's arguments drawn from its own type hints mixed with hostile values.
* ``Dump``: a raw dump of every table, read with the driver (outside
  durastate) over one connection kept open in autocommit mode, so each dump
  sees what is committed and costs a few round trips (a fresh PostgreSQL
  connection per dump cost ~0.4 s).
* ``fuzz_target``: a module-scoped fixture over ``sqlite-file`` and
  ``postgres`` giving the store URL and its dump.
* ``refusal_problem``: the verdict on one refused call (documented error
  type, raised on purpose, nothing changed).

``DURASTATE_FUZZ_EXAMPLES`` sets the examples per entry point (CI: 25 on
SQLite, 8 on PostgreSQL; ``make fuzz`` runs a longer budget).
"""

from __future__ import annotations

import collections
import decimal
import enum
import fractions
import inspect
import linecache
import math
import os
import sqlite3
import types
import typing
from collections import abc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durastate
from durastate.testing import plugin, postgres_server

EXAMPLES = int(os.environ.get("DURASTATE_FUZZ_EXAMPLES", "25"))
POSTGRES_EXAMPLES = int(os.environ.get("DURASTATE_FUZZ_EXAMPLES", "8"))
INT64 = 2**63

# Parameters that make a call wait: only values that must be refused (or no wait).
WAITING = {"wait", "timeout", "poll_interval"}


def deep(depth: int) -> Any:
    """``{"d": {"d": ... 1}}``, ``depth`` levels."""
    value: Any = 1
    for _ in range(depth):
        value = {"d": value}
    return value


class Deep:
    """Stands for ``deep(depth)`` in drawn arguments until ``materialize`` swaps it in.

    Hypothesis pretty-prints a failing example; a 2000-level dict would
    exhaust the recursion limit there and hide the failure.
    """

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.value = deep(depth)

    def __repr__(self) -> str:
        return f"deep({self.depth})"


def materialize(value: Any) -> Any:
    """``value`` with every ``Deep`` in it (in lists, tuples, dict values) replaced by its nesting."""
    if isinstance(value, Deep):
        return value.value
    if type(value) is list:
        return [materialize(v) for v in value]
    if type(value) is tuple:
        return tuple(materialize(v) for v in value)
    if type(value) is dict:
        return {k: materialize(v) for k, v in value.items()}
    return value


class _Text(str):
    """A ``str`` subclass."""


class _Bytes(bytes):
    """A ``bytes`` subclass."""


class _Number(enum.IntEnum):
    ONE = 1


HOSTILE_TEXT = st.sampled_from(["", "\x00", "\ud800", "a\udfffb", "é" * 3000, "x" * 70_000, " ", "\n"])
HOSTILE_NUMBERS = st.sampled_from(
    [0, -1, 1, INT64 - 1, INT64, -INT64, -INT64 - 1, 2**64, math.nan, math.inf, -math.inf, 1e300, -0.0, 0.5, True]
)
HOSTILE = st.one_of(
    HOSTILE_TEXT,
    HOSTILE_NUMBERS,
    st.sampled_from(
        [
            None,
            b"",
            b"\x00" * 3,
            b"x" * 70_000,
            [],
            {},
            (),
            object(),
            {"a": math.nan},
            [[[[[]]]]],
            Deep(2000),
            [Deep(2000)],
        ]
    ),
    # Look-alikes of the right types: subclasses, other numeric towers, views.
    st.sampled_from(
        [
            _Text("sub"),
            _Bytes(b"sub"),
            _Number.ONE,
            decimal.Decimal("1"),
            decimal.Decimal("NaN"),
            fractions.Fraction(1, 3),
            1j,
            types.MappingProxyType({"a": 1}),
            frozenset({b"a"}),
            range(3),
        ]
    ),
    st.builds(lambda: iter([b"a", b"b"])),  # an iterator: one pass only
)


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
) | st.sampled_from([Deep(200), Deep(2000)])


# JSON every JSON facet stores (finite floats, 64-bit integers, shallow): what a correct caller sends.
PLAIN_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=10),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


def mostly(valid: st.SearchStrategy[Any], edges: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` three times in four, ``edges`` otherwise."""
    return st.one_of(valid, valid, valid, edges)


def for_hint(hint: Any) -> st.SearchStrategy[Any]:
    """Plausible values of ``hint``, built recursively (JSON for ``Any``, hostile values for the unknown)."""
    if hint is Any or hint is inspect.Parameter.empty or hint is object:
        return JSON
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(for_hint(a) for a in args))
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (list, set, frozenset, abc.Iterable, abc.Sequence, abc.Collection):
        return st.lists(for_hint(args[0]) if args else JSON, max_size=5)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        key, value = args if args else (str, Any)
        return st.dictionaries(for_hint(key), for_hint(value), max_size=5)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(for_hint(args[0]), max_size=4).map(tuple)
        return st.tuples(*(for_hint(a) for a in args))
    if origin is abc.Callable or hint is abc.Callable:
        return st.just(lambda *a, **k: "x")
    if isinstance(hint, type) and hint in (bytes, str, int, float, bool, type(None)):
        return st.from_type(hint)
    return HOSTILE


def arguments(
    method: Callable[..., Any],
    overrides: dict[str, st.SearchStrategy[Any]] | None = None,
    by_hint: Callable[[Any], st.SearchStrategy[Any]] = for_hint,
    names: dict[str, Any] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments for ``method``: each from its type hint (``by_hint``) or hostile.

    ``overrides`` replaces a parameter's values by name (still mixed with
    hostile ones); a parameter with a default is sometimes left out.
    ``names``: what the hints name that the method's module imports only
    for type checking.
    """
    hints = typing.get_type_hints(method, localns=names)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, param in inspect.signature(method).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in WAITING:
            values: st.SearchStrategy[Any] = st.sampled_from([-1.0, math.nan, math.inf, -math.inf, "1", True])
        elif name == "stop":
            values = st.sampled_from([object(), "stop", 1])
        elif overrides and name in overrides:
            values = st.one_of(overrides[name], HOSTILE)
        else:
            values = st.one_of(by_hint(hints.get(name, Any)), HOSTILE)
        if param.default is param.empty:
            fields[name] = values
        else:
            optional[name] = values
    return st.fixed_dictionaries(fields, optional=optional)


@st.composite
def one_wrong(
    draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]], hostile: st.SearchStrategy[Any] = HOSTILE
) -> dict[str, Any]:
    """Every field from its (near-valid) strategy, then at most one of them replaced by a hostile value.

    One wrong thing at a time reaches each check with the others passing;
    drawing every argument hostile would stop at the first check.
    """
    drawn = {name: draw(strategy) for name, strategy in fields.items()}
    wrong = draw(st.sampled_from([None, *fields]))
    if wrong is not None:
        drawn[wrong] = draw(hostile)
    return drawn


@st.composite
def mutated(draw: st.DrawFn, replacements: st.SearchStrategy[Any], template: st.SearchStrategy[Any]) -> Any:
    """A value of ``template`` with up to two changes: a field replaced (by a ``replacements`` value),
    dropped, or a stray one added; as often intact as changed.
    """
    value = _own(draw(template))
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):  # as often intact as changed
        places = list(_places(value))
        if not places:
            break
        container, key = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if action == "drop" and isinstance(container, dict):
            del container[key]
        elif action == "add" and isinstance(container, dict):
            container[draw(st.sampled_from(["extra", "id", "type", "kind", "value", ""]))] = _own(draw(replacements))
        else:
            container[key] = _own(draw(replacements))
    return value


def _own(value: Any) -> Any:
    """A copy of a drawn value's lists and dicts (``Deep`` tokens kept): sampled values are shared by examples."""
    if type(value) is list:
        return [_own(v) for v in value]
    if type(value) is dict:
        return {k: _own(v) for k, v in value.items()}
    return value


def _places(value: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) inside ``value`` (dict keys, list indexes), depth first."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield value, key
            yield from _places(inner)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield value, index
            yield from _places(inner)


def public_methods(cls: type, skipped: abc.Set[str] = frozenset()) -> list[str]:
    """The public callable members of ``cls`` (not properties), minus ``skipped``."""
    return [
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member) and not isinstance(member, type) and name not in skipped
    ]


def fuzz_settings(dialect: str) -> settings:
    return settings(
        max_examples=EXAMPLES if dialect == "sqlite" else POSTGRES_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


# -- raw dumps, read with the drivers ---------------------------------------------


Snapshot = dict[str, list[str]]


class Dump:
    """Every table of one store, read raw over one autocommit driver connection.

    Called, it returns ``{table: rows}``: on SQLite the sorted reprs of the
    rows; on PostgreSQL the row count and an md5 of the sorted rows' text,
    computed by the server for every table in one statement (one round trip
    per dump instead of one per table: the PostgreSQL half makes a dump
    before every call). The engine's own bookkeeping (the PostgreSQL attempt
    table) is not user data and is left out.

    On PostgreSQL the list of tables is read once and again only for
    ``dump(fresh=True)``: reading it costs ~50 ms on a server whose catalog
    is bloated by many short-lived test schemas, and only opening a store
    creates tables (the fuzz asks for a fresh list around the calls that
    open one).
    """

    def __init__(self, url: str, sqlite_path: Path | None) -> None:
        self._sqlite = sqlite_path is not None
        if sqlite_path is not None:
            self._conn: Any = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True, isolation_level=None)
            self._tables = "SELECT name FROM sqlite_master WHERE type = 'table'"
        else:
            import psycopg

            self._conn = psycopg.connect(url, autocommit=True)
            # pg_catalog, not information_schema: its views take ~60 ms on a server with many schemas.
            self._tables = (
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
            )

    _listed: list[str] | None = None

    def __call__(self, *, fresh: bool = False) -> Snapshot:
        if self._sqlite or fresh or self._listed is None:
            self._listed = [r[0] for r in self._conn.execute(self._tables).fetchall()]
        tables = self._listed
        if self._sqlite:
            return {t: sorted(repr(r) for r in self._conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables}
        digests = " UNION ALL ".join(
            f"SELECT '{t}', count(*), md5(coalesce(string_agg(r::text, E'\\n' ORDER BY r::text), '')) FROM \"{t}\" r"
            for t in tables
            if not t.endswith("attempt")
        )
        return {t: [f"{n} rows, md5 {digest}"] for t, n, digest in self._conn.execute(digests).fetchall()}

    def close(self) -> None:
        self._conn.close()


def dumping(dump: Dump, opens: bool) -> Callable[[], Snapshot]:
    """``dump``, listing the tables afresh each time if the entry point opens a store (and may create some)."""
    return (lambda: dump(fresh=True)) if opens else dump


@dataclass
class Target:
    """A fresh store location on one engine: its URL, its dialect and its raw dump."""

    url: str
    dialect: str
    dump: Dump
    root: Path  # a private folder (for adapters that open paths)
    sqlite_path: Path | None

    def insert(self, table: str, row: dict[str, Any]) -> None:
        """Write ``row`` into ``table`` with the driver, past durastate's checks (to plant bad data)."""
        columns = ", ".join(row)
        if self.sqlite_path is not None:
            conn = sqlite3.connect(self.sqlite_path)
            try:
                with conn:
                    conn.execute(
                        f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' for _ in row)})", list(row.values())
                    )
            finally:
                conn.close()
        else:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as pg:
                pg.execute(
                    f"INSERT INTO {table} ({columns}) VALUES ({', '.join('%s' for _ in row)})", list(row.values())
                )


@pytest.fixture(scope="module", params=["sqlite-file", "postgres"])
def fuzz_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A fresh store URL on each engine (created by opening it once) and its raw dump."""
    root = tmp_path_factory.mktemp("fuzz")
    if request.param == "sqlite-file":
        path = root / "state.db"
        url = f"sqlite://{path}"
        drop: Callable[[], None] = lambda: None  # noqa: E731
    else:
        base = plugin._postgres_base_url()
        url, schema = postgres_server.create_schema(base)
        path = None
        drop = lambda: postgres_server.drop_schema(base, schema)  # noqa: E731
    durastate.open(url).close()  # the tables exist before the first dump
    dump = Dump(url, path)
    try:
        yield Target(url, "sqlite" if path is not None else "postgresql", dump, root, path)
    finally:
        dump.close()
        drop()


# -- the verdict -------------------------------------------------------------------


def _innermost(exc: BaseException) -> types.TracebackType | None:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


_DURASTATE_SRC = str(Path(durastate.__file__).parent)


def raised_on_purpose(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a ``raise`` statement in durastate's own code.

    An error the interpreter or a library raised on its own (``'int' object
    is not subscriptable``, an ``UnicodeEncodeError`` from a codec, a driver
    error) has its innermost frame on some other line.
    """
    tb = _innermost(exc)
    if tb is None:
        return True
    filename = tb.tb_frame.f_code.co_filename
    return filename.startswith(_DURASTATE_SRC) and linecache.getline(filename, tb.tb_lineno).lstrip().startswith(
        "raise"
    )


def _raw_kinds() -> tuple[type[BaseException], ...]:
    """Exception types that are never a deliberate refusal, whatever their base classes."""
    kinds: list[type[BaseException]] = [
        sqlite3.Error,
        UnicodeError,
        RecursionError,
        MemoryError,
        LookupError,
        AttributeError,
        AssertionError,
        NotImplementedError,
    ]
    try:
        import psycopg

        kinds.append(psycopg.Error)
    except ImportError:  # pragma: no cover
        pass
    return tuple(kinds)


RAW_KINDS = _raw_kinds()


def refusal_problem(
    exc: BaseException,
    allowed: tuple[type[BaseException], ...],
    *,
    except_raw: tuple[type[BaseException], ...] = (),
    as_raised: tuple[type[BaseException], ...] = (),
) -> str | None:
    """What is wrong with refusing a call by raising ``exc`` (``None``: a proper refusal).

    ``allowed``: the documented error types of the entry point.
    ``except_raw``: documented types that also look raw (``SqliteUnavailable``
    is an ``sqlite3.OperationalError``). ``as_raised``: types the seed's own
    code raises where the adapter runs the same code on an unchecked value
    (an interpreter error included): not required to come from a ``raise``.
    """
    name = type(exc).__qualname__
    if not isinstance(exc, allowed):
        return f"raised {type(exc).__module__}.{name}, not one of its documented errors"
    if isinstance(exc, RAW_KINDS) and not isinstance(exc, except_raw):
        return f"raised a raw {type(exc).__module__}.{name}"
    if not isinstance(exc, as_raised) and not raised_on_purpose(exc):
        tb = _innermost(exc)
        where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb else "?"
        return f"let a raw {name} escape (raised at {where}, not by a raise in durastate)"
    return None


# Outcomes per (engine, entry point): {"accepted": n, "refused: TypeError": m, ...}.
# ``DURASTATE_FUZZ_STATS=1`` prints them after the run (tests/fuzz/conftest.py).
TALLY: dict[tuple[str, str], collections.Counter[str]] = collections.defaultdict(collections.Counter)
_counting = ["?", "?"]


def counting(dialect: str, entry: str) -> None:
    """Count the next examples' outcomes under ``entry`` on ``dialect``."""
    _counting[:] = [dialect, entry]


def outcome(exc: BaseException | None, label: str | None = None) -> None:
    """Count one example's outcome: accepted, or refused with which error (or ``label``)."""
    if label is None:
        label = "accepted" if exc is None else f"refused: {type(exc).__name__}"
    TALLY[(_counting[0], _counting[1])][label] += 1


def changed_tables(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))


def check_refusal(
    label: str,
    exc: BaseException,
    before: Snapshot,
    dump: Callable[[], Snapshot],
    allowed: tuple[type[BaseException], ...],
    *,
    may_change: bool = False,
    **options: Any,
) -> None:
    """Fail (with the call in the message) unless ``exc`` is a documented refusal that changed nothing.

    ``may_change``: the seed's code changes the store before it raises this
    (only the error is checked).
    """
    outcome(exc)
    problem = refusal_problem(exc, allowed, **options)
    if problem is not None:
        raise AssertionError(f"{label:.400} {problem}: {exc!s:.300}") from exc
    if may_change:
        return
    changed = changed_tables(before, dump())
    assert not changed, f"{label:.400} was refused ({type(exc).__name__}: {exc!s:.200}) but changed {changed}"


def fuzz_calls(
    dialect: str,
    name: str,
    draw: st.SearchStrategy[dict[str, Any]],
    dump: Callable[[], Snapshot],
    call: Callable[[dict[str, Any]], object],
    refused: Callable[[str, Exception, Snapshot], None],
) -> None:
    """``call(kwargs)`` for every ``kwargs`` hypothesis draws (materialized), outcomes counted under ``name``.

    A call that raises goes to ``refused(label, exc, before)``, ``before``
    being the dump taken just before the call: it fails the test unless the
    error is a documented refusal that changed nothing (``check_refusal``).
    """
    counting(dialect, name)

    @fuzz_settings(dialect)
    @given(kwargs=draw)
    def example(kwargs: dict[str, Any]) -> None:
        before = dump()
        try:
            call(materialize(kwargs))
            outcome(None)
        except Exception as exc:
            refused(shown(name, kwargs), exc, before)

    example()


def shown(name: str, kwargs: dict[str, Any]) -> str:
    """``name(**kwargs)`` with every value's repr cut short (a 70 kB value would drown the message)."""
    parts = ", ".join(f"{k}={v!r:.60}" for k, v in kwargs.items())
    return f"{name}({parts})"
