"""Drop-in backends for the frameworks whose storage layers durastate replaces.

Each module reproduces one framework's storage contract exactly (names,
signatures, return shapes, error kinds, edge cases) on top of durastate's
native facets, so it runs on any engine URL (SQLite file, in-memory,
PostgreSQL) and is proven by the conformance suite in
``durastate.testing.conformance``:

* ``durastate.compat.vgi``: vgi-python's ``FunctionStorageSqlite``,
  ``BoundStorage`` and friends.

Import the module you need (``from durastate.compat import vgi``); this
package imports nothing on its own, so an unused adapter costs nothing.
"""

__all__: list[str] = []
