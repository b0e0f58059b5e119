"""``durastate docs``: JSON document keys, contents, recorded revisions and backups."""

from __future__ import annotations

from typing import Any

import click
import orjson

from .._common import NotFound, Size, at, cell, data_command, emit_page, print_json, print_table, store_from
from .._format import escape, human_bytes
from ._shared import LIMIT, POSITIVE_INT64, after_option


@click.group()
def docs() -> None:
    """Browse JSON documents: keys, contents, revisions."""


@docs.command("ls")
@click.option("--prefix", "key_prefix", default="", help="Only keys starting with this.")
@after_option("The cursor the previous page printed.")
@click.option("--cursor", default=None, hidden=True, help="Older name of --after.")
@LIMIT
@data_command
def docs_ls(
    key_prefix: str, after: str | None, cursor: str | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List documents (key, revision, size) in key order."""
    with store_from(url, prefix, read_only=True) as store:
        page = store.documents.list(key_prefix, limit=limit, cursor=after or cursor)
    rows = [{"key": d.key, "revision": d.revision, "size": Size(d.size)} for d in page.items]
    emit_page(rows, page.cursor, as_json, ["key", "revision", "size"])


def _json_or_bytes(value: bytes) -> Any:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


@docs.command("show")
@click.argument("key")
@data_command
def docs_show(key: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Print a document's JSON and revision (exit 3 when absent)."""
    with store_from(url, prefix, read_only=True) as store:
        raw = store.documents.read_raw(key)
    if raw is None:
        raise NotFound(f"no document {escape(key)!r}")
    data = _json_or_bytes(bytes(raw.payload))
    if as_json:
        print_json({"key": key, "revision": raw.revision, "data": data})
    else:
        click.echo(f"# {escape(key)}  revision {raw.revision}")
        print_json(data)


@docs.command("history")
@click.argument("key")
@click.option("--before", type=POSITIVE_INT64, default=None, help="Only revisions below this one (paging).")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=20, show_default=True, help="At most this many revisions."
)
@click.option("--diff", "with_diff", is_flag=True, help="Print what changed in each revision (a unified diff).")
@data_command
def docs_history(
    key: str, before: int | None, limit: int, with_diff: bool, url: str | None, prefix: str, as_json: bool
) -> None:
    """Show a document's recorded revisions, newest first, and the backups clear() made of it.

    Each revision: number, when it was written, size and what changed since
    the recorded one before it (--diff prints it). Revisions are recorded by
    stores opened with Retention(document_history=N) (see durastate.retention);
    without that only the current revision exists. Backups: KEY.bak, KEY.bak.N.
    Exit 3 when there is no such document, history or backup.
    """
    from ..revisions import change_summary, history_view

    with store_from(url, prefix, read_only=True) as store:
        current = store.documents.describe(key)
        view = history_view(store.documents, key, limit=limit, before=before)
        backups = [
            {"key": d.key, "revision": d.revision, "size": Size(d.size)}
            for d in store.documents.list(key + ".bak", limit=1000).items
            if _is_backup_of(d.key, key)
        ]
    if current is None and not view.items and not backups:
        raise NotFound(f"no document {escape(key)!r}")
    if as_json:
        print_json(
            {
                "key": key,
                "revision": None if current is None else current.revision,
                "revisions": [item.as_json(with_diff) for item in view.items],
                "next": view.cursor,
                "backups": backups,
            }
        )
        return
    state = "absent" if current is None else f"revision {current.revision}, {current.size} bytes"
    click.echo(f"# {escape(key)}  ({state})")
    if not view.items:
        click.echo("no recorded revisions (stores record them with Retention(document_history=N))")
    elif with_diff:
        for item in view.items:
            click.echo(f"## revision {item.revision}  {cell(at(item.written_at_ms))}  {human_bytes(item.size)}")
            for line in item.diff:
                click.echo(escape(line))
    else:
        rows = [
            {
                "revision": item.revision,
                "written": at(item.written_at_ms),
                "size": Size(item.size),
                "changes": change_summary(item),
            }
            for item in view.items
        ]
        print_table(rows, ["revision", "written", "size", "changes"])
    if view.cursor is not None:
        click.echo(f"more: --before {view.cursor}", err=True)
    if backups:
        print_table(backups, ["key", "revision", "size"], title="backups")


def _is_backup_of(candidate: str, key: str) -> bool:
    """Whether ``candidate`` is a backup key clear() makes for ``key`` (``key.bak`` or ``key.bak.N``)."""
    rest = candidate[len(key) :]
    return candidate.startswith(key) and (rest == ".bak" or (rest.startswith(".bak.") and rest[5:].isdigit()))
