"""What every ``durastate`` command shares: options, opening, output, progress.

* ``--url`` (env ``DURASTATE_URL``) on every command that opens a store; a
  SQLite path that does not exist is an error for every command but
  ``import`` and ``demo`` (a typo must not create an empty store).
* ``--json`` on every command that prints data: one JSON document on
  stdout. Bytes (kv scopes, keys, values; queue names and payloads) are
  printed as text when they are valid UTF-8 and do not start with
  ``hex:``, else as ``hex:`` followed by their hex digits; arguments take
  the same form (``hex:00ff`` is the two bytes 0x00 0xff).
* Tables use rich when it is installed (``pip install 'durastate[cli]'``)
  and aligned plain text otherwise; progress goes to stderr, only when it
  is a terminal.
* Exit codes: 0 ok, 1 an error (durastate's, a file, a refused import),
  2 a usage error (click's).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

import durastate
from durastate.engines import registry
from durastate.errors import DurastateError, InvalidRequest

F = TypeVar("F", bound=Callable[..., Any])

URL_HELP = (
    "Store URL: a SQLite path, sqlite:///abs/path.db, or postgresql://user@host/db (default: ./.durastate/state.db)."
)


def url_option(func: F) -> F:
    """``--url`` (also ``DURASTATE_URL``) and ``--table-prefix`` for a command that opens a store."""
    func = click.option(
        "--table-prefix",
        "prefix",
        default="ds_",
        show_default=True,
        envvar="DURASTATE_PREFIX",
        show_envvar=True,
        help="Table prefix of the store.",
    )(func)
    func = click.option("--url", envvar="DURASTATE_URL", show_envvar=True, default=None, help=URL_HELP)(func)
    return func


def data_command(func: F) -> F:
    """``--url``, ``--table-prefix`` and ``--json`` on a command, and its errors as exit code 1."""
    return url_option(json_option(errors_as_exit_1(func)))


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of a table.")(func)


def redact(url: str) -> str:
    """``url`` without its password."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}@{host}"


def is_postgres(url: str | None) -> bool:
    return url is not None and registry.scheme_of(url) in ("postgresql", "postgres")


def sqlite_file(url: str | None) -> Path | None:
    """The file a SQLite URL names (the default store's for None), or None: the engine registry's parser."""
    path = registry.file_of(url)
    return None if path is None else Path(path)


def open_store(
    url: str | None,
    prefix: str,
    *,
    create: bool = False,
    retention: durastate.Retention | None = None,
    read_only: bool = False,
) -> durastate.Store:
    """Open the store, refusing to create a SQLite file unless ``create``; ``retention``: its policy.

    ``read_only``: for the commands that only show (``open_for_reading``).
    """
    path = sqlite_file(url)
    if path is not None and not create and not path.exists():
        raise click.ClickException(f"no store at {path} (pass --url or set DURASTATE_URL)")
    try:
        return durastate.open(url, prefix=prefix, retention=retention, read_only=read_only)
    except DurastateError as exc:
        raise click.ClickException(str(exc)) from None


def open_for_reading(url: str | None, prefix: str) -> durastate.Store:
    """Open the store read-only: for ``info``, ``doctor``, ``stats``, ``export``, browsing and ``ui``.

    They write nothing: not a migration of an older store (refused, with
    the way out: open it writable once), not a sweep, not an attempt row.
    So they work under a database role that may only SELECT and on a file
    the process may not write.
    """
    return open_store(url, prefix, read_only=True)


@contextlib.contextmanager
def store_from(
    url: str | None,
    prefix: str,
    *,
    create: bool = False,
    retention: durastate.Retention | None = None,
    read_only: bool = False,
) -> Iterator[durastate.Store]:
    store = open_store(url, prefix, create=create, retention=retention, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


def errors_as_exit_1(func: F) -> F:
    """Report durastate errors as ``error: ...`` with exit code 1 (not a traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BytesSyntaxError as exc:
            raise click.UsageError(str(exc)) from None
        except DurastateError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


# -- bytes on the command line ------------------------------------------------


class BytesSyntaxError(InvalidRequest):
    """A ``hex:`` argument that is not hex (a usage error: exit code 2)."""


def parse_bytes(text: str) -> bytes:
    """A command-line bytes argument: UTF-8 text, or ``hex:`` + hex digits."""
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError:
            raise BytesSyntaxError(f"{text!r}: hex: must be followed by pairs of hex digits") from None
    return text.encode("utf-8", "surrogateescape")


def show_bytes(value: bytes) -> str:
    """Bytes as text when that is unambiguous, else ``hex:...`` (``parse_bytes`` reads it back)."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + value.hex()
    if text.startswith("hex:") or not text.isprintable():
        return "hex:" + value.hex()
    return text


def render_value(value: bytes, fmt: str) -> Any:
    """A stored value as ``text`` (UTF-8, escapes for bad bytes), ``hex`` or ``json`` (parsed)."""
    if fmt == "hex":
        return value.hex()
    if fmt == "json":
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            raise click.ClickException("value is not JSON (use --format text or hex)") from None
    return value.decode("utf-8", "backslashreplace")


FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "hex", "json"]),
    default="text",
    show_default=True,
    help="How values are shown.",
)


