"""Query plans in engine-neutral terms (``Engine.explain``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanStep:
    """One table read of a query plan, in engine-neutral terms.

    ``index`` is the index read (None: the table itself, row by row);
    ``condition`` what the index is *searched* by (empty: the index, or the
    table, is walked whole); ``filter`` a condition applied to the rows
    read, after reading them (a large filter over a small condition means
    cost that grows with the data); ``detail`` the engine's own words.
    """

    table: str
    index: str | None
    condition: str
    filter: str
    detail: str


@dataclass(frozen=True)
class Plan:
    """The plan an engine uses for a statement (``Engine.explain``)."""

    steps: tuple[PlanStep, ...]
    sorts: bool  # a separate sort step (the order does not come from an index)
    text: str  # the whole plan in the engine's words, for messages

    def reads(self, *tables: str) -> list[PlanStep]:
        """The steps that read any of ``tables`` (table names or aliases)."""
        return [step for step in self.steps if step.table in tables]
