"""How the inspector shows stored bytes, times and ages in HTML (pure functions, no store access).

* **Nothing unprintable reaches the page.** ``scrub`` is the template
  environment's ``finalize``: every ``{{ ... }}`` string goes through the
  CLI's ``_format.escape`` (line feeds and tabs kept) before Jinja escapes
  it, so a NUL or an ESC, a bidirectional override or an invisible format
  character from a stored value, key, error text or event payload never
  reaches the HTML as such: the page shows ``\\x00``, ``\\u202e``, ...
  exactly as the command line does. Times and durations are the CLI's too
  (``table_time``, ``iso_time``, ``human_duration``).
* **Binary is shown as hex by itself.** A value that is not UTF-8, or is
  but holds control bytes, opens in the hex view (``is_binary``): rows of
  16 bytes with the offset and an ASCII column, as ``hexdump -C`` prints.
* **Large values are cut.** The value pages show the first ``SHOWN`` bytes
  (4 KiB) and link to the whole value as a download (``/raw/...``), so a
  1 MB value costs a few KB of HTML; table cells show ``PREVIEW`` bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson
from markupsafe import Markup

from .._format import escape, human_duration, iso_time, show_value, table_time

SHOWN = 4096  # bytes of a value drawn on its page (the rest: the raw download)
PREVIEW = 120  # bytes of a value in a table cell
TEXT_SHOWN = 16_384  # characters of a JSON rendering (event payloads, documents) drawn on a page

_CONTROL_BYTE = re.compile(b"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def scrub(value: Any) -> Any:
    """``value`` made safe to show when it is a plain string (Jinja's ``finalize``): ``_format.escape``,
    line feeds and tabs kept (a traceback's lines, pretty JSON).

    ``Markup`` (already escaped HTML built by the filters below) passes as is;
    other objects pass to Jinja, which turns them into strings with ``str``
    and escapes them: no value the pages print makes a control character
    from ``__str__``.
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        return escape(value, keep_newlines=True)
    return value


def is_binary(value: bytes) -> bool:
    """True when ``value`` is not UTF-8 text, or holds control bytes (tab, line feed, CR excepted)."""
    if _CONTROL_BYTE.search(value):
        return True
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by a truncation at the end is still text.
        return exc.start < len(value) - 3
    return False


def hex_rows(value: bytes, offset: int = 0) -> list[tuple[str, str, str]]:
    """``(offset, hex, ascii)`` per 16 bytes: ``("00000010", "68 65 ...", "he..")``."""
    rows = []
    for start in range(0, len(value), 16):
        chunk = value[start : start + 16]
        left, right = chunk[:8].hex(" "), chunk[8:].hex(" ")
        ascii_column = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        rows.append((f"{offset + start:08x}", f"{left:<23}  {right}".rstrip(), ascii_column))
    return rows


@dataclass(frozen=True)
class ValueView:
    """A value as its page draws it: ``mode`` is ``text``, ``hex`` or ``json``."""

    mode: str
    size: int
    shown: int  # bytes drawn (the first ``shown`` of ``size``)
    text: str  # text and json modes
    rows: list[tuple[str, str, str]]  # hex mode
    binary: bool

    @property
    def truncated(self) -> bool:
        return self.shown < self.size


def value_view(value: bytes, view: str = "auto", limit: int = SHOWN) -> ValueView:
    """``value`` for its page, cut to ``limit`` bytes. ``view``: ``auto`` (hex for binary, else text),
    ``text``, ``hex`` or ``json`` (pretty JSON when the whole value parses, else text)."""
    head = value[:limit]
    binary = is_binary(head)
    mode = view if view in ("text", "hex", "json") else ("hex" if binary else "text")
    if mode == "json":
        try:
            text = orjson.dumps(orjson.loads(value), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONDecodeError:
            mode, text = "text", ""
        else:
            return ValueView("json", len(value), len(value), clip(text), [], binary)
    if mode == "hex":
        return ValueView("hex", len(value), len(head), "", hex_rows(head), binary)
    return ValueView("text", len(value), len(head), show_value(head, keep_newlines=True), [], binary)


def preview(value: bytes, limit: int = PREVIEW) -> str:
    """A table cell's view of ``value``: text (control characters escaped by ``scrub``), or ``hex ...``
    for binary; ``…`` when cut."""
    head = value[:limit]
    more = "…" if len(value) > limit else ""
    if is_binary(head):
        short = value[: limit // 3]
        return "hex " + short.hex(" ") + ("…" if len(value) > len(short) else "")
    return show_value(head) + more


def clip(text: str, limit: int = TEXT_SHOWN) -> str:
    """``text`` cut to ``limit`` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters not shown)"


def json_text(value: Any, limit: int = PREVIEW * 4) -> str:
    """A JSON value (an event payload, a record) as compact JSON text, cut to ``limit`` characters."""
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[:limit] + "…"


def when(ms: int | float | None) -> Markup:
    """``<time datetime="ISO">`` for epoch ms (``""`` for None): ISO-8601 with the zone offset in the attribute
    (``iso_time``), the command line's table form in the text (``2026-12-05 02:01:12.345 +00:00``)."""
    if ms is None:
        return Markup("")
    return Markup('<time datetime="{}">{}</time>').format(iso_time(ms), table_time(ms))


def when_s(seconds: float | None) -> Markup:
    """``when`` for seconds since the epoch (queue times)."""
    return when(None if seconds is None else seconds * 1000)


def age(seconds: float | None) -> str:
    """A duration with its unit, as the command line shows them (``human_duration``: ``45 s``, ``3 min``)."""
    return human_duration(None if seconds is None else max(0.0, seconds))
