"""SQLite's change watches (``engines.watch.LocalWatch``): fired by ``notify`` in this process, never lost.

Each wait here is given an hour, with its poll an hour too: a wait that was
not woken would hold the test until the join's deadline fails it.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate.engines.watch import ChangeWatch

HOUR = 3600.0
DEADLINE = 60.0


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[durastate.Store]:
    url = f"sqlite://{tmp_path}/state.db" if request.param == "file" else "memory:"
    with durastate.open(url) as opened:
        yield opened


def _in_thread(wait: Callable[[], bool]) -> tuple[threading.Thread, list[bool]]:
    answers: list[bool] = []
    thread = threading.Thread(target=lambda: answers.append(wait()), daemon=True)
    thread.start()
    return thread, answers


def test_a_notify_committed_before_the_wait_is_kept_for_it(store: durastate.Store) -> None:
    engine = store.engine
    with engine.watch("c", HOUR) as watch:
        with store.transaction():
            engine.notify("c")
        thread, answers = _in_thread(lambda: watch.wait(HOUR))
        thread.join(DEADLINE)
        assert answers == [True]


def test_a_rolled_back_notify_wakes_nobody_and_others_channels_neither(store: durastate.Store) -> None:
    engine = store.engine
    with engine.watch("c", HOUR) as watch:
        with pytest.raises(RuntimeError), store.transaction():
            engine.notify("c")
            raise RuntimeError("roll back")
        engine.notify("other")
        assert watch.wait(0.0) is True  # a quiet wait of a polling watch says "look again"...
        assert not watch._fired.is_set()  # type: ignore[attr-defined]  # ...but nothing fired it


def test_a_coroutine_is_woken_on_its_loop_by_a_notify_from_another_thread(store: durastate.Store) -> None:
    engine = store.engine

    async def main() -> bool:
        with engine.watch("c", HOUR) as watch:
            waiting = asyncio.ensure_future(watch.wait_async(HOUR))
            await asyncio.sleep(0)  # the coroutine is waiting now
            notifier = threading.Thread(target=engine.notify, args=("c",))
            notifier.start()
            answer = await asyncio.wait_for(waiting, DEADLINE)
            notifier.join()
            return answer

    assert asyncio.run(main()) is True


def test_closing_the_store_wakes_its_watches_and_later_ones_are_woken_at_once(tmp_path: Path) -> None:
    store = durastate.open(f"sqlite://{tmp_path}/state.db")
    engine = store.engine
    watch: ChangeWatch = engine.watch("c", HOUR)
    thread, answers = _in_thread(lambda: watch.wait(HOUR))
    store.close()
    thread.join(DEADLINE)
    assert answers == [True]
    assert engine.watch("c", HOUR).wait(HOUR) is True  # its caller's check raises StoreClosed


def test_a_closed_watch_is_forgotten(store: durastate.Store) -> None:
    engine = store.engine
    watches = [engine.watch("c", HOUR) for _ in range(3)]
    for watch in watches:
        watch.close()
        watch.close()  # idempotent
    assert engine._channels._watches == {}  # type: ignore[attr-defined]


def test_wait_for_change_is_woken_by_a_notify_from_another_thread(store: durastate.Store) -> None:
    engine = store.engine
    waiter = threading.Thread(target=engine.wait_for_change, args=("c", HOUR), daemon=True)
    waiter.start()
    deadline = time.monotonic() + DEADLINE
    while waiter.is_alive() and time.monotonic() < deadline:
        # A notify before the waiter registered wakes nothing (wait_for_change registers after its caller's
        # check): notified until it returns, each time it may have registered since.
        engine.notify("c")
        waiter.join(0.01)
    assert not waiter.is_alive()


def test_waiting_on_ever_new_channels_keeps_nothing_per_channel(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session's or a queue's channel each: a long-lived process waits on ever new ones.
    made_here: weakref.WeakSet[threading.Condition] = weakref.WeakSet()
    test_thread = threading.current_thread()

    class Counted(threading.Condition):
        def __init__(self, lock: Any = None) -> None:
            super().__init__(lock)
            if threading.current_thread() is test_thread:
                made_here.add(self)

    monkeypatch.setattr(threading, "Condition", Counted)
    for i in range(100):
        store.engine.wait_for_change(f"session:{i}", 0.0)
    gc.collect()
    assert len(made_here) == 0  # a condition kept per channel was 100 here
