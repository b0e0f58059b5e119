"""``durastate.aio.open`` works awaited, as ``async with`` directly, and as a coroutine handed to asyncio."""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings
from pathlib import Path

import pytest

from durastate import aio
from durastate.errors import ConfigurationError, InvalidRequest


def test_async_with_without_await_opens_and_closes_the_store(store_url: str) -> None:
    async def main() -> aio.AsyncStore:
        async with aio.open(store_url) as store:
            await store.kv.put(b"s", b"n", b"k", b"v")
            assert await store.kv.get(b"s", b"n", b"k") == b"v"
            assert not store.closed
        return store

    store = asyncio.run(main())
    assert store.closed


def test_awaited_form_still_returns_an_open_store(store_url: str) -> None:
    async def main() -> None:
        store = await aio.open(store_url)
        try:
            await store.kv.put(b"s", b"n", b"k", b"w")
            assert await store.kv.get(b"s", b"n", b"k") == b"w"
        finally:
            await store.close()
        assert store.closed

    asyncio.run(main())


def test_it_is_a_coroutine_for_asyncio_run_and_tasks(store_url: str) -> None:
    async def in_a_task() -> None:
        store = await asyncio.create_task(aio.open(store_url))
        await store.close()

    store = asyncio.run(aio.open(store_url))
    try:
        assert not store.closed
    finally:
        asyncio.run(store.close())
    asyncio.run(in_a_task())


def test_a_second_await_is_refused_instead_of_opening_another_store(store_url: str) -> None:
    async def main() -> None:
        opening = aio.open(store_url)
        async with opening as store:
            with pytest.raises(InvalidRequest, match="already awaited or entered"):
                await opening
            assert not store.closed

    asyncio.run(main())


def test_bad_options_raise_when_awaited_and_bad_workers_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="workers"):
        aio.open(f"sqlite://{tmp_path / 'a.db'}", workers=0)

    async def main() -> None:
        async with aio.open(f"sqlite://{tmp_path / 'b.db'}", attempt_retention=0.5):
            raise AssertionError("opened with a bad option")

    with pytest.raises(ConfigurationError, match="attempt_retention"):
        asyncio.run(main())


def test_never_awaited_opens_nothing_and_warns_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "never.db"
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opening = aio.open(f"sqlite://{path}")
        del opening
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert unraisable == []
    assert not path.exists()
