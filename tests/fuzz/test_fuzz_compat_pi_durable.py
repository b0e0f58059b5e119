"""Fuzz every public entry point of ``durastate.compat.pi_durable``: documented refusals only, nothing changed.

Entry points: ``SqliteStorage.open(url_or_path, options)``, every async
method of ``SqliteStorage`` (``commit``, ``mint_id``, the table and
document reads, both call shapes of ``entry``), ``close`` (then a call,
which must be refused as closed) and ``validate_sqlite_prefix``. Each test
drives one event loop of its own; the storage is opened in it.

Inputs are near-valid more often than not: commits are batches of the
seed's write shapes (the conformance suite's builders) with a field or two
replaced by a hostile value, dropped, or a stray one added; queries,
cursors and document addresses likewise; ids around the stored ones, the
JavaScript-safe edge (2**53) and int64's; plus ``_machinery.HOSTILE`` for
every argument.

The adapter's contract (its module docstring): a refused commit raises
``RuntimeError`` (``InvalidCommit``, also a ``ValueError``, for a malformed
one); a bad read request ``StorageRequestError``; bad options
``ValueError``/``StorageRequestError``; a call after ``close()``
``RuntimeError("SqliteStorage is closed")``. Never a driver error or a raw
``TypeError``/``KeyError``; a refused call changes nothing (a raw dump of
every table is compared).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from durastate.compat.pi_durable import SqliteStorage, StorageRequestError, validate_sqlite_prefix
from durastate.testing.conformance.records import (
    base,
    change,
    conv_scope,
    conversation,
    copy_doc,
    create,
    delta,
    doc_record,
    entry,
    retire,
    submission,
    task,
)

from ._machinery import (
    HOSTILE,
    INT64,
    JSON,
    Target,
    check_refusal,
    dumping,
    fuzz_calls,
    fuzz_target,
    mutated,
    one_wrong,
    public_methods,
)

__all__ = ["fuzz_target"]

SAFE = 2**53 - 1
CTX = object()  # pi-durable's Context: storage never looks at it
# Stored by the fill: conversations 1 and 10 (forked from 1 at 3), entries 2..5 and 11, task 20,
# submission 21 ("r-1"), documents 30 (conversation 1, key "k") and 31 (session).
IDS = st.one_of(
    st.sampled_from([1, 2, 3, 5, 10, 11, 20, 21, 30, 31, 0, -1, SAFE, SAFE + 1, INT64, 2**64, True, 1.0, "1"]),
    st.integers(1, 10**6),
)
POINTS = st.one_of(st.sampled_from(["current", "Current", "", 0, 1, 2, -1, SAFE + 1, None, 1.5]), IDS)
REPLACEMENTS = st.one_of(HOSTILE, IDS, JSON, st.sampled_from(["ascending", "descending", "queued", "base", "delta"]))


_ids = st.integers(100, 10**9)
WRITE = st.one_of(
    _ids.map(conversation),
    st.builds(lambda i, p: conversation(i, parent=(1, p)), _ids, st.sampled_from([2, 3, 5, 11])),
    st.builds(entry, _ids, st.sampled_from([1, 10])),
    st.builds(lambda i: entry(i, 1, head="h"), _ids),
    st.builds(task, _ids, st.sampled_from([1, 10])),
    st.builds(submission, _ids, st.just(1), request_id=st.one_of(st.none(), st.text(max_size=4))),
    st.builds(
        lambda i, k: create(doc_record(i, scope=conv_scope(1), key=k), base({"a": 1})),
        _ids,
        st.one_of(st.none(), st.text(max_size=3)),
    ),
    st.builds(lambda i: create(doc_record(i), base({"b": [1, 2]})), _ids),
    st.sampled_from(
        [
            change(30, delta([["s", ["c"], 2]])),
            change(30, base({"fresh": True}, version=2)),
            change(31, delta([["s", ["b", 0], 5]])),
            change(31, delta([["a", ["missing"], "x"]])),
            retire(31),
            change(999_999_999_999, base({})),
        ]
    ),
    st.builds(lambda i: copy_doc(doc_record(i, scope=conv_scope(10), key="k"), 30, "current"), _ids),
)
WRITES = st.one_of(st.lists(mutated(REPLACEMENTS, WRITE), max_size=3), st.lists(WRITE, max_size=3), HOSTILE)
QUERIES = {
    "scan_conversations": st.sampled_from([{}, {"ownerConversationId": 1}, {"ownerTaskId": 20, "order": "descending"}]),
    "scan_entries": st.sampled_from(
        [{"conversationId": 10}, {"conversationId": 1, "order": "ascending", "minEntryId": 2, "maxEntryId": 4}]
    ),
    "scan_tasks": st.sampled_from([{"conversationId": 1}, {"kind": "tool", "status": "running", "background": False}]),
    "scan_submissions": st.sampled_from([{"status": "queued"}, {"conversationId": 1}]),
    "scan_documents": st.sampled_from(
        [{"scope": {"kind": "session"}, "at": "current"}, {"scope": conv_scope(1), "at": 1, "kind": "notes"}]
    ),
}
CURSORS = st.one_of(
    st.none(),
    mutated(
        REPLACEMENTS,
        st.builds(lambda a, o: {"after": a, "order": o}, IDS, st.sampled_from(["ascending", "descending"])),
    ),
)
LIMITS = st.one_of(st.integers(1, 5), st.integers(-2, 5), st.sampled_from([0, SAFE, SAFE + 1, INT64, 1.5, "2", True]))
ADDRESSES = mutated(
    REPLACEMENTS,
    st.sampled_from(
        [{"kind": "notes", "scope": conv_scope(1), "key": "k"}, {"kind": "notes", "scope": {"kind": "session"}}]
    ),
)


def _read_args(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Positional arguments (as a dict, in order) of one read, near-valid or hostile."""
    if name in QUERIES:
        return one_wrong({"query": mutated(REPLACEMENTS, QUERIES[name]), "limit": LIMITS, "cursor": CURSORS})
    shapes: dict[str, dict[str, st.SearchStrategy[Any]]] = {
        "conversation": {"id": IDS},
        "task": {"id": IDS},
        "submission": {"id": IDS},
        "find_latest_head_marker": {"conversation_id": IDS, "at_or_before_entry_id": st.one_of(st.none(), IDS)},
        "submission_by_request": {
            "conversation_id": IDS,
            "request_id": st.one_of(st.sampled_from(["r-1", ""]), st.text(max_size=3)),
        },
        "find_document": {"address": ADDRESSES, "at": POINTS},
        "document": {"id": IDS, "at": POINTS},
    }
    return one_wrong(shapes[name])


