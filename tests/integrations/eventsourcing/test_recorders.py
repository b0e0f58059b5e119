"""The eventsourcing integration beyond the library's suite: ids in commit order, environment, refusals."""

from __future__ import annotations

import multiprocessing
import struct
import threading
from uuid import UUID, uuid4

import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import InfrastructureFactory, IntegrityError, InterfaceError, StoredEvent, Tracking

import durastate
from durastate import InvalidRequest
from durastate.integrations.eventsourcing import (
    DurastateAggregateRecorder,
    DurastateApplicationRecorder,
    DurastateProcessRecorder,
    DurastateTrackingRecorder,
    Factory,
)

from . import _writers


class Order(Aggregate):
    @event("Placed")
    def __init__(self, item: str) -> None:
        self.item = item
        self.shipped = False

    @event("Shipped")
    def ship(self) -> None:
        self.shipped = True


class Shop(Application[object]):
    def place(self, item: str) -> object:
        order = Order(item)
        self.save(order)
        return order.id


@pytest.mark.multiprocess
def test_notification_ids_are_gap_free_in_commit_order(shared_url: str) -> None:
    """Writers in three processes (some batches refused); a tailing reader never sees a gap."""
    with durastate.open(shared_url) as store:
        recorder = DurastateApplicationRecorder(store, application="orders")
        seen: list[int] = []
        done = threading.Event()
        problems: list[str] = []

        def tail() -> None:
            last = 0
            while True:
                finished = done.is_set()
                page = recorder.select_notifications(start=last, limit=100, inclusive_of_start=False)
                ids = [n.id for n in page]
                if ids != list(range(last + 1, last + 1 + len(ids))):
                    problems.append(f"after {last} read {ids[:5]}...: a gap (a later id committed first)")
                    return
                seen.extend(ids)
                if ids:
                    last = ids[-1]
                elif finished:
                    return

        reader = threading.Thread(target=tail)
        reader.start()
        with multiprocessing.get_context("spawn").Pool(3) as pool:
            written = sum(pool.starmap(_writers.write_batches, [(shared_url, 12, 7)] * 3))
        done.set()
        reader.join(timeout=120)
        assert not problems, problems[0]
        assert seen == list(range(1, written + 1))
        assert recorder.max_notification_id() == written


def test_application_round_trip_through_the_environment(tmp_path: object) -> None:
    url = f"sqlite://{tmp_path}/shop.db"
    env = {"PERSISTENCE_MODULE": "durastate.integrations.eventsourcing", "SHOP_DURASTATE_URL": url}
    shop = Shop(env={**env, "IS_SNAPSHOTTING_ENABLED": "y"})
    order_id = shop.place("book")
    order = shop.repository.get(order_id)
    order.ship()
    shop.save(order)
    shop.take_snapshot(order_id)
    shop.close()

    again = Shop(env=env)  # a new factory, a new store on the same file
    try:
        reloaded = again.repository.get(order_id)
        assert (reloaded.item, reloaded.shipped, reloaded.version) == ("book", True, 2)
        topics = [n.topic.rsplit(".", 1)[-1] for n in again.recorder.select_notifications(start=1, limit=10)]
        assert topics == ["Placed", "Shipped"]
        assert isinstance(again.factory, Factory)
    finally:
        again.close()


def test_applications_sharing_a_store_have_their_own_sequences(store: durastate.Store) -> None:
    first = DurastateApplicationRecorder(store, application="first")
    second = DurastateApplicationRecorder(store, application="second")
    assert first.insert_events([StoredEvent(uuid4(), 1, "t", b"a"), StoredEvent(uuid4(), 1, "t", b"b")]) == [1, 2]
    assert second.insert_events([StoredEvent(uuid4(), 1, "t", b"c")]) == [1]
    assert [n.state for n in second.select_notifications(None, 10)] == [b"c"]
    # Tracking is per downstream application too.
    DurastateTrackingRecorder(store, application="first").insert_tracking(Tracking("upstream", 5))
    assert DurastateTrackingRecorder(store, application="second").max_tracking_id("upstream") is None


