"""``durastate shards``: logical shards over several servers without Citus (``durastate.shard_map``).

``init`` writes a shard map spreading N logical shards over servers (a
schema per shard on PostgreSQL, a file per shard in a SQLite directory),
``show`` prints it, ``move`` moves one logical shard to another server:
export it, import it into the (empty) target, check the row counts, switch
the map. The source is left as it was (drop it once every client runs on
the new map). Stop the shard's writers first: the router reads the map
when it opens, so its clients reopen afterwards.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import click
import orjson

import durastate
from durastate.engines.redact import redact_url
from durastate.errors import StoreUnavailable
from durastate.shard_map import ShardMap, shard_names

from . import dump
from ._common import NotFound, errors_as_exit_1, json_option

__all__ = ["shards"]


def shard_url(server: str, shard: str) -> str:
    """Where logical shard ``shard`` lives on ``server``: a schema (PostgreSQL) or a file in a directory (SQLite)."""
    if server.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(server)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
        query.append(("options", f"-csearch_path={shard}"))
        return urlunsplit(parts._replace(query=urlencode(query)))
    if server.startswith("sqlite:///"):
        return f"{server.rstrip('/')}/{shard}.db"
    raise click.UsageError(f"a server is postgresql://... or sqlite:///directory, got {server!r}")


def _server_of(url: str) -> str:
    """A PostgreSQL shard URL without its ``options`` (the shard's search_path): the server's own URL."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "options"])))


def _connect(server: str) -> Any:
    """An autocommit connection to a PostgreSQL server; ``StoreUnavailable`` (password hidden) when there is none
    (no such database, refused, bad credentials)."""
    import psycopg

    try:
        return psycopg.connect(server, autocommit=True)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise StoreUnavailable(f"cannot connect to {redact_url(server)}: {reason}") from None


def check_reachable(servers: Iterable[str]) -> None:
    """Connect to each PostgreSQL server once before anything is created, so a server that is not there (a
    typo in a database name) refuses the whole command with nothing made on the others."""
    for server in dict.fromkeys(servers):
        if server.startswith(("postgresql://", "postgres://")):
            _connect(server).close()


def prepare(url: str) -> None:
    """Make the place ``url`` names exist (its schema, or its file's directory); the store itself is opened later."""
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite://") :]).parent.mkdir(parents=True, exist_ok=True)
        return
    schema = dict(parse_qsl(urlsplit(url).query)).get("options", "").removeprefix("-csearch_path=")
    with _connect(_server_of(url)) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


def load_map(map_path: str) -> ShardMap:
    """The shard map at ``map_path``; a map that is not there is "not found" (exit 3), as a missing store is."""
    if not Path(map_path).exists():
        raise NotFound(f"no shard map at {map_path} (durastate shards init writes one)")
    return ShardMap.load(map_path)


def shard_named(the_map: ShardMap, shard: str, map_path: str) -> str:
    """The logical shard ``shard`` names: its name, or its number (``3`` for ``ds_shard_0003``); "not found" (exit
    3) listing the map's names otherwise."""
    if shard not in the_map.shards and shard.isdigit():
        numbered = f"{the_map.prefix}shard_{int(shard):04d}"
        if numbered in the_map.shards:
            return numbered
    if shard not in the_map.shards:
        names = sorted(the_map.shards)
        listed = ", ".join(names) if len(names) <= 16 else f"{', '.join(names[:16])}, ... ({len(names)} in all)"
        raise NotFound(f"no logical shard {shard!r} in {map_path}; its shards are {listed} (or their numbers)")
    return shard


@click.group()
def shards() -> None:
    """Logical shards over several servers, without Citus (docs/operations/outgrowing-one-machine.md)."""


@shards.command()
@click.argument("map_path", metavar="MAP")
@click.option(
    "--shards", "count", type=click.IntRange(1, 4096), required=True, metavar="N", help="Logical shards (fixed)."
)
@click.option("--server", "servers", multiple=True, required=True, help="postgresql://... or sqlite:///dir (repeat).")
@click.option("--prefix", default="ds_", show_default=True, help="Table prefix; shards are <prefix>shard_NNNN.")
@json_option
@errors_as_exit_1
def init(map_path: str, count: int, servers: tuple[str, ...], prefix: str, as_json: bool) -> None:
    """Write a new shard MAP: --shards N logical shards, round-robin over the --server URLs, each created empty.

    Every PostgreSQL server is connected to before anything is created: one
    that cannot be reached refuses the command with nothing made.
    """
    if Path(map_path).exists():
        raise click.ClickException(f"{map_path} exists: a shard map is written once (its count is fixed)")
    names = shard_names(prefix, count)
    the_map = ShardMap(prefix, {name: shard_url(servers[i % len(servers)], name) for i, name in enumerate(names)})
    check_reachable(servers)
    for url in the_map.shards.values():
        prepare(url)
        durastate.open(url, prefix=prefix).close()
    the_map.save(map_path)
    if as_json:
        click.echo(orjson.dumps({"map": map_path, "shards": count, "servers": len(servers)}).decode())
    else:
        click.echo(f"{map_path}: {count} logical shards over {len(servers)} servers")


@shards.command()
@click.argument("map_path", metavar="MAP")
@json_option
@errors_as_exit_1
def show(map_path: str, as_json: bool) -> None:
    """Print where each logical shard of MAP lives."""
    shown = {name: redact_url(url) for name, url in sorted(load_map(map_path).shards.items())}
    if as_json:
        click.echo(orjson.dumps({"shards": shown}).decode())
        return
    for name, url in shown.items():
        click.echo(f"{name}  {url}")


@shards.command()
@click.argument("map_path", metavar="MAP")
@click.argument("shard")
@click.argument("server")
@json_option
@errors_as_exit_1
def move(map_path: str, shard: str, server: str, as_json: bool) -> None:
    """Move logical SHARD of MAP to SERVER (export, import, check, switch the map). Stop its writers first.

    SHARD is a name `durastate shards show MAP` prints (ds_shard_0003) or its number (3).
    """
    the_map = load_map(map_path)
    shard = shard_named(the_map, shard, map_path)
    source, target = the_map.shards[shard], shard_url(server, shard)
    if source == target:
        raise click.ClickException(f"{shard} is already on {server}")
    started = time.perf_counter()
    prepare(target)
    with tempfile.TemporaryFile() as spool:
        with durastate.open(source, prefix=the_map.prefix) as old:
            exported = dump.export_store(old, spool)
        spool.seek(0)
        with durastate.open(target, prefix=the_map.prefix) as new:
            if not dump.is_empty(new):
                raise click.ClickException(f"{shard} on {server} is not empty: refusing to import over it")
            imported = dump.import_store(new, spool)
    if imported != exported:
        raise click.ClickException(f"row counts differ after the import ({exported} != {imported}); map unchanged")
    the_map.moved(shard, target).save(map_path)
    elapsed = time.perf_counter() - started
    if as_json:
        body = {"shard": shard, "rows": sum(exported.values()), "seconds": elapsed, "to": redact_url(target)}
        click.echo(orjson.dumps(body).decode())
        return
    click.echo(f"moved {shard}: {sum(exported.values()):,} rows in {elapsed:.2f} s; the map now points at {server}")
    click.echo(f"the old copy is untouched at {redact_url(source)}: drop it once clients reopened")
