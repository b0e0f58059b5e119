"""LangGraph's search filter: its semantics (``predicate``) and what of it the engine can test (``conditions``).

The semantics are InMemoryStore's (``langgraph.store.memory._compare_values``),
which PostgresStore's SQL approximates: a filter is a dict of top-level
keys; a value that is a dict of operators (``$eq $ne $gt $gte $lt $lte``)
applies them, another dict matches nested keys partially, a list matches
element-wise, anything else by equality (Python's: ``1 == 1.0 == True``);
a missing key reads as None. Ordering operators compare ``float()`` of both
sides; where either has none, the test is false.

``conditions`` translates what it can into the engine's declarative
``JsonCondition``s, so that a search through the engine's vector index
skips what the filter rejects where the vectors are ranked; every candidate
is still tested by ``predicate``, which alone decides. A condition must
therefore accept every value ``predicate`` accepts; what cannot be said
that way (lists, ``$eq`` of a dict, ``$ne`` of a number, operands of other
types) is left out, which only lets more candidates through.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ...engines.vectors import JsonCondition
from ...errors import InvalidRequest

__all__ = ["OPERATORS", "check_filter", "conditions", "predicate"]

OPERATORS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
# LangGraph's ordering operators by the engine's names.
_ORDERING = {"$gt": "gt", "$gte": "ge", "$lt": "lt", "$lte": "le"}


def predicate(wanted: Any) -> Callable[[Any], bool]:
    """LangGraph's filter semantics, compiled once per search into a test of a stored value.

    Operators (``$eq`` ...), nested dicts partially, lists element-wise,
    anything else by equality. The stored value is decoded JSON: its objects
    are ``dict`` and its arrays ``list``, which is all the test looks for.
    """
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            operators = list(wanted.items())
            return lambda value: all(_operator(value, op, operand) for op, operand in operators)
        fields = [(k, predicate(v)) for k, v in wanted.items()]
        if len(fields) == 1:  # the common filter: one field
            [(key, test)] = fields
            return lambda value: type(value) is dict and test(value.get(key))
        return lambda value: type(value) is dict and all(test(value.get(k)) for k, test in fields)
    if isinstance(wanted, (list, tuple)):
        items = [predicate(w) for w in wanted]
        return lambda value: (
            type(value) is list
            and len(value) == len(items)
            and all(test(v) for test, v in zip(items, value, strict=True))
        )
    return lambda value: bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):
        return False
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    return left <= right  # "$lte", checked by _check_filter


def check_filter(filter: Any) -> None:
    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise InvalidRequest(f"search filter must be a dict, got {type(filter).__name__}")
    for value in filter.values():
        if isinstance(value, Mapping):
            unknown = {k for k in value if isinstance(k, str) and k.startswith("$")} - OPERATORS
            if unknown:
                raise InvalidRequest(f"unknown filter operator(s) {sorted(unknown)}; supported: {sorted(OPERATORS)}")
            check_filter({k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith("$"))})


def conditions(filter: Mapping[str, Any] | None, root: tuple[str, ...]) -> tuple[JsonCondition, ...]:
    """The engine conditions every value ``predicate(filter)`` accepts meets (at ``root`` + the filter's keys)."""
    found: list[JsonCondition] = []
    if filter:
        _conditions(filter, root, found)
    return tuple(found)


def _conditions(wanted: Mapping[Any, Any], path: tuple[str, ...], found: list[JsonCondition]) -> None:
    for key, value in wanted.items():
        if not isinstance(key, str):
            continue  # a JSON object has none: predicate alone decides
        at = (*path, key)
        if isinstance(value, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in value):
                if all(k in OPERATORS for k in value):
                    found.extend(c for op, operand in value.items() if (c := _operator_condition(at, op, operand)))
            elif value:
                _conditions(value, at, found)
        else:
            condition = _equality(at, value)
            if condition is not None:
                found.append(condition)


def _equality(at: tuple[str, ...], value: Any) -> JsonCondition | None:
    """``stored == value`` as a condition, for a str, None, bool, int or finite float ``value``."""
    if value is None or isinstance(value, str):
        return JsonCondition(at, "eq", value)
    if isinstance(value, (bool, int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int past float64: the engine could only round it
            return None
        # Equal as float64 whenever equal in Python (int == float compares exactly; rounding merges, never splits).
        return JsonCondition(at, "eq", number) if math.isfinite(number) else None
    return None


def _operator_condition(at: tuple[str, ...], op: str, operand: Any) -> JsonCondition | None:
    if op == "$eq":
        return _equality(at, operand)
    if op == "$ne":
        # Exact only for str and None (numbers compare as float64 in the engine, which merges big ints).
        return JsonCondition(at, "ne", operand) if operand is None or isinstance(operand, str) else None
    try:
        number = float(operand)
    except (TypeError, ValueError, OverflowError):
        return None  # predicate rejects every value (or raises): nothing for the engine to skip by
    if math.isnan(number):
        return None
    return JsonCondition(at, _ORDERING[op], number)