def test_str_and_uuid_originator_ids_round_trip(store: durastate.Store) -> None:
    recorder = DurastateApplicationRecorder(store)
    as_uuid, as_text = uuid4(), "order-17"
    recorder.insert_events([StoredEvent(as_uuid, -3, "t", b"u"), StoredEvent(as_text, 2**62, "t", b"s")])
    assert recorder.select_events(as_uuid)[0].originator_id == as_uuid
    assert recorder.select_events(as_uuid)[0].originator_version == -3
    assert recorder.select_events(as_text)[0].originator_id == as_text
    assert recorder.select_events(str(as_uuid)) == []  # a str id is not its UUID


def test_a_batch_is_checked_and_stored_per_originator_whatever_its_order(store: durastate.Store) -> None:
    """Interleaved originators and topics (each encoded once per run of events sharing it); the duplicate check
    spans each originator's versions in the batch: a stored version between two of them is found."""
    recorder = DurastateApplicationRecorder(store)
    order, text = uuid4(), "order-9"
    recorder.insert_events([StoredEvent(order, v, "t", b"o%d" % v) for v in (2, 3, 4, 5)])
    with pytest.raises(IntegrityError, match=r"version 5\) already exists"):
        # Versions 1 and 5 of ``order``: the range holds 2, 3 and 4 too, before the duplicate.
        recorder.insert_events(
            [StoredEvent(order, 1, "t", b"x"), StoredEvent(text, 1, "u", b"y"), StoredEvent(order, 5, "t", b"z")]
        )
    assert recorder.max_notification_id() == 4
    batch = [
        StoredEvent(order, 1, "t", b"o1"),
        StoredEvent(text, 1, "u", b"s1"),
        StoredEvent(order, 6, "v", b"o6"),
        StoredEvent(text, 2, "u", b"s2"),
    ]
    assert recorder.insert_events(batch) == [5, 6, 7, 8]
    assert [(e.originator_version, e.topic, e.state) for e in recorder.select_events(order)] == [
        (1, "t", b"o1"),
        (2, "t", b"o2"),
        (3, "t", b"o3"),
        (4, "t", b"o4"),
        (5, "t", b"o5"),
        (6, "v", b"o6"),
    ]
    assert [(e.originator_id, e.originator_version, e.state) for e in recorder.select_events(text)] == [
        (text, 1, b"s1"),
        (text, 2, b"s2"),
    ]
    assert [(n.id, n.originator_id, n.topic) for n in recorder.select_notifications(5, 10)] == [
        (5, order, "t"),
        (6, text, "u"),
        (7, order, "v"),
        (8, text, "u"),
    ]
    with pytest.raises(IntegrityError, match=r"version 3\) already exists"):
        recorder.insert_events([StoredEvent(order, 3, "t", b"x"), StoredEvent(order, 5000, "t", b"y")])  # > a page
    assert recorder.max_notification_id() == 8


