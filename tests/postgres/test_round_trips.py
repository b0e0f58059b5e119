"""How many network round trips a write costs on PostgreSQL (pipelined transactions).

Counted on the wire by the relay (``CuttingProxy.flights``: a client
message after an answer from the server starts a new round trip), on a
store with one pooled connection. Each operation runs twice first, so its
statements are prepared (a first run sends a statement's text in a round
trip of its own) and the count is the steady state's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import durastate
from durastate.engines.base import WRITE
from durastate.testing import postgres_server
from durastate.testing.postgres_server import as_citus

from .proxy import CuttingProxy

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def relay(proxy: CuttingProxy) -> CuttingProxy:
    return proxy  # conftest's, counting round trips here


@contextlib.contextmanager
def _through_relay(direct: str, relayed: str) -> Iterator[durastate.Store]:
    """A store on ``relayed`` with one pooled connection, migrated first on ``direct`` (without the relay)."""
    durastate.open(direct).close()
    with durastate.open(relayed, min_connections=1, max_connections=1) as s:
        yield s


@pytest.fixture
def store(pg_url: str, via_proxy: str) -> Iterator[durastate.Store]:
    with _through_relay(pg_url, via_proxy) as s:
        yield s


def round_trips(relay: CuttingProxy, operation: Callable[[], object]) -> int:
    for _ in range(2):
        operation()
    before = relay.flights
    operation()
    return relay.flights - before


def test_put_many_of_many_pairs_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    pairs = [(b"k%d" % i, b"v") for i in range(20)]
    assert round_trips(relay, lambda: store.kv.put_many(b"s", b"n", pairs)) == 1
    assert round_trips(relay, lambda: store.kv.put_many(b"s", b"n", pairs, if_absent=True)) == 1


def test_a_push_of_several_items_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    assert round_trips(relay, lambda: store.queues.push("jobs", [b"a", b"b", b"c"])) == 1


@pytest.mark.parametrize("max_attempts", [5, 1], ids=["back-to-queue", "buried"])
def test_a_nack_is_two_round_trips(store: durastate.Store, relay: CuttingProxy, max_attempts: int) -> None:
    """The UPDATE's answer decides whether to bury; the bury, the NOTIFY and COMMIT go in one more."""
    counts = _nack_round_trips(store, relay, max_attempts)
    assert counts[-1] == 2, counts
    stats = store.queues.stats("jobs")
    assert (stats.ready, stats.dead) == ((3, 0) if max_attempts == 5 else (0, 3))


@pytest.mark.parametrize("mode", ["postgres", "citus"])
def test_an_ack_then_the_next_claim_is_one_round_trip(
    pg_url: str, via_proxy: str, relay: CuttingProxy, mode: str
) -> None:
    """huey's dequeue with a finished task's ack: one statement, no transaction (was 3 round trips), in the Citus
    statement mode too (a store's tables are in one schema: Citus routes the statement whole)."""
    direct, relayed = (pg_url, via_proxy) if mode == "postgres" else (as_citus(pg_url), as_citus(via_proxy))
    with _through_relay(direct, relayed) as store:
        _one_round_trip_ack_then_claim(store, relay)


def _nack_round_trips(store: durastate.Store, relay: CuttingProxy, max_attempts: int | None) -> list[int]:
    """Round trips of three nacks, each of an item pushed and claimed for it (the last is the steady state's)."""
    counts = []
    for _ in range(3):
        store.queues.push("jobs", [b"job"], max_attempts=max_attempts)
        claim = store.queues.claim("jobs")
        assert claim is not None
        before = relay.flights
        claim.nack()
        counts.append(relay.flights - before)
    return counts


@contextlib.contextmanager
def _citus_cluster_store() -> Iterator[tuple[durastate.Store, CuttingProxy]]:
    """A store in a fresh distributed schema on the Citus coordinator of ``DURASTATE_TEST_CITUS_URL``, relayed."""
    base, reason = postgres_server.citus_url()
    if base is None:
        pytest.skip(reason)
    direct, schema = postgres_server.create_schema(base)
    parts = urlsplit(direct)
    relay = CuttingProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    # The relay reads the protocol: no TLS or GSS encryption between it and the client.
    query = parts.query + ("&" if parts.query else "") + "sslmode=disable&gssencmode=disable"
    relayed = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{relay.port}", query=query))
    try:
        with _through_relay(as_citus(direct), as_citus(relayed)) as store:
            yield store, relay
    finally:
        relay.close()
        postgres_server.drop_schema(base, schema)


