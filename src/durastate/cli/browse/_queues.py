"""``durastate queue``: queue names, counts, items and dead letters; ``queue redrive`` writes."""

from __future__ import annotations

from typing import Any

import click

from .._common import (
    FORMAT_OPTION,
    Name,
    NotFound,
    at,
    data_command,
    emit,
    emit_page,
    parse_bytes,
    print_json,
    render_value,
    show_bytes,
    store_from,
    take_page,
)
from ._shared import INT64, LIMIT, YES, after_option, argument_checked_by_store, confirm_write, dead_letters_named


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
    with store_from(url, prefix, read_only=True) as store, argument_checked_by_store("--after"):
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
    emit_page(
        rows, more, as_json, ["id", "state", "attempts", "max_attempts", "due", "last_error", "payload", "cursor"]
    )


@queue.command("dead")
@click.argument("name")
@after_option("Dead letters with an id greater than this (the cursor the previous page printed).", type=INT64)
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


def _is_dead_letter(store: Any, queue_name: bytes, dead_id: int) -> bool:
    found = store.queues.dead_letters(queue_name, after=dead_id - 1, limit=1) if dead_id > 0 else []
    return bool(found) and found[0].id == dead_id


@queue.command("redrive")
@click.argument("name")
@click.option("--id", "ids", type=INT64, multiple=True, help="Only this dead letter (repeatable); default: all.")
@YES
@data_command
def queue_redrive(name: str, ids: tuple[int, ...], yes: bool, url: str | None, prefix: str, as_json: bool) -> None:
    """Move dead letters back into the queue with fresh attempts (asks first; --yes does not).

    Exit 3 when an --id is not a dead letter of the queue (nothing is moved
    then), or without --id when the queue does not exist (no items, no dead
    letters); a queue with items but no dead letters re-drives 0.
    """
    q = parse_bytes(name)
    with store_from(url, prefix) as store:
        if ids:
            count = dead_letters_named(
                ids,
                lambda i: _is_dead_letter(store, q, i),
                "dead letter",
                f"queue {show_bytes(q)}",
                f"durastate queue dead {show_bytes(q)}",
            )
        else:
            stats = store.queues.stats(q)
            if stats.ready + stats.in_flight + stats.delayed + stats.dead == 0:
                raise NotFound(f"no queue {show_bytes(q)}: it has no items and no dead letters")
            count = stats.dead
        if count == 0:
            moved = 0
        else:
            confirm_write(f"re-drive {'up to ' if ids else ''}{count} dead letter(s) of queue {show_bytes(q)}", yes)
            moved = store.queues.redrive(q, list(ids) if ids else None)
    if as_json:
        print_json({"moved": moved})
    else:
        click.echo(f"re-drove {moved} dead letter(s) of {show_bytes(q)}")
