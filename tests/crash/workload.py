"""The crash-cycle workload: random work on every facet, and its checker.

A writer process (``write``) runs a seeded random mix of operations on
documents, events, records, presence, kv and queues, plus cross-facet
transactions, and reports every operation *after* the call returned (the
acknowledgement) on a pipe. The parent kills it at a random moment
(SIGKILL; on PostgreSQL also by terminating its server backends) and, once
every cycle is done, ``check`` proves from the acknowledgements what must
hold:

* every acknowledged write is present;
* no partial batch or transaction: an events batch is all there or not at
  all; a cross-facet transaction's six parts (kv value, document, event,
  records entry, queue item, counter increment) are all there or none are;
* sequences are gap-free: each session's event indexes are 1..n, the
  records commit sequence is 1..last_seq with one entry per commit;
* nothing applied twice by a retry: the counter equals the number of
  committed transactions, the queue holds exactly one item per committed
  transaction, each document revision number is its content's.

Operations whose call raised (a retry budget exhausted while backends were
being terminated) are not acknowledged; they may or may not have
committed, and the checks above hold either way.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import durastate

DOCS = 5
SESSIONS = 3
NAMESPACES = 2
ROOT = 1  # the records conversation every entry belongs to
TX_SCOPE = b"tx"
TX_QUEUE = "tx-queue"


def setup(url: str) -> None:
    """Create what every cycle writes into (idempotent)."""
    with durastate.open(url) as store:
        if store.records.conversation(ROOT) is None:
            store.records.commit([{"type": "conversation", "value": {"id": ROOT, "title": "crash"}}])


def _entry(id: int, text: str) -> dict[str, Any]:
    return {"type": "entry", "value": {"id": id, "conversationId": ROOT, "text": text}}


def write(url: str, cycle: int, seed: int, acks: Any) -> None:
    """Run random operations until killed; send one acknowledgement per finished call."""
    rng = random.Random(seed)
    store = durastate.open(url, busy_timeout=30.0)
    revisions = {}
    for d in range(DOCS):
        doc = store.documents.read(f"doc-{d}")
        revisions[d] = 0 if doc is None else doc.revision
    step = 0
    while True:
        step += 1
        op = rng.choice(("doc", "events", "records", "presence", "tx", "tx"))
        tag = f"{cycle}-{step}"
        try:
            if op == "doc":
                d = rng.randrange(DOCS)
                rev = store.documents.write(f"doc-{d}", {"rev": revisions[d] + 1, "tag": tag}, expect=revisions[d])
                revisions[d] = rev
                acks.send(("doc", d, rev))
            elif op == "events":
                session = f"s-{rng.randrange(SESSIONS)}"
                ids = [f"{tag}-{j}" for j in range(3)]
                store.events.append(session, [{"id": i, "type": "t", "payload": {"batch": tag}} for i in ids])
                acks.send(("events", session, tag))
            elif op == "records":
                id = store.records.mint_id()
                seq = store.records.commit([_entry(id, tag)])
                acks.send(("records", id, seq))
            elif op == "presence":
                ns = f"room-{rng.randrange(NAMESPACES)}"
                n = cycle * 1_000_000 + step
                store.presence.set(ns, "writer", {"n": n}, at_ms=n, seen=n, ttl_ms=10**12)
                acks.send(("presence", ns, n))
            else:
                with store.transaction():
                    store.kv.put(TX_SCOPE, b"done", tag.encode(), b"1")
                    store.documents.write(f"tx-{tag}", {"tag": tag}, expect=0)
                    store.events.append("tx", [{"id": tag, "type": "tx"}])
                    store.records.commit([_entry(store.records.mint_id(), f"tx-{tag}")])
                    store.queues.push(TX_QUEUE, [tag.encode()])
                    store.kv.incr(TX_SCOPE, b"n", b"count")
                acks.send(("tx", tag))
        except durastate.Conflict:
            # A document write lost to the previous cycle's unacknowledged
            # commit: re-read and go on.
            for d in range(DOCS):
                doc = store.documents.read(f"doc-{d}")
                revisions[d] = 0 if doc is None else doc.revision
        except durastate.StoreUnavailable:
            pass  # outcome unknown (connection killed past the retries): not acknowledged


def check(url: str, acks: Iterable[tuple[Any, ...]]) -> dict[str, int]:
    """Assert the invariants of the module docstring; return what was checked."""
    acked = list(acks)
    store = durastate.open(url)
    try:
        facts = {"acknowledged": len(acked)}
        # Documents: acknowledged revisions present, content matches revision.
        for d in range(DOCS):
            doc = store.documents.read(f"doc-{d}")
            top = max((a[2] for a in acked if a[0] == "doc" and a[1] == d), default=0)
            assert (doc.revision if doc else 0) >= top, f"doc-{d}: acknowledged revision {top} lost"
            if doc is not None:
                assert doc.data["rev"] == doc.revision, f"doc-{d}: revision {doc.revision} holds {doc.data}"
        # Events: batches whole, indexes gap-free, acknowledged ones present.
        for s in range(SESSIONS):
            session = f"s-{s}"
            events = store.events.read(session)
            assert [e.index for e in events] == list(range(1, len(events) + 1)), f"{session}: index gap"
            batches: dict[str, int] = {}
            for e in events:
                batches[e.payload["batch"]] = batches.get(e.payload["batch"], 0) + 1
            assert all(n == 3 for n in batches.values()), f"{session}: partial batch {batches}"
            for a in acked:
                if a[0] == "events" and a[1] == session:
                    assert a[2] in batches, f"{session}: acknowledged batch {a[2]} lost"
        # Records: gap-free commit sequence, one entry per commit, acknowledged ones present.
        last = store.records.last_seq()
        seqs = []
        cursor = None
        while True:
            page = store.records.scan_entries({"conversationId": ROOT}, 500, cursor)
            for item in page["items"]:
                found = store.records.entry(item["id"])
                assert found is not None
                seqs.append(found["commitSeq"])
            cursor = page.get("next")
            if cursor is None:
                break
        assert sorted(seqs) == list(range(2, last + 1)), "records: commit sequence has a gap or a duplicate"
        for a in acked:
            if a[0] == "records":
                entry = store.records.entry(a[1])
                assert entry is not None and entry["commitSeq"] == a[2], f"records: acknowledged commit {a} lost"
        facts["record commits"] = last
        # Presence: the newest acknowledged value (or a newer one) is there.
        for ns_index in range(NAMESPACES):
            ns = f"room-{ns_index}"
            top = max((a[2] for a in acked if a[0] == "presence" and a[1] == ns), default=None)
            if top is not None:
                (value,) = [e.value for e in store.presence.read(ns) if e.field == "n"]
                assert value >= top, f"{ns}: acknowledged presence {top} lost (have {value})"
        # Cross-facet transactions: all six parts or none.
        committed = {key.decode() for key, _ in store.kv.scan(TX_SCOPE, b"done")}
        for a in acked:
            if a[0] == "tx":
                assert a[1] in committed, f"transaction {a[1]} acknowledged but lost"
        tx_events = {e.id for e in store.events.read("tx")}
        queued = set()
        while (claim := store.queues.claim(TX_QUEUE, lease=60)) is not None:
            queued.add(claim.payload.decode())
            claim.ack()
        tx_docs = set(store.documents.iter_keys("tx-"))
        assert tx_events == committed, f"events vs kv: {sorted(tx_events ^ committed)[:5]}"
        assert queued == committed, f"queue vs kv: {sorted(queued ^ committed)[:5]}"
        assert tx_docs == {f"tx-{t}" for t in committed}, "documents vs kv differ"
        assert store.kv.counter(TX_SCOPE, b"n", b"count") == len(committed), "counter applied twice or lost"
        facts["transactions committed"] = len(committed)
        return facts
    finally:
        store.close()
