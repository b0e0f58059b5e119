"""``durastate maintain``: retention and housekeeping in bounded steps.

Each step deletes at most ``batch`` rows in its own commit, so the store
stays available to writers, an interrupt (Ctrl-C) keeps every finished
step, and running the command again resumes where it stopped (every step
is defined by the data, not by a saved position). ``max_rows`` bounds one
run's deletions. Through the public facet API except the two engine
commands SQLite and PostgreSQL offer for housekeeping (WAL checkpoint,
VACUUM).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import durastate

WAL_CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"
SQLITE_VACUUM = "VACUUM"
PG_VACUUM = "VACUUM (ANALYZE) {table}"

Tick = Callable[[int, int], None]


def run_maintenance(
    store: durastate.Store,
    *,
    batch: int,
    max_rows: int | None,
    events_older_than: float | None,
    dead_older_than: float | None,
    vacuum: bool,
    tick: Tick,
    url: str | None,
) -> dict[str, Any]:
    budget = [max_rows]  # rows this run may still delete (None: unbounded)
    report: dict[str, Any] = {}

    def allowance() -> int:
        return batch if budget[0] is None else min(batch, budget[0])

    def spent(n: int) -> None:
        tick(n, 0)
        if budget[0] is not None:
            budget[0] -= n

    total = 0
    while allowance() > 0:
        n = store.kv.prune_expired(limit=allowance())
        spent(n)
        total += n
        if n == 0:
            break
    report["kv_expired_deleted"] = total

    swept = 0
    after = None
    while allowance() > 0:
        names = store.presence.namespaces(after=after, limit=100)
        if not names:
            break
        for ns in names:
            before = len(store.presence.peek(ns))
            stored = _presence_rows(store, ns)
            store.presence.read(ns)  # sweeps the namespace's expired fields (one statement)
            gone = stored - before
            swept += gone
            spent(gone)
        after = names[-1]
    report["presence_expired_deleted"] = swept

    if events_older_than is not None and allowance() > 0:
        n = store.events.prune(older_than_ms=int(events_older_than * 1000), batch_size=allowance())
        spent(n)
        report["events_pruned"] = n

    if dead_older_than is not None:
        cutoff = store.engine.now_ms() / 1000.0 - dead_older_than
        dropped = 0
        for name in _all_queue_names(store):
            after_id = 0
            while allowance() > 0:
                page = store.queues.dead_letters(name, after=after_id, limit=allowance())
                if not page:
                    break
                old = [d.id for d in page if d.died_at <= cutoff]
                if old:
                    n = store.queues.delete_dead(name, old)
                    dropped += n
                    spent(n)
                after_id = page[-1].id
        report["dead_letters_deleted"] = dropped

    engine = store.engine
    if engine.dialect.name == "sqlite" and not getattr(engine, "is_memory", False):
        row = engine.one(engine.sql(WAL_CHECKPOINT))
        report["wal_checkpoint"] = (
            "busy (a reader holds the WAL; try again later)"
            if row is not None and row[0]
            else f"ok ({0 if row is None else row[2]} pages)"
        )
    if vacuum:
        report["vacuum"] = _vacuum(store, url)
    report["stopped_at_max_rows"] = budget[0] == 0
    return report


def _presence_rows(store: durastate.Store, ns: str) -> int:
    row = store.engine.one(store.engine.sql(PRESENCE_ROWS), (ns,))
    return 0 if row is None else int(row[0])


PRESENCE_ROWS = "SELECT COUNT(*) FROM {p}presence WHERE ns = ?"


def _all_queue_names(store: durastate.Store) -> list[bytes]:
    names: list[bytes] = []
    while True:
        page = store.queues.names(after=names[-1] if names else None, limit=1000)
        names += page
        if len(page) < 1000:
            return names


def _vacuum(store: durastate.Store, url: str | None) -> str:
    engine = store.engine
    if engine.dialect.name == "sqlite":
        engine.execute(engine.sql(SQLITE_VACUUM))
        return "ok"
    # VACUUM cannot run inside a transaction block, and the engine wraps
    # writes in one (attempt records): a separate autocommit connection.
    import psycopg

    from .dump import facet_tables

    with psycopg.connect(str(url), autocommit=True) as conn:
        for table in facet_tables():
            conn.execute(PG_VACUUM.format(table=engine.prefix + table))
    return "ok"
