"""``durastate events``: sessions, events, live claims and dead letters; ``events redrive`` writes."""

from __future__ import annotations

from typing import Any

import click

from durastate._validate import INT64_MAX

from .._common import Duration, NotFound, at, data_command, emit_page, print_json, store_from, take_page
from .._format import escape
from ._shared import INT64, LIMIT, YES, after_option, confirm_write, dead_letters_named


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
@after_option("Events after this index: the cursor the previous page printed.", type=INT64)
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
@after_option("Claims on events after this index: the cursor the previous page printed.", type=INT64)
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
    if index > INT64_MAX:
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


def _is_dead_event(store: Any, session: str, index: int) -> bool:
    found = store.events.dead_letters(session, after=index - 1, limit=1) if index > 0 else []
    return bool(found) and found[0].index == index


@events.command("redrive")
@click.argument("session")
@click.option("--index", "indexes", type=INT64, multiple=True, help="Only this event (repeatable); default: all.")
@YES
@data_command
def events_redrive(
    session: str, indexes: tuple[int, ...], yes: bool, url: str | None, prefix: str, as_json: bool
) -> None:
    """Make a session's dead-lettered events claimable again with a fresh failure count (asks first).

    Exit 3 when the session does not exist or an --index is not one of its
    dead letters (nothing is re-driven then).
    """
    with store_from(url, prefix) as store:
        if not _session_exists(store, session):
            raise NotFound(f"no event session {escape(session)!r}")
        if indexes:
            count = dead_letters_named(
                indexes,
                lambda i: _is_dead_event(store, session, i),
                "dead event at index",
                f"session {escape(session)!r}",
                f"durastate events dead {escape(session)}",
            )
        else:
            count = store.events.list_sessions(session, limit=1).sessions[0].failed_count
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
