"""Document deltas in Chord's tuple vocabulary (pi-durable's ``delta`` module).

A delta is a list of operations, each a JSON array whose first element is
its verb; a path is a list of segments (``str`` object members, ``int >= 0``
array indexes)::

    ["r", value]                        replace the whole value
    ["s", path, value]                  set an object member or an array element
    ["d", path]                         delete an object member or remove an array element
    ["a", path, text]                   append text to a string
    ["t", path, count]                  drop ``count`` characters from a string's front
    ["p", path, index, remove, items]   splice an array: items replace [index, index + remove)
    ["m", path, permutation]            reorder an array in place: new[i] = old[permutation[i]]

Pure (no I/O). ``check_op`` refuses what pi-durable's ``assert_valid_op``
refuses (``InvalidRequest``); ``apply`` changes a value as pi-durable's
``delta.apply`` does and raises ``DeltaPathError`` wherever it raises (a
path that does not resolve to the shape the verb needs). The rules, with
the package's behaviour that a reader might not guess:

* Reserved segments ``__proto__``, ``constructor``, ``prototype`` are
  refused anywhere in a path, as are negative, non-integer and boolean
  segments. ``s``, ``d``, ``a`` and ``t`` need a non-empty path; ``p`` and
  ``m`` may address the root (which, for a document, is an object: the op
  does not apply).
* Counts are in characters of the Python string (code points). Chord's
  documentation says UTF-16 code units, but pi-durable-python 1.4.0 both
  writes (``session/drafts.py``: ``len(before) - shared``) and applies
  (``current[count:]``) code points; counting UTF-16 units would corrupt
  every text with a character outside the BMP that the package writes.
  The two agree on BMP text and on lone surrogates.
* Array indexes: ``s``/``a``/``t`` need an existing element (an index
  equal to the length does not apply, as in the package, where the list
  assignment fails); ``d`` needs an existing element; an index above the
  length is refused. ``p`` clamps ``index`` and ``remove`` to the array
  (slice semantics), so it always applies to an array. ``m`` needs a
  permutation of exactly the array's length.
* Object members: ``d`` of a missing member is a no-op; ``a``/``t`` need
  the member to hold a string; an intermediate segment must exist.
* An integer segment never names an object member: ``a``/``t`` do not
  apply, ``d`` removes nothing (as in the package). ``s`` is refused: the
  package would store an integer key, which JSON cannot hold (it becomes
  ``"0"`` on the next encode, a different document).
* Payloads (``r``, ``s``, ``p`` items) are copied into the result, so a
  later op of the batch can change what an earlier one inserted without
  touching the caller's operations.

``MAX_DELTA_OPERATIONS``: a batch longer than this is folded into one root
replacement (``fold``), as Chord's writer and pi-durable's drafts do; the
records facet folds before storing, so a stored delta never replays more
than this many operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import InvalidRequest, WrongType

__all__ = [
    "MAX_DELTA_OPERATIONS",
    "RESERVED_SEGMENTS",
    "DeltaPathError",
    "apply",
    "check_op",
    "check_ops",
    "fold",
]

RESERVED_SEGMENTS = frozenset({"__proto__", "constructor", "prototype"})
MAX_DELTA_OPERATIONS = 4_096

_VERBS = ("r", "s", "d", "a", "t", "p", "m")


class DeltaPathError(Exception):
    """An operation's path does not resolve to a value of the shape its verb needs."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_path(name: str, path: object, non_empty: bool) -> None:
    if not isinstance(path, list):
        raise InvalidRequest(f"{name}: the path must be a list of segments, got {type(path).__name__}")
    if non_empty and not path:
        raise InvalidRequest(f"{name}: the path must not be empty")
    for segment in path:
        if isinstance(segment, str):
            if segment in RESERVED_SEGMENTS:
                raise InvalidRequest(f"{name}: unsafe path segment: {segment}")
        elif not _is_int(segment) or segment < 0:
            raise InvalidRequest(f"{name}: unsafe path segment: {segment!r}")


def _count(name: str, what: str, value: object) -> None:
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        raise InvalidRequest(f"{name}: {what} must be an integer >= 0, got {value!r:.60}")


