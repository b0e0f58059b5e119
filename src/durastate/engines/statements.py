"""Statements: how SQL is declared, compiled and told apart by kind.

Statements
----------
SQL is written once per operation as a *template*: ``?`` placeholders and
``{p}`` for the validated table prefix, plus a handful of DDL tokens such as
``{blob}`` (see ``Dialect.tokens``). Each template is declared with its
*kind* where it is defined, next to the code that runs it::

    GET = READ("SELECT value FROM {p}kv WHERE scope = ? AND key = ?")
    PUT = WRITE("INSERT INTO {p}kv (scope, key, value) VALUES (?, ?, ?)")
    POP = WRITE_ROWS("DELETE FROM {p}q WHERE id = ? RETURNING payload")
    MAKE = DDL("CREATE TABLE {p}t (v {int64})")

``READ`` never changes anything; ``WRITE`` changes rows and returns none;
``WRITE_ROWS`` changes rows and returns rows (``RETURNING``); ``DDL``
changes the schema (or anything else an engine cannot run as one
retry-safe statement). ``engine.sql(statement)`` compiles it for the
engine (once per dialect, engine class and prefix: engines share them,
and a store's facets compile theirs at the facet's first use)
and returns an ``SQL``: the driver's text (a ``str``, so drivers use and
cache it as is) that carries its ``kind``. The engine decides what to do by
the kind and never looks at the text: PostgreSQL runs a read as it is and a
write outside a transaction together with its attempt row (see
``engines.postgres``). ``engine.sql`` takes nothing else: a plain ``str``
is refused (``WrongType``), so every statement is declared where it is
written.
``KeyLookup(...)`` asks the engine to write a lookup of many keys (one
index probe per key) in its own best form.

Dialect
-------
Facets never name a dialect. Templates use the tokens in ``TOKENS``
(``{blob}``, ``{key_text}``, ``{next_value:NAME}``, ...); cross-key locks are
``engine.lock(name)``; gap-free sequences are declared by
``Migration(sequences=...)`` and read with ``{next_value:NAME}`` or
``engine.next_value(NAME)``; ``Migration(announce=...)`` makes the engine
announce inserts into a table (LISTEN/NOTIFY where the server can).
"""

from __future__ import annotations

import enum
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError, WrongType

Row = tuple[Any, ...]
Params = Sequence[Any]

PREFIX_RE = re.compile(r"[a-z_][a-z0-9_]{0,30}")


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe table-name prefix, else raise ``ConfigurationError``.

    The prefix is the only caller-supplied text ever interpolated into SQL,
    so it is held to ``^[a-z_][a-z0-9_]{0,30}$``. Lower case only: table
    names are case-insensitive on both engines (PostgreSQL folds unquoted
    names, SQLite compares them ignoring case), so ``App_`` would name the
    same tables as ``app_`` (on SQLite its migration failed on them).
    """
    if isinstance(prefix, str) and PREFIX_RE.fullmatch(prefix) is not None:
        return prefix
    if isinstance(prefix, str) and prefix.isascii() and PREFIX_RE.fullmatch(prefix.lower()) is not None:
        raise ConfigurationError(
            f"table prefix {prefix!r} has upper-case letters: prefixes are lower case because table names "
            f"are case-insensitive ({prefix!r} would name the same tables as {prefix.lower()!r}); "
            f"pass {prefix.lower()!r}"
        )
    raise ConfigurationError(
        f"table prefix must match {PREFIX_RE.pattern} (lower-case letters, digits, underscore; "
        f"at most 31 characters, not starting with a digit), got {prefix!r}"
    )


class Kind(enum.Enum):
    """What a statement does (see the module docstring)."""

    READ = "read"
    WRITE = "write"
    WRITE_ROWS = "write returning rows"
    DDL = "ddl"


Template = str | Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Reread:
    """How to find again the rows a ``WRITE_ROWS`` statement returned, once it committed.

    ``template`` is a read answering exactly the rows the write returned
    (same columns, same order) as long as nobody else changed them;
    ``params`` picks the write's parameters it binds, by position. A claim
    names its rows by the random lease token it sets: a retry after a lost
    connection re-reads them instead of the engine keeping a copy (see
    ``engines.postgres_attempts``). No rows found means the write did not
    happen (or its effect is already undone), and it runs again.
    """

    template: str
    params: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Marked:
    """The same insert carrying the attempt id of the write in the row it inserts.

    For a ``WRITE_ROWS`` insert whose row lives long enough to answer a
    retry (a log entry): ``template`` is the insert with one more
    parameter last, the attempt id, written into a column holding a unique
    index where it is not NULL, and ``ON CONFLICT`` on that index ``DO
    NOTHING``; ``reread`` reads the rows the insert returned by the attempt
    id (its one parameter). An engine that retries writes after a lost
    connection (PostgreSQL) runs ``template`` instead of writing a separate
    attempt row: the retry re-reads by the id (found: the write committed,
    its rows are the answer), and a retry racing a first attempt still
    running on the lost backend waits on the unique index and inserts
    nothing (see ``engines.postgres_attempts``). Other engines run the plain
    statement (the column stays NULL). A row deleted between the lost reply
    and the retry cannot be found again: the retry inserts it again, so
    declare it only of rows nobody deletes within seconds of writing them.
    """

    template: str
    reread: str


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement template and its kind, declared where the SQL is written."""

    kind: Kind
    template: Template
    reread: Reread | None = None
    # A WRITE whose second run, after the first committed, leaves the same
    # rows and returns the same answer (an upsert of given values): a retry
    # after a lost connection may simply run it again (see ``WRITE``).
    idempotent: bool = False
    # A WRITE_ROWS insert that can carry its attempt id in its row (see ``Marked``).
    marked: Marked | None = None
    # Its callers hand every BLOB parameter as ``Engine.blob_binding()`` made
    # it (see ``WRITE``): an engine may bind the parameters as they come.
    engine_blobs: bool = False


