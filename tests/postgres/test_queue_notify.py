"""A nack's wake-up travels in the nack's own transaction (PostgreSQL: one BEGIN/COMMIT, the NOTIFY inside)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.engines.postgres import PostgresEngine
from durastate.engines.postgres_pool import PooledConnection

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement text the engine's pooled connections run, in order, while recording."""
    recorded: list[str] = []
    run, execute, send = PooledConnection.run, PooledConnection.execute, PooledConnection.send

    def recording_run(self: PooledConnection, query: str, params: Any = None) -> Any:
        recorded.append(str(query))
        return run(self, query, params)

    def recording_execute(self: PooledConnection, query: Any, params: Any = None, **kwargs: Any) -> Any:
        recorded.append(str(query))
        return execute(self, query, params, **kwargs)

    def recording_send(self: PooledConnection, query: str, params: Any = None) -> None:
        recorded.append(str(query))
        send(self, query, params)

    monkeypatch.setattr(PooledConnection, "run", recording_run)
    monkeypatch.setattr(PooledConnection, "send", recording_send)
    monkeypatch.setattr(PooledConnection, "execute", recording_execute)
    yield recorded


def test_nack_notifies_inside_its_transaction(pg_url: str, statements: list[str]) -> None:
    with durastate.open(pg_url) as store:
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        store.queues.push("jobs", [b"job"])
        claim = store.queues.claim("jobs", lease=30)
        assert claim is not None
        channel = engine.channel("queue:" + b"jobs".hex())
        with psycopg.connect(pg_url, autocommit=True) as listener:
            listener.execute(f"LISTEN {channel}")
            statements.clear()
            claim.nack()
            heard = [n.channel for n in listener.notifies(timeout=10, stop_after=1)]
        nack = list(statements)
        assert heard == [channel]  # the wake-up still reaches a waiter in another process
        assert store.queues.claim("jobs", lease=30) is not None  # and the item is claimable again
    begins = [i for i, text in enumerate(nack) if text.startswith("BEGIN")]
    commits = [i for i, text in enumerate(nack) if text == "COMMIT"]
    notifies = [i for i, text in enumerate(nack) if text.startswith("NOTIFY")]
    assert len(begins) == 1 and len(commits) == 1, nack  # one transaction, not a second one for the NOTIFY
    assert len(notifies) == 1 and begins[0] < notifies[0] < commits[0], nack
