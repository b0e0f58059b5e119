"""The adapter's own argument checks: the seed's error types, run only to word a refusal.

Each check returns the normalised value or raises the seed-compatible error
type (``TypeError``, ``ValueError``, ``OverflowError``) with a message
naming the argument. The facets validate every call once; these run when a
facet refuses one (``_seed_error``), or where the seed's rules differ from
the facet's (a negative ``limit``, an ``after_id`` past int64).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from durastate.errors import InvalidRequest

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class _Int64OutOfRange(InvalidRequest, OverflowError):
    """An integer argument outside the signed 64-bit range.

    Both a ``ValueError`` (durastate's ``InvalidRequest``) and the
    ``OverflowError`` sqlite3 raised for it in the seed.
    """


def _as_bytes(name: str, value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{name} must be bytes, got {type(value).__name__}")


def _as_optional_bytes(name: str, value: Any) -> bytes | None:
    return None if value is None else _as_bytes(name, value)


def _as_iterable(name: str, value: Any) -> list[Any]:
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be a list, got {type(value).__name__}")
    if isinstance(value, list):
        return value
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"{name} must be a list, got {type(value).__name__}") from None


def _as_bytes_list(name: str, value: Any) -> list[bytes]:
    return [_as_bytes(f"{name}[{i}]", item) for i, item in enumerate(_as_iterable(name, value))]


def _as_pairs(name: str, value: Any) -> list[tuple[bytes, bytes]]:
    pairs = []
    for i, item in enumerate(_as_iterable(name, value)):
        if not isinstance(item, (tuple, list)):
            raise TypeError(f"{name}[{i}] must be a (key, value) tuple, got {type(item).__name__}")
        if len(item) != 2:
            raise ValueError(f"{name}[{i}] must be a (key, value) pair, got {len(item)} elements")
        pairs.append((_as_bytes(f"{name}[{i}] key", item[0]), _as_bytes(f"{name}[{i}] value", item[1])))
    return pairs


def _as_int(name: str, value: Any) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _as_int64(name: str, value: Any) -> int:
    number = _as_int(name, value)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise _Int64OutOfRange(f"{name} must fit in a signed 64-bit integer, got {number}")
    return number


def _as_limit(value: Any) -> int | None:
    if value is None:
        return None
    limit = _as_int("limit", value)
    if limit < 0:
        raise ValueError(f"limit must be >= 0 or None (None means no limit), got {limit}")
    return limit


def _as_shard_key(value: Any) -> bytes:
    """``value`` (a ``str``) as the UTF-8 bytes that prefix its shard's ids.

    A lone surrogate has no UTF-8 form: ``ValueError`` (the seed let
    ``str.encode``'s ``UnicodeEncodeError`` out).
    """
    if not isinstance(value, str):
        raise TypeError(f"shard_key must be a str, got {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"shard_key must be valid text, got {value!r} (a lone surrogate)") from None


def _check_limit(name: str, value: Any) -> int | None:
    return _as_limit(value)


def _as_optional_bytes_list(name: str, value: Any) -> list[bytes] | None:
    return None if value is None else _as_bytes_list(name, value)


_Check = tuple[Callable[[str, Any], object], str, Any]


def _address_checks(scope_id: Any, ns: Any, key: Any) -> tuple[_Check, _Check, _Check]:
    return (_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns), (_as_bytes, "key", key)


def _seed_error(*checks: _Check) -> None:
    """Run the adapter's own checks (``check(name, value)``) on a call's arguments.

    The facets validate every argument once and raise ``InvalidRequest`` (a
    ``ValueError``) for anything wrong. The seed raised ``TypeError`` for a
    wrong type (and ``OverflowError`` for an int64 overflow), so when the
    facet refuses a call, the adapter runs these checks: the first one that
    fails raises the seed's error type with a message naming the argument.
    When all pass, the facet's refusal was about a value (a size, an
    overflowing sum) and the caller re-raises it. A correct call never
    reaches this.
    """
    for check, name, value in checks:
        check(name, value)