def READ(template: Template) -> Statement:
    return Statement(Kind.READ, template)


def WRITE(template: Template, *, idempotent: bool = False, engine_blobs: bool = False) -> Statement:
    """A write; ``idempotent=True`` declares that running it twice is running it once.

    ``engine_blobs=True`` promises that every call hands each BLOB parameter
    as the engine's ``blob_binding()`` turned it (a facet's repeated blobs,
    made once): the engine may then bind the parameters as they come,
    without looking for blobs to convert. A promise about speed only: a
    plain ``bytes`` handed anyway is bound all the same, just slower.

    That is: run again after it committed, it changes nothing more and its
    row count is the same (an upsert of given values, whatever the row held
    before). An engine that retries writes after a lost connection
    (PostgreSQL) then keeps no attempt row for it and runs it again. The
    one difference a caller could see: a write of the same rows committed
    by someone else between the first run and the retry is overwritten,
    as if this write had come last, which it may have (its call had not
    returned). Never declare it of a write whose result depends on what
    it changed (a counter, an append, a delete that reports what it found).
    """
    if not isinstance(idempotent, bool):
        raise WrongType(f"idempotent must be a bool, got {type(idempotent).__name__}")
    if not isinstance(engine_blobs, bool):
        raise WrongType(f"engine_blobs must be a bool, got {type(engine_blobs).__name__}")
    return Statement(Kind.WRITE, template, idempotent=idempotent, engine_blobs=engine_blobs)


def WRITE_ROWS(
    template: Template, *, reread: Reread | None = None, marked: Marked | None = None, engine_blobs: bool = False
) -> Statement:
    """A write returning rows; ``reread`` or ``marked`` say how a retry finds them again (else a copy is kept);
    ``engine_blobs`` as ``WRITE``'s."""
    if reread is not None and marked is not None:
        raise WrongType("a statement declares either reread= or marked=, not both")
    if not isinstance(engine_blobs, bool):
        raise WrongType(f"engine_blobs must be a bool, got {type(engine_blobs).__name__}")
    return Statement(Kind.WRITE_ROWS, template, reread, marked=marked, engine_blobs=engine_blobs)


