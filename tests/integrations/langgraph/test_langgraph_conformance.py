"""LangGraph's own checkpointer conformance suite against DurastateSaver, per capability, on both engines.

Every base capability (put, put_writes, get_tuple, list, delete_thread) and
every optional one (delete_for_runs, copy_thread, prune) must be detected
and pass all of its tests; a single failing test fails the capability.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from durastate.integrations.langgraph import DurastateSaver

# The suite's test counts per capability in langgraph-checkpoint-conformance 0.0.2
# (58 base + 23 optional): a capability that silently ran fewer tests fails too.
EXPECTED_TESTS = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


@pytest.mark.parametrize("capability", sorted(c.value for c in ALL_CAPABILITIES))
def test_langgraph_conformance(capability: str, shared_url: str) -> None:
    @checkpointer_test(name=f"DurastateSaver[{capability}]")
    async def durastate_saver() -> AsyncGenerator[DurastateSaver, None]:
        async with DurastateSaver.from_url(shared_url) as saver:
            yield saver

    report = asyncio.run(validate(durastate_saver, capabilities={capability}))
    result = report.results[capability]
    assert result.detected, f"{capability} not detected as implemented"
    assert result.tests_failed == 0, "\n".join(result.failures)
    assert result.tests_passed == EXPECTED_TESTS[capability]
