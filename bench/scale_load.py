"""Fast bulk loading for ``bench/scale.py``: copies of rows the facets wrote.

Loading 1e6 rows through the public API would take minutes on PostgreSQL
(one round trip per event, document or presence field). Instead each
workload writes a few real rows through its facet, reads them back by
column name (``Bulk.template``) and inserts ``count`` altered copies of
them (``Bulk.insert``): ``COPY ... FROM STDIN`` on PostgreSQL, one
``executemany`` per 50,000 rows in ``BEGIN IMMEDIATE`` on SQLite. The
copies are the facet's own row shapes (every column it wrote, with only
the identifying ones changed), so the bench needs no column list of its
own beyond the few fields it varies, and a schema change shows up as a
loud error here rather than as a silently unrealistic table.

Progress goes to stderr: one line per table, redrawn at most once a
second with the rows written so far.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

import durastate

SQLITE_CHUNK = 50_000


class Progress:
    """``label: n/total rows, s`` on stderr, redrawn at most once a second."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.started = time.perf_counter()
        self.shown = self.started
        self.done = 0
        self.tty = sys.stderr.isatty()

    def advance(self, rows: int) -> None:
        self.done += rows
        now = time.perf_counter()
        if now - self.shown >= (1.0 if self.tty else 10.0):
            self.shown = now
            self._show("\r" if self.tty else "")

    def finish(self) -> float:
        elapsed = time.perf_counter() - self.started
        self._show("\r" if self.tty else "", final=True)
        return elapsed

    def _show(self, lead: str, *, final: bool = False) -> None:
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        end = "\n" if final or not self.tty else ""
        print(
            f"{lead}  {self.label}: {self.done:,}/{self.total:,} rows, {elapsed:.1f} s ({rate:,.0f} rows/s)",
            end=end,
            file=sys.stderr,
            flush=True,
        )


class Bulk:
    """Template reads and bulk inserts into one store's tables."""

    def __init__(self, store: durastate.Store, engine: str, url: str, label: str) -> None:
        self.store = store
        self.engine = engine
        self.url = url
        self.label = label
        self.prefix = store.engine.prefix

    def template(self, table: str, where: str = "", params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """The rows of ``{p}<table>`` matching ``where`` (``?`` placeholders), as dicts by column name."""
        sql = f"SELECT * FROM {self.prefix}{table}" + (f" WHERE {where}" if where else "")
        if self.engine == "postgresql":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                cur = conn.execute(sql.replace("?", "%s"), params)
                names = [d.name for d in cur.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        conn = self.store.engine._thread_connection()  # type: ignore[attr-defined]
        cur = conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def insert(self, table: str, columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]], count: int) -> None:
        """Insert ``count`` rows (each in ``columns`` order) into ``{p}<table>``, showing progress."""
        progress = Progress(f"{self.label} {table}", count)
        if self.engine == "postgresql":
            self._copy(table, columns, rows, progress)
        else:
            self._executemany(table, columns, rows, progress)
        progress.finish()

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """One bench-side statement (``{p}`` = the table prefix, ``?`` placeholders) in autocommit."""
        sql = sql.replace("{p}", self.prefix)
        if self.engine == "postgresql":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(sql.replace("?", "%s"), params)
        else:
            self.store.engine._thread_connection().execute(sql, params)  # type: ignore[attr-defined]

    def _copy(self, table: str, columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]], progress: Progress) -> None:
        import psycopg

        with psycopg.connect(self.url) as conn, conn.cursor() as cur:
            with cur.copy(f"COPY {self.prefix}{table} ({', '.join(columns)}) FROM STDIN") as copy:
                n = 0
                for row in rows:
                    copy.write_row(row)
                    n += 1
                    if n == 10_000:
                        progress.advance(n)
                        n = 0
                progress.advance(n)
            conn.commit()

    def _executemany(
        self, table: str, columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]], progress: Progress
    ) -> None:
        conn = self.store.engine._thread_connection()  # type: ignore[attr-defined]
        sql = f"INSERT INTO {self.prefix}{table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        for chunk in _chunks(iter(rows), SQLITE_CHUNK):
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, chunk)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            progress.advance(len(chunk))

    def analyze(self, tables: Iterable[str]) -> None:
        """``ANALYZE`` the tables (PostgreSQL; SQLite plans without statistics either way)."""
        if self.engine == "postgresql":
            for table in tables:
                self.execute(f"ANALYZE {self.prefix}{table}")

    def freeze_statistics(self, tables: Iterable[str]) -> None:
        """Keep autovacuum off the tables: their plans stay those of tables without statistics."""
        if self.engine == "postgresql":
            for table in tables:
                self.execute(f"ALTER TABLE {self.prefix}{table} SET (autovacuum_enabled = false)")


def _chunks(rows: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    while True:
        chunk = [row for _, row in zip(range(size), rows, strict=False)]
        if not chunk:
            return
        yield chunk


def copies(template: dict[str, Any], columns: tuple[str, ...], count: int, vary: Any) -> Iterator[tuple[Any, ...]]:
    """``count`` rows: ``template`` with ``vary(i)``'s fields (a dict) replaced, in ``columns`` order."""
    for i in range(count):
        row = {**template, **vary(i)}
        yield tuple(row[c] for c in columns)
