"""Fuzz every public entry point of ``durastate.compat.a2``: documented refusals only, nothing changed.

Entry points: every async method of ``A2Store`` (``append``, ``read``,
``claim_available``, ``renew_claims``, ``complete_attempt``,
``fail_attempt``, ``read_state``, ``put_snapshot``), ``stream`` (its
arguments, and its first events up to where it would wait), ``presence.set``
and ``presence.read``, ``inspect.list_sessions``, ``inspect.read_events``
and ``inspect.list_snapshots``, ``close``, and the openers ``open_store``
(with hostile clocks and id factories) and ``sqlite``. Each test drives one
event loop of its own.

Inputs are near-valid with one thing wrong (``_machinery.one_wrong``):
sessions, indexes and attempts around the stored ones (a session with
claimed, failed, processed and pending events), events in the seed's input
shape with a field replaced, dropped or added, datetimes naive and aware;
plus ``_machinery.HOSTILE`` for any one argument.

The adapter's contract (its module docstring): ``A2Error`` with the seed's
codes (``PARTIAL_DUPLICATE_BATCH``, ``SUPERSEDED_ATTEMPT``; and
``STORE_UNAVAILABLE`` only when the store could not serve the call, which a
healthy fuzz target never is), ``TypeError`` where the seed throws one and
for arguments of the wrong type or value. Never a driver error; a refused
call changes nothing (a raw dump of every table is compared).
"""

from __future__ import annotations

import asyncio
import datetime
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from durastate.compat import a2
from durastate.compat.a2 import A2Error, A2Store
from durastate.engines.watch import ChangeWatch
from durastate.errors import StoreClosed, StoreUnavailable

from ._machinery import (
    HOSTILE,
    INT64,
    JSON,
    PLAIN_JSON,
    Snapshot,
    Target,
    check_refusal,
    dumping,
    fuzz_calls,
    fuzz_target,
    mostly,
    mutated,
    one_wrong,
    public_methods,
)

__all__ = ["fuzz_target"]

UTC = datetime.UTC
# Filled: "s1" holds events 1..6 (1 processed, 2 claimed by w1, 3 failed once, 4 dead-lettered, 5..6 pending).
SESSIONS = mostly(st.sampled_from(["s1", "s1", "s2", "fresh", "s", "s1 "]), st.text(max_size=5))
INDEXES = mostly(st.integers(0, 8), st.sampled_from([-1, INT64 - 1, INT64, -INT64 - 1, 2**53, True]))
COUNTS = mostly(st.integers(1, 4), st.sampled_from([0, -1, INT64, INT64 + 1, 2**64]))
TTLS = mostly(st.integers(1, 60_000), st.sampled_from([0, -1, INT64, INT64 + 1, 10**18, 1.5, True]))
HOLDERS = st.one_of(st.sampled_from(["w1", "w2", ""]), st.text(max_size=4))
NAMES = st.one_of(st.sampled_from(["r", "reducer", ""]), st.text(max_size=4))
REPLACEMENTS = st.one_of(HOSTILE, INDEXES, JSON, st.sampled_from(["t", "lane", True, False, {"index": 1}]))
CAUSES = st.fixed_dictionaries(
    {"index": st.integers(1, 6), "attempt": st.integers(1, 3)}, optional={"batch_size": st.integers(1, 3)}
)
EVENT = st.fixed_dictionaries(
    {"type": mostly(st.sampled_from(["t", "hello"]), st.text(max_size=4)), "payload": mostly(PLAIN_JSON, JSON)},
    optional={
        "id": st.one_of(st.sampled_from(["e1", "e2", "new-1", "new-2"]), st.text(max_size=6)),
        "cause": CAUSES,
        "lane": st.one_of(st.none(), st.sampled_from(["a", "b"])),
        "settled": st.booleans(),
    },
)
EVENTS = st.lists(mutated(REPLACEMENTS, EVENT), max_size=3)
DATETIMES = st.one_of(
    st.datetimes(timezones=st.just(UTC)),
    st.sampled_from(
        [
            datetime.datetime(2024, 1, 1, tzinfo=UTC),
            datetime.datetime(2024, 1, 1),  # naive
            datetime.datetime.max.replace(tzinfo=UTC),
            datetime.datetime.min.replace(tzinfo=datetime.timezone(datetime.timedelta(hours=-23))),
            datetime.date(2024, 1, 1),
        ]
    ),
)
VALUES = mostly(st.dictionaries(st.text(max_size=4), PLAIN_JSON, max_size=3), st.just({"x": math.nan}))

