"""Fuzz every public entry point of every facet: only documented errors, refusals change nothing.

For each public method of ``kv``, ``queues``, ``documents``, ``events``,
``records`` and ``presence``, hypothesis draws arguments from the method's
own type hints mixed with hostile values (wrong types, huge and empty
sizes, unicode with lone surrogates and NUL, NaN and infinities, int64
edges and beyond, deeply nested JSON; see ``_machinery``). Every call must
either return or raise a ``durastate.DurastateError`` from a ``raise`` in
durastate's code; when it raises, a raw dump of every table (read with the
driver, outside durastate) must equal the dump taken before the call. The
engine's own bookkeeping (the PostgreSQL attempt table) is not user data
and is left out.

``DURASTATE_FUZZ_EXAMPLES`` sets the examples per method (CI: 25 on SQLite, 8 on PostgreSQL; ``make
fuzz`` runs a longer budget).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

import durastate

from ._machinery import (
    Target,
    arguments,
    check_refusal,
    fuzz_calls,
    fuzz_target,
)

__all__ = ["fuzz_target"]  # the fixture, imported to be found

FACETS = ("kv", "queues", "documents", "events", "records", "presence")
# Methods that block or hand out a context manager / live stream: fuzzed
# through their arguments' validation only where that cannot hang.
SKIPPED = {
    ("events", "stream"),  # runs until stopped
    ("documents", "lock"),  # a context manager (its keys are checked by the transaction tests)
    ("kv", "scope"),  # a view; its methods are kv's
    ("documents", "statements"),  # compiled statement texts
}


def _public_methods(store: durastate.Store) -> list[tuple[str, str]]:
    import inspect

    found = []
    for facet in FACETS:
        for name, member in inspect.getmembers(type(getattr(store, facet))):
            if not name.startswith("_") and callable(member) and (facet, name) not in SKIPPED:
                found.append((facet, name))
    return found


with durastate.open("memory:") as _probe:
    METHODS = _public_methods(_probe)


@pytest.fixture(scope="module")
def facet_store(fuzz_target: Target) -> Iterator[durastate.Store]:
    """A store with some data in every facet."""
    store = durastate.open(fuzz_target.url, max_value_size=1 << 20)
    _fill(store)
    try:
        yield store
    finally:
        store.close()


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
    fuzz_target: Target, facet_store: durastate.Store, facet: str, method: str
) -> None:
    bound = getattr(getattr(facet_store, facet), method)
    strategy = arguments(getattr(type(getattr(facet_store, facet)), method))

    fuzz_calls(
        fuzz_target.dialect,
        f"{facet}.{method}",
        strategy,
        fuzz_target.dump,
        lambda kwargs: _consume(bound(**kwargs)),
        lambda label, exc, before: check_refusal(label, exc, before, fuzz_target.dump, (durastate.DurastateError,)),
    )
