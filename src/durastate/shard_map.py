"""Logical shards over several servers, without Citus: a shard map (``durastate.shard_map``).

The same logical shards as ``durastate.citus`` (``<prefix>shard_0000`` ...,
the same rendezvous names, so a key belongs to the same logical shard in
both), each a store of its own: a schema on one of several PostgreSQL
servers, or a SQLite file. A *shard map* (a JSON file) says where each
logical shard lives::

    {"format": "durastate-shard-map", "version": 1, "prefix": "ds_",
     "shards": {"ds_shard_0000": "postgresql://a/app?options=-csearch_path%3Dds_shard_0000", ...}}

``open_map(path)`` opens a ``ShardedStore`` over it (one store, one pool,
per logical shard; transactions never span shards). The shard count is the
map's, fixed when ``durastate shards init`` wrote it. Moving one logical
shard to another server is ``durastate shards move MAP SHARD URL`` (export
the shard, import it there, switch the map: see
docs/operations/outgrowing-one-machine.md): the shard's writers must be stopped
meanwhile and reopen the map afterwards, since a router reads its map when
it opens.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

import orjson

from ._validate import fail
from .engines.base import validate_prefix
from .errors import ConfigurationError
from .sharding import ShardedStore
from .store import OpenOptions, Store
from .store import open as open_store

__all__ = ["FORMAT", "ShardMap", "open_map", "shard_names"]

FORMAT = "durastate-shard-map"
VERSION = 1


def shard_names(prefix: str, count: int) -> list[str]:
    """The names of ``count`` logical shards: ``<prefix>shard_0000`` ... (as ``durastate.citus``)."""
    return [f"{prefix}shard_{i:04d}" for i in range(count)]


@dataclass(frozen=True)
class ShardMap:
    """Where each logical shard lives: ``shards`` maps its name to a store URL (see the module docstring)."""

    prefix: str
    shards: dict[str, str]

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        if not isinstance(self.shards, dict) or not self.shards:
            raise ConfigurationError("a shard map needs at least one shard")
        expected = shard_names(self.prefix, len(self.shards))
        if sorted(self.shards) != expected:
            raise ConfigurationError(
                f"a shard map's shards are {expected[0]} .. {expected[-1]}, each once;"
                f" got {sorted(self.shards)[:4]} ..."
            )
        for name, url in self.shards.items():
            if not isinstance(url, str) or not url:
                raise ConfigurationError(f"shard {name}: its URL must be a non-empty string, got {url!r}")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ShardMap:
        """Read a map file; ``ConfigurationError`` naming what is wrong with it."""
        try:
            data = orjson.loads(Path(path).read_bytes())
        except FileNotFoundError:
            raise ConfigurationError(f"no shard map at {os.fspath(path)!r}") from None
        except orjson.JSONDecodeError as exc:
            raise ConfigurationError(f"shard map {os.fspath(path)!r} is not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ConfigurationError(f"{os.fspath(path)!r} is not a version-{VERSION} {FORMAT} file")
        shards = data.get("shards")
        if not isinstance(shards, dict):
            raise ConfigurationError(f"shard map {os.fspath(path)!r} has no shards object")
        return cls(prefix=data.get("prefix", ""), shards=shards)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the map atomically (a reader sees the old map or the new one, never half of one)."""
        target = Path(path)
        body = {"format": FORMAT, "version": VERSION, "prefix": self.prefix, "shards": self.shards}
        fd, temp = tempfile.mkstemp(dir=target.parent or ".", prefix=target.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def moved(self, shard: str, url: str) -> ShardMap:
        """This map with ``shard`` at ``url``."""
        if shard not in self.shards:
            fail(f"no logical shard {shard!r} in this map ({len(self.shards)} shards: {self.prefix}shard_0000 ..)")
        return ShardMap(self.prefix, {**self.shards, shard: url})


def open_map(
    shard_map: ShardMap | str | os.PathLike[str],
    *,
    document_shard_key: Callable[[str], str] | None = None,
    opener: Callable[..., Store] = open_store,
    **options: Unpack[OpenOptions],
) -> ShardedStore:
    """A ``ShardedStore`` over the map's logical shards (a map or the path of its file).

    ``options`` are ``durastate.open``'s, for every shard (the pool sizes
    are per shard: one pool each). ``opener`` opens one shard's URL.
    """
    the_map = shard_map if isinstance(shard_map, ShardMap) else ShardMap.load(shard_map)
    stores: dict[str, Store] = {}
    try:
        for name, url in sorted(the_map.shards.items()):
            stores[name] = opener(url, **options)
    except BaseException:
        for store in stores.values():
            store.close()
        raise
    return ShardedStore(stores, document_shard_key=document_shard_key)