@pytest.mark.parametrize("mode", ["postgres", "citus", "citus-cluster"])
def test_a_transactions_notifications_ride_its_commit(
    pg_url: str, via_proxy: str, proxy: CuttingProxy, mode: str
) -> None:
    """The Citus mode sends a transaction's NOTIFY after its COMMIT, in the COMMIT's round trip: a transaction
    that pushes, a push and a nack cost what they cost in the plain mode (where a trigger announces inside it).
    ``citus-cluster``: on a Citus coordinator (``DURASTATE_TEST_CITUS_URL``), in a distributed schema."""
    with contextlib.ExitStack() as stack:
        if mode == "citus-cluster":
            store, relay = stack.enter_context(_citus_cluster_store())
        else:
            direct, relayed = (pg_url, via_proxy) if mode == "postgres" else (as_citus(pg_url), as_citus(via_proxy))
            store, relay = stack.enter_context(_through_relay(direct, relayed)), proxy

        def push_and_put() -> None:
            with store.transaction():
                store.queues.push("jobs", [b"a"])
                store.kv.put(b"s", b"n", b"k", b"v")

        assert round_trips(relay, push_and_put) == 2  # the push's answer; the put and the COMMIT
        # One item, or several: one round trip (the Citus mode pushes one item in a transaction, see Queues.push).
        assert round_trips(relay, lambda: store.queues.push("jobs", [b"x"])) == 1
        assert round_trips(relay, lambda: store.queues.push("jobs", [b"x", b"y"])) == 1
        # An event appended alone: one statement on plain PostgreSQL; in the Citus mode a transaction of its own
        # (the statement's answer, then the COMMIT with the notification behind it).
        append = round_trips(relay, lambda: store.events.append("session", [{"type": "t"}]))
        assert append == (1 if mode == "postgres" else 2)
        nacks = _nack_round_trips(store, relay, None)
        assert nacks[-1] == 2, nacks


def _one_round_trip_ack_then_claim(store: durastate.Store, relay: CuttingProxy) -> None:
    queues = store.queues
    queues.push("jobs", [b"job%d" % i for i in range(4)])
    held = queues.claim("jobs", lease=60)
    assert held is not None

    def ack_then_claim() -> None:
        nonlocal held
        assert held is not None
        acked, held = queues._ack_then_claim(held, "jobs", lease=60)
        assert acked and held is not None

    assert round_trips(relay, ack_then_claim) == 1
    assert queues.stats("jobs").in_flight == 1 and queues.stats("jobs").ready == 0


def test_a_transaction_saves_the_begin_and_the_attempt_row_round_trips(
    store: durastate.Store, relay: CuttingProxy
) -> None:
    """BEGIN and the attempt row go out with the first statement: n awaited statements + COMMIT."""

    def two_increments() -> None:
        with store.transaction():
            store.kv.incr(b"s", b"n", b"a")
            store.kv.incr(b"s", b"n", b"b")

    assert round_trips(relay, two_increments) == 3


def test_puts_in_a_transaction_ride_the_commit(store: durastate.Store, relay: CuttingProxy) -> None:
    """Nobody reads a put's row count: BEGIN, the puts and COMMIT go in one flight."""

    def two_puts() -> None:
        with store.transaction():
            store.kv.put(b"s", b"n", b"a", b"1")
            store.kv.put(b"s", b"other", b"b", b"2")
            store.kv.put_many(b"s", b"n", [(b"c", b"3")])

    assert round_trips(relay, two_puts) == 1
    assert store.kv.get_many(b"s", b"n", [b"a", b"c"]) == [b"1", b"3"]


@pytest.mark.parametrize("fields", [1, 1000])
def test_a_presence_set_is_one_round_trip_whatever_its_fields(
    store: durastate.Store, relay: CuttingProxy, fields: int
) -> None:
    """One statement per chunk of fields (``presence.FIELD_CHUNK``), none awaited: the writes and COMMIT go in
    one flight. A statement awaited per field was a round trip each: 100,000 fields ~12 s on PostgreSQL against
    ~0.1 s on SQLite (bench/RESULTS.md, "Presence: many fields on PostgreSQL")."""
    values = {f"f{i:04d}": i for i in range(fields)}
    set_ = store.presence.set
    assert round_trips(relay, lambda: set_("room", "p", values, at_ms=1, seen=1, ttl_ms=60_000)) == 1
    # Deletions (None) mixed with writes: chunks of both, one flight.
    mixed = {field: None if i % 2 else -i for i, field in enumerate(values)}
    assert round_trips(relay, lambda: set_("room", "p", mixed, at_ms=2, seen=2, ttl_ms=60_000)) == 1
    entries = store.presence.read("room")
    assert [(e.field, e.value, e.seen) for e in entries] == [(f, -i, 2) for i, f in enumerate(values) if i % 2 == 0]


