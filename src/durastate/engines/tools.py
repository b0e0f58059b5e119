"""What operators' tools ask of an engine: ``engine.tools`` (``EngineTools``).

The CLI (``info``, ``doctor``, ``stats``, ``export``/``import``, backups)
and the inspector need answers no facet statement gives: a table's columns
and primary key, its size, a row count that stays cheap on a big table,
the engine's health facts, and the store's sequences to carry them through
an export. Each is a question to the engine, so each engine answers it in
its own terms (SQLite's pragmas and ``dbstat``, PostgreSQL's catalog and
planner statistics) and the tools never compare dialect names.

``EngineTools`` answers what standard SQL over durastate's own tables can
(counts, the ``{p}sequence`` table, schema versions) and refuses the rest
with ``NotSupported`` naming the engine; ``engines.sqlite_tools`` and
``engines.postgres_tools`` answer everything. A third-party engine gets
these defaults from ``Engine.tools`` and may return a subclass.

Which tables to ask about is the caller's knowledge (the facet registry,
``durastate.facets``: each facet declares its tables), never parsed from
DDL. Every method here only reads, so it works on a store opened
``read_only``, except ``restore_sequences`` and ``after_import``, which an
import calls inside its write transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest, NotSupported
from .statements import READ, WRITE

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["BackupProgress", "BackupResult", "EngineTools", "Health", "TableShape", "shape_from_catalog"]

READ_SEQUENCES = READ("SELECT name, value FROM {p}sequence")
SET_SEQUENCE = WRITE("UPDATE {p}sequence SET value = ? WHERE name = ?")
# At most ``cap + 1`` rows are read, whatever the table's size.
CAPPED_COUNT = "SELECT COUNT(*) FROM (SELECT 1 FROM {p}{table} LIMIT ?) AS capped"
COUNT = "SELECT COUNT(*) FROM {p}{table}"
DATA_LENGTH = "SELECT SUM({lengths}) FROM {p}{table}"


@dataclass(frozen=True)
class TableShape:
    """A table's columns (in stored order) and its primary key columns (in key order)."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]


@dataclass(frozen=True)
class BackupResult:
    """What ``EngineTools.backup`` copied."""

    pages: int  # pages of the source when the copy started
    page_size: int  # bytes a page
    restarts: int  # how often other connections' writes restarted the stepwise copy
    one_step: bool  # whether it finished with a single-step copy after too many restarts


# ``(pages copied, pages in all, bytes a page)`` after each step of a backup.
BackupProgress = Callable[[int, int, int], None]


@dataclass
class Health:
    """Facts (name -> value), warnings (worth a look) and problems (something is wrong)."""

    facts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def shape_from_catalog(prefix: str, table: str, columns: list[tuple[str, int]]) -> TableShape:
    """A ``TableShape`` from a catalog's ``(column, position in the primary key or 0)`` pairs, in stored order.

    ``InvalidRequest`` when there are none (no such table) or no key column
    (a table durastate did not create: it cannot be paged by key).
    """
    if not columns:
        raise InvalidRequest(f"table {prefix}{table} not found")
    key = tuple(name for name, pos in sorted((c for c in columns if c[1]), key=lambda c: c[1]))
    if not key:
        raise InvalidRequest(f"table {prefix}{table} has no primary key; cannot page it")
    return TableShape(table, tuple(name for name, _ in columns), key)


def _table_name(table: str) -> str:
    # Table names come from the facet registry; refuse anything else before
    # it is spliced into a statement.
    if not isinstance(table, str) or not table.replace("_", "").isalnum() or not table.isascii():
        raise InvalidRequest(f"not a durastate table name: {table!r}")
    return table


