"""functualize-state-sqlite's substrate, re-created for the compat benchmark's reference column.

This is *not* functualize's code: it is written from the description of
functualize-state-sqlite 0.3.0's ``SQLiteSubstrate`` (seed 001) so
``bench/compat.py`` can time durastate's drop-in against the approach it
replaces, method for method. It reproduces the choices that matter for speed,
at the seed's own defaults:

* one connection per thread, autocommit (``isolation_level=None``), WAL,
  ``busy_timeout=10000`` and nothing else: ``synchronous`` stays at the
  build's default (FULL, a WAL sync per commit);
* one ``documents (key TEXT PRIMARY KEY, payload TEXT, revision INTEGER)``
  table; the payload is ``json.dumps(indent=2, sort_keys=True)`` text, read
  back with ``json.loads`` and checked to be an object;
* an unconditional write is an upsert that bumps the revision; a write with
  ``expect`` is one ``UPDATE ... WHERE revision = ?`` (``rowcount == 1``);
* ``lock(*keys)`` is one ``BEGIN IMMEDIATE`` transaction, re-entrant per
  thread by a depth counter.

Reads return a ``Stored(data=..., revision=...)``, a frozen, slotted
dataclass built with keywords, as the seed returns functualize's own
``Stored``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS documents (key TEXT PRIMARY KEY, payload TEXT NOT NULL, revision INTEGER NOT NULL)"
)


@dataclass(frozen=True, slots=True)
class SeedStored:
    """functualize's ``Stored``: a document and its revision."""

    data: dict[str, Any]
    revision: int


class SeedUnreadable(Exception):
    """The seed's ``SubstrateUnreadableError(key, detail)``."""

    def __init__(self, key: str, detail: str) -> None:
        self.key = key
        super().__init__(f"Cannot read {key!r}: {detail}")


class FunctualizeStyleSubstrate:
    """A substrate built the way functualize-state-sqlite builds its own (see module doc)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(str(self.path), isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = conn
            self._local.depth = 0
        return conn

    def read(self, key: str) -> SeedStored | None:
        row = self._conn().execute("SELECT payload, revision FROM documents WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            data = json.loads(row[0])
        except ValueError as exc:
            raise SeedUnreadable(key, str(exc)) from exc
        if not isinstance(data, dict):
            raise SeedUnreadable(key, f"expected an object, found {type(data).__name__}")
        return SeedStored(data=data, revision=int(row[1]))

    def write(self, key: str, payload: dict[str, Any], *, expect: int | None = None) -> bool:
        blob = json.dumps(payload, indent=2, sort_keys=True)
        conn = self._conn()
        if expect is None:
            conn.execute(
                "INSERT INTO documents (key, payload, revision) VALUES (?, ?, 1) "
                "ON CONFLICT(key) DO UPDATE SET payload = excluded.payload, "
                "revision = documents.revision + 1",
                (key, blob),
            )
            return True
        cursor = conn.execute(
            "UPDATE documents SET payload = ?, revision = revision + 1 WHERE key = ? AND revision = ?",
            (blob, key, expect),
        )
        return cursor.rowcount == 1

    @contextmanager
    def lock(self, *keys: str) -> Iterator[None]:
        conn = self._conn()
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            if depth == 0:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                else:
                    conn.execute("COMMIT")
            else:
                yield
        finally:
            self._local.depth = depth

    def close(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
