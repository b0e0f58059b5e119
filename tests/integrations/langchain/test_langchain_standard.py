"""LangChain's own standard suites (``langchain-tests``) on both shared engines.

``BaseStoreSyncTests`` / ``BaseStoreAsyncTests`` for ``DurastateByteStore`` and
``SyncCacheTestSuite`` / ``AsyncCacheTestSuite`` for ``DurastateCache``: the
40 tests LangChain's in-memory classes pass, each on a fresh SQLite file and
a fresh PostgreSQL schema. Nothing is overridden (the suites check that).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from langchain_tests.integration_tests import (
    AsyncCacheTestSuite,
    BaseStoreAsyncTests,
    BaseStoreSyncTests,
    SyncCacheTestSuite,
)

from durastate.integrations.langchain import DurastateByteStore, DurastateCache

# The async suites' tests need pytest-asyncio's mark. The filter silences the
# one warning it causes: the suites' sync test_no_overrides_DO_NOT_OVERRIDE
# inherits the class mark it does not need.
ASYNC_SUITE = pytest.mark.asyncio
ASYNC_SUITE_SYNC_TEST = pytest.mark.filterwarnings("ignore:.*marked with '@pytest.mark.asyncio':pytest.PytestWarning")

THREE_VALUES = (b"foo", b"bar", b"\x00buzz\xff")


class TestByteStoreSync(BaseStoreSyncTests[bytes]):
    @pytest.fixture
    def kv_store(self, shared_url: str) -> Iterator[DurastateByteStore]:
        with DurastateByteStore(shared_url) as store:
            yield store

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return THREE_VALUES


@ASYNC_SUITE
@ASYNC_SUITE_SYNC_TEST
class TestByteStoreAsync(BaseStoreAsyncTests[bytes]):
    @pytest_asyncio.fixture
    async def kv_store(self, shared_url: str) -> AsyncIterator[DurastateByteStore]:
        with DurastateByteStore(shared_url) as store:
            yield store

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return THREE_VALUES


class TestCacheSync(SyncCacheTestSuite):
    @pytest.fixture
    def cache(self, shared_url: str) -> Iterator[DurastateCache]:
        with DurastateCache(shared_url) as cache:
            yield cache


@ASYNC_SUITE
@ASYNC_SUITE_SYNC_TEST
class TestCacheAsync(AsyncCacheTestSuite):
    @pytest_asyncio.fixture
    async def cache(self, shared_url: str) -> AsyncIterator[DurastateCache]:
        with DurastateCache(shared_url) as cache:
            yield cache