def test_an_agent_framework_save_of_a_new_id_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    """The lock (lock_later), the absent-id requirement, both writes and COMMIT: one flight; a stored id takes two
    transactions (the failed flight, then the read and the move)."""
    pytest.importorskip("agent_framework")
    import asyncio
    import itertools

    from agent_framework import WorkflowCheckpoint

    from durastate.integrations.agent_framework import DurastateCheckpointStorage

    storage = DurastateCheckpointStorage(store=store)
    ids = itertools.count()

    def save(workflow: str, checkpoint_id: str | None = None) -> None:
        checkpoint = WorkflowCheckpoint(
            workflow_name=workflow, graph_signature_hash="h", checkpoint_id=checkpoint_id or f"c{next(ids)}"
        )
        asyncio.run(storage.save(checkpoint))

    assert round_trips(relay, lambda: save("w")) == 1
    for workflow in ("w", "w2", "w", "w2", "w"):  # the last moves are counted (statements prepared by then)
        before = relay.flights
        save(workflow, "moved")
    # Stored under "w2" (the rare path: the framework mints a new id per checkpoint): the failed flight and its
    # ROLLBACK, then the full path (the lock, the read, the old index row's delete, COMMIT): 8 as measured.
    assert relay.flights - before == 8
    save("w2", "moved")
    assert asyncio.run(storage.list_checkpoint_ids(workflow_name="w2")) == ["moved"]
    assert "moved" not in asyncio.run(storage.list_checkpoint_ids(workflow_name="w"))


def test_a_failure_sent_unawaited_fails_the_commit_and_applies_nothing(
    store: durastate.Store, relay: CuttingProxy
) -> None:
    """A statement nobody waited for fails: the commit raises, and nothing of the transaction stays."""
    store.kv.put(b"s", b"n", b"before", b"1")
    bad = store.engine.sql(WRITE("INSERT INTO no_such_table VALUES (1)"))
    with pytest.raises(durastate.InvalidRequest, match="no_such_table"), store.transaction():
        store.kv.put(b"s", b"n", b"inside", b"1")
        store.engine.send(bad)
    assert store.kv.get(b"s", b"n", b"inside") is None
    store.kv.put(b"s", b"n", b"after", b"1")  # the connection is usable again
    assert store.kv.get_many(b"s", b"n", [b"before", b"after"]) == [b"1", b"1"]


def test_a_failure_sent_unawaited_in_a_nested_block_is_contained_by_it(
    store: durastate.Store, relay: CuttingProxy
) -> None:
    bad = store.engine.sql(WRITE("INSERT INTO no_such_table VALUES (1)"))
    with store.transaction():
        store.kv.put(b"s", b"n", b"outer", b"1")
        with pytest.raises(durastate.InvalidRequest), store.transaction():
            store.engine.send(bad)
        store.kv.put(b"s", b"n", b"after", b"1")
    assert store.kv.get_many(b"s", b"n", [b"outer", b"after"]) == [b"1", b"1"]


def test_langgraph_put_writes_of_many_writes_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    pytest.importorskip("langgraph")
    from durastate.integrations.langgraph import DurastateSaver

    saver = DurastateSaver(store)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
    writes = [(f"channel{i}", {"value": i}) for i in range(8)]
    assert round_trips(relay, lambda: saver.put_writes(config, writes, task_id="task")) == 1  # type: ignore[arg-type]
    written = saver.get_tuple(config)
    assert written is None  # writes without their checkpoint are not a checkpoint


