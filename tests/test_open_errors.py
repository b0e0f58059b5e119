"""Errors at open and from configuration: permanent ones are not "retry later".

A path that cannot be created, a folder, a file that is not a database or is
damaged, a read-only store asked to write, nonsense options and a broken
clock each raise a durastate error that says so, never a raw ``OSError`` /
``ValueError`` and never ``StoreUnavailable``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import durastate
from durastate import ConfigurationError, InvalidRequest, StoreCorrupt, StoreUnavailable
from durastate.testing import plugin, postgres_server


def _not_retryable(exc: BaseException) -> None:
    assert not isinstance(exc, StoreUnavailable), f"{type(exc).__name__} says 'retry later': {exc}"


def test_a_folder_that_cannot_be_created_is_a_configuration_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigurationError, match="cannot create") as caught:
        durastate.open(blocker / "sub" / "state.db")
    assert str(blocker) in str(caught.value)
    _not_retryable(caught.value)


def test_a_folder_is_not_a_store_and_empty_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is a folder"):
        durastate.open(tmp_path)
    with pytest.raises(InvalidRequest):
        durastate.open("")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(InvalidRequest):  # Path("") is "." : a folder, refused the same way as ""
            durastate.open(Path(""))
    finally:
        os.chdir(cwd)


def test_a_path_without_permission_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores file modes; sysfs refuses new folders even to root (EPERM).
        target = Path("/sys/durastate-no-permission/state.db")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "state.db"
    with pytest.raises(ConfigurationError, match="cannot create") as caught:
        durastate.open(target)
    assert str(target) in str(caught.value)
    assert not target.exists()


def test_a_file_that_is_not_a_database_is_corrupt_not_unavailable(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(8192))
    with pytest.raises(StoreCorrupt) as caught:
        durastate.open(junk)
    _not_retryable(caught.value)


def test_a_damaged_database_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with durastate.open(path) as store:
        store.kv.put_many(b"s", b"n", [(b"%06d" % i, b"x" * 200) for i in range(2000)])
    import sqlite3

    with sqlite3.connect(path) as raw:  # move everything from the WAL into the file
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, 3 * page):  # scribble over interior pages
        data[offset : offset + page] = os.urandom(page)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupt), durastate.open(path) as store:
        list(store.kv.scan(b"s", b"n"))


def test_a_read_only_open_leaves_nothing_next_to_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    """A store cut to its first 100 bytes still has a header saying WAL: SQLite created -wal and -shm files
    beside it before finding the damage. Read-only opens (every inspecting command) refuse it from the header
    first, as StoreCorrupt, and so does junk; the folder is left as it was."""
    store_path = tmp_path / "whole.db"
    with durastate.open(store_path) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / "trunc.db").write_bytes(store_path.read_bytes()[:100])
    (folder / "junk.db").write_bytes(os.urandom(100))
    (folder / "short.db").write_bytes(b"SQLite format")
    for name in ("trunc.db", "junk.db", "short.db"):
        with pytest.raises(StoreCorrupt, match="restore it from a backup"):
            durastate.open(folder / name, read_only=True)
    assert sorted(p.name for p in folder.iterdir()) == ["junk.db", "short.db", "trunc.db"]
    with durastate.open(store_path, read_only=True) as store:  # a whole store still opens
        assert store.kv.get(b"s", b"n", b"k") == b"v"


def _wreck_btree_page(path: Path, table: str) -> None:
    """The b-tree page header of ``table``'s root page made unreadable (``sqlite_master``'s is page 1's, after the
    file's 100-byte header, which stays whole)."""
    root = 1
    if table != "sqlite_master":
        with contextlib.closing(sqlite3.connect(path)) as raw:
            (root,) = raw.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    data = bytearray(path.read_bytes())
    at = (root - 1) * 4096 + (100 if root == 1 else 0)
    data[at : at + 8] = b"\xff" * 8  # no b-tree page type is 0xff
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("table", ["sqlite_master", "ds_schema"])
def test_a_read_only_open_leaves_nothing_next_to_a_store_it_cannot_open(tmp_path: Path, table: str) -> None:
    """A whole header but a damaged page the open reads (the schema, or the store's schema versions): SQLite
    created the -wal and -shm files of the WAL file before it met the damage, and a read-only connection cannot
    remove them. The open reads them first without any (immutable) and refuses the file as StoreCorrupt."""
    folder = tmp_path / "damaged"
    folder.mkdir()
    path = folder / "s.db"
    with durastate.open(path) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
    _wreck_btree_page(path, table)
    with pytest.raises(StoreCorrupt, match=r"malformed.*restore it from a backup") as caught:
        durastate.open(path, read_only=True)
    _not_retryable(caught.value)
    assert sorted(p.name for p in folder.iterdir()) == ["s.db"]