# -- output -------------------------------------------------------------------


def json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return show_bytes(bytes(value))
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot print {type(value).__name__} as JSON")


def print_json(data: Any) -> None:
    text = orjson.dumps(data, default=json_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    click.echo(text.decode())


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return show_bytes(bytes(value))
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, default=json_default).decode()
    return str(value)


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, title: str | None = None) -> None:
    """``rows`` as a table of ``columns`` (rich if installed, else aligned text)."""
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        if title:
            click.echo(title)
        widths = [max([len(c), *(min(len(r[i]), 80) for r in cells)]) for i, c in enumerate(columns)]
        click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        for r in cells:
            click.echo("  ".join(v[:80].ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        return
    table = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in cells:
        table.add_row(*r)
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200).print(table)


def emit_page(name: str, rows: Sequence[dict[str, Any]], cursor: Any, as_json: bool, columns: Sequence[str]) -> None:
    """A page of ``rows``: ``{name: rows, "cursor": cursor}`` with ``--json``, else a table and a hint."""
    emit({name: rows, "cursor": cursor}, as_json, rows, columns)
    if cursor is not None and not as_json:
        click.echo(f"more: --cursor {cursor}" if isinstance(cursor, str) else f"more: --after {cursor}", err=True)


def emit(data: Any, as_json: bool, rows: Sequence[dict[str, Any]] | None = None, columns: Sequence[str] = ()) -> None:
    """``data`` as JSON with ``--json``, else ``rows`` (default: ``data``) as a table."""
    if as_json:
        print_json(data)
    else:
        print_table(data if rows is None else rows, columns)


def ms_time(ms: int | None) -> str:
    """Epoch milliseconds as local ``YYYY-mm-dd HH:MM:SS``."""
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


# -- progress -----------------------------------------------------------------


class Progress:
    """Rows and bytes done, shown on stderr while it is a terminal.

    With rich: a bar with rows/s and bytes/s. Without rich, or when stderr is
    not a terminal: nothing while running, one summary line at the end.
    ``step(name, rows)`` marks a finished stage of the work (``maintain``'s
    rules): the bar's label with rich, a plain line on the terminal without.
    """

    def __init__(self, label: str, total_rows: int | None, *, enabled: bool | None = None, unit: str = "rows") -> None:
        self.label = label
        self.unit = unit  # what is counted: "rows", or "pages" for a file backup
        self.total = total_rows
        self.rows = 0
        self.bytes = 0
        self._started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        show = sys.stderr.isatty() if enabled is None else enabled
        self._plain = show  # until rich is found: steps as plain lines
        if show:
            try:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    TextColumn,
                    TimeElapsedColumn,
                )
                from rich.progress import Progress as RichProgress
            except ImportError:
                return
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(unit + "  {task.fields[rate]}"),
                TimeElapsedColumn(),
                transient=False,
                console=_stderr_console(),
            )
            self._task = self._bar.add_task(label, total=total_rows, rate="")
            self._plain = False

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def advance(self, rows: int, nbytes: int = 0) -> None:
        self.rows += rows
        self.bytes += nbytes
        if self._bar is not None:
            elapsed = max(time.monotonic() - self._started, 1e-6)
            rate = f"{self.rows / elapsed:,.0f} {self.unit}/s  {human_bytes(self.bytes / elapsed)}/s"
            self._bar.update(self._task, completed=self.rows, total=self.total, rate=rate)

    def step(self, name: str, rows: int) -> None:
        """Stage ``name`` is done, having handled ``rows`` rows (counted in as ``advance`` does)."""
        self.advance(rows)
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self.label}: {name}")
        elif self._plain:
            click.echo(f"{self.label}: {name} {rows:,} rows ({self.rows:,} so far)", err=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def summary(self) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        return (
            f"{self.label}: {self.rows:,} {self.unit}, {human_bytes(self.bytes)} in {elapsed:.2f} s "
            f"({self.rows / elapsed:,.0f} {self.unit}/s, {human_bytes(self.bytes / elapsed)}/s)"
        )


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"  # pragma: no cover


def temporary_sibling(dest: Path) -> Path:
    """A name next to ``dest`` to write to before the final rename."""
    return dest.with_name(f".{dest.name}.partial-{os.getpid()}")
