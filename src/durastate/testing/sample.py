"""A store filled with a little of everything (CLI, inspector and export tests).

``fill(store)`` writes, through the public API, data in every state the
inspector shows: kv values (text, JSON, binary, one with a TTL), logs and
counters; queue items ready, leased, delayed and dead; documents (one with
three revisions: a store that records history has them) and a ``clear``
backup; event sessions with processed, claimed, failed and
dead-lettered events and a snapshot; records with a forked conversation,
entries and a versioned document; presence. It returns what it wrote, so
tests compute their expectations from it instead of hard-coding them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import durastate


@dataclass
class Sample:
    kv_scopes: list[bytes] = field(default_factory=list)
    kv_values: dict[tuple[bytes, bytes, bytes], bytes] = field(default_factory=dict)
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    documents: dict[str, int] = field(default_factory=dict)  # key -> revision
    # key -> the data of each revision written, oldest first (what a recording store's history holds)
    document_writes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    sessions: list[str] = field(default_factory=list)
    conversations: dict[int, int | None] = field(default_factory=dict)  # id -> fork parent
    entries: dict[int, list[int]] = field(default_factory=dict)  # conversation -> own entry ids
    record_document: int = 0
    record_document_seqs: list[int] = field(default_factory=list)
    presence: dict[str, list[str]] = field(default_factory=dict)  # ns -> participants


def fill(store: durastate.Store, *, bulk: int = 0) -> Sample:
    """Fill ``store``; ``bulk`` extra kv values go to scope ``bulk``/ns ``rows``."""
    s = Sample()
    kv = store.kv
    values = {
        (b"run-1", b"cfg", b"model"): b"small",
        (b"run-1", b"cfg", b"params"): b'{"temperature": 0.2, "top_p": 0.9}',
        (b"run-1", b"blobs", b"\x00\xffbin"): bytes(range(16)),
        (b"run-2", b"cfg", b"model"): b"large",
    }
    for (scope, ns, key), value in values.items():
        kv.put(scope, ns, key, value)
    kv.put(b"cache", b"http", b"/index", b"<html>", ttl=3600)
    values[(b"cache", b"http", b"/index")] = b"<html>"
    kv.append(b"run-1", b"log", b"stream", b"started")
    kv.append(b"run-1", b"log", b"stream", b"step-1")
    kv.incr(b"run-1", b"stats", b"rows", 42)
    if bulk:
        for start in range(0, bulk, 5000):
            kv.put_many(
                b"bulk", b"rows", [(b"row-%08d" % i, b"value %d" % i) for i in range(start, min(bulk, start + 5000))]
            )
            for i in range(start, min(bulk, start + 5000)):
                values[(b"bulk", b"rows", b"row-%08d" % i)] = b"value %d" % i
    s.kv_values = values
    s.kv_scopes = sorted({scope for scope, _, _ in values})

    q = store.queues
    q.push("emails", [b"to:ann", b"to:bob", b"to:cy", b"to:dee"])
    leased = q.claim("emails", lease=1800)  # long enough for any slow test run; due before the delayed item
    assert leased is not None
    q.push("emails", [b"to:later"], delay=3600)
    q.push("fragile", [b'{"job": 7}'], max_attempts=1)
    doomed = q.claim("fragile", lease=30)
    assert doomed is not None
    doomed.nack(error="smtp timeout")
    s.queues = {
        "emails": {"ready": 3, "in_flight": 1, "delayed": 1, "dead": 0},
        "fragile": {"ready": 0, "in_flight": 0, "delayed": 0, "dead": 1},
    }

    docs = store.documents
    s.document_writes["runs/1"] = [
        {"state": "queued"},
        {"state": "running", "step": 3},
        {"state": "running", "step": 4, "worker": "worker-b"},
    ]
    for data in s.document_writes["runs/1"]:
        s.documents["runs/1"] = docs.write("runs/1", data, expect=s.documents.get("runs/1", 0))
    s.document_writes["runs/2"] = [{"state": "done"}]
    s.documents["runs/2"] = docs.write("runs/2", {"state": "done"})
    docs.write("scratch", {"tmp": True})
    backup = docs.clear("scratch")
    assert backup is not None
    s.documents[backup] = 1

    ev = store.events
    ev.append(
        "chat-1",
        [
            {"id": "m1", "type": "user.message", "payload": {"text": "hi"}, "lane": "turns"},
            {"id": "m2", "type": "user.message", "payload": {"text": "again"}, "lane": "turns"},
            {"id": "t1", "type": "tool.call", "payload": {"tool": "search"}},
        ],
    )
    claimed = ev.claim_available("chat-1", holder="worker-a", ttl_ms=600_000)
    first = next(e for e in claimed.events if e.id == "m1")
    ev.complete_attempt(
        "chat-1",
        first.index,
        first.attempt_count,
        [{"id": "r1", "type": "agent.reply", "payload": {"text": "hello"}, "settled": True}],
    )
    tool = next(e for e in claimed.events if e.id == "t1")
    ev.fail_attempt("chat-1", tool.index, tool.attempt_count, "search backend down", max_failures=1)
    ev.put_snapshot("chat-1", "transcript", first.index, {"messages": 1})
    ev.append("chat-2", [{"id": "x1", "type": "user.message", "payload": {"text": "yo"}}])
    s.sessions = ["chat-1", "chat-2"]

    rec = store.records
    root, fork = rec.mint_id(), rec.mint_id()
    e1, e2, e3 = rec.mint_id(), rec.mint_id(), rec.mint_id()
    rec.commit(
        [
            {"type": "conversation", "value": {"id": root}},
            {"type": "entry", "value": {"id": e1, "conversationId": root, "role": "user", "text": "plan a trip"}},
            {"type": "entry", "value": {"id": e2, "conversationId": root, "role": "assistant", "text": "where to?"}},
        ]
    )
    rec.commit(
        [
            {"type": "conversation", "value": {"id": fork, "parent": {"conversationId": root, "at": e1}}},
            {"type": "entry", "value": {"id": e3, "conversationId": fork, "role": "assistant", "text": "Lisbon?"}},
        ]
    )
    s.conversations = {root: None, fork: root}
    s.entries = {root: [e1, e2], fork: [e3]}
    doc = rec.mint_id()
    record: dict[str, Any] = {"id": doc, "kind": "notes", "scope": {"kind": "conversation", "conversationId": root}}
    seqs = [
        rec.commit(
            [
                {
                    "type": "document.create",
                    "record": record,
                    "content": {"kind": "base", "version": 1, "value": {"city": None, "days": 3}},
                }
            ]
        )
    ]
    seqs.append(
        rec.commit(
            [
                {
                    "type": "document.change",
                    "id": doc,
                    "content": {
                        "kind": "delta",
                        "version": 1,
                        "ops": [["s", ["city"], "Lisbon"]],
                    },
                }
            ]
        )
    )
    seqs.append(
        rec.commit(
            [
                {
                    "type": "document.change",
                    "id": doc,
                    "content": {"kind": "delta", "version": 1, "ops": [["s", ["days"], 5]]},
                }
            ]
        )
    )
    s.record_document, s.record_document_seqs = doc, seqs

    pr = store.presence
    pr.set("room-1", "alice", {"typing": True, "cursor": 12}, at_ms=1, seen=1, ttl_ms=3_600_000)
    pr.set("room-1", "bob", {"typing": False}, at_ms=1, seen=1, ttl_ms=3_600_000)
    s.presence = {"room-1": ["alice", "bob"]}
    return s
