"""The one reader of the inspector's request parameters: every route reads its query and path through ``Params``.

One rule for every page: a parameter that is malformed (not a number where a
number is wanted, a number out of range, a ``hex:`` name that is not hex, a
choice that is not offered), given twice, or not a parameter of that page at
all is a ``BadParameter``, which the app answers with a 400 page naming the
parameter; nothing is silently ignored or clamped. (An item that does not
exist is the routes' business: a 404 page.)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from starlette.requests import Request

from .._format import decode_bytes

INT64_MAX = 2**63 - 1
# Parameters no page reads but a browser may still carry: the guard's ``?token=`` when the inspector runs without
# one (a bookmark from an earlier run).
IGNORED = frozenset({"token"})


class BadParameter(Exception):
    """A request parameter the page cannot use (answered 400, see the module docstring).

    The message may hold request text as given: the page it lands on escapes it (``render.scrub``).
    """

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name


class Params:
    """``request``'s path parameters and the query parameters ``known`` to its page, read by kind.

    Unknown and repeated query parameters are refused when it is made;
    every reader returns ``None`` (or its ``default``) for an absent
    parameter and raises ``BadParameter`` for a malformed one.
    """

    def __init__(self, request: Request, *known: str) -> None:
        self._path: Mapping[str, Any] = request.path_params
        query = request.query_params
        for name in query:
            if name not in known and name not in IGNORED:
                raise BadParameter(name[:40], "not a parameter of this page")
            if len(query.getlist(name)) > 1:
                raise BadParameter(name, "given more than once")
        self._query = query
        self._known = known

    def _raw(self, name: str) -> str | None:
        if name in self._path:
            return str(self._path[name])
        assert name in self._known, f"{name} is not declared for this page"  # a route bug, not a request's
        return self._query.get(name)

    def has(self, name: str) -> bool:
        return self._raw(name) is not None

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._raw(name)
        return default if value is None else value

    def required_text(self, name: str) -> str:
        value = self._raw(name)
        if value is None:
            raise BadParameter(name, "missing")
        return value

    def name(self, name: str) -> bytes | None:
        """A byte name (kv scope, namespace or key, queue name) in the CLI's form: UTF-8 text or ``hex:`` digits."""
        value = self._raw(name)
        if value is None:
            return None
        try:
            return decode_bytes(value)
        except ValueError as exc:  # BytesSyntaxError
            raise BadParameter(name, str(exc)) from None

    def required_name(self, name: str) -> bytes:
        found = self.name(name)
        if found is None:
            raise BadParameter(name, "missing")
        return found

    def integer(self, name: str, *, low: int, high: int = INT64_MAX) -> int | None:
        """A whole number from ``low`` to ``high`` (decimal digits, an optional sign), or ``None`` when absent."""
        value = self._raw(name)
        if value is None:
            return None
        digits = value.removeprefix("-")
        # int() also takes "1_000", " 7" and non-ASCII digits: a parameter is plain ASCII digits.
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 25:
            raise BadParameter(name, f"must be a whole number from {low} to {high}, got {value[:40]!r}")
        number = int(value)
        if not low <= number <= high:
            raise BadParameter(name, f"must be a whole number from {low} to {high}, got {number}")
        return number

    def required_integer(self, name: str, *, low: int, high: int = INT64_MAX) -> int:
        found = self.integer(name, low=low, high=high)
        if found is None:
            raise BadParameter(name, "missing")
        return found

    def choice(self, name: str, choices: Collection[str], default: str) -> str:
        value = self._raw(name)
        if value is None:
            return default
        if value not in choices:
            raise BadParameter(name, f"must be one of {', '.join(choices)}, got {value[:40]!r}")
        return value
