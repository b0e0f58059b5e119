"""Conformance for ``durastate.compat.vgi``: the fixtures and helpers its test modules share."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durastate.compat.vgi import (
    FunctionStorage,
    ShardedStorage,
)

__all__ = []

INT64_MAX = 2**63 - 1


INT64_MIN = -(2**63)


# Bounds for waits on events/joins: a hang fails the test instead of the run.
WAIT = 30.0


# The seed's FrameworkNS members, copied from the seed (persisted names).
SEED_FRAMEWORK_NS = {
    "BUFFERING_INIT": b"_vgi/buffering_init",
    "STREAMING_FINALIZE": b"_vgi/streaming_finalize",
    "TIO_STATE": b"_vgi/tio_state",
    "AGGREGATE_STATE": b"_vgi/aggregate_state",
    "AGGREGATE_WINDOW_PARTITION": b"_vgi/aggregate_window_partition",
    "STREAMING_SESSION": b"_vgi/streaming_session",
}


class _Fixtures:
    """Fixtures shared by the test classes (inherited, so importing the classes brings them)."""

    @pytest.fixture
    def storage(self, store_url: str) -> Iterator[FunctionStorage]:
        with FunctionStorage(store_url) as opened:
            yield opened

    @pytest.fixture
    def sharded(self, store_url: str) -> Iterator[ShardedStorage]:
        with ShardedStorage(store_url) as opened:
            yield opened


def _any(value: Any) -> Any:
    """``value`` typed as Any: for calls that pass bytes-likes or wrong types on purpose."""
    return value


def _drain_queue(storage: FunctionStorage, execution_id: bytes) -> list[bytes]:
    """Pop until empty; the items in pop order."""
    items = []
    while (item := storage.queue_pop(execution_id)) is not None:
        items.append(item)
    return items


def _run_threads(targets: list[Callable[[], None]]) -> None:
    """Run each target in its own thread; re-raise the first failure here."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(t)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), "a worker thread did not finish"
    if errors:
        raise errors[0]
