"""What the overview flags: dead letters, expired leases, old ready items, large backlogs.

One bounded read per queue (``queues.backlog``: no payloads, at most
``BACKLOG_CAP`` ready items counted) for the first ``MAX_QUEUES`` queues, and
one for every event lane (``events.lane_backlog``), so a refresh every few
seconds costs the same however deep a backlog grows. The thresholds are the
``Thresholds`` the inspector was started with (``durastate ui
--stale-after`` / ``--backlog-over``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

import durastate

from .._format import show_name
from .render import age

MAX_QUEUES = 200  # queues looked at on the overview (the queues page lists them all)
BACKLOG_CAP = 10_000  # ready items counted per queue or lane; beyond: "10,000+"


@dataclass(frozen=True)
class Thresholds:
    stale_after: float = 60.0  # seconds the oldest ready item may wait before it is flagged
    backlog_over: int = 1000  # ready items above which a backlog is flagged


@dataclass(frozen=True)
class Line:
    """One queue or event lane on the overview, and what about it is flagged."""

    kind: str  # "queue" or "lane"
    name: str  # as shown (a queue name through show_name; a lane, or "(no lane)")
    link: str  # the page to act from
    ready: int
    capped: bool  # ready counted up to BACKLOG_CAP
    oldest_age: float | None  # seconds the oldest ready item has waited
    expired: int  # leases / claims that ran out unanswered
    dead: int
    flags: list[str] = field(default_factory=list)  # "dead", "stuck", "stale", "backlog"


@dataclass(frozen=True)
class Alert:
    flag: str
    line: Line
    text: str


FLAG_LABELS = {"dead": "DEAD LETTERS", "stuck": "STUCK", "stale": "OLD", "backlog": "BACKLOG"}


def _flag(line: Line, limits: Thresholds) -> list[Alert]:
    noun = "lease" if line.kind == "queue" else "claim"
    found = []
    if line.dead:
        found.append(Alert("dead", line, f"{line.dead:,} dead letter{'s' if line.dead != 1 else ''}"))
    if line.expired:
        found.append(
            Alert("stuck", line, f"{line.expired:,} {noun}{'s' if line.expired != 1 else ''} past the deadline")
        )
    if line.oldest_age is not None and line.oldest_age > limits.stale_after:
        found.append(Alert("stale", line, f"oldest ready item waiting {age(line.oldest_age)}"))
    if line.ready > limits.backlog_over:
        found.append(Alert("backlog", line, f"{line.ready:,}{'+' if line.capped else ''} items ready"))
    line.flags.extend(a.flag for a in found)
    return found


def collect(store: durastate.Store, limits: Thresholds) -> tuple[list[Line], list[Alert], bool]:
    """Every queue (the first ``MAX_QUEUES``) and event lane, the alerts, and whether queues were left out."""
    now = store.engine.now_ms() / 1000.0
    lines: list[Line] = []
    names = store.queues.names(limit=MAX_QUEUES + 1)
    for name in names[:MAX_QUEUES]:
        b = store.queues.backlog(name, limit=BACKLOG_CAP)
        shown = show_name(name)
        lines.append(
            Line(
                "queue",
                shown,
                "/queues/" + quote(shown, safe=""),
                b.ready,
                b.capped,
                None if b.oldest_ready_at is None else now - b.oldest_ready_at,
                b.expired_leases,
                b.dead,
            )
        )
    lanes, capped = store.events.lane_backlog(limit=BACKLOG_CAP)
    for lane in lanes:
        lines.append(
            Line(
                "lane",
                "(no lane)" if lane.lane is None else lane.lane,
                "/events",
                lane.ready,
                capped,
                None if lane.oldest_ready_at is None else now - lane.oldest_ready_at / 1000.0,
                lane.expired_claims,
                lane.dead,
            )
        )
    alerts = [alert for line in lines for alert in _flag(line, limits)]
    return lines, alerts, len(names) > MAX_QUEUES
