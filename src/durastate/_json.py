"""JSON in and out of the facets that store JSON (documents, events, records).

orjson, compact. What JSON cannot hold is refused with ``InvalidRequest``
before anything is written: non-JSON types, non-str keys, lone surrogates,
integers outside signed 64 bits, and NaN/infinities (which orjson would quietly
write as ``null``; we refuse rather than change the value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson

from ._validate import INT64_MAX, INT64_MIN, fail, json_sized
from .errors import WrongType

__all__ = ["JSON_OPTIONS", "dump_json", "has_non_finite", "int64_overflow"]

# 19 digits in a row: the shortest text of an integer outside int64 (orjson
# itself writes integers up to 2**64 - 1). A string may hold such a run too;
# then the walk decides. Found by mapping every digit to b"1" and every other
# byte to b" " (bytes.translate, C speed) and looking for nineteen b"1"s: about
# 4x faster than the regex [0-9]{19} on a small document, 15x on a 6 KB one.
_DIGITS_AS_ONES = bytes(0x31 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_NINETEEN_ONES = b"1" * 19

# datetimes and dataclasses are not JSON: let them reach ``default`` / fail.
JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _any_leaf(value: Any, leaf: type | tuple[type, ...], wrong: Callable[[Any], bool]) -> bool:
    """Whether a leaf of type ``leaf`` anywhere in ``value`` is ``wrong`` (iterative walk of dicts/lists)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, leaf):
            if wrong(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def has_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity hides anywhere in ``value``."""
    return _any_leaf(value, float, lambda f: not math.isfinite(f))


def int64_overflow(data: bytes, value: Any) -> bool:
    """Whether ``value`` (already encoded as ``data``) holds an integer outside signed 64 bits."""
    if _NINETEEN_ONES not in data.translate(_DIGITS_AS_ONES):
        return False
    return _any_leaf(value, int, lambda n: not isinstance(n, bool) and not INT64_MIN <= n <= INT64_MAX)


def bad_json_value(message: str) -> bool:
    """Whether orjson's refusal ``message`` is about a value (a lone surrogate, an int past 64 bits, nesting too deep).

    Anything else it refuses is a type JSON cannot hold (bytes, a set, a
    non-``str`` key): a ``WrongType``, where these are plain ``InvalidRequest``.
    """
    return "surrogates" in message or "Integer exceeds" in message or "Recursion limit" in message


def dump_json(name: str, value: Any, max_size: int | None = None, *, numbers_checked: bool = False) -> bytes:
    """Compact JSON bytes of ``value``; ``InvalidRequest`` naming ``name`` otherwise.

    ``numbers_checked``: the caller built ``value`` with every float finite
    and every int within signed 64 bits (an encoder that tags the others),
    so the two checks for them are skipped.
    """
    try:
        data = orjson.dumps(value, option=JSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        message = f"{name} is not JSON-serialisable (JSON types only, str keys, no lone surrogates): {exc}"
        if bad_json_value(str(exc)):
            fail(message)
        raise WrongType(message) from None
    if not numbers_checked:
        # Only a text with a null in it can hide a NaN; decoding it back (C
        # speed) tells whether anything changed before the slower walk decides.
        if b"null" in data and orjson.loads(data) != value and has_non_finite(value):
            fail(f"{name} contains NaN or infinity, which JSON cannot hold")
        if int64_overflow(data, value):
            fail(f"{name} contains an integer outside signed 64 bits ({INT64_MIN}..{INT64_MAX})")
    return json_sized(name, data, max_size)