def test_an_insert_reads_no_stored_event_before_writing(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The duplicate check is the event rows' own insert (stored only where free, counted): new events go in with
    no read of the stored ones; a duplicate rolls the insert back and is named by one read made after it."""
    recorder = DurastateApplicationRecorder(store)
    order = uuid4()
    scans: list[bool] = []  # per scan of the kv facet: made inside a transaction?
    real_scan = store.kv.scan

    def watched_scan(*args: object, **kwargs: object) -> object:
        scans.append(store.engine.in_transaction())
        return real_scan(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store.kv, "scan", watched_scan)
    assert recorder.insert_events([StoredEvent(order, v, "t", b"x%d" % v) for v in (1, 2, 3)]) == [1, 2, 3]
    assert scans == []
    with pytest.raises(IntegrityError, match=r"version 2\) already exists; nothing was written"):
        recorder.insert_events([StoredEvent(order, 4, "t", b"y"), StoredEvent(order, 2, "t", b"z")])
    assert scans == [False]
    monkeypatch.undo()
    assert recorder.max_notification_id() == 3
    assert [(e.originator_version, e.state) for e in recorder.select_events(order)] == [
        (1, b"x1"),
        (2, b"x2"),
        (3, b"x3"),
    ]
    assert recorder.insert_events([StoredEvent(order, 4, "t", b"y")]) == [4]  # the ids the rollback gave back


def test_an_insert_writes_its_event_and_notification_rows_in_one_statement(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both namespaces' rows go in by one statement (``KV._put_groups``), whose count tells a duplicate."""
    recorder = DurastateApplicationRecorder(store)
    engine = store.engine
    inserts: list[str] = []
    for method in ("execute", "send"):
        real = getattr(engine, method)

        def watched(sql: str, params: object = (), _real: object = real) -> object:
            if str(sql).startswith("INSERT INTO") and "kv (" in str(sql):
                inserts.append(str(sql))
            return _real(sql, params)  # type: ignore[operator]

        monkeypatch.setattr(engine, method, watched)
    order = uuid4()
    assert recorder.insert_events([StoredEvent(order, v, "t", b"x%d" % v) for v in (1, 2, 3)]) == [1, 2, 3]
    assert len(inserts) == 1
    monkeypatch.undo()
    assert [n.originator_version for n in recorder.select_notifications(1, 10)] == [1, 2, 3]


def test_a_notification_id_already_taken_fails_the_insert_and_overwrites_nothing(store: durastate.Store) -> None:
    """A sequence behind its notifications (set back by hand, say) cannot overwrite a stored notification."""
    recorder = DurastateApplicationRecorder(store)
    first = uuid4()
    assert recorder.insert_events([StoredEvent(first, v, "t", b"x%d" % v) for v in (1, 2, 3)]) == [1, 2, 3]
    store.kv.set_counter(recorder._scope, b"sequence", recorder._sequence_key, 1)
    second = uuid4()
    with pytest.raises(IntegrityError, match=r"notification ids 2\.\.2 are taken already.*nothing was written"):
        recorder.insert_events([StoredEvent(second, 1, "t", b"y")])
    assert list(recorder.select_events(second)) == []
    assert [(n.originator_id, n.state) for n in recorder.select_notifications(1, 10)] == [
        (first, b"x1"),
        (first, b"x2"),
        (first, b"x3"),
    ]
    assert store.kv.counter(recorder._scope, b"sequence", recorder._sequence_key) == 1  # rolled back too


def test_factory_needs_a_url_and_names_the_keys() -> None:
    env = {"PERSISTENCE_MODULE": "durastate.integrations.eventsourcing"}
    with pytest.raises(InvalidRequest, match="DURASTATE_URL"):
        InfrastructureFactory.construct(env)


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ("not a list", "stored_events must be a list"),
        ([("id", 1, "t", b"s")], r"stored_events\[0\] must be a StoredEvent"),
        ([StoredEvent(uuid4(), 1, "t", "text")], "state must be bytes"),
        ([StoredEvent(uuid4(), "1", "t", b"s")], "originator_version must be an int"),
        ([StoredEvent(12, 1, "t", b"s")], "originator_id must be a UUID or str"),
        ([StoredEvent("x" * 5000, 1, "t", b"s")], "max_key_size"),
    ],
)
def test_bad_events_are_refused_and_write_nothing(store: durastate.Store, events: object, message: str) -> None:
    recorder = DurastateApplicationRecorder(store)
    with pytest.raises(InvalidRequest, match=message):
        recorder.insert_events(events)  # type: ignore[arg-type]
    assert recorder.max_notification_id() is None


