"""The store URL of an example: its first argument, or a fresh SQLite file."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def store_url(argv: list[str], name: str) -> Iterator[str]:
    """``argv[1]`` if given, else ``sqlite:///<temporary folder>/<name>.db`` (removed afterwards)."""
    if len(argv) > 1:
        yield argv[1]
        return
    with tempfile.TemporaryDirectory(prefix=f"durastate-{name}-") as folder:
        yield f"sqlite://{Path(folder) / name}.db"
