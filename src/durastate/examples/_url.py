"""The store URL of an example: ``--url URL``, or a fresh SQLite file in a temporary folder."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


def two_processes(
    argv: Sequence[str] | None,
    name: str,
    description: str,
    first: Callable[[str], Coroutine[Any, Any, None]],
    second: Callable[[str], Coroutine[Any, Any, None]],
) -> None:
    """Run ``first(url)`` here, then ``second(url)`` in a NEW Python process on the same store URL.

    The URL is ``--url`` or a fresh SQLite file (``store_url``); the second process is this example run
    again with the hidden ``--second-turn`` flag, so it shares nothing with the first but the store.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "--second-turn" in args:
        args.remove("--second-turn")
        with store_url(args, name, description) as url:
            asyncio.run(second(url))
        return
    with store_url(args, name, description) as url:
        asyncio.run(first(url))
        again = [sys.executable, "-m", f"durastate.examples.{name}", "--second-turn", "--url", url]
        subprocess.run(again, check=True)
