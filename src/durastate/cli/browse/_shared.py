"""What every browsing command shares: paging options, asking before a write, key-range bounds."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

LIMIT = click.option(
    "--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, help="At most this many (a page)."
)


def after_option(help: str, type: Any = None) -> Callable[[F], F]:
    """``--after CURSOR``: where the previous page ended."""
    return click.option("--after", default=None, type=type, metavar="CURSOR", help=help)


def bytes_successor(prefix: bytes) -> bytes | None:
    """The smallest bytes string greater than every string starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def confirm_write(what: str, yes: bool) -> None:
    """Ask before a write (``--yes`` skips); without a terminal to ask on, refuse (exit 2) unless ``--yes``."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"this would {what}; pass --yes to do it without a terminal to confirm on")
    click.confirm(f"{what[0].upper()}{what[1:]}?", abort=True, err=True)


YES = click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
