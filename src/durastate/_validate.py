"""Argument checks, limits and text rules shared by every facet.

The one place for them: no facet defines its own copy of a limit or a rule,
and no facet imports another facet to reach one (a test parses the facet
modules and fails if one does).

Each check either returns the normalised value or raises, naming the
argument and what was wrong with it, one error class per kind of mistake:

* a wrong type: ``WrongType`` (an ``InvalidRequest`` and a ``TypeError``),
  ``"<name> must be <what>, got <type name>"`` (``fail_type``);
* a value out of range, too large, empty, badly formed: ``InvalidRequest``
  (``fail``); sizes say ``"<name> is <n> bytes; the limit is <limit>"``
  (``fail_size``).

Facets call them before touching the engine, so a rejected call changes
nothing.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from .errors import ConfigurationError, InvalidRequest, WrongType

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Longest delay, lease or TTL in ms (about 146 million years): far past any
# real use, and short enough that "now + duration" fits the int64 ms columns.
MAX_DURATION_MS = 2**62
# A store's clock reads below this many ms since the epoch (at open and at
# every later reading, ``EngineBase.now_ms``), so "now + duration" and
# "now - duration" fit too, whatever the duration within its own bound.
CLOCK_LIMIT_MS = 2**62
# What a clock given to ``open(clock=...)`` must return, in both refusals.
CLOCK_CONTRACT = (
    "seconds since the epoch, like time.time(): a finite number >= 0 whose milliseconds stay below 2**62 "
    "(about 146 million years)"
)
# Longest name in UTF-8 bytes (queues, event sessions, lanes, presence
# namespaces, participants, fields). The name leads every index entry;
# PostgreSQL refuses btree entries over ~2.7 KB, so without a bound a long
# name would work on SQLite and fail on PostgreSQL.
MAX_NAME_SIZE = 1024
# Rows fetched per round trip when a facet streams a scan or a log.
PAGE_SIZE = 512
# Longest ``wait=`` in seconds (about 136 years): a blocking wait is a
# thread's (or the event loop's) timed sleep, and the platform's timed waits
# stop at ``threading.TIMEOUT_MAX`` (~292 years on Linux; past it Python
# raises OverflowError), far below ``MAX_DURATION_MS``.
MAX_WAIT = 2**32


class _Shown(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # repr() refuses ints past 4300 digits (ValueError), and is slow before
            return f"<an int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_SHOWN = _Shown()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = _SHOWN.maxother = 80


def shown(value: Any) -> str:
    """``repr(value)`` bounded in depth and length, for messages about any value.

    A plain ``{value!r}`` of a 2000-level dict raises ``RecursionError``
    (and a 70 kB string makes a 70 kB message) while the refusal is being
    worded.
    """
    return _SHOWN.repr(value)


def fail(message: str) -> NoReturn:
    """A value mistake (range, size, form): ``InvalidRequest``."""
    raise InvalidRequest(message)


def fail_type(name: str, expected: str, value: Any) -> NoReturn:
    """A type mistake: ``WrongType("<name> must be <expected>, got <type>")``."""
    raise WrongType(f"{name} must be {expected}, got {type(value).__name__}")


def fail_size(name: str, size: int, limit: int) -> NoReturn:
    raise InvalidRequest(f"{name} is {size} bytes; the limit is {limit}")


def json_sized(name: str, data: bytes, max_size: int | None) -> bytes:
    """``data`` (``name`` as JSON) if at most ``max_size`` bytes (``None``: no limit), else ``InvalidRequest``."""
    if max_size is not None and len(data) > max_size:
        fail(f"{name} is {len(data)} bytes as JSON; the limit is max_value_size={max_size}")
    return data


def text(name: str, value: Any, *, limit: int | None = MAX_NAME_SIZE) -> str:
    """A ``str`` without NUL or lone surrogates, at most ``limit`` UTF-8 bytes (``None``: no limit)."""
    if not isinstance(value, str):
        fail_type(name, "a str", value)
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            fail(f"{name} must be valid unicode (no lone surrogates), got {value!r:.80}")
    if "\x00" in value:
        fail(f"{name} must not contain NUL characters, got {value!r:.80}")
    if limit is not None and size > limit:
        fail_size(name, size, limit)
    return str(value)


def nonempty_text(name: str, value: Any, *, limit: int | None = MAX_NAME_SIZE) -> str:
    """``text`` that is not empty: an identifier that names something new (a session, an event)."""
    checked = text(name, value, limit=limit)
    if not checked:
        fail(f"{name} must not be empty")
    return checked


def positive(name: str, value: Any) -> int:
    """A signed 64-bit int >= 1."""
    n = as_int64(name, value)
    if n < 1:
        fail(f"{name} must be >= 1, got {n}")
    return n


def prefix_successor(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix``.

    ``None`` when there is none (empty prefix, or only U+10FFFF). Code point
    order, which UTF-8 byte order (SQLite BINARY, PostgreSQL "C") follows.
    """
    while prefix:
        last = ord(prefix[-1])
        if last < 0x10FFFF:
            nxt = last + 1
            if 0xD800 <= nxt <= 0xDFFF:  # surrogates are not characters
                nxt = 0xE000
            return prefix[:-1] + chr(nxt)
        prefix = prefix[:-1]
    return None


def as_bytes(name: str, value: Any) -> bytes:
    """``bytes`` (or a bytes-like ``bytearray``/``memoryview``) as ``bytes``."""
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    fail_type(name, "bytes", value)


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
        fail_type(name, "str or bytes", value)
    if not encoded:
        fail(f"{name} must not be empty")
    return encoded


