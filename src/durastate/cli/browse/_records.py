"""``durastate records``: agent records (conversations, entries, versioned documents)."""

from __future__ import annotations

from typing import Any

import click

from .._common import NotFound, data_command, emit_page, print_json, store_from
from ._shared import INT64, LIMIT, after_option


@click.group()
def records() -> None:
    """Browse agent records: conversations (fork tree), entries, documents."""


def _after(page: dict[str, Any]) -> int | None:
    """The ``--after`` value that continues a records scan page (None at the end)."""
    nxt = page.get("next")
    return None if nxt is None else int(nxt["after"])


@records.command("conversations")
@after_option("Conversations with an id greater than this (the cursor the previous page printed).", type=INT64)
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
@click.argument("conversation", type=INT64)
@after_option("Entries older than this id (the cursor the previous page printed; newest first).", type=INT64)
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
@click.option("--conversation", type=INT64, default=None, help="Documents of this conversation.")
@click.option("--task", type=INT64, default=None, help="Documents of this task.")
@click.option("--kind", default=None, help="Only documents of this kind.")
@click.option("--at", "at_seq", type=INT64, default=None, help="Alive as of this commit sequence (default: now).")
@after_option("Documents with an id greater than this (the cursor the previous page printed).", type=INT64)
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
@click.argument("id", type=INT64)
@click.option("--at", "at", type=INT64, default=None, help="The value as of this commit sequence.")
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
