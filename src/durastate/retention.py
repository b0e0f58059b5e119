"""What a store keeps, and ``Store.maintain()``, which enforces it.

Nothing in a store grows without bound unless you let it: every table that
accumulates has a retention method on its facet (each deleting in bounded
batches, see ``durastate._retention``), and a ``Retention`` policy given to
``durastate.open(..., retention=...)`` names which of them ``maintain()``
runs and with what limits. ``maintain()`` is explicit: call it from a cron
job, a worker's idle loop or ``durastate maintain``; nothing runs in the
background. Every rule is off (``None``) unless set, so the default policy
only does what needs no decision: sweeping expired kv values and presence
fields, which no read can see anyway.

==========================  =====================================================
what grows                  what bounds it
==========================  =====================================================
kv values                   ``delete``/``drain``/``clear``; ``put(ttl=)``, swept
                            in passing and by ``kv.prune_expired`` (always run)
kv logs                     ``kv.trim_log(keep_last=, older_than=)`` per log;
                            ``kv.trim_logs(older_than)`` ← ``kv_log_max_age``
kv counters                 ``delete_counter``/``clear`` (one row per counter)
queue items                 ``ack``; redelivered, then dead after max attempts
dead letters                ``queues.expire_dead(older_than)`` ←
                            ``dead_letter_max_age``; ``delete_dead``
document backups (.bak)     ``max_backups`` caps each key at ``clear`` time;
                            ``documents.prune_backups(keep)`` ← same setting
document revision history   recorded only with ``document_history=N``: each
                            write keeps its document's last N; ``delete`` and
                            ``clear`` end it; ``documents.prune_history(keep,
                            older_than=)`` ← ``document_history`` and
                            ``document_history_max_age``
processed events            ``events.prune(older_than_ms=)`` (events covered by
                            a snapshot) ← ``processed_event_max_age``
event sessions              ``events.delete_session``;
                            ``events.prune_sessions(settled_for_ms)`` ←
                            ``settled_session_max_age``
presence fields             expire by ``ttl_ms``; ``presence.sweep_expired``
                            (always run); ``presence.remove`` for a leaver
record revisions            current-only documents keep one; full-history
(records)                   ones: ``records.prune_document_revisions(
                            keep_last=, older_than=)`` (never the newest) ←
                            ``max_record_revisions``,
                            ``record_revision_max_age``
other records               pi-durable's contract keeps them (conversations,
                            entries, tasks, submissions, document records)
==========================  =====================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ._validate import MAX_DURATION_MS, fail

if TYPE_CHECKING:
    from .store import Store

__all__ = ["MaintenanceReport", "Retention"]


def _seconds(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        fail(f"Retention.{name} must be None or a finite number of seconds >= 0, got {value!r}")
    if value > MAX_DURATION_MS / 1000:
        fail(f"Retention.{name} is too large ({value!r} seconds; at most {MAX_DURATION_MS // 1000})")


@dataclass(frozen=True)
class Retention:
    """A store's retention policy (see the module docstring for each rule).

    Ages are seconds of the store's clock; ``None`` turns a rule off.
    ``max_backups``: documents ``clear`` keeps at most this many backups per
    key (also applied to existing backups by ``maintain``).
    ``max_record_revisions`` / ``record_revision_max_age``: records'
    full-history documents keep at least this many revisions / the
    revisions younger than this; with both, a revision goes only when both
    rules let it (``records.prune_document_revisions``). Both ``None``
    (the default): every revision is kept, as pi-durable expects.
    ``document_history``: record the documents' revisions and keep each
    document's last N, the current one included (``None``, the default:
    record none; see ``durastate.documents``, "Revision history");
    ``document_history_max_age``: ``maintain`` also drops recorded revisions
    older than this, except each document's current one (needs
    ``document_history``).
    """

    kv_log_max_age: float | None = None
    dead_letter_max_age: float | None = None
    max_backups: int | None = None
    processed_event_max_age: float | None = None
    settled_session_max_age: float | None = None
    max_record_revisions: int | None = None
    record_revision_max_age: float | None = None
    document_history: int | None = None
    document_history_max_age: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "kv_log_max_age",
            "dead_letter_max_age",
            "processed_event_max_age",
            "settled_session_max_age",
            "record_revision_max_age",
            "document_history_max_age",
        ):
            _seconds(name, getattr(self, name))
        for name in ("max_backups", "max_record_revisions", "document_history"):
            count = getattr(self, name)
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
                fail(f"Retention.{name} must be None or an int >= 1, got {count!r}")
        if self.document_history_max_age is not None and self.document_history is None:
            fail("Retention.document_history_max_age needs document_history (how many revisions to keep)")


@dataclass
class MaintenanceReport:
    """Rows each rule removed in one ``maintain()`` run, whether it finished, and the bytes given back."""

    expired_values: int = 0
    expired_presence: int = 0
    log_entries: int = 0
    dead_letters: int = 0
    document_backups: int = 0
    document_revisions: int = 0
    processed_events: int = 0
    settled_sessions: int = 0
    record_revisions: int = 0
    engine_bookkeeping: int = 0
    finished: bool = True
    # Bytes the store's files shrank by once the rules were done (``Store.maintain``), not rows.
    bytes_returned: int = 0

    def total(self) -> int:
        """Rows removed by every rule together."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name not in ("finished", "bytes_returned"))


