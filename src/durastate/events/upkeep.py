"""Inspection, dead letters and retention of the events facet (``Upkeep``, a base of ``Events``).

What operators and maintenance run, apart from the hot path in ``facet``:
listing sessions and snapshots, paging through events, dead letters and
re-driving them, deleting sessions, pruning events every snapshot covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .._retention import BATCH
from .._validate import INT64_MAX, as_int64, as_list, bounded_int, fail, positive, prefix_successor, shown, text
from ..errors import NotFound
from .models import EventPage, LaneBacklog, SessionPage, SessionSummary, SnapshotInfo, StoredEvent
from .rows import SessionColumn as S
from .rows import event_from_row
from .statements import (
    DEAD_ALL,
    DEAD_IN_SESSION,
    DELETE_SESSION_BATCH,
    DELETE_SESSION_EVENTS,
    DELETE_SESSION_ROW,
    DELETE_SESSION_SNAPSHOTS,
    DISCARD_DEAD,
    LANE_DEAD,
    LANE_READY,
    LIST_SESSIONS,
    LIST_SNAPSHOTS,
    PRUNE,
    RAISE_FLOOR,
    REDRIVE_ONE,
    REDRIVE_SESSION,
    SETTLED_SESSIONS,
    SNAPSHOT_FLOORS,
    STILL_SETTLED,
)

if TYPE_CHECKING:
    from ..engines.base import SQL, Engine, Statement

PRUNE_BATCH = 256


class Upkeep:
    """Inspection, dead letters and retention; ``Events`` runs ``_init_upkeep`` when it starts."""

    _engine: Engine
    # Compiled by Events, used here too.
    _last_index: SQL
    _read_range: SQL
    _lock_session: SQL
    _promote_lane: SQL

    def _init_upkeep(self, sql: Callable[[Statement], SQL]) -> None:
        self._list_snapshots = sql(LIST_SNAPSHOTS)
        self._list_sessions = sql(LIST_SESSIONS)
        self._dead_in_session = sql(DEAD_IN_SESSION)
        self._dead_all = sql(DEAD_ALL)
        self._redrive_one = sql(REDRIVE_ONE)
        self._redrive_session = sql(REDRIVE_SESSION)
        self._discard_dead = sql(DISCARD_DEAD)
        self._snapshot_floors = sql(SNAPSHOT_FLOORS)
        self._lane_ready = sql(LANE_READY)
        self._lane_dead = sql(LANE_DEAD)
        self._prune = sql(PRUNE)
        self._raise_floor = sql(RAISE_FLOOR)
        self._delete_session_batch = sql(DELETE_SESSION_BATCH)
        self._delete_session_final = (
            sql(DELETE_SESSION_EVENTS),
            sql(DELETE_SESSION_SNAPSHOTS),
            sql(DELETE_SESSION_ROW),
        )
        self._settled_sessions = sql(SETTLED_SESSIONS)
        self._still_settled = sql(STILL_SETTLED)

    # -- inspection ------------------------------------------------------------

    def list_sessions(self, prefix: str = "", limit: int = 100, cursor: str | None = None) -> SessionPage:
        """Sessions whose id starts with ``prefix``, in id order, with counts."""
        prefix = text("prefix", prefix)
        limit = min(positive("limit", limit), INT64_MAX - 1)  # limit + 1 is bound below
        if cursor is not None:
            cursor = text("cursor", cursor)
        upper = prefix_successor(prefix)
        rows = self._engine.all(
            self._list_sessions,
            (prefix, 0 if upper is None else 1, upper or "", 0 if cursor is None else 1, cursor or "", limit + 1),
        )
        sessions = []
        for r in rows[:limit]:
            times = [int(t) for t in r[S.activity_first : S.activity_last + 1] if t is not None]
            sessions.append(
                SessionSummary(
                    session_id=r[S.session_id],
                    event_count=int(r[S.event_count]),
                    pending_count=int(r[S.pending_count]),
                    failed_count=int(r[S.failed_count]),
                    attempt_count=int(r[S.attempt_count]),
                    failure_count=int(r[S.failure_count]),
                    first_event_at=int(r[S.first_event_at]),
                    updated_at=max(times),
                )
            )
        more = len(rows) > limit
        return SessionPage(tuple(sessions), sessions[-1].session_id if more else None)

    def read_events(
        self, session_id: str, after_index: int = 0, limit: int = 100, through_index: int | None = None
    ) -> EventPage:
        """A page of events after ``after_index``, bounded by a frontier.

        ``through_index`` is the given bound capped at the session's last
        index (then, by default): pass it back with the next page so the
        walk covers a fixed range while appends go on.
        """
        session = text("session_id", session_id)
        after = as_int64("after_index", after_index)
        limit = as_int64("limit", limit)
        if limit < 0:
            fail(f"limit must be >= 0, got {limit}")
        engine = self._engine
        row = engine.one(self._last_index, (session,))
        frontier = 0 if row is None else int(row[0])
        through = frontier if through_index is None else min(as_int64("through_index", through_index), frontier)
        rows = engine.all(self._read_range, (session, after, through, limit))
        return EventPage(tuple(event_from_row(r) for r in rows), through)

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        session = text("session_id", session_id)
        return [
            SnapshotInfo(reducer, int(up_to_index), int(updated_at))
            for reducer, up_to_index, updated_at in self._engine.all(self._list_snapshots, (session,))
        ]

    def lane_backlog(self, *, limit: int = 10_000) -> tuple[list[LaneBacklog], bool]:
        """Per lane, across every session: ready events, expired claims, the oldest ready, dead letters.

        Counts over the ``limit`` longest-waiting ready events and ``limit``
        dead letters at most (1..10000000), so the answer costs the same
        whatever the backlog (the flag is True when either bound was reached:
        the counts are then lower bounds, while ``oldest_ready_at`` is exact).
        Lanes in order, ``None`` (no lane) first.
        """
        limit = bounded_int("limit", limit, 1, 10_000_000)
        engine = self._engine
        lanes: dict[str | None, list[int | None]] = {}
        ready_rows = engine.all(self._lane_ready, (engine.now_ms(), limit))
        for lane, ready, oldest, expired in ready_rows:
            lanes[lane] = [int(ready), int(expired), int(oldest), 0]
        dead_rows = engine.all(self._lane_dead, (limit,))
        for lane, dead in dead_rows:
            lanes.setdefault(lane, [0, 0, None, 0])[3] = int(dead)
        capped = sum(int(r[1]) for r in ready_rows) >= limit or sum(int(r[1]) for r in dead_rows) >= limit
        backlog = [
            LaneBacklog(lane, int(ready or 0), int(expired or 0), oldest, int(dead or 0))
            for lane, (ready, expired, oldest, dead) in sorted(
                lanes.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")
            )
        ]
        return backlog, capped

    # -- dead letters, retention -------------------------------------------------

    def dead_letters(
        self, session_id: str | None = None, *, after: tuple[str, int] | int | None = None, limit: int = 100
    ) -> list[StoredEvent]:
        """Dead-lettered events of one session (``after`` = an index) or of all
        sessions (``after`` = ``(session_id, index)``), in order."""
        limit = as_int64("limit", limit)
        if limit < 0:
            fail(f"limit must be >= 0, got {limit}")
        engine = self._engine
        if session_id is not None:
            session = text("session_id", session_id)
            start = 0 if after is None else as_int64("after", after)
            rows = engine.all(self._dead_in_session, (session, start, limit))
        else:
            if after is None:
                rows = engine.all(self._dead_all, ("", "", -1, limit))
            else:
                if not isinstance(after, tuple) or len(after) != 2:
                    fail("after must be (session_id, index) when listing every session")
                s, i = text("after[0]", after[0]), as_int64("after[1]", after[1])
                rows = engine.all(self._dead_all, (s, s, i, limit))
        return [event_from_row(r) for r in rows]

    def redrive(self, session_id: str, indexes: Iterable[int] | None = None) -> int:
        """Make dead-lettered events claimable again (fresh failure count); return how many.

        ``indexes=None``: every dead letter of the session. With indexes,
        all or nothing: when an index is not a dead letter of the session
        (no such event, not dead, redriven or discarded already),
        ``NotFound`` names every such index and none of them is redriven;
        an index given twice counts once.
        """
        session, wanted = _dead_letter_selection(session_id, indexes)
        engine = self._engine
        now = engine.now_ms()
        if wanted is None:  # one statement: its own commit (one round trip on PostgreSQL, not two)
            return engine.execute(self._redrive_session, (now, session))
        with engine.transaction():
            missing = [i for i in wanted if not engine.execute(self._redrive_one, (now, session, i))]
            if missing:  # raised inside the transaction: the ones redriven go back
                raise _not_dead_letters(session, missing, "redriven")
        return len(wanted)

    def discard(self, session_id: str, indexes: Iterable[int] | None = None) -> int:
        """Settle dead-lettered events without processing them (an operator's purge); return how many.

        ``indexes=None``: every dead letter of the session. With indexes,
        all or nothing as ``redrive``: an index that is not a dead letter
        of the session makes it ``NotFound`` naming every such index, and
        none is discarded. A discarded event stays in the session's
        log (indexes never move): it reads as processed by no attempt
        (``processed_by_attempt`` None) with no returned events, keeping its
        failure count and last error, and the next event of its lane becomes
        claimable, as after a completion. An attempt of it that reports later
        is ``superseded``.
        """
        session, wanted = _dead_letter_selection(session_id, indexes)
        engine = self._engine
        now = engine.now_ms()
        with engine.transaction():
            every = wanted is None
            if wanted is None:
                wanted = [int(e.index) for e in self._all_dead_letters(session)]
            lanes: set[str] = set()
            missing = []
            for index in wanted:
                rows = engine.all(self._discard_dead, (now, session, index))
                if not rows:
                    missing.append(index)
                for row in rows:
                    if row[0] is not None:
                        lanes.add(str(row[0]))
            if missing and not every:  # raised inside the transaction: the ones discarded go back
                raise _not_dead_letters(session, missing, "discarded")
            for lane in sorted(lanes):
                engine.execute(self._promote_lane, (now, session, session, lane))
        return len(wanted) - len(missing)

    def _all_dead_letters(self, session: str) -> list[StoredEvent]:
        found: list[StoredEvent] = []
        while True:
            page = self.dead_letters(session, after=found[-1].index if found else None, limit=1000)
            found += page
            if len(page) < 1000:
                return found

    def delete_session(self, session_id: str) -> int:
        """Delete the session: its events (dead letters included) and snapshots; return how many events went.

        Outside a transaction, events go in batches of
        ``durastate._retention.BATCH``, oldest first, each its own short
        commit (a reader meanwhile sees a shrinking suffix); the last step,
        under the session lock, removes what is left (appends that came in
        meanwhile too) with the snapshots and the session itself. An append
        after that starts a new session at index 1; one retrying the id of a
        deleted event is taken as new. Unknown sessions: 0.
        """
        return self._delete_session(text("session_id", session_id), settled_before=None)

    def prune_sessions(self, settled_for_ms: int, *, limit: int | None = None) -> int:
        """Delete sessions settled for at least ``settled_for_ms``; return how many sessions went.

        Settled: no event waits, is claimed or is dead-lettered, and nothing
        was processed (or, for a session without events, created) in the
        last ``settled_for_ms`` ms of the store's clock. Each goes as in
        ``delete_session``, and the last step checks again under the session
        lock: a session that an append revived meanwhile keeps its new
        events (its settled history is gone). At most ``limit`` sessions.
        """
        settled_for = as_int64("settled_for_ms", settled_for_ms)
        if settled_for < 0:
            fail(f"settled_for_ms must be >= 0, got {settled_for}")
        limit = None if limit is None else positive("limit", limit)
        engine = self._engine
        cutoff = engine.now_ms() - settled_for
        after = ""
        done = 0
        while limit is None or done < limit:
            want = BATCH if limit is None else min(BATCH, limit - done)
            sessions = [str(r[0]) for r in engine.all(self._settled_sessions, (after, cutoff, want))]
            for session in sessions:
                self._delete_session(session, settled_before=cutoff)
            done += len(sessions)
            if len(sessions) < want:
                break
            after = sessions[-1]
        return done

    def _delete_session(self, session: str, *, settled_before: int | None) -> int:
        engine = self._engine
        removed = 0
        if not engine.in_transaction():  # inside a caller's transaction: all in it, at once
            row = engine.one(self._last_index, (session,))
            through = 0 if row is None else int(row[0])
            # An append meanwhile continues after `through`, not at 1 (see RAISE_FLOOR).
            engine.execute(self._raise_floor, (through, session, through))
            while True:
                n = engine.execute(self._delete_session_batch, (session, session, through, BATCH))
                removed += n
                if n < BATCH:
                    break
        with engine.transaction():
            engine.one(self._lock_session, (session,))
            if settled_before is not None and engine.one(self._still_settled, (session, settled_before)) is None:
                return removed
            events, snapshots, session_row = self._delete_session_final
            removed += engine.execute(events, (session,))
            engine.execute(snapshots, (session,))
            engine.execute(session_row, (session,))
        return removed

    def prune(
        self,
        *,
        older_than_ms: int | None = None,
        keep_last: int | None = None,
        batch_size: int = PRUNE_BATCH,
    ) -> int:
        """Delete processed events that every snapshot of their session covers.

        An event goes when it is processed, its index is at most the lowest
        ``up_to_index`` of its session's snapshots, it was processed at least
        ``older_than_ms`` ago (if given) and at least ``keep_last`` later
        events exist (if given). Sessions without a snapshot keep all their
        events. Deletes ``batch_size`` rows per statement (each its own short
        commit) and returns the total.

        A pruned event is gone for ``read``/``stream``/``read_events``; an
        append retrying its id would be taken as new, and a
        ``complete_attempt`` retry whose children were pruned is refused.
        Prune only what no client can still retry.
        """
        batch = positive("batch_size", batch_size)
        engine = self._engine
        now = engine.now_ms()
        cutoff = now if older_than_ms is None else now - as_int64("older_than_ms", older_than_ms)
        keep = 0 if keep_last is None else as_int64("keep_last", keep_last)
        if keep < 0:
            fail(f"keep_last must be >= 0, got {keep}")
        total = 0
        for session, floor, last in engine.all(self._snapshot_floors):
            bound = min(int(floor), int(last) - keep)
            if bound >= 1:  # the session's newest events may go: their indexes must not come back
                engine.execute(self._raise_floor, (bound, session, bound))
            while bound >= 1:
                deleted = engine.execute(self._prune, (session, session, cutoff, bound, batch))
                total += deleted
                if deleted < batch:
                    break
        return total


def _dead_letter_selection(session_id: str, indexes: Iterable[int] | None) -> tuple[str, list[int] | None]:
    """``redrive``'s and ``discard``'s arguments checked: the session id and the event indexes (``None``: all),
    each index once, in the order first given."""
    session = text("session_id", session_id)
    if indexes is None:
        return session, None
    return session, list(dict.fromkeys(as_int64("indexes[]", i) for i in as_list("indexes", indexes)))


def _not_dead_letters(session: str, missing: list[int], verb: str) -> NotFound:
    """The refusal of ``redrive``/``discard`` by indexes: every index in ``missing`` named, nothing ``verb``."""
    return NotFound(
        f"no dead letter at index {', '.join(map(str, missing))} in session {shown(session)} "
        f"(dead_letters() lists them); nothing was {verb}"
    )
