"""DurastateSessionRepository against Strands' FileSessionManager: the same records, errors included.

Strands ships no conformance suite in its wheel; ``FileSessionManager`` (a
``RepositorySessionManager`` that is also its own ``SessionRepository``,
strands-agents 1.62.0) is the reference. Hypothesis draws sequences of every
repository call (sessions, agents, messages with limit/offset listings,
multi-agent state) over small pools of ids, so records are re-created,
updated, deleted and missing; each call must give the same outcome on both:
the same records (by ``to_dict()``), the same ``created_at`` copied into an
updated object, the same error class (``SessionException``).
"""

from __future__ import annotations

import itertools
import tempfile
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strands.session import FileSessionManager
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

import durastate
from durastate.errors import InvalidRequest
from durastate.integrations.strands import DurastateSessionManager, DurastateSessionRepository, SessionExists

from .._differential import differential

SESSIONS = ["s1", "s 2"]
AGENTS = ["a", "b-ü"]
MULTI = ["graph"]
STAMPS = ["2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"]

small_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)
states = st.dictionaries(st.sampled_from(["k", "n"]), small_json, max_size=2)
sid = st.sampled_from(range(len(SESSIONS)))
aid = st.sampled_from(range(len(AGENTS)))
mid = st.integers(-1, 4)
stamp = st.sampled_from(STAMPS)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("create_session"), sid, stamp),
        st.tuples(st.just("read_session"), sid),
        st.tuples(st.just("delete_session"), sid),
        st.tuples(st.just("create_agent"), sid, aid, states, stamp),
        st.tuples(st.just("read_agent"), sid, aid),
        st.tuples(st.just("update_agent"), sid, aid, states, stamp),
        st.tuples(st.just("create_message"), sid, aid, mid, st.text(max_size=5), stamp),
        st.tuples(st.just("create_message"), sid, aid, mid, st.text(max_size=5), stamp),
        st.tuples(st.just("read_message"), sid, aid, mid),
        st.tuples(st.just("update_message"), sid, aid, mid, st.text(max_size=5), stamp),
        st.tuples(st.just("list_messages"), sid, aid, st.none() | st.integers(0, 4), st.integers(0, 3)),
        st.tuples(st.just("create_multi"), sid, states),
        st.tuples(st.just("read_multi"), sid),
        st.tuples(st.just("update_multi"), sid, states),
    ),
    min_size=4,
    max_size=25,
)


class FakeMultiAgent:
    """What the repository reads from a ``MultiAgentBase``: ``id`` and ``serialize_state()``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.id = MULTI[0]
        self.state = state

    def serialize_state(self) -> dict[str, Any]:
        return {"type": "graph", "id": self.id, **self.state}


def _view(value: Any) -> Any:
    if isinstance(value, list):
        return [_view(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value


def _call(repo: Any, op: tuple[Any, ...], prefix: str) -> tuple[str, Any]:
    kind = op[0]
    session = prefix + SESSIONS[op[1]]
    try:
        if kind == "create_session":
            made = Session(session_id=session, session_type=SessionType.AGENT, created_at=op[2], updated_at=op[2])
            return "ok", _view(repo.create_session(made))
        if kind == "read_session":
            return "ok", _view(repo.read_session(session))
        if kind == "delete_session":
            return "ok", repo.delete_session(session)
        if kind in ("create_agent", "update_agent"):
            agent = SessionAgent(
                agent_id=AGENTS[op[2]], state=op[3], conversation_manager_state={}, created_at=op[4], updated_at=op[4]
            )
            getattr(repo, kind)(session, agent)
            return "ok", agent.to_dict()  # update_agent copies the stored created_at into it
        if kind == "read_agent":
            return "ok", _view(repo.read_agent(session, AGENTS[op[2]]))
        if kind in ("create_message", "update_message"):
            message = SessionMessage(
                message={"role": "user", "content": [{"text": op[4]}]},
                message_id=op[3],
                created_at=op[5],
                updated_at=op[5],
            )
            getattr(repo, kind)(session, AGENTS[op[2]], message)
            return "ok", message.to_dict()
        if kind == "read_message":
            return "ok", _view(repo.read_message(session, AGENTS[op[2]], op[3]))
        if kind == "list_messages":
            return "ok", _view(repo.list_messages(session, AGENTS[op[2]], limit=op[3], offset=op[4]))
        if kind in ("create_multi", "update_multi"):
            getattr(repo, kind.replace("multi", "multi_agent"))(session, FakeMultiAgent(op[2]))
            return "ok", None
        return "ok", repo.read_multi_agent(session, MULTI[0])
    except SessionException:
        return "error", "SessionException"


_prefixes = (f"x{n}-" for n in itertools.count())


@differential(40)
@given(ops=operations)
def test_random_sequences_match_the_file_session_manager(shared_store: durastate.Store, ops: list[Any]) -> None:
    prefix = next(_prefixes)
    with tempfile.TemporaryDirectory(prefix="strands-diff-") as folder:
        file = FileSessionManager(
            "bootstrap", storage_dir=folder
        )  # a repository too; its own session is not in the pool
        with DurastateSessionRepository(store=shared_store) as ours:
            for step, op in enumerate(ops):
                mine, theirs = _call(ours, op, prefix), _call(file, op, prefix)
                assert mine == theirs, f"step {step} {op}: durastate {mine!r} != file {theirs!r}"


def test_create_session_refuses_an_id_in_use(shared_store: durastate.Store) -> None:
    with DurastateSessionRepository(store=shared_store) as repo:
        repo.create_agent("early", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
        with pytest.raises(SessionExists):  # the file manager's session directory exists already too
            repo.create_session(Session(session_id="early", session_type=SessionType.AGENT))


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r.read_session("a/b"),  # Strands' identifier rule: no path separators
        lambda r: r.read_agent("s", "../x"),
        lambda r: r.read_session(7),
        lambda r: r.read_message("s", "a", "1"),
        lambda r: r.list_messages("s", "a", limit=-1),
        lambda r: r.create_message("s", "a", SessionMessage(message={"role": "user", "content": []}, message_id=2**70)),
        lambda r: r.create_agent(
            "s", SessionAgent(agent_id="a", state={"x": float("nan")}, conversation_manager_state={})
        ),
    ],
)
def test_wrong_arguments_are_refused_and_change_nothing(shared_store: durastate.Store, call: Any) -> None:
    with DurastateSessionRepository(store=shared_store) as repo:
        with pytest.raises(InvalidRequest):
            call(repo)
        assert list(shared_store.kv.scan(b"strands", b"s")) == []


def test_the_manager_creates_its_session_once(shared_store: durastate.Store) -> None:
    first = DurastateSessionManager("managed", store=shared_store)
    first.close()
    second = DurastateSessionManager("managed", store=shared_store)
    assert second.session_repository.read_session("managed") is not None
    second.close()
