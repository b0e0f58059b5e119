"""pi-durable's shipped storage conformance (``pi_durable.testing``) against ``durastate.compat.pi_durable``.

Every case of ``create_storage_conformance`` runs on every engine
(``store_url``: SQLite file, SQLite memory, PostgreSQL), on a fresh
storage, and again (``shared_url``) on a storage that is closed and
reopened after every commit, as pi-durable's own SQLite suite does. The
assertions are pi-durable's vocabulary (``StorageConformanceAssertions``)
implemented with plain ``assert``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest

conformance = pytest.importorskip("pi_durable.testing")

from durastate.compat.pi_durable import SqliteStorage  # noqa: E402

CONTEXT = None  # storage never looks at the context


def _partial(actual: object, expected: object) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and _partial(actual[k], v) for k, v in expected.items())
    if isinstance(expected, Sequence) and not isinstance(expected, (str, bytes)):
        return (
            isinstance(actual, Sequence)
            and not isinstance(actual, (str, bytes))
            and len(actual) == len(expected)
            and all(_partial(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return actual == expected


class Assertions:
    """pi-durable's ``StorageConformanceAssertions`` with plain asserts."""

    def ok(self, value: object, message: str | None = None) -> None:
        assert value, message

    def strict_equal(self, actual: object, expected: object) -> None:
        assert actual == expected

    def deep_equal(self, actual: object, expected: object) -> None:
        assert actual == expected

    def partial_deep_equal(self, actual: object, expected: object) -> None:
        assert _partial(actual, expected), (actual, expected)

    def greater_than(self, actual: float, expected: float) -> None:
        assert actual > expected

    async def rejects(self, operation: Awaitable[object], message_includes: str) -> None:
        with pytest.raises(Exception) as info:  # the cases name a message, not a class
            await operation
        assert message_includes in str(info.value)


class Reopening:
    """A storage that closes and reopens after every commit (pi-durable's ``ReopeningStorage``)."""

    def __init__(self, url: str, current: SqliteStorage) -> None:
        self._url = url
        self._current = current
        self._closed = False

    async def commit(self, writes: Any, context: Any) -> Any:
        if self._closed:
            return await self._current.commit(writes, context)
        try:
            return await self._current.commit(writes, context)
        finally:
            await self._current.close(context)
            self._current = await SqliteStorage.open(self._url)

    async def close(self, context: Any) -> None:
        if not self._closed:
            self._closed = True
            await self._current.close(context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._current, name)


def _cases(with_storage: Callable[[Callable[[Any], Awaitable[None]]], Awaitable[None]]) -> list[Any]:
    options = {"assertions": Assertions(), "with_storage": with_storage}
    return list(conformance.create_storage_conformance(options))


_NAMES = [case.name for case in _cases(lambda use: use(None))]


def _run(url: str, name: str, reopen: bool) -> None:
    async def with_storage(use: Callable[[Any], Awaitable[None]]) -> None:
        storage: Any = await SqliteStorage.open(url)
        if reopen:
            storage = Reopening(url, storage)
        try:
            await use(storage)
        finally:
            await storage.close(CONTEXT)

    (case,) = [c for c in _cases(with_storage) if c.name == name]
    asyncio.run(case.run())


def test_the_suite_has_cases() -> None:
    assert len(_NAMES) >= 25 and len(set(_NAMES)) == len(_NAMES)  # pi-durable-python 1.4.0 ships 25


@pytest.mark.parametrize("name", _NAMES)
def test_storage_conformance(store_url: str, name: str) -> None:
    _run(store_url, name, reopen=False)


@pytest.mark.parametrize("name", _NAMES)
def test_storage_conformance_across_reopen(shared_url: str, name: str) -> None:
    _run(shared_url, name, reopen=True)
