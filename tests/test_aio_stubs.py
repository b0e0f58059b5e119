"""The generated types of ``durastate.aio``: up to date, and what ``mypy --strict`` sees."""

from __future__ import annotations

from pathlib import Path

from mypy import api as mypy_api

from durastate.aio import _stubgen

USAGE = """
from typing import assert_type
from durastate import aio
from durastate.aio import AsyncClaim, AsyncScopedKV, AsyncStore
from durastate.events import AppendResult, StoredEvent
from durastate.documents import Document

async def use(store: AsyncStore) -> None:
    assert_type(await store.kv.get(b"s", b"n", b"k"), bytes | None)
    async for key, value in store.kv.scan(b"s", b"n"):
        assert_type(key, bytes)
    assert_type(store.kv.scope(b"s"), AsyncScopedKV)
    assert_type(await store.queues.claim("q", lease=5, wait=1), AsyncClaim | None)
    assert_type(await store.events.append("s", [{"type": "t", "payload": 1}]), AppendResult)
    async for event in store.events.stream("s"):
        assert_type(event, StoredEvent)
    async with store.documents.lock("a"):
        assert_type(await store.documents.read("a"), Document | None)
    async with store.transaction() as tx:
        assert_type(tx, AsyncStore)
    assert_type(await store.transact(lambda s: s.kv.incr(b"s", b"n", b"k")), int)
    await store.kv.put(b"s", b"n", b"k", "not bytes")  # the one mistake

async def opened() -> AsyncStore:
    return await aio.open("memory:")
"""


def test_the_stub_is_generated_from_the_current_facets() -> None:
    assert _stubgen.STUB_PATH.read_text() == _stubgen.formatted(_stubgen.render()), (
        "src/durastate/aio/_facades.pyi is out of date: run python -m durastate.aio._stubgen --write"
    )


def test_mypy_strict_sees_the_real_signatures(tmp_path: Path) -> None:
    usage = tmp_path / "usage.py"
    usage.write_text(USAGE)
    out, err, _status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(usage)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    # Exactly the one deliberate mistake is reported: a str where the stub says bytes.
    assert len(errors) == 1, out + err
    line = 1 + USAGE.splitlines().index(next(x for x in USAGE.splitlines() if "the one mistake" in x))
    assert f"usage.py:{line}:" in errors[0] and 'Argument 4 to "put" of "AsyncKV"' in errors[0], out