def test_read_only_reads_and_refuses_every_write(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with durastate.open(path) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        store.documents.write("d", {"v": 1})
    os.chmod(path, 0o444)
    with durastate.open(path, read_only=True) as ro:
        assert ro.kv.get(b"s", b"n", b"k") == b"v"
        assert ro.documents.read("d") is not None
        for write in (
            lambda: ro.kv.put(b"s", b"n", b"k", b"w"),
            lambda: ro.documents.write("d", {"v": 2}),
            lambda: ro.queues.push("q", [b"x"]),
        ):
            with pytest.raises(ConfigurationError) as caught:
                write()
            _not_retryable(caught.value)
    os.chmod(path, 0o644)
    with durastate.open(path) as store:
        assert store.kv.get(b"s", b"n", b"k") == b"v" and store.documents.read("d").data == {"v": 1}  # type: ignore[union-attr]


def test_read_only_needs_an_existing_current_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no store file"):
        durastate.open(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    import sqlite3

    sqlite3.connect(tmp_path / "plain.db").close()
    with pytest.raises(ConfigurationError, match="open it writable once"):
        durastate.open(tmp_path / "plain.db", read_only=True)
    with pytest.raises(InvalidRequest):
        durastate.open("memory:", read_only=True)
    with pytest.raises(InvalidRequest):
        durastate.open(tmp_path / "x.db", read_only="yes")  # type: ignore[arg-type]


def test_read_only_on_postgres_refuses_writes() -> None:
    base = plugin._postgres_base_url()
    url, schema = postgres_server.create_schema(base)
    try:
        with durastate.open(url) as store:
            store.kv.put(b"s", b"n", b"k", b"v")
        with durastate.open(url, read_only=True) as ro:
            assert ro.kv.get(b"s", b"n", b"k") == b"v"
            with pytest.raises(ConfigurationError):
                ro.kv.put(b"s", b"n", b"k", b"w")
            with pytest.raises(ConfigurationError), ro.transaction():
                ro.kv.put(b"s", b"n", b"k2", b"w")
        with durastate.open(url) as store:
            assert store.kv.get(b"s", b"n", b"k") == b"v" and store.kv.get(b"s", b"n", b"k2") is None
    finally:
        postgres_server.drop_schema(base, schema)


@pytest.mark.parametrize(
    "options",
    [
        {"busy_timeout": math.inf},
        {"busy_timeout": math.nan},
        {"busy_timeout": 1e300},
        {"busy_timeout": -1},
        {"busy_timeout": True},
        {"min_connections": "1"},
        {"max_connections": 0},
        {"min_connections": 5, "max_connections": 2},
        {"durability": "fast"},
        {"prefix": "pi_\n"},
        {"prefix": "1abc"},
        {"clock": lambda: "now"},
        {"clock": lambda: math.nan},
        {"clock": lambda: None},
        {"clock": 5},
        {"clock": lambda: 1 / 0},  # a clock that raises
        {"clock": lambda now: 1.0},  # one that takes an argument
        {"clock": time.time_ns},  # nanoseconds: its milliseconds overflowed every write
        {"clock": lambda: 1e300},
        {"clock": lambda: 10**400},
        {"clock": lambda: -1e12},
        {"max_value_size": 1.5},
        {"max_value_size": 2**70},
        {"max_key_size": True},
        {"read_only": "yes"},
        {"bogus": 1},
    ],
)
def test_nonsense_options_are_refused_at_open(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as caught:  # permanent: the same call can never work
        durastate.open(tmp_path / "state.db", **options)
    _not_retryable(caught.value)
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


def test_a_clock_that_breaks_later_raises_a_clear_error(tmp_path: Path) -> None:
    readings: list[Any] = [1_800_000_000.0]
    with durastate.open(tmp_path / "state.db", clock=lambda: readings[0]) as store:
        store.kv.put(b"s", b"n", b"k", b"v", ttl=10)
        for bad in ("later", math.nan, math.inf, None):
            readings[0] = bad
            with pytest.raises(InvalidRequest, match="clock returned"):
                store.kv.put(b"s", b"n", b"k", b"w", ttl=10)
        readings[0] = 1_800_000_001.0
        assert store.kv.get(b"s", b"n", b"k") == b"v"


# Readings a clock may turn to after open: past float range once multiplied, past any int, past int64 in ms, and
# past 2**62 ms (where now plus a lease or delay at their bound would leave int64).
HUGE_READINGS = [1e300, 10**400, 2**63 // 1000 + 1, 2**62 // 1000 + 1, -1.0]


@pytest.mark.parametrize("reading", HUGE_READINGS, ids=["1e300", "10**400", "past-int64-ms", "past-2**62-ms", "-1"])
def test_a_clock_that_turns_out_of_range_later_is_refused_and_changes_nothing(store_url: str, reading: float) -> None:
    readings: list[float] = [1_800_000_000.0]
    with durastate.open(store_url, clock=lambda: readings[0]) as store:
        store.queues.push("q", [b"first"])
        store.kv.put(b"s", b"n", b"k", b"v", ttl=100)
        readings[0] = reading
        writes = {
            "push": lambda: store.queues.push("q", [b"second"], delay=1),
            "claim": lambda: store.queues.claim("q", lease=10),
            "kv.put ttl": lambda: store.kv.put(b"s", b"n", b"k", b"w", ttl=10),
            "events.append": lambda: store.events.append("session", [{"type": "t"}]),
        }
        for name, write in writes.items():
            with pytest.raises(ConfigurationError, match=r"the store's clock returned .*below 2\*\*62") as caught:
                write()
            assert not isinstance(caught.value, OverflowError), name
        readings[0] = 1_800_000_001.0
        claim = store.queues.claim("q", lease=10)
        assert claim is not None and claim.payload == b"first" and claim.attempts == 1
        assert store.queues.claim("q", lease=10) is None  # the refused push added nothing
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert list(store.events.read("session")) == []
        # The last reading allowed: now plus the longest lease or delay still fits int64.
        readings[0] = (2**62 - 1) // 1000
        longest = 2**62 // 1000
        assert store.queues.push("q", [b"later"], delay=longest) == 1
        claim.renew(lease=longest)
        assert claim.lease_expires_at == ((2**62 - 1) // 1000 * 1000 + longest * 1000) / 1000


def test_with_no_clock_given_the_store_reads_the_system_clock(tmp_path: Path) -> None:
    with durastate.open(tmp_path / "state.db") as store:
        before = time.time_ns() // 1_000_000
        now = store.engine.now_ms()
        after = time.time_ns() // 1_000_000
        assert type(now) is int and before <= now <= after
        store.queues.push("q", [b"x"])
        claim = store.queues.claim("q", lease=10)
        assert claim is not None and before + 10_000 <= claim.lease_expires_at * 1000 <= time.time_ns() / 1e6 + 10_000


def test_json_integers_must_fit_signed_64_bits(tmp_path: Path) -> None:
    with durastate.open(tmp_path / "state.db") as store:
        for ok in (2**63 - 1, -(2**63), "1" * 40):
            store.documents.write("d", {"n": ok})
            store.events.append("s", [{"type": "t", "payload": {"n": ok}}])
        for bad in (2**63, 2**64 - 1, -(2**63) - 1):
            with pytest.raises(InvalidRequest, match="64"):
                store.documents.write("d", {"deep": [{"n": bad}]})
            with pytest.raises(InvalidRequest, match="64"):
                store.events.append("s", [{"type": "t", "payload": [bad]}])
        assert store.documents.read("d").data == {"n": "1" * 40}  # type: ignore[union-attr]


# -- attempt_retention: a PostgreSQL option that every engine checks ---------------

BAD_ATTEMPT_RETENTIONS: list[Any] = [0.5, -1, -0.0001, 7 * 86400 + 1, 1e300, math.nan, math.inf, "300", True]


def test_attempt_retention_is_checked_at_open_on_every_engine(store_url: str, tmp_path: Path) -> None:
    for bad in BAD_ATTEMPT_RETENTIONS:
        with pytest.raises(ConfigurationError, match=r"^attempt_retention must be ") as caught:
            durastate.open(store_url, attempt_retention=bad)
        assert repr(bad) in str(caught.value)
    # Refused before anything was opened: no file, no tables.
    assert not (tmp_path / "state.db").exists()
    if store_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store_url) as conn:
            row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()
        assert row == (0,)


@pytest.mark.parametrize("seconds", [1, 60.5, 7 * 86400])
def test_attempt_retention_is_passed_to_postgresql_and_ignored_by_sqlite(store_url: str, seconds: float) -> None:
    with durastate.open(store_url, attempt_retention=seconds) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        if store_url.startswith("postgresql"):
            assert store.engine.attempt_retention == float(seconds)  # type: ignore[attr-defined]
        else:
            assert not hasattr(store.engine, "attempt_retention")


def test_aio_open_passes_attempt_retention_through(store_url: str) -> None:
    import asyncio

    from durastate import aio

    async def main() -> float | None:
        async with await aio.open(store_url, attempt_retention=42) as store:
            await store.kv.put(b"s", b"n", b"k", b"v")
            return getattr(store._store.engine, "attempt_retention", None)

    kept = asyncio.run(main())
    assert kept == (42.0 if store_url.startswith("postgresql") else None)
    with pytest.raises(ConfigurationError, match="attempt_retention"):
        asyncio.run(aio.open(store_url, attempt_retention=-1))


# -- another application's table under durastate's prefix -----------------------------------


def _their_table(url: str, name: str) -> None:
    """Another application's table ``name`` (one row) in the database or schema of ``url``."""
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, theirs TEXT)")
            conn.execute(f"INSERT INTO {name} VALUES (1, 'kept')")
        return
    import sqlite3

    conn = sqlite3.connect(url.removeprefix("sqlite://"))
    with conn:
        conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, theirs TEXT)")
        conn.execute(f"INSERT INTO {name} VALUES (1, 'kept')")
    conn.close()


def _their_rows(url: str, name: str) -> list[tuple[Any, ...]]:
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as conn:
            return [tuple(row) for row in conn.execute(f"SELECT * FROM {name}").fetchall()]
    import sqlite3

    conn = sqlite3.connect(url.removeprefix("sqlite://"))
    try:
        return conn.execute(f"SELECT * FROM {name}").fetchall()
    finally:
        conn.close()


# A facet's table, the store's schema table (created IF NOT EXISTS, then read), the name of one of its indexes.
@pytest.mark.parametrize("theirs", ["ds_kv", "ds_schema", "ds_kv_expiry"])
def test_another_applications_table_under_the_prefix_is_a_configuration_error_naming_it(
    shared_url: str, theirs: str
) -> None:
    _their_table(shared_url, theirs)
    with pytest.raises(ConfigurationError) as caught:
        durastate.open(shared_url)
    message = str(caught.value)
    assert repr(theirs) in message and "prefix of its own" in message and "prefix='myapp_'" in message, message
    _not_retryable(caught.value)
    assert _their_rows(shared_url, theirs) == [(1, "kept")]
    with durastate.open(shared_url, prefix="app_") as store:  # the way out the message gives
        assert store.engine.schema_versions() != {}
    with pytest.raises(ConfigurationError, match=repr(theirs)):  # nothing was left half made
        durastate.open(shared_url)


def test_a_facet_added_later_meeting_another_applications_table_changes_nothing(shared_url: str) -> None:
    with durastate.open(shared_url, facets=["kv"]) as store:
        store.kv.put(b"s", b"n", b"k", b"v")
        versions = store.engine.schema_versions()
    _their_table(shared_url, "ds_queue")
    with pytest.raises(ConfigurationError, match="cannot create table 'ds_queue'"):
        durastate.open(shared_url)
    with durastate.open(shared_url, facets=["kv"]) as store:
        assert store.kv.get(b"s", b"n", b"k") == b"v"
        assert store.engine.schema_versions() == versions
    assert _their_rows(shared_url, "ds_queue") == [(1, "kept")]


# -- table prefixes are lower case: table names are case-insensitive on both engines --------


def _tables_in(store_url: str) -> int:
    import psycopg

    with psycopg.connect(store_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()
    assert row is not None
    return int(row[0])


def test_an_upper_case_prefix_is_refused_naming_the_lower_case_one(store_url: str, tmp_path: Path) -> None:
    for prefix in ("App_", "APP", "aPp_x"):
        with pytest.raises(ConfigurationError, match="lower case because table names are case-insensitive") as caught:
            durastate.open(store_url, prefix=prefix)
        assert repr(prefix.lower()) in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # nothing created
    if store_url.startswith("postgresql"):
        assert _tables_in(store_url) == 0
    with durastate.open(store_url, prefix="app_") as store:  # the lower-case one works
        store.kv.put(b"s", b"n", b"k", b"v")


def test_a_sqlite_store_made_with_an_upper_case_prefix_opens_with_the_lower_case_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from durastate.engines import base

    path = tmp_path / "state.db"
    with monkeypatch.context() as before:  # the rule before prefixes had to be lower case
        before.setattr(base, "validate_prefix", lambda prefix: prefix)
        with durastate.open(path, prefix="App_") as store:
            store.kv.put(b"s", b"n", b"k", b"v")
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'App\\_%' ESCAPE '\\'").fetchone()[0]
    with durastate.open(path, prefix="app_") as store:  # was: InvalidRequest('table app_... already exists')
        assert store.kv.get(b"s", b"n", b"k") == b"v"


# -- open()'s options: a wrong name or type is a ConfigurationError and a TypeError -----------------


def test_an_unknown_or_wrong_typed_option_is_a_configuration_error_and_a_type_error(tmp_path: Path) -> None:
    import asyncio

    from durastate import aio
    from durastate.errors import WrongOption

    with pytest.raises(
        WrongOption, match=r"'max_conections' \(did you mean 'max_connections'\?\), 'zz'; the options are prefix, "
    ) as caught:
        durastate.open(tmp_path / "state.db", max_conections=3, zz=1)  # type: ignore[call-arg]
    assert isinstance(caught.value, ConfigurationError) and isinstance(caught.value, TypeError)
    with pytest.raises(WrongOption, match="'bogus'"):
        asyncio.run(aio.open(tmp_path / "state.db", bogus=1))  # type: ignore[call-arg]
    for options in ({"max_value_size": 1.5}, {"max_key_size": "64"}, {"read_only": "yes"}):
        with pytest.raises(WrongOption, match=f"^{next(iter(options))} must be "):
            durastate.open(tmp_path / "state.db", **options)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("reading", [time.time_ns, lambda: 1e300, lambda: -1.0, lambda: 2**62 // 1000 + 1])
def test_a_clock_out_of_range_is_refused_before_anything_is_created(
    store_url: str, tmp_path: Path, reading: Any
) -> None:
    with pytest.raises(ConfigurationError, match=r"clock must return seconds since the epoch, like time.time\(\)"):
        durastate.open(store_url, clock=reading)
    assert list(tmp_path.iterdir()) == []
    if store_url.startswith("postgresql"):
        assert _tables_in(store_url) == 0


def test_a_max_value_size_postgresql_cannot_take_is_refused_before_anything_is_created(store_url: str) -> None:
    """A value over ~1 GiB closes PostgreSQL's connection (its message limit): with such a ``max_value_size``
    the store took the write for a lost connection and raised ``StoreUnavailable`` ("retry later") after its
    busy timeout. Now the open is refused. SQLite refuses a value over its own limit at the write
    (``InvalidRequest``, "string or blob too big"), so it takes any ``max_value_size``."""
    limit = 1_000_000_000
    if not store_url.startswith("postgresql"):
        durastate.open(store_url, max_value_size=2 * limit).close()
        return
    with pytest.raises(
        ConfigurationError,
        match=rf"max_value_size={2 * limit} is more than postgresql .*{limit} bytes\); pass at most that, or None",
    ):
        durastate.open(store_url, max_value_size=2 * limit)
    assert _tables_in(store_url) == 0
    durastate.open(store_url, max_value_size=limit).close()


def test_max_value_size_none_is_as_large_as_the_engine_takes(store_url: str) -> None:
    """``None`` (what compat.vgi passes: the seed had no limit): PostgreSQL's 10**9 bytes; SQLite's none of
    the store's own (SQLite refuses a value over its limit at the write)."""
    with durastate.open(store_url, max_value_size=None) as store:
        expected = 1_000_000_000 if store_url.startswith("postgresql") else 2**63 - 1
        assert store.kv.max_value_size == expected
        assert store.documents.max_value_size == expected


# -- PostgreSQL: a pool the server can never fill --------------------------------------------


def test_min_connections_above_the_servers_limit_is_a_configuration_error_naming_it() -> None:
    import psycopg

    base = plugin._postgres_base_url()
    url, schema = postgres_server.create_schema(base)
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT current_setting('max_connections')::int").fetchone()
        assert row is not None
        too_many = row[0] + 1
        with pytest.raises(ConfigurationError, match=rf"min_connections={too_many} .* max_connections is {row[0]}"):
            # Was: StoreUnavailable after busy_timeout ("retry later"), every server slot taken meanwhile.
            durastate.open(url, min_connections=too_many, max_connections=too_many, busy_timeout=1)
        assert _tables_in(url) == 0
        with durastate.open(url, min_connections=2, max_connections=2) as store:  # a pool that fits opens
            store.kv.put(b"s", b"n", b"k", b"v")
    finally:
        postgres_server.drop_schema(base, schema)


def test_min_connections_above_the_roles_connection_limit_is_a_configuration_error_naming_it() -> None:
    from urllib.parse import urlsplit

    psycopg = pytest.importorskip("psycopg")

    base = plugin._postgres_base_url()
    url, schema = postgres_server.create_schema(base)
    role = "r_" + schema
    try:
        postgres_server._admin_execute(base, f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2")
    except psycopg.errors.InsufficientPrivilege:
        postgres_server.drop_schema(base, schema)
        pytest.skip("the test server's role may not create roles (CREATEROLE)")
    try:
        postgres_server._admin_execute(base, f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}")
        parts = urlsplit(url)
        as_role = parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}").geturl()
        with pytest.raises(ConfigurationError, match=r"min_connections=3 .* its role allows \(CONNECTION LIMIT 2\)"):
            # Was: StoreUnavailable after busy_timeout ("too many connections for role"), two slots taken meanwhile.
            durastate.open(as_role, min_connections=3, max_connections=3, busy_timeout=1)
        assert _tables_in(url) == 0
        with durastate.open(as_role, min_connections=2, max_connections=2) as store:  # a pool that fits opens
            store.kv.put(b"s", b"n", b"k", b"v")
    finally:
        postgres_server.drop_schema(base, schema)
        postgres_server._admin_execute(base, f"DROP ROLE IF EXISTS {role}")


def test_a_databases_connection_limit_bounds_min_connections_too() -> None:
    pytest.importorskip("psycopg")
    from durastate.engines.postgres_connect import unfillable_pool

    assert unfillable_pool("db", 3, 100, 3, -1, 3) is None
    assert unfillable_pool("db", 3, 100, 3, None, -1) is None
    refusal = unfillable_pool("db", 3, 100, 3, 5, 2)
    assert isinstance(refusal, ConfigurationError)
    assert "its database allows (CONNECTION LIMIT 2); open with min_connections at most 2" in str(refusal)
    assert "at most 4" in str(unfillable_pool("db", 5, 100, 3, 4, 6))  # the smallest limit is named


def test_the_pools_connect_warnings_are_not_printed_by_pythons_last_resort_handler() -> None:
    import subprocess
    import sys

    pytest.importorskip("psycopg_pool")
    # A process that configured no logging: psycopg_pool's "error connecting" warnings (one per failed background
    # connect, hundreds while a pool cannot fill) went to stderr; configured logging still receives them.
    script = (
        "import logging, durastate.engines.postgres\n"
        "logging.getLogger('psycopg.pool').warning('error connecting in pool')\n"
        "records = []\n"
        "class Keep(logging.Handler):\n"
        "    def emit(self, record): records.append(record)\n"
        "logging.getLogger().addHandler(Keep())\n"
        "logging.getLogger('psycopg.pool').warning('error connecting in pool')\n"
        "assert len(records) == 1\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(durastate.__file__).parents[1])},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