def DDL(template: Template) -> Statement:
    return Statement(Kind.DDL, template)


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """Rows of ``{p}<table>`` by a list of keys: one index probe per key.

    ``fixed`` columns equal one bound value each, ``key`` one of ``count``
    bound keys (parameters in that order: fixed values, then the keys).
    Selects ``columns`` (a ``, ``-separated list), or deletes the rows when
    ``delete``. ``column_type`` is the token of every compared column's type
    (say ``"blob"``; a type token without a collation: ``"text"`` for
    ``{key_text}`` columns, which then compare in the column's collation).
    ``condition``: a further condition every row must meet, template text
    with ``?`` placeholders bound after the keys (say ``"at <= ?"``); ``""``
    for none. The engine writes the statement: a plain ``IN`` list
    where its planner probes the index per key anyway, a shape that forces
    the probes where a cached generic plan would otherwise filter the
    whole ``fixed`` range instead. An engine's own ``Dialect.key_lookup``
    must honour ``condition`` (a delete that dropped it would delete rows
    it must keep).
    """

    table: str
    columns: str
    fixed: tuple[str, ...]
    key: str
    count: int
    column_type: str = "blob"
    delete: bool = False
    condition: str = ""


class SQL(str):
    """Compiled statement text for one engine, carrying its ``kind``.

    A ``str`` so drivers take (and cache) it as is; engines may attach
    their own compiled companions to it (PostgreSQL: the attempt-recording
    variant of a write).
    """

    kind: Kind
    # Set by an engine's ``_compiled`` hook, for that engine only.
    companion: Any
    # The compiled ``Statement.reread`` (a READ) and its parameter positions.
    reread: tuple[SQL, tuple[int, ...]] | None = None
    # ``Statement.idempotent``: a retry may run it again.
    idempotent: bool = False
    # The compiled ``Statement.marked``: the insert carrying the attempt id, and the read by it.
    marked: tuple[SQL, SQL] | None = None
    # ``Statement.engine_blobs``: its BLOB parameters come as the engine's ``blob_binding()`` made them.
    engine_blobs: bool = False

    def __new__(cls, text: str, kind: Kind) -> SQL:
        compiled = super().__new__(cls, text)
        compiled.kind = kind
        return compiled


class ByCount(dict[int, SQL]):
    """A facet's statements by row or key count, each compiled at its first use (a store uses few of the counts).

    ``make(count)`` compiles the statement for ``count`` (``engine.sql`` of
    the facet's template for it). A ``dict``: a count seen before is one
    C-level lookup.
    """

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[int], SQL]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, count: int) -> SQL:
        compiled = self[count] = self._make(count)
        return compiled


@dataclass(frozen=True)
class Spec:
    """A token that takes an argument, written ``{name:arg}`` in a template.

    ``text`` may use ``{arg}`` (the argument) and ``{p}`` (the prefix).
    """

    text: str


class _BoundSpec:
    __slots__ = ("prefix", "text")

    def __init__(self, text: str, prefix: str) -> None:
        self.text = text
        self.prefix = prefix

    def __format__(self, arg: str) -> str:
        return self.text.format(arg=arg, p=self.prefix)


# Keys whose compiled statements a dialect keeps when no engine holds them (``Dialect.compiled_cache``): the
# prefixes opened last (one key per engine class and prefix; on PostgreSQL per Citus mode and schema too). Also
# how many prefixes' format arguments ``Dialect.compile`` keeps.
COMPILED_KEPT = 16


class CompiledStatements(dict[Any, Any]):
    """One key's compiled statements (``Dialect.compiled_cache``): a ``dict`` that can be referenced weakly."""

    __slots__ = ("__weakref__",)


# Every token a template may use, and what it means. Each engine's dialect
# gives all of them a text (tests check that the sets agree).
TOKENS = {
    "blob": "a column type for bytes",
    "int64": "a column type for 64-bit integers",
    "text": "a column type for text compared however the engine likes",
    "key_text": "a column type for text that compares by code point (keys, ranges, ORDER BY)",
    "id_pk": "an integer primary key the engine assigns (ids may be reused after deletes)",
    "tail_pk": "an integer primary key filled by {next_value:NAME}: gap-free, in commit order, never reused",
    "without_rowid": "table option for small rows keyed by their primary key",
    "skip_locked": "suffix of a claim's SELECT: skip rows another transaction holds",
    "for_update": "suffix of a SELECT that locks the rows it reads until commit",
    "for_update_of": "{for_update_of:alias}: lock only the rows of table alias",
    "greatest": "the function name of the larger of two values",
    "int64_check": "{int64_check:column}: refuse a value that is not an integer (after NOT NULL)",
    "next_value": "{next_value:NAME}: the next ordinal of sequence NAME for a {tail_pk} column",
}


