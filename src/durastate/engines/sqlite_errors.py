"""SQLite errors as durastate's, by result code (``translate_sqlite_error``), and ``LockBusy``."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from ..errors import (
    ConfigurationError,
    Conflict,
    DurastateError,
    InvalidRequest,
    StoreClosed,
    StoreCorrupt,
    StoreUnavailable,
)

__all__ = ["LockBusy", "is_busy", "translate_sqlite_error"]

# SQLite primary result codes (https://sqlite.org/rescode.html).
_SQLITE_ERROR_UNAVAILABLE = {
    5,  # BUSY: locked past busy_timeout
    6,  # LOCKED
    7,  # NOMEM
    10,  # IOERR
    13,  # FULL
    15,  # PROTOCOL
}
_SQLITE_BUSY = 5
# Permanent: the file is damaged or not a database at all.
_SQLITE_CORRUPT = {11, 26}  # CORRUPT, NOTADB
# Permanent: the store cannot work as configured (read-only file or folder,
# a path that cannot be opened, no permission).
_SQLITE_CONFIGURATION = {3, 8, 14, 23}  # PERM, READONLY, CANTOPEN, AUTH
# ...except a read-only state that a moment cures (another connection is
# recovering the WAL).
_SQLITE_READONLY_RECOVERY = 264
# ERROR (the statement itself is wrong: no such table, syntax), TOOBIG,
# MISMATCH, RANGE.
_SQLITE_INVALID = {1, 18, 20, 25}
_SQLITE_CONSTRAINT = 19
# Extended constraint codes that mean "your value is not allowed" rather than
# "someone else's row is in the way".
_SQLITE_CONSTRAINT_INVALID = {275, 1299}  # CHECK, NOTNULL


class LockBusy(StoreUnavailable):
    """SQLITE_BUSY: another connection held the lock past this connection's busy timeout.

    A statement refused this way changed nothing (see ``no_wait_changes``).
    """


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused ``exc``'s statement for a lock another connection holds (BUSY)."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_BUSY


CORRUPT_HINT = " (the file is damaged or not a SQLite database: restore it from a backup)"
# Every SQLite database file starts with this; its 100-byte header keeps the page size at bytes 16-17
# (big-endian; 1 means 65536).
SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_SIZE = 100


def damaged_header(path: Path) -> str | None:
    """Why the file at ``path`` cannot be a SQLite database, from its header alone; None when it may be one.

    Read without SQLite, which creates the -wal and -shm files of a header
    that says WAL before it finds the rest missing: a read-only open must
    leave nothing next to a file that is not a store. An empty file is
    SQLite's to judge (a new WAL database keeps its pages in the WAL until
    the first checkpoint), and so is a file this process cannot read.
    """
    try:
        with path.open("rb") as file:
            head = file.read(SQLITE_HEADER_SIZE)
        size = path.stat().st_size
    except OSError:
        return None
    if not head:
        return None
    if len(head) < SQLITE_HEADER_SIZE or not head.startswith(SQLITE_MAGIC):
        return "file is not a database"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if size < page_size:
        return f"the file is {size} bytes, less than one page ({page_size} bytes): it was cut short"
    return None


def damaged_pages(path: Path, first_read: str) -> str | None:
    """Why SQLite cannot read what opening the file at ``path`` reads (``first_read``), or None when it can.

    ``first_read`` is the statement a read-only open starts with (the store's
    schema versions: preparing it reads the whole schema first). Read with
    ``immutable=1``: no locks, nothing created beside the file, where a
    ``mode=ro`` connection to a WAL file creates its -wal and -shm files
    before it reads a page, and cannot remove them when it closes (that
    takes an exclusive lock, which a read-only file descriptor cannot hold).
    For a file with no -wal beside it (all of it is in the file): a file
    that changed while it was read (a writer started meanwhile) is not
    judged (None), nor is any error but a damaged page.
    """
    before = _file_state(path)
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)) as conn:
            conn.execute(first_read).fetchall()
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", 0) or 0
        if code & 0xFF in _SQLITE_CORRUPT and before is not None and _file_state(path) == before:
            return str(exc)
    return None


def _file_state(path: Path) -> tuple[int, int, int, int, bool] | None:
    """What a writer changes: the file's identity, size and times, and whether a -wal is beside it."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, os.path.exists(f"{path}-wal")


def translate_sqlite_error(exc: sqlite3.Error, where: str) -> DurastateError:
    """Map a sqlite3 exception to our error tree by its result code."""
    code = getattr(exc, "sqlite_errorcode", None)
    message = f"{where}: {exc}"
    if code is None:
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc):
            return StoreClosed(message)
        if isinstance(exc, (sqlite3.ProgrammingError, sqlite3.InterfaceError)):
            return InvalidRequest(message)
        return DurastateError(message)
    primary = code & 0xFF
    if primary == _SQLITE_BUSY:
        return LockBusy(message)
    if primary in _SQLITE_ERROR_UNAVAILABLE or code == _SQLITE_READONLY_RECOVERY:
        return StoreUnavailable(message)
    if primary in _SQLITE_CORRUPT:
        return StoreCorrupt(message + CORRUPT_HINT)
    if primary in _SQLITE_CONFIGURATION:
        return ConfigurationError(message)
    if primary in _SQLITE_INVALID:
        return InvalidRequest(message)
    if primary == _SQLITE_CONSTRAINT:
        if code in _SQLITE_CONSTRAINT_INVALID:
            return InvalidRequest(message)
        return Conflict(message)
    return DurastateError(message)