def test_bad_tracking_is_refused(store: durastate.Store) -> None:
    recorder = DurastateProcessRecorder(store)
    with pytest.raises(InvalidRequest, match="notification_id must be >= 1"):
        recorder.insert_events([StoredEvent(uuid4(), 1, "t", b"s")], tracking=Tracking("up", 0))
    assert recorder.max_notification_id() is None and recorder.max_tracking_id("up") is None


def test_closed_store_raises_eventsourcings_interface_error(open_store: object) -> None:
    store = open_store()  # type: ignore[operator]
    recorder = DurastateApplicationRecorder(store)
    store.close()
    with pytest.raises(InterfaceError) as caught:
        recorder.max_notification_id()
    assert isinstance(caught.value.__cause__, durastate.StoreClosed)


@pytest.mark.parametrize("limit", [-1, 0, 2])
def test_limits_are_read_as_eventsourcings_sqlite_recorder_reads_them(store: durastate.Store, limit: int) -> None:
    """A negative limit is no limit (SQLite's LIMIT -1; the POPO recorder too), 0 is nothing: never silently empty."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    reference = SQLiteApplicationRecorder(SQLiteDatastore(":memory:"))
    reference.create_table()
    ours = DurastateApplicationRecorder(store, application="limits")
    order = uuid4()
    events = [StoredEvent(order, version, "placed" if version % 2 else "shipped", b"s") for version in range(1, 6)]
    for recorder in (reference, ours):
        recorder.insert_events(events)

    def answers(recorder: SQLiteApplicationRecorder | DurastateApplicationRecorder) -> list[object]:
        return [
            [n.id for n in recorder.select_notifications(start=1, limit=limit)],
            [n.id for n in recorder.select_notifications(start=1, limit=limit, topics=["placed"])],
            [e.originator_version for e in recorder.select_events(order, limit=limit)],
            [e.originator_version for e in recorder.select_events(order, limit=limit, desc=True)],
        ]

    assert answers(ours) == answers(reference)
    if limit < 0:
        assert answers(ours)[0] == [1, 2, 3, 4, 5]


def _layout_1_rows(store: durastate.Store, application: str, events: list[StoredEvent]) -> None:
    """Write ``events`` as the recorder did before 2026-12-05 (notification rows pointing at event rows).

    Spelled out byte by byte here, not through the module's helpers: the old
    layout is a frozen format that stores written then still hold.
    """
    scope = b"eventsourcing/" + application.encode()
    kv = store.kv
    with store.transaction():
        last = kv.incr(scope, b"sequence", b"events", len(events))
        for notification_id, event in enumerate(events, start=last - len(events) + 1):
            assert isinstance(event.originator_id, UUID)
            key = b"u" + event.originator_id.bytes + struct.pack(">Q", event.originator_version + 2**63)
            topic = event.topic.encode()
            value = struct.pack(">QI", notification_id, len(topic)) + topic + event.state
            kv.put(scope, b"events/events", key, value)
            kv.put(
                scope, b"notifications", struct.pack(">Q", notification_id), struct.pack(">H", len(key)) + key + topic
            )


def test_a_store_written_with_the_old_layout_reads_and_grows(store: durastate.Store) -> None:
    """Layout-1 rows (state only in the event row) and layout-2 rows (state inline) in one log, pages mixing both."""
    old, new = uuid4(), uuid4()
    _layout_1_rows(store, "shop", [StoredEvent(old, 1, "placed", b"o1"), StoredEvent(old, 2, "shipped", b"o2")])
    recorder = DurastateApplicationRecorder(store, application="shop")
    assert recorder.max_notification_id() == 2
    assert recorder.insert_events([StoredEvent(new, 1, "placed", b"n1"), StoredEvent(old, 3, "shipped", b"o3")]) == [
        3,
        4,
    ]

    page = recorder.select_notifications(start=None, limit=10)
    assert [(n.id, n.originator_id, n.originator_version, n.topic, n.state) for n in page] == [
        (1, old, 1, "placed", b"o1"),
        (2, old, 2, "shipped", b"o2"),
        (3, new, 1, "placed", b"n1"),
        (4, old, 3, "shipped", b"o3"),
    ]
    assert [n.id for n in recorder.select_notifications(start=2, limit=2)] == [2, 3]
    assert [n.state for n in recorder.select_notifications(start=1, limit=10, topics=["shipped"])] == [b"o2", b"o3"]
    assert [n.state for n in recorder.select_notifications(start=1, limit=1, topics=["placed"], stop=1)] == [b"o1"]
    assert [e.state for e in recorder.select_events(old)] == [b"o1", b"o2", b"o3"]
    with pytest.raises(IntegrityError, match="version 2"):
        recorder.insert_events([StoredEvent(old, 2, "shipped", b"again")])

    # New notification rows carry the state themselves: a page needs no second read.
    scope = b"eventsourcing/shop"
    inline = store.kv.get(scope, b"notifications", struct.pack(">Q", 3))
    assert inline is not None and inline.startswith(b"\x00\x00") and inline.endswith(b"placedn1")
    # The old event rows keep their state; select_events(old) above read both kinds in one result.
    old_rows = [value for key, value in store.kv.scan(scope, b"events/events") if key.startswith(b"u" + old.bytes)]
    assert [len(value) for value in old_rows[:2]] == [8 + 4 + len(b"placedo1"), 8 + 4 + len(b"shippedo2")]
    assert len(old_rows[2]) == (8 if store.engine.capabilities.local else 8 + 4 + len(b"shippedo3"))


def _insert_interleaved(recorder: DurastateApplicationRecorder, first: UUID, second: UUID) -> None:
    """``first``'s versions 1-3 in one insert (ids 1-3), then 4-6 interleaved one by one with ``second``'s."""
    recorder.insert_events([StoredEvent(first, v, f"t{v}", b"f%d" % v) for v in (1, 2, 3)])
    for v in (4, 5, 6):
        recorder.insert_events([StoredEvent(second, v, "s", b"s%d" % v)])
        recorder.insert_events([StoredEvent(first, v, f"t{v}", b"f%d" % v)])


def test_event_rows_point_at_their_notification_where_a_second_read_costs_no_round_trip(
    store: durastate.Store,
) -> None:
    """Layout 3 (module docstring): on SQLite an application's event row holds only its notification id (the
    notification row holds the event once); where answers are deferred (PostgreSQL) the event row keeps the event.
    """
    recorder = DurastateApplicationRecorder(store, application="shop")
    first, second = uuid4(), uuid4()
    _insert_interleaved(recorder, first, second)
    rows = dict(store.kv.scan(b"eventsourcing/shop", b"events/events"))
    pointers = store.engine.capabilities.local
    first_rows = [value for key, value in rows.items() if key.startswith(b"u" + first.bytes)]
    if pointers:
        assert [struct.unpack(">Q", value)[0] for value in first_rows] == [1, 2, 3, 5, 7, 9]
    else:
        assert [len(value) for value in first_rows] == [8 + 4 + 2 + 2] * 6
    # Snapshots have no notification rows: their rows keep the event on every engine.
    snapshots = DurastateAggregateRecorder(store, application="shop", purpose="snapshots")
    snapshots.insert_events([StoredEvent(first, 6, "snap", b"state")])
    (snapshot,) = [value for _, value in store.kv.scan(b"eventsourcing/shop", b"events/snapshots")]
    assert snapshot.endswith(b"snapstate")
    assert [(e.originator_version, e.topic, e.state) for e in snapshots.select_events(first)] == [(6, "snap", b"state")]


def test_select_events_reads_pointed_events_in_runs_and_scattered(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions inserted together (consecutive notification ids) are one range read; scattered ones a key lookup."""
    recorder = DurastateApplicationRecorder(store, application="shop")
    first, second = uuid4(), uuid4()
    _insert_interleaved(recorder, first, second)
    lookups = _count_calls(monkeypatch, store.kv, "get_many")

    def fields(events: object) -> list[tuple[object, int, str, bytes]]:
        return [(e.originator_id, e.originator_version, e.topic, e.state) for e in events]  # type: ignore[attr-defined]

    assert fields(recorder.select_events(first, lte=3)) == [(first, v, f"t{v}", b"f%d" % v) for v in (1, 2, 3)]
    assert fields(recorder.select_events(first, gt=5)) == [(first, 6, "t6", b"f6")]
    assert lookups == []  # ids 1-3, then id 9 alone: ranges
    pointers = store.engine.capabilities.local
    assert fields(recorder.select_events(second)) == [(second, v, "s", b"s%d" % v) for v in (4, 5, 6)]
    assert len(lookups) == (1 if pointers else 0)  # ids 4, 6, 8: one key lookup
    everything = [(first, v, f"t{v}", b"f%d" % v) for v in range(1, 7)]
    assert fields(recorder.select_events(first)) == everything
    assert fields(recorder.select_events(first, desc=True)) == everything[::-1]
    assert fields(recorder.select_events(first, gt=2, lte=5, desc=True, limit=2)) == [everything[4], everything[3]]
    assert len(lookups) == (4 if pointers else 0)  # ids 1-3, 5, 7, 9; then 5, 7: one lookup each


