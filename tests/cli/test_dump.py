"""``export``/``import``: exact, engine-portable, all-or-nothing.

The round trip SQLite -> PostgreSQL -> SQLite must give back identical rows
(and sequences) in every facet table; a truncated or foreign file, or a
non-empty target, is refused with nothing written; an interrupted export
leaves no file and an interrupted import leaves the store empty.
"""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

import durastate
from durastate.cli import dump
from durastate.cli.app import _atomic_output
from durastate.testing import postgres_server
from durastate.testing.sample import fill


def exported(store: durastate.Store) -> list[dict[str, object]]:
    out = io.BytesIO()
    dump.export_store(store, out)
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    for key in ("engine", "exported_at_ms"):
        lines[0].pop(key)
    return lines


@pytest.fixture
def pg_url() -> object:
    base, reason = postgres_server.server_url()
    if base is None:
        pytest.skip(f"PostgreSQL half skipped: {reason}")
    url, schema = postgres_server.create_schema(base)
    yield url
    postgres_server.drop_schema(base, schema)


def test_round_trip_sqlite_postgres_sqlite_is_identical(tmp_path: Path, pg_url: str) -> None:
    with durastate.open(tmp_path / "a.db") as a:
        fill(a, bulk=2500)  # more rows than one export page
        a.kv.append(b"run-1", b"log", b"stream", b"x")
        a.kv.clear(b"run-1")  # log ordinals handed out and deleted: the sequence must survive
        a.records.mint_id()  # a minted id never committed
        first = exported(a)
        a_sequences = dump.sequences(a.engine)
    blob = b"\n".join(orjson.dumps(line) for line in first)
    header = {**first[0], "engine": "sqlite", "exported_at_ms": 0}
    with durastate.open(pg_url) as pg:
        dump.import_store(pg, io.BytesIO(b"\n".join([orjson.dumps(header), *blob.split(b"\n")[1:]])))
        second = exported(pg)
        assert dump.sequences(pg.engine) == a_sequences
        assert pg.kv.append(b"s", b"n", b"k", b"v") == a_sequences["kv_log"] + 1  # ordinals never reused
        pg.queues.push("fresh", [b"new"])  # the identity continues after the imported ids (no clash)
        fresh = pg.queues.claim("fresh", lease=10)
        assert fresh is not None and fresh.id > max(i.id for i in pg.queues.peek("emails"))
        fresh.ack()
        out = io.BytesIO()
        pg.kv.clear(b"s")
        dump.export_store(pg, out)
    assert second[1:-2] == first[1:-2]  # every table, row for row
    with durastate.open(tmp_path / "c.db") as c:
        dump.import_store(c, io.BytesIO(out.getvalue()))
        third = exported(c)
        # The imported store behaves like the original: a claim continues with the stored attempts.
        assert c.queues.stats("emails") == durastate.open(tmp_path / "a.db").queues.stats("emails")
        assert c.records.mint_id() == a_sequences["records_id"] + 1
    assert [line for line in third if "sequences" not in line] == [line for line in first if "sequences" not in line]
    assert third[-2]["sequences"]["kv_log"] == a_sequences["kv_log"] + 1  # the append on PostgreSQL


def test_import_refuses_a_non_empty_store(tmp_path: Path) -> None:
    with durastate.open(tmp_path / "a.db") as a:
        fill(a)
        data = io.BytesIO()
        dump.export_store(a, data)
    with durastate.open(tmp_path / "b.db") as b:
        b.kv.put(b"s", b"n", b"k", b"v")
        with pytest.raises(durastate.InvalidRequest, match="not empty"):
            dump.import_store(b, io.BytesIO(data.getvalue()))
        assert b.kv.scopes() == [b"s"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda lines: lines[:-1],  # no end line
        lambda lines: [lines[0], *lines[2:]],  # a table header missing
        lambda lines: [line.replace(b'"version":1', b'"version":99', 1) for line in lines],
        lambda lines: [b'{"hello": 1}', *lines[1:]],
        lambda lines: [*lines[:3], b"not json", *lines[3:]],
    ],
    ids=["truncated", "no-header", "future-version", "foreign", "garbage-line"],
)
def test_damaged_dumps_are_refused_and_change_nothing(tmp_path: Path, damage: object) -> None:
    with durastate.open(tmp_path / "a.db") as a:
        fill(a)
        data = io.BytesIO()
        dump.export_store(a, data)
    lines = damage(data.getvalue().splitlines())  # type: ignore[operator]
    with durastate.open(tmp_path / "b.db") as b:
        with pytest.raises(durastate.InvalidRequest):
            dump.import_store(b, io.BytesIO(b"\n".join(lines)))
        assert dump.is_empty(b)


def test_interrupted_import_leaves_the_store_empty(tmp_path: Path) -> None:
    with durastate.open(tmp_path / "a.db") as a:
        fill(a, bulk=3000)
        data = io.BytesIO()
        dump.export_store(a, data)
    seen = [0]

    def interrupt(rows: int, nbytes: int) -> None:
        seen[0] += rows
        if seen[0] == 2000:
            raise KeyboardInterrupt

    with durastate.open(tmp_path / "b.db") as b:
        with pytest.raises(KeyboardInterrupt):
            dump.import_store(b, io.BytesIO(data.getvalue()), interrupt)
        assert dump.is_empty(b)


def test_interrupted_export_leaves_no_file(tmp_path: Path) -> None:
    dest = tmp_path / "out.jsonl"
    with durastate.open(tmp_path / "a.db") as a:
        fill(a)

        def interrupt(rows: int, nbytes: int) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt), _atomic_output(str(dest)) as out:
            dump.export_store(a, out, interrupt)
    assert list(tmp_path.iterdir()) == [
        tmp_path / "a.db",
        *[p for p in tmp_path.iterdir() if p.name.startswith("a.db-")],
    ]
    assert not dest.exists()
