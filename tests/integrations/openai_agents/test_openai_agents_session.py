"""DurastateSession's own contract: protocol, refusals, isolation, lifecycle, cancellation."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from agents.memory import Session, SessionABC, SessionSettings

import durastate
from durastate.integrations.openai_agents import DurastateSession


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_it_is_an_sdk_session(store: durastate.Store) -> None:
    session = DurastateSession("s", store=store)
    assert isinstance(session, Session) and isinstance(session, SessionABC)
    assert session.session_id == "s"
    assert session.session_settings == SessionSettings()


def test_settings_limit_is_the_default_and_an_explicit_limit_wins(store: durastate.Store) -> None:
    session = DurastateSession("s", store=store, session_settings={"limit": 2})
    run(session.add_items([user("a"), user("b"), user("c")]))
    assert run(session.get_items()) == [user("b"), user("c")]
    assert run(session.get_items(1)) == [user("c")]
    assert run(session.get_items(10)) == [user("a"), user("b"), user("c")]


def test_sessions_on_one_store_are_isolated(store: durastate.Store) -> None:
    ann, bob = DurastateSession("ann", store=store), DurastateSession("bob", store=store)
    run(ann.add_items([user("a1"), user("a2")]))
    run(bob.add_items([user("b1")]))
    run(ann.clear_session())
    assert run(ann.get_items()) == [] and run(ann.pop_item()) is None
    assert run(bob.get_items()) == [user("b1")]
    run(ann.add_items([user("a3")]))  # a cleared session takes new items
    assert run(ann.get_items()) == [user("a3")]


def test_a_refused_batch_writes_nothing(store: durastate.Store) -> None:
    session = DurastateSession("s", store=store)
    run(session.add_items([user("kept")]))
    for bad in ([user("ok"), {"content": object()}], [{"score": float("nan")}], [{1: "int key"}], user("not a list")):
        with pytest.raises(durastate.InvalidRequest):
            run(session.add_items(bad))  # type: ignore[arg-type]
    assert run(session.get_items()) == [user("kept")]


def test_a_value_too_large_for_the_store_is_refused_whole(open_store: Any) -> None:
    session = DurastateSession("s", store=open_store(max_value_size=100))
    with pytest.raises(durastate.InvalidRequest, match="items\\[1\\]"):
        run(session.add_items([user("small"), user("x" * 200)]))
    assert run(session.get_items()) == []


@pytest.mark.parametrize("limit", ["3", 2.0, True])
def test_a_limit_that_is_not_an_int_is_refused(store: durastate.Store, limit: Any) -> None:
    with pytest.raises(durastate.InvalidRequest, match="limit"):
        run(DurastateSession("s", store=store).get_items(limit))


def test_construction_refusals(store: durastate.Store) -> None:
    with pytest.raises(durastate.InvalidRequest, match="session_id must be a str"):
        DurastateSession(42, store=store)  # type: ignore[arg-type]
    with pytest.raises(durastate.InvalidRequest, match="not both"):
        DurastateSession("s", url="memory:", store=store)
    with pytest.raises(durastate.InvalidRequest, match=r"durastate\.Store"):
        DurastateSession("s", store="memory:")  # type: ignore[arg-type]
    for settings in ({"limit": "many"}, 5):
        with pytest.raises(durastate.InvalidRequest, match="session_settings"):
            DurastateSession("s", store=store, session_settings=settings)  # type: ignore[arg-type]
    with pytest.raises(durastate.InvalidRequest, match="at most"):
        DurastateSession("x" * (store.kv.max_key_size + 1), store=store)


def test_close_refuses_calls_and_leaves_a_borrowed_store_open(store: durastate.Store) -> None:
    with DurastateSession("s", store=store) as session:
        run(session.add_items([user("a")]))
    for call in (session.get_items(), session.add_items([]), session.pop_item(), session.clear_session()):
        with pytest.raises(durastate.StoreClosed):
            run(call)
    assert not store.closed
    assert run(DurastateSession("s", store=store).get_items()) == [user("a")]


def test_a_session_opened_by_url_closes_its_store(tmp_path: Any) -> None:
    session = DurastateSession("s", url=f"sqlite://{tmp_path / 'a.db'}")
    session.close()
    assert session.store.closed


def test_a_cancelled_add_still_writes_the_whole_batch_then_raises(store: durastate.Store) -> None:
    session = DurastateSession("s", store=store)
    batch = [user(str(i)) for i in range(50)]

    async def main() -> None:
        task = asyncio.ensure_future(session.add_items(batch))
        await asyncio.sleep(0)  # let it start: from then on the write is carried to its end
        # Inline on the loop's thread (SQLite) the write has finished within that first step; on a worker it is
        # in flight. (A write waiting behind another's lock, cancelled: tests/integrations/test_async_path.py.)
        in_flight = not task.done()
        assert in_flight == (not session._aio.runner.inline)
        task.cancel()
        if in_flight:
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            await task
        assert await session.get_items() == batch

    run(main())


def test_importing_without_the_sdk_names_the_extra() -> None:
    code = "import sys; sys.modules['agents'] = None; import durastate.integrations.openai_agents"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "pip install 'durastate[openai-agents]'" in result.stderr
