"""JSON that keeps lone surrogates (for the records facet, pi-durable's strings).

Python strings may hold lone surrogates (``"\\ud800"``); pi-durable stores
them and reads them back unchanged. UTF-8 cannot encode them, so neither
SQLite TEXT nor PostgreSQL TEXT/JSON can hold them as they are, and orjson
refuses them. Two encodings, each used only for a value that holds one
(everything else is ``_json.dump_json``: orjson, compact UTF-8, no extra
cost):

* ``dump_lossless`` (stored JSON in binary columns: records, document
  values, ops): the stdlib encoder without escaping, then UTF-8 with
  ``surrogatepass`` - each surrogate as its own three bytes. Exactly
  lossless: even two lone surrogates that happen to form a pair
  (``"\\ud800\\udc00"``, two characters) read back as two characters,
  where a ``\\uXXXX`` JSON escape would merge them into one (pi-durable's
  own SQLite storage merges them). ``load_lossless`` is ``orjson.loads``;
  orjson refuses those bytes, and only then are they decoded with
  ``surrogatepass`` and read by the stdlib decoder.
* ``text_lossless`` (indexed strings in TEXT columns, compared with ``=``):
  JSON with ``ensure_ascii=True``, pure ASCII. Never decoded, only compared:
  each string has exactly one encoding (which encoder is chosen depends
  only on the string) and different strings get different encodings, so
  two are equal exactly when their encodings are. The order of encodings
  is not the strings' order; the records facet never orders by a string.

A value with a surrogate is checked by the same rules as any other
(``dump_json`` on a copy whose strings have their surrogates replaced):
NaN, non-str keys, integers beyond 64 bits are still refused.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ._json import dump_json
from .errors import InvalidRequest

__all__ = ["dump_lossless", "has_lone_surrogate", "load_lossless", "text_lossless"]


def _lone(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# orjson refuses nesting deeper than this; the walk below need not look further.
_MAX_DEPTH = 256


def has_lone_surrogate(value: Any) -> bool:
    """Whether a string (or an object key) anywhere in ``value`` holds a lone surrogate.

    ``InvalidRequest("... Circular reference detected ...")`` when a container
    holds itself; nesting deeper than orjson accepts is not looked into.
    """
    return _scan(value, set(), 0)


def _scan(value: Any, ancestors: set[int], depth: int) -> bool:
    if isinstance(value, str):
        return _lone(value)
    if not isinstance(value, (dict, list, tuple)) or depth > _MAX_DEPTH:
        return False
    marker = id(value)
    if marker in ancestors:
        raise InvalidRequest("Circular reference detected: a container holds itself, which JSON cannot")
    ancestors.add(marker)
    try:
        if isinstance(value, dict):
            found = any(_scan(k, ancestors, depth + 1) for k in value)
            return found or any(_scan(v, ancestors, depth + 1) for v in value.values())
        return any(_scan(v, ancestors, depth + 1) for v in value)
    finally:
        ancestors.discard(marker)


def _without_surrogates(value: Any, depth: int = 0) -> Any:
    """``value`` with every string's lone surrogates replaced (for the checks only)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if _lone(value) else value
    if depth > _MAX_DEPTH:
        return value  # too deep for orjson anyway: dump_json refuses it
    if isinstance(value, dict):
        return {
            _without_surrogates(k, depth + 1) if isinstance(k, str) else k: _without_surrogates(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_without_surrogates(v, depth + 1) for v in value]
    return value


def _checked(name: str, value: Any) -> bytes | None:
    """orjson's bytes of ``value``, or None for a value (otherwise valid) with a lone surrogate."""
    try:
        return dump_json(name, value)
    except InvalidRequest:
        try:
            found = has_lone_surrogate(value)
        except InvalidRequest as cycle:
            raise InvalidRequest(f"{name}: {cycle}") from None
        if not found:
            raise
    dump_json(name, _without_surrogates(value))  # every other rule (types, keys, NaN, int64)
    return None


def dump_lossless(name: str, value: Any) -> bytes:
    """Compact JSON bytes of ``value``, surrogates kept; ``InvalidRequest`` naming ``name``."""
    data = _checked(name, value)
    if data is not None:
        return data
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


def text_lossless(name: str, value: Any) -> str:
    """``value`` as JSON text for an indexed column: equal values, equal texts."""
    data = _checked(name, value)
    if data is not None:
        return data.decode()
    return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def load_lossless(data: bytes | bytearray | memoryview | str) -> Any:
    """The value of JSON written by ``dump_lossless`` (or by any strict JSON encoder)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raw = data if isinstance(data, str) else bytes(data).decode("utf-8", "surrogatepass")
        return json.loads(raw)
