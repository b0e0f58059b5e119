"""The async path of the Agent Framework classes: a cancelled save or history append is carried to its end.

``FileCheckpointStorage`` waits out a write it started before the caller
sees its cancellation; ``DurastateCheckpointStorage.save`` and
``DurastateHistoryProvider.save_messages`` do the same (``to_the_end``): a
call waiting on a worker thread for another connection's lock (SQLite's
write lock, PostgreSQL's lock on the checkpoint id or the session) is
cancelled, keeps running, commits, and only then raises ``CancelledError``.
"""

from __future__ import annotations

import asyncio

from agent_framework import Message, WorkflowCheckpoint

import durastate
from durastate.integrations.agent_framework import DurastateCheckpointStorage, DurastateHistoryProvider

from .._async_calls import Blocker, cancel_waits_for_the_outcome


def test_a_cancelled_save_on_a_worker_is_stored_before_the_cancellation_arrives(shared_store: durastate.Store) -> None:
    storage = DurastateCheckpointStorage(store=shared_store)
    checkpoint = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", checkpoint_id="c", state={"k": 1})
    blocker = Blocker(
        shared_store, lambda: shared_store.engine.lock(f"durastate-agent-framework-checkpoint:{b'c'.hex()}")
    )

    async def main() -> None:
        await cancel_waits_for_the_outcome(blocker, storage, lambda: storage.save(checkpoint))
        assert (await storage.load("c")).state == {"k": 1}

    asyncio.run(main())
    storage.close()


def test_a_cancelled_save_messages_on_a_worker_is_stored_before_the_cancellation_arrives(
    shared_store: durastate.Store,
) -> None:
    history = DurastateHistoryProvider(store=shared_store)
    turn = [Message(role="user", contents=["q"]), Message(role="assistant", contents=["a"])]
    blocker = Blocker(shared_store, lambda: shared_store.engine.lock(f"durastate-agent-framework-history:{b's'.hex()}"))

    async def main() -> None:
        await cancel_waits_for_the_outcome(blocker, history, lambda: history.save_messages("s", turn))
        assert [m.text for m in await history.get_messages("s")] == ["q", "a"]

    asyncio.run(main())
    history.close()
