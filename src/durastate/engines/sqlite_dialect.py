"""SQLite's SQL: the dialect (tokens), the catalog query, the reading of query plans.

``SQLITE_DIALECT`` fills the statement templates' tokens (``engines.base``);
``CATALOG`` lists a prefix's schema objects (``Engine.catalog``);
``plan_of`` turns ``EXPLAIN QUERY PLAN`` rows into a ``Plan``;
``bindable`` readies a statement's parameters for the driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .base import READ, Dialect, Params, Plan, PlanStep, Spec

__all__ = ["CATALOG", "SQLITE_DIALECT", "bind_blob", "bindable", "plan_of"]

SQLITE_DIALECT = Dialect(
    name="sqlite",
    placeholder="?",
    no_limit=-1,
    tokens={
        "blob": "BLOB",
        "int64": "INTEGER",
        "text": "TEXT",
        # BINARY, SQLite's default collation, compares UTF-8 bytes: code points.
        "key_text": "TEXT",
        # A rowid alias: ids may be reused after the highest row is deleted.
        "id_pk": "INTEGER PRIMARY KEY",
        # Ordinals readers tail: never reused, even after deletes, and (one
        # writer at a time) assigned in commit order.
        "tail_pk": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "without_rowid": " WITHOUT ROWID",
        # SQLite has one writer at a time: a claim never meets a locked row,
        # and a write transaction (BEGIN IMMEDIATE) holds every row already.
        "skip_locked": "",
        "for_update": "",
        "for_update_of": Spec(""),
        "greatest": "max",
        # SQLite silently turns an overflowing integer sum into a REAL; the
        # CHECK turns that into a refused statement instead.
        "int64_check": Spec(" CHECK (typeof({arg}) = 'integer')"),
        # NULL into an AUTOINCREMENT primary key takes the next rowid.
        "next_value": Spec("NULL"),
    },
    # NOCASE: SQLite's table names are case-insensitive; a store made with an upper-case prefix (allowed before
    # prefixes had to be lower case) has its tables under that case, and is opened with the lower-case prefix.
    table_exists="SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE",
    # Tables, indexes, views and triggers share one namespace.
    name_taken="SELECT 1 FROM sqlite_master WHERE name = ? COLLATE NOCASE",
)

# Every table, index and trigger of the prefix, as SQLite stores its DDL.
CATALOG = READ("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master WHERE name LIKE ? ESCAPE '\\'")

# A table read in EXPLAIN QUERY PLAN output: "SEARCH t USING INDEX i (a=?)",
# "SCAN t", "SCAN t USING COVERING INDEX i", "SEARCH t USING PRIMARY KEY (...)"; the right side of
# a LEFT JOIN ends in " LEFT-JOIN".
_PLAN_STEP = re.compile(
    r"^(?P<verb>SEARCH|SCAN) (?P<table>\S+)"
    r"(?: USING (?:(?:COVERING |AUTOMATIC (?:PARTIAL )?COVERING )?INDEX (?P<index>\S+)"
    r"|(?P<pk>(?:INTEGER )?PRIMARY KEY)))?"
    r"(?: \((?P<condition>.*)\))?(?: LEFT-JOIN)?$"
)


def plan_of(details: list[str]) -> Plan:
    """The ``Plan`` of a statement from the detail column of its ``EXPLAIN QUERY PLAN`` rows."""
    steps = []
    for detail in details:
        match = _PLAN_STEP.match(detail)
        if match is None:
            continue
        searched = match["verb"] == "SEARCH"
        index = match["index"] or ("PRIMARY KEY" if match["pk"] else None)
        if index is None and searched:
            index = "rowid"
        condition = (match["condition"] or "") if searched else ""
        steps.append(PlanStep(match["table"], index, condition, "", detail))
    sorts = any(detail.startswith("USE TEMP B-TREE") for detail in details)
    return Plan(tuple(steps), sorts, "\n".join(details))


def bindable(params: Params) -> Params:
    """``params`` with every ``bytes`` as a ``bytearray``: the same BLOB bound, without the adaptation probe.

    Python 3.11's sqlite3 binds int, float, str and bytearray as they are,
    but runs every other type, ``bytes`` included, through its adapter
    registry first: a tuple built, a dict lookup and an ``__adapt__`` lookup
    on its PrepareProtocol type that formats and drops an AttributeError,
    ~3,300 instructions a parameter. A kv statement binds 3-10 ``bytes``
    (scope, ns, keys, values); copying each into a ``bytearray`` costs a
    tenth of that (callgrind, bench/RESULTS.md "lgpy"). Bound the same way
    (``sqlite3_bind_blob`` of the buffer: a zero-length one is an empty
    BLOB, not NULL), read back as ``bytes``. The copy is ``_EMPTY_BLOB + p``
    (a new bytearray every time): the concatenation skips ``bytearray(p)``'s
    type call and argument parsing, ~440 instructions a parameter less
    (callgrind, bench/RESULTS.md "lgput").
    """
    return [_EMPTY_BLOB + p if type(p) is bytes else p for p in params]


# Never changed (``bindable`` and ``bind_blob`` only concatenate onto it, which builds a new bytearray).
_EMPTY_BLOB = bytearray()

# ``SqliteEngine.blob_binding``: a ``bytes`` as the ``bytearray`` ``bindable`` would make of it (a new one each
# call: nobody else holds it), a C method: no Python frame where a facet turns a blob at each call (a payload).
bind_blob: Callable[[bytes], object] = _EMPTY_BLOB.__add__
