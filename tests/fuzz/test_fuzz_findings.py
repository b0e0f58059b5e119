"""What the fuzz suites found, pinned: each case once, deterministically, on every engine it concerns.

Each test names the entry point and the input that broke the contract
(only documented errors; a refused call changes nothing), and checks the
fixed behaviour.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import durastate
from durastate.errors import ConfigurationError, InvalidRequest, WrongType

INT64_MAX = 2**63 - 1


# -- facets and engines -----------------------------------------------------------


@pytest.mark.parametrize("keep_last", [INT64_MAX + 1, 2**64, 10**30])
def test_kv_trim_log_keep_last_past_int64_keeps_everything(store: durastate.Store, keep_last: int) -> None:
    # Was: OverflowError from the driver binding keep_last - 1.
    store.kv.append(b"s", b"n", b"k", b"v")
    assert store.kv.trim_log(b"s", b"n", b"k", keep_last=keep_last) == 0
    assert store.kv.trim_log(b"s", b"n", b"k", keep_last=keep_last, older_than=0) == 0
    assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"v"]


@pytest.mark.parametrize("limit", [INT64_MAX, INT64_MAX - 1])
def test_events_list_sessions_limit_at_int64_max(store: durastate.Store, limit: int) -> None:
    # Was: OverflowError from the driver binding limit + 1.
    store.events.append("s1", [{"type": "t", "payload": 1}])
    page = store.events.list_sessions(limit=limit)
    assert [s.session_id for s in page.sessions] == ["s1"] and page.cursor is None


@pytest.mark.parametrize("name", ["\x00", "a\x00b.db", "\ud800.db", "a" * 300, "sqlite:q\x00.db"])
def test_open_a_file_name_no_file_can_have_is_a_configuration_error(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: ValueError (embedded null byte), UnicodeEncodeError, OSError (name too long) from the OS.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r"not a usable file name|cannot create"):
        durastate.open(name)
    assert list(tmp_path.iterdir()) == []
    assert issubclass(ConfigurationError, InvalidRequest)


def _deep(depth: int = 2000) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"d": value}
    return value


DEEP_CALLS = {
    "kv.scopes(limit=)": lambda s: s.kv.scopes(limit=_deep()),
    "kv.put_many(items=[...])": lambda s: s.kv.put_many(b"s", b"n", [_deep()]),
    "queues.peek(limit=)": lambda s: s.queues.peek("q", limit=_deep()),
    "queues.peek(after=)": lambda s: s.queues.peek("q", after=_deep()),
    "records.scan_conversations(order=)": lambda s: s.records.scan_conversations({"order": _deep()}, 5),
    "records.scan_conversations(cursor order)": lambda s: s.records.scan_conversations(
        {}, 5, {"after": 1, "order": _deep()}
    ),
    "records.find_document(scope kind)": lambda s: s.records.find_document(
        {"kind": "notes", "scope": {"kind": _deep()}}
    ),
    "records.commit(type)": lambda s: s.records.commit([{"type": _deep()}]),
    "records.commit(content kind)": lambda s: s.records.commit(
        [
            {
                "type": "document.create",
                "record": {"id": 5, "kind": "n", "scope": {"kind": "session"}},
                "content": {"kind": _deep()},
            }
        ]
    ),
    "records.document(at=huge str)": lambda s: s.records.document(1, "x" * 70_000),
}


@pytest.mark.parametrize("call", list(DEEP_CALLS.values()), ids=list(DEEP_CALLS))
def test_a_refusal_names_a_value_too_deep_or_long_to_repr_in_a_bounded_message(store: durastate.Store, call) -> None:  # type: ignore[no-untyped-def]
    # Was: RecursionError while wording the refusal ({value!r} of a 2000-level dict), or a 70 kB message.
    with pytest.raises(InvalidRequest) as refused:
        call(store)
    assert len(str(refused.value)) < 400


# -- compat.vgi ---------------------------------------------------------------------


def test_vgi_sharded_storage_refuses_a_shard_key_without_utf8_with_value_error(store_url: str) -> None:
    # Was: UnicodeEncodeError from shard_key.encode() (the seed's code), on every method.
    from durastate.compat.vgi import BoundStorage, ShardedStorage, TransactionBoundStorage

    with ShardedStorage(store_url) as sharded:
        sharded.state_put_many(b"s", b"n", [(b"k", b"v")], shard_key="a")
        for call in (
            lambda: sharded.state_put_many(b"s", b"n", [(b"k", b"w")], shard_key="\ud800"),
            lambda: sharded.queue_push(b"e", [b"x"], shard_key="a\udfff"),
            lambda: TransactionBoundStorage(sharded, b"t", shard_key="\ud800").put_one(b"k", b"v"),
        ):
            with pytest.raises(ValueError, match="shard_key must be valid text") as refused:
                call()
            assert not isinstance(refused.value, UnicodeError)
        assert sharded.state_get_many(b"s", b"n", [b"k"], shard_key="a") == [b"v"]
        assert BoundStorage(sharded, b"e").queue_pop() is None


def test_vgi_arrow_helpers_refuse_what_is_not_theirs_with_type_error(store_url: str, tmp_path: Path) -> None:
    # Was: AttributeError (.schema of a non-batch), a lone batch's columns pushed one by one,
    # a str opened as a local file by pyarrow (FileNotFoundError for ""), None an AttributeError.
    import pyarrow as pa

    from durastate.compat.vgi import BoundStorage, FunctionStorage

    batch = pa.RecordBatch.from_pydict({"x": [1, 2]})
    (tmp_path / "stream.arrow").write_bytes(BoundStorage.serialize_record_batch(batch))
    with FunctionStorage(store_url) as storage:
        bound = BoundStorage(storage, b"e")
        for call in (
            lambda: BoundStorage.serialize_record_batch([]),  # type: ignore[arg-type]
            lambda: bound.queue_push_batches(batch),  # type: ignore[arg-type]
            lambda: bound.queue_push_batches([batch, "not a batch"]),  # type: ignore[list-item]
            lambda: bound.queue_push_batches(0),  # type: ignore[arg-type]
            lambda: BoundStorage.deserialize_record_batch(None),  # type: ignore[arg-type]
            lambda: BoundStorage.deserialize_record_batch(""),  # type: ignore[arg-type]
            lambda: BoundStorage.deserialize_record_batch(str(tmp_path / "stream.arrow")),  # type: ignore[arg-type]
            lambda: BoundStorage.deserialize_record_batch(tmp_path / "stream.arrow"),  # type: ignore[arg-type]
        ):
            with pytest.raises(TypeError, match="must be"):
                call()
        assert bound.queue_pop() is None  # nothing was pushed
        assert bound.queue_push_batches([batch]) == 1
        assert bound.queue_pop_batch() == batch


@pytest.mark.parametrize("shards", ["ab", b"ab", 0, [0], ["a.db", None], Path("p.db")])
def test_vgi_sharded_storage_shards_must_be_a_list_or_mapping_of_paths(
    shards: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: a str iterated character by character (a database file per character), raw TypeErrors
    # from iter() and os.fspath().
    from durastate.compat.vgi import ShardedStorage

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="shards"):
        ShardedStorage(shards=shards)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_vgi_sharded_storage_shard_name_without_utf8_is_a_value_error(tmp_path: Path) -> None:
    from durastate.compat.vgi import ShardedStorage

    with pytest.raises(ValueError, match="not valid text"):
        ShardedStorage(shards={"\ud800": str(tmp_path / "a.db")})
    with ShardedStorage(shards={5: "memory:", "b": "memory:"}) as named:  # type: ignore[dict-item]
        assert len(named.stores) == 2


# -- compat.pi_durable -----------------------------------------------------------------


def test_pi_durable_options_too_deep_to_repr_are_refused_as_documented(store_url: str) -> None:
    # Was: RecursionError while formatting the refusal's message (repr of a 2000-level dict).
    import asyncio

    from durastate.compat.pi_durable import SqliteStorage, validate_sqlite_prefix

    nested: object = 1
    for _ in range(2000):
        nested = {"d": nested}
    for options in ({"prefix": nested}, {"busy_timeout_ms": nested}, {"wal_auto_checkpoint_pages": nested}):
        with pytest.raises(InvalidRequest, match=r"prefix|must be an integer") as refused:
            asyncio.run(SqliteStorage.open(store_url, options))
        assert len(str(refused.value)) < 200
    with pytest.raises(InvalidRequest, match="Invalid SQLite schema prefix"):
        validate_sqlite_prefix(nested)


# -- compat.a2 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expiry",
    [{"expires_at_ms": INT64_MAX}, {"expires_at_ms": -(2**62)}, {"ttl_ms": 2**62}, {"ttl_ms": 2**53}],
    ids=["expires_at_ms=int64max", "expires_at_ms<year1", "ttl_ms=2**62", "ttl_ms=2**53"],
)
def test_a2_refuses_an_expiry_no_datetime_can_hold_before_writing_it(store_url: str, expiry: dict[str, int]) -> None:
    # Was: the claim (or presence row) stored, then OverflowError turning its expiry into a datetime;
    # every later read of the session (read, stream, claim) failed the same way.
    import asyncio
    import datetime

    from durastate.compat import a2

    async def main() -> None:
        store = a2.open_store(store_url)
        try:
            await store.append("s", [{"type": "t", "payload": 1, "id": "e1"}])
            with pytest.raises(TypeError, match="year"):
                await store.claim_available(session_id="s", holder="w", **{"ttl_ms": 1000, **expiry})
            with pytest.raises(TypeError, match="year"):
                await store.renew_claims(session_id="s", holder="w", claims=[], **{"ttl_ms": 1000, **expiry})
            if "ttl_ms" in expiry:
                with pytest.raises(TypeError, match="year"):
                    await store.presence.set(
                        "room", "p", {"x": 1}, at=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), seen=1, **expiry
                    )
                assert await store.presence.read("room") == ()
            (event,) = await store.read("s")
            assert event.claim_holder is None and event.attempt_count == 0
            claimed = await store.claim_available(session_id="s", holder="w", ttl_ms=1000)
            assert claimed.outcome == "claimed"
        finally:
            store.close()

    asyncio.run(main())


@pytest.mark.parametrize("seconds", [1.7976931348623157e305, 1e300, float(2**62)])
def test_a_duration_whose_milliseconds_overflow_a_float_is_refused(store: durastate.Store, seconds: float) -> None:
    # Was: OverflowError from int(inf) (seconds * 1000 rounds to infinity near float's limit).
    with pytest.raises(durastate.InvalidRequest, match=r"too long|past the 64-bit"):
        store.queues.push("q", [b"x"], delay=seconds)
    with pytest.raises(durastate.InvalidRequest, match=r"too long|past the 64-bit"):
        store.kv.put(b"s", b"n", b"k", b"v", ttl=seconds)
    with pytest.raises(durastate.InvalidRequest, match="too large"):
        durastate.Retention(kv_log_max_age=seconds)
    assert store.queues.stats("q").ready == 0 and store.kv.get(b"s", b"n", b"k") is None


# -- the validation audit: limits every write path keeps, wrong types, bounded waits ----------------


def _record_writes(big: str) -> dict[str, list[dict[str, object]]]:
    doc = {"kind": "notes", "scope": {"kind": "session"}}
    return {
        "conversation": [{"type": "conversation", "value": {"id": 10, "title": big}}],
        "entry": [{"type": "entry", "value": {"id": 11, "conversationId": 1, "text": big}}],
        "task": [
            {
                "type": "task",
                "value": {
                    "id": 12,
                    "conversationId": 1,
                    "kind": "k",
                    "state": {"status": "s"},
                    "abortRequested": False,
                    "background": False,
                    "note": big,
                },
            }
        ],
        "submission": [{"type": "submission", "value": {"id": 13, "conversationId": 1, "status": "s", "note": big}}],
        "document.create(content)": [
            {
                "type": "document.create",
                "record": {"id": 14, **doc},
                "content": {"kind": "base", "version": 1, "value": {"text": big}},
            }
        ],
        "document.create(record)": [
            {
                "type": "document.create",
                "record": {"id": 15, **doc, "key": "k", "note": big},
                "content": {"kind": "base", "version": 1, "value": {}},
            }
        ],
        "document.change(ops)": [
            {
                "type": "document.change",
                "id": 5,
                "content": {"kind": "delta", "version": 1, "ops": [["s", ["text"], big]]},
            }
        ],
    }


@pytest.mark.parametrize("kind", list(_record_writes("")))
def test_records_commit_refuses_a_json_value_over_max_value_size(open_store, kind: str) -> None:  # type: ignore[no-untyped-def]
    # Was: records ignored max_value_size (a 70 MB record was stored at the 64 MiB default).
    store = open_store(max_value_size=300)
    records = store.records
    records.commit(
        [
            {"type": "conversation", "value": {"id": 1, "title": "c"}},
            {
                "type": "document.create",
                "record": {"id": 5, "kind": "notes", "scope": {"kind": "conversation", "conversationId": 1}},
                "content": {"kind": "base", "version": 1, "value": {"text": "short"}},
            },
        ]
    )
    seq = records.last_seq()
    with pytest.raises(InvalidRequest, match=r" is \d+ bytes as JSON; the limit is max_value_size=300$"):
        records.commit(_record_writes("x" * 400)[kind])
    assert records.last_seq() == seq
    assert all(records.conversation(i) is None for i in (10, 11, 12, 13, 14, 15))
    assert records.document(5)["value"] == {"text": "short"}  # type: ignore[index]
    records.commit(_record_writes("x" * 10)[kind])  # the same write, small, is taken


def test_records_commit_refuses_a_delta_whose_result_is_over_max_value_size(open_store) -> None:  # type: ignore[no-untyped-def]
    store = open_store(max_value_size=300)
    records = store.records
    records.commit(
        [
            {"type": "conversation", "value": {"id": 1, "title": "c"}},
            {
                "type": "document.create",
                "record": {"id": 5, "kind": "notes", "scope": {"kind": "conversation", "conversationId": 1}},
                "content": {"kind": "base", "version": 1, "value": {"a": "x" * 200}},
            },
        ]
    )
    seq = records.last_seq()
    grow = {"kind": "delta", "version": 1, "ops": [["s", ["b"], "y" * 200]]}
    with pytest.raises(
        InvalidRequest, match=r"^the document value is \d+ bytes as JSON; the limit is max_value_size=300$"
    ):
        records.commit([{"type": "document.change", "id": 5, "content": grow}])
    assert records.last_seq() == seq
    assert records.document(5)["value"] == {"a": "x" * 200}  # type: ignore[index]


@pytest.mark.parametrize(
    "wait", [1e10, float(2**32 + 1), sys.maxsize, 10**400], ids=["1e10", "2**32+1", "maxsize", "10**400"]
)
def test_a_wait_past_the_limit_is_refused_sync_and_async(store_url: str, store: durastate.Store, wait: float) -> None:
    # Was: OverflowError (PostgreSQL, threading's timeout limit) or a wait of centuries (SQLite, async).
    import asyncio

    from durastate import aio

    message = r"^wait=.+ seconds is too long; the limit is 4294967296 seconds$"
    for call in (lambda: store.queues.pop("q", wait=wait), lambda: store.queues.claim("q", wait=wait)):
        with pytest.raises(InvalidRequest, match=message):
            call()

    async def main() -> None:
        async with await aio.open(store_url) as s:
            with pytest.raises(InvalidRequest, match=message):
                await s.queues.pop("q", wait=wait)
            with pytest.raises(InvalidRequest, match=message):
                await s.queues.claim("q", wait=wait)

    asyncio.run(main())
    store.queues.push("q", [b"a", b"b"])  # a wait at the limit is taken, and returns what is there
    assert store.queues.pop("q", wait=2**32) == b"a"
    claim = store.queues.claim("q", wait=float(2**32))
    assert claim is not None and claim.payload == b"b"


@pytest.mark.parametrize("huge", [10**400, -(10**5000)], ids=["10**400", "-10**5000"])
def test_an_int_too_large_to_print_or_convert_is_refused_with_a_bounded_message(
    store: durastate.Store, huge: int
) -> None:
    # Was: OverflowError (int -> float) or ValueError (int -> str past 4300 digits) while checking or wording.
    store.kv.append(b"s", b"n", b"k", b"v")
    for call in (
        lambda: list(store.kv.log(b"s", b"n", b"k", after=huge)),
        lambda: store.kv.trim_logs(huge),
        lambda: store.kv.put(b"s", b"n", b"k", b"v", ttl=huge),
        lambda: store.queues.push("q", [b"x"], delay=huge),
        lambda: store.queues.pop("q", wait=huge),
        lambda: store.kv.scopes(limit=huge),
    ):
        with pytest.raises(InvalidRequest) as refused:
            call()
        assert len(str(refused.value)) < 200
    assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"v"] and store.queues.stats("q").ready == 0


@pytest.mark.parametrize(
    ("older_than", "error"),
    [("abc", WrongType), (object(), WrongType), (float("nan"), InvalidRequest), (-5, InvalidRequest)],
    ids=["str", "object", "nan", "negative"],
)
def test_kv_trim_log_checks_older_than_also_with_keep_last(
    store: durastate.Store, older_than: object, error: type[Exception]
) -> None:
    # Was: older_than unchecked when keep_last was given too and the log held no more than keep_last entries
    # (the call returned 0); checked only on the way to trimming otherwise.
    for value in (b"1", b"2", b"3"):
        store.kv.append(b"s", b"n", b"k", value)
    for keep_last in (10, 1):
        with pytest.raises(error, match=r"^older_than must be"):
            store.kv.trim_log(b"s", b"n", b"k", keep_last=keep_last, older_than=older_than)  # type: ignore[arg-type]
    assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"1", b"2", b"3"]


@pytest.mark.parametrize(
    ("session_id", "error", "message"),
    [
        (None, WrongType, "^session_id must be a str, got NoneType$"),
        (1, WrongType, "^session_id must be a str, got int$"),
        ("", InvalidRequest, "^session_id must not be empty$"),
        ("a\x00b", InvalidRequest, "^session_id must not contain NUL characters"),
        ("\ud800", InvalidRequest, r"^session_id must be valid unicode \(no lone surrogates\)"),
        ("x" * 5000, InvalidRequest, r"^session_id is 5000 bytes; the limit is 1024$"),
    ],
    ids=["None", "int", "empty", "nul", "surrogate", "long"],
)
def test_events_channel_checks_its_session_id_like_append(
    store_url: str, store: durastate.Store, session_id: object, error: type[Exception], message: str
) -> None:
    # Was: TypeError from "events:" + None; every other bad name accepted.
    import asyncio

    from durastate import aio

    with pytest.raises(error, match=message):
        store.events.channel(session_id)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        store.events.append(session_id, [{"type": "t", "payload": 1}])  # type: ignore[arg-type]

    async def main() -> None:
        async with await aio.open(store_url) as s:
            with pytest.raises(error, match=message):
                s.events.channel(session_id)  # type: ignore[arg-type]

    asyncio.run(main())


def test_events_channel_after_close_is_store_closed(store_url: str, open_store) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from durastate import aio

    store = open_store()
    assert store.events.channel("s1").endswith("s1")
    store.close()
    with pytest.raises(durastate.StoreClosed):
        store.events.channel("s1")

    async def main() -> None:
        s = await aio.open(store_url)
        assert s.events.channel("s1").endswith("s1")
        await s.close()
        with pytest.raises(durastate.StoreClosed):
            s.events.channel("s1")

    asyncio.run(main())


WRONG_TYPES = {
    "kv.scopes(limit=)": lambda s, v: s.kv.scopes(limit=v),
    "kv.namespaces(limit=)": lambda s, v: s.kv.namespaces(b"s", limit=v),
    "kv.log_keys(limit=)": lambda s, v: s.kv.log_keys(b"s", b"n", limit=v),
    "kv.counters(limit=)": lambda s, v: s.kv.counters(b"s", b"n", limit=v),
    "queues.names(limit=)": lambda s, v: s.queues.names(limit=v),
    "queues.backlog(limit=)": lambda s, v: s.queues.backlog("q", limit=v),
    "queues.peek(limit=)": lambda s, v: s.queues.peek("q", limit=v),
    "queues.peek(after=)": lambda s, v: s.queues.peek("q", after=5 if v is None else v),
    "presence.namespaces(limit=)": lambda s, v: s.presence.namespaces(limit=v),
    "events.lane_backlog(limit=)": lambda s, v: s.events.lane_backlog(limit=v),
    "events.stream(poll_interval=)": lambda s, v: s.events.stream("s", poll_interval=v and "0.01"),
    "records.conversation": lambda s, v: s.records.conversation(v),
    "records.commit": lambda s, v: s.records.commit(v),
    "records.commit(value)": lambda s, v: s.records.commit([{"type": "conversation", "value": v}]),
    "records.commit(id)": lambda s, v: s.records.commit([{"type": "conversation", "value": {"id": v}}]),
    "records.document(at=)": lambda s, v: s.records.document(1, at=v),
    "records.scan_conversations(limit=)": lambda s, v: s.records.scan_conversations({}, v),
    "records.scan_tasks(query)": lambda s, v: s.records.scan_tasks(v, 5),
    "records.submission_by_request": lambda s, v: s.records.submission_by_request(1, v),
    "documents.write(data)": lambda s, v: s.documents.write("k", v),
    "documents.write(nested)": lambda s, v: s.documents.write("k", {"v": {1, 2} if v is None else b"b"}),
    "events.append(payload)": lambda s, v: s.events.append(
        "s", [{"type": "t", "payload": {1, 2} if v is None else b"b"}]
    ),
    "presence.set(values)": lambda s, v: s.presence.set(
        "r", "p", {"f": {1, 2} if v is None else b"b"}, at_ms=1, seen=1, ttl_ms=1000
    ),
    "records.commit(value bytes)": lambda s, v: s.records.commit(
        [{"type": "conversation", "value": {"id": 1, "x": {1, 2} if v is None else b"b"}}]
    ),
    "records.commit(delta ops)": lambda s, v: s.records.commit(
        [{"type": "document.change", "id": 1, "content": {"kind": "delta", "version": 1, "ops": v}}]
    ),
}


@pytest.mark.parametrize("call", list(WRONG_TYPES.values()), ids=list(WRONG_TYPES))
@pytest.mark.parametrize("value", [None, 1.5], ids=["None", "float"])
def test_a_wrong_type_is_wrong_type(store: durastate.Store, call, value: object) -> None:  # type: ignore[no-untyped-def]
    # Was: a plain InvalidRequest (limits, the records facet) or an InvalidDocument that was no WrongType.
    # InvalidDocument (a WrongType) names the type JSON cannot hold in its own words.
    with pytest.raises(WrongType, match=r" must be .+, got \w+$|not JSON serializable: \w+$"):
        call(store, value)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ("a\x00b", r"^error must not contain NUL characters, got 'a\\x00b'$"),
        ("x" * 2000, r"^error is 2000 bytes; the limit is 1000$"),
    ],
    ids=["nul", "too-long"],
)
def test_claim_nack_checks_its_error_up_front_like_fail_attempt(open_store, error: str, message: str) -> None:  # type: ignore[no-untyped-def]
    # Was: NUL stored on SQLite and refused by the driver on PostgreSQL; no size limit.
    store = open_store(max_value_size=1000)
    store.queues.push("q", [b"job"])
    claim = store.queues.claim("q")
    assert claim is not None
    with pytest.raises(InvalidRequest, match=message):
        claim.nack(error=error)
    store.events.append("s", [{"type": "t", "payload": 1}])
    (event,) = store.events.claim_available("s", "h", ttl_ms=1000).events
    with pytest.raises(InvalidRequest, match=message):
        store.events.fail_attempt("s", event.index, event.attempt_count, error, 3)
    claim.ack()  # the claim was still held: the refused nack changed nothing
    assert store.queues.stats("q").ready == 0


EMPTY_NAMES = {
    "events.append(type)": lambda s: s.events.append("s", [{"type": "", "payload": 1}]),
    "events.append(type, with id)": lambda s: s.events.append("s", [{"type": "", "payload": 1, "id": "e9"}]),
    "events.append(lane)": lambda s: s.events.append("s", [{"type": "t", "payload": 1, "lane": ""}]),
    "events.claim_available(holder)": lambda s: s.events.claim_available("s", "", ttl_ms=1000),
    "events.claim_any(holder)": lambda s: s.events.claim_any("", ttl_ms=1000),
    "events.renew_claims(holder)": lambda s: s.events.renew_claims("s", "", [], ttl_ms=1000),
    "events.put_snapshot(reducer_name)": lambda s: s.events.put_snapshot("s", "", 1, {}),
    "events.read_state(reducer_name)": lambda s: s.events.read_state("s", ""),
}


@pytest.mark.parametrize("call", list(EMPTY_NAMES.values()), ids=list(EMPTY_NAMES))
def test_an_empty_name_of_something_is_refused_like_an_empty_session_id(store: durastate.Store, call) -> None:  # type: ignore[no-untyped-def]
    # Was: "" taken as an event type, a lane, a claim holder or a reducer name, while refused as a session_id.
    store.events.append("s", [{"type": "t", "payload": 1}])
    with pytest.raises(InvalidRequest, match=r"must not be empty$") as refused:
        call(store)
    assert not isinstance(refused.value, TypeError)
    assert [e.type for e in store.events.read("s")] == ["t"]
    assert store.events.claim_available("s", "h", ttl_ms=1000).outcome == "claimed"  # nothing was claimed


def test_events_claim_with_both_ttl_ms_and_expires_at_ms_is_refused(store: durastate.Store) -> None:
    # Was: both taken, expires_at_ms winning silently.
    store.events.append("s", [{"type": "t", "payload": 1}])
    later = store.engine.now_ms() + 60_000
    with pytest.raises(InvalidRequest, match=r"^pass ttl_ms= or expires_at_ms=, not both$"):
        store.events.claim_available("s", "h", ttl_ms=100, expires_at_ms=later)
    claimed = store.events.claim_available("s", "h", expires_at_ms=later)
    assert claimed.outcome == "claimed"
    with pytest.raises(InvalidRequest, match=r"^pass ttl_ms= or expires_at_ms=, not both$"):
        store.events.renew_claims("s", "h", [{"index": 1, "attempt": 1}], ttl_ms=100, expires_at_ms=later)