def _count_calls(monkeypatch: pytest.MonkeyPatch, target: object, name: str) -> list[object]:
    """Each call of ``target.name`` appends its result to the returned list (the call itself runs unchanged)."""
    original = getattr(target, name)
    calls: list[object] = []

    def counted(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)
        calls.append(result)
        return result

    monkeypatch.setattr(target, name, counted)
    return calls


def test_a_waiting_subscription_reads_again_only_when_an_insert_commits(
    open_shared: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an engine that hears commits (PostgreSQL's LISTEN) an idle subscriber runs no query, and an insert
    through another store wakes it; where the watch polls (SQLite) it reads at each poll instead.
    """
    store, writer = open_shared(), open_shared()  # type: ignore[operator]
    recorder = DurastateApplicationRecorder(store, application="tail")
    selects = _count_calls(monkeypatch, recorder, "select_notifications")
    subscription = recorder.subscribe(gt=0)
    waits = _count_calls(monkeypatch, subscription._watch, "wait")
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(next(subscription).state))
    reader.start()

    def settled(count: int) -> bool:  # the last ``count`` waits heard nothing, or (polling) there were ``count``
        return len(waits) >= count and (not subscription._watch.reliable or not any(waits[-count:]))

    while not settled(3) and reader.is_alive():
        threading.Event().wait(0.01)
    reads_before, waits_before = len(selects), len(waits)
    while len(waits) < waits_before + 3 and reader.is_alive():
        threading.Event().wait(0.01)
    if subscription._watch.reliable:
        # Waits of SUBSCRIPTION_POLL_INTERVAL that heard nothing, and not one query among them.
        assert not any(waits[waits_before:]) and len(selects) == reads_before
    else:
        assert len(selects) > reads_before  # a polled watch answers "look again" at each poll
    DurastateApplicationRecorder(writer, application="tail").insert_events([StoredEvent(uuid4(), 1, "t", b"new")])
    reader.join(60)
    assert received == [b"new"]
    subscription.stop()


def test_stop_ends_a_waiting_iteration(store: durastate.Store) -> None:
    recorder = DurastateApplicationRecorder(store)
    subscription = recorder.subscribe()
    ended: list[str] = []

    def iterate() -> None:
        for _ in subscription:
            ended.append("a notification arrived")
        ended.append("stopped")

    reader = threading.Thread(target=iterate)
    reader.start()
    subscription.stop()
    reader.join(60)
    assert ended == ["stopped"]
