"""``SqliteTools``: the operators' questions (``engines.tools``) answered from SQLite's pragmas and ``dbstat``."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DurastateError, InvalidRequest, NotSupported, StoreCorrupt, StoreUnavailable
from .statements import DDL, READ, WRITE
from .tools import BackupProgress, BackupResult, EngineTools, Health, TableShape, shape_from_catalog

if TYPE_CHECKING:
    from .sqlite import SqliteEngine

__all__ = ["SqliteTools", "filesystem_type"]

TABLE_COLUMNS = READ("SELECT name, pk FROM pragma_table_info(?) ORDER BY cid")
TABLE_PAGES_BYTES = READ("SELECT SUM(pgsize) FROM dbstat WHERE name = ? OR tbl_name = ?")
# (busy, frames in the log, frames folded in): busy 0 and all folded in means the WAL is empty.
WAL_TRUNCATE = DDL("PRAGMA wal_checkpoint(TRUNCATE)")
QUICK_CHECK = READ("PRAGMA quick_check")
INTEGRITY_CHECK = READ("PRAGMA integrity_check")
PRAGMAS = ("page_size", "page_count", "freelist_count", "journal_mode", "synchronous", "auto_vacuum")
# A sequence used inside an INSERT ({next_value:NAME}) is handed out by the
# AUTOINCREMENT of the table of the same name; its {p}sequence row stays 0.
AUTOINCREMENT = READ("SELECT seq FROM sqlite_sequence WHERE name = ?")
SET_AUTOINCREMENT = WRITE("UPDATE sqlite_sequence SET seq = ? WHERE name = ? COLLATE NOCASE")
ADD_AUTOINCREMENT = WRITE("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)")
HAS_AUTOINCREMENT = READ(
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE AND sql LIKE '%AUTOINCREMENT%'"
)

# Pages a backup step copies; after this many restarts (other connections
# wrote) it copies the rest in one step, a single read snapshot.
BACKUP_STEP = 1024
BACKUP_RESTARTS = 3

NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs", "lustre"}
WAL_WARN_BYTES = 64 * 1024 * 1024


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem ``path`` is on (Linux /proc/mounts), or None."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        inside = len(parts) >= 3 and (target == parts[1] or target.startswith(parts[1].rstrip("/") + "/"))
        if inside and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


class SqliteTools(EngineTools):
    """SQLite counts from its b-tree pages quickly, so counts stay exact up to a million rows."""

    count_cap = 1_000_000
    engine: SqliteEngine

    def table_shape(self, table: str) -> TableShape:
        rows = self.engine.all(self.engine.sql(TABLE_COLUMNS), (self.engine.prefix + table,))
        return shape_from_catalog(self.engine.prefix, table, [(str(r[0]), int(r[1])) for r in rows])

    def stored_bytes(self, table: str) -> int | None:
        name = self.engine.prefix + table
        try:
            row = self.engine.one(self.engine.sql(TABLE_PAGES_BYTES), (name, name))
        except DurastateError:  # a SQLite built without the dbstat virtual table
            return None
        return 0 if row is None or row[0] is None else int(row[0])

    def health(self, *, check: str = "quick") -> Health:
        if check not in ("quick", "full", "none"):
            raise InvalidRequest(f"check must be 'quick', 'full' or 'none', got {check!r}")
        engine = self.engine
        h = Health()
        for name in PRAGMAS:
            row = engine.one(engine.sql(READ(f"PRAGMA {name}")))
            h.facts[name] = None if row is None else row[0]
        if engine.file is not None:
            _file_facts(engine.file, h)
        if check == "none":
            h.facts["integrity"] = "not checked (durastate doctor checks it)"
            return h
        statement = INTEGRITY_CHECK if check == "full" else QUICK_CHECK
        # One row per problem, or one row holding several lines: count lines.
        try:
            result = [line for r in engine.all(engine.sql(statement)) for line in str(r[0]).splitlines()]
        except StoreCorrupt as exc:
            # SQLite stops the check with SQLITE_CORRUPT when a page it needs to walk the file is
            # unreadable: that is the check's finding, not a failure to check.
            result = [f"the check could not finish: {exc}"]
        shown = result[:10] + ([f"... and {len(result) - 10} more"] if len(result) > 10 else [])
        h.facts["integrity"] = "ok" if result == ["ok"] else shown
        if result != ["ok"]:
            h.problems.append("integrity check failed: " + "; ".join(result[:5]))
        return h

    @property
    def file(self) -> Path | None:
        return self.engine.file

    def checkpoint(self) -> bool:
        """``PRAGMA wal_checkpoint(TRUNCATE)``: True when every frame was folded in and the WAL truncated."""
        if self.engine.file is None:
            return False
        row = self.engine.one(self.engine.sql(WAL_TRUNCATE))
        return row is not None and int(row[0]) == 0 and int(row[1]) == int(row[2])

    def set_wal_autocheckpoint(self, pages: int) -> None:
        """SQLite's own automatic checkpoint every ``pages`` WAL pages (0: off) on every connection of the store.

        See ``SqliteEngine.set_wal_autocheckpoint``; the engine's own WAL bound stays.
        """
        self.engine.set_wal_autocheckpoint(pages)

    def backup(self, dest: Path, progress: BackupProgress | None = None) -> BackupResult:
        """SQLite's online backup API, ``BACKUP_STEP`` pages a step, into a new file checked by ``quick_check``.

        Other connections' writes restart a stepwise copy; after
        ``BACKUP_RESTARTS`` restarts the rest is copied in one step. The
        copy is written next to ``dest`` and renamed when complete, so
        ``dest`` never holds a partial store.
        """
        source = self.engine.file
        if source is None:
            raise NotSupported("an in-memory store cannot be backed up (it has no file)")
        dest = Path(dest)
        if dest.exists():
            raise InvalidRequest(f"{dest} exists; pick a new name")
        tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
        try:
            # A plain (read-write) connection: a read-only one cannot open a
            # WAL file whose -shm is missing; the backup only reads from it.
            src = sqlite3.connect(source.as_uri(), uri=True)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{self.engine.url}: cannot open it to back it up: {exc}") from None
        try:
            return _copy(src, tmp, dest, progress)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"backup of {self.engine.url} to {dest} failed: {exc}") from None
        finally:
            src.close()

    def sequences(self) -> dict[str, int]:
        values = super().sequences()
        for name in values:
            row = self.engine.one(self.engine.sql(AUTOINCREMENT), (self.engine.prefix + name,))
            if row is not None:
                values[name] = int(row[0])
        return values

    def restore_sequences(self, values: dict[str, int]) -> None:
        engine = self.engine
        table_values = {}
        for name, value in values.items():
            table = engine.prefix + name
            if engine.one(engine.sql(HAS_AUTOINCREMENT), (table,)) is not None:
                table_values[name] = int(value)
                if not engine.execute(engine.sql(SET_AUTOINCREMENT), (int(value), table)) and int(value):
                    engine.execute(engine.sql(ADD_AUTOINCREMENT), (table, int(value)))
        super().restore_sequences({k: v for k, v in values.items() if k not in table_values})


def _file_facts(db: Path, h: Health) -> None:
    wal = db.with_name(db.name + "-wal")
    h.facts["file"] = str(db)
    h.facts["file_bytes"] = db.stat().st_size if db.exists() else 0
    h.facts["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
    fs = filesystem_type(db)
    h.facts["filesystem"] = fs
    if fs in NETWORK_FILESYSTEMS:
        h.warnings.append(
            f"{db} is on a network filesystem ({fs}): SQLite's WAL needs shared memory that "
            "network filesystems do not provide; use a local disk or PostgreSQL"
        )
    if h.facts["wal_bytes"] > WAL_WARN_BYTES:
        h.warnings.append(
            f"the WAL is {h.facts['wal_bytes'] // (1024 * 1024)} MiB: checkpoints are not keeping up "
            "(a reader holding a long transaction?); run `durastate maintain`"
        )
    if not os.access(db, os.W_OK):
        h.warnings.append(f"{db} is not writable by this user")


class _TooManyRestarts(Exception):
    pass


def _copy(src: sqlite3.Connection, tmp: Path, dest: Path, progress: BackupProgress | None) -> BackupResult:
    total = int(src.execute("PRAGMA page_count").fetchone()[0])
    page_size = int(src.execute("PRAGMA page_size").fetchone()[0])
    state = {"remaining": total + 1, "restarts": 0}

    def step(status: int, remaining: int, pages: int) -> None:
        if remaining > state["remaining"]:
            state["restarts"] += 1
            if state["restarts"] > BACKUP_RESTARTS:
                raise _TooManyRestarts
        state["remaining"] = remaining
        if progress is not None:
            progress(pages - remaining, pages, page_size)  # after a restart this drops back

    try:
        dst = sqlite3.connect(tmp)
        try:
            one_step = False
            try:
                src.backup(dst, pages=BACKUP_STEP, progress=step)
            except _TooManyRestarts:
                one_step = True
                src.backup(dst, pages=-1)
            check = dst.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StoreCorrupt(f"the copy failed its integrity check: {check}")
            dst.execute("PRAGMA journal_mode=WAL")
        finally:
            dst.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
    except BaseException:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        raise
    return BackupResult(total, page_size, state["restarts"], one_step)
