"""``attempt_retention=0``: a PostgreSQL store that keeps no attempt rows.

A write that would record one runs as it is, once; when its connection is
lost before the answer came it raises ``OutcomeUnknown`` (never retried:
nothing could tell the retry whether it committed). Writes whose retries
need no row (an idempotent put, a claim, an append) are still retried
exactly once. The cuts are made by the relay of ``test_retry_safety``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durastate
from durastate.engines.base import READ

from .proxy import CuttingProxy
from .test_retry_safety import on_new_connections

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def store(pg_url: str, via_proxy: str) -> Iterator[durastate.Store]:
    durastate.open(pg_url).close()  # migrate without the relay in the way
    s = durastate.open(via_proxy, min_connections=0, attempt_retention=0)
    yield s
    s.close()


def _attempt_rows(store: durastate.Store) -> int:
    engine = store.engine
    row = engine.one(engine.sql(READ("SELECT count(*) FROM {p}attempt")))
    assert row is not None
    return int(row[0])


def _writes(store: durastate.Store) -> None:
    """Writes of every kind that records an attempt row on a default store, alone and in transactions."""
    store.kv.incr(b"s", b"n", b"c", 2)
    store.kv.put_if_absent(b"s", b"n", b"once", b"v")
    store.kv.delete(b"s", b"n", [b"once"])
    store.queues.push("jobs", [b"a", b"b"])
    assert store.queues.pop("jobs") == b"a"
    store.documents.write("doc", {"n": 1})
    with store.transaction():
        store.kv.incr(b"s", b"n", b"c", 1)
        store.queues.push("jobs", [b"c"])
    store.records.commit([{"type": "entry", "value": {"id": 1, "conversationId": 1}}])


@pytest.mark.parametrize("retention", [0, 300])
def test_a_store_with_attempt_retention_0_writes_no_attempt_rows(pg_url: str, retention: int) -> None:
    with durastate.open(pg_url, attempt_retention=retention) as store:
        before = _attempt_rows(store)
        _writes(store)
        assert store.kv.counter(b"s", b"n", b"c") == 3
        assert store.records.last_seq() == 1
        made = _attempt_rows(store) - before
    if retention:
        assert made >= 5  # the control: every one of those writes recorded its attempt
    else:
        assert made == 0


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_counter_add_whose_answer_is_lost_raises_outcome_unknown(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    store.kv.incr(b"s", b"n", b"warm", 1)  # a pooled connection exists; not the one cut
    getattr(proxy, f"drop_{cut}")(b"kv_counter (scope, ns, key, n)")
    with on_new_connections(store), pytest.raises(durastate.OutcomeUnknown, match="attempt_retention=0"):
        store.kv.incr(b"s", b"n", b"c", 5)
    assert proxy.cuts == 1
    # Never retried: applied once when the server had it (the reply was lost), not at all otherwise.
    assert store.kv.counter(b"s", b"n", b"c") == (5 if cut == "reply" else 0)
    assert not isinstance(durastate.OutcomeUnknown("x"), durastate.StoreUnavailable)  # not "retry later"


def test_a_push_whose_answer_is_lost_is_not_pushed_twice(store: durastate.Store, proxy: CuttingProxy) -> None:
    proxy.drop_reply(b"INSERT INTO ds_queue")
    with on_new_connections(store), pytest.raises(durastate.OutcomeUnknown):
        store.queues.push("jobs", [b"only"])
    assert proxy.cuts == 1
    assert store.queues.pop("jobs") == b"only"
    assert store.queues.pop("jobs") is None


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_a_write_transaction_whose_commit_answer_is_lost_raises_outcome_unknown(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    getattr(proxy, f"drop_{cut}")(b"COMMIT")
    with on_new_connections(store), pytest.raises(durastate.OutcomeUnknown, match="COMMIT"), store.transaction():
        store.kv.incr(b"s", b"n", b"c", 1)
        store.queues.push("jobs", [b"x"])
    assert proxy.cuts == 1
    applied = cut == "reply"
    assert store.kv.counter(b"s", b"n", b"c") == (1 if applied else 0)  # never sent again
    assert store.queues.stats("jobs").ready == (1 if applied else 0)


def test_a_records_commit_lost_is_not_sent_again(store: durastate.Store, proxy: CuttingProxy) -> None:
    records = store.records
    before = records.commit([{"type": "entry", "value": {"id": 5000, "conversationId": 1}}])
    proxy.drop_reply(b"COMMIT")
    with on_new_connections(store), pytest.raises(durastate.OutcomeUnknown):
        records.commit([{"type": "entry", "value": {"id": 5001, "conversationId": 1}}])
    assert proxy.cuts == 1
    assert records.last_seq() == before + 1  # committed once, by the lost flight
    assert records.commit([{"type": "entry", "value": {"id": 5002, "conversationId": 1}}]) == before + 2


@pytest.mark.parametrize("cut", ["reply", "request"])
def test_writes_that_need_no_attempt_row_are_still_retried_exactly_once(
    store: durastate.Store, proxy: CuttingProxy, cut: str
) -> None:
    store.kv.put(b"s", b"n", b"k", b"old")
    getattr(proxy, f"drop_{cut}")(b"INSERT INTO ds_kv (scope")
    with on_new_connections(store):
        store.kv.put(b"s", b"n", b"k", b"new")  # idempotent: run again
    store.queues.push("jobs", [b"first", b"second"])
    getattr(proxy, f"drop_{cut}")(b"SET lease")
    with on_new_connections(store):
        claim = store.queues.claim("jobs", lease=60)  # re-read by its lease token
    getattr(proxy, f"drop_{cut}")(b"INSERT INTO ds_kv_log")
    with on_new_connections(store):
        ordinal = store.kv.append(b"s", b"n", b"log", b"line")  # re-read by the id in its row
    assert proxy.cuts == 3
    assert store.kv.get(b"s", b"n", b"k") == b"new"
    assert claim is not None and (claim.payload, claim.attempts) == (b"first", 1)
    claim.ack()
    assert list(store.kv.log(b"s", b"n", b"log")) == [(ordinal, b"line")]
    assert _attempt_rows(store) == 0


@pytest.mark.parametrize("bad", [-1, 0.5, 7 * 86400 + 1, float("nan"), True, "0"])
def test_attempt_retention_is_0_or_in_range(pg_url: str, bad: object) -> None:
    with pytest.raises(durastate.ConfigurationError, match="attempt_retention"):
        durastate.open(pg_url, attempt_retention=bad)  # type: ignore[arg-type]
