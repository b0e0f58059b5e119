"""Conformance for ``store.records``: the record builders and helpers its test modules share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate.records import Records

__all__ = ["rec_seeded"]

WORKER_TIMEOUT = 60.0


def conversation(
    id: int, *, parent: tuple[int, int] | None = None, owner: tuple[int, int] | None = None
) -> dict[str, Any]:
    value: dict[str, Any] = {"id": id, "title": f"c{id}"}
    if parent is not None:
        value["parent"] = {"conversationId": parent[0], "at": parent[1]}
    if owner is not None:
        value["owner"] = {"conversationId": owner[0], "taskId": owner[1]}
    return {"type": "conversation", "value": value}


def entry(id: int, conversation_id: int, *, head: str | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {"id": id, "conversationId": conversation_id, "text": f"e{id}"}
    if head is not None:
        value["head"] = head
    return {"type": "entry", "value": value}


def task(
    id: int, conversation_id: int, *, kind: str = "tool", status: str = "running", abort: bool = False, bg: bool = False
) -> dict[str, Any]:
    return {
        "type": "task",
        "value": {
            "id": id,
            "conversationId": conversation_id,
            "kind": kind,
            "state": {"status": status},
            "abortRequested": abort,
            "background": bg,
        },
    }


def submission(
    id: int, conversation_id: int, *, request_id: str | None = None, status: str = "queued"
) -> dict[str, Any]:
    value: dict[str, Any] = {"id": id, "conversationId": conversation_id, "status": status}
    if request_id is not None:
        value["requestId"] = request_id
    return {"type": "submission", "value": value}


def conv_scope(conversation_id: int) -> dict[str, Any]:
    return {"kind": "conversation", "conversationId": conversation_id}


def doc_record(
    id: int, *, kind: str = "notes", scope: dict[str, Any] | None = None, key: str | None = None, **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {"id": id, "kind": kind, "scope": scope or {"kind": "session"}}
    if key is not None:
        record["key"] = key
    record.update(extra)
    return record


def base(value: dict[str, Any], version: int = 1) -> dict[str, Any]:
    return {"kind": "base", "version": version, "value": value}


def delta(ops: list[list[Any]], version: int = 1) -> dict[str, Any]:
    """Delta content; ``ops`` in Chord's tuple vocabulary (``durastate._chord``)."""
    return {"kind": "delta", "version": version, "ops": ops}


def create(record: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "document.create", "record": record, "content": content}


def change(id: int, content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "document.change", "id": id, "content": content}


def retire(id: int) -> dict[str, Any]:
    return {"type": "document.retire", "id": id}


def copy_doc(record: dict[str, Any], source: int, at: int | str) -> dict[str, Any]:
    return {"type": "document.copy", "record": record, "source": {"id": source, "at": at}}


def set_op(key: str, value: Any) -> list[Any]:
    return ["s", [key], value]


def all_pages(scan: Callable[..., dict[str, Any]], query: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Every item of a paged scan, following ``next`` cursors; checks page sizes."""
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):
        page = scan(query, limit, cursor)
        assert len(page["items"]) <= limit
        items.extend(page["items"])
        if "next" not in page:
            return items
        assert len(page["items"]) == limit
        cursor = page["next"]
    raise AssertionError("scan did not end")


def fingerprint(records: Records, ids: range) -> object:
    """Everything readable about ``ids`` (as any record type) plus the sequence."""
    out: list[object] = [records.last_seq()]
    for i in ids:
        out.append(
            (
                records.conversation(i),
                records.entry(i),
                records.task(i),
                records.submission(i),
                records.document(i),
            )
        )
    return out


@pytest.fixture
def rec_seeded(store: durastate.Store) -> Records:
    """A store with one conversation (1), an entry (2), a task (3), a submission (4),
    a session document (5) and a full-history conversation document (6)."""
    r = store.records
    r.commit(
        [
            conversation(1),
            entry(2, 1, head="h"),
            task(3, 1),
            submission(4, 1, request_id="req"),
            create(doc_record(5), base({"a": 1})),
            create(doc_record(6, scope=conv_scope(1), key="k"), base({"n": 0})),
        ]
    )
    return r


def refused(records: Records, writes: Any, error: type[Exception], match: str | None) -> None:
    """``writes`` is refused with ``error`` matching ``match`` and changes nothing."""
    before = fingerprint(records, range(1, 12))
    with pytest.raises(error, match=match):
        records.commit(writes)
    assert fingerprint(records, range(1, 12)) == before