@dataclass(frozen=True)
class Entry:
    name: str
    draw: st.SearchStrategy[dict[str, Any]]
    call: Callable[[SqliteStorage, Target, dict[str, Any]], Awaitable[Any]]
    allowed: tuple[type[BaseException], ...]


def _read(name: str) -> Callable[[SqliteStorage, Target, dict[str, Any]], Awaitable[Any]]:
    """The read called positionally, as pi-durable calls it (the drawn dict's order is not the signature's)."""
    method = getattr(SqliteStorage, name)
    order = [p for p in inspect.signature(method).parameters if p not in ("self", "context")]

    def call(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Awaitable[Any]:
        return getattr(s, name)(*(kw[p] for p in order), CTX)

    return call


async def _entry(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Any:
    if "conversation_id" in kw:  # entry(conversation_id, id, context)
        return await s.entry(kw["conversation_id"], kw["id"], kw.get("context", CTX))
    return await s.entry(kw["id"], kw.get("context", CTX))


async def _commit(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Any:
    return await s.commit(kw["writes"], CTX)


async def _mint(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Any:
    return await s.mint_id()


OPTIONS = mutated(
    REPLACEMENTS,
    st.fixed_dictionaries(
        {},
        optional={
            "prefix": st.sampled_from(["app_", "ds_", "", "1x", "sqlite_x", "SQLITE_y", "a" * 40, "a\n", "é", None]),
            "busy_timeout_ms": st.sampled_from([0, 1, 5000, 86_400_001, INT64, -1, 1.5, True]),
            "wal_auto_checkpoint_pages": st.sampled_from([0, 1000, -1, INT64, 2**64, "5", None]),
        },
    ),
)


async def _open(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Any:
    where = t.url if kw["url_or_path"] == "TARGET" else kw["url_or_path"]
    opened = await SqliteStorage.open(where, kw.get("options"))
    await opened.close(CTX)


async def _close(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Any:
    opened = await SqliteStorage.open(t.url)
    await opened.close(kw["context"])
    assert opened.closed
    with pytest.raises(RuntimeError, match="SqliteStorage is closed"):
        await opened.conversation(1, CTX)
    await opened.close(CTX)  # idempotent


async def _prefix(s: SqliteStorage, t: Target, kw: dict[str, Any]) -> Any:
    return validate_sqlite_prefix(kw["prefix"])


READS = [
    "conversation",
    "scan_conversations",
    "find_latest_head_marker",
    "scan_entries",
    "task",
    "scan_tasks",
    "submission",
    "scan_submissions",
    "submission_by_request",
    "find_document",
    "document",
    "scan_documents",
]
REQUEST = (StorageRequestError,)
COMMIT = (RuntimeError,)  # InvalidCommit (RuntimeError and ValueError) or a collision's RuntimeError
ENTRIES = [
    Entry("SqliteStorage.commit", st.fixed_dictionaries({"writes": WRITES}), _commit, COMMIT),
    Entry("SqliteStorage.mint_id", st.fixed_dictionaries({}), _mint, COMMIT),
    *(Entry(f"SqliteStorage.{name}", _read_args(name), _read(name), REQUEST) for name in READS),
    Entry(
        "SqliteStorage.entry",
        st.fixed_dictionaries(
            {"id": st.one_of(IDS, HOSTILE)},
            optional={"conversation_id": st.one_of(IDS, HOSTILE), "context": st.sampled_from([CTX, None, 0, "c"])},
        ),
        _entry,
        REQUEST,
    ),
    Entry(
        "SqliteStorage.open",
        st.fixed_dictionaries(
            {
                "url_or_path": st.one_of(
                    st.just("TARGET"),
                    st.just("TARGET"),
                    st.sampled_from(["rel.db", "", "\x00", 5, None, b"x.db", Path("p.db")]),
                )
            },
            optional={"options": st.one_of(OPTIONS, HOSTILE)},
        ),
        _open,
        (ValueError, StorageRequestError),
    ),
    Entry("SqliteStorage.close", st.fixed_dictionaries({"context": st.one_of(st.just(CTX), HOSTILE)}), _close, ()),
    Entry(
        "validate_sqlite_prefix",
        st.fixed_dictionaries(
            {
                "prefix": st.one_of(
                    st.text(max_size=8), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True), HOSTILE
                )
            }
        ),
        _prefix,
        (ValueError,),
    ),
]


async def _fill(s: SqliteStorage) -> None:
    await s.commit(
        [
            conversation(1),
            *[entry(i, 1, head="h" if i == 3 else None) for i in range(2, 6)],
            conversation(10, parent=(1, 3)),
            entry(11, 10),
            task(20, 1),
            submission(21, 1, request_id="r-1"),
            create(doc_record(30, scope=conv_scope(1), key="k"), base({"a": 1})),
            create(doc_record(31), base({"b": [1]})),
        ],
        CTX,
    )


@pytest.fixture(scope="module")
def filled(fuzz_target: Target) -> Target:
    async def main() -> None:
        storage = await SqliteStorage.open(fuzz_target.url)
        try:
            await _fill(storage)
        finally:
            await storage.close(CTX)

    asyncio.run(main())
    return fuzz_target


# Entry points that open a store on the target (and may create tables there).
OPENERS = {"SqliteStorage.open", "SqliteStorage.close"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_pi_durable_refuses_only_as_documented_and_refusals_change_nothing(
    filled: Target, entry: Entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths land here
    dump = dumping(filled.dump, entry.name in OPENERS)
    loop = asyncio.new_event_loop()
    storage = loop.run_until_complete(SqliteStorage.open(filled.url))

    async def close() -> None:
        await storage.close(CTX)

    try:
        fuzz_calls(
            filled.dialect,
            entry.name,
            entry.draw,
            dump,
            lambda kwargs: loop.run_until_complete(entry.call(storage, filled, kwargs)),
            lambda label, exc, before: check_refusal(label, exc, before, dump, entry.allowed),
        )
    finally:
        loop.run_until_complete(close())
        loop.close()


def test_every_public_entry_point_is_fuzzed() -> None:
    names = {e.name for e in ENTRIES}
    assert {f"SqliteStorage.{n}" for n in public_methods(SqliteStorage)} <= names
    assert "validate_sqlite_prefix" in names
