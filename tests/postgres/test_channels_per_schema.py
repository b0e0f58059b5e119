"""Change channels carry the store's schema: stores of one prefix in two schemas never wake each other's waiters.

PostgreSQL's channels are per database. They were named by prefix and name
alone, so a schema per tenant (same prefix, same queue names) woke every
tenant's waiters on each tenant's push: harmless for correctness (waiters
look again), a thundering herd at scale. Now the name is made of
``"schema".prefix`` and the name (``PostgresEngine.channel``), in the
client and in the announcing triggers alike; a database an older durastate
left migrates its triggers (the queues' and events' last migration).

Negative answers are read after a marker: the store's one listening
connection receives notifications in commit order, so once a watch heard a
marker committed after a write, a notification of that write to another
watch of the same listener has already been delivered, if there was one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack

import pytest

import durastate
from durastate.engines.postgres import PostgresEngine
from durastate.engines.watch import ChangeWatch
from durastate.queues.names import channel as queue_channel
from durastate.queues.statements import SCHEMA as QUEUES_SCHEMA
from durastate.testing.conformance._schema_edits import rewind

pytestmark = pytest.mark.timeout(120)

# What the queue's announcing function was before channels carried the schema (queues schema version 2).
_OLD_QUEUE_ANNOUNCE = (
    "CREATE OR REPLACE FUNCTION {p}queue_announce() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE q BYTEA;"
    " BEGIN"
    "  FOR q IN SELECT DISTINCT queue FROM inserted LOOP"
    "   PERFORM pg_notify('ds_' || left(md5(TG_ARGV[0] || encode(q, 'hex')), 24), '');"
    "  END LOOP;"
    "  RETURN NULL;"
    " END $$"
)
_MARKER = "marker"


def _engine(store: durastate.Store) -> PostgresEngine:
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    return engine


def _until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _listening(store: durastate.Store, *names: str) -> list[ChangeWatch]:
    """Watches on ``names`` of ``store``, returned once its listening connection listens on each and each has
    answered the wake-up its LISTEN gives (a check made before it may have missed a notification: look again)."""
    engine = _engine(store)
    watches = [engine.watch(name, 60) for name in names]
    listener = engine._listener
    assert listener is not None
    _until(lambda: all(listener.listening(engine.channel(name)) for name in names), "the LISTENs")
    for watch in watches:
        assert watch.wait(30)  # the LISTEN's own wake-up (it follows the LISTEN): nothing is left to answer
    return watches


def _mark(store: durastate.Store) -> None:
    """A notification on the marker channel, committed now (the client's own NOTIFY, not a trigger's)."""
    with store.transaction():
        store.engine.notify(_MARKER)


def test_stores_of_one_prefix_in_two_schemas_have_their_own_channels(pg_url: str, second_pg_url: str) -> None:
    with durastate.open(pg_url) as tenant_a, durastate.open(second_pg_url) as tenant_b, ExitStack() as watches:
        jobs = queue_channel(b"jobs")
        assert _engine(tenant_a).channel(jobs) != _engine(tenant_b).channel(jobs)
        a_jobs, a_marker = (watches.enter_context(w) for w in _listening(tenant_a, jobs, _MARKER))
        tenant_b.queues.push("jobs", [b"b's job"])  # announced by b's trigger, on b's channel
        _mark(tenant_a)
        assert a_marker.wait(30)
        assert not a_jobs.wait(0)  # b's push, committed before the marker, did not reach a's waiter
        tenant_a.queues.push("jobs", [b"a's job"])
        assert a_jobs.wait(30)  # a's own does, through a's trigger


def test_events_of_one_session_name_in_two_schemas_wake_only_their_own(pg_url: str, second_pg_url: str) -> None:
    with durastate.open(pg_url) as tenant_a, durastate.open(second_pg_url) as tenant_b, ExitStack() as watches:
        session = tenant_a.events.channel("s1")
        a_session, a_marker = (watches.enter_context(w) for w in _listening(tenant_a, session, _MARKER))
        tenant_b.events.append("s1", [{"type": "b"}])
        _mark(tenant_a)
        assert a_marker.wait(30)
        assert not a_session.wait(0)
        tenant_a.events.append("s1", [{"type": "a"}])
        assert a_session.wait(30)


def test_a_database_an_older_durastate_left_announces_on_the_new_channels_once_opened(pg_url: str) -> None:
    # The queues facet as version 2 left it: its trigger's function computing channels without the schema.
    with durastate.open(pg_url) as old:
        rewind(old.engine, QUEUES_SCHEMA, QUEUES_SCHEMA.version - 1, _OLD_QUEUE_ANNOUNCE)
    with durastate.open(pg_url) as store, ExitStack() as watches:  # opening migrates it
        assert store.engine.schema_versions()["queues"] == QUEUES_SCHEMA.version
        jobs = queue_channel(b"jobs")
        a_jobs, a_marker = (watches.enter_context(w) for w in _listening(store, jobs, _MARKER))
        store.queues.push("jobs", [b"job"])
        _mark(store)
        assert a_marker.wait(30)
        assert a_jobs.wait(0)  # the push's notification came first, on the channel this store listens on