class EngineTools:
    """Read-only questions about a store's tables and state, answered by its engine.

    ``count_cap``: how many rows ``bounded_count`` reads at most per table
    (an engine that counts b-tree pages quickly affords more than one that
    visits every row version).
    """

    count_cap: int = 10_000

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _unsupported(self, what: str) -> NotSupported:
        return NotSupported(f"{self.engine.url}: {type(self.engine).__name__} does not report {what}")

    # -- tables -----------------------------------------------------------------

    def table_shape(self, table: str) -> TableShape:
        """The table's columns and primary key; ``InvalidRequest`` when it does not exist or has no key.

        The base class has no catalog to read: ``NotSupported``.
        """
        raise self._unsupported("table shapes (its tools have no catalog query)")

    def count_rows(self, table: str) -> int:
        """Every row of the table, counted (reads the whole table)."""
        engine = self.engine
        row = engine.one(engine.sql(READ(COUNT.replace("{table}", _table_name(table)))))
        return 0 if row is None else int(row[0])

    def bounded_count(self, table: str) -> tuple[int, bool]:
        """``(rows, exact)``, reading at most ``count_cap + 1`` rows.

        Exact up to ``count_cap``; beyond it the engine's estimate when it
        has one above the cap (``estimate_rows``), else the cap itself, a
        lower bound; ``exact`` is False for both.
        """
        engine = self.engine
        cap = self.count_cap
        row = engine.one(engine.sql(READ(CAPPED_COUNT.replace("{table}", _table_name(table)))), (cap + 1,))
        n = 0 if row is None else int(row[0])
        if n <= cap:
            return n, True
        estimate = self.estimate_rows(table)
        if estimate is not None and estimate > cap:
            return estimate, False
        return cap, False

    def estimate_rows(self, table: str) -> int | None:
        """The engine's own estimate of the table's rows without reading them, or None (none kept)."""
        return None

    def table_bytes(self, table: str, *, scan: bool = True) -> int | None:
        """Bytes the table takes on disk (its pages, indexes included where the engine counts them).

        When the engine cannot size pages: with ``scan``, the stored data's
        length (reads the whole table); without, None.
        """
        stored = self.stored_bytes(table)
        if stored is not None or not scan:
            return stored
        columns = self.table_shape(table).columns
        lengths = " + ".join(f"COALESCE(length({c}), 0)" for c in columns)
        engine = self.engine
        sql = DATA_LENGTH.replace("{lengths}", lengths).replace("{table}", _table_name(table))
        row = engine.one(engine.sql(READ(sql)))
        return 0 if row is None or row[0] is None else int(row[0])

    def stored_bytes(self, table: str) -> int | None:
        """The table's size from the engine's page accounting, or None where it has none."""
        return None

    # -- health -----------------------------------------------------------------

    def health(self, *, check: str = "quick") -> Health:
        """The engine's facts and warnings, and an integrity check.

        ``check``: ``"quick"``, ``"full"`` or ``"none"`` (what a quick check
        is depends on the engine; the base runs ``integrity_errors()`` for
        both). Only reads.
        """
        if check not in ("quick", "full", "none"):
            raise InvalidRequest(f"check must be 'quick', 'full' or 'none', got {check!r}")
        h = Health()
        if check == "none":
            h.facts["integrity"] = "not checked (durastate doctor checks it)"
            return h
        errors = self.engine.integrity_errors()
        h.facts["integrity"] = "ok" if not errors else errors[:10]
        if errors:
            h.problems.append("integrity check failed: " + "; ".join(errors[:5]))
        return h

    # -- files --------------------------------------------------------------------

    @property
    def file(self) -> Path | None:
        """The one file holding the whole store, or None (a server, or memory)."""
        return None

    def checkpoint(self) -> bool:
        """Fold the engine's write-ahead log into the store and empty it, if it keeps one in the store's folder.

        Returns whether the log is empty now (False: the engine keeps no
        such log, or a reader still needs it). Writes no data.
        """
        return False

    # -- copies -----------------------------------------------------------------

    def backup(self, dest: Path, progress: BackupProgress | None = None) -> BackupResult:
        """Copy the store, while writers go on, into a new store file ``dest`` (written whole, then renamed, 0600).

        ``NotSupported`` where the engine has no such copy (a server: use an
        export, or the server's own tools); ``InvalidRequest`` when ``dest``
        exists.
        """
        raise self._unsupported("a file backup (export the store instead)")

    # -- sequences (export and import) ------------------------------------------

    def sequences(self) -> dict[str, int]:
        """Every sequence's last handed-out value, by the name its facet declared (``Migration.sequences``)."""
        engine = self.engine
        return {str(name): int(value) for name, value in engine.all(engine.sql(READ_SEQUENCES))}

    def restore_sequences(self, values: dict[str, int]) -> None:
        """Set each sequence to its value (inside the caller's write transaction, on an empty store).

        ``InvalidRequest`` for a name the store does not have (nothing is
        changed when called inside a transaction that then rolls back).
        """
        engine = self.engine
        for name, value in values.items():
            if not engine.execute(engine.sql(SET_SEQUENCE), (int(value), name)) and int(value):
                raise InvalidRequest(f"unknown sequence {name!r} in the export")

    def after_import(self, tables: tuple[str, ...]) -> None:
        """Bring the engine's own counters of ``tables`` past the rows an import wrote (nothing by default)."""