def check_op(name: str, op: object) -> None:
    """Refuse (``InvalidRequest`` naming ``name``) an op pi-durable's ``assert_valid_op`` refuses."""
    if not isinstance(op, list) or not op:
        raise InvalidRequest(f"{name} must be a non-empty list [verb, ...], got {op!r:.80}")
    verb = op[0]
    arity = {"r": 2, "s": 3, "d": 2, "a": 3, "t": 3, "p": 5, "m": 3}.get(verb) if isinstance(verb, str) else None
    if arity is None:
        raise InvalidRequest(f"{name}: unknown op verb {verb!r:.40} (one of {', '.join(_VERBS)})")
    if len(op) != arity:
        raise InvalidRequest(f"{name}: a {verb!r} op has {arity} elements, got {len(op)}")
    if verb == "r":
        return
    _check_path(name, op[1], non_empty=verb in ("s", "d", "a", "t"))
    if verb == "a":
        if not isinstance(op[2], str):
            raise InvalidRequest(f"{name}: an 'a' op appends a str, got {type(op[2]).__name__}")
    elif verb == "t":
        _count(name, "the count", op[2])
    elif verb == "p":
        _count(name, "the index", op[2])
        _count(name, "the remove count", op[3])
        if not isinstance(op[4], list):
            raise InvalidRequest(f"{name}: a 'p' op inserts a list of items, got {type(op[4]).__name__}")
    elif verb == "m":
        permutation = op[2]
        if not isinstance(permutation, list):
            raise InvalidRequest(f"{name}: an 'm' op needs a permutation list, got {type(permutation).__name__}")
        seen = [False] * len(permutation)
        for index in permutation:
            if not _is_int(index) or not 0 <= index < len(permutation) or seen[index]:
                raise InvalidRequest(f"{name}: the 'm' permutation is not a bijection of 0..{len(permutation) - 1}")
            seen[index] = True


def check_ops(name: str, ops: object) -> list[Any]:
    """``ops`` if it is a list of valid ops; ``InvalidRequest`` naming the first bad one."""
    if not isinstance(ops, list):
        raise WrongType(f"{name} must be a list of Chord delta ops, got {type(ops).__name__}")
    for i, op in enumerate(ops):
        check_op(f"{name}[{i}]", op)
    return ops


def _copy(value: Any) -> Any:
    """A detached copy of a JSON value (containers copied, scalars shared)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _resolve(root: Any, path: Sequence[Any]) -> Any:
    value = root
    for segment in path:
        if isinstance(segment, str):
            if not isinstance(value, dict) or segment not in value:
                raise DeltaPathError(f"unresolvable path: {list(path)!r:.200}")
        elif not isinstance(value, list) or segment >= len(value):
            raise DeltaPathError(f"unresolvable path: {list(path)!r:.200}")
        value = value[segment]
    return value


def _string_at(parent: Any, key: Any, path: list[Any]) -> str:
    current = parent.get(key) if isinstance(parent, dict) else parent[key]
    if not isinstance(current, str):
        raise DeltaPathError(f"not a string at {path!r:.200}")
    return current


def apply(value: Any, ops: Sequence[list[Any]], *, copy: bool = True) -> Any:
    """Apply checked ``ops`` to ``value`` (changed in place) and return the root.

    The root is a new object only after an ``r``. ``copy=False`` skips
    copying payloads, for ops the caller decoded privately and applies once.
    ``DeltaPathError`` when an op does not apply; ``value`` may then be
    partly changed (callers apply to a private copy and drop it).
    """
    root = value
    dup = _copy if copy else _identity
    for op in ops:
        verb = op[0]
        if verb == "r":
            root = dup(op[1])
            continue
        path: list[Any] = op[1]
        if verb == "p" or verb == "m":
            target = _resolve(root, path)
            if not isinstance(target, list):
                raise DeltaPathError(f"not an array at {path!r:.200}")
            if verb == "p":
                index, remove = op[2], op[3]
                target[index : index + remove] = dup(op[4])
            else:
                permutation = op[2]
                if len(permutation) != len(target):
                    raise DeltaPathError(
                        f"the permutation has {len(permutation)} indexes, the array at {path!r:.200}"
                        f" has {len(target)} elements"
                    )
                target[:] = [target[source] for source in permutation]
            continue
        parent = _resolve(root, path[:-1])
        key = path[-1]
        if isinstance(parent, list):
            if not isinstance(key, int):
                raise DeltaPathError(f"a member name addresses an array at {path!r:.200}")
            if key >= len(parent):
                raise DeltaPathError(f"index {key} is past the end of the array at {path!r:.200}")
        elif not isinstance(parent, dict):
            raise DeltaPathError(f"unresolvable path: {path!r:.200}")
        elif isinstance(key, int):
            if verb == "d":
                continue  # no object member has an integer name: nothing to delete
            raise DeltaPathError(f"an array index addresses an object at {path!r:.200}")
        if verb == "s":
            parent[key] = dup(op[2])
        elif verb == "d":
            if isinstance(parent, list):
                del parent[key]
            else:
                parent.pop(key, None)
        elif verb == "a":
            parent[key] = _string_at(parent, key, path) + op[2]
        else:  # "t"
            parent[key] = _string_at(parent, key, path)[op[2] :]
    return root


def _identity(value: Any) -> Any:
    return value


def fold(ops: list[Any], result: Any) -> list[Any]:
    """``ops``, or one root replacement by ``result`` when there are more than ``MAX_DELTA_OPERATIONS``."""
    if len(ops) > MAX_DELTA_OPERATIONS:
        return [["r", result]]
    return ops
