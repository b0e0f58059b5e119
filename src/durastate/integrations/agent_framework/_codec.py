"""Workflow checkpoints as JSON, without pickle: ``encode`` / ``decode``.

Agent Framework's own checkpoint encoding (``encode_checkpoint_value``) keeps
JSON-native values as they are and pickles everything else into base64
strings; loading such a checkpoint runs the unpickler on stored bytes. This
codec writes every value as JSON and reads it back without ever executing
stored data: a value the rules below do not cover is refused when the
checkpoint is saved (``UnencodableValue``, naming where in the checkpoint it
sits and its type), so nothing that could not be read back is ever written.

What is stored, and how (a tagged object is ``{"$ds": <tag>, ...}``):

* ``None``, ``bool``, ``str``, finite ``float``, ``int`` within signed 64
  bits: as themselves. Other ints (``"int"``, decimal text) and NaN or
  infinities (``"float"``, ``repr`` text) are tagged, so they round-trip.
* ``list``: a list; ``dict`` with only ``str`` keys, none of them ``"$ds"``:
  an object. Any other plain dict (int keys, tuple keys, the reserved key):
  ``"dict"`` with its ``[key, value]`` pairs, so keys keep their types (the
  framework's JSON path turns ``{1: "a"}`` into ``{"1": "a"}``).
* ``tuple``, ``set``, ``frozenset``, ``bytes`` (base64), ``datetime``,
  ``date``, ``time``, ``timedelta``, ``UUID``, ``Decimal``: tagged by name.
* Classes, by their ``module:qualname`` key: an ``Enum`` member (by name), a
  ``WorkflowEvent`` of type ``request_info`` (its own ``to_dict`` /
  ``from_dict``), an instance of Agent Framework's ``SerializationMixin``
  (``Message``, ``AgentResponse``, ...: its ``to_dict`` / ``from_dict``), a
  pydantic model (``model_dump`` / ``model_validate``), a dataclass (its
  fields, each encoded by these rules; ``WorkflowMessage`` is one).

Which classes: the same allowlist the framework's restricted unpickler
applies, so an application that works with ``FileCheckpointStorage`` works
here: classes of ``agent_framework*`` and ``openai.types.*`` modules, classes
registered with ``agent_framework.register_checkpoint_type``, and the
storage's ``allowed_checkpoint_types`` (``"module:qualname"`` strings). A
class is looked up, when a checkpoint is read, among modules already
imported (never importing a module a stored name chooses, as the framework's
``deserialize_type`` does); metaclasses are never returned. A subclass of
``dict``, ``list`` or ``str``, a lambda, a class object, a local class: refused.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import math
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from agent_framework._serialization import SerializationMixin
from agent_framework._workflows import _checkpoint_encoding
from agent_framework._workflows._events import WorkflowEvent

from ..._validate import INT64_MAX, INT64_MIN

__all__ = ["TAG", "Decoder", "UnencodableValue", "UndecodableValue", "class_key", "encode"]

TAG = "$ds"

# Module prefixes whose classes are always allowed (the framework's own rule for its restricted unpickler).
_ALLOWED_PREFIXES = ("agent_framework.", "agent_framework_", "openai.types.")


class UnencodableValue(Exception):
    """A value the codec does not store; ``path`` says where it sits (``state['k'][2]``), the message what it is."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.reason = message
        self.steps: list[str] = []  # from the value outwards; built only on the way out of a failure

    @property
    def path(self) -> str:
        return "".join(reversed(self.steps))

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class UndecodableValue(Exception):
    """Stored data the codec cannot rebuild (a class not allowed or not loaded, a malformed tag)."""


def class_key(cls: type) -> str:
    """``module:qualname``, the framework's way of naming a class in checkpoints."""
    return f"{cls.__module__}:{cls.__qualname__}"


# Classes applications registered with agent_framework.register_checkpoint_type: the framework
# keeps them in a private module-level set (mutated in place), read here so that registration
# works the same for this storage as for the framework's own.
_REGISTERED: set[str] = getattr(_checkpoint_encoding, "_REGISTERED_CHECKPOINT_TYPE_KEYS", set())


def is_allowed(key: str, allowed: frozenset[str]) -> bool:
    module = key.partition(":")[0]
    return (module + ".").startswith(_ALLOWED_PREFIXES) or key in allowed or key in _REGISTERED


