"""Browsing commands: ``kv``, ``queue``, ``events``, ``docs``, ``records``, ``presence``.

All read through the public facet API; the one command that writes is
``queue redrive`` (it moves dead letters back, as ``Queues.redrive``).
"""

from __future__ import annotations

from typing import Any

import click

from ._common import (
    FORMAT_OPTION,
    data_command,
    emit,
    emit_page,
    ms_time,
    parse_bytes,
    print_json,
    print_table,
    render_value,
    show_bytes,
    store_from,
)

LIMIT = click.option(
    "--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, help="At most this many."
)


def bytes_successor(prefix: bytes) -> bytes | None:
    """The smallest bytes string greater than every string starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


# -- kv -----------------------------------------------------------------------


@click.group()
def kv() -> None:
    """Browse key/value data: scopes, namespaces, values."""


@kv.command("ls")
@click.argument("scope", required=False)
@click.option("--after", default=None, help="List names after this one (paging).")
@LIMIT
@data_command
def kv_ls(scope: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List scopes, or the namespaces of SCOPE with their live value counts (counted up to 100000)."""
    with store_from(url, prefix, read_only=True) as store:
        bound = None if after is None else parse_bytes(after)
        if scope is None:
            names = store.kv.scopes(after=bound, limit=limit)
            emit([show_bytes(n) for n in names], as_json, [{"scope": show_bytes(n)} for n in names], ["scope"])
            return
        s = parse_bytes(scope)
        spaces = store.kv.namespaces(s, after=bound, limit=limit)
        rows = [{"namespace": show_bytes(ns), "values": _count_values(store, s, ns)} for ns in spaces]
        emit(rows, as_json, columns=["namespace", "values"])


COUNT_CAP = 100_000


def _count_values(store: Any, scope: bytes, ns: bytes) -> int | str:
    """Live values of a namespace, counted up to ``COUNT_CAP`` (then "100000+")."""
    n = sum(1 for _ in store.kv.scan(scope, ns, limit=COUNT_CAP + 1))
    return n if n <= COUNT_CAP else f"{COUNT_CAP}+"


