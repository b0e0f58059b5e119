"""Queue names as the facet binds them, and the channel each queue's changes are announced on."""

from __future__ import annotations

from typing import Any

from .._validate import MAX_NAME_SIZE, as_name, fail_size

# Names a ``Queues`` facet keeps checked, with their bytes, bound form and
# channel (``Queues._named``): every call of push, claim and pop names its
# queue, and most programs use a handful of names (the cache is cleared when
# full). The one cache of checked names: inspection and housekeeping, rarer,
# check theirs with ``queue_name`` at each call.
NAMES_KEPT = 10_000


def queue_name(name: Any) -> bytes:
    """A queue name as bytes: ``str`` (UTF-8) or bytes, 1..``MAX_NAME_SIZE`` bytes."""
    if type(name) is bytes and 0 < len(name) <= MAX_NAME_SIZE:
        return name
    queue = as_name("name", name)
    if len(queue) > MAX_NAME_SIZE:
        fail_size("queue name", len(queue), MAX_NAME_SIZE)
    return queue


def channel(queue: bytes) -> str:
    """The change channel of ``queue`` (its bytes): pushes, nacks and redrives notify it, waiters watch it."""
    return "queue:" + queue.hex()