def _is_serialization_mixin(cls: type) -> bool:
    return issubclass(cls, SerializationMixin)


def _is_pydantic_model(cls: type) -> bool:
    return callable(getattr(cls, "model_validate", None)) and callable(getattr(cls, "model_dump", None))


def _is_workflow_event(cls: type) -> bool:
    return issubclass(cls, WorkflowEvent)


_SIMPLE: dict[type, tuple[str, Callable[[Any], Any]]] = {
    bytes: ("bytes", lambda v: base64.b64encode(v).decode("ascii")),
    _dt.datetime: ("datetime", lambda v: v.isoformat()),
    _dt.date: ("date", lambda v: v.isoformat()),
    _dt.time: ("time", lambda v: v.isoformat()),
    _dt.timedelta: ("timedelta", lambda v: [v.days, v.seconds, v.microseconds]),
    uuid.UUID: ("uuid", str),
    decimal.Decimal: ("decimal", str),
}

_SIMPLE_DECODERS: dict[str, Callable[[Any], Any]] = {
    "bytes": lambda v: base64.b64decode(v.encode("ascii"), validate=True),
    "datetime": _dt.datetime.fromisoformat,
    "date": _dt.date.fromisoformat,
    "time": _dt.time.fromisoformat,
    "timedelta": lambda v: _dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
}