@kv.command("get")
@click.argument("scope")
@click.argument("ns")
@click.argument("key")
@FORMAT_OPTION
@data_command
def kv_get(scope: str, ns: str, key: str, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Print one value (exit 1 when the key has no live value)."""
    with store_from(url, prefix, read_only=True) as store:
        value = store.kv.get(parse_bytes(scope), parse_bytes(ns), parse_bytes(key))
    if value is None:
        raise click.ClickException(f"no value at {scope} / {ns} / {key}")
    shown = render_value(value, fmt)
    if as_json:
        print_json({"key": key, "value": shown, "size": len(value)})
    elif fmt == "json":
        print_json(shown)
    else:
        click.echo(shown)


@kv.command("scan")
@click.argument("scope")
@click.argument("ns")
@click.option("--prefix", "key_prefix", default=None, help="Only keys starting with this.")
@click.option("--start", default=None, help="First key (inclusive).")
@click.option("--end", default=None, help="Last key (exclusive).")
@click.option("--reverse", is_flag=True, help="Descending key order.")
@LIMIT
@FORMAT_OPTION
@data_command
def kv_scan(
    scope: str,
    ns: str,
    key_prefix: str | None,
    start: str | None,
    end: str | None,
    reverse: bool,
    limit: int,
    fmt: str,
    url: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """List the live values of a namespace in key order (prefix or [start, end) range)."""
    lo = None if start is None else parse_bytes(start)
    hi = None if end is None else parse_bytes(end)
    if key_prefix is not None:
        if lo is not None or hi is not None:
            raise click.UsageError("--prefix cannot be combined with --start/--end")
        lo, hi = parse_bytes(key_prefix), bytes_successor(parse_bytes(key_prefix))
    with store_from(url, prefix, read_only=True) as store:
        rows = [
            {"key": show_bytes(k), "value": render_value(v, fmt) if fmt != "json" else _json_or_text(v), "size": len(v)}
            for k, v in store.kv.scan(
                parse_bytes(scope), parse_bytes(ns), start=lo, end=hi, reverse=reverse, limit=limit
            )
        ]
    emit(rows, as_json, columns=["key", "value", "size"])


def _json_or_text(value: bytes) -> Any:
    try:
        return render_value(value, "json")
    except click.ClickException:
        return value.decode("utf-8", "backslashreplace")


# -- queues -------------------------------------------------------------------


@click.group()
def queue() -> None:
    """Inspect queues: names, counts, items, dead letters; re-drive dead letters."""


def _stats_row(store: Any, name: bytes) -> dict[str, Any]:
    stats = store.queues.stats(name)
    return {
        "queue": show_bytes(name),
        "ready": stats.ready,
        "in_flight": stats.in_flight,
        "delayed": stats.delayed,
        "dead": stats.dead,
    }


@queue.command("ls")
@click.option("--after", default=None, help="List names after this one (paging).")
@LIMIT
@data_command
def queue_ls(after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List queues with their counts."""
    with store_from(url, prefix, read_only=True) as store:
        names = store.queues.names(after=None if after is None else parse_bytes(after), limit=limit)
        rows = [_stats_row(store, n) for n in names]
    emit(rows, as_json, columns=["queue", "ready", "in_flight", "delayed", "dead"])


@queue.command("stats")
@click.argument("name")
@data_command
def queue_stats(name: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Counts of one queue: ready, in flight, delayed, dead."""
    with store_from(url, prefix, read_only=True) as store:
        row = _stats_row(store, parse_bytes(name))
    emit(row, as_json, [row], ["queue", "ready", "in_flight", "delayed", "dead"])


@queue.command("peek")
@click.argument("name")
@click.option("--after", default=None, help="The cursor of the last item of the previous page.")
@LIMIT
@FORMAT_OPTION
@data_command
def queue_peek(name: str, after: str | None, limit: int, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """List items in delivery order (ready, then leased and delayed by due time) without claiming any."""
    with store_from(url, prefix, read_only=True) as store:
        items = store.queues.peek(parse_bytes(name), after=after, limit=limit)
    rows = [
        {
            "id": i.id,
            "state": i.state,
            "attempts": i.attempts,
            "max_attempts": i.max_attempts,
            "due": ms_time(int(i.available_at * 1000)),
            "last_error": i.last_error,
            "payload": _json_or_text(i.payload) if fmt == "json" else render_value(i.payload, fmt),
            "cursor": i.cursor,
        }
        for i in items
    ]
    emit(rows, as_json, columns=["id", "state", "attempts", "max_attempts", "due", "last_error", "payload"])


@queue.command("dead")
@click.argument("name")
@click.option("--after", type=int, default=0, help="Dead letters with id greater than this (paging).")
@LIMIT
@FORMAT_OPTION
@data_command
def queue_dead(name: str, after: int, limit: int, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """List dead letters: items that used up their attempts."""
    with store_from(url, prefix, read_only=True) as store:
        dead = store.queues.dead_letters(parse_bytes(name), after=after, limit=limit)
    rows = [
        {
            "id": d.id,
            "attempts": d.attempts,
            "last_error": d.last_error,
            "died": ms_time(int(d.died_at * 1000)),
            "payload": _json_or_text(d.payload) if fmt == "json" else render_value(d.payload, fmt),
        }
        for d in dead
    ]
    emit(rows, as_json, columns=["id", "attempts", "last_error", "died", "payload"])


@queue.command("redrive")
@click.argument("name")
@click.option("--id", "ids", type=int, multiple=True, help="Only this dead letter (repeatable); default: all.")
@data_command
def queue_redrive(name: str, ids: tuple[int, ...], url: str | None, prefix: str, as_json: bool) -> None:
    """Move dead letters back into the queue with fresh attempts."""
    with store_from(url, prefix) as store:
        moved = store.queues.redrive(parse_bytes(name), list(ids) if ids else None)
    if as_json:
        print_json({"moved": moved})
    else:
        click.echo(f"re-drove {moved} dead letter(s) of {name}")


# -- events -------------------------------------------------------------------


@click.group()
def events() -> None:
    """Inspect event sessions: sessions, events, live claims."""


@events.command("sessions")
@click.option("--prefix", "id_prefix", default="", help="Only session ids starting with this.")
@click.option("--cursor", default=None, help="The cursor a previous page printed.")
@LIMIT
@data_command
def events_sessions(
    id_prefix: str, cursor: str | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List sessions with event, pending and dead-lettered counts."""
    with store_from(url, prefix, read_only=True) as store:
        page = store.events.list_sessions(id_prefix, limit=limit, cursor=cursor)
    rows = [
        {
            "session": s.session_id,
            "events": s.event_count,
            "pending": s.pending_count,
            "dead": s.failed_count,
            "attempts": s.attempt_count,
            "failures": s.failure_count,
            "updated": ms_time(s.updated_at),
        }
        for s in page.sessions
    ]
    emit_page(
        "sessions",
        rows,
        page.cursor,
        as_json,
        ["session", "events", "pending", "dead", "attempts", "failures", "updated"],
    )


def _event_row(e: Any) -> dict[str, Any]:
    if e.processed_at is not None:
        state = "processed"
    elif e.failed_at is not None:
        state = "dead"
    elif e.claim_holder is not None:
        state = "claimed"
    else:
        state = "pending"
    return {
        "index": e.index,
        "id": e.id,
        "type": e.type,
        "lane": e.lane,
        "state": state,
        "attempts": e.attempt_count,
        "failures": e.failure_count,
        "holder": e.claim_holder,
        "claim_expires": ms_time(e.claim_expires_at),
        "last_error": e.last_error,
        "cause": None if e.cause is None else f"{e.cause.index}#{e.cause.attempt}",
        "payload": e.payload,
    }


@events.command("read")
@click.argument("session")
@click.option("--after", type=int, default=0, help="Events after this index (paging).")
@LIMIT
@data_command
def events_read(session: str, after: int, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List a session's events in index order with their processing state."""
    with store_from(url, prefix, read_only=True) as store:
        page = store.events.read_events(session, after_index=after, limit=limit)
    rows = [_event_row(e) for e in page.events]
    emit(
        rows, as_json, columns=["index", "id", "type", "lane", "state", "attempts", "failures", "last_error", "payload"]
    )


@events.command("claims")
@click.argument("session")
@data_command
def events_claims(session: str, url: str | None, prefix: str, as_json: bool) -> None:
    """List the session's unprocessed events that hold a claim, with holder and expiry."""
    rows: list[dict[str, Any]] = []
    with store_from(url, prefix, read_only=True) as store:
        now = store.engine.now_ms()
        after = 0
        while True:
            page = store.events.read_events(session, after_index=after, limit=1000)
            for e in page.events:
                if e.claim_holder is not None and e.processed_at is None:
                    row = _event_row(e)
                    row["lease_left_s"] = round(((e.claim_expires_at or 0) - now) / 1000, 1)
                    row["expired"] = (e.claim_expires_at or 0) <= now
                    rows.append(row)
            if len(page.events) < 1000:
                break
            after = page.events[-1].index
    emit(
        rows, as_json, columns=["index", "id", "type", "holder", "claim_expires", "lease_left_s", "expired", "attempts"]
    )


# -- documents ----------------------------------------------------------------


@click.group()
def docs() -> None:
    """Browse JSON documents: keys, contents, revisions."""


@docs.command("ls")
@click.option("--prefix", "key_prefix", default="", help="Only keys starting with this.")
@click.option("--cursor", default=None, help="The cursor a previous page printed.")
@LIMIT
@data_command
def docs_ls(key_prefix: str, cursor: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List documents (key, revision, size) in key order."""
    with store_from(url, prefix, read_only=True) as store:
        page = store.documents.list(key_prefix, limit=limit, cursor=cursor)
    rows = [{"key": d.key, "revision": d.revision, "size": d.size} for d in page.items]
    emit_page("documents", rows, page.cursor, as_json, ["key", "revision", "size"])


@docs.command("show")
@click.argument("key")
@data_command
def docs_show(key: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Print a document's JSON and revision (exit 1 when absent)."""
    with store_from(url, prefix, read_only=True) as store:
        raw = store.documents.read_raw(key)
    if raw is None:
        raise click.ClickException(f"no document {key!r}")
    data = _json_or_text(bytes(raw.payload))
    if as_json:
        print_json({"key": key, "revision": raw.revision, "data": data})
    else:
        click.echo(f"# {key}  revision {raw.revision}")
        print_json(data)


@docs.command("history")
@click.argument("key")
@click.option("--before", type=click.IntRange(1), default=None, help="Only revisions below this one (paging).")
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
    Exit 1 when there is no such document, history or backup.
    """
    from .revisions import change_summary, history_view

    with store_from(url, prefix, read_only=True) as store:
        current = store.documents.describe(key)
        view = history_view(store.documents, key, limit=limit, before=before)
        backups = [
            {"key": d.key, "revision": d.revision, "size": d.size}
            for d in store.documents.list(key + ".bak", limit=1000).items
            if _is_backup_of(d.key, key)
        ]
    if current is None and not view.items and not backups:
        raise click.ClickException(f"no document {key!r}")
    if as_json:
        print_json(
            {
                "key": key,
                "revision": None if current is None else current.revision,
                "revisions": [item.as_json(with_diff) for item in view.items],
                "cursor": view.cursor,
                "backups": backups,
            }
        )
        return
    state = "absent" if current is None else f"revision {current.revision}, {current.size} bytes"
    click.echo(f"# {key}  ({state})")
    if not view.items:
        click.echo("no recorded revisions (stores record them with Retention(document_history=N))")
    elif with_diff:
        for item in view.items:
            click.echo(f"## revision {item.revision}  {ms_time(item.written_at_ms)}  {item.size} bytes")
            for line in item.diff:
                click.echo(line)
    else:
        rows = [
            {
                "revision": item.revision,
                "written": ms_time(item.written_at_ms),
                "bytes": item.size,
                "changes": change_summary(item),
            }
            for item in view.items
        ]
        print_table(rows, ["revision", "written", "bytes", "changes"])
    if view.cursor is not None:
        click.echo(f"more: --before {view.cursor}", err=True)
    if backups:
        print_table(backups, ["key", "revision", "size"], title="backups")


def _is_backup_of(candidate: str, key: str) -> bool:
    """Whether ``candidate`` is a backup key clear() makes for ``key`` (``key.bak`` or ``key.bak.N``)."""
    rest = candidate[len(key) :]
    return candidate.startswith(key) and (rest == ".bak" or (rest.startswith(".bak.") and rest[5:].isdigit()))


# -- records ------------------------------------------------------------------


@click.group()
def records() -> None:
    """Browse agent records: conversations (fork tree), entries, documents."""


def _after(page: dict[str, Any]) -> int | None:
    """The ``--after`` value that continues a records scan page (None at the end)."""
    nxt = page.get("next")
    return None if nxt is None else int(nxt["after"])


@records.command("conversations")
@click.option("--after", type=int, default=None, help="Conversations with id greater than this (paging).")
@LIMIT
@data_command
def records_conversations(after: int | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List conversations with their fork parent and owner."""
    cursor = None if after is None else {"after": after, "order": "ascending"}
    with store_from(url, prefix, read_only=True) as store:
        page = store.records.scan_conversations({}, limit, cursor)
    rows = [
        {
            "id": c["id"],
            "parent": (c.get("parent") or {}).get("conversationId"),
            "forked_at": (c.get("parent") or {}).get("at"),
            "owner": c.get("owner"),
        }
        for c in page["items"]
    ]
    emit_page("conversations", rows, _after(page), as_json, ["id", "parent", "forked_at", "owner"])


@records.command("entries")
@click.argument("conversation", type=int)
@click.option("--after", type=int, default=None, help="Entries older than this id (paging, newest first).")
@LIMIT
@data_command
def records_entries(
    conversation: int, after: int | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List the entries visible from a conversation (through its forks), newest first."""
    cursor = None if after is None else {"after": after, "order": "descending"}
    with store_from(url, prefix, read_only=True) as store:
        page = store.records.scan_entries({"conversationId": conversation}, limit, cursor)
    rows = [
        {"id": e["id"], "conversation": e.get("conversationId"), "role": e.get("role"), "entry": e}
        for e in page["items"]
    ]
    emit_page("entries", rows, _after(page), as_json, ["id", "conversation", "role", "entry"])


@records.command("document")
@click.argument("id", type=int)
@click.option("--at", "at", type=int, default=None, help="The value as of this commit sequence.")
@click.option("--revisions", is_flag=True, help="List the stored revisions instead of the value.")
@data_command
def records_document(id: int, at: int | None, revisions: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Print a versioned document (current, or --at a commit), or its --revisions."""
    with store_from(url, prefix, read_only=True) as store:
        if revisions:
            rows = store.records.document_revisions(id)
            emit(rows, as_json, columns=["seq", "kind", "version", "depth"])
            return
        doc = store.records.document(id, "current" if at is None else at)
    if doc is None:
        raise click.ClickException(f"no document {id} alive {'now' if at is None else f'at {at}'}")
    print_json(doc)


# -- presence -----------------------------------------------------------------


@click.command()
@click.argument("ns", required=False)
@click.option("--after", default=None, help="List namespaces after this one (paging).")
@LIMIT
@data_command
def presence(ns: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List presence namespaces, or the live fields of NS."""
    with store_from(url, prefix, read_only=True) as store:
        if ns is None:
            names = store.presence.namespaces(after=after, limit=limit)
            emit(names, as_json, [{"namespace": n} for n in names], ["namespace"])
            return
        entries = store.presence.peek(ns)  # read() would sweep expired fields: a write
    rows = [
        {
            "participant": p.participant,
            "field": p.field,
            "value": p.value,
            "seen": p.seen,
            "at": ms_time(p.at),
            "expires": ms_time(p.expires_at),
        }
        for p in entries
    ]
    emit(rows, as_json, columns=["participant", "field", "value", "seen", "at", "expires"])