def test_langgraph_aput_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    """An aput runs in a transaction of its own (rolled back if cancelled before the commit): still one flight."""
    pytest.importorskip("langgraph")
    import asyncio

    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    from durastate.integrations.langgraph import DurastateSaver

    saver = DurastateSaver(store)
    config: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()

    def aput() -> None:
        nonlocal config, checkpoint
        checkpoint = create_checkpoint(checkpoint, None, 1)
        checkpoint["channel_values"] = {"messages": [{"content": "hello"}]}
        version = saver.get_next_version(checkpoint["channel_versions"].get("messages"), None)
        checkpoint["channel_versions"] = {"messages": version}
        metadata = {"source": "loop", "step": 1, "parents": {}, "run_id": "run-1"}
        put = saver.aput(config, checkpoint, metadata, {"messages": version})  # type: ignore[arg-type]
        config = asyncio.run(put)  # type: ignore[assignment]

    try:
        assert round_trips(relay, aput) == 1
        latest = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})  # type: ignore[arg-type]
        assert latest is not None and latest.checkpoint["channel_values"]["messages"] == [{"content": "hello"}]
    finally:
        saver.close()


def _entry(id: int, conversation: int = 1) -> dict[str, object]:
    return {"type": "entry", "value": {"id": id, "conversationId": conversation, "kind": "message"}}


def test_a_records_commit_is_one_round_trip(store: durastate.Store, relay: CuttingProxy) -> None:
    """BEGIN, the sequence (recorded in the attempt row), the id check, the writes and COMMIT: one flight."""
    records = store.records
    ids = iter(range(10_000, 20_000))
    seqs: list[int] = []

    def one_entry() -> None:
        seqs.append(records.commit([_entry(next(ids))]))

    def several_entries() -> None:
        seqs.append(records.commit([_entry(next(ids)) for _ in range(5)]))

    def task(id: int, status: str) -> dict[str, object]:
        value = {"id": id, "conversationId": 1, "kind": "k", "state": {"status": status}}
        return {"type": "task", "value": {**value, "abortRequested": False, "background": False}}

    def entries_and_records() -> None:
        task_id = next(ids)
        seqs.append(
            records.commit(
                [{"type": "conversation", "value": {"id": next(ids)}}, _entry(next(ids)), task(task_id, "a")]
            )
        )
        # An upsert of the same task: its id is held by a task, which the check lets through.
        seqs.append(records.commit([task(task_id, "b")]))

    assert round_trips(relay, one_entry) == 1
    assert round_trips(relay, several_entries) == 1
    assert round_trips(relay, entries_and_records) == 2  # two commits
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # each got its own, gap-free
    entry = records.entry(10_000)
    assert entry is not None and entry["commitSeq"] == seqs[0]


def test_a_records_commit_that_collides_takes_the_precise_path(store: durastate.Store, relay: CuttingProxy) -> None:
    """The one-flight check fails, rolls back, and the precise path words the refusal; nothing is written."""
    records = store.records
    before = records.commit([_entry(30_000)])
    with pytest.raises(durastate.Conflict, match="ID 30000 already belongs to entry"):
        records.commit([_entry(30_001), _entry(30_000)])
    assert records.entry(30_001) is None
    assert records.last_seq() == before
    assert records.commit([_entry(30_001)]) == before + 1  # gap-free after the refusal


def test_a_records_commit_that_collides_inside_a_transaction_is_contained(
    store: durastate.Store, relay: CuttingProxy
) -> None:
    """Inside the caller's transaction the failed check rolls back to the commit's savepoint only."""
    records = store.records
    records.commit([_entry(31_000)])
    with store.transaction():
        store.kv.put(b"s", b"n", b"outer", b"1")
        with pytest.raises(durastate.Conflict, match="ID 31000 already belongs to entry"):
            records.commit([_entry(31_001), _entry(31_000)])
        seq = records.commit([_entry(31_002)])
    assert store.kv.get(b"s", b"n", b"outer") == b"1"
    assert records.entry(31_001) is None
    entry = records.entry(31_002)
    assert entry is not None and entry["commitSeq"] == seq == records.last_seq()


def _document(id: int, kind: str, version: int = 1) -> dict[str, object]:
    record = {"id": id, "kind": kind, "scope": {"kind": "conversation", "conversationId": 1}}
    record.update(history="rewindable", fork="asOf")
    return {"type": "document.create", "record": record, "content": {"version": version, "kind": "base", "value": {}}}


def _change(id: int, key: str, value: object, version: int = 1) -> dict[str, object]:
    return {
        "type": "document.change",
        "id": id,
        "content": {"version": version, "kind": "delta", "ops": [["s", [key], value]]},
    }