def in_list_lookup(lookup: KeyLookup) -> str:
    """``KeyLookup`` as ``... WHERE fixed = ? AND key IN (?, ...) [AND condition]``."""
    where = " AND ".join(f"{column} = ?" for column in lookup.fixed)
    keys = f"{lookup.key} IN (" + ", ".join("?" * lookup.count) + ")"
    where = f"{where} AND {keys}" if where else keys
    if lookup.condition:
        where = f"{where} AND ({lookup.condition})"
    if lookup.delete:
        return f"DELETE FROM {{p}}{lookup.table} WHERE {where}"
    return f"SELECT {lookup.columns} FROM {{p}}{lookup.table} WHERE {where}"


@dataclass(frozen=True)
class Dialect:
    """What differs between SQL engines, and nothing else.

    ``tokens`` fill the ``{name}`` slots of templates (see ``TOKENS``; a
    ``Spec`` token takes an argument); ``placeholder`` replaces ``?`` in
    every template; ``no_limit`` is the value bound to a ``LIMIT ?`` that
    should not limit (SQLite: -1, PostgreSQL: NULL).
    """

    name: str
    placeholder: str
    no_limit: int | None
    tokens: dict[str, str | Spec] = field(default_factory=dict)
    # SQL that answers one row when table ``?`` exists (bound: full name).
    table_exists: str = ""
    # SQL that answers one row when a table or an index named ``?`` exists (what a migration's CREATE TABLE or
    # CREATE INDEX of that name would collide with); empty: ``table_exists`` is asked.
    name_taken: str = ""
    # The most bytes an indexed key (all its columns) may hold, or None.
    max_index_key: int | None = None
    # The most bytes one stored value may hold, or None: where a larger one fails in a way that is no refusal
    # (PostgreSQL closes the connection), ``open`` refuses a ``max_value_size`` above it.
    max_value: int | None = None
    # The template of a ``KeyLookup``.
    key_lookup: Callable[[KeyLookup], str] = field(default=lambda lookup: in_list_lookup(lookup))

    # Per prefix, the keyword arguments ``compile`` formats with (built at a prefix's first compile; forgotten
    # all at once past ``COMPILED_KEPT`` prefixes: rebuilding one costs a dict of the tokens).
    _bound: dict[str, dict[str, object]] = field(default_factory=dict, init=False, repr=False, compare=False)
    # Compiled statements by the key of the engines sharing them (``compiled_cache``): held weakly, alive while an
    # engine holds its cache, and the last ``COMPILED_KEPT`` keys asked for held by ``_recent`` too.
    _shared: weakref.WeakValueDictionary[Hashable, CompiledStatements] = field(
        default_factory=weakref.WeakValueDictionary, init=False, repr=False, compare=False
    )
    _recent: OrderedDict[Hashable, CompiledStatements] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )
    _caches_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def compile(self, template: str, prefix: str) -> str:
        tokens = self._bound.get(prefix)
        if tokens is None:
            bound = {k: _BoundSpec(v.text, prefix) if isinstance(v, Spec) else v for k, v in self.tokens.items()}
            if len(self._bound) >= COMPILED_KEPT:
                self._bound.clear()
            tokens = self._bound[prefix] = {"p": prefix, **bound}
        text = template.format_map(tokens)
        if self.placeholder != "?":
            # Only PostgreSQL's psycopg needs this: '%' is its escape, '?' ours.
            text = text.replace("%", "%%").replace("?", self.placeholder)
        return text

    def compiled_cache(self, key: Hashable) -> CompiledStatements:
        """The cache of compiled statements shared by the engines of this dialect whose cache key is ``key``.

        One entry per distinct statement. The caller (an engine) holds it as
        long as it lives; the dialect holds it besides while ``key`` is among
        the last ``COMPILED_KEPT`` keys asked for, so a process that opens
        and closes stores of a few prefixes compiles each statement once. A
        key past those whose every engine is gone is forgotten: a process
        going through ever new prefixes (one per tenant, say) kept every
        prefix's statements, some 330 KB each, for its whole life.
        """
        with self._caches_lock:
            cache = self._shared.get(key)
            if cache is None:
                cache = self._shared[key] = CompiledStatements()
            recent = self._recent
            recent[key] = cache
            recent.move_to_end(key)
            while len(recent) > COMPILED_KEPT:
                recent.popitem(last=False)
        return cache
