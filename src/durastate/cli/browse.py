"""Browsing commands: ``kv``, ``queue``, ``events``, ``docs``, ``records``, ``presence``.

All read through the public facet API (kv logs and counters of a
namespace through ``cli.kvlisting``) on a store opened read-only; the two
commands that write are ``queue redrive`` and ``events redrive`` (they make
dead letters claimable again), and they ask first (``--yes`` skips asking).

Every listing pages the same way: ``--limit N`` and ``--after CURSOR``,
where CURSOR is what the previous page ended with (a hint line on stderr,
``"next"`` in JSON); ``--json`` prints ``{"items": [...], "next": ...}``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

from . import kvlisting
from ._common import (
    FORMAT_OPTION,
    Duration,
    Name,
    NotFound,
    Size,
    at,
    cell,
    data_command,
    emit,
    emit_page,
    parse_bytes,
    print_json,
    print_table,
    render_value,
    show_bytes,
    store_from,
    take_page,
)
from ._format import escape, human_bytes, show_value

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


# -- kv -----------------------------------------------------------------------


@click.group()
def kv() -> None:
    """Browse key/value data: scopes, namespaces, values, logs, counters."""


@kv.command("ls")
@click.argument("scope", required=False)
@after_option("Names after this one: the cursor the previous page printed.")
@LIMIT
@data_command
def kv_ls(scope: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List scopes, or the namespaces of SCOPE with what each holds: live values, log entries, counters.

    Counts are exact up to 100000 (then shown as 100000+).
    """
    bound = None if after is None else parse_bytes(after)
    with store_from(url, prefix, read_only=True) as store:
        if scope is None:
            names, more = take_page(lambda a, n: store.kv.scopes(after=a, limit=n), bound, limit, lambda n: n)
            emit_page([{"scope": Name(n)} for n in names], more, as_json, ["scope"])
            return
        s = parse_bytes(scope)
        spaces, more = take_page(lambda a, n: store.kv.namespaces(s, after=a, limit=n), bound, limit, lambda n: n)
        rows = []
        for ns in spaces:
            held = kvlisting.holdings(store.engine, s, ns)
            rows.append(
                {
                    "namespace": Name(ns),
                    "values": held.shown(held.values),
                    "log_entries": held.shown(held.log_entries),
                    "counters": held.shown(held.counters),
                }
            )
    emit_page(rows, more, as_json, ["namespace", "values", "log_entries", "counters"])


def _address(scope: str, ns: str, key: str) -> tuple[bytes, bytes, bytes]:
    return parse_bytes(scope), parse_bytes(ns), parse_bytes(key)


