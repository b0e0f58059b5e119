"""pydantic-ai's messages as the JSON durastate stores, and a refusal that names the message and part to blame.

Shared by the conversation store (``pydantic_ai``: each new entry's message)
and pydantic-ai-harness's step store (``pydantic_ai_harness_steps``: a
snapshot's messages). The JSON is ``ModelMessagesTypeAdapter``'s (bytes in
base64), so a history decodes in one call. What JSON cannot hold (a value
pydantic cannot serialise, NaN or an infinity, which pydantic would write as
``null``) is refused with ``InvalidRequest`` before anything is written; the
message says which message and which part (``parts[j]``, its ``part_kind``),
found by writing each part again alone, only once something was refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ..errors import InvalidRequest

try:
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_core import PydanticSerializationError, SchemaSerializer
    from pydantic_core.core_schema import CoreConfig
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        f"durastate.integrations.pydantic_ai needs pydantic-ai: pip install 'durastate[pydantic-ai]' ({exc})"
    ) from exc

__all__ = ["JSON_CONFIG", "messages_json", "refuse"]

ModelMessagesTypeAdapter.rebuild()  # built lazily by pydantic-ai; its schema is needed now
# pydantic's JSON with NaN and infinities written as the bare tokens NaN / Infinity
# (not as null, pydantic's default): orjson refuses those tokens, so reading the JSON
# back is the check. Bytes in base64, as ModelMessagesTypeAdapter writes them.
JSON_CONFIG = CoreConfig(ser_json_bytes="base64", ser_json_inf_nan="constants")
_MESSAGES_JSON = SchemaSerializer(ModelMessagesTypeAdapter.core_schema, JSON_CONFIG)


def refuse(what: str, exc: Exception | str) -> InvalidRequest:
    """The refusal of ``what``, which JSON cannot hold, for ``exc`` (pydantic's reason, or ours)."""
    return InvalidRequest(f"{what} cannot be stored as JSON: {exc}")


def _json_or_error(messages: Sequence[Any]) -> tuple[bytes, Exception | str | None]:
    """``messages`` as ``ModelMessagesTypeAdapter`` writes them, and why JSON cannot hold them (``None``: it can)."""
    try:
        blob = _MESSAGES_JSON.to_json(messages)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        return b"", exc
    if b"NaN" in blob or b"Infinity" in blob:  # maybe only inside a string: parse to be sure
        try:
            orjson.loads(blob)
        except orjson.JSONDecodeError:
            return b"", "it contains NaN or an infinity"
    return blob, None


def _refused_part(messages: Sequence[Any], label: str) -> str:
    """``label`` with where in ``messages`` the first part JSON cannot hold is: ``label[i] (a response),
    parts[j] (a 'tool-call' part)``, or ``label, a response's parts[j] (...)`` for one message; ``label`` alone
    if no single part is to blame.

    Only built for a refusal: each part is written again alone.
    """
    for i, message in enumerate(messages):
        parts = getattr(message, "parts", None)
        if not isinstance(parts, Sequence) or not dataclasses.is_dataclass(message) or isinstance(message, type):
            continue
        for j, part in enumerate(parts):
            if _json_or_error([dataclasses.replace(message, parts=[part])])[1] is not None:
                kind = getattr(message, "kind", type(message).__name__)
                where = f"{label}[{i}] (a {kind}), " if len(messages) > 1 else f"{label}, a {kind}'s "
                return f"{where}parts[{j}] (a {getattr(part, 'part_kind', type(part).__name__)!r} part),"
    return label


def messages_json(messages: Sequence[Any], what: str | Callable[[], str]) -> bytes:
    """``messages`` as ``ModelMessagesTypeAdapter`` writes them.

    ``InvalidRequest`` if JSON cannot hold them (NaN, infinities, unserialisable values), naming ``what`` (or
    ``what()``, a label built only then), the message and part to blame, and pydantic's reason (the type).
    """
    blob, error = _json_or_error(messages)
    if error is None:
        return blob
    raise refuse(_refused_part(messages, what if isinstance(what, str) else what()), error)
