"""The ``durastate`` command group and its operational commands.

Browsing commands are in ``durastate.cli.browse``; shared options, output
and progress in ``durastate.cli._common`` (which documents ``--url``,
``--json``, the bytes syntax and the exit codes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import click

import durastate
from durastate.engines.tools import BackupResult
from durastate.errors import NotSupported

from . import browse, dump, shards
from ._common import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    Duration,
    Name,
    NotFound,
    Progress,
    Size,
    check_destination,
    data_command,
    emit,
    errors_as_exit_1,
    human_bytes,
    human_duration,
    json_option,
    open_for_reading,
    prefix_option,
    print_json,
    print_table,
    quiet_broken_pipe,
    redact,
    sqlite_file,
    store_from,
    temporary_sibling,
    url_option,
)
from ._format import escape, fact_lines
from .checks import Check, checks, named, verdict
from .inspect import facet_stats, health, table_stats, top_groups

DOCS = (
    "the documentation site's CLI page (docs/cli.md of the source distribution and repository; "
    "`mkdocs serve` there shows the site)"
)
EPILOG = (
    "Every command takes --url (or DURASTATE_URL) and, where it prints data, --json; listings page with "
    "--limit and --after (the cursor a page ends with). Bytes arguments are UTF-8 text or hex:<digits>, the "
    "form --json prints. Stored text is shown with control characters escaped.\n\n"
    "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + ".\n\n"
    f"Each command explains itself with --help; the full reference is {DOCS}."
)


class Cli(click.Group):
    """The command group: a stdout closed by its reader (``| head``) ends the command quietly."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            quiet_broken_pipe()
            ctx.exit(EXIT_BROKEN_PIPE)


@click.group(cls=Cli, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(durastate.__version__, prog_name="durastate")
def cli() -> None:
    """Inspect, back up, move and maintain a durastate store."""


def main() -> None:
    """Console-script entry point (``durastate``)."""
    cli(prog_name="durastate")


for group in (browse.kv, browse.queue, browse.events, browse.docs, browse.records, browse.presence, shards.shards):
    cli.add_command(group)


# -- info / doctor / stats ------------------------------------------------------


def _print_health(h: Any, as_json: bool) -> None:
    facts = named(h.facts)
    if as_json:
        print_json({**facts, "warnings": h.warnings, "problems": h.problems})
        return
    width = max(len(k) for k in facts)
    for key, value in facts.items():
        first, *more = fact_lines(key, value)
        click.echo(f"{key.ljust(width)}  {escape(first)}")
        for line in more:  # a failed integrity check's findings, one a line, under the first
            click.echo(f"{'':{width}}  {escape(line)}")
    for w in h.warnings:
        click.echo(f"warning: {escape(w)}")
    for p in h.problems:
        click.echo(f"PROBLEM: {escape(p)}")


@cli.command()
@data_command
def info(url: str | None, prefix: str, as_json: bool) -> None:
    """Engine, URL (password hidden), sizes, pragmas, schema versions, a quick integrity check, warnings."""
    with store_from(url, prefix, read_only=True) as store:
        _print_health(health(store), as_json)


@cli.command()
@data_command
def doctor(url: str | None, prefix: str, as_json: bool) -> None:
    """Check the store and give a verdict per check: ok, warning or problem; exit 1 when a problem is found.

    Checks: the store opens, schema versions, the full integrity check
    (SQLite PRAGMA integrity_check), and per engine: SQLite's journal mode,
    durability (synchronous), free pages, filesystem, WAL size, whether the
    file is writable; PostgreSQL's attempt table and what a failover can
    lose. Warnings alone exit 0. The facts behind them: durastate info.
    """
    path = sqlite_file(url)
    if path is not None and path.exists():
        try:
            durastate.open(url, prefix=prefix, read_only=True).close()
        except durastate.StoreCorrupt as exc:
            # So damaged that it cannot even be opened: that is the finding.
            failed = Check("store opens", "problem", f"integrity check failed: {exc}")
            _print_checks([failed], "problem", as_json, {})
            sys.exit(1)
        except durastate.DurastateError:
            pass  # reported as usual by store_from below
    with store_from(url, prefix, read_only=True) as store:
        h = health(store, check="full")
    found = [Check("store opens", "ok", redact(store.url)), *checks(h)]
    _print_checks(found, verdict(found), as_json, {**named(h.facts), "warnings": h.warnings, "problems": h.problems})
    if h.problems:
        sys.exit(1)


VERDICT_SUMMARY = {"ok": "healthy", "warning": "usable, with warnings", "problem": "PROBLEM found"}


def _print_checks(checks: list[Check], verdict: str, as_json: bool, facts: dict[str, Any]) -> None:
    """The checks as a table and a verdict line; ``--json`` adds the facts (``info``'s) for scripts."""
    if as_json:
        print_json({"verdict": verdict, "checks": [dataclasses.asdict(c) for c in checks], **facts})
        return
    print_table([dataclasses.asdict(c) for c in checks], ["check", "verdict", "detail"], cut=False)
    click.echo(f"verdict: {VERDICT_SUMMARY[verdict]}")


@cli.command()
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="Groups shown per facet.")
@data_command
def stats(top: int, url: str | None, prefix: str, as_json: bool) -> None:
    """Rows and bytes per facet and table, and the largest scopes, queues, sessions and prefixes."""
    with store_from(url, prefix, read_only=True) as store:
        tables = table_stats(store)
        groups = top_groups(store, top)
    facets = facet_stats(tables)
    if as_json:
        print_json({"facets": facets, "tables": tables, "top": groups})
        return

    def sized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "size": None if r["bytes"] is None else Size(r["bytes"])} for r in rows]

    print_table(sized(facets), ["facet", "rows", "size"], title="facets")
    print_table(sized(tables), ["facet", "table", "rows", "size"], title="tables")
    for label, rows in groups.items():
        if rows:
            named = [{**r, "name": Name(r["name"]) if isinstance(r["name"], bytes) else r["name"]} for r in rows]
            print_table(sized(named), ["name", "rows", "size"], title=label)


