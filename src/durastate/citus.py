"""Scale out on Citus: one logical shard is one distributed schema (``durastate.citus.open``).

``durastate.citus.open(url, shards=64)`` opens a ``ShardedStore`` on a
Citus coordinator: ``shards`` logical shards, each a schema
(``<prefix>shard_0000`` ...) holding every facet's tables, created as
Citus *distributed schemas* by the first opener. Citus places each schema
on one worker and routes every statement by its schema; moving a schema to
another worker (``citus_move_shard_placement``, or the rebalancer after
``citus_add_node``) needs no client change, and runs online.

Keys are routed as by ``durastate.sharding`` (rendezvous hashing of the
shard key over the logical shard *names*): a scope, queue, session or
document key always lives in the same logical shard, whichever worker holds
that shard today.

The shard count is fixed when the store is created and recorded on the
coordinator (table ``<prefix>logical_shards`` in the URL's schema): a later
open with another count is refused with ``ConfigurationError`` (keys would
move between shards); ``shards=None`` opens with the recorded count. Pick
a count well above the number of workers you may ever have (64-256): a
logical shard is the unit Citus moves, so the count bounds how finely
the data can be spread.

Transactions: every logical shard of one ``open`` shares the coordinator
engine's connections and per-thread transaction (``SchemaEngine``), so
``with store.transaction(key):`` may write any number of shards and commits
them together (Citus uses two-phase commit when they are on several
workers; ``max_prepared_transactions`` must be above 0 on every node).
``documents.lock`` may name keys of several shards. The engine runs in the
Citus statement mode (``citus://``): no triggers, notifications sent after
the commit on the coordinator, so waiters (``queues.pop(wait=)``,
``events.stream``) must connect to the coordinator, as every client does.

Costs (bench/citus_shards.py): a logical shard costs the client no
connection (one pool for all of them) and a set of compiled statements;
each statement names its schema, so a connection prepares each statement
once per shard it serves.

Without Citus the same URL works on plain PostgreSQL (the shards are plain
schemas of one server: the same logical layout, ready for Citus later), and
``durastate.sharding`` with ``durastate shards`` spreads the same logical
shards over several servers (docs/operations/outgrowing-one-machine.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from ._validate import as_int64, fail
from .engines.base import validate_prefix
from .engines.postgres import PostgresEngine
from .engines.postgres_citus import SchemaEngine, citus_url, logical_shards
from .shard_map import shard_names
from .sharding import ShardedStore
from .store import OpenOptions, Store, _open_parts

__all__ = ["MAX_SHARDS", "CitusStore", "open", "shard_names"]

MAX_SHARDS = 4096


def _as_shard_count(shards: Any) -> int | None:
    if shards is None:
        return None
    count = as_int64("shards", shards)
    if not 1 <= count <= MAX_SHARDS:
        fail(f"shards must be between 1 and {MAX_SHARDS}, got {count}")
    return count


class CitusStore(ShardedStore):
    """A ``ShardedStore`` whose shards are schemas behind one coordinator engine (see the module docstring)."""

    def __init__(
        self,
        coordinator: PostgresEngine,
        stores: dict[str, Store],
        *,
        document_shard_key: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(stores, document_shard_key=document_shard_key, atomic=True)
        self.coordinator = coordinator

    @property
    def url(self) -> str:
        return self.coordinator.url

    def close(self) -> None:
        """Close the coordinator engine (every shard's connections)."""
        super().close()
        self.coordinator.close()


def open(
    url: str,
    *,
    shards: int | None = None,
    document_shard_key: Callable[[str], str] | None = None,
    **options: Unpack[OpenOptions],
) -> CitusStore:
    """Open (creating on first use) ``shards`` logical shards on the Citus coordinator at ``url``.

    ``url``: ``postgresql://`` or ``citus://`` (the same server either
    way; the engine runs in the Citus statement mode). ``shards``: the
    logical shard count, 1 to ``MAX_SHARDS``, required the first time and
    checked against the recorded count afterwards (``None``: the recorded
    one). ``document_shard_key`` as for ``ShardedStore``. The other
    options are ``durastate.open``'s (``prefix`` names the shards' schemas
    and their tables; the pool sizes are for all shards together).
    """
    count = _as_shard_count(shards)
    prefix = validate_prefix(options.get("prefix", "ds_"))
    coordinator, finish = _open_parts(citus_url(url), **options)
    try:
        assert isinstance(coordinator, PostgresEngine)
        names = logical_shards(coordinator, lambda n: shard_names(prefix, n), count)
        stores = {name: finish(SchemaEngine(coordinator, name)) for name in names}
        return CitusStore(coordinator, stores, document_shard_key=document_shard_key)
    except BaseException:
        coordinator.close()
        raise
