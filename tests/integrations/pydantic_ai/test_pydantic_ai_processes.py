"""Two processes saving one conversation: one wins, the other gets ConversationConflict, nothing is lost.

Both writers load the same revision, wait for each other at a barrier, then
save at once: the revision compare-and-swap (one conditional write of the
record document, in the transaction that writes the entries) lets exactly
one through. The loser stored nothing; it loads again and saves its turn
on top, so the conversation ends with both turns, each once, in commit order.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from durastate.integrations.pydantic_ai import DurastateConversationStore

from .._processes import SPAWN, in_processes

pytestmark = pytest.mark.multiprocess


def _turn(name: str) -> list[Any]:
    return [ModelRequest(parts=[UserPromptPart(f"{name}?")]), ModelResponse(parts=[TextPart(f"{name}!")])]


def _writer(url: str, name: str, barrier: Any) -> tuple[str, int]:
    """Load, meet the other writer, save; on a conflict load again and save. (first outcome, attempts)."""

    async def go() -> tuple[str, int]:
        async with DurastateConversationStore(url=url) as store:
            conversation = await store.load("shared")
            assert conversation is not None
            barrier.wait(timeout=60)
            conversation.messages.extend(_turn(name))
            try:
                await store.save(conversation)
                return "won", 1
            except ConversationConflict:
                again = await store.load("shared")
                assert again is not None
                again.messages.extend(_turn(name))
                await store.save(again)
                return "conflict", 2

    return asyncio.run(go())


def test_two_writers_one_wins_the_other_conflicts_nothing_is_lost(shared_url: str) -> None:
    async def seed() -> None:
        async with DurastateConversationStore(url=shared_url) as store:
            conversation = Conversation(conversation_id="shared")
            conversation.messages.extend(_turn("seed"))
            await store.save(conversation)

    asyncio.run(seed())
    barrier = SPAWN.Barrier(2)
    outcomes = in_processes((_writer, (shared_url, "one", barrier)), (_writer, (shared_url, "two", barrier)))
    assert sorted(outcome for outcome, _ in outcomes) == ["conflict", "won"]

    async def read() -> list[str]:
        async with DurastateConversationStore(url=shared_url) as store:
            loaded = await store.load("shared")
            assert loaded is not None
            return [message.parts[0].content for message in loaded.messages]

    texts = asyncio.run(read())
    winner = "one" if outcomes[0][0] == "won" else "two"
    loser = "two" if winner == "one" else "one"
    assert texts == ["seed?", "seed!", f"{winner}?", f"{winner}!", f"{loser}?", f"{loser}!"]