# Documented refusals; A2Error's code is checked too (``_code_problem``).
ALLOWED: tuple[type[BaseException], ...] = (TypeError, A2Error)
CODES = {"PARTIAL_DUPLICATE_BATCH", "SUPERSEDED_ATTEMPT"}


def _code_problem(exc: BaseException) -> str | None:
    if not isinstance(exc, A2Error) or exc.code in CODES:
        return None
    if exc.code == "STORE_UNAVAILABLE" and isinstance(exc.__cause__, (StoreUnavailable, StoreClosed)):
        return None  # the store really could not serve it (not expected here, but documented)
    return f"raised A2Error {exc.code} caused by {type(exc.__cause__).__name__}: {exc.__cause__}"


@dataclass(frozen=True)
class Entry:
    name: str
    draw: st.SearchStrategy[dict[str, Any]]
    call: Callable[[A2Store, Target, dict[str, Any]], Awaitable[Any]]


class _Parked(Exception):
    """Raised where the stream would wait for new events (the fuzz stops it there)."""


class _NoWait(ChangeWatch):
    """The store's change watch for fuzzed streams: a stream that would wait raises ``_Parked`` instead."""

    def wait(self, timeout: float) -> bool:
        raise _Parked

    async def wait_async(self, timeout: float) -> bool:
        raise _Parked


async def _stream(s: A2Store, t: Target, kw: dict[str, Any]) -> Any:
    it = s.stream(**kw)
    try:
        for _ in range(3):
            await it.__anext__()
    except (_Parked, StopAsyncIteration):
        pass
    finally:
        await it.aclose()


class _Clock:
    def __init__(self, now: Any) -> None:
        self._now = now

    def now(self) -> Any:
        return self._now


async def _open_store(s: A2Store, t: Target, kw: dict[str, Any]) -> Any:
    ids = kw.get("ids")
    factory = (lambda: ids) if ids is not None and not callable(ids) else ids
    clock = _Clock(kw["now"]) if "now" in kw else kw.get("clock")
    opened = a2.open_store(t.url if kw["url"] == "TARGET" else kw["url"], clock, factory)
    try:
        await opened.append("opened", [{"type": "t", "payload": 1}])
        await opened.append("opened", [{"type": "t", "payload": 2, "id": f"fixed-{kw['serial']}"}])
    finally:
        opened.close()


async def _sqlite(s: A2Store, t: Target, kw: dict[str, Any]) -> Any:
    opened = a2.sqlite(**kw)
    try:
        await opened.read("s1")
    finally:
        opened.close()


async def _close(s: A2Store, t: Target, kw: dict[str, Any]) -> Any:
    opened = a2.open_store(t.url)
    opened.close()
    opened.close()
    assert opened.closed
    try:
        await opened.read(kw["session_id"])
    except A2Error as exc:
        assert exc.code == "STORE_UNAVAILABLE" and isinstance(exc.__cause__, StoreClosed), exc
    except TypeError:
        pass  # a session id refused before the store is reached
    else:
        raise AssertionError("a closed store answered")


def _method(path: str) -> Callable[[A2Store, Target, dict[str, Any]], Awaitable[Any]]:
    def call(s: A2Store, t: Target, kw: dict[str, Any]) -> Awaitable[Any]:
        target: Any = s
        for part in path.split("."):
            target = getattr(target, part)
        result: Awaitable[Any] = target(**kw)
        return result

    return call


async def _append(s: A2Store, t: Target, kw: dict[str, Any]) -> Any:
    if "minted" in kw:  # what the store's id factory returns for events without an id
        minted = kw.pop("minted")
        s._ids = lambda: minted
    try:
        return await s.append(**kw)
    finally:
        s._ids = _fresh_ids


