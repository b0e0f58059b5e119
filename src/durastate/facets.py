"""The facet registry: every facet a store can have, in one list.

``FACETS`` names each facet (``store.<name>``, package ``durastate.<name>``),
its class, its schema, the tables that schema creates and how a store makes
it. Everything that handles "every facet" iterates this list instead of
naming them: ``Store`` and ``durastate.open(facets=...)``, ``AsyncStore``
and its generated facades, ``ShardedStore``'s routers, the CLI's table
groups, the boundary guards and the completeness tests. Adding a facet is a
package ``durastate/<name>/`` and one ``Facet(...)`` line here; a test fails
for any package under ``durastate`` that is neither a facet here nor one of
the known non-facet packages, so a new facet cannot escape the guards.

The order is the store's: migrations run in it (after the engine's own
``CORE_SCHEMA``), and listings of facets follow it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._validate import misconfigured
from .documents import SCHEMA as DOCUMENTS_SCHEMA
from .documents import Documents
from .engines.base import CORE_SCHEMA, Schema
from .events import SCHEMA as EVENTS_SCHEMA
from .events import Events
from .kv import KV
from .kv import SCHEMA as KV_SCHEMA
from .presence import SCHEMA as PRESENCE_SCHEMA
from .presence import Presence
from .queues import SCHEMA as QUEUES_SCHEMA
from .queues import Queues
from .records import SCHEMA as RECORDS_SCHEMA
from .records import Records
from .retention import Retention

if TYPE_CHECKING:
    from .engines.base import Engine

__all__ = ["FACETS", "FACET_NAMES", "Facet", "FacetSettings", "chosen", "schemas"]


@dataclass(frozen=True)
class FacetSettings:
    """What a store passes every facet it makes (from ``open()``'s options)."""

    max_value_size: int
    max_key_size: int
    retention: Retention


@dataclass(frozen=True)
class Facet:
    """One facet: ``store.<name>``, an instance of ``cls`` made by ``make``, on the tables of ``schema``.

    ``tables``: the table names (without the prefix) ``schema`` creates; a
    test checks them against what migrating the facet alone creates.
    """

    name: str
    cls: type
    schema: Schema
    tables: tuple[str, ...]
    make: Callable[[Engine, FacetSettings], Any]


FACETS: tuple[Facet, ...] = (
    Facet(
        "kv",
        KV,
        KV_SCHEMA,
        ("kv", "kv_log", "kv_counter"),
        lambda engine, s: KV(engine, max_value_size=s.max_value_size, max_key_size=s.max_key_size),
    ),
    Facet(
        "queues",
        Queues,
        QUEUES_SCHEMA,
        ("queue", "queue_dead"),
        lambda engine, s: Queues(engine, max_value_size=s.max_value_size),
    ),
    Facet(
        "documents",
        Documents,
        DOCUMENTS_SCHEMA,
        ("documents", "document_revision"),
        lambda engine, s: Documents(
            engine,
            max_value_size=s.max_value_size,
            max_backups=s.retention.max_backups,
            keep_revisions=s.retention.document_history,
        ),
    ),
    Facet(
        "records",
        Records,
        RECORDS_SCHEMA,
        ("rec_id", "rec_conversation", "rec_entry", "rec_task", "rec_submission", "rec_document", "rec_revision"),
        lambda engine, s: Records(engine, max_value_size=s.max_value_size),
    ),
    Facet(
        "events",
        Events,
        EVENTS_SCHEMA,
        ("event_session", "event", "event_snapshot"),
        lambda engine, s: Events(engine, max_value_size=s.max_value_size),
    ),
    Facet(
        "presence",
        Presence,
        PRESENCE_SCHEMA,
        ("presence",),
        lambda engine, s: Presence(engine, max_value_size=s.max_value_size),
    ),
)
FACET_NAMES: tuple[str, ...] = tuple(facet.name for facet in FACETS)
_BY_NAME = {facet.name: facet for facet in FACETS}


def chosen(names: Iterable[str] | None) -> tuple[Facet, ...]:
    """The facets ``names`` picks, in registry order (``None``: all of them).

    Refuses with ``ConfigurationError`` a name no facet has, a bare string
    (``facets="kv"`` is a common slip for ``facets=["kv"]``) and an empty
    choice (a store with no facet could do nothing).
    """
    if names is None:
        return FACETS
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        misconfigured(f"facets must be a list of facet names such as ['kv', 'queues'], got {names!r}")
    wanted = list(names)
    unknown = [name for name in wanted if not isinstance(name, str) or name not in _BY_NAME]
    if unknown:
        misconfigured(f"facets: no facet named {', '.join(map(repr, unknown))}; the facets are {list(FACET_NAMES)}")
    if not wanted:
        misconfigured(f"facets must name at least one facet of {list(FACET_NAMES)}")
    return tuple(facet for facet in FACETS if facet.name in wanted)


def schemas(facets: Iterable[Facet] = FACETS) -> tuple[Schema, ...]:
    """The schemas a store of ``facets`` migrates: the engine's own first, then each facet's."""
    return (CORE_SCHEMA, *(facet.schema for facet in facets))