def test_a_records_commit_with_documents_is_two_round_trips(store: durastate.Store, relay: CuttingProxy) -> None:
    """The documents' rows are read with BEGIN and the sequence (a delta applies to the stored value); their
    checks, writes and COMMIT ride the second flight, with an entry's and a task's. Was 7 for one document
    change (the sequence, the record, the newest revision and the address read one at a time, each write
    awaited), 12 with an entry and a task."""
    records = store.records
    ids = iter(range(40_000, 50_000))
    seqs: list[int] = []
    created: list[int] = []
    kinds: dict[int, str] = {}  # each document's address (its kind)

    def create() -> None:
        id = next(ids)
        created.append(id)
        kinds[id] = f"kind-{id}"
        seqs.append(records.commit([_document(id, kinds[id])]))

    def change() -> None:
        seqs.append(records.commit([_change(created[0], "n", len(seqs))]))

    def change_with_an_entry() -> None:
        seqs.append(records.commit([_entry(next(ids)), _change(created[0], "m", len(seqs))]))

    def retire_and_recreate() -> None:
        # The address's current incarnation retired and a new one created at it: the batch's one requirement.
        old, new = created[-1], next(ids)
        created.append(new)
        kinds[new] = kinds[old]
        seqs.append(records.commit([{"type": "document.retire", "id": old}, _document(new, kinds[new])]))

    assert round_trips(relay, create) == 2
    assert round_trips(relay, change) == 2
    assert round_trips(relay, change_with_an_entry) == 2
    assert round_trips(relay, retire_and_recreate) == 2
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    document = records.document(created[0], "current")
    assert document is not None and document["value"] == {
        "n": 5,
        "m": 8,
    }  # the last change of each: made with 5 and 8 commits before
    current = records.find_document(
        {"kind": kinds[created[-1]], "scope": {"kind": "conversation", "conversationId": 1}}, "current"
    )
    assert current is not None and current["id"] == created[-1]


def test_a_refused_document_commit_takes_the_precise_path(store: durastate.Store, relay: CuttingProxy) -> None:
    """A refusal found in the flight (a second current document at an address, a delta of another version, an
    id taken) rolls it back; the precise path words it in its own order (ids first) and nothing is written."""
    records = store.records
    records.commit([_document(60_000, "a"), _entry(60_001)])
    before = records.last_seq()
    cases = [
        ([_document(60_010, "a")], "Document address already has a current incarnation"),
        ([_change(60_000, "x", 1, version=2)], "Document 60000 version transition requires a base"),
        ([_change(60_000, "x", 1), _entry(60_001)], "ID 60001 already belongs to entry"),
        ([_change(60_000, "x", 1), _document(60_001, "b")], "ID 60001 already belongs to entry"),
    ]
    for writes, message in cases:
        with pytest.raises(durastate.Conflict, match=message):
            records.commit(writes)
    assert records.last_seq() == before
    assert records.document(60_010, "current") is None
    document = records.document(60_000, "current")
    assert document is not None and document["value"] == {}


def _dead_letters(store: durastate.Store, count: int) -> list[int]:
    """``count`` more dead letters of queue ``jobs`` (pushed with one attempt, claimed and nacked); the ids of
    every dead letter of ``jobs``."""
    queues = store.queues
    queues.push("jobs", [b"job%d" % i for i in range(count)], max_attempts=1)
    while (claim := queues.claim("jobs")) is not None:
        claim.nack()
    return [d.id for d in queues.dead_letters("jobs", limit=None)]


@pytest.mark.parametrize("count", [1, 1000])
def test_a_redrive_or_delete_of_dead_letters_by_id_is_one_round_trip(
    pg_url: str, store: durastate.Store, relay: CuttingProxy, count: int
) -> None:
    """The check (every id a dead letter), the moves and COMMIT: one flight whatever the count. An awaited
    statement per id was 2 round trips each (the move, then the delete). The dead letters are made without
    the relay."""
    queues = store.queues
    with durastate.open(pg_url) as direct:
        for operation in ("redrive", "delete_dead"):
            direct.queues.clear("jobs")
            ids = _dead_letters(direct, 3 * count)  # round_trips runs the operation three times
            batches = iter([ids[i * count : (i + 1) * count] for i in range(3)])
            call = getattr(queues, operation)
            assert round_trips(relay, lambda call=call, batches=batches: call("jobs", next(batches))) == 1, operation
            assert queues.stats("jobs").dead == 0
    assert queues.stats("jobs").ready == 0  # the redriven ones were cleared before the deletes
