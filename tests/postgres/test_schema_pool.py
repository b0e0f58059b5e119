"""``postgres_server.SchemaPool``: an emptied schema is what a fresh migration leaves, or it is dropped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durastate
from durastate.testing import postgres_server
from durastate.testing.postgres_server import SchemaPool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pool(pg_base_url: str) -> Iterator[SchemaPool]:
    pool = SchemaPool(pg_base_url)
    yield pool
    pool.close()


def _schema_exists(base: str, schema: str) -> bool:
    with psycopg.connect(base, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def _rows(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows, sorted (attempt ids are random: the attempt table's rows are counted only, and an
    ``attempt`` column elsewhere, a log entry's, says only whether it holds one)."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        rows = {}
        for t in sorted(tables):
            cur = conn.execute(f"SELECT * FROM {t}")
            found = cur.fetchall()
            if t.endswith("attempt"):
                rows[t] = [(len(found),)]
                continue
            names = [c.name for c in cur.description or ()]
            if "attempt" in names:
                at = names.index("attempt")
                found = [(*r[:at], r[at] is not None, *r[at + 1 :]) for r in found]
            rows[t] = sorted(found, key=repr)
        return rows


def _fixed_clock() -> float:
    return 1_700_000_000.0  # so the rows of two runs compare equal


def _use_every_facet(store: durastate.Store) -> None:
    store.kv.put(b"s", b"n", b"k", b"v")
    store.kv.append(b"s", b"n", b"log", b"x")
    store.queues.push("q", [b"job"])
    store.documents.write("doc", {"v": 1})
    store.events.append("sess", [{"type": "t", "payload": 1, "id": "e1"}])
    store.records.commit([{"type": "conversation", "value": {"id": store.records.mint_id(), "title": "c"}}])
    store.presence.set("room", "p", {"x": 1}, at_ms=1, seen=1, ttl_ms=10**9)


def test_a_given_back_schema_is_handed_out_again_as_a_fresh_migration_leaves_it(
    pool: SchemaPool, pg_base_url: str
) -> None:
    fresh_url, fresh_schema = postgres_server.create_schema(pg_base_url)
    try:
        with durastate.open(fresh_url) as fresh:
            fresh_catalog = fresh.engine.catalog()
        fresh_rows = _rows(fresh_url)
        with durastate.open(fresh_url, clock=_fixed_clock) as fresh:
            _use_every_facet(fresh)
        used_fresh_rows = _rows(fresh_url)
    finally:
        postgres_server.drop_schema(pg_base_url, fresh_schema)

    url, schema = pool.take()
    with durastate.open(url, clock=_fixed_clock) as store:
        _use_every_facet(store)
    pool.give_back(url, schema)

    assert pool.take() == (url, schema)
    assert _rows(url) == fresh_rows
    with durastate.open(url, clock=_fixed_clock) as store:
        assert store.engine.catalog() == fresh_catalog
        # Sequences (ids, commit sequence) and identities (queue ids) start over as on a fresh schema.
        _use_every_facet(store)
    assert _rows(url) == used_fresh_rows
    pool.give_back(url, schema)


# Each found by another of the digest's lookups (see postgres_server._SCHEMA_DIGEST).
_CHANGES = {
    "analyzed": "ANALYZE ds_kv",
    "own table": "CREATE TABLE mine (x INT)",
    "own sequence": "CREATE SEQUENCE mine",
    "own index": "CREATE INDEX mine ON ds_kv (value)",
    "own function": "CREATE FUNCTION mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "own trigger": (
        "CREATE FUNCTION mine() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';"
        " CREATE TRIGGER mine BEFORE INSERT ON ds_kv FOR EACH ROW EXECUTE FUNCTION mine()"
    ),
    "added column": "ALTER TABLE ds_kv ADD COLUMN mine INT",
}


@pytest.mark.parametrize("change", ["another prefix", *_CHANGES])
def test_a_schema_that_is_not_what_migration_makes_is_dropped(pool: SchemaPool, pg_base_url: str, change: str) -> None:
    url, schema = pool.take()
    with durastate.open(url) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
    if change == "another prefix":
        durastate.open(url, prefix="other_").close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(_CHANGES[change])
    pool.give_back(url, schema)
    assert not _schema_exists(pg_base_url, schema)
    assert pool.take()[1] != schema


def test_close_drops_every_schema_it_holds(pg_base_url: str) -> None:
    pool = SchemaPool(pg_base_url)
    taken = [pool.take() for _ in range(2)]
    for url, _schema in taken:
        durastate.open(url).close()
    for url, schema in taken:
        pool.give_back(url, schema)
    template = pool._template
    assert template is not None
    pool.close()
    assert not any(_schema_exists(pg_base_url, s) for s in [template, *(schema for _url, schema in taken)])


def test_dropping_schemas_vacuums_the_catalogs_every_so_many_drops(
    pg_base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema's life leaves dead catalog rows, which a server without autovacuum never reclaims."""

    def vacuums() -> int:
        with psycopg.connect(pg_base_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT vacuum_count FROM pg_stat_sys_tables WHERE relid = 'pg_catalog.pg_attribute'::regclass"
            ).fetchone()
            assert row is not None
            return int(row[0])

    monkeypatch.setattr(postgres_server, "VACUUM_EVERY", 2)
    monkeypatch.setattr(postgres_server, "_drops_since_vacuum", 0)
    before = vacuums()
    postgres_server.drop_schema(pg_base_url, postgres_server.create_schema(pg_base_url)[1])
    assert vacuums() == before
    postgres_server.drop_schema(pg_base_url, postgres_server.create_schema(pg_base_url)[1])
    assert vacuums() == before + 1


