"""What every browsing command shares: paging options, asking before a write, key-range bounds."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from durastate._validate import INT64_MAX, INT64_MIN
from durastate.errors import InvalidRequest

from .._common import NotFound

F = TypeVar("F", bound=Callable[..., Any])

LIMIT = click.option(
    "--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, help="At most this many (a page)."
)


# A number the store keeps (an id, index, ordinal, revision, commit sequence) is a signed 64-bit integer;
# one outside that range, or not a number, is a bad argument: a usage error (exit 2), as click reports it.
INT64 = click.IntRange(INT64_MIN, INT64_MAX)
POSITIVE_INT64 = click.IntRange(1, INT64_MAX)


def int64_argument(text: str, flag: str, what: str) -> int:
    """``text`` as a signed 64-bit integer, or a usage error (exit 2) for ``flag`` saying it must be ``what``."""
    try:
        number = int(text)
    except ValueError:
        number = None
    if number is None or not INT64_MIN <= number <= INT64_MAX:
        raise click.BadParameter(
            f"{what} (a whole number from {INT64_MIN} to {INT64_MAX}), got {text!r:.40}", param_hint=flag
        )
    return number


@contextlib.contextmanager
def argument_checked_by_store(flag: str) -> Iterator[None]:
    """The store refusing the value of ``flag`` (``InvalidRequest``, e.g. a malformed cursor) is a usage error
    (exit 2): the value came from the command line as it was typed."""
    try:
        yield
    except InvalidRequest as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


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


def dead_letters_named(
    named: tuple[int, ...], is_dead: Callable[[int], bool], what: str, where: str, listing: str
) -> int:
    """How many dead letters a redrive of ``named`` moves; ``NotFound`` (nothing moved) naming those that are not.

    ``what``: how one is named ("dead letter", "dead event at index");
    ``where``: the queue or session, as shown; ``listing``: the command
    that lists them.
    """
    missing = [n for n in dict.fromkeys(named) if not is_dead(n)]
    if missing:
        raise NotFound(f"no {what} {', '.join(map(str, missing))} in {where} ({listing} lists them)")
    return len(set(named))


YES = click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
