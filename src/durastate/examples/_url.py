"""The store URL of an example: ``--url URL``, or a fresh SQLite file in a temporary folder."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def store_url(argv: Sequence[str], name: str, description: str) -> Iterator[str]:
    """Parse an example's arguments (``argv`` without the program name) and yield its store URL.

    ``--url URL`` if given, else ``sqlite:///<temporary folder>/<name>.db``, removed afterwards. ``--help``
    prints the usage and exits 0; an unknown argument exits 2 with argparse's message. Nothing is created
    before the arguments have been read, so ``--help`` leaves no file behind.
    """
    parser = argparse.ArgumentParser(prog=f"python -m durastate.examples.{name}", description=description)
    parser.add_argument("--url", help="any durastate URL (default: a SQLite file in a temporary folder)")
    args = parser.parse_args(list(argv))
    if args.url is not None:
        yield args.url
        return
    with tempfile.TemporaryDirectory(prefix=f"durastate-{name}-") as folder:
        yield f"sqlite://{Path(folder) / name}.db"
