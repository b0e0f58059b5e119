"""Checks of the records facet's arguments: ids, points, addresses, contents, cursors and whole commit batches.

Malformed input raises ``InvalidRequest`` (``fail``); a well-formed request
that collides with stored state raises ``Conflict`` (``reject``). The JSON
rules (lone surrogates kept exactly) are ``durastate._json_lossless``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

import orjson

from .. import _chord
from .._json import JSON_OPTIONS, has_non_finite
from .._json_lossless import dump_lossless, load_lossless, text_lossless
from .._validate import fail_type, json_sized, shown
from ..errors import Conflict, InvalidRequest, WrongType
from .models import Address, Content, DocAction, Plan

MAX_SAFE_INTEGER = 2**53 - 1
# Indexed strings (kinds, keys, statuses, request ids), JSON-encoded.
MAX_TEXT = 1024


def fail(message: str) -> NoReturn:
    raise InvalidRequest(message)


def reject(message: str) -> NoReturn:
    raise Conflict(message)


def dumps(name: str, value: Any, max_size: int | None = None) -> bytes:
    """Compact JSON bytes of ``value`` (lone surrogates escaped), at most ``max_size`` bytes; else InvalidRequest."""
    return json_sized(name, dump_lossless(name, value), max_size)


loads = load_lossless


def indexed_text(name: str, value: Any) -> str:
    """An indexed string, stored JSON-encoded (NUL-safe on PostgreSQL)."""
    if not isinstance(value, str):
        fail_type(name, "a str", value)
    text = text_lossless(name, value)
    size = len(text.encode())
    if size > MAX_TEXT:
        fail(f"{name} is {size} bytes JSON-encoded; the limit is {MAX_TEXT}")
    return text


def safe_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail_type(name, "an integer", value)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        fail(f"{name} must be a safe integer (|n| <= 2**53 - 1), got {shown(value)}")
    return int(value)


def as_id(name: str, value: Any) -> int:
    n = safe_int(name, value)
    if n < 0:
        fail(f"{name} must be >= 0, got {n}")
    return n


def as_object(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        fail_type(name, "an object (dict)", value)
    return dict(value)


def as_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        fail_type(name, "a bool", value)
    return value


def as_point(name: str, value: Any) -> int | None:
    """A point in commit time: ``"current"`` (None) or a commit sequence."""
    if value == "current" and isinstance(value, str):
        return None
    if isinstance(value, str):
        fail(f"{name} must be 'current' or a commit sequence number, got {shown(value)}")
    return as_id(name, value)


def as_limit(value: Any) -> int:
    n = safe_int("limit", value)
    if n < 1:
        fail(f"limit must be >= 1, got {n}")
    return n


def as_scope(name: str, value: Any) -> tuple[str, int]:
    scope = as_object(name, value)
    kind = scope.get("kind")
    if kind == "session":
        return "session", 0
    if kind == "conversation":
        return "conversation", as_id(f"{name}.conversationId", scope.get("conversationId"))
    if kind == "task":
        return "task", as_id(f"{name}.taskId", scope.get("taskId"))
    fail(f"{name}.kind must be 'session', 'conversation' or 'task', got {shown(kind)}")


def as_address(name: str, value: Any) -> Address:
    address = as_object(name, value)
    kind = indexed_text(f"{name}.kind", address.get("kind"))
    scope_kind, owner_id = as_scope(f"{name}.scope", address.get("scope"))
    key = address.get("key")
    return Address(
        kind=kind,
        scope_kind=scope_kind,
        owner_id=owner_id,
        family=0 if key is None else 1,
        key_value=indexed_text(f"{name}.key", "" if key is None else key),
    )


def is_current_only(record: Mapping[str, Any]) -> bool:
    return bool(record["scope"]["kind"] != "conversation" or record.get("history") == "latest")


def as_content(name: str, value: Any, max_size: int | None = None) -> Content:
    content = as_object(name, value)
    kind = content.get("kind")
    version = safe_int(f"{name}.version", content.get("version"))
    if kind == "base":
        body = content.get("value")
        if not isinstance(body, dict):
            fail_type(f"{name}.value", "a JSON object", body)
        return Content("base", version, body, None, dumps(f"{name}.value", body, max_size))
    if kind == "delta":
        ops = _chord.check_ops(f"{name}.ops", content.get("ops"))
        return Content("delta", version, None, ops, dumps(f"{name}.ops", ops, max_size))
    fail(f"{name}.kind must be 'base' or 'delta', got {shown(kind)}")


def apply_ops(ops: list[Any], value: dict[str, Any], what: str, copy: bool = True) -> dict[str, Any]:
    """``value`` (owned by the caller) changed by checked ``ops``; Conflict if they do not apply."""
    try:
        result = _chord.apply(value, ops, copy=copy)
    except _chord.DeltaPathError as exc:
        reject(f"{what}: the delta's ops do not apply to the current value: {exc}")
    if not isinstance(result, dict):
        reject(f"{what}: the delta would make the value a {type(result).__name__}, not an object")
    return result


# -- commit plan --------------------------------------------------------------


def plan_commit(writes: Any, max_size: int | None = None) -> Plan:
    """Validate the batch's shape and the seed's per-batch document rules; each JSON value <= ``max_size`` bytes."""
    # A list (what every caller passes) skips the ABC checks.
    if type(writes) is not list and (isinstance(writes, (str, bytes, Mapping)) or not isinstance(writes, Iterable)):
        fail_type("writes", "a list of write objects", writes)
    plan = Plan()
    claims, entries = plan.claims, plan.entries
    for i, raw in enumerate(writes):
        # Fast path for the most common write, a plain well-formed entry:
        # the same checks without building names or copies. Anything it
        # does not accept takes the general path, which words the error.
        if type(raw) is dict and raw.get("type") == "entry":
            value = raw.get("value")
            if type(value) is dict:
                id, conversation = value.get("id"), value.get("conversationId")
                if (
                    type(id) is int
                    and type(conversation) is int
                    and 0 <= id <= MAX_SAFE_INTEGER
                    and 0 <= conversation <= MAX_SAFE_INTEGER
                ):
                    try:
                        data = orjson.dumps(value, option=JSON_OPTIONS)
                    except (TypeError, orjson.JSONEncodeError):
                        pass
                    else:
                        if (b"null" not in data or not has_non_finite(value)) and (
                            max_size is None or len(data) <= max_size
                        ):
                            claims.append((id, "entry"))
                            entries += (id, conversation, 0 if value.get("head") is None else 1, None, data)
                            continue
        name = f"writes[{i}]"
        write = as_object(name, raw)
        kind = write.get("type")
        if kind in ("conversation", "entry", "task", "submission"):
            value = as_object(f"{name}.value", write.get("value"))
            id = as_id(f"{name}.value.id", value.get("id"))
            data = dumps(f"{name}.value", value, max_size)
            plan.claims.append((id, kind))
            if kind != "entry":
                plan.typed.append((id, kind))
            if kind == "conversation":
                owner = value.get("owner")
                owner_c = owner_t = parent_id = parent_at = None
                if owner is not None:
                    owner = as_object(f"{name}.value.owner", owner)
                    owner_c = as_id(f"{name}.value.owner.conversationId", owner.get("conversationId"))
                    owner_t = as_id(f"{name}.value.owner.taskId", owner.get("taskId"))
                parent = value.get("parent")
                if parent is not None:
                    parent = as_object(f"{name}.value.parent", parent)
                    parent_id = as_id(f"{name}.value.parent.conversationId", parent.get("conversationId"))
                    parent_at = as_id(f"{name}.value.parent.at", parent.get("at"))
                plan.conversations.append((id, owner_c, owner_t, parent_id, parent_at, data))
            elif kind == "entry":
                conversation = as_id(f"{name}.value.conversationId", value.get("conversationId"))
                head = 0 if value.get("head") is None else 1
                plan.entries += (id, conversation, head, None, data)
            elif kind == "task":
                state = as_object(f"{name}.value.state", value.get("state"))
                plan.tasks.append(
                    (
                        id,
                        as_id(f"{name}.value.conversationId", value.get("conversationId")),
                        indexed_text(f"{name}.value.kind", value.get("kind")),
                        indexed_text(f"{name}.value.state.status", state.get("status")),
                        int(as_bool(f"{name}.value.abortRequested", value.get("abortRequested"))),
                        int(as_bool(f"{name}.value.background", value.get("background"))),
                        data,
                    )
                )
            else:
                request_id = value.get("requestId")
                plan.submissions.append(
                    (
                        id,
                        as_id(f"{name}.value.conversationId", value.get("conversationId")),
                        None if request_id is None else indexed_text(f"{name}.value.requestId", request_id),
                        indexed_text(f"{name}.value.status", value.get("status")),
                        data,
                    )
                )
        elif kind in ("document.create", "document.copy"):
            record = as_object(f"{name}.record", write.get("record"))
            id = as_id(f"{name}.record.id", record.get("id"))
            address = as_address(f"{name}.record", record)
            for reserved in ("createdAt", "retiredAt"):
                if reserved in record:
                    fail(f"{name}.record.{reserved} is set by the commit, not by the writer")
            dumps(f"{name}.record", record, max_size)
            action = plan.documents.setdefault(id, DocAction(id))
            if action.create is not None or action.content is not None or action.copy is not None:
                fail(f"Document {id} has more than one content command")
            action.create = record
            action.address = address
            plan.claims.append((id, "document"))
            plan.typed.append((id, "document"))
            if kind == "document.create":
                action.content = as_content(f"{name}.content", write.get("content"), max_size)
            else:
                source = as_object(f"{name}.source", write.get("source"))
                action.copy = (
                    as_id(f"{name}.source.id", source.get("id")),
                    as_point(f"{name}.source.at", source.get("at")),
                )
        elif kind in ("document.change", "document.retire"):
            id = as_id(f"{name}.id", write.get("id"))
            action = plan.documents.setdefault(id, DocAction(id))
            if kind == "document.change":
                content = as_content(f"{name}.content", write.get("content"), max_size)
                if action.content is not None or action.copy is not None:
                    fail(f"Document {id} has more than one content command")
                action.content = content
            else:
                if action.retire:
                    fail(f"Document {id} is retired more than once")
                action.retire = True
        else:
            fail(
                f"{name}.type must be one of conversation, entry, task, submission, document.create,"
                f" document.copy, document.change, document.retire; got {shown(kind)}"
            )
    for action in plan.documents.values():
        if action.copy is not None and action.copy[0] in plan.documents:
            fail(f"Document copy {action.id} source is changed in the copy batch")
    return plan


# -- cursors ------------------------------------------------------------------


def scan_order(query: Mapping[str, Any], cursor: Any, default: str) -> tuple[str, int | None]:
    """The scan order and the id to continue after (None: from the start)."""
    order = query.get("order")
    if order is not None and order not in ("ascending", "descending"):
        fail(f"order must be 'ascending' or 'descending', got {shown(order)}")
    if cursor is None:
        return order or default, None
    if not isinstance(cursor, Mapping):
        raise WrongType(f"Invalid storage cursor: expected an object, got {type(cursor).__name__}")
    after = cursor.get("after")
    if isinstance(after, bool) or not isinstance(after, int) or not -1 <= after <= MAX_SAFE_INTEGER:
        fail("Invalid storage cursor: 'after' must be a safe integer id")
    cursor_order = cursor.get("order", order or default)
    if cursor_order not in ("ascending", "descending"):
        fail(f"Invalid storage cursor: order {shown(cursor_order)}")
    if order is not None and cursor_order != order:
        fail(f"Invalid storage cursor: it continues a {cursor_order} scan, the query asks for {order}")
    return cursor_order, int(after)


def optional_filters(
    query: Mapping[str, Any], spec: Sequence[tuple[str, str, Any]]
) -> tuple[tuple[str, ...], list[Any]]:
    used: list[str] = []
    params: list[Any] = []
    for key, column, convert in spec:
        if key in query:
            used.append(column)
            params.append(convert(key, query[key]))
    return tuple(used), params
