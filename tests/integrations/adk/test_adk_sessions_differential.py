"""DurastateSessionService against ADK's own session services: the same results, errors included.

ADK ships no conformance suite for session services (its package's
``cli/conformance`` replays agent runs, not storage), so its own services
are the reference: ``InMemorySessionService``, ``SqliteSessionService``
(aiosqlite) and ``DatabaseSessionService`` (SQLAlchemy on aiosqlite), all
from the pinned wheel. Hypothesis draws sequences of create / get (with
``GetSessionConfig``) / list / delete / append (through fresh or stale
session objects, state deltas with ``app:``/``user:``/``temp:`` keys) /
get_user_state; every call runs on every service and must give the same
result: the same sessions (ids, merged state, events, update times), the
same error type (``AlreadyExistsError``, ``SessionNotFoundError``,
``StaleSessionError``), the same session object afterwards.

``InMemorySessionService`` checks no staleness (it appends through a stale
object): an append the SQL services refuse as stale is not run on it.
Time and ids come from ADK's own providers, set to a deterministic clock
(one tick per create and per event, so timestamps grow with the log, as
ADK's runner makes them) and to ids the test chooses.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
from typing import Any

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from hypothesis import given
from hypothesis import strategies as st

import durastate
from durastate.errors import Conflict, NotFound
from durastate.integrations.adk import DurastateSessionService

from .._differential import differential

APPS = ["app", "o/p"]
USERS = ["u1", "u/2"]
SIDS = ["s1", "s%/2"]
STATE_KEYS = ["k", "n", "app:shared", "app:count", "user:pref", "user:name", "temp:scratch"]

# No NUL in strings: ADK's SQLite session service (a reference here) reads a string holding U+0000 back as ''
# (found by this test: {'app:count': '\x00'} came back as ''), where durastate and InMemory keep it.
texts = st.characters(codec="utf-8", exclude_characters="\x00")  # as st.text(): no lone surrogates
json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(texts, max_size=8)
json_values = st.recursive(
    json_leaf | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6).map(round),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(texts, max_size=4), inner, max_size=3),
    max_leaves=6,
)
states = st.dictionaries(st.sampled_from(STATE_KEYS), json_values, max_size=4)
configs = st.none() | st.builds(
    GetSessionConfig,
    num_recent_events=st.none() | st.integers(0, 4),
    after_timestamp=st.none() | st.integers(1, 12).map(float),
)
address = st.tuples(st.sampled_from(APPS), st.sampled_from(USERS), st.sampled_from(SIDS))

steps = st.lists(
    st.one_of(
        st.tuples(st.just("create"), address, st.booleans(), st.none() | states),
        st.tuples(st.just("get"), address, configs),
        # get_session of the session handle number h (from the newest) is on,
        # with num_recent_events and after_timestamp = the clock minus k ticks
        st.tuples(st.just("reload"), st.integers(0, 3), st.none() | st.integers(0, 4), st.none() | st.integers(0, 5)),
        st.tuples(st.just("reload"), st.just(0), st.none(), st.none()),
        st.tuples(st.just("list"), st.sampled_from(APPS), st.none() | st.sampled_from(USERS)),
        st.tuples(st.just("delete"), address),
        # append through handle number h (the handles are the session objects
        # the calls so far returned; the newest one unless h picks an older one)
        st.tuples(st.just("append"), st.integers(0, 3), states, st.booleans(), st.booleans()),
        st.tuples(st.just("append"), st.just(0), states, st.booleans(), st.just(False)),
        st.tuples(st.just("append"), st.just(0), states, st.just(True), st.just(False)),
        st.tuples(st.just("append"), st.just(1), states, st.just(True), st.just(False)),
        st.tuples(st.just("user_state"), st.sampled_from(APPS), st.sampled_from(USERS)),
    ),
    min_size=12,
    max_size=30,
)
# Every sequence starts with a create, so most calls find a session.
operations = st.tuples(st.tuples(st.just("create"), address, st.booleans(), st.none() | states), steps).map(
    lambda first_and_rest: [first_and_rest[0], *first_and_rest[1]]
)


def _error(exc: BaseException) -> str:
    for kind in (StaleSessionError, AlreadyExistsError, SessionNotFoundError):
        if isinstance(exc, kind):
            return kind.__name__
    return f"unexpected {type(exc).__name__}: {exc}"


def _event_view(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


def _session_view(session: Any) -> Any:
    if session is None:
        return None
    return {
        "id": session.id,
        "app": session.app_name,
        "user": session.user_id,
        "state": session.state,
        "events": [_event_view(e) for e in session.events],
        "updated": session.last_update_time,
    }


class Runs:
    """One sequence of calls on every service; compares each call's outcome."""

    def __init__(self, ours: DurastateSessionService, references: dict[str, Any], prefix: str) -> None:
        self.services: dict[str, Any] = {"durastate": ours, **references}
        self.prefix = prefix
        self.clock = 0.0
        self.handles: list[dict[str, Any]] = []  # each: service name -> session object
        self.ids = itertools.count()

    def tick(self) -> float:
        self.clock += 1.0
        return self.clock

    def app(self, app: str) -> str:
        return f"{self.prefix}{app}"

    async def each(self, call: Any, skip: set[str] = frozenset()) -> dict[str, tuple[str, Any]]:  # type: ignore[assignment]
        outcomes: dict[str, tuple[str, Any]] = {}
        for label, service in self.services.items():
            if label in skip:
                continue
            try:
                outcomes[label] = ("ok", await call(label, service))
            except Exception as exc:
                outcomes[label] = ("error", _error(exc))
                if label == "durastate":
                    outcomes[label] = ("error", _ours_error(exc))
        return outcomes

    def agree(self, step: int, what: Any, outcomes: dict[str, tuple[str, Any]], view: Any = lambda x: x) -> None:
        ours = outcomes["durastate"]
        ours_seen = (ours[0], view(ours[1]) if ours[0] == "ok" else ours[1])
        for label, outcome in outcomes.items():
            seen = (outcome[0], view(outcome[1]) if outcome[0] == "ok" else outcome[1])
            assert ours_seen == seen, f"step {step} {what}: durastate {ours_seen!r} != {label} {seen!r}"

    async def run(self, ops: list[Any]) -> None:
        for step, op in enumerate(ops):
            await getattr(self, f"op_{op[0]}")(step, op)

    async def op_create(self, step: int, op: Any) -> None:
        (app, user, sid), give_id, state = op[1], op[2], op[3]
        now = self.tick()
        made = f"made-{next(self.ids)}"
        platform_time.set_time_provider(lambda: now)
        platform_uuid.set_id_provider(lambda: made)
        try:
            outcomes = await self.each(
                lambda _label, service: service.create_session(
                    app_name=self.app(app), user_id=user, state=state, session_id=sid if give_id else None
                )
            )
        finally:
            platform_time.reset_time_provider()
            platform_uuid.reset_id_provider()
        self.agree(step, op, outcomes, _session_view)
        if outcomes["durastate"][0] == "ok":
            self.handles.append({label: outcome[1] for label, outcome in outcomes.items()})

    async def op_get(self, step: int, op: Any) -> None:
        (app, user, sid), config = op[1], op[2]
        outcomes = await self.each(
            lambda _label, service: service.get_session(
                app_name=self.app(app), user_id=user, session_id=sid, config=config
            )
        )
        self.agree(step, op, outcomes, _session_view)
        if outcomes["durastate"][0] == "ok" and outcomes["durastate"][1] is not None and config is None:
            self.handles.append({label: outcome[1] for label, outcome in outcomes.items()})

    async def op_reload(self, step: int, op: Any) -> None:
        if self.handles:
            session = self.handles[max(0, len(self.handles) - 1 - op[1])]["durastate"]
            after = None if op[3] is None else self.clock - op[3]
            config = (
                None
                if op[2] is None and after is None
                else GetSessionConfig(num_recent_events=op[2], after_timestamp=after)
            )
            await self.op_get(
                step, ("get", (session.app_name[len(self.prefix) :], session.user_id, session.id), config)
            )

    async def op_list(self, step: int, op: Any) -> None:
        app, user = op[1], op[2]
        outcomes = await self.each(lambda _label, service: service.list_sessions(app_name=self.app(app), user_id=user))
        self.agree(step, op, outcomes, lambda response: [_session_view(s) for s in response.sessions])

    async def op_delete(self, step: int, op: Any) -> None:
        app, user, sid = op[1]
        outcomes = await self.each(
            lambda _label, service: service.delete_session(app_name=self.app(app), user_id=user, session_id=sid)
        )
        self.agree(step, op, outcomes)

    async def op_user_state(self, step: int, op: Any) -> None:
        app, user = op[1], op[2]
        outcomes = await self.each(lambda _label, service: service.get_user_state(app_name=self.app(app), user_id=user))
        self.agree(step, op, outcomes)

    async def op_append(self, step: int, op: Any) -> None:
        back, delta, with_text, partial = op[1], op[2], op[3], op[4]
        if not self.handles:
            return
        handle = self.handles[max(0, len(self.handles) - 1 - back)]
        stamp = self.tick()
        event_id = f"e-{next(self.ids)}"

        def event() -> Event:  # a fresh object per service: ADK trims temp: keys in place
            content = types.Content(role="user", parts=[types.Part(text=f"m{event_id}")]) if with_text else None
            return Event(
                id=event_id, invocation_id="inv", author="user", timestamp=stamp, content=content,
                actions=EventActions(state_delta=dict(delta)), partial=partial or None,
            )  # fmt: skip

        sql = {"sqlite", "database"}
        outcomes = await self.each(lambda label, service: service.append_event(handle[label], event()), skip={"memory"})
        stale = all(outcomes[label] == ("error", "StaleSessionError") for label in sql)
        if not stale:  # InMemorySessionService would append through a stale object
            outcomes.update(
                await self.each(
                    lambda label, service: service.append_event(handle[label], event()), skip={"durastate"} | sql
                )
            )
        self.agree(step, op, outcomes, _event_view)
        sessions = {label: _session_view(handle[label]) for label in self.services}
        # InMemorySessionService raises SessionNotFoundError before it sets
        # temp: keys on the session object; the SQL services after.
        # An object InMemorySessionService did not see refused as stale (that
        # append was not run on it) stays out of its comparisons from then on.
        if stale or outcomes["durastate"][0] != "ok":
            handle["diverged"] = True
        compared = set(outcomes) - ({"memory"} if handle.get("diverged") else set())
        for label in compared:
            assert sessions[label] == sessions["durastate"], (
                f"step {step}: the session object differs on {label}: {sessions[label]} != {sessions['durastate']}"
            )


