"""vgi's own SQLite approach, re-created for the benchmark's reference column.

This is *not* vgi's code: it is written from the description of vgi's
``FunctionStorageSqlite`` (seed 000) so the benchmark can show what a typical
hand-rolled store costs. It reproduces the choices that matter for speed:

* one connection per thread, opened with Python's default isolation level,
  so every write runs in an implicit deferred transaction that the call
  ends with ``commit()``; the pragmas vgi sets (WAL, synchronous=NORMAL,
  busy_timeout, temp_store=MEMORY, a 64 MiB page cache);
* its own tables: ``AUTOINCREMENT`` ids for the queue and the log, no
  expiry column, no CHECK on counters;
* SQL text assembled on each call where vgi does so (IN lists and the
  optional range clauses of a scan); constant statements are literals,
  which the driver's statement cache serves as vgi's do;
* a ``bytes()`` copy of every key and value it returns;
* single-key operations routed the way vgi's ``BoundStorage`` routes them:
  a get is ``get_many([key])[0]``, a put is ``put_many([(key, value)])``.

It has no claim/ack (vgi's queue only pops), no validation, no expiry.
"""

from __future__ import annotations

import sqlite3
import threading

_TABLES = (
    "CREATE TABLE IF NOT EXISTS vgi_queue ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, execution_id BLOB NOT NULL, work_item BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vgi_queue_exec ON vgi_queue (execution_id, id)",
    "CREATE TABLE IF NOT EXISTS vgi_state ("
    " scope_id BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY (scope_id, ns, key))",
    "CREATE TABLE IF NOT EXISTS vgi_log ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, scope_id BLOB NOT NULL, ns BLOB NOT NULL,"
    " key BLOB NOT NULL, value BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vgi_log_lookup ON vgi_log (scope_id, ns, key, id)",
    "CREATE TABLE IF NOT EXISTS vgi_counter ("
    " scope_id BLOB NOT NULL, ns BLOB NOT NULL, key BLOB NOT NULL, n INTEGER NOT NULL,"
    " PRIMARY KEY (scope_id, ns, key))",
)

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=30000",
    "PRAGMA temp_store=MEMORY",
    "PRAGMA cache_size=-65536",
)


class VgiStyleStorage:
    """A store built the way vgi's SQLite backend is built (see module doc)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        setup = sqlite3.connect(path, timeout=30.0)
        try:
            setup.execute("PRAGMA journal_mode=WAL")
            for ddl in _TABLES:
                setup.execute(ddl)
            setup.commit()
        finally:
            setup.close()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0)
            for pragma in _PRAGMAS:
                conn.execute(pragma)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- queue -------------------------------------------------------------------

    def queue_push(self, execution_id: bytes, items: list[bytes]) -> int:
        conn = self._conn()
        if items:
            conn.executemany(
                "INSERT INTO vgi_queue (execution_id, work_item) VALUES (?, ?)",
                [(execution_id, item) for item in items],
            )
        conn.commit()
        return len(items)

    def queue_pop(self, execution_id: bytes) -> bytes | None:
        conn = self._conn()
        row = conn.execute(
            "DELETE FROM vgi_queue WHERE id = ("
            " SELECT id FROM vgi_queue WHERE execution_id = ? ORDER BY id LIMIT 1)"
            " RETURNING work_item",
            (execution_id,),
        ).fetchone()
        conn.commit()
        return bytes(row[0]) if row else None

    # -- state -------------------------------------------------------------------

    def state_get_many(self, scope_id: bytes, ns: bytes, keys: list[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        marks = ",".join("?" for _ in keys)
        rows = (
            self._conn()
            .execute(
                f"SELECT key, value FROM vgi_state WHERE scope_id = ? AND ns = ? AND key IN ({marks})",
                (scope_id, ns, *keys),
            )
            .fetchall()
        )
        found = {bytes(k): bytes(v) for k, v in rows}
        return [found.get(bytes(k)) for k in keys]

    def state_get(self, scope_id: bytes, ns: bytes, key: bytes) -> bytes | None:
        return self.state_get_many(scope_id, ns, [key])[0]

    def state_put_many(self, scope_id: bytes, ns: bytes, items: list[tuple[bytes, bytes]]) -> None:
        if not items:
            return
        conn = self._conn()
        conn.executemany(
            "INSERT INTO vgi_state (scope_id, ns, key, value) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (scope_id, ns, key) DO UPDATE SET value = excluded.value",
            [(scope_id, ns, k, v) for k, v in items],
        )
        conn.commit()

    def state_put(self, scope_id: bytes, ns: bytes, key: bytes, value: bytes) -> None:
        self.state_put_many(scope_id, ns, [(key, value)])

    def state_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[tuple[bytes, bytes]]:
        where = "scope_id = ? AND ns = ?"
        params: list[object] = [scope_id, ns]
        if start is not None:
            where += " AND key >= ?"
            params.append(start)
        if end is not None:
            where += " AND key < ?"
            params.append(end)
        params.append(-1 if limit is None else int(limit))
        direction = "DESC" if reverse else "ASC"
        rows = (
            self._conn()
            .execute(f"SELECT key, value FROM vgi_state WHERE {where} ORDER BY key {direction} LIMIT ?", params)
            .fetchall()
        )
        return [(bytes(k), bytes(v)) for k, v in rows]

    # -- logs --------------------------------------------------------------------

    def state_append(self, scope_id: bytes, ns: bytes, key: bytes, item: bytes) -> int:
        conn = self._conn()
        row = conn.execute(
            "INSERT INTO vgi_log (scope_id, ns, key, value) VALUES (?, ?, ?, ?) RETURNING id",
            (scope_id, ns, key, item),
        ).fetchone()
        conn.commit()
        return int(row[0])

    def state_log_scan(
        self, scope_id: bytes, ns: bytes, key: bytes, *, after_id: int = -1, limit: int | None = None
    ) -> list[tuple[int, bytes]]:
        rows = (
            self._conn()
            .execute(
                "SELECT id, value FROM vgi_log WHERE scope_id = ? AND ns = ? AND key = ? AND id > ?"
                " ORDER BY id LIMIT ?",
                (scope_id, ns, key, after_id, -1 if limit is None else int(limit)),
            )
            .fetchall()
        )
        return [(int(i), bytes(v)) for i, v in rows]

    # -- counters ----------------------------------------------------------------

    def state_counter_add(self, scope_id: bytes, ns: bytes, key: bytes, delta: int) -> int:
        conn = self._conn()
        row = conn.execute(
            "INSERT INTO vgi_counter (scope_id, ns, key, n) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (scope_id, ns, key) DO UPDATE SET n = n + excluded.n RETURNING n",
            (scope_id, ns, key, int(delta)),
        ).fetchone()
        conn.commit()
        return int(row[0])
