"""Conformance for ``store.kv``: the helpers its test modules share."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from durastate import InvalidRequest
from durastate.kv import KV

__all__ = []

INT64_MIN = -(2**63)


INT64_MAX = 2**63 - 1


# Keys whose unsigned-byte order differs from signed order and from "shorter
# first" order, and that are prefixes of each other.
ODD_KEYS = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"\x01",
    b"\x7f",
    b"\x7f\xff",
    b"\x80",
    b"\x80\x00",
    b"\xfe",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"a",
    b"a\x00",
    b"ab",
    b"b",
]


def page_crossing_keys(count: int) -> list[bytes]:
    """``count`` sorted keys where each second key is the first one plus NUL.

    ``k`` and ``k + b"\\x00"`` are adjacent in byte order, so every page
    boundary of a streamed scan lands next to the tightest possible
    successor: a continuation that skips or repeats a key shows up.
    """
    keys: list[bytes] = []
    for i in itertools.count():
        base = i.to_bytes(2, "big")
        keys.append(base)
        keys.append(base + b"\x00")
        if len(keys) >= count:
            return keys[:count]
    raise AssertionError("unreachable")


def value_of(key: bytes) -> bytes:
    """A value derived from the key, so a swapped pair is visible."""
    return b"v:" + key.hex().encode()


def kv_fingerprint(
    kv: KV,
    scopes: tuple[bytes, ...] = (b"s", b"t"),
    namespaces: tuple[bytes, ...] = (b"n", b""),
    keys: tuple[bytes, ...] = (b"k", b"k2"),
) -> object:
    """Everything observable at the addresses the bad-input cases aim at."""
    return [
        (
            list(kv.scan(scope, ns)),
            [list(kv.log(scope, ns, key)) for key in keys],
            [kv.counter(scope, ns, key) for key in keys],
        )
        for scope in scopes
        for ns in namespaces
    ]


def seed_kv(kv: KV) -> None:
    """Known data at the addresses ``kv_fingerprint`` reads."""
    for scope in (b"s", b"t"):
        for ns in (b"n", b""):
            kv.put_many(scope, ns, [(b"k", b"v-" + scope + ns), (b"k2", b"w")])
            kv.append(scope, ns, b"k", b"entry-1")
            kv.append(scope, ns, b"k", b"entry-2")
            kv.incr(scope, ns, b"k", 5)


# The KV is typed Any: these calls are wrong on purpose.
KVCall = Callable[[Any], object]


def expect_invalid(label: str, call: Callable[..., object], *args: Any) -> None:
    """``call(*args)`` must raise ``InvalidRequest`` (a ``ValueError``) with a message."""
    try:
        call(*args)
    except InvalidRequest as exc:
        assert isinstance(exc, ValueError)
        assert str(exc), f"{label}: the message must say what was wrong"
    except Exception as exc:  # the wrong kind of error is a failure, with the call named
        pytest.fail(f"{label}: raised {type(exc).__name__}: {exc} instead of InvalidRequest")
    else:
        pytest.fail(f"{label}: accepted")
