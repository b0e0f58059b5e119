"""Queue names as the facet binds them, and the channel each queue's changes are announced on."""

from __future__ import annotations

from typing import Any

from .._validate import MAX_NAME_SIZE, as_name, fail_size

# ``str`` queue names already checked, with their bytes: every call names its
# queue, and most programs use a handful of names (cleared when full).
NAMES_KEPT = 10_000
_checked_names: dict[str, bytes] = {}


def queue_name(name: Any) -> bytes:
    """A queue name as bytes: ``str`` (UTF-8) or bytes, 1..``MAX_NAME_SIZE`` bytes."""
    if type(name) is str:
        known = _checked_names.get(name)
        if known is not None:
            return known
    elif type(name) is bytes and 0 < len(name) <= MAX_NAME_SIZE:
        return name
    queue = as_name("name", name)
    if len(queue) > MAX_NAME_SIZE:
        fail_size("queue name", len(queue), MAX_NAME_SIZE)
    if type(name) is str:
        if len(_checked_names) >= NAMES_KEPT:
            _checked_names.clear()
        _checked_names[name] = queue
    return queue


def channel(queue: bytes) -> str:
    """The change channel of ``queue`` (its bytes): pushes, nacks and redrives notify it, waiters watch it."""
    return "queue:" + queue.hex()
