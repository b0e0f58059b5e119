"""What every ``durastate`` command shares: options, opening, output, exit codes, progress.

* ``--url`` (env ``DURASTATE_URL``) on every command that opens a store; a
  SQLite path that does not exist is "not found" (exit 3) for every command
  but ``import`` and ``demo`` (a typo must not create an empty store); a
  URL scheme no engine serves is a usage error naming the served ones.
* ``--json`` on every command that prints data: one JSON document on
  stdout; a listing is ``{"items": [...], "next": cursor-or-null}``.
* Bytes, text and time follow ``durastate.cli._format``: escaped in tables
  and plain output, lossless (``hex:`` when not UTF-8) in JSON and in
  arguments, ISO-8601 with offset in JSON.
* Tables use rich when it is installed (``pip install 'durastate[cli]'``)
  and aligned plain text otherwise; progress goes to stderr, only when it
  is a terminal.
* Exit codes (``EXIT_CODES``, printed by ``durastate --help``): 0 ok, 1 an
  error, 2 a usage error, 3 not found, 4 port in use, 141 output closed
  early (a reader such as ``head`` stopped reading: quiet, as git).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

import durastate
from durastate.engines import registry
from durastate.errors import DurastateError

from ._format import (
    BytesSyntaxError,
    decode_bytes,
    encode_bytes,
    escape,
    human_bytes,
    human_duration,
    iso_time,
    json_text,
    jsonable,
    show_name,
    show_value,
    table_time,
)

__all__ = ["BytesSyntaxError", "human_bytes", "human_duration", "iso_time"]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_PORT_IN_USE = 4
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for git or cat cut short by `| head`
EXIT_CODES = (
    (EXIT_OK, "ok"),
    (EXIT_ERROR, "an error (the store's, a file's, a refused import, a doctor problem)"),
    (EXIT_USAGE, "a usage error (unknown command or option, bad argument, unsupported --url scheme)"),
    (EXIT_NOT_FOUND, "not found (the store, key, document, session or file named does not exist)"),
    (EXIT_PORT_IN_USE, "port in use (durastate ui)"),
    (EXIT_BROKEN_PIPE, "the output was closed early (e.g. by `| head`), ended quietly"),
)

URL_HELP = (
    "Store URL: a SQLite path, sqlite:///abs/path.db, or postgresql://user@host/db (default: ./.durastate/state.db)."
)


class NotFound(click.ClickException):
    """What the command was asked to show does not exist (exit code 3).

    Every such message reads ``Error: NotFound: ...``, the command's own and
    durastate's ``NotFound`` alike (as other durastate errors name their class),
    so a script can tell "not found" from the message as from the exit code.
    """

    exit_code = EXIT_NOT_FOUND
    PREFIX = "NotFound: "

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith(self.PREFIX) else self.PREFIX + message)


class PortInUse(click.ClickException):
    """``durastate ui`` cannot listen: the port is taken (exit code 4)."""

    exit_code = EXIT_PORT_IN_USE


def prefix_option(help: str) -> Callable[[F], F]:
    """``--table-prefix`` (also ``DURASTATE_PREFIX``), default ``ds_``, with ``help``."""
    return click.option(
        "--table-prefix",
        "prefix",
        default="ds_",
        show_default=True,
        envvar="DURASTATE_PREFIX",
        show_envvar=True,
        help=help,
    )


def url_option(func: F) -> F:
    """``--url`` (also ``DURASTATE_URL``) and ``--table-prefix`` for a command that opens a store."""
    func = prefix_option("Table prefix of the store.")(func)
    func = click.option("--url", envvar="DURASTATE_URL", show_envvar=True, default=None, help=URL_HELP)(func)
    return func


def data_command(func: F) -> F:
    """``--url``, ``--table-prefix`` and ``--json`` on a command, and its errors as exit codes."""
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


def check_scheme(url: str | None) -> None:
    """A usage error (exit 2) for a URL whose scheme no engine serves, naming those that are served."""
    try:
        scheme = registry.scheme_of(url)
        served = registry.registered()
        if scheme in served:
            return
        registry.create(url, {})  # loads an entry point's engine, or names the known schemes
    except DurastateError as exc:
        if "scheme" not in str(exc):
            raise
        known = ", ".join(f"{s}:" for s in registry.registered())
        raise click.BadParameter(
            f"{redact(escape(str(url)))}: the URL scheme {escape(scheme)!r} is not supported; "
            f"supported: {known} (or a path to a SQLite file)",
            param_hint="--url",
        ) from None


def sqlite_file(url: str | None) -> Path | None:
    """The file a SQLite URL names (the default store's for None), or None: the engine registry's parser."""
    path = registry.file_of(url)
    return None if path is None else Path(path)


def check_url(url: str | None) -> None:
    """A usage error (exit 2) for a ``--url`` that names no store a command could work on: an empty one (an
    unset-looking ``DURASTATE_URL=``), a malformed SQLite URL, or ``memory:`` (a store that lives inside one
    process: another process's is out of reach, a new one is empty); then ``check_scheme``."""
    if url is None:
        return
    if not url.strip():
        raise click.BadParameter("is empty: pass a SQLite path or a postgresql:// URL", param_hint="--url")
    check_scheme(url)
    try:
        path = sqlite_file(url)
    except DurastateError as exc:
        raise click.BadParameter(escape(str(exc)), param_hint="--url") from None
    if path is None and registry.scheme_of(url) == "sqlite":
        raise click.BadParameter(
            f"{escape(url)} is an in-memory store, which lives inside one process: name a SQLite file or a "
            "postgresql:// URL",
            param_hint="--url",
        )


def check_destination(dest: str, *, overwrite: bool = False, flag: str | None = None) -> None:
    """Refuse, before any work, a DEST that cannot be written as a new file: a directory or a path whose folder
    does not exist (usage errors, exit 2), or a file that exists unless ``overwrite`` (exit 1; ``flag`` is the
    option that allows it)."""
    target = Path(dest)
    if target.is_dir():
        raise click.BadParameter(f"{escape(dest)} is a directory: name a file (in it)", param_hint="DEST")
    folder = target.parent
    if not folder.is_dir():
        raise click.BadParameter(
            f"the folder {escape(str(folder))} does not exist (or is not a folder): create it first", param_hint="DEST"
        )
    if target.exists() and not overwrite:
        how = f" or pass {flag} to replace it" if flag else ""
        raise click.ClickException(f"{escape(dest)} exists; pick a new name{how}")


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
    check_url(url)
    path = sqlite_file(url)
    if path is not None and not create and not path.exists():
        raise NotFound(f"no store at {escape(str(path))} (pass --url or set DURASTATE_URL)")
    try:
        return durastate.open(url, prefix=prefix, retention=retention, read_only=read_only)
    except DurastateError as exc:
        raise click.ClickException(escape(str(exc))) from None


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
    """Report errors as ``Error: ...`` with their exit code (not a traceback), every message escaped.

    durastate's ``NotFound`` exits 3, a bad ``hex:`` argument 2, any other
    durastate error or OSError 1. A closed stdout (``BrokenPipeError``) goes
    on to the group, which exits quietly (``Cli.invoke``).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            raise
        except click.ClickException as exc:
            # click types ``message`` as final; the escaped text replaces it before click prints it.
            object.__setattr__(exc, "message", escape(exc.message))
            raise
        except BytesSyntaxError as exc:
            raise click.UsageError(escape(str(exc))) from None
        except durastate.NotFound as exc:
            raise NotFound(escape(str(exc))) from None
        except DurastateError as exc:
            raise click.ClickException(escape(f"{type(exc).__name__}: {exc}")) from None
        except OSError as exc:
            raise click.ClickException(escape(str(exc))) from None

    return wrapper  # type: ignore[return-value]


def quiet_broken_pipe() -> None:
    """After stdout's reader went away: point stdout at /dev/null so the exit flush is silent."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# -- bytes on the command line (the rules are durastate.cli._format's) ---------------

parse_bytes = decode_bytes
show_bytes = show_name  # kept for callers that import the older name


def render_value(value: bytes, fmt: str) -> Any:
    """A stored value as ``text`` (the bytes, shown by ``emit``), ``hex`` (digits) or ``json`` (parsed).

    ``json`` of a value that is not JSON gives the bytes back (shown as text
    or in their lossless form), so one odd value does not fail a listing.
    """
    if fmt == "hex":
        return value.hex()
    if fmt == "json":
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "hex", "json"]),
    default="text",
    show_default=True,
    help="How values are shown (text: escaped in tables, lossless in --json).",
)


