"""Conformance for ``durastate.compat.vgi``: argument errors, framework namespaces, shard keys,
``BoundStorage``, ``TransactionBoundStorage``, the Arrow helpers and ``ShardedStorage``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from durastate.compat.vgi import (
    BoundStorage,
    FrameworkNS,
    FunctionStorage,
    ShardedStorage,
    TransactionBoundStorage,
    _coerce_ns,
    _derive_shard_key,
    _resolve_shard_key,
    attach_catalog_bytes,
)

from .common import INT64_MAX, INT64_MIN, SEED_FRAMEWORK_NS, _any, _drain_queue, _Fixtures

__all__ = [
    "TestVgiArgumentErrors",
    "TestVgiArrow",
    "TestVgiBoundStorage",
    "TestVgiNamespaces",
    "TestVgiShardKeys",
    "TestVgiShardedStorage",
    "TestVgiTransactionBoundStorage",
]


def _seed_state(storage: FunctionStorage) -> None:
    """Known contents that every rejected call must leave exactly as they are."""
    storage.state_put_many(b"s", b"n", [(b"k", b"v0"), (b"k2", b"v2")])
    storage.state_append(b"s", b"n", b"k", b"l0")
    storage.state_counter_set(b"s", b"n", b"k", 7)
    storage.queue_push(b"s", [b"q1"])


def _assert_seed_state_unchanged(storage: FunctionStorage) -> None:
    assert storage.state_scan(b"s", b"n") == [(b"k", b"v0"), (b"k2", b"v2")]
    assert [v for _, v in storage.state_log_scan(b"s", b"n", b"k")] == [b"l0"]
    assert storage.state_counter_get(b"s", b"n", b"k") == 7
    assert _drain_queue(storage, b"s") == [b"q1"]


_BadCall = Callable[[Any], object]  # Any: the calls pass wrong types on purpose


BAD_CALLS: list[tuple[str, _BadCall, type[Exception], str]] = [
    # -- wrong types: the seed stored str as TEXT, int as INTEGER, None as a constraint error
    ("put str key", lambda s: s.state_put_many(b"s", b"n", [(b"k", b"new"), ("x", b"v")]), TypeError, "key"),
    ("put str value", lambda s: s.state_put_many(b"s", b"n", [(b"k", b"new"), (b"x", "v")]), TypeError, "value"),
    ("put None value", lambda s: s.state_put_many(b"s", b"n", [(b"k", b"new"), (b"x", None)]), TypeError, "value"),
    ("put int key", lambda s: s.state_put_many(b"s", b"n", [(b"k", b"new"), (1, b"v")]), TypeError, "key"),
    ("put non-pair", lambda s: s.state_put_many(b"s", b"n", [(b"k", b"new"), b"kv"]), TypeError, "items"),
    ("put triple", lambda s: s.state_put_many(b"s", b"n", [(b"k", b"new"), (b"a", b"b", b"c")]), ValueError, "pair"),
    ("put str scope", lambda s: s.state_put_many("s", b"n", [(b"k", b"new")]), TypeError, "scope_id"),
    ("put str ns", lambda s: s.state_put_many(b"s", "n", [(b"k", b"new")]), TypeError, "ns"),
    ("put items not a list", lambda s: s.state_put_many(b"s", b"n", 5), TypeError, "items"),
    # one item: BoundStorage.state_put/state_get, which take the one-key paths
    ("put one str key", lambda s: s.state_put_many(b"s", b"n", [("x", b"v")]), TypeError, "key"),
    ("put one None value", lambda s: s.state_put_many(b"s", b"n", [(b"x", None)]), TypeError, "value"),
    ("put one list pair str", lambda s: s.state_put_many(b"s", b"n", [[b"x", "v"]]), TypeError, "value"),
    ("put one triple", lambda s: s.state_put_many(b"s", b"n", [(b"a", b"b", b"c")]), ValueError, "pair"),
    ("put one str scope", lambda s: s.state_put_many("s", b"n", [(b"x", b"v")]), TypeError, "scope_id"),
    ("get one str key", lambda s: s.state_get_many(b"s", b"n", ["k"]), TypeError, "keys"),
    ("get one int key", lambda s: s.state_get_many(b"s", b"n", [1]), TypeError, "keys"),
    ("get one str ns", lambda s: s.state_get_many(b"s", "n", [b"k"]), TypeError, "ns"),
    ("get tuple of str keys", lambda s: s.state_get_many(b"s", b"n", ("k",)), TypeError, "keys"),
    ("push one str item", lambda s: s.queue_push(b"s", ["bad"]), TypeError, "items"),
    ("push tuple with str", lambda s: s.queue_push(b"s", (b"ok", "bad")), TypeError, "items"),
    ("delete no keys str ns", lambda s: s.state_delete(b"s", "n", []), TypeError, "ns"),
    ("scan str reverse limit", lambda s: s.state_scan(b"s", b"n", reverse=True, limit="1"), TypeError, "limit"),
    ("log huge after_id str key", lambda s: s.state_log_scan(b"s", b"n", "k", after_id=2**70), TypeError, "key"),
    ("counter add huge delta", lambda s: s.state_counter_add(b"s", b"n", b"k", 2**64), OverflowError, "delta"),
    ("get str key", lambda s: s.state_get_many(b"s", b"n", [b"k", "k"]), TypeError, "keys"),
    ("get keys as bytes", lambda s: s.state_get_many(b"s", b"n", b"k"), TypeError, "keys"),
    ("get keys as str", lambda s: s.state_get_many(b"s", b"n", "k"), TypeError, "keys"),
    ("scan str start", lambda s: s.state_scan(b"s", b"n", start="a"), TypeError, "start"),
    ("scan int end", lambda s: s.state_scan(b"s", b"n", end=5), TypeError, "end"),
    ("scan float limit", lambda s: s.state_scan(b"s", b"n", limit=1.5), TypeError, "limit"),
    ("scan str limit", lambda s: s.state_scan(b"s", b"n", limit="3"), TypeError, "limit"),
    ("drain str ns", lambda s: s.state_drain(b"s", "n"), TypeError, "ns"),
    ("delete str key", lambda s: s.state_delete(b"s", b"n", [b"k", "k2"]), TypeError, "keys"),
    ("delete str start", lambda s: s.state_delete(b"s", b"n", start="a"), TypeError, "start"),
    ("delete str scope", lambda s: s.state_delete("s", b"n"), TypeError, "scope_id"),
    ("clear str scope", lambda s: s.execution_clear("s"), TypeError, "scope_id"),
    ("append str item", lambda s: s.state_append(b"s", b"n", b"k", "item"), TypeError, "item"),
    ("append None key", lambda s: s.state_append(b"s", b"n", None, b"item"), TypeError, "key"),
    ("log str after_id", lambda s: s.state_log_scan(b"s", b"n", b"k", after_id="0"), TypeError, "after_id"),
    ("log float after_id", lambda s: s.state_log_scan(b"s", b"n", b"k", after_id=0.5), TypeError, "after_id"),
    ("counter float delta", lambda s: s.state_counter_add(b"s", b"n", b"k", 1.5), TypeError, "delta"),
    ("counter str delta", lambda s: s.state_counter_add(b"s", b"n", b"k", "5"), TypeError, "delta"),
    ("counter str value", lambda s: s.state_counter_set(b"s", b"n", b"k", "5"), TypeError, "value"),
    ("counter str key", lambda s: s.state_counter_delete(b"s", b"n", "k"), TypeError, "key"),
    ("counter get str ns", lambda s: s.state_counter_get(b"s", "n", b"k"), TypeError, "ns"),
    ("push str item", lambda s: s.queue_push(b"s", [b"new", "bad"]), TypeError, "items"),
    ("push None item", lambda s: s.queue_push(b"s", [b"new", None]), TypeError, "items"),
    ("push items as bytes", lambda s: s.queue_push(b"s", b"abc"), TypeError, "items"),
    ("push str execution id", lambda s: s.queue_push("s", [b"new"]), TypeError, "execution_id"),
    ("pop str execution id", lambda s: s.queue_pop("s"), TypeError, "execution_id"),
    ("clear queue int id", lambda s: s.queue_clear(1), TypeError, "execution_id"),
    # -- wrong values
    ("scan negative limit", lambda s: s.state_scan(b"s", b"n", limit=-1), ValueError, "limit"),
    ("log negative limit", lambda s: s.state_log_scan(b"s", b"n", b"k", limit=-1), ValueError, "limit"),
    ("delete keys and range", lambda s: s.state_delete(b"s", b"n", [b"k"], end=b"z"), ValueError, "exclusive"),
]


class TestVgiArgumentErrors(_Fixtures):
    @pytest.mark.parametrize(("call", "error", "names"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
    def test_bad_call_raises_and_changes_nothing(
        self, storage: FunctionStorage, call: _BadCall, error: type[Exception], names: str
    ) -> None:
        _seed_state(storage)
        with pytest.raises(error, match=names):
            call(storage)
        _assert_seed_state_unchanged(storage)

    def test_type_errors_are_not_value_errors(self, storage: FunctionStorage) -> None:
        """Callers telling the two apart (as with the seed) must not see both."""
        with pytest.raises(TypeError) as caught:
            storage.state_put_many(b"s", b"n", [("k", b"v")])  # type: ignore[list-item]
        assert not isinstance(caught.value, ValueError)

    def test_shard_key_is_ignored(self, storage: FunctionStorage) -> None:
        storage.state_put_many(b"s", b"n", [(b"k", b"v")], shard_key="att-one")
        assert storage.state_get_many(b"s", b"n", [b"k"], shard_key="att-two") == [b"v"]
        storage.queue_push(b"e", [b"w"], shard_key="a")
        assert storage.queue_pop(b"e", shard_key="b") == b"w"


class _RecordingBackend:
    """A backend that records every call and answers with canned results."""

    requires_shard_key = False
    RESULTS: ClassVar[dict[str, object]] = {
        "queue_push": 11,
        "queue_pop": b"popped",
        "queue_clear": 12,
        "state_get_many": [b"got"],
        "state_put_many": None,
        "state_scan": [(b"k", b"scanned")],
        "state_drain": [(b"k", b"drained")],
        "state_delete": 13,
        "execution_clear": 14,
        "state_append": 15,
        "state_log_scan": [(1, b"logged")],
        "state_counter_get": 16,
        "state_counter_add": 17,
        "state_counter_set": None,
        "state_counter_delete": None,
    }

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., object]:
        if name not in self.RESULTS:
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> object:
            self.calls.append((name, args, kwargs))
            return self.RESULTS[name]

        return method


class _ShardedBackend(_RecordingBackend):
    requires_shard_key = True


UUID = bytes(range(0xA0, 0xB0))


ATTACH = UUID + b"catalog-bytes"


SHARD = "att-" + UUID.hex()


EID = b"execution-1"


_BoundCall = Callable[[BoundStorage], object]


# (label, call, backend method, positional args, keyword args without shard_key, returned)
DELEGATION: list[tuple[str, _BoundCall, str, tuple[Any, ...], dict[str, Any], object]] = [
    ("queue_push", lambda b: b.queue_push([b"i"]), "queue_push", (EID, [b"i"]), {}, 11),
    ("queue_pop", lambda b: b.queue_pop(), "queue_pop", (EID,), {}, b"popped"),
    ("queue_clear", lambda b: b.queue_clear(), "queue_clear", (EID,), {}, 12),
    ("state_get", lambda b: b.state_get(b"ns", b"k"), "state_get_many", (EID, b"ns", [b"k"]), {}, b"got"),
    (
        "state_get_many",
        lambda b: b.state_get_many(b"ns", [b"k"]),
        "state_get_many",
        (EID, b"ns", [b"k"]),
        {},
        [b"got"],
    ),
    (
        "state_put",
        lambda b: b.state_put(b"ns", b"k", b"v"),
        "state_put_many",
        (EID, b"ns", [(b"k", b"v")]),
        {},
        None,
    ),
    (
        "state_put_many",
        lambda b: b.state_put_many(b"ns", [(b"k", b"v")]),
        "state_put_many",
        (EID, b"ns", [(b"k", b"v")]),
        {},
        None,
    ),
    (
        "state_scan",
        lambda b: b.state_scan(b"ns", start=b"a", end=b"z", reverse=True, limit=3),
        "state_scan",
        (EID, b"ns"),
        {"start": b"a", "end": b"z", "reverse": True, "limit": 3},
        [(b"k", b"scanned")],
    ),
    (
        "state_scan defaults",
        lambda b: b.state_scan(b"ns"),
        "state_scan",
        (EID, b"ns"),
        {"start": None, "end": None, "reverse": False, "limit": None},
        [(b"k", b"scanned")],
    ),
    ("state_drain", lambda b: b.state_drain(b"ns"), "state_drain", (EID, b"ns"), {}, [(b"k", b"drained")]),
    (
        "state_delete keys",
        lambda b: b.state_delete(b"ns", [b"k"]),
        "state_delete",
        (EID, b"ns", [b"k"]),
        {"start": None, "end": None},
        13,
    ),
    (
        "state_delete range",
        lambda b: b.state_delete(b"ns", start=b"a", end=b"b"),
        "state_delete",
        (EID, b"ns", None),
        {"start": b"a", "end": b"b"},
        13,
    ),
    ("execution_clear", lambda b: b.execution_clear(), "execution_clear", (EID,), {}, 14),
    (
        "state_append",
        lambda b: b.state_append(b"ns", b"k", b"i"),
        "state_append",
        (EID, b"ns", b"k", b"i"),
        {},
        15,
    ),
    (
        "state_log_scan",
        lambda b: b.state_log_scan(b"ns", b"k", after_id=4, limit=2),
        "state_log_scan",
        (EID, b"ns", b"k"),
        {"after_id": 4, "limit": 2},
        [(1, b"logged")],
    ),
    (
        "state_log_scan defaults",
        lambda b: b.state_log_scan(b"ns", b"k"),
        "state_log_scan",
        (EID, b"ns", b"k"),
        {"after_id": -1, "limit": None},
        [(1, b"logged")],
    ),
    ("counter_get", lambda b: b.counter_get(b"ns", b"k"), "state_counter_get", (EID, b"ns", b"k"), {}, 16),
    (
        "counter_add",
        lambda b: b.counter_add(b"ns", b"k", 3),
        "state_counter_add",
        (EID, b"ns", b"k", 3),
        {},
        17,
    ),
    (
        "counter_set",
        lambda b: b.counter_set(b"ns", b"k", 9),
        "state_counter_set",
        (EID, b"ns", b"k", 9),
        {},
        None,
    ),
    (
        "counter_delete",
        lambda b: b.counter_delete(b"ns", b"k"),
        "state_counter_delete",
        (EID, b"ns", b"k"),
        {},
        None,
    ),
]


# Every BoundStorage entry point that takes a namespace, called with ``ns``.
NS_ENTRY_POINTS: list[tuple[str, Callable[[BoundStorage, Any], object]]] = [
    ("state_get", lambda b, ns: b.state_get(ns, b"k")),
    ("state_get_many", lambda b, ns: b.state_get_many(ns, [b"k"])),
    ("state_put", lambda b, ns: b.state_put(ns, b"k", b"v")),
    ("state_put_many", lambda b, ns: b.state_put_many(ns, [(b"k", b"v")])),
    ("state_scan", lambda b, ns: b.state_scan(ns)),
    ("state_drain", lambda b, ns: b.state_drain(ns)),
    ("state_delete", lambda b, ns: b.state_delete(ns)),
    ("state_append", lambda b, ns: b.state_append(ns, b"k", b"i")),
    ("state_log_scan", lambda b, ns: b.state_log_scan(ns, b"k")),
    ("counter_get", lambda b, ns: b.counter_get(ns, b"k")),
    ("counter_add", lambda b, ns: b.counter_add(ns, b"k", 1)),
    ("counter_set", lambda b, ns: b.counter_set(ns, b"k", 1)),
    ("counter_delete", lambda b, ns: b.counter_delete(ns, b"k")),
]


NS_IDS = [name for name, _ in NS_ENTRY_POINTS]


class TestVgiNamespaces(_Fixtures):
    def test_framework_ns_members_are_the_seeds(self) -> None:
        assert {m.name: m.value for m in FrameworkNS} == SEED_FRAMEWORK_NS
        for member in FrameworkNS:
            assert isinstance(member, bytes)
            assert member == SEED_FRAMEWORK_NS[member.name]
            assert member.startswith(b"_vgi/")

    def test_coerce_ns(self) -> None:
        coerced = _coerce_ns(FrameworkNS.TIO_STATE)
        assert coerced == b"_vgi/tio_state" and type(coerced) is bytes
        assert _coerce_ns(b"agg") == b"agg"
        from_bytearray = _coerce_ns(_any(bytearray(b"buf")))
        assert from_bytearray == b"buf" and type(from_bytearray) is bytes
        assert _coerce_ns(b"_vgi") == b"_vgi"  # the prefix is "_vgi/", slash included
        assert _coerce_ns(b"x_vgi/") == b"x_vgi/"
        assert _coerce_ns(b"") == b""
        with pytest.raises(ValueError, match="reserved prefix"):
            _coerce_ns(b"_vgi/x")
        with pytest.raises(ValueError, match="reserved prefix"):
            _coerce_ns(_any(bytearray(b"_vgi/tio_state")))  # a member's value, but not the member
        with pytest.raises(TypeError, match="namespace must be bytes or FrameworkNS"):
            _coerce_ns("agg")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            _coerce_ns(memoryview(b"agg"))  # type: ignore[arg-type]

    @pytest.mark.parametrize(("name", "call"), NS_ENTRY_POINTS, ids=NS_IDS)
    def test_every_entry_point_refuses_reserved_and_non_bytes(
        self, name: str, call: Callable[[BoundStorage, Any], object]
    ) -> None:
        backend = _RecordingBackend()
        bound = BoundStorage(backend, EID)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="reserved prefix"):
            call(bound, b"_vgi/sneaky")
        with pytest.raises(TypeError, match="namespace"):
            call(bound, "agg")
        with pytest.raises(TypeError, match="namespace"):
            call(bound, None)
        assert backend.calls == []  # refused before reaching the backend
        call(bound, FrameworkNS.AGGREGATE_STATE)
        ((_, args, _),) = backend.calls
        assert args[1] == b"_vgi/aggregate_state" and type(args[1]) is bytes

    def test_framework_ns_state_lands_under_its_value(self, storage: FunctionStorage) -> None:
        bound = BoundStorage(storage, EID)
        bound.state_put(FrameworkNS.STREAMING_SESSION, b"k", b"v")
        bound.counter_add(FrameworkNS.STREAMING_SESSION, b"c", 2)
        assert storage.state_get_many(EID, b"_vgi/streaming_session", [b"k"]) == [b"v"]
        assert bound.state_get(FrameworkNS.STREAMING_SESSION, b"k") == b"v"
        assert storage.state_counter_get(EID, b"_vgi/streaming_session", b"c") == 2
        with pytest.raises(ValueError):
            bound.state_put(b"_vgi/streaming_session", b"k", b"overwritten")
        assert bound.state_get(FrameworkNS.STREAMING_SESSION, b"k") == b"v"


class TestVgiShardKeys:
    def test_attach_catalog_bytes(self) -> None:
        assert attach_catalog_bytes(None) is None
        assert attach_catalog_bytes(b"") is None
        assert attach_catalog_bytes(ATTACH) == b"catalog-bytes"
        assert attach_catalog_bytes(UUID) == b""
        assert attach_catalog_bytes(b"short") == b""

    def test_derive_shard_key(self) -> None:
        key = _derive_shard_key(attach_uuid=UUID)
        assert key == "att-a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
        assert len(key) == 36
        for bad in (None, b"", UUID[:15], UUID + b"x"):
            with pytest.raises(ValueError, match="16-byte attach uuid"):
                _derive_shard_key(attach_uuid=bad, _origin="test")

    def test_derivation_is_logged_at_debug(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level(logging.DEBUG, logger="vgi.storage.shard"):
            _derive_shard_key(attach_uuid=UUID, _origin="BoundStorage(Req)")
        assert any("origin=BoundStorage(Req)" in r.getMessage() and SHARD in r.getMessage() for r in caplog.records)

    def test_resolve_shard_key(self) -> None:
        plain, remote = _RecordingBackend(), _ShardedBackend()
        assert _resolve_shard_key(plain, None, "o") == ""
        assert _resolve_shard_key(plain, b"", "o") == ""
        assert _resolve_shard_key(plain, UUID[:15], "o") == ""  # too short to carry a UUID
        assert _resolve_shard_key(plain, ATTACH, "o") == SHARD
        assert _resolve_shard_key(plain, UUID, "o") == SHARD
        assert _resolve_shard_key(plain, _any(bytearray(ATTACH)), "o") == SHARD
        # Only the UUID matters: the same attach with other catalog bytes is the same shard.
        assert _resolve_shard_key(plain, UUID + b"something else", "o") == SHARD
        assert _resolve_shard_key(remote, ATTACH, "o") == SHARD
        for missing in (None, b"", UUID[:15]):
            with pytest.raises(ValueError, match="16-byte attach uuid"):
                _resolve_shard_key(remote, missing, "o")
        with pytest.raises(TypeError, match="attach_plaintext"):
            _resolve_shard_key(plain, "a string of more than 16 chars", "o")  # type: ignore[arg-type]

    def test_bound_views_on_a_backend_that_requires_a_shard_key(self) -> None:
        backend = _ShardedBackend()
        with pytest.raises(ValueError, match="origin=BoundStorage"):
            BoundStorage(backend, EID)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"origin=BoundStorage\(dict\)"):
            BoundStorage(backend, EID, request={})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="origin=TransactionBoundStorage"):
            TransactionBoundStorage(backend, b"txn-1")  # type: ignore[arg-type]
        bound = BoundStorage(backend, EID, attach_plaintext=ATTACH)  # type: ignore[arg-type]
        bound.queue_pop()
        bound.transaction(b"txn-1").get_one(b"k")
        TransactionBoundStorage(backend, b"txn-2", shard_key="explicit").get_one(b"k")  # type: ignore[arg-type]
        assert [kwargs["shard_key"] for _, _, kwargs in backend.calls] == [SHARD, SHARD, "explicit"]


class TestVgiBoundStorage(_Fixtures):
    @pytest.mark.parametrize(
        ("call", "method", "args", "kwargs", "returned"),
        [d[1:] for d in DELEGATION],
        ids=[d[0] for d in DELEGATION],
    )
    def test_delegates_to_the_backend(
        self,
        call: _BoundCall,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        returned: object,
    ) -> None:
        backend = _RecordingBackend()
        bound = BoundStorage(backend, EID, attach_plaintext=ATTACH)  # type: ignore[arg-type]
        assert call(bound) == returned
        assert backend.calls == [(method, args, {**kwargs, "shard_key": SHARD})]

    def test_without_attach_the_shard_key_is_empty(self) -> None:
        backend = _RecordingBackend()
        BoundStorage(backend, EID).queue_pop()  # type: ignore[arg-type]
        assert backend.calls == [("queue_pop", (EID,), {"shard_key": ""})]

    def test_pack_int_key(self) -> None:
        assert BoundStorage.pack_int_key(0) == b"\x00" * 8
        assert BoundStorage.pack_int_key(1) == b"\x01" + b"\x00" * 7
        assert BoundStorage.pack_int_key(256) == b"\x00\x01" + b"\x00" * 6
        assert BoundStorage.pack_int_key(-1) == b"\xff" * 8
        assert BoundStorage.pack_int_key(INT64_MAX) == b"\xff" * 7 + b"\x7f"
        assert BoundStorage.pack_int_key(INT64_MIN) == b"\x00" * 7 + b"\x80"
        for i in (0, 1, -1, 12345, -98765, INT64_MAX, INT64_MIN, 2**40 + 3):
            packed = BoundStorage(_RecordingBackend(), EID).pack_int_key(i)  # type: ignore[arg-type]
            assert len(packed) == 8 and int.from_bytes(packed, "little", signed=True) == i
        for out_of_range in (2**63, INT64_MIN - 1):
            with pytest.raises(OverflowError):
                BoundStorage.pack_int_key(out_of_range)
        with pytest.raises(TypeError):
            BoundStorage.pack_int_key(1.0)  # type: ignore[arg-type]

    def test_on_a_real_storage(self, storage: FunctionStorage) -> None:
        bound = BoundStorage(storage, EID, attach_plaintext=ATTACH)
        other = BoundStorage(storage, b"execution-2")
        assert bound.queue_push([b"w1", b"w2"]) == 2
        assert other.queue_pop() is None
        assert bound.queue_pop() == b"w1"
        assert bound.queue_clear() == 1

        key = BoundStorage.pack_int_key(42)
        bound.state_put(b"agg", key, b"forty-two")
        bound.state_put_many(b"agg", [(b"a", b"1"), (b"b", b"2")])
        assert bound.state_get(b"agg", key) == b"forty-two"
        assert bound.state_get(b"agg", b"missing") is None
        assert bound.state_get_many(b"agg", [b"b", b"a"]) == [b"2", b"1"]
        assert other.state_get(b"agg", key) is None
        assert storage.state_get_many(EID, b"agg", [key]) == [b"forty-two"]  # scope_id = execution_id
        assert list(bound.state_scan(b"agg", start=b"a", end=b"c")) == [(b"a", b"1"), (b"b", b"2")]
        assert list(bound.state_scan(b"agg", reverse=True, limit=1)) == [(b"b", b"2")]
        assert bound.state_delete(b"agg", [b"a"]) == 1
        assert bound.state_delete(b"agg", start=b"b", end=b"c") == 1
        assert list(bound.state_drain(b"agg")) == [(key, b"forty-two")]

        first = bound.state_append(b"log", b"k", b"x")
        second = bound.state_append(b"log", b"k", b"y")
        assert bound.state_log_scan(b"log", b"k") == [(first, b"x"), (second, b"y")]
        assert bound.state_log_scan(b"log", b"k", after_id=first, limit=5) == [(second, b"y")]

        assert bound.counter_add(b"cnt", b"c", 2) == 2
        bound.counter_set(b"cnt", b"d", 10)
        assert bound.counter_get(b"cnt", b"d") == 10
        bound.counter_delete(b"cnt", b"d")
        assert bound.counter_get(b"cnt", b"d") == 0

        bound.state_put(b"agg", b"z", b"1")
        assert bound.execution_clear() == 1 + 2 + 1  # state z, two log rows, counter c
        assert bound.state_get(b"agg", b"z") is None


class TestVgiTransactionBoundStorage(_Fixtures):
    def test_delegation(self) -> None:
        backend = _RecordingBackend()
        txn = BoundStorage(backend, EID, attach_plaintext=ATTACH).transaction(b"txn-1")  # type: ignore[arg-type]
        assert isinstance(txn, TransactionBoundStorage)
        assert txn.get([b"a", b"b"]) == [b"got"]
        assert txn.get_one(b"a") == b"got"
        txn.put([(b"a", b"1")])
        txn.put_one(b"b", b"2")
        txn.clear()
        assert backend.calls == [
            ("state_get_many", (b"txn-1", b"txn", [b"a", b"b"]), {"shard_key": SHARD}),
            ("state_get_many", (b"txn-1", b"txn", [b"a"]), {"shard_key": SHARD}),
            ("state_put_many", (b"txn-1", b"txn", [(b"a", b"1")]), {"shard_key": SHARD}),
            ("state_put_many", (b"txn-1", b"txn", [(b"b", b"2")]), {"shard_key": SHARD}),
            ("execution_clear", (b"txn-1",), {"shard_key": SHARD}),
        ]

    def test_built_directly_derives_its_shard_key(self) -> None:
        backend = _RecordingBackend()
        TransactionBoundStorage(backend, b"t", attach_plaintext=ATTACH).get_one(b"k")  # type: ignore[arg-type]
        TransactionBoundStorage(backend, b"t").get_one(b"k")  # type: ignore[arg-type]
        assert [kwargs["shard_key"] for _, _, kwargs in backend.calls] == [SHARD, ""]

    def test_on_a_real_storage(self, storage: FunctionStorage) -> None:
        bound = BoundStorage(storage, EID)
        txn = bound.transaction(b"txn-1")
        txn.put([(b"watermark:a", b"10"), (b"watermark:b", b"20")])
        txn.put_one(b"watermark:a", b"11")
        assert txn.get([b"watermark:a", b"watermark:b", b"none"]) == [b"11", b"20", None]
        assert txn.get_one(b"none") is None
        assert storage.state_get_many(b"txn-1", b"txn", [b"watermark:a"]) == [b"11"]
        assert bound.transaction(b"txn-2").get_one(b"watermark:a") is None
        # clear() sweeps the whole transaction scope, every namespace, but not the execution's.
        storage.state_put_many(b"txn-1", b"other", [(b"k", b"v")])
        bound.state_put(b"txn", b"watermark:a", b"execution-scoped")
        txn.clear()
        assert txn.get_one(b"watermark:a") is None
        assert storage.state_scan(b"txn-1", b"other") == []
        assert bound.state_get(b"txn", b"watermark:a") == b"execution-scoped"


class TestVgiArrow(_Fixtures):
    def test_record_batch_round_trip(self) -> None:
        pa = pytest.importorskip("pyarrow")
        batch = pa.record_batch(
            {"id": pa.array([1, 2, None], pa.int64()), "name": ["a", None, "ccc"], "blob": [b"\x00", b"", b"\xff"]}
        )
        data = BoundStorage.serialize_record_batch(batch)
        assert type(data) is bytes
        back = BoundStorage.deserialize_record_batch(data)
        assert back.schema == batch.schema
        assert back.equals(batch)

    def test_queue_batches(self, storage: FunctionStorage) -> None:
        pa = pytest.importorskip("pyarrow")
        bound = BoundStorage(storage, EID)
        batches = [pa.record_batch({"x": list(range(i, i + 3))}) for i in (0, 10, 20)]
        assert bound.queue_push_batches(batches) == 3
        assert bound.queue_push_batches([]) == 0
        popped = [bound.queue_pop_batch() for _ in range(3)]
        assert [b.column("x").to_pylist() for b in popped if b is not None] == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
        assert bound.queue_pop_batch() is None

    def test_without_pyarrow(self) -> None:
        """The module imports without pyarrow; the helpers then say which extra to install."""
        program = (
            "import sys\n"
            "sys.modules['pyarrow'] = None\n"  # makes `import pyarrow` raise ImportError
            "from durastate.compat.vgi import BoundStorage, FunctionStorage\n"
            "assert BoundStorage.pack_int_key(1) == b'\\x01' + bytes(7)\n"
            "with FunctionStorage(':memory:') as s:\n"
            "    assert BoundStorage(s, b'e').queue_pop_batch() is None\n"
            "for call in (lambda: BoundStorage.serialize_record_batch(None),\n"
            "             lambda: BoundStorage.deserialize_record_batch(b'')):\n"
            "    try:\n"
            "        call()\n"
            "    except ImportError as exc:\n"
            "        assert \"pip install 'durastate[arrow]'\" in str(exc), exc\n"
            "    else:\n"
            "        raise SystemExit('no ImportError')\n"
            "print('ok')\n"
        )
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ok"


class TestVgiShardedStorage(_Fixtures):
    def test_default_is_in_memory(self) -> None:
        with ShardedStorage() as sharded:
            assert sharded.db_path == ":memory:"
            sharded.state_put_many(b"s", b"n", [(b"k", b"v")], shard_key="a")
            assert sharded.state_get_many(b"s", b"n", [b"k"], shard_key="a") == [b"v"]

    def test_shards_are_isolated(self, sharded: ShardedStorage) -> None:
        a, b = "att-aaaa", "att-bbbb"
        sharded.state_put_many(b"s", b"n", [(b"k", b"in-a"), (b"only-a", b"x")], shard_key=a)
        sharded.state_put_many(b"s", b"n", [(b"k", b"in-b")], shard_key=b)
        sharded.queue_push(b"s", [b"work-a1", b"work-a2"], shard_key=a)
        sharded.queue_push(b"s", [b"work-b"], shard_key=b)
        log_a = sharded.state_append(b"s", b"n", b"log", b"entry-a", shard_key=a)
        log_b = sharded.state_append(b"s", b"n", b"log", b"entry-b", shard_key=b)
        sharded.state_counter_add(b"s", b"n", b"c", 1, shard_key=a)
        sharded.state_counter_add(b"s", b"n", b"c", 100, shard_key=b)

        # Results are exactly what was written: no prefixes leak out.
        assert sharded.state_get_many(b"s", b"n", [b"k", b"only-a"], shard_key=a) == [b"in-a", b"x"]
        assert sharded.state_get_many(b"s", b"n", [b"k", b"only-a"], shard_key=b) == [b"in-b", None]
        assert sharded.state_scan(b"s", b"n", shard_key=b) == [(b"k", b"in-b")]
        assert sharded.state_scan(b"s", b"n", shard_key="att-cccc") == []
        assert sharded.state_log_scan(b"s", b"n", b"log", shard_key=a) == [(log_a, b"entry-a")]
        assert sharded.state_log_scan(b"s", b"n", b"log", shard_key=b) == [(log_b, b"entry-b")]
        assert sharded.state_counter_get(b"s", b"n", b"c", shard_key=a) == 1
        assert sharded.state_counter_get(b"s", b"n", b"c", shard_key=b) == 100
        assert sharded.queue_pop(b"s", shard_key=b) == b"work-b"
        assert sharded.queue_pop(b"s", shard_key=b) is None
        assert sharded.queue_pop(b"s", shard_key=a) == b"work-a1"

        # Destructive operations stay inside their shard too.
        assert sharded.execution_clear(b"s", shard_key=b) == 1 + 1 + 1
        assert sharded.state_drain(b"s", b"n", shard_key=a) == [(b"k", b"in-a"), (b"only-a", b"x")]
        assert sharded.state_log_scan(b"s", b"n", b"log", shard_key=a) == [(log_a, b"entry-a")]
        assert sharded.state_counter_get(b"s", b"n", b"c", shard_key=a) == 1
        assert sharded.queue_clear(b"s", shard_key=b) == 0
        assert sharded.queue_clear(b"s", shard_key=a) == 1

    def test_every_method_honours_the_shard(self, sharded: ShardedStorage) -> None:
        for shard in ("x", "y"):
            sharded.state_put_many(b"s", b"n", [(b"a", shard.encode()), (b"b", shard.encode())], shard_key=shard)
            sharded.state_counter_set(b"s", b"n", b"c", ord(shard), shard_key=shard)
        assert sharded.state_delete(b"s", b"n", [b"a"], shard_key="x") == 1
        assert sharded.state_delete(b"s", b"n", start=b"b", shard_key="x") == 1
        assert sharded.state_scan(b"s", b"n", shard_key="y") == [(b"a", b"y"), (b"b", b"y")]
        assert sharded.state_delete(b"s", b"n", shard_key="y") == 2
        sharded.state_counter_delete(b"s", b"n", b"c", shard_key="x")
        assert sharded.state_counter_get(b"s", b"n", b"c", shard_key="x") == 0
        assert sharded.state_counter_get(b"s", b"n", b"c", shard_key="y") == ord("y")
        with pytest.raises(ValueError, match="mutually exclusive"):
            sharded.state_delete(b"s", b"n", [b"a"], start=b"a", shard_key="y")

    def test_the_empty_shard_key_is_a_shard(self, sharded: ShardedStorage) -> None:
        sharded.state_put_many(b"s", b"n", [(b"k", b"default")])
        assert sharded.state_get_many(b"s", b"n", [b"k"], shard_key="") == [b"default"]
        assert sharded.state_get_many(b"s", b"n", [b"k"], shard_key="other") == [None]

    def test_bound_storages_of_different_attaches_are_isolated(self, sharded: ShardedStorage) -> None:
        one = BoundStorage(sharded, EID, attach_plaintext=UUID + b"catalog")
        same_attach = BoundStorage(sharded, EID, attach_plaintext=UUID + b"re-sealed, other catalog bytes")
        two = BoundStorage(sharded, EID, attach_plaintext=bytes(16) + b"catalog")
        one.state_put(b"agg", b"k", b"v1")
        one.queue_push([b"w"])
        assert two.state_get(b"agg", b"k") is None
        assert two.queue_pop() is None
        assert same_attach.state_get(b"agg", b"k") == b"v1"
        assert same_attach.queue_pop() == b"w"
        one.transaction(b"t").put_one(b"k", b"t1")
        assert two.transaction(b"t").get_one(b"k") is None
        assert same_attach.transaction(b"t").get_one(b"k") == b"t1"

    def test_bad_shard_key_changes_nothing(self, sharded: ShardedStorage) -> None:
        with pytest.raises(TypeError, match="shard_key"):
            sharded.state_put_many(b"s", b"n", [(b"k", b"v")], shard_key=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="execution_id"):
            sharded.queue_push("s", [b"w"], shard_key="a")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            sharded.state_put_many(b"s", b"n", [(b"k", "v")], shard_key="a")  # type: ignore[list-item]
        assert sharded.state_scan(b"s", b"n", shard_key="a") == []
        assert sharded.queue_pop(b"s", shard_key="a") is None

    def test_close_then_keep_using(self, sharded: ShardedStorage) -> None:
        sharded.state_put_many(b"s", b"n", [(b"k", b"v")], shard_key="a")
        sharded.close()
        assert sharded.state_get_many(b"s", b"n", [b"k"], shard_key="a") == [b"v"]