def encode(value: Any, allowed: frozenset[str]) -> Any:
    """``value`` as JSON-ready data (see the module docstring); ``UnencodableValue`` for what is not covered."""
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if INT64_MIN <= value <= INT64_MAX else {TAG: "int", "v": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
    # Lists and str-keyed dicts are most of a checkpoint: their items are encoded without a
    # wrapper call each; only a failure walks the container again to name the item's place.
    if kind is list:
        try:
            return [encode(item, allowed) for item in value]
        except UnencodableValue as exc:
            _locate(exc, enumerate(value), allowed)
            raise
    if kind is dict:
        if TAG not in value:
            try:
                plain = {k: encode(v, allowed) for k, v in value.items() if type(k) is str}
            except UnencodableValue as exc:
                _locate(exc, ((k, v) for k, v in value.items() if type(k) is str), allowed)
                raise
            if len(plain) == len(value):
                return plain
        pairs = [[_within(k, allowed, ".keys()"), _within(v, allowed, k)] for k, v in value.items()]
        return {TAG: "dict", "v": pairs}
    if kind is tuple or kind is set or kind is frozenset:
        items = value if kind is tuple else sorted(value, key=repr)  # a stable text for equal sets
        return {TAG: kind.__name__, "v": [_within(item, allowed, i) for i, item in enumerate(items)]}
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return {TAG: simple[0], "v": simple[1](value)}
    return _encode_object(value, allowed)


def _within(value: Any, allowed: frozenset[str], step: Any) -> Any:
    """``encode(value)`` for an item of a container; a failure learns the item's place on its way out."""
    try:
        return encode(value, allowed)
    except UnencodableValue as exc:
        exc.steps.append(_step(step))
        raise


def _step(step: Any) -> str:
    return step if type(step) is str and step.startswith(".") else f"[{step!r}]"


def _locate(exc: UnencodableValue, items: Iterable[tuple[Any, Any]], allowed: frozenset[str]) -> None:
    """Add to ``exc`` the place of the first of ``(place, item)`` that fails to encode (it raised ``exc``).

    Encoding is pure, so the item that failed fails again, with the same
    error; the places below it are already in ``exc``.
    """
    for step, item in items:
        try:
            encode(item, allowed)
        except UnencodableValue:
            exc.steps.append(_step(step))
            return


def _encode_object(value: Any, allowed: frozenset[str]) -> Any:
    cls = type(value)
    key = class_key(cls)
    if isinstance(value, type) or "<locals>" in cls.__qualname__ or "<lambda>" in cls.__qualname__:
        raise UnencodableValue(f"a {key} cannot be stored (classes, functions and local classes are not data)")
    handled = (
        isinstance(value, enum.Enum)
        or _is_workflow_event(cls)
        or _is_serialization_mixin(cls)
        or _is_pydantic_model(cls)
        or (dataclasses.is_dataclass(value))
    )
    if not handled:
        raise UnencodableValue(
            f"a {key} is not JSON and durastate does not pickle; store JSON values, dataclasses, pydantic models, "
            "enums or Agent Framework types"
        )
    if not is_allowed(key, allowed):
        raise UnencodableValue(
            f"class {key} is not allowed in checkpoints: add {key!r} to allowed_checkpoint_types or register it with "
            "agent_framework.register_checkpoint_type"
        )
    if isinstance(value, enum.Enum):
        return {TAG: "enum", "c": key, "v": value.name}
    if _is_workflow_event(cls):
        try:
            data = value.to_dict()
        except ValueError as exc:  # to_dict covers request_info events only
            raise UnencodableValue(f"a {key} cannot be stored: {exc}") from None
        return {TAG: "event", "c": key, "v": _within(data, allowed, ".to_dict()")}
    if _is_serialization_mixin(cls):
        return {TAG: "mixin", "c": key, "v": _within(value.to_dict(), allowed, ".to_dict()")}
    if _is_pydantic_model(cls):
        return {TAG: "pydantic", "c": key, "v": _within(value.model_dump(mode="json"), allowed, ".model_dump()")}
    fields = {f.name: _within(getattr(value, f.name), allowed, f".{f.name}") for f in dataclasses.fields(value)}
    return {TAG: "dataclass", "c": key, "v": fields}


class Decoder:
    """Rebuilds what ``encode`` wrote, resolving classes under ``allowed`` (see the module docstring)."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(item) for item in value]
        if not isinstance(value, dict):
            return value
        tag = value.get(TAG)
        if tag is None:
            return {k: self(v) for k, v in value.items()}
        try:
            return self._tagged(tag, value)
        except UndecodableValue:
            raise
        except Exception as exc:
            raise UndecodableValue(f"stored value tagged {tag!r} cannot be rebuilt: {exc!r}") from exc

    def _tagged(self, tag: str, value: dict[str, Any]) -> Any:
        payload = value["v"]
        if tag == "int":
            return int(payload)
        if tag == "float":
            return float(payload)
        if tag == "dict":
            return {self(k): self(v) for k, v in payload}
        if tag == "tuple":
            return tuple(self(item) for item in payload)
        if tag == "set":
            return {self(item) for item in payload}
        if tag == "frozenset":
            return frozenset(self(item) for item in payload)
        simple = _SIMPLE_DECODERS.get(tag)
        if simple is not None:
            return simple(payload)
        cls = self._resolve(value["c"])
        if tag == "enum":
            if not isinstance(cls, enum.EnumMeta):
                raise UndecodableValue(f"{value['c']} is not an Enum")
            return cls[payload]
        data = self(payload)
        if tag == "event" and _is_workflow_event(cls):
            return cls.from_dict(data)  # type: ignore[attr-defined]
        if tag == "mixin" and _is_serialization_mixin(cls):
            return cls.from_dict(data)  # type: ignore[attr-defined]
        if tag == "pydantic" and _is_pydantic_model(cls):
            return cls.model_validate(data)  # type: ignore[attr-defined]
        if tag == "dataclass" and dataclasses.is_dataclass(cls):
            return _build_dataclass(cls, data)
        raise UndecodableValue(f"stored tag {tag!r} does not fit class {value['c']}")

    def _resolve(self, key: str) -> type:
        if not is_allowed(key, self.allowed):
            raise UndecodableValue(
                f"class {key} is not allowed in checkpoints: add it to allowed_checkpoint_types or register it with "
                "agent_framework.register_checkpoint_type"
            )
        module_name, _, qualname = key.partition(":")
        # Only modules already imported: a stored name never makes this process import anything.
        target: Any = sys.modules.get(module_name)
        if target is None:
            raise UndecodableValue(f"class {key} is not loaded: import {module_name} before loading the checkpoint")
        for part in qualname.split("."):
            target = getattr(target, part, None)
        if not isinstance(target, type) or issubclass(target, type) or class_key(target) != key:
            raise UndecodableValue(f"{key} does not name a class in {module_name}")
        return target


def _build_dataclass(cls: type, data: dict[str, Any]) -> Any:
    fields = dataclasses.fields(cls)
    obj = cls(**{f.name: data[f.name] for f in fields if f.init and f.name in data})
    for f in fields:
        if not f.init and f.name in data:
            object.__setattr__(obj, f.name, data[f.name])  # frozen dataclasses too
    return obj
