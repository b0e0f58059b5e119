"""Argument checks shared by the facets.

Each check either returns the normalised value or raises ``InvalidRequest``
naming the argument and what was wrong with it. Facets call them before
touching the engine, so a rejected call changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from .errors import InvalidRequest

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def fail(message: str) -> NoReturn:
    raise InvalidRequest(message)


def as_bytes(name: str, value: Any) -> bytes:
    """``bytes`` (or a bytes-like ``bytearray``/``memoryview``) as ``bytes``."""
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    fail(f"{name} must be bytes, got {type(value).__name__}")


def as_name(name: str, value: Any) -> bytes:
    """A queue or channel name: ``str`` (UTF-8 encoded) or bytes, not empty."""
    if isinstance(value, str):
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"{name} must be valid unicode (no lone surrogates), got {value!r}")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        encoded = bytes(value)
    else:
        fail(f"{name} must be str or bytes, got {type(value).__name__}")
    if not encoded:
        fail(f"{name} must not be empty")
    return encoded


def as_int64(name: str, value: Any) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail(f"{name} must be an int, got {type(value).__name__}")
        value = int(value)
    result: int = value
    if not INT64_MIN <= value <= INT64_MAX:
        fail(f"{name} must fit in a signed 64-bit integer, got {value}")
    return result


def as_limit(name: str, value: Any) -> int | None:
    """``None`` (no limit) or an int >= 0.

    A limit beyond int64 limits nothing a database can hold and cannot be
    bound to a statement: it is the same as ``None``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        fail(f"{name} must be an int >= 0 or None, got {type(value).__name__}")
    if value < 0:
        fail(f"{name} must be >= 0 or None, got {value}")
    if value > INT64_MAX:
        return None
    return int(value)


def as_seconds(name: str, value: Any, *, allow_zero: bool) -> float:
    """A finite, non-negative duration in seconds (positive unless ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(f"{name} must be a number of seconds, got {type(value).__name__}")
    seconds = float(value)
    if math.isnan(seconds) or math.isinf(seconds):
        fail(f"{name} must be finite, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        fail(f"{name} must be {'>= 0' if allow_zero else '> 0'} seconds, got {value!r}")
    return seconds


def as_list(name: str, value: Any) -> list[Any]:
    """Any iterable of items, as a new list.

    Refused: ``str``/``bytes`` (they iterate by character, almost always a
    missing pair of brackets) and mappings (they iterate by key only).
    """
    if isinstance(value, list):
        return list(value)
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(value, Iterable):
        fail(f"{name} must be a list (or another iterable of items), got {type(value).__name__}")
    return list(value)


# -- engine options (checked the same way by every engine and by open()) -------

MAX_BUSY_TIMEOUT = 86_400.0  # a day: past that a lock wait is a hang, not a wait


def as_busy_timeout(value: Any) -> float:
    """``busy_timeout`` as finite seconds in ``[0, MAX_BUSY_TIMEOUT]``, else ``InvalidRequest``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fail(f"busy_timeout must be a finite number of seconds, got {value!r}")
    if not 0 <= value <= MAX_BUSY_TIMEOUT:
        fail(f"busy_timeout must be between 0 and {MAX_BUSY_TIMEOUT:.0f} seconds, got {value!r}")
    return float(value)


def as_durability(value: Any) -> str:
    if value not in ("normal", "full") or not isinstance(value, str):
        fail(f"durability must be 'normal' or 'full', got {value!r}")
    return str(value)


def as_pool_sizes(min_connections: Any, max_connections: Any) -> tuple[int, int]:
    """The connection pool bounds, checked whether or not the engine pools connections."""
    for name, value in (("min_connections", min_connections), ("max_connections", max_connections)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            fail(f"{name} must be an int >= 0, got {value!r}")
    if max_connections < max(1, min_connections):
        fail(f"max_connections ({max_connections}) must be >= 1 and >= min_connections ({min_connections})")
    return int(min_connections), int(max_connections)
