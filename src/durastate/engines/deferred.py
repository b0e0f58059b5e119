"""Answers that arrive later, and requirements that fail a transaction: what lets a transaction go in one flight.

An engine that pipelines a transaction (PostgreSQL: ``capabilities.deferred_answers``)
sends statements whose answers nobody waits for with the next round trip.
Two statements a writer needs often decide nothing until the end:

* ``Engine.next_value_later(name)`` returns a ``Later``: the sequence's
  next value, which arrives with the transaction's next round trip (at the
  latest its commit). A statement that needs the value reads it in SQL
  instead of binding it.
* ``Engine.require(sql, params, message)`` fails the transaction unless
  ``sql`` (a READ answering one row, one boolean column) answers true. Sent
  unawaited, its failure is raised by the next statement that waits, by the
  release of a savepoint around it, or by the commit (which then rolls
  back), as ``RequirementFailed``.

Where every answer comes at once (SQLite) both are read at once.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Conflict, DurastateError

__all__ = ["Later", "RequirementFailed"]


class RequirementFailed(Conflict):
    """An ``Engine.require`` did not hold: the transaction is rolled back (the block the failure leaves).

    A ``Conflict``: the stored state is not what the writer assumed. A
    caller that sent a requirement to go in one flight takes its slower,
    precise path on this error.
    """


class Later:
    """A value a statement answers with a later round trip (``Engine.next_value_later``).

    ``value`` is the answer once it arrived; read before, it makes the
    engine wait for it then (one round trip), inside the transaction that
    sent it. A value whose statement failed, or whose transaction rolled
    back before the answer came, raises ``DurastateError``.
    """

    __slots__ = ("_error", "_value", "_wait")

    def __init__(self, value: int | None = None, wait: Callable[[], None] | None = None) -> None:
        self._value = value
        self._wait = wait
        self._error: str | None = None

    def set(self, value: int) -> None:
        """The answer arrived (engines only)."""
        self._value = value
        self._wait = None

    def fail(self, error: str) -> None:
        """The answer will never come (engines only)."""
        self._error = error
        self._wait = None

    @property
    def pending(self) -> bool:
        """Whether the answer has not arrived yet (and has not failed)."""
        return self._value is None and self._error is None

    @property
    def value(self) -> int:
        if self._value is None and self._wait is not None:
            self._wait()
        if self._value is None:
            raise DurastateError(self._error or "the value never arrived: the statement's transaction did not commit")
        return self._value
