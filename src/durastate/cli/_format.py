"""How the command line (and the inspector) show stored data: safe for any bytes, lossless in JSON.

Stored data is untrusted: a model's output, a tool's error, bytes a program
wrote. Four rules, in one place so every command and the web inspector
follow the same ones (docs/cli.md "Bytes, text and time"; docs/decisions.md):

* **Shown text never carries a control character** (``escape``). C0
  controls, DEL, C1 controls (``\\x9b`` is a CSI on some terminals), the
  bidirectional overrides and isolates ("Trojan source"), invisible format
  characters (zero width space, word joiner, BOM), Unicode tag characters
  (invisible text smuggled to a model) and line/paragraph separators are
  written as escapes: ``\\x1b`` for a C0 control or DEL, ``\\u009b`` for a C1
  control (the character, validly encoded), ``\\u202e`` / ``\\U000e0041`` for
  the rest, ``\\n`` ``\\r`` ``\\t`` by name. A byte that is not part of valid
  UTF-8 shows as ``\\x80`` (the byte). ZWJ and ZWNJ are kept (emoji
  sequences and several scripts need them). Shown text is for reading, not
  for parsing: a backslash is not doubled, so a stored ``\\x1b`` (four
  characters) looks like an escaped ESC; ``--json`` and ``--format hex``
  are the exact forms.
* **Bytes in JSON and on the command line have one lossless form**
  (``encode_bytes`` / ``decode_bytes``): the text itself when the bytes are
  valid UTF-8 and do not start with ``hex:``, else ``hex:`` and two lower
  case hex digits a byte. JSON escapes control characters itself, so a
  string in JSON output is safe on a terminal. ``decode_bytes(encode_bytes(b))
  == b`` for every ``b``; every argument naming bytes (a kv scope, namespace
  or key, a queue name, a cursor) takes this form, so what ``--json``
  prints can be passed back.
* **A name in a table** (``show_name``) is the argument form when it is
  printable, else ``hex:``: always safe, always something to paste back.
* **Time**: ISO-8601 with the local offset and milliseconds in JSON
  (``iso_time``: ``2026-12-05T03:01:09.123+01:00``), the same with a space
  and the offset in tables (``table_time``); durations with a unit
  (``human_duration``: ``850 ms``, ``1.5 s``, ``3 min``, ``2.5 h``,
  ``4 d``); sizes in binary units (``human_bytes``: ``1.5 KiB``).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from durastate.errors import InvalidRequest

__all__ = [
    "BytesSyntaxError",
    "decode_bytes",
    "encode_bytes",
    "escape",
    "fact_lines",
    "fact_text",
    "human_bytes",
    "human_duration",
    "iso_time",
    "jsonable",
    "show_name",
    "show_value",
    "table_time",
]

HEX_PREFIX = "hex:"

# Characters a terminal acts on or that hide or reorder text (first, last code point); see the module docstring.
_UNSAFE_RANGES = (
    (0x00, 0x1F),  # C0
    (0x7F, 0x9F),  # DEL, C1
    (0xAD, 0xAD),  # soft hyphen
    (0x61C, 0x61C),  # Arabic letter mark
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200B),  # zero width space (ZWNJ/ZWJ 200c/200d are kept)
    (0x200E, 0x200F),  # LRM, RLM
    (0x2028, 0x202E),  # line/paragraph separators, bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated format
    (0xFEFF, 0xFEFF),  # BOM / zero width no-break space
    (0xFFF9, 0xFFFB),  # interlinear annotation
    (0xD800, 0xDFFF),  # surrogates: undecodable bytes (surrogateescape) or lone ones
    (0xE0000, 0xE007F),  # tag characters
)
_UNSAFE = re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _UNSAFE_RANGES) + "]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    point = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if point < 0x80:
        return f"\\x{point:02x}"
    if 0xDC80 <= point <= 0xDCFF:  # an undecodable byte, as surrogateescape carries it
        return f"\\x{point - 0xDC00:02x}"
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


# Every unsafe code point (about 2,300) and its escape, for str.translate.
_ESCAPES = {point: _escaped(chr(point)) for first, last in _UNSAFE_RANGES for point in range(first, last + 1)}
_KEEP_LINES = {point: text for point, text in _ESCAPES.items() if chr(point) not in "\n\t"}


def escape(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every unsafe character escaped (module docstring); newline and tab kept if asked.

    ``keep_newlines``: for a whole value printed on its own (``kv get``),
    where a line break is content; CR is escaped even then (it moves the
    cursor back over what was printed).
    """
    if text.isascii() and text.isprintable():
        return text  # the common case, at C speed
    # str.translate runs in C: a 1 MiB value of random bytes (half of them escaped) takes ~0.2 s,
    # where a regex with a Python callback per match took ten times that.
    return text.translate(_KEEP_LINES if keep_newlines else _ESCAPES)


def show_value(value: bytes, *, keep_newlines: bool = False) -> str:
    """Bytes as safe text: UTF-8, each byte that is not valid UTF-8 as ``\\xNN``, controls escaped."""
    return escape(value.decode("utf-8", "surrogateescape"), keep_newlines=keep_newlines)


class BytesSyntaxError(InvalidRequest):
    """A ``hex:`` argument that is not hex (the command line reports it as a usage error, exit code 2)."""


