"""``store.kv``: scoped, namespaced bytes key/value, logs and counters.

The data model is vgi's unified state: every row is addressed by
``(scope, ns, key)``, all three ``bytes``. ``scope`` is the unit of teardown
(``clear(scope)`` wipes state, logs and counters of one scope); ``ns`` is a
namespace the caller picks inside a scope; keys order by unsigned bytes
(memcmp), which both engines' BLOB/BYTEA comparison gives for free.

Three families share that address space but not their tables:

* values: ``get``/``get_many``/``put``/``put_many``, ordered ``scan`` over a
  half-open ``[start, end)`` range, atomic ``drain``, ``delete``, and the
  one-statement ``take`` (read and delete one key), ``take_first`` /
  ``take_last`` (read and delete the smallest / greatest live key of a
  namespace: FIFO and LIFO pops) and ``put_if_absent``
  (create-only), and ``require_absent`` (fail the open transaction unless a
  key is absent; on PostgreSQL sent with its next round trip, as ``put``
  inside a transaction is);
* logs: ``append`` returns an ordinal that is unique and increasing across
  the whole store (never reused, even after ``clear``); ``log`` reads a
  key's entries after a cursor;
* counters: ``incr`` is an atomic add-and-return in one statement; values
  are signed 64-bit and an add that would overflow is refused, not wrapped.

Expiry: ``put(..., ttl=seconds)`` makes a value invisible to every read once
the store's clock passes its deadline. Expired rows are removed in small
batches by later writes (one bounded ``DELETE`` every ``PRUNE_EVERY``
writes of this process), so no background thread is needed and no write
ever pays for a large sweep. ``prune_expired()`` runs a sweep on demand.

Scans and log reads are streamed: rows are fetched ``PAGE_SIZE`` at a time
by key (or ordinal) continuation, so a huge namespace never sits in memory.
A streamed read is not a snapshot: rows written behind the cursor while
iterating are not seen, rows ahead of it may be. Each key is yielded at
most once and in order.

Listing (read-only, for inspectors): ``scopes()`` and ``namespaces(scope)``
name what exists across values, logs and counters (``durastate._listing``).

The package's modules, along the facet's seams: ``statements`` (schema and
SQL), ``facet`` (the ``KV`` class) and ``scoped`` (``ScopedKV``, the view
with one scope bound). Every name is re-exported here, so ``from
durastate.kv import X`` is the import to use.
"""

from __future__ import annotations

# Re-exported names beyond __all__ (statements, limits) stay module
# attributes (``durastate.kv.GET``) for the plan checks and the conformance suite.
from .._validate import PAGE_SIZE as PAGE_SIZE
from .facet import KV as KV
from .facet import PRUNE_EVERY as PRUNE_EVERY
from .scoped import ScopedKV as ScopedKV
from .statements import APPEND as APPEND
from .statements import CLEAR_COUNTERS as CLEAR_COUNTERS
from .statements import CLEAR_LOGS as CLEAR_LOGS
from .statements import CLEAR_VALUES as CLEAR_VALUES
from .statements import COUNTER_ADD as COUNTER_ADD
from .statements import COUNTER_DELETE as COUNTER_DELETE
from .statements import COUNTER_GET as COUNTER_GET
from .statements import COUNTER_PAGE as COUNTER_PAGE
from .statements import COUNTER_SET as COUNTER_SET
from .statements import DELETE_ALL as DELETE_ALL
from .statements import DRAIN as DRAIN
from .statements import GET as GET
from .statements import KEY_CHUNK as KEY_CHUNK
from .statements import LISTED_TABLES as LISTED_TABLES
from .statements import LOG_DELETE_THROUGH as LOG_DELETE_THROUGH
from .statements import LOG_NTH_NEWEST as LOG_NTH_NEWEST
from .statements import LOG_OLDEST as LOG_OLDEST
from .statements import LOG_PAGE as LOG_PAGE
from .statements import LOG_TRIM_KEY as LOG_TRIM_KEY
from .statements import PRUNE as PRUNE
from .statements import PRUNE_DUE as PRUNE_DUE
from .statements import PUT as PUT
from .statements import PUT_IF_ABSENT as PUT_IF_ABSENT
from .statements import PUT_PERSISTENT as PUT_PERSISTENT
from .statements import SCHEMA as SCHEMA
from .statements import TAKE as TAKE
from .statements import TAKE_FIRST as TAKE_FIRST
from .statements import TAKE_LAST as TAKE_LAST
from .statements import delete_keys_sql as delete_keys_sql
from .statements import delete_range_sql as delete_range_sql
from .statements import get_many_sql as get_many_sql
from .statements import scan_sql as scan_sql
from .upkeep import PRUNE_BATCH as PRUNE_BATCH

__all__ = ["KV", "ScopedKV", "SCHEMA"]