TOKEN_RE = re.compile(r"[A-Za-z0-9._~-]+")

# -- export / import / backup ---------------------------------------------------


@contextlib.contextmanager
def _atomic_output(dest: str) -> Iterator[IO[bytes]]:
    """Write to a temporary sibling of ``dest``, renamed over it only on success.

    ``-`` is stdout. A ``.gz`` name is gzip-compressed. On any exception
    (Ctrl-C included) the temporary file is removed and ``dest`` untouched.
    """
    if dest == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(dest)
    tmp = temporary_sibling(target)
    try:
        # Created 0600, as the store and its backups: an export holds all of the store's data.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:  # the user named dest, not the hidden temporary name
        raise click.ClickException(f"cannot write {escape(dest)}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            out: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb") if target.suffix == ".gz" else raw  # type: ignore[assignment]
            yield out
            if out is not raw:
                out.close()
            raw.flush()
            os.fsync(raw.fileno())
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise click.ClickException(f"cannot write {escape(dest)}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _export_to(store: durastate.Store, dest: str, quiet: bool) -> dict[str, int]:
    progress = Progress("export", dump.total_rows(store), enabled=None if not quiet else False)
    with progress, _atomic_output(dest) as out:
        counts = dump.export_store(store, out, progress.advance)
    if not quiet:
        click.echo(progress.summary(), err=True)
    return counts


QUIET = click.option("--quiet", "-q", is_flag=True, help="No progress and no summary on stderr.")


@cli.command("export")
@click.argument("dest")
@click.option("--force", is_flag=True, help="Replace DEST if it exists (by default an existing DEST is refused).")
@QUIET
@data_command
def export_cmd(dest: str, force: bool, quiet: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Write every facet's data to DEST as versioned JSON lines (.gz compresses; - is stdout).

    One consistent snapshot, streamed; DEST appears only when complete (a
    temporary name is renamed at the end, so Ctrl-C leaves nothing). An
    existing DEST is refused unless --force, as backup refuses one.
    """
    if dest != "-":
        check_destination(dest, overwrite=force, flag="--force")
    with store_from(url, prefix, read_only=True) as store:
        counts = _export_to(store, dest, quiet)
    if as_json:
        print_json({"dest": dest, "tables": counts, "rows": sum(counts.values())})
    elif dest != "-":
        click.echo(f"exported {sum(counts.values()):,} rows to {dest}")


@cli.command("import")
@click.argument("source")
@QUIET
@data_command
def import_cmd(source: str, quiet: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Load an export (SOURCE; .gz ok; - is stdin) into an EMPTY store of either engine.

    One transaction: it lands whole or not at all (Ctrl-C or an error
    leaves the store empty). A SQLite store is created if it does not exist,
    and removed again when the import fails.
    """
    target = sqlite_file(url)
    created = target is not None and not target.exists()
    try:
        counts, store_url = _import(source, quiet, url, prefix)
    except BaseException:
        if created and target is not None:
            for leftover in (target, target.with_name(target.name + "-wal"), target.with_name(target.name + "-shm")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        raise
    if as_json:
        print_json({"source": source, "tables": counts, "rows": sum(counts.values())})
    else:
        click.echo(f"imported {sum(counts.values()):,} rows into {store_url}")


def _import(source: str, quiet: bool, url: str | None, prefix: str) -> tuple[dict[str, int], str]:
    with contextlib.ExitStack() as stack:
        if source == "-":
            stream: IO[bytes] = sys.stdin.buffer
        else:
            path = Path(source)
            if not path.exists():
                raise NotFound(f"no such file: {escape(source)}")
            opener: Any = gzip.open if path.suffix == ".gz" else open
            stream = stack.enter_context(opener(path, "rb"))
        store = stack.enter_context(store_from(url, prefix, create=True))
        progress = stack.enter_context(Progress("import", None, enabled=None if not quiet else False))
        counts = dump.import_store(store, stream, progress.advance)
    if not quiet:
        click.echo(progress.summary(), err=True)
    return counts, store.url


def file_backup(store: durastate.Store, dest: Path, quiet: bool) -> BackupResult:
    """``store.engine.tools.backup`` into ``dest`` with a progress bar (pages); ``NotSupported`` where the engine
    has no file copy."""
    progress = Progress("backup", None, enabled=None if not quiet else False, unit="pages")
    with progress:

        def step(done: int, total: int, page_size: int) -> None:
            progress.total = total
            # After a restart ``done`` drops back, and so does the bar.
            progress.advance(done - progress.rows, (done - progress.rows) * page_size)

        copied = store.engine.tools.backup(dest, step)
    if not quiet:
        click.echo(progress.summary(), err=True)
    return copied


@cli.command()
@click.argument("dest")
@QUIET
@data_command
def backup(dest: str, quiet: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Copy the store to DEST while writers keep running.

    SQLite: the online backup API into a new database file (DEST opens as a
    store). PostgreSQL: a portable export to DEST (import it with `durastate
    import`); for a physical backup of the server use pg_dump -n SCHEMA.
    DEST appears only when complete.
    """
    check_destination(dest)
    with store_from(url, prefix, read_only=True) as store:
        if store.engine.capabilities.in_memory:
            raise click.ClickException("an in-memory store cannot be backed up")
        try:
            copied = file_backup(store, Path(dest), quiet)
            result: dict[str, Any] = {"dest": dest, "kind": "file", **dataclasses.asdict(copied)}
        except NotSupported:  # a server: its rows, portable (import them with `durastate import`)
            counts = _export_to(store, dest, quiet)
            click.echo(
                "wrote a portable export; for a physical backup of a server use its own tools (pg_dump)", err=True
            )
            result = {"dest": dest, "kind": "export", "rows": sum(counts.values())}
    if as_json:
        print_json(result)
    elif result["kind"] == "file":
        click.echo(f"backed up {result['pages']:,} pages to {escape(dest)}")
    else:
        click.echo(f"exported {result['rows']:,} rows to {escape(dest)}")


# -- maintain -----------------------------------------------------------------


Decorated = TypeVar("Decorated", bound=Callable[..., Any])


def seconds_option(name: str, help: str) -> Callable[[Decorated], Decorated]:
    """An optional duration flag in seconds (>= 0), default off."""
    return click.option(name, type=click.FloatRange(0), default=None, metavar="SECONDS", help=help)


@cli.command()
@click.option(
    "--batch",
    type=click.IntRange(1, 100_000),
    default=None,
    help="Ignored, kept for older scripts: maintain() commits at most 256 rows at a time.",
)
@click.option(
    "--max-rows", type=click.IntRange(1), default=None, help="Stop after deleting this many rows (run again to resume)."
)
@seconds_option(
    "--events-older-than", "Prune processed events covered by every snapshot of their session and older than this."
)
@seconds_option("--dead-older-than", "Drop queue dead letters that died longer ago than this.")
@seconds_option("--logs-older-than", "Trim kv log entries appended longer ago than this.")
@seconds_option("--sessions-settled-for", "Delete event sessions settled (all processed) this long.")
@click.option(
    "--max-backups", type=click.IntRange(1), default=None, help="Keep at most this many clear() backups per key."
)
@click.option(
    "--document-history",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Keep each document's last N recorded revisions (and drop history whose document is gone).",
)
@seconds_option(
    "--document-history-older-than",
    "With --document-history: also drop recorded revisions older than this (never a current one).",
)
@click.option(
    "--record-revisions",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Keep at least each full-history records document's last N revisions (never the current one goes).",
)
@seconds_option(
    "--record-revisions-older-than",
    "Drop records' full-history document revisions older than this (with --record-revisions: only past the last N).",
)
@click.option("--vacuum", is_flag=True, help="Also VACUUM (SQLite: rewrites the file; PostgreSQL: VACUUM ANALYZE).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what each rule would delete and keep nothing (the rules run in one transaction, rolled back).",
)
@QUIET
@data_command
def maintain(
    batch: int | None,
    max_rows: int | None,
    events_older_than: float | None,
    dead_older_than: float | None,
    logs_older_than: float | None,
    sessions_settled_for: float | None,
    max_backups: int | None,
    document_history: int | None,
    document_history_older_than: float | None,
    record_revisions: int | None,
    record_revisions_older_than: float | None,
    vacuum: bool,
    dry_run: bool,
    quiet: bool,
    url: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """Run store.maintain() with the retention policy the flags describe (and VACUUM with --vacuum).

    Always: expired kv values and presence fields, PostgreSQL's attempt rows
    past their window, and on SQLite the freed pages and the WAL given back. Each flag
    turns on one rule of durastate.Retention. Bounded commits: Ctrl-C keeps
    what is done, --max-rows bounds a run, running it again resumes.
    --dry-run counts what each rule would delete, exactly, and keeps
    nothing: the rules run in one transaction that is rolled back (it holds
    the write lock meanwhile; --max-rows keeps it short).
    """
    from .maintenance import dry_run as dry_maintenance
    from .maintenance import policy, run_maintenance

    if dry_run and vacuum:
        raise click.UsageError("--dry-run does not vacuum: drop --vacuum")
    if document_history_older_than is not None and document_history is None:
        raise click.UsageError("--document-history-older-than needs --document-history N")
    retention = policy(
        events_older_than=events_older_than,
        dead_older_than=dead_older_than,
        logs_older_than=logs_older_than,
        sessions_settled_for=sessions_settled_for,
        max_backups=max_backups,
        document_history=document_history,
        document_history_older_than=document_history_older_than,
        record_revisions=record_revisions,
        record_revisions_older_than=record_revisions_older_than,
    )
    with store_from(url, prefix, retention=retention) as store:
        progress = Progress("maintain", None, enabled=None if not quiet else False, sizes=False)
        with progress:
            if dry_run:
                report = dry_maintenance(store, max_rows=max_rows, step=progress.step)
            else:
                report = run_maintenance(store, max_rows=max_rows, vacuum=vacuum, step=progress.step, url=url)
    if not quiet:
        returned = report.get("bytes_returned")
        given_back = f"; {human_bytes(returned)} given back" if isinstance(returned, int) else ""
        click.echo(progress.summary() + given_back, err=True)
    if as_json:
        print_json(report)
        return
    if dry_run:
        click.echo("dry run: nothing was deleted; these are the rows each rule would delete now")
    for key, value in report.items():
        if key == "policy":
            value = ", ".join(f"{k}={_policy_value(k, v)}" for k, v in value.items() if v is not None) or "defaults"
        elif key == "bytes_returned" and isinstance(value, int):
            value = human_bytes(value)
        elif key == "bytes_returned":
            value = "not measured (dry run)"
        click.echo(f"{key}: {value}")


def _policy_value(name: str, value: Any) -> str:
    """A retention setting as maintain prints it: ages with their unit (``kv_log_max_age=3 d``)."""
    return human_duration(value) if name.endswith("_age") and isinstance(value, (int, float)) else str(value)


# -- bench / demo / ui ------------------------------------------------------------


@cli.command()
@click.option("--ops", type=click.IntRange(10, 1_000_000), default=2000, show_default=True, help="Operations per row.")
@click.option(
    "--url",
    default=None,
    help="Run against this store (in scratch names it removes after; not DURASTATE_URL, which is ignored here); "
    "default: a temporary SQLite file.",
)
@prefix_option("With --url: the table prefix of that store.")
@json_option
@errors_as_exit_1
def bench(ops: int, url: str | None, prefix: str, as_json: bool) -> None:
    """A quick benchmark: kv, queue, document and event operations per second.

    On a temporary SQLite file unless --url names a store on this command
    line: DURASTATE_URL, which points every other command at the
    application's store, is ignored, so a benchmark never writes into it by
    accident.
    """
    from .quickbench import run_bench

    if url is None and os.environ.get("DURASTATE_URL"):
        click.echo(
            "note: bench runs on a temporary file and ignores DURASTATE_URL (pass --url to bench a store)", err=True
        )
    rows = run_bench(url, prefix, ops)
    shown = [{**r, "time": Duration(r["seconds"])} for r in rows]
    emit(rows, as_json, shown, columns=["operation", "ops", "time", "ops_per_s", "us_per_op"])


@cli.command()
@url_option
@click.pass_context
def demo(ctx: click.Context, url: str | None, prefix: str) -> None:
    """Run the crash-recovery demo (two workers, one killed with kill -9) on ./.durastate/state.db.

    The demo always uses the default store (its worker processes open it by
    that path): an explicit --url or --table-prefix is refused, and
    DURASTATE_URL / DURASTATE_PREFIX from the environment are ignored.
    """
    from durastate import demo as demo_module

    explicit = [
        name for name in ("url", "prefix") if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    ]
    if explicit:
        raise click.UsageError("the demo runs on ./.durastate/state.db (it takes no --url or --table-prefix)")
    if url is not None:
        click.echo("note: the demo ignores DURASTATE_URL and uses ./.durastate/state.db", err=True)
    sys.exit(demo_module.main())


@cli.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (beyond loopback a token is required)."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port to bind.")
@click.option("--page-size", type=click.IntRange(1, 1000), default=50, show_default=True, help="Rows per page.")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Another Host name to answer (a proxy's or tunnel's name); loopback names are always allowed.",
)
@click.option(
    "--token",
    envvar="DURASTATE_UI_TOKEN",
    help="Require this token (open the page once with ?token=...): 16 or more of A-Z a-z 0-9 - _ . ~. Bound "
    "beyond loopback without one, a random token is made and printed. Env: DURASTATE_UI_TOKEN.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer redrive and purge of dead letters (each confirmed); without it the store is opened read-only.",
)
@click.option(
    "--stale-after",
    type=click.FloatRange(0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Flag a queue or event lane whose oldest ready item has waited longer.",
)
@click.option(
    "--backlog-over", type=click.IntRange(0), default=1000, show_default=True, help="Flag more ready items than this."
)
@click.option(
    "--refresh",
    type=click.FloatRange(0),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Refresh the overview's alerts this often (0: never).",
)
@url_option
def ui(
    host: str,
    port: int,
    page_size: int,
    allow_hosts: tuple[str, ...],
    token: str | None,
    allow_writes: bool,
    stale_after: float,
    backlog_over: int,
    refresh: float,
    url: str | None,
    prefix: str,
) -> None:
    """Serve the inspector web page (needs the [ui] extra): read-only unless --allow-writes."""
    try:
        from ._common import open_store
        from .ui import create_app
        from .ui.alerts import Thresholds
        from .ui.guard import is_loopback
        from .ui.serve import listen, serve, startup_lines  # imports uvicorn
    except ImportError as exc:
        raise click.ClickException(f"the inspector needs the [ui] extra: pip install 'durastate[ui]' ({exc})") from None
    if token is not None and (len(token) < 16 or not TOKEN_RE.fullmatch(token)):
        raise click.BadParameter("a token is 16 or more of A-Z a-z 0-9 - _ . ~", param_hint="--token")
    listening = listen(host, port)  # before anything is printed or opened (ui/serve.py)
    try:
        if not is_loopback(host) and token is None:
            token = secrets.token_urlsafe(24)
        store = open_store(url, prefix) if allow_writes else open_for_reading(url, prefix)
        try:
            app = create_app(
                store,
                page_size=page_size,
                bound=host,
                allow_hosts=allow_hosts,
                token=token,
                allow_writes=allow_writes,
                thresholds=Thresholds(stale_after=stale_after, backlog_over=backlog_over),
                refresh=refresh,
            )
            lines = startup_lines(
                host, listening.getsockname()[1], token=token, allow_hosts=allow_hosts, allow_writes=allow_writes
            )
            for line in lines:
                click.echo(line, err=True)
            serve(app, listening)
        finally:
            store.close()
    finally:
        listening.close()
