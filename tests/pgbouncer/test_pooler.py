"""What durastate changes behind pgbouncer in transaction mode: found by itself, said by doctor."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import durastate
from durastate.cli.app import cli
from durastate.testing import plugin


def test_a_store_behind_pgbouncer_knows_it_and_prepares_nothing(store_url: str) -> None:
    with durastate.open(store_url) as store:
        engine = store.engine
        assert engine.pooler is True  # type: ignore[attr-defined]
        for i in range(10):  # enough runs that a direct connection would have prepared the statement
            store.kv.put(b"s", b"n", b"k", b"%d" % i)
            assert store.kv.get(b"s", b"n", b"k") == b"%d" % i
        conn = engine._borrow()  # type: ignore[attr-defined]
        try:
            assert conn.prepare_threshold is None
        finally:
            engine._give_back(conn)  # type: ignore[attr-defined]
    with durastate.open(plugin._postgres_base_url()) as direct:
        assert direct.engine.pooler is False  # type: ignore[attr-defined]


def test_a_read_only_store_behind_a_pooler_refuses_writes_itself(store_url: str) -> None:
    with durastate.open(store_url) as writer:
        writer.kv.put(b"s", b"n", b"k", b"v")
    with durastate.open(store_url, read_only=True) as store:
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        with pytest.raises(durastate.ConfigurationError, match="read_only"):
            store.kv.put(b"s", b"n", b"k", b"changed")
        with pytest.raises(durastate.ConfigurationError, match="read_only"), store.transaction():
            store.kv.put(b"s", b"n", b"k", b"changed")
        with pytest.raises(durastate.ConfigurationError, match="read_only"):
            store.queues.push("q", [b"a", b"b"])  # several rows: one executemany
        assert store.kv.get(b"s", b"n", b"k") == b"v"


def test_doctor_says_a_pooler_is_in_front(store_url: str) -> None:
    durastate.open(store_url).close()
    done = CliRunner().invoke(cli, ["doctor", "--url", store_url, "--json"])
    assert done.exit_code == 0, done.output
    assert str(json.loads(done.output)["pooler"]).startswith("yes")