Progress = Callable[[str, int], None]


def maintain(
    store: Store, policy: Retention, *, max_rows: int | None = None, progress: Progress | None = None
) -> MaintenanceReport:
    """Run every rule of ``policy`` on ``store``, deleting at most ``max_rows`` rows in all.

    Each rule deletes in bounded batches (short commits); with ``max_rows``
    no rule starts once that many rows went, and the report says
    ``finished=False``: run it again to go on (every rule resumes from the
    data, not from remembered state). ``events.prune`` has no row limit of
    its own: once started it runs to the end (one statement per batch).
    ``progress(rule, rows)``, if given, is called after each rule with the
    report field it counts into and the rows it removed.
    """
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1):
        fail(f"max_rows must be None or an int >= 1, got {max_rows!r}")
    if progress is not None and not callable(progress):
        fail(f"progress must be None or callable (rule, rows), got {type(progress).__name__}")
    report = MaintenanceReport()
    left = max_rows

    def run(attribute: str, rule: Any) -> bool:
        """Run ``rule(limit)``; False once the budget is spent."""
        nonlocal left
        if left is not None and left <= 0:
            report.finished = False
            return False
        removed = int(rule(left))
        setattr(report, attribute, getattr(report, attribute) + removed)
        if progress is not None:
            progress(attribute, removed)
        if left is not None:
            left -= removed
            if left <= 0:
                report.finished = False
                return False
        return True

    # (report field, the facet whose rows it deletes (None: the engine's), rule)
    steps: list[tuple[str, str | None, Any]] = [
        ("expired_values", "kv", lambda limit: store.kv.prune_expired(limit)),
        ("expired_presence", "presence", lambda limit: store.presence.sweep_expired(limit=limit)),
    ]
    if policy.kv_log_max_age is not None:
        age = policy.kv_log_max_age
        steps.append(("log_entries", "kv", lambda limit: store.kv.trim_logs(age, limit=limit)))
    if policy.dead_letter_max_age is not None:
        dead_age = policy.dead_letter_max_age
        steps.append(("dead_letters", "queues", lambda limit: store.queues.expire_dead(dead_age, limit=limit)))
    if policy.max_backups is not None:
        keep = policy.max_backups
        steps.append(("document_backups", "documents", lambda limit: store.documents.prune_backups(keep, limit=limit)))
    if policy.document_history is not None:
        revisions, revision_age = policy.document_history, policy.document_history_max_age
        steps.append(
            (
                "document_revisions",
                "documents",
                lambda limit: store.documents.prune_history(revisions, older_than=revision_age, limit=limit),
            )
        )
    if policy.processed_event_max_age is not None:
        event_ms = int(policy.processed_event_max_age * 1000)
        steps.append(
            (
                "processed_events",
                "events",
                lambda limit: store.events.prune(older_than_ms=event_ms, batch_size=min(limit or 256, 256)),
            )
        )
    if policy.settled_session_max_age is not None:
        session_ms = int(policy.settled_session_max_age * 1000)
        steps.append(("settled_sessions", "events", lambda limit: store.events.prune_sessions(session_ms, limit=limit)))
    if policy.max_record_revisions is not None or policy.record_revision_max_age is not None:
        keep_records, record_age = policy.max_record_revisions, policy.record_revision_max_age
        steps.append(
            (
                "record_revisions",
                "records",
                lambda limit: store.records.prune_document_revisions(
                    keep_last=keep_records, older_than=record_age, limit=limit
                ),
            )
        )
    steps.append(("engine_bookkeeping", None, lambda limit: store.engine.prune_bookkeeping(limit=limit)))
    opened = store.facets
    for attribute, facet, rule in steps:
        if facet is not None and facet not in opened:
            continue  # a store opened without that facet has none of its tables
        if not run(attribute, rule):
            break
    return report