def test_schemas_are_made_on_one_connection_which_is_replaced_when_lost(pg_base_url: str) -> None:
    def schema_backend() -> int:
        held = postgres_server._admin_connections[pg_base_url]
        return int(held.info.backend_pid)

    first = postgres_server.create_schema(pg_base_url)[1]
    pid = schema_backend()
    second = postgres_server.create_schema(pg_base_url)[1]
    assert schema_backend() == pid  # no new session for the second schema
    with psycopg.connect(pg_base_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    postgres_server.drop_schema(pg_base_url, first)
    postgres_server.drop_schema(pg_base_url, second)
    assert schema_backend() != pid
    assert not _schema_exists(pg_base_url, first) and not _schema_exists(pg_base_url, second)


def schema_of_tables(base: str, count: int) -> str:
    """A new schema holding ``count`` tables, each with a primary key; its name."""
    url, schema = postgres_server.create_schema(base)
    with psycopg.connect(url, autocommit=True) as conn:
        for n in range(count):
            conn.execute(f"CREATE TABLE many_{n} (id int PRIMARY KEY)")
    return schema


def test_a_schema_whose_drop_runs_out_of_locks_is_dropped_in_parts(
    pg_base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``DROP SCHEMA ... CASCADE`` the server refuses for its full lock table (53200) is done table by table."""
    schema = schema_of_tables(pg_base_url, 5)
    monkeypatch.setattr(postgres_server, "DROP_PART", 2)  # three statements for five tables
    real = postgres_server._admin_execute
    refused: list[str] = []

    def full_lock_table_once(target: str, statement: str, params: tuple[Any, ...] | None = None) -> list[Any]:
        if statement.startswith("DROP SCHEMA") and not refused:
            refused.append(statement)
            raise psycopg.errors.OutOfMemory("out of shared memory")
        return real(target, statement, params)

    monkeypatch.setattr(postgres_server, "_admin_execute", full_lock_table_once)
    postgres_server.drop_schema(pg_base_url, schema)
    assert refused, "the first drop was refused"
    with psycopg.connect(pg_base_url, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert left == (0,), "the schema is gone after its tables were dropped in parts"


def test_a_schema_of_many_relations_is_dropped_in_parts_from_the_start(
    pg_base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``DROP_AT_ONCE`` relations no ``DROP SCHEMA ... CASCADE`` of them all is tried: tables go in parts first."""
    schema = schema_of_tables(pg_base_url, 5)  # 10 relations: each table and its key
    monkeypatch.setattr(postgres_server, "DROP_AT_ONCE", 9)
    monkeypatch.setattr(postgres_server, "DROP_PART", 2)
    parts: list[int] = []
    real_parts = postgres_server._drop_in_parts

    def counted(target: str, name: str) -> None:
        with psycopg.connect(pg_base_url, autocommit=True) as conn:
            parts.append(conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (name,)).fetchone()[0])
        real_parts(target, name)

    monkeypatch.setattr(postgres_server, "_drop_in_parts", counted)
    postgres_server.drop_schema(pg_base_url, schema)
    assert parts == [5], "dropped in parts while its five tables were all there"
    assert not _schema_exists(pg_base_url, schema)

    small = schema_of_tables(pg_base_url, 1)
    postgres_server.drop_schema(pg_base_url, small)
    assert parts == [5], "a schema within DROP_AT_ONCE is dropped in one statement"
    assert not _schema_exists(pg_base_url, small)
