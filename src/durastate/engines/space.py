"""``SpaceReport``: what an engine's ``reclaim_space`` gave back (``Store.maintain``)."""

from __future__ import annotations

__all__ = ["SpaceReport"]


class SpaceReport:
    """Bytes the store's files shrank by; bytes still free inside them; whether the WAL is empty (SQLite)."""

    __slots__ = ("bytes_returned", "free_bytes", "wal_truncated")

    def __init__(self, bytes_returned: int = 0, free_bytes: int = 0, wal_truncated: bool = False) -> None:
        self.bytes_returned = bytes_returned
        self.free_bytes = free_bytes
        self.wal_truncated = wal_truncated

    def __repr__(self) -> str:
        return (
            f"SpaceReport(bytes_returned={self.bytes_returned}, free_bytes={self.free_bytes}, "
            f"wal_truncated={self.wal_truncated})"
        )
