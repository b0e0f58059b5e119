"""``durastate shards``: logical shards over two servers without Citus, and moving one (the documented procedure).

Two "servers": two SQLite directories, or two databases of the PostgreSQL
test server. The procedure is docs/outgrowing-one-machine.md's: stop the
shard's writers, ``durastate shards move MAP SHARD SERVER``, reopen the map.
The move runs in a subprocess, as a shell runs it; the other commands in this
process (``conftest.cli_here``: a real run's exit code and bytes).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

import durastate
from durastate.errors import ConfigurationError
from durastate.shard_map import ShardMap, open_map
from durastate.testing import plugin

from .conftest import as_text, cli_here, run_cli

SHARDS = 8


@pytest.fixture(params=["sqlite-dirs", "postgres-databases"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Three servers: the map starts on the first two; the third is where a shard moves."""
    if request.param == "sqlite-dirs":
        yield [f"sqlite:///{tmp_path / f'server{i}'}" for i in range(3)]
        return
    import psycopg

    base = plugin._postgres_base_url()
    names = [f"ds_srv_{uuid.uuid4().hex[:10]}" for _ in range(3)]
    with psycopg.connect(base, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE DATABASE {name}")
    try:
        yield [urlunsplit(urlsplit(base)._replace(path=f"/{name}")) for name in names]
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            for name in names:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _here(*args: str) -> subprocess.CompletedProcess[str]:
    return as_text(cli_here(None, *args))


def _cli(*args: str) -> str:
    done = _here(*args)
    assert done.returncode == 0, f"durastate {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_init_move_and_reopen(servers: list[str], tmp_path: Path) -> None:
    map_path = tmp_path / "shards.json"
    _cli("shards", "init", str(map_path), "--shards", str(SHARDS), "--server", servers[0], "--server", servers[1])
    the_map = ShardMap.load(map_path)
    assert sorted(the_map.shards) == [f"ds_shard_{i:04d}" for i in range(SHARDS)]
    assert {url.startswith(servers[0]) for url in the_map.shards.values()} == {True, False}  # both servers used
    scopes = [f"tenant-{i}" for i in range(80)]
    with open_map(map_path) as router:
        for scope in scopes:
            router.kv.put(scope.encode(), b"ns", b"k", scope.encode())
            router.queues.push(scope, [b"job"])
            router.events.append(scope, [{"type": "t", "payload": scope}])
            router.documents.write(scope, {"owner": scope})
        moving = router.names[router.shard_of(scopes[0])]
        on_it = [s for s in scopes if router.names[router.shard_of(s)] == moving]
    started = time.perf_counter()
    moved = run_cli(None, "shards", "move", str(map_path), moving, servers[2])
    elapsed = time.perf_counter() - started
    assert moved.returncode == 0, moved.stderr
    out = moved.stdout
    print(f"durastate shards move of {len(on_it)} tenants' rows: {elapsed:.2f} s ({out.strip().splitlines()[0]})")
    moved_map = ShardMap.load(map_path)
    assert moved_map.shards[moving].startswith(servers[2])
    assert {k: v for k, v in moved_map.shards.items() if k != moving} == {
        k: v for k, v in the_map.shards.items() if k != moving
    }
    with durastate.open(moved_map.shards[moving]) as target:  # the shard's rows, and only its rows, are there
        assert target.kv.scopes(limit=1000) == sorted(s.encode() for s in on_it)
    with open_map(map_path) as router:
        for scope in scopes:
            assert router.kv.get(scope.encode(), b"ns", b"k") == scope.encode()
            assert router.queues.pop(scope) == b"job"
            assert [e.payload for e in router.events.read(scope)] == [scope]
            assert router.documents.read(scope).data == {"owner": scope}  # type: ignore[union-attr]
    assert "already on" in _here("shards", "move", str(map_path), moving, servers[2]).stderr


def test_refusals(tmp_path: Path) -> None:
    server = f"sqlite:///{tmp_path / 'a'}"
    map_path = tmp_path / "m.json"
    _cli("shards", "init", str(map_path), "--shards", "2", "--server", server)
    again = _here("shards", "init", str(map_path), "--shards", "3", "--server", server)
    assert again.returncode != 0 and "written once" in again.stderr
    unknown = _here("shards", "move", str(map_path), "ds_shard_0009", server)
    assert unknown.returncode != 0 and "no logical shard" in unknown.stderr
    bad = _here("shards", "move", str(map_path), "ds_shard_0001", "redis://x")
    assert bad.returncode != 0 and "postgresql://... or sqlite:///" in bad.stderr
    (tmp_path / "broken.json").write_text('{"format": "durastate-shard-map", "version": 1, "prefix": "ds_"}')
    with pytest.raises(ConfigurationError, match="no shards"):
        ShardMap.load(tmp_path / "broken.json")
    with pytest.raises(ConfigurationError, match="each once"):
        ShardMap("ds_", {"ds_shard_0000": server, "ds_shard_0005": server})
    with pytest.raises(ConfigurationError, match="no shard map"):
        open_map(tmp_path / "missing.json")


def test_move_refuses_a_target_that_is_not_empty(tmp_path: Path) -> None:
    servers = [f"sqlite:///{tmp_path / name}" for name in ("a", "b")]
    map_path = tmp_path / "m.json"
    _cli("shards", "init", str(map_path), "--shards", "2", "--server", servers[0])
    with open_map(map_path) as router:
        router.kv.put(b"x", b"ns", b"k", b"v")
    squatter = f"{servers[1]}/ds_shard_0000.db"
    Path(squatter[len("sqlite://") :]).parent.mkdir(parents=True)
    with durastate.open(squatter) as other:
        other.kv.put(b"other", b"ns", b"k", b"v")
    refused = _here("shards", "move", str(map_path), "ds_shard_0000", servers[1])
    assert refused.returncode != 0 and "not empty" in refused.stderr
    assert ShardMap.load(map_path).shards["ds_shard_0000"].startswith(servers[0])  # the map is unchanged


def test_init_with_a_server_that_cannot_be_reached_is_a_clean_error_that_creates_nothing(tmp_path: Path) -> None:
    """A typo in a database name: StoreUnavailable (exit 1, password hidden), not psycopg's traceback, and the
    reachable server gets no schema (every server is connected to before anything is made)."""
    import psycopg

    base = plugin._postgres_base_url()
    parts = urlsplit(base)
    missing = urlunsplit(
        parts._replace(
            netloc=f"{parts.username or 'postgres'}:hunter2@{parts.hostname}:{parts.port or 5432}",
            path=f"/ds_nodb_{uuid.uuid4().hex[:10]}",
        )
    )
    prefix = f"ds{uuid.uuid4().hex[:6]}_"
    map_path = tmp_path / "m.json"
    done = _here(
        "shards", "init", str(map_path), "--shards", "2", "--prefix", prefix, "--server", base, "--server", missing
    )
    assert done.returncode == 1, done.stderr
    assert "StoreUnavailable" in done.stderr and "does not exist" in done.stderr
    assert "hunter2" not in done.stderr
    assert not map_path.exists()
    with psycopg.connect(base) as conn:
        made = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "%",)).fetchall()
    assert made == []


def test_missing_map_and_unknown_shard_are_not_found_and_a_shard_can_be_named_by_number(tmp_path: Path) -> None:
    servers = [f"sqlite:///{tmp_path / name}" for name in ("a", "b")]
    map_path = tmp_path / "m.json"
    for command in (
        ("show", str(tmp_path / "missing.json")),
        ("move", str(tmp_path / "missing.json"), "0", servers[1]),
    ):
        missing = _here("shards", *command)
        assert missing.returncode == 3 and "no shard map at" in missing.stderr
    _cli("shards", "init", str(map_path), "--shards", "2", "--server", servers[0])
    unknown = _here("shards", "move", str(map_path), "7", servers[1])
    assert unknown.returncode == 3
    assert "ds_shard_0000, ds_shard_0001" in unknown.stderr
    _cli("shards", "move", str(map_path), "1", servers[1])
    assert ShardMap.load(map_path).shards["ds_shard_0001"].startswith(servers[1])
    assert "--shards N" in _here("shards", "init", "--help").stdout