def encode_bytes(value: bytes) -> str:
    """The lossless text form of ``value``: its UTF-8 text, or ``hex:`` + hex digits (``decode_bytes`` inverts it)."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return HEX_PREFIX + value.hex()
    return HEX_PREFIX + value.hex() if text.startswith(HEX_PREFIX) else text


def decode_bytes(text: str) -> bytes:
    """The bytes a command-line argument or JSON string names: ``hex:`` + hex digits, else its UTF-8.

    An argument holding bytes that are not UTF-8 (a shell's ``$'\\x80'``)
    arrives as surrogate escapes and is given back as those bytes.
    ``BytesSyntaxError`` for ``hex:`` followed by anything but pairs of hex digits.
    """
    if text.startswith(HEX_PREFIX):
        digits = text[len(HEX_PREFIX) :]
        if not re.fullmatch(r"(?:[0-9a-fA-F]{2})*", digits):
            raise BytesSyntaxError(f"{escape(text)!r}: hex: must be followed by pairs of hex digits")
        return bytes.fromhex(digits)
    return text.encode("utf-8", "surrogateescape")


def show_name(value: bytes) -> str:
    """A name (key, scope, queue) for a table: the argument form when printable, else ``hex:``; always safe."""
    text = encode_bytes(value)
    if text.startswith(HEX_PREFIX) or text.isprintable():
        return text
    return HEX_PREFIX + value.hex()


def jsonable(value: Any) -> Any:
    """``value`` with bytes (at any depth) in their lossless form, tuples and sets as lists."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return encode_bytes(bytes(value))
    if isinstance(value, dict):
        return {(encode_bytes(k) if isinstance(k, bytes) else k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return value


# -- time -----------------------------------------------------------------------


def _local(ms: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).astimezone()


def iso_time(ms: float | None) -> str | None:
    """Epoch milliseconds as ISO-8601 in the local zone with its offset: ``2026-12-05T03:01:09.123+01:00``."""
    if ms is None:
        return None
    return _local(ms).isoformat(timespec="milliseconds")


def table_time(ms: float | None) -> str:
    """Epoch milliseconds for a table: ``2026-12-05 03:01:09.123 +01:00`` (empty for None)."""
    if ms is None:
        return ""
    moment = _local(ms)
    offset = moment.isoformat()[-6:] if moment.utcoffset() else "+00:00"
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d} {offset}"


def human_duration(seconds: float | None) -> str:
    """A duration with its unit: ``80 µs``, ``850 ms``, ``1.5 s``, ``3 min``, ``2.5 h``, ``4 d`` (or ``-1.5 s``)."""
    if seconds is None:
        return ""
    sign, s = ("-", -seconds) if seconds < 0 else ("", seconds)
    if s < 0.001:
        return f"{sign}{s * 1_000_000:.0f} µs"
    if s < 1:
        return f"{sign}{s * 1000:.0f} ms"
    for limit, unit, size in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if s < limit:
            return f"{sign}{_trim(s / size)} {unit}"
    return f"{sign}{_trim(s / 86400)} d"


def _trim(n: float) -> str:
    """One decimal, none when it is zero (``3``, ``1.5``); rounding that reaches the next unit is fine."""
    text = f"{n:.1f}"
    return text[:-2] if text.endswith(".0") else text


def human_bytes(n: float | None) -> str:
    """A size in binary units: ``512 B``, ``1.5 KiB``, ``3.0 MiB``, up to TiB."""
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def fact_text(key: str, value: Any) -> str:
    """A health fact as the inspector shows it: a ``*_bytes`` count as ``1,236,992 (1.2 MiB)``, a mapping (schema
    versions) as ``kv 3, queues 2``, a list (a failed integrity check's findings) as its items joined by ``; ``;
    not yet escaped. ``durastate info`` prints the same, a list's items one a line (``fact_lines``)."""
    if key.endswith("_bytes") and isinstance(value, int):
        return f"{value:,} ({human_bytes(value)})"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(fact_text(key, item) for item in value)
    return str(value)


def fact_lines(key: str, value: Any) -> list[str]:
    """A health fact as ``durastate info`` prints it: ``fact_text``'s one line, or a list's items one a line;
    not yet escaped (a fact's own text is never split: a file name with a newline in it stays one line)."""
    if isinstance(value, list):
        return [fact_text(key, item) for item in value] or [""]
    return [fact_text(key, value)]


# -- JSON -------------------------------------------------------------------------

# What orjson leaves unescaped that a terminal acts on: C1 controls and the
# invisible/bidi characters above (orjson escapes C0 itself).
_UNSAFE_IN_JSON = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _UNSAFE_RANGES if a >= 0x7F) + "]"
)


def _json_escape(char: str) -> str:
    point = ord(char)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000  # a UTF-16 surrogate pair, as JSON spells characters beyond the BMP
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def json_text(data: Any, *, indent: bool = False) -> str:
    """``data`` as JSON text that is safe on a terminal: every unsafe character (``escape``) as ``\\uXXXX``.

    Outside strings JSON has only ASCII, so the escapes land inside strings
    and the document means exactly what orjson's would. Bytes go through
    ``jsonable`` first. A string with a lone surrogate (which orjson
    refuses; the records facet keeps them) is written by the standard
    library as a ``\\udXXX`` escape.
    """
    import json

    import orjson

    value = jsonable(data)
    try:
        text = orjson.dumps(value, option=(orjson.OPT_INDENT_2 if indent else 0) | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError: lone surrogates
        return json.dumps(value, ensure_ascii=True, indent=2 if indent else None, default=str)
    return _UNSAFE_IN_JSON.sub(lambda m: _json_escape(m.group()), text)
