"""Queue, ``kv.put`` and ``kv.put_many`` blobs reach the engine in the form it binds cheapest (``blob_binding``).

On SQLite the queues facet hands queue names, lease tokens and payloads,
and ``kv.put``/``kv.put_many`` scopes, namespaces, keys and values, as ``bytearray``
(bound without sqlite3's adapter probe) and the write paths bind
``engine_blobs`` statements' parameters as they come; every other engine
(PostgreSQL: its attempts, retries and sharding read the parameters) sees
``bytes``, as before. What callers see is ``bytes`` on every engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import durastate
from durastate.engines import sqlite_writes
from durastate.engines.base import READ, WRITE
from durastate.engines.sqlite import SqliteEngine
from durastate.errors import WrongType


def _spy(store: durastate.Store, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The parameters of every ``engine_blobs`` statement the engine is asked to run, in order."""
    engine = store.engine
    seen: list[tuple[Any, ...]] = []

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def spied(sql: str, params: Any = ()) -> Any:
            if getattr(sql, "engine_blobs", False):
                if method.__name__ == "executemany":
                    params = list(params)
                    seen.extend(tuple(row) for row in params)
                else:
                    seen.append(tuple(params))
            return method(sql, params)

        return spied

    for name in ("execute", "send", "one", "executemany"):
        monkeypatch.setattr(engine, name, wrap(getattr(engine, name)))
    return seen


def _work(store: durastate.Store) -> None:
    queues = store.queues
    queues.push("jobs", [b"one"])
    queues.push(b"jobs", [b"two", b"three"])
    first = queues.claim("jobs", lease=30)
    assert first is not None
    first.renew(60)
    first.nack()
    for _ in range(3):
        claim = queues.claim(b"jobs", lease=30)
        assert claim is not None and type(claim.payload) is bytes and claim.queue == b"jobs"
        claim.ack()
    queues.push("jobs", [b"four"])
    assert queues.pop("jobs") == b"four"


def test_the_engine_binds_the_queue_blobs_in_its_own_form(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _spy(store, monkeypatch)
    _work(store)
    assert len(seen) >= 12  # pushes (3 items), claims, renew, nack, acks, pop: all declared engine_blobs
    blobs = {type(p) for params in seen for p in params if isinstance(p, (bytes, bytearray))}
    # SQLite: bytearray only (without blob_binding, names, tokens and payloads came as bytes);
    # any other engine: bytes only, as its retries and sharding have always seen them.
    assert blobs == ({bytearray} if isinstance(store.engine, SqliteEngine) else {bytes})


def test_kv_put_many_binds_its_blobs_in_the_engines_own_form(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _spy(store, monkeypatch)
    kv = store.kv
    kv.put_many(b"s", b"n", [(b"one", b"1")])
    kv.put_many(b"s", b"n", [(b"a", b"x"), (b"b", b""), (b"a", b"last wins")])  # a key repeated: rows rebuilt
    kv.put_many(b"s", b"n", [(b"t", b"with a deadline")], ttl=60)
    kv.put_many(b"s", b"n", [(b"one", b"kept"), (b"new", b"2")], if_absent=True)
    many = [(b"k%04d" % i, b"v%d" % i) for i in range(300)]  # past PUT_CHUNK: several statements
    kv.put_many(b"s", b"n", many)
    assert len(seen) >= 7
    blobs = {type(p) for params in seen for p in params if isinstance(p, (bytes, bytearray))}
    assert blobs == ({bytearray} if isinstance(store.engine, SqliteEngine) else {bytes})
    assert kv.get(b"s", b"n", b"one") == b"1"
    assert kv.get(b"s", b"n", b"a") == b"last wins" and kv.get(b"s", b"n", b"b") == b""
    assert kv.get(b"s", b"n", b"t") == b"with a deadline" and kv.get(b"s", b"n", b"new") == b"2"
    assert kv.get_many(b"s", b"n", [key for key, _ in many]) == [value for _, value in many]
    assert all(type(value) is bytes for value in kv.get_many(b"s", b"n", [b"a", b"b", b"k0000"]))


def test_kv_put_binds_its_blobs_in_the_engines_own_form(
    store: durastate.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _spy(store, monkeypatch)
    kv = store.kv
    kv.put(b"s", b"n", b"k", b"v")
    kv.put(b"s", b"n", b"k", b"replaced")
    kv.put(b"s", b"n", b"t", b"", ttl=60)
    kv.put(b"s", b"", b"", bytearray(b"copied"))  # a bytearray value is copied to bytes first (_value)
    assert len(seen) == 4
    blobs = {type(p) for params in seen for p in params if isinstance(p, (bytes, bytearray))}
    assert blobs == ({bytearray} if isinstance(store.engine, SqliteEngine) else {bytes})
    assert kv.get(b"s", b"n", b"k") == b"replaced" and kv.get(b"s", b"n", b"t") == b""
    assert kv.get(b"s", b"", b"") == b"copied" and type(kv.get(b"s", b"", b"")) is bytes


def test_blob_binding_keeps_the_value(store: durastate.Store) -> None:
    blob = store.engine.blob_binding()
    for value in (b"", b"\x00\xffjobs", bytes(range(256))):
        bound = blob(value)
        assert bytes(bound) == value  # type: ignore[call-overload]
        assert store.engine.one(store.engine.sql(READ("SELECT ?")), (bound,)) == (value,)
        assert type(store.engine.one(store.engine.sql(READ("SELECT ?")), (bound,))[0]) is bytes  # type: ignore[index]
    if not isinstance(store.engine, SqliteEngine):
        assert blob(b"same") == b"same" and type(blob(b"same")) is bytes


def test_the_shared_write_binds_an_engine_blobs_statement_as_it_comes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with durastate.open(tmp_path / "b.db") as store:
        engine = store.engine
        engine.execute(engine.sql(WRITE("CREATE TABLE IF NOT EXISTS {p}b (v BLOB)")))
        converted: list[Any] = []
        real = sqlite_writes.bindable
        monkeypatch.setattr(sqlite_writes, "bindable", lambda params: converted.append(params) or real(params))
        promised = engine.sql(WRITE("INSERT INTO {p}b (v) VALUES (?)", engine_blobs=True))
        plain = engine.sql(WRITE("INSERT INTO {p}b (v) VALUES (?)"))
        engine.execute(promised, (engine.blob_binding()(b"a"),))
        assert converted == []  # bound as it came (without the flag: run through bindable)
        engine.execute(plain, (b"b",))
        assert converted == [(b"b",)]
        # A promise broken (bytes handed anyway) binds the same value, only slower.
        engine.execute(promised, (b"c",))
        rows = engine.all(engine.sql(READ("SELECT v FROM {p}b ORDER BY rowid")))
        assert rows == [(b"a",), (b"b",), (b"c",)]


def test_engine_blobs_must_be_a_bool() -> None:
    with pytest.raises(WrongType, match="engine_blobs"):
        WRITE("DELETE FROM {p}b", engine_blobs="yes")  # type: ignore[arg-type]