@kv.command("get")
@click.argument("scope")
@click.argument("ns")
@click.argument("key")
@FORMAT_OPTION
@data_command
def kv_get(scope: str, ns: str, key: str, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Print one value (exit 3 when the key has no live value; a log or counter there is named).

    Text is printed with control characters escaped (line breaks and tabs
    kept); --format hex or --json give the exact bytes.
    """
    s, n, k = _address(scope, ns, key)
    with store_from(url, prefix, read_only=True) as store:
        value = store.kv.get(s, n, k)
        if value is None:
            other = []
            if kvlisting.has_log(store.engine, s, n, k):
                other.append("a log (durastate kv log SCOPE NS KEY)")
            if kvlisting.counter(store.engine, s, n, k) is not None:
                other.append("a counter (durastate kv counter SCOPE NS KEY)")
            where = f"{escape(scope)} / {escape(ns)} / {escape(key)}"
            raise NotFound(f"no value at {where}" + (f"; it holds {' and '.join(other)}" if other else ""))
    shown = render_value(value, fmt)
    if as_json:
        print_json({"scope": s, "ns": n, "key": k, "value": shown, "size": len(value)})
    elif isinstance(shown, bytes):
        click.echo(show_value(shown, keep_newlines=True))
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
@after_option("Keys after this one in the scan's order: the cursor the previous page printed.")
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
    after: str | None,
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
    s, n = parse_bytes(scope), parse_bytes(ns)
    with store_from(url, prefix, read_only=True) as store:

        def fetch(last: bytes | None, want: int) -> list[tuple[bytes, bytes]]:
            start_at, end_at = lo, hi
            if last is not None and reverse:
                end_at = last if end_at is None else min(end_at, last)
            elif last is not None:
                start_at = last + b"\x00"  # the smallest key after it
            return list(store.kv.scan(s, n, start=start_at, end=end_at, reverse=reverse, limit=want))

        pairs, more = take_page(fetch, None if after is None else parse_bytes(after), limit, lambda kv: kv[0])
    rows = [{"key": Name(k), "value": render_value(v, fmt), "size": len(v)} for k, v in pairs]
    emit_page(rows, more, as_json, ["key", "value", "size"])


@kv.command("log")
@click.argument("scope")
@click.argument("ns")
@click.argument("key", required=False)
@after_option("Without KEY: log keys after this one; with KEY: entries after this ordinal.")
@LIMIT
@FORMAT_OPTION
@data_command
def kv_log(
    scope: str,
    ns: str,
    key: str | None,
    after: str | None,
    limit: int,
    fmt: str,
    url: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """List the logs of a namespace (entries, ordinals, last append), or the entries of the log KEY.

    Exit 3 when KEY has no log entries.
    """
    s, n = parse_bytes(scope), parse_bytes(ns)
    with store_from(url, prefix, read_only=True) as store:
        engine = store.engine
        if key is None:
            logs, more = take_page(
                lambda a, want: kvlisting.log_keys(engine, s, n, b"" if a is None else a, want),
                None if after is None else parse_bytes(after),
                limit,
                lambda log: log.key,
            )
            rows = [
                {
                    "key": Name(g.key),
                    "entries": g.entries,
                    "first": g.first,
                    "last": g.last,
                    "last_append": at(g.last_at),
                }
                for g in logs
            ]
            emit_page(rows, more, as_json, ["key", "entries", "first", "last", "last_append"])
            return
        k = parse_bytes(key)
        try:
            start = 0 if after is None else int(after)
        except ValueError:
            raise click.BadParameter("an entry cursor is an ordinal (a number)", param_hint="--after") from None
        entries, more = take_page(
            lambda a, want: kvlisting.log_entries(engine, s, n, k, a, want), start, limit, lambda e: e[0]
        )
        if not entries and after is None:
            raise NotFound(f"no log at {escape(scope)} / {escape(ns)} / {escape(key)}")
    rows = [{"ordinal": o, "appended": at(t), "value": render_value(v, fmt), "size": len(v)} for o, v, t in entries]
    emit_page(rows, more, as_json, ["ordinal", "appended", "value", "size"])


@kv.command("counter")
@click.argument("scope")
@click.argument("ns")
@click.argument("key", required=False)
@after_option("Counters after this key: the cursor the previous page printed.")
@LIMIT
@data_command
def kv_counter(
    scope: str, ns: str, key: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List the counters of a namespace with their values, or print the counter KEY (exit 3 when absent)."""
    s, n = parse_bytes(scope), parse_bytes(ns)
    with store_from(url, prefix, read_only=True) as store:
        engine = store.engine
        if key is not None:
            value = kvlisting.counter(engine, s, n, parse_bytes(key))
            if value is None:
                raise NotFound(f"no counter at {escape(scope)} / {escape(ns)} / {escape(key)}")
            if as_json:
                print_json({"scope": s, "ns": n, "key": parse_bytes(key), "value": value})
            else:
                click.echo(str(value))
            return
        found, more = take_page(
            lambda a, want: store.kv.counters(s, n, after=a, limit=want),
            None if after is None else parse_bytes(after),
            limit,
            lambda c: c[0],
        )
    emit_page([{"key": Name(k), "value": v} for k, v in found], more, as_json, ["key", "value"])


# -- queues -------------------------------------------------------------------


@click.group()
def queue() -> None:
    """Inspect queues: names, counts, items, dead letters; re-drive dead letters."""


def _stats_row(store: Any, queue_name: bytes) -> dict[str, Any]:
    stats = store.queues.stats(queue_name)
    return {
        "queue": Name(queue_name),
        "ready": stats.ready,
        "in_flight": stats.in_flight,
        "delayed": stats.delayed,
        "dead": stats.dead,
    }


QUEUE_COLUMNS = ["queue", "ready", "in_flight", "delayed", "dead"]


@queue.command("ls")
@after_option("Queues after this name: the cursor the previous page printed.")
@LIMIT
@data_command
def queue_ls(after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List queues with their counts."""
    with store_from(url, prefix, read_only=True) as store:
        names, more = take_page(
            lambda a, n: store.queues.names(after=a, limit=n),
            None if after is None else parse_bytes(after),
            limit,
            lambda q: q,
        )
        rows = [_stats_row(store, q) for q in names]
    emit_page(rows, more, as_json, QUEUE_COLUMNS)


@queue.command("stats")
@click.argument("name")
@data_command
def queue_stats(name: str, url: str | None, prefix: str, as_json: bool) -> None:
    """Counts of one queue: ready, in flight, delayed, dead (all 0 for a queue never used)."""
    with store_from(url, prefix, read_only=True) as store:
        row = _stats_row(store, parse_bytes(name))
    emit(row, as_json, [row], QUEUE_COLUMNS)


@queue.command("peek")
@click.argument("name")
@after_option("Items after this one: the cursor the previous page printed.")
@LIMIT
@FORMAT_OPTION
@data_command
def queue_peek(name: str, after: str | None, limit: int, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """List items in delivery order (ready, then leased and delayed by due time) without claiming any."""
    q = parse_bytes(name)
    with store_from(url, prefix, read_only=True) as store:
        items, more = take_page(lambda a, n: store.queues.peek(q, after=a, limit=n), after, limit, lambda i: i.cursor)
    rows = [
        {
            "id": i.id,
            "state": i.state,
            "attempts": i.attempts,
            "max_attempts": i.max_attempts,
            "due": at(i.available_at * 1000),
            "pushed": at(i.created_at * 1000),
            "last_error": i.last_error,
            "payload": render_value(i.payload, fmt),
            "cursor": i.cursor,
        }
        for i in items
    ]
    emit_page(rows, more, as_json, ["id", "state", "attempts", "max_attempts", "due", "last_error", "payload"])


@queue.command("dead")
@click.argument("name")
@after_option("Dead letters with an id greater than this (the cursor the previous page printed).", type=int)
@LIMIT
@FORMAT_OPTION
@data_command
def queue_dead(name: str, after: int | None, limit: int, fmt: str, url: str | None, prefix: str, as_json: bool) -> None:
    """List dead letters: items that used up their attempts."""
    q = parse_bytes(name)
    with store_from(url, prefix, read_only=True) as store:
        dead, more = take_page(
            lambda a, n: store.queues.dead_letters(q, after=a or 0, limit=n), after, limit, lambda d: d.id
        )
    rows = [
        {
            "id": d.id,
            "attempts": d.attempts,
            "last_error": d.last_error,
            "died": at(d.died_at * 1000),
            "payload": render_value(d.payload, fmt),
        }
        for d in dead
    ]
    emit_page(rows, more, as_json, ["id", "attempts", "last_error", "died", "payload"])


@queue.command("redrive")
@click.argument("name")
@click.option("--id", "ids", type=int, multiple=True, help="Only this dead letter (repeatable); default: all.")
@YES
@data_command
def queue_redrive(name: str, ids: tuple[int, ...], yes: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Move dead letters back into the queue with fresh attempts (asks first; --yes does not)."""
    q = parse_bytes(name)
    with store_from(url, prefix) as store:
        count = len(set(ids)) if ids else store.queues.stats(q).dead
        if count == 0:
            moved = 0
        else:
            confirm_write(f"re-drive {'up to ' if ids else ''}{count} dead letter(s) of queue {show_bytes(q)}", yes)
            moved = store.queues.redrive(q, list(ids) if ids else None)
    if as_json:
        print_json({"moved": moved})
    else:
        click.echo(f"re-drove {moved} dead letter(s) of {show_bytes(q)}")


# -- events -------------------------------------------------------------------


@click.group()
def events() -> None:
    """Inspect event sessions: sessions, events, live claims, dead letters; re-drive dead letters."""


@events.command("sessions")
@click.option("--prefix", "id_prefix", default="", help="Only session ids starting with this.")
@after_option("Sessions after this id: the cursor the previous page printed.")
@click.option("--cursor", default=None, hidden=True, help="Older name of --after.")
@LIMIT
@data_command
def events_sessions(
    id_prefix: str, after: str | None, cursor: str | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List sessions with event, pending and dead-lettered counts."""
    with store_from(url, prefix, read_only=True) as store:
        page = store.events.list_sessions(id_prefix, limit=limit, cursor=after or cursor)
    rows = [
        {
            "session": s.session_id,
            "events": s.event_count,
            "pending": s.pending_count,
            "dead": s.failed_count,
            "attempts": s.attempt_count,
            "failures": s.failure_count,
            "first_event": at(s.first_event_at),
            "updated": at(s.updated_at),
        }
        for s in page.sessions
    ]
    emit_page(rows, page.cursor, as_json, ["session", "events", "pending", "dead", "attempts", "failures", "updated"])


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
        "session": e.session_id,
        "index": e.index,
        "id": e.id,
        "type": e.type,
        "lane": e.lane,
        "state": state,
        "created": at(e.created_at),
        "processed": at(e.processed_at),
        "failed": at(e.failed_at),
        "attempts": e.attempt_count,
        "failures": e.failure_count,
        "holder": e.claim_holder,
        "claim_expires": at(e.claim_expires_at),
        "last_error": e.last_error,
        "cause": None if e.cause is None else f"{e.cause.index}#{e.cause.attempt}",
        "payload": e.payload,
    }


def _session_exists(store: Any, session: str) -> bool:
    page = store.events.list_sessions(session, limit=1)
    return bool(page.sessions) and page.sessions[0].session_id == session


@events.command("read")
@click.argument("session")
@after_option("Events after this index: the cursor the previous page printed.", type=int)
@LIMIT
@data_command
def events_read(session: str, after: int | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List a session's events in index order with their processing state (exit 3 for an unknown session)."""
    with store_from(url, prefix, read_only=True) as store:
        found, more = take_page(
            lambda a, n: list(store.events.read_events(session, after_index=a or 0, limit=n).events),
            after,
            limit,
            lambda e: e.index,
        )
        if not found and after is None and not _session_exists(store, session):
            raise NotFound(f"no event session {escape(session)!r}")
    rows = [_event_row(e) for e in found]
    emit_page(
        rows,
        more,
        as_json,
        ["index", "id", "type", "lane", "state", "created", "attempts", "failures", "last_error", "payload"],
    )


@events.command("claims")
@click.argument("session")
@after_option("Claims on events after this index: the cursor the previous page printed.", type=int)
@LIMIT
@data_command
def events_claims(session: str, after: int | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List the session's unprocessed events that hold a claim, with holder, expiry and lease left."""
    with store_from(url, prefix, read_only=True) as store:
        now = store.engine.now_ms()

        def fetch(last: int | None, want: int) -> list[Any]:
            claims: list[Any] = []
            index = last or 0
            while len(claims) < want:
                page = store.events.read_events(session, after_index=index, limit=1000)
                for e in page.events:
                    if e.claim_holder is not None and e.processed_at is None and len(claims) < want:
                        claims.append(e)
                if len(page.events) < 1000:
                    break
                index = page.events[-1].index
            return claims

        found, more = take_page(fetch, after, limit, lambda e: e.index)
    rows = []
    for e in found:
        row = _event_row(e)
        row["lease_left"] = Duration(((e.claim_expires_at or 0) - now) / 1000)
        row["expired"] = (e.claim_expires_at or 0) <= now
        rows.append(row)
    emit_page(
        rows, more, as_json, ["index", "id", "type", "holder", "claim_expires", "lease_left", "expired", "attempts"]
    )


def _dead_cursor(text: str | None, session: str | None) -> Any:
    """``--after`` of ``events dead``: an index (one session) or ``INDEX:SESSION`` (every session)."""
    if text is None:
        return None
    head, sep, rest = text.partition(":")
    try:
        index = int(head)
    except ValueError:
        index = -1
    if index < 0 or (session is None) != bool(sep):
        form = "an event index" if session is not None else "INDEX:SESSION (as the previous page printed)"
        raise click.BadParameter(f"the cursor is {form}", param_hint="--after")
    return index if session is not None else (rest, index)


@events.command("dead")
@click.argument("session", required=False)
@after_option("The cursor the previous page printed (an index; INDEX:SESSION without SESSION).")
@LIMIT
@data_command
def events_dead(
    session: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool
) -> None:
    """List dead-lettered events (their failures used up) of SESSION, or of every session."""
    start = _dead_cursor(after, session)

    def cursor_of(e: Any) -> Any:
        return e.index if session is not None else (e.session_id, e.index)

    with store_from(url, prefix, read_only=True) as store:
        found, more = take_page(
            lambda a, n: store.events.dead_letters(session, after=a, limit=n), start, limit, cursor_of
        )
    shown_next = more if more is None or session is not None else f"{more[1]}:{more[0]}"
    rows = [_event_row(e) for e in found]
    emit_page(
        rows, shown_next, as_json, ["session", "index", "id", "type", "failures", "failed", "last_error", "payload"]
    )


@events.command("redrive")
@click.argument("session")
@click.option("--index", "indexes", type=int, multiple=True, help="Only this event (repeatable); default: all.")
@YES
@data_command
def events_redrive(
    session: str, indexes: tuple[int, ...], yes: bool, url: str | None, prefix: str, as_json: bool
) -> None:
    """Make a session's dead-lettered events claimable again with a fresh failure count (asks first)."""
    with store_from(url, prefix) as store:
        if indexes:
            count = len(set(indexes))
        else:
            page = store.events.list_sessions(session, limit=1)
            count = page.sessions[0].failed_count if _session_exists(store, session) else 0
        moved = 0
        if count:
            confirm_write(
                f"re-drive {'up to ' if indexes else ''}{count} dead event(s) of session {escape(session)}", yes
            )
            moved = store.events.redrive(session, list(indexes) if indexes else None)
    if as_json:
        print_json({"moved": moved})
    else:
        click.echo(f"re-drove {moved} dead event(s) of {escape(session)}")


# -- documents ----------------------------------------------------------------


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
    Exit 3 when there is no such document, history or backup.
    """
    from .revisions import change_summary, history_view

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


# -- records ------------------------------------------------------------------


@click.group()
def records() -> None:
    """Browse agent records: conversations (fork tree), entries, documents."""


def _after(page: dict[str, Any]) -> int | None:
    """The ``--after`` value that continues a records scan page (None at the end)."""
    nxt = page.get("next")
    return None if nxt is None else int(nxt["after"])


@records.command("conversations")
@after_option("Conversations with an id greater than this (the cursor the previous page printed).", type=int)
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
    emit_page(rows, _after(page), as_json, ["id", "parent", "forked_at", "owner"])


@records.command("entries")
@click.argument("conversation", type=int)
@after_option("Entries older than this id (the cursor the previous page printed; newest first).", type=int)
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
    emit_page(rows, _after(page), as_json, ["id", "conversation", "role", "entry"])


@records.command("documents")
@click.option("--conversation", type=int, default=None, help="Documents of this conversation.")
@click.option("--task", type=int, default=None, help="Documents of this task.")
@click.option("--kind", default=None, help="Only documents of this kind.")
@click.option("--at", "at_seq", type=int, default=None, help="Alive as of this commit sequence (default: now).")
@after_option("Documents with an id greater than this (the cursor the previous page printed).", type=int)
@LIMIT
@data_command
def records_documents(
    conversation: int | None,
    task: int | None,
    kind: str | None,
    at_seq: int | None,
    after: int | None,
    limit: int,
    url: str | None,
    prefix: str,
    as_json: bool,
) -> None:
    """List the versioned documents of one scope (the session, --conversation ID or --task ID) by id.

    Each with its kind, key (for keyed documents) and the commit that created
    it; `durastate records document ID` prints one's value.
    """
    if conversation is not None and task is not None:
        raise click.UsageError("--conversation and --task name two scopes: pick one")
    if conversation is not None:
        scope: dict[str, Any] = {"kind": "conversation", "conversationId": conversation}
    elif task is not None:
        scope = {"kind": "task", "taskId": task}
    else:
        scope = {"kind": "session"}
    query: dict[str, Any] = {"scope": scope}
    if kind is not None:
        query["kind"] = kind
    query["at"] = "current" if at_seq is None else at_seq
    cursor = None if after is None else {"after": after, "order": "ascending"}
    with store_from(url, prefix, read_only=True) as store:
        page = store.records.scan_documents(query, limit, cursor)
    rows = [
        {"id": d.get("id"), "kind": d.get("kind"), "key": d.get("key"), "created_seq": d.get("createdAt"), "record": d}
        for d in page["items"]
    ]
    emit_page(rows, _after(page), as_json, ["id", "kind", "key", "created_seq"])


@records.command("document")
@click.argument("id", type=int)
@click.option("--at", "at", type=int, default=None, help="The value as of this commit sequence.")
@click.option("--revisions", is_flag=True, help="List the stored revisions instead of the value.")
@data_command
def records_document(id: int, at: int | None, revisions: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Print a versioned document (current, or --at a commit), or its --revisions (exit 3 when absent)."""
    with store_from(url, prefix, read_only=True) as store:
        if revisions:
            rows = store.records.document_revisions(id)
            if not rows:
                raise NotFound(f"no document {id}")
            emit_page(rows, None, as_json, ["seq", "kind", "version", "depth"])
            return
        doc = store.records.document(id, "current" if at is None else at)
    if doc is None:
        raise NotFound(f"no document {id} alive {'now' if at is None else f'at {at}'}")
    print_json(doc)


# -- presence -----------------------------------------------------------------


@click.command()
@click.argument("ns", required=False)
@after_option("Namespaces after this one: the cursor the previous page printed.")
@LIMIT
@data_command
def presence(ns: str | None, after: str | None, limit: int, url: str | None, prefix: str, as_json: bool) -> None:
    """List presence namespaces, or the live fields of NS (all of them: one namespace is read at once)."""
    with store_from(url, prefix, read_only=True) as store:
        if ns is None:
            names, more = take_page(lambda a, n: store.presence.namespaces(after=a, limit=n), after, limit, lambda n: n)
            emit_page([{"namespace": n} for n in names], more, as_json, ["namespace"])
            return
        entries = store.presence.peek(ns)  # read() would sweep expired fields: a write
    rows = [
        {
            "participant": p.participant,
            "field": p.field,
            "value": p.value,
            "seen": p.seen,
            "at": at(p.at),
            "expires": at(p.expires_at),
        }
        for p in entries
    ]
    emit_page(rows, None, as_json, ["participant", "field", "value", "seen", "at", "expires"])
