"""A document's recorded revisions as ``docs history`` and the inspector show them.

One page of ``documents.history`` (newest first), each revision with what
changed since the recorded revision before it: a unified diff of the two
as indented JSON with sorted keys (line-based, so a change deep inside a
large document shows with its context), computed here with ``difflib``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import orjson

from durastate.documents import RevisionPage

from ._format import iso_time

PRETTY = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


def pretty(data: Any) -> str:
    """``data`` as indented JSON with sorted keys (the form diffs compare)."""
    return orjson.dumps(data, option=PRETTY).decode()


@dataclass(frozen=True)
class Shown:
    """One recorded revision, ready to show."""

    revision: int
    written_at_ms: int
    size: int  # bytes of the compact JSON (what the store holds)
    data: dict[str, Any]
    since: int | None  # the recorded revision the diff is against (None: the oldest recorded)
    diff: list[str]  # unified diff lines against ``since`` (all "+" lines when there is none)

    @property
    def gap(self) -> bool:
        """Whether revisions between ``since`` and this one were not recorded."""
        return self.since is not None and self.since != self.revision - 1

    def as_json(self, with_diff: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "revision": self.revision,
            "written_at_ms": self.written_at_ms,
            "written_at": iso_time(self.written_at_ms),
            "size": self.size,
            "since": self.since,
            "data": self.data,
        }
        if with_diff:
            out["diff"] = self.diff
        return out


@dataclass(frozen=True)
class HistoryView:
    """A page of revisions; ``cursor`` is the ``before=`` of the next (older) page, or ``None``."""

    items: list[Shown]
    cursor: int | None


def diff_lines(older: str, newer: str, older_label: str, newer_label: str) -> list[str]:
    return list(difflib.unified_diff(older.splitlines(), newer.splitlines(), older_label, newer_label, lineterm=""))


def history_view(docs: Any, key: str, *, limit: int, before: int | None = None) -> HistoryView:
    """Up to ``limit`` recorded revisions of ``key`` below ``before``, each diffed against the one before it.

    Reads one revision more than it shows, so the oldest shown has its diff
    too. ``docs`` is a store's ``documents`` facet (or a sharded one).
    """
    page: RevisionPage = docs.history(key, limit=limit + 1, before=before)
    revisions = page.items
    shown: list[Shown] = []
    for i, revision in enumerate(revisions[:limit]):
        older = revisions[i + 1] if i + 1 < len(revisions) else None
        text = pretty(revision.data)
        if older is None:
            diff = diff_lines("", text, "(nothing recorded before)", f"revision {revision.revision}")
        else:
            diff = diff_lines(pretty(older.data), text, f"revision {older.revision}", f"revision {revision.revision}")
        shown.append(
            Shown(
                revision=revision.revision,
                written_at_ms=round(revision.written_at * 1000),
                size=len(orjson.dumps(revision.data)),
                data=revision.data,
                since=None if older is None else older.revision,
                diff=diff,
            )
        )
    more = len(revisions) > limit
    return HistoryView(shown, shown[-1].revision if more and shown else None)


def change_summary(item: Shown) -> str:
    """``+3 -1 lines`` (against ``since``), or ``first recorded``."""
    if item.since is None:
        return "first recorded"
    added = sum(1 for line in item.diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in item.diff if line.startswith("-") and not line.startswith("---"))
    text = f"+{added} -{removed} lines"
    return f"{text} since {item.since}" if item.gap else text
