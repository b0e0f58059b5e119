"""Put a store's schema back (or forward) a version, through its own engine.

For the migration tests: they rebuild what an older (or newer) durastate
left behind with the engine's declared statements, so they run on every
engine, a third-party one included, and never reach around it with a
driver of their own.
"""

from __future__ import annotations

from collections.abc import Callable

import durastate
from durastate.engines.base import DDL, WRITE, Engine, Schema

SHIFT_VERSION = WRITE("UPDATE {p}schema SET version = version + ? WHERE facet = ?")
SET_VERSION = WRITE("UPDATE {p}schema SET version = ? WHERE facet = ?")


def shift_version(engine: Engine, facet: str, delta: int) -> None:
    """Move ``facet``'s recorded schema version by ``delta`` (as if another durastate wrote it)."""
    changed = engine.execute(engine.sql(SHIFT_VERSION), (delta, facet))
    assert changed == 1, f"no schema row for facet {facet!r}"


def rewind(engine: Engine, schema: Schema, version: int, *undo: str) -> None:
    """Leave ``schema``'s facet as version ``version`` left it: run the DDL ``undo``, record the version.

    ``undo`` are DDL templates (``{p}`` and tokens) that take back what the
    later migrations did. The next ``engine.migrate([schema])`` (or open)
    runs those migrations again.
    """
    for template in undo:
        engine.execute(engine.sql(DDL(template)))
    changed = engine.execute(engine.sql(SET_VERSION), (version, schema.facet))
    assert changed == 1, f"no schema row for facet {schema.facet!r}"


def migrate_again(store: durastate.Store, schema: Schema, reopen: Callable[[], durastate.Store]) -> durastate.Store:
    """The store with ``schema``'s missing migrations run: by opening it anew, as the next process would.

    An in-memory store lives only in its engine, so there the same engine
    migrates again and the same store is returned.
    """
    if store.engine.capabilities.in_memory:
        store.engine.migrate([schema])
        return store
    store.close()
    return reopen()