_serial = iter(range(10**9))


def _fresh_ids() -> str:
    return f"minted-{next(_serial)}"


ENTRIES = [
    Entry(
        "A2Store.append",
        st.one_of(
            one_wrong({"session_id": SESSIONS, "events": EVENTS}),
            st.builds(
                lambda s, e, m: {"session_id": s, "events": e, "minted": m},
                SESSIONS,
                st.lists(EVENT.map(lambda e: {k: v for k, v in e.items() if k != "id"}), min_size=1, max_size=2),
                st.one_of(st.sampled_from(["e1", "", "\ud800", "x" * 3000]), HOSTILE),
            ),
        ),
        _append,
    ),
    Entry(
        "A2Store.read",
        one_wrong(
            {
                "session_id": SESSIONS,
                "after_index": st.one_of(st.none(), INDEXES),
                "through_index": st.one_of(st.none(), INDEXES),
            }
        ),
        _method("read"),
    ),
    Entry(
        "A2Store.claim_available",
        one_wrong(
            {
                "session_id": SESSIONS,
                "holder": HOLDERS,
                "ttl_ms": TTLS,
                "expires_at_ms": st.one_of(st.none(), INDEXES, st.just(10**13)),
                "exclude_indexes": st.one_of(st.just(()), st.lists(INDEXES, max_size=3)),
            }
        ),
        _method("claim_available"),
    ),
    Entry(
        "A2Store.renew_claims",
        one_wrong(
            {
                "session_id": SESSIONS,
                "holder": HOLDERS,
                "claims": st.lists(
                    mutated(REPLACEMENTS, st.fixed_dictionaries({"index": INDEXES, "attempt": COUNTS})), max_size=3
                ),
                "ttl_ms": TTLS,
                "expires_at_ms": st.one_of(st.none(), INDEXES),
            }
        ),
        _method("renew_claims"),
    ),
    Entry(
        "A2Store.complete_attempt",
        one_wrong({"session_id": SESSIONS, "index": INDEXES, "attempt": COUNTS, "events": EVENTS}),
        _method("complete_attempt"),
    ),
    Entry(
        "A2Store.fail_attempt",
        one_wrong(
            {
                "session_id": SESSIONS,
                "index": INDEXES,
                "attempt": COUNTS,
                "error": st.one_of(st.text(max_size=8), st.just("e" * 70_000)),
                "max_failures": COUNTS,
            }
        ),
        _method("fail_attempt"),
    ),
    Entry("A2Store.read_state", one_wrong({"session_id": SESSIONS, "reducer_name": NAMES}), _method("read_state")),
    Entry(
        "A2Store.put_snapshot",
        one_wrong({"session_id": SESSIONS, "reducer_name": NAMES, "index": INDEXES, "state": mostly(PLAIN_JSON, JSON)}),
        _method("put_snapshot"),
    ),
    Entry("A2Store.stream", one_wrong({"session_id": SESSIONS, "start_after": st.one_of(st.none(), INDEXES)}), _stream),
    Entry(
        "A2Store.presence.set",
        one_wrong(
            {
                "ns": st.sampled_from(["room", "", "r2"]),
                "participant": HOLDERS,
                "values": VALUES,
                "at": DATETIMES,
                "seen": COUNTS,
                "ttl_ms": TTLS,
            }
        ),
        _method("presence.set"),
    ),
    Entry("A2Store.presence.read", one_wrong({"ns": st.sampled_from(["room", "", "r2"])}), _method("presence.read")),
    Entry(
        "A2Store.inspect.list_sessions",
        one_wrong(
            {
                "prefix": st.one_of(st.sampled_from(["", "s", "s1"]), st.text(max_size=3)),
                "limit": st.one_of(st.integers(0, 5), st.sampled_from([-1, INT64, INT64 + 1, 1.0])),
                "cursor": st.one_of(st.none(), SESSIONS),
            }
        ),
        _method("inspect.list_sessions"),
    ),
    Entry(
        "A2Store.inspect.read_events",
        one_wrong(
            {
                "session_id": SESSIONS,
                "after_index": INDEXES,
                "limit": st.one_of(st.integers(0, 5), st.sampled_from([-1, INT64, INT64 + 1])),
                "through_index": st.one_of(st.none(), INDEXES),
            }
        ),
        _method("inspect.read_events"),
    ),
    Entry("A2Store.inspect.list_snapshots", one_wrong({"session_id": SESSIONS}), _method("inspect.list_snapshots")),
    Entry("A2Store.close", one_wrong({"session_id": SESSIONS}), _close),
    Entry(
        "open_store",
        st.fixed_dictionaries(
            {
                "url": st.one_of(
                    st.just("TARGET"), st.just("TARGET"), st.sampled_from(["", "\x00", "memory:", 5, None])
                ),
                "serial": st.integers(0, 10**9),
            },
            optional={
                "now": st.one_of(DATETIMES, HOSTILE),
                "clock": st.sampled_from([object(), 5, "clock"]),
                "ids": st.one_of(st.sampled_from(["fixed", "", "\ud800", 5]), st.just(lambda: None)),
            },
        ),
        _open_store,
    ),
    Entry(
        "sqlite",
        st.fixed_dictionaries(
            {},
            optional={
                "path": st.sampled_from(
                    [":memory:", "dev.db", "sub/dir/x.db", "", "\x00", "sqlite:y.db", 5, None, Path("p.db")]
                ),
                "clock": st.sampled_from([None, object()]),
            },
        ),
        _sqlite,
    ),
]


