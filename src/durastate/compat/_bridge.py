"""An adapter's error class that is also the framework's own, when the framework is importable.

A framework catches its own exception classes (``except StorageRequestError``).
``bridged(ours, module, name)`` returns a subclass of both ``ours`` and
``module.name`` when that module imports and the two classes can be combined,
else ``ours``; the result is cached per triple. ``ours`` must not define
``__init__`` (construction goes to the framework's class, whatever its
signature) unless the signatures match.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

E = TypeVar("E", bound=BaseException)

__all__ = ["bridged"]

_cache: dict[tuple[type[Any], str, str], type[Any]] = {}


def bridged(ours: type[E], module: str, name: str) -> type[E]:
    key = (ours, module, name)
    found = _cache.get(key)
    if found is None:
        found = ours
        try:
            theirs = getattr(importlib.import_module(module), name)
        except Exception:
            pass
        else:
            try:
                found = type(ours.__name__, (ours, theirs), {"__module__": ours.__module__})
            except TypeError:  # an incompatible layout: ours alone
                pass
        _cache[key] = found
    return found