# -- output -------------------------------------------------------------------


class Name(bytes):
    """Bytes that name something (a key, scope, queue): tables show them in argument form (``show_name``)."""


class Time(int):
    """Epoch milliseconds: ISO-8601 with offset in JSON, ``table_time`` in tables."""


class Duration(float):
    """Seconds: a number in JSON, with a unit in tables (``human_duration``)."""


class Size(int):
    """Bytes counted: a number in JSON, humanised in tables (``human_bytes``)."""


def name(value: bytes | None) -> Name | None:
    return None if value is None else Name(value)


def at(ms: float | None) -> Time | None:
    return None if ms is None else Time(round(ms))


def to_json(value: Any) -> Any:
    """``value`` ready for JSON: bytes in their lossless form, times as ISO-8601 (at any depth)."""
    if isinstance(value, Time):
        return iso_time(value)
    if isinstance(value, (Duration, Size)):
        return float(value) if isinstance(value, Duration) else int(value)
    if isinstance(value, dict):
        return {(encode_bytes(k) if isinstance(k, bytes) else k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    return jsonable(value)


def print_json(data: Any) -> None:
    """``data`` as one indented JSON document on stdout, safe on a terminal (``_format.json_text``)."""
    _Chunked(sys.stdout).write(json_text(to_json(data), indent=True) + "\n")


# A value longer than this (bytes; characters for text) is cut in a table cell, as in the inspector's tables
# (ui.render.PREVIEW): a 1 MB value must not flood the terminal. --json prints every value whole.
CELL_LIMIT = 120


def too_long(value: Any) -> bool:
    """True when ``value`` is cut in a table cell (names never are: a shown name must paste back whole)."""
    if isinstance(value, Name) or not isinstance(value, (bytes, bytearray, memoryview, str)):
        return False
    return len(value) > CELL_LIMIT


def _cut_marker(size: int, unit: str) -> str:
    return f" …[cut: {size:,} {unit} in all]"


def _utf8_head(value: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of ``value``, less a UTF-8 character the cut would split."""
    head = value[:limit]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= limit - 3 and exc.reason == "unexpected end of data":
            return head[: exc.start]
    return head


def cell(value: Any, *, cut: bool = True) -> str:
    """One table cell, never carrying a control character; a long value cut (``CELL_LIMIT``) with a marker
    saying how long it is, unless not ``cut``."""
    if value is None:
        return ""
    if isinstance(value, Name):
        return show_name(bytes(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if cut and too_long(data):
            return show_value(_utf8_head(data, CELL_LIMIT)) + _cut_marker(len(data), "bytes")
        return show_value(data)
    if isinstance(value, Time):
        return table_time(value)
    if isinstance(value, Duration):
        return human_duration(value)
    if isinstance(value, Size):
        return human_bytes(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = json_text(to_json(value)) if isinstance(value, (dict, list)) else str(value)
    if cut and too_long(text):
        return escape(text[:CELL_LIMIT]) + _cut_marker(len(text), "characters")
    return escape(text)


def print_table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    *,
    title: str | None = None,
    whole: str | None = None,
    cut: bool = True,
) -> None:
    """``rows`` as a table of ``columns`` (rich if installed, else aligned text); every cell escaped.

    Values longer than ``CELL_LIMIT`` are cut; then a note on stderr says where the whole values are:
    ``--json``, and ``whole`` (a command that prints one, e.g. ``durastate kv get SCOPE NS KEY``) if given.
    ``cut=False``: a table of the command's own findings (``doctor``), not of stored data, is shown whole.
    """
    cells = [[cell(row.get(c), cut=cut) for c in columns] for row in rows]
    _print_cells(cells, columns, title)
    if cut and any(too_long(_shown(row.get(c))) for row in rows for c in columns):
        where = "--json" if whole is None else f"{whole} or --json"
        click.echo(f"note: values longer than {CELL_LIMIT} are cut in this table; {where} prints them whole", err=True)


def _shown(value: Any) -> Any:
    """What ``cell`` measures of ``value`` to decide whether it is cut."""
    return json_text(to_json(value)) if isinstance(value, (dict, list)) else value


def _print_cells(cells: list[list[str]], columns: Sequence[str], title: str | None) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        if title:
            click.echo(escape(title))
        widths = [max([len(c), *(min(len(r[i]), 80) for r in cells)]) for i, c in enumerate(columns)]
        click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        for r in cells:
            # Cells are bounded (CELL_LIMIT and the marker): shown whole, so the marker is not cut away.
            click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        return
    # Text, not str: rich would read "[red]" in stored data as its markup.
    table = Table(title=None if title is None else Text(escape(title)), show_lines=False, header_style="bold")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in cells:
        table.add_row(*(Text(v) for v in r))
    console = _console(Console)(file=_Chunked(sys.stdout), soft_wrap=False, width=None if sys.stdout.isatty() else 200)
    console.print(table)


def _console(base: Any) -> Any:
    """rich's Console, but a closed stdout raises ``BrokenPipeError`` (rich itself exits) so every
    command ends the same way on EPIPE (``Cli.invoke``)."""

    class PipeConsole(base):  # type: ignore[misc]
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return PipeConsole


class _Chunked:
    """``stream`` written 64 KiB at a time: rich writes a whole table at once, and one large write to a
    pipe whose reader left (``| head``) ends in a short write that Python does not report; the next
    chunk's write raises ``BrokenPipeError``."""

    CHUNK = 64 * 1024

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        for start in range(0, len(text), self.CHUNK):
            self._stream.write(text[start : start + self.CHUNK])
            self._stream.flush()
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


T = TypeVar("T")


def take_page(
    fetch: Callable[[Any, int], list[T]], after: Any, limit: int, cursor_of: Callable[[T], Any]
) -> tuple[list[T], Any]:
    """Up to ``limit`` items after ``after`` and the cursor of the next page (None at the end).

    ``fetch(after, n)`` reads ``n`` items after a cursor. A full page costs
    one more read of one item, so "more" is never a guess.
    """
    items = fetch(after, limit)
    if len(items) < limit:
        return items, None
    last = cursor_of(items[-1])
    return items, (last if fetch(last, 1) else None)


def emit_page(
    rows: Sequence[dict[str, Any]],
    next_cursor: Any,
    as_json: bool,
    columns: Sequence[str],
    *,
    flag: str = "--after",
    title: str | None = None,
    whole: str | None = None,
) -> None:
    """A page: ``{"items": rows, "next": cursor}`` with ``--json``; else a table and, when there is more,
    a hint on stderr: ``more: --after CURSOR`` (quoted for a POSIX shell)."""
    if as_json:
        print_json({"items": list(rows), "next": _cursor_json(next_cursor)})
        return
    print_table(rows, columns, title=title, whole=whole)
    if next_cursor is not None:
        click.echo(f"more: {flag} {shlex.quote(_cursor_shown(next_cursor))}", err=True)


def _cursor_json(cursor: Any) -> Any:
    return encode_bytes(cursor) if isinstance(cursor, bytes) else cursor


def _cursor_shown(cursor: Any) -> str:
    return show_name(cursor) if isinstance(cursor, bytes) else escape(str(cursor))


def emit(data: Any, as_json: bool, rows: Sequence[dict[str, Any]] | None = None, columns: Sequence[str] = ()) -> None:
    """``data`` as JSON with ``--json``, else ``rows`` (default: ``data``) as a table."""
    if as_json:
        print_json(data)
    else:
        print_table(data if rows is None else rows, columns)


def ms_time(ms: int | None) -> str:
    """Epoch milliseconds for a table (``_format.table_time``)."""
    return table_time(ms)


# -- progress -----------------------------------------------------------------


class Progress:
    """Rows and bytes done, shown on stderr while it is a terminal.

    With rich: a bar with rows/s and bytes/s. Without rich, or when stderr is
    not a terminal: nothing while running, one summary line at the end.
    ``step(name, rows)`` marks a finished stage of the work (``maintain``'s
    rules): the bar's label with rich, a plain line on the terminal without.
    """

    def __init__(
        self,
        label: str,
        total_rows: int | None,
        *,
        enabled: bool | None = None,
        unit: str = "rows",
        sizes: bool = True,
    ) -> None:
        self.label = label
        self.unit = unit  # what is counted: "rows", or "pages" for a file backup
        self.sizes = sizes  # False: the work is not measured in bytes (maintain deletes rows); the summary says none
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
            click.echo(f"{self.label}: {name} {rows:,} {self.unit} ({self.rows:,} so far)", err=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def summary(self) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        if not self.sizes:
            return (
                f"{self.label}: {self.rows:,} {self.unit} in {human_duration(elapsed)} "
                f"({self.rows / elapsed:,.0f} {self.unit}/s)"
            )
        return (
            f"{self.label}: {self.rows:,} {self.unit}, {human_bytes(self.bytes)} in {human_duration(elapsed)} "
            f"({self.rows / elapsed:,.0f} {self.unit}/s, {human_bytes(self.bytes / elapsed)}/s)"
        )


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def temporary_sibling(dest: Path) -> Path:
    """A name next to ``dest`` to write to before the final rename."""
    return dest.with_name(f".{dest.name}.partial-{os.getpid()}")
