"""experimental-a2's own SQLite store, as the seed does it, for benchmarks (reference only).

Re-created from the seed's ``store-sqlite.ts``: the same table and partial
indexes, the same statements in the same order and the same JSON encoding,
called the way the seed calls ``node:sqlite``: synchronously, inline inside
``async`` methods, ``BEGIN IMMEDIATE``/``COMMIT`` around every multi-step
operation, WAL and ``synchronous = normal``. Rows are turned into the same
shapes durastate's adapter returns (frozen dataclasses with datetimes), so
both sides do comparable Python work per event.

Only what the benchmark drives is here: ``append`` (fresh events, no ids,
no causes), ``claim_available``, ``complete_attempt`` (first completion, no
children) and ``read_state``.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

SCHEMA = """
create table if not exists a2_events (
  session_id text not null, idx integer not null, event_type text not null, payload text not null,
  event_id text not null, created_at integer not null, cause text, lane text,
  lane_ready integer not null default 0, processed_at integer, processed_by_attempt integer,
  returned_event_ids text, first_claimed_at integer, last_claimed_at integer,
  attempt_count integer not null default 0, failure_count integer not null default 0,
  last_failed_at integer, last_failed_attempt integer, last_error text, failed_at integer,
  claim_holder text, claim_expires_at integer, primary key (session_id, idx)
) strict;
create unique index if not exists a2_events_event_id on a2_events (event_id);
create index if not exists a2_events_unprocessed on a2_events (session_id, idx) where processed_at is null;
create index if not exists a2_events_lane_pending on a2_events (session_id, lane, idx) where processed_at is null;
create index if not exists a2_events_dispatch_ready on a2_events (session_id, idx)
  where lane_ready = 1 and processed_at is null and failed_at is null;
create index if not exists a2_events_claim_expiry on a2_events (session_id, claim_expires_at)
  where lane_ready = 1 and processed_at is null and failed_at is null;