async def _fill(s: A2Store) -> None:
    await s.append("s1", [{"type": "t", "payload": i, "id": f"e{i}"} for i in range(1, 7)])
    claimed = await s.claim_available(session_id="s1", holder="w1", ttl_ms=10**9, exclude_indexes=[5, 6])
    assert claimed.outcome == "claimed"
    await s.complete_attempt(session_id="s1", index=1, attempt=1, events=[{"type": "child", "payload": 0, "id": "c1"}])
    await s.fail_attempt(session_id="s1", index=3, attempt=1, error="boom", max_failures=5)
    await s.fail_attempt(session_id="s1", index=4, attempt=1, error="dead", max_failures=1)
    await s.put_snapshot("s1", "r", 2, {"sum": 3})
    await s.presence.set("room", "w1", {"x": 1}, at=datetime.datetime(2024, 1, 1, tzinfo=UTC), seen=1, ttl_ms=10**9)


# Entry points that open a store on the target (and may create tables there).
OPENERS = {"open_store", "sqlite", "A2Store.close"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_a2_refuses_only_as_documented_and_refusals_change_nothing(
    fuzz_target: Target, entry: Entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths land here
    dump = dumping(fuzz_target.dump, entry.name in OPENERS)
    loop = asyncio.new_event_loop()
    store = a2.open_store(fuzz_target.url, ids=_fresh_ids)
    if not dump().get("ds_event"):
        loop.run_until_complete(_fill(store))
    monkeypatch.setattr(store._store.engine, "watch", lambda channel, poll: _NoWait())

    def refused(label: str, exc: Exception, before: Snapshot) -> None:
        check_refusal(label, exc, before, dump, ALLOWED)
        problem = _code_problem(exc)
        assert problem is None, f"{label:.400} {problem}"

    try:
        fuzz_calls(
            fuzz_target.dialect,
            entry.name,
            entry.draw,
            dump,
            lambda kwargs: loop.run_until_complete(entry.call(store, fuzz_target, kwargs)),
            refused,
        )
    finally:
        store.close()
        loop.close()


def test_every_public_entry_point_is_fuzzed() -> None:
    names = {e.name for e in ENTRIES}
    assert {f"A2Store.{n}" for n in public_methods(A2Store)} <= names
    assert {f"A2Store.presence.{n}" for n in public_methods(a2._PresenceApi)} <= names
    assert {f"A2Store.inspect.{n}" for n in public_methods(a2._InspectApi)} <= names
    assert {"open_store", "sqlite"} <= names