def _ours_error(exc: BaseException) -> str:
    # Ours are ADK's errors and durastate's at once.
    kind = _error(exc)
    if kind == "StaleSessionError" or kind == "AlreadyExistsError":
        assert isinstance(exc, Conflict)
    elif kind == "SessionNotFoundError":
        assert isinstance(exc, NotFound)
    return kind


_prefixes = (f"x{n}-" for n in itertools.count())
# The references' files: in memory-backed /dev/shm where there is one (their
# commits need not reach a disk for this test).
_FAST_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None


def _compare(store: durastate.Store, ops: list[Any]) -> None:
    folder = tempfile.mkdtemp(prefix="adk-diff-", dir=_FAST_DIR)

    async def main() -> None:
        sqlite_ref = SqliteSessionService(db_path=f"{folder}/sqlite.db")
        database_ref = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{folder}/database.db")
        ours = DurastateSessionService(store=store)
        try:
            references = {"memory": InMemorySessionService(), "sqlite": sqlite_ref, "database": database_ref}
            await Runs(ours, references, next(_prefixes)).run(ops)
        finally:
            await ours.aclose()
            await sqlite_ref.close()
            await database_ref.close()

    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@differential(25)
@given(ops=operations)
def test_random_sequences_match_adk_services(shared_store: durastate.Store, ops: list[Any]) -> None:
    _compare(shared_store, ops)


def test_a_stale_writer_is_refused_by_every_persistent_service(shared_store: durastate.Store) -> None:
    ops: list[Any] = [
        ("create", ("app", "u1", "s1"), True, {"k": 1, "app:shared": 1, "user:pref": "a", "temp:scratch": 0}),
        ("get", ("app", "u1", "s1"), None),  # a second object on the same session
        ("append", 1, {"k": 2, "temp:scratch": 3}, True, False),  # through the first object
        ("append", 0, {"k": 3}, True, False),  # the second object is stale now
        ("get", ("app", "u1", "s1"), GetSessionConfig(num_recent_events=1)),
        ("get", ("app", "u1", "s1"), None),
        ("append", 0, {"user:pref": "b", "app:shared": 2}, False, False),
        ("list", "app", None),
        ("user_state", "app", "u1"),
    ]
    _compare(shared_store, ops)