create table if not exists a2_snapshots (
  session_id text not null, reducer_name text not null, up_to_index integer not null, state text not null,
  updated_at integer not null, primary key (session_id, reducer_name)
) strict;
"""

INSERT_EVENT = """insert into a2_events
       (session_id, idx, event_type, payload, event_id, created_at, cause, lane, lane_ready, processed_at)
     select ?, ?, ?, ?, ?, ?, ?, ?,
            case
              when ? is null then 1
              when not exists (
                select 1 from a2_events where session_id = ? and lane = ? and processed_at is null
              ) then 1
              else 0
            end,
            ?"""
APPEND_STATUS = """select coalesce((select max(idx) from a2_events where session_id = ?), 0) as max,
            exists(select 1 from a2_events where session_id = ? and processed_at is null) as has_pending"""
ELIGIBLE = """select event.idx from a2_events event
                where event.session_id = ? and event.processed_at is null and event.failed_at is null
                  and event.lane_ready = 1
                  and (event.claim_expires_at is null or event.claim_expires_at <= ?)
                order by event.idx"""
CLAIM = """update a2_events set attempt_count = attempt_count + 1,
                 first_claimed_at = coalesce(first_claimed_at, ?), last_claimed_at = ?,
                 claim_holder = ?, claim_expires_at = ?
               where session_id = ? and idx = ? returning *"""
RETRY_AT = """select min(claim_expires_at) as retry_at from a2_events
                where session_id = ? and processed_at is null and failed_at is null and lane_ready = 1
                  and claim_expires_at > ?"""
PARENT = "select * from a2_events where session_id = ? and idx = ?"
COMPLETE = """update a2_events set processed_at = ?, processed_by_attempt = ?, returned_event_ids = ?,
               lane_ready = 0, claim_holder = null, claim_expires_at = null
             where session_id = ? and idx = ?"""
PROMOTE_LANE_HEAD = """update a2_events set lane_ready = 1 where session_id = ? and idx = (
          select idx from a2_events where session_id = ? and lane = ? and processed_at is null order by idx limit 1)"""
_EVENT_COLUMNS = (
    "session_id, idx, event_type, payload, event_id, created_at, cause, lane, lane_ready, processed_at,"
    " processed_by_attempt, returned_event_ids, first_claimed_at, last_claimed_at, attempt_count,"
    " failure_count, last_failed_at, last_failed_attempt, last_error, failed_at, claim_holder, claim_expires_at"
)
_NULLS = ", ".join("null as " + c.strip() for c in _EVENT_COLUMNS.split(","))
READ_STATE = f"""with snapshot as materialized (
             select up_to_index, state from a2_snapshots where session_id = ? and reducer_name = ?)
             select 0 as row_order, 'snapshot' as row_kind, snapshot.up_to_index as snapshot_index,
                    snapshot.state as snapshot_state, {_NULLS}
             from snapshot
             union all
             select 1 as row_order, 'event' as row_kind, null as snapshot_index, null as snapshot_state, event.*
             from a2_events as event
             where event.session_id = ? and event.idx > coalesce((select up_to_index from snapshot), 0)
             order by row_order, idx"""


def _dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


class A2StyleStore:
    """The seed's store, the parts the benchmark drives (see the module docstring)."""

    def __init__(self, path: str, make_stored: Callable[..., Any], make_event: Callable[..., Any]) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("pragma busy_timeout = 5000")
        self._db.execute("pragma journal_mode = wal")
        self._db.execute("pragma synchronous = normal")
        self._db.executescript(SCHEMA)
        self._stored = make_stored
        self._event = make_event

    def _tx(self, fn: Callable[[], Any]) -> Any:
        self._db.execute("begin immediate")
        try:
            result = fn()
            self._db.execute("commit")
            return result
        except BaseException:
            self._db.execute("rollback")
            raise

    def _now(self) -> int:
        return int(datetime.now(UTC).timestamp() * 1000)

    def _to_stored(self, row: sqlite3.Row) -> Any:
        return self._stored(
            id=row["event_id"],
            type=row["event_type"],
            payload=json.loads(row["payload"]),
            index=row["idx"],
            session_id=row["session_id"],
            created_at=_dt(row["created_at"]),
            cause=None if row["cause"] is None else json.loads(row["cause"]),
            lane=row["lane"],
            processed_at=_dt(row["processed_at"]),
            processed_by_attempt=row["processed_by_attempt"],
            returned_event_ids=None
            if row["returned_event_ids"] is None
            else tuple(json.loads(row["returned_event_ids"])),
            first_claimed_at=_dt(row["first_claimed_at"]),
            last_claimed_at=_dt(row["last_claimed_at"]),
            attempt_count=row["attempt_count"],
            failure_count=row["failure_count"],
            last_failed_at=_dt(row["last_failed_at"]),
            last_failed_attempt=row["last_failed_attempt"],
            last_error=row["last_error"],
            failed_at=_dt(row["failed_at"]),
            claim_holder=row["claim_holder"],
            claim_expires_at=_dt(row["claim_expires_at"]),
        )

    async def append(self, session_id: str, events: list[dict[str, Any]]) -> Any:
        def run() -> Any:
            status = self._db.execute(APPEND_STATUS, (session_id, session_id)).fetchone()
            base = int(status["max"])
            now = self._now()
            inserted = []
            for i, e in enumerate(events):
                event_id = e.get("id") or str(uuid.uuid4())
                index = base + 1 + i
                lane = e.get("lane")
                payload = json.dumps(e["payload"])
                processed = now if e.get("settled") else None
                self._db.execute(
                    INSERT_EVENT,
                    (
                        session_id,
                        index,
                        e["type"],
                        payload,
                        event_id,
                        now,
                        None,
                        lane,
                        lane,
                        session_id,
                        lane,
                        processed,
                    ),
                )
                inserted.append(
                    self._stored(
                        id=event_id,
                        type=e["type"],
                        payload=json.loads(payload),
                        index=index,
                        session_id=session_id,
                        created_at=_dt(now),
                        cause=None,
                        lane=lane,
                        processed_at=_dt(processed),
                        processed_by_attempt=None,
                        returned_event_ids=None,
                        first_claimed_at=None,
                        last_claimed_at=None,
                        attempt_count=0,
                        failure_count=0,
                        last_failed_at=None,
                        last_failed_attempt=None,
                        last_error=None,
                        failed_at=None,
                        claim_holder=None,
                        claim_expires_at=None,
                    )
                )
            return inserted, bool(status["has_pending"]) or any(not e.get("settled") for e in events)

        return self._tx(run)

    async def claim_available(self, *, session_id: str, holder: str, ttl_ms: int) -> Any:
        def run() -> Any:
            now = self._now()
            eligible = self._db.execute(ELIGIBLE, (session_id, now)).fetchall()
            if eligible:
                claimed = [
                    self._to_stored(
                        self._db.execute(CLAIM, (now, now, holder, now + ttl_ms, session_id, row["idx"])).fetchone()
                    )
                    for row in eligible
                ]
                return "claimed", claimed
            active = self._db.execute(RETRY_AT, (session_id, now)).fetchone()
            return ("settled", []) if active["retry_at"] is None else ("busy", [])

        return self._tx(run)

    async def complete_attempt(self, *, session_id: str, index: int, attempt: int, events: list[Any]) -> Any:
        def run() -> Any:
            parent = self._db.execute(PARENT, (session_id, index)).fetchone()
            if parent is None:
                raise TypeError(f"no event at index {index} in session '{session_id}'")
            if parent["processed_at"] is not None:
                return "superseded"
            if parent["attempt_count"] != attempt or parent["claim_holder"] is None or parent["failed_at"] is not None:
                return "superseded"
            self._db.execute(APPEND_STATUS, (session_id, session_id)).fetchone()
            now = self._now()
            self._db.execute(COMPLETE, (now, attempt, json.dumps([]), session_id, index))
            if parent["lane"] is not None:
                self._db.execute(PROMOTE_LANE_HEAD, (session_id, session_id, parent["lane"]))
            return "completed"

        return self._tx(run)

    async def put_snapshot(self, session_id: str, reducer_name: str, index: int, state: Any) -> None:
        self._db.execute(
            "insert into a2_snapshots (session_id, reducer_name, up_to_index, state, updated_at)"
            " values (?, ?, ?, ?, ?) on conflict (session_id, reducer_name) do update set"
            " up_to_index = excluded.up_to_index, state = excluded.state, updated_at = excluded.updated_at"
            " where excluded.up_to_index > a2_snapshots.up_to_index",
            (session_id, reducer_name, index, json.dumps(state), self._now()),
        )

    async def read_state(self, session_id: str, reducer_name: str) -> Any:
        rows = self._db.execute(READ_STATE, (session_id, reducer_name, session_id)).fetchall()
        snapshot = next((r for r in rows if r["row_kind"] == "snapshot"), None)
        events = [
            self._event(
                r["event_id"],
                r["event_type"],
                json.loads(r["payload"]),
                r["idx"],
                r["session_id"],
                _dt(r["created_at"]),
            )
            for r in rows
            if r["row_kind"] == "event"
        ]
        state = None if snapshot is None else (snapshot["snapshot_index"], json.loads(snapshot["snapshot_state"]))
        return state, events

    def close(self) -> None:
        self._db.close()