def as_int64(name: str, value: Any) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail_type(name, "an int", value)
        value = int(value)
    result: int = value
    if not INT64_MIN <= value <= INT64_MAX:
        fail(f"{name} must fit in a signed 64-bit integer, got {shown(value)}")
    return result


def as_limit(name: str, value: Any) -> int | None:
    """``None`` (no limit) or an int >= 0.

    A limit beyond int64 limits nothing a database can hold and cannot be
    bound to a statement: it is the same as ``None``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        fail_type(name, "an int >= 0 or None", value)
    if value < 0:
        fail(f"{name} must be >= 0 or None, got {value}")
    if value > INT64_MAX:
        return None
    return int(value)


def as_seconds(name: str, value: Any, *, allow_zero: bool) -> float:
    """A finite, non-negative duration in seconds (positive unless ``allow_zero``).

    Bounded where they become milliseconds (``MAX_DURATION_MS``); a
    blocking wait is checked by ``as_wait``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail_type(name, "a number of seconds", value)
    try:
        seconds = float(value)
    except OverflowError:  # an int past float's range
        seconds = math.inf
    if math.isnan(seconds) or (math.isinf(seconds) and not isinstance(value, int)):
        fail(f"{name} must be finite, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        fail(f"{name} must be {'>= 0' if allow_zero else '> 0'} seconds, got {shown(value)}")
    return seconds


def as_wait(value: Any) -> float:
    """A blocking call's ``wait=`` (seconds, 0 allowed), at most ``MAX_WAIT``: sync and async check it alike."""
    seconds = as_seconds("wait", value, allow_zero=True)
    if seconds > MAX_WAIT:
        fail(f"wait={shown(value)} seconds is too long; the limit is {MAX_WAIT} seconds")
    return seconds


def bounded_int(name: str, value: Any, low: int, high: int) -> int:
    """An int from ``low`` to ``high``: ``WrongType`` for another type, ``InvalidRequest`` out of range."""
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        fail_type(name, f"an int from {low} to {high}", value)
    if not low <= value <= high:
        fail(f"{name} must be an int from {low} to {high}, got {shown(value)}")
    return int(value)


def as_list(name: str, value: Any) -> list[Any]:
    """Any iterable of items, as a new list.

    Refused: ``str``/``bytes`` (they iterate by character, almost always a
    missing pair of brackets) and mappings (they iterate by key only).
    """
    if isinstance(value, list):
        return list(value)
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(value, Iterable):
        fail_type(name, "a list (or another iterable of items)", value)
    return list(value)


# -- engine options (checked the same way by every engine and by open()) -------


def misconfigured(message: str) -> NoReturn:
    """Raise ``ConfigurationError``: an option the store cannot work with (permanent, never "retry later")."""
    raise ConfigurationError(message)


MAX_BUSY_TIMEOUT = 86_400.0  # a day: past that a lock wait is a hang, not a wait


def as_busy_timeout(value: Any) -> float:
    """``busy_timeout`` as finite seconds in ``[0, MAX_BUSY_TIMEOUT]``, else ``ConfigurationError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        misconfigured(f"busy_timeout must be a finite number of seconds, got {shown(value)}")
    if not 0 <= value <= MAX_BUSY_TIMEOUT:
        misconfigured(f"busy_timeout must be between 0 and {MAX_BUSY_TIMEOUT:.0f} seconds, got {value!r}")
    return float(value)


def as_durability(value: Any) -> str:
    if value not in ("normal", "full") or not isinstance(value, str):
        misconfigured(f"durability must be 'normal' or 'full', got {shown(value)}")
    return str(value)


def as_pool_sizes(min_connections: Any, max_connections: Any) -> tuple[int, int]:
    """The connection pool bounds, checked whether or not the engine pools connections."""
    for name, value in (("min_connections", min_connections), ("max_connections", max_connections)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            misconfigured(f"{name} must be an int >= 0, got {shown(value)}")
    if max_connections < max(1, min_connections):
        misconfigured(f"max_connections ({max_connections}) must be >= 1 and >= min_connections ({min_connections})")
    return int(min_connections), int(max_connections)


# How long a network engine keeps the attempt row of each write (see
# ``engines.postgres_attempts``): its retry asks within a second; the
# default window covers a paused process (GC, a suspended VM); past a week
# the table only grows.
ATTEMPT_RETENTION = 300.0
MIN_ATTEMPT_RETENTION = 1.0
MAX_ATTEMPT_RETENTION = 7 * 86400.0


def as_attempt_retention(value: Any) -> float:
    """``attempt_retention`` as finite seconds, 0 or in ``[MIN_, MAX_ATTEMPT_RETENTION]``, else ``ConfigurationError``.

    0: keep no attempt rows (a PostgreSQL write whose retry would need one
    raises ``OutcomeUnknown`` instead of being retried). Checked whether or
    not the engine keeps attempt rows (SQLite does not), like the pool
    sizes: a store opened with a bad value fails the same way on every
    engine.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        misconfigured(f"attempt_retention must be a finite number of seconds, got {shown(value)}")
    if value != 0 and not MIN_ATTEMPT_RETENTION <= value <= MAX_ATTEMPT_RETENTION:
        misconfigured(
            f"attempt_retention must be 0 (keep none) or between {MIN_ATTEMPT_RETENTION:g} and"
            f" {MAX_ATTEMPT_RETENTION:g} seconds (7 days), got {value!r}"
        )
    return float(value)
