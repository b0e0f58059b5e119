"""vgi's function storage on durastate: an exact drop-in for ``FunctionStorageSqlite``.

vgi (vgi-python, ``vgi/function_storage.py``) keeps the state of distributed
SQL-function execution in one SQLite file per machine. This module gives the
same classes, methods, signatures, return shapes and argument errors, backed
by durastate's native facets (``store.kv`` for state, logs and counters,
``store.queues`` for the work queue), so the same code runs on an SQLite
file, in memory, or on PostgreSQL::

    from durastate.compat.vgi import BoundStorage, FunctionStorage

    storage = FunctionStorage("postgresql://db.internal/vgi")   # or a path, or None
    bound = BoundStorage(storage, execution_id)
    bound.state_put(b"agg", BoundStorage.pack_int_key(7), b"...")
    bound.queue_push([b"work-1", b"work-2"])

What is here (the seed's names):

* ``FunctionStorage(db_path=None)`` (alias ``FunctionStorageSqlite``): every
  method of the seed's ``FunctionStorageSqlite``. ``db_path`` is a file path,
  a durastate URL (``sqlite:///abs.db``, ``sqlite:rel.db``, ``memory:``,
  ``postgresql://...``) or ``":memory:"``; ``None`` is the seed's default,
  ``platformdirs.user_state_dir("vgi")/vgi_storage.db`` (folder created).
  The ``db_path`` attribute holds what was given (the resolved default for
  ``None``). Every method takes the seed's keyword-only ``shard_key=""`` and
  ignores it, as the seed does.
* ``FrameworkNS``, the reserved ``b"_vgi/"`` namespace prefix (checked at
  every ``BoundStorage.state_*``/``counter_*`` entry point: ``ValueError``
  for plain bytes carrying it, ``TypeError`` for a non-bytes namespace).
  With vgi-python installed, ``FrameworkNS`` is vgi's own enum (this module's
  is a stand-in with the same members), so vgi's ``BoundStorage`` and this
  one accept each other's members wherever the seed accepts its own;
  ``attach_catalog_bytes``, shard-key derivation (``"att-"`` + the hex of the
  first 16 bytes of the attach plaintext; a backend whose
  ``requires_shard_key`` is true refuses to be bound without one).
* ``BoundStorage`` and ``TransactionBoundStorage`` (namespace ``b"txn"``),
  delegating to any backend of the ``FunctionStorageBackend`` shape.
* ``ShardedStorage(db_path=None)`` (alias ``ShardedSqliteStorage``): the
  seed's debug backend that isolates shards by prefixing the scope /
  execution id with ``shard_key + b"\\x1f"`` in one inner store (default
  ``":memory:"``, as in the seed). All routing goes through
  ``ShardedStorage._route``, the one place a later change can send shards to
  separate stores (``durastate.sharding``).
* The Arrow helpers (``BoundStorage.serialize_record_batch`` and friends)
  import pyarrow only when called; without it they raise ``ImportError``
  saying ``pip install 'durastate[arrow]'``.

Left out on purpose: the seed's ``_profiled`` decorator (vgi-internal
profiling of ``BoundStorage`` calls into vgi's per-shard profiler) and
``_scan_worker_stream_id`` (reads vgi_rpc's per-stream context variable);
both belong to the vgi framework, not to its storage contract.

Decisions where the seed is buggy or silent (a caller of the seed that
relied on the first column gets the second; none of these can silently
change a correct caller's results):

* Non-bytes scope ids, execution ids, namespaces, keys, values and queue
  items raise ``TypeError``. The seed handed them to sqlite3, which stored a
  ``str`` as TEXT (a separate keyspace that never equals the same bytes and
  sorts apart from them), an ``int`` as INTEGER, and ``None`` as a NOT NULL
  violation (``sqlite3.IntegrityError``) after part of the batch had been
  written into a still-open transaction. ``bytearray`` and ``memoryview``
  are accepted as bytes, as sqlite3 accepted them. Collections of keys or
  items may be any iterable except a ``str``/bytes-like object (which the
  seed iterated character by character or int by int).
* Integer arguments (``delta``, ``value``, ``limit``, ``after_id``) take
  anything ``operator.index`` takes (``int``, ``bool``, numpy integers);
  ``float`` and ``str`` raise ``TypeError``. The seed's ``int(x)``
  truncated ``1.9`` to 1 and parsed ``"5"``.
* A negative ``limit`` raises ``ValueError`` (pass ``None`` for no limit).
  The seed bound it to SQLite's ``LIMIT``, where any negative number means
  "unbounded": a computed limit that went negative silently returned
  everything.
* Counters are signed 64-bit. A ``delta``/``value`` outside that range raises
  an error that is both ``ValueError`` (``durastate.InvalidRequest``) and
  ``OverflowError`` (what sqlite3 raised). A ``state_counter_add`` whose sum
  would overflow raises ``ValueError`` and leaves the counter unchanged; the
  seed's SQLite silently turned the sum into a REAL and returned a rounded
  number.
* ``after_id`` below ``-1`` reads from the start, like ``-1``; above the
  int64 range nothing can follow it, so the result is ``[]`` (the seed raised
  ``OverflowError``).
* ``state_drain`` returns its pairs sorted by key (ascending unsigned bytes,
  on every engine), as vgi's ``FunctionStorage`` protocol documents. The
  seed's SQLite backend returned ``DELETE ... RETURNING`` order, which is
  its rowid order: insertion order of the keys (a key rewritten by an upsert
  keeps its first place), not key order.
* Batches (``state_put_many``, ``queue_push``, key lists) are validated
  whole before anything is written and written atomically: a rejected call
  changes nothing.
* The Arrow helpers check what they are given (``TypeError``):
  ``serialize_record_batch`` a ``RecordBatch`` (the seed: ``AttributeError``
  on ``.schema``), ``queue_push_batches`` a list of them (the seed iterated
  a lone batch's columns), ``deserialize_record_batch`` not ``None``
  (pyarrow's ``AttributeError``), a ``str`` or a path (which pyarrow opens
  as a local file).
* ``db_path=""`` raises ``ValueError``. The seed opened a private temporary
  database per connection, in which its tables did not exist, so every call
  failed later with ``sqlite3.OperationalError``. A ``db_path`` that is not a
  ``str``/path raises ``TypeError``. Strings that look like URLs
  (``sqlite:...``, ``memory:``, ``postgresql://...``) are URLs, not file
  names.
* Engine failures raise durastate's errors (``StoreUnavailable`` for a
  database locked past the 30 s busy timeout, ``StoreClosed`` after the
  store was closed) rather than ``sqlite3.Error``: this module never
  imports a driver.
* ``close()`` does what the seed's does: it closes the calling thread's
  connection only, and the storage stays usable (the thread's next call
  opens a new connection; an in-memory database lives on). To release
  everything, use the storage as a context manager or call
  ``storage.store.close()``; it is also released when the storage is
  garbage-collected.

How the seed maps onto the facets (visible if you open the same database
with ``durastate.open``):

* State, logs and counters live in ``store.kv`` at ``(scope_id, ns, key)``
  exactly; ``execution_clear`` is ``kv.clear`` (state + logs + counters,
  never queues). Log ordinals come from ``kv.append``: unique and increasing
  across the whole store and never reused (the seed's AUTOINCREMENT).
* The work queue of ``execution_id`` is the native queue named
  ``b"vgi/" + execution_id`` (native names cannot be empty, and the prefix
  keeps vgi's ids apart from an application's own queues). An id longer
  than a native name allows (``durastate.queues.MAX_NAME_SIZE`` = 1024 bytes
  with the prefix, i.e. over 1020 bytes) is addressed as ``b"vgi#" +
  sha256(execution_id)`` instead, so execution ids of any length work, as
  in the seed. Items are pushed
  with ``max_attempts=None`` so they never dead-letter; ``queue_pop`` is the
  native destructive ``pop``.
* The store runs on a frozen clock (always the epoch). vgi's queue has no
  notion of time, while the native queue orders by an availability time
  taken from the clock: on a frozen clock every pushed item is poppable at
  once by every process, in push order, whatever their wall clocks say (with
  real clocks a consumer whose clock lags the producer's would see an empty
  queue and finish early). vgi never uses TTLs, so nothing else depends on
  the clock.
* Size limits: the native key/value size limits are lifted (the seed had
  none); only the engine's own limits apply, as ``ValueError``: SQLite
  refuses a value over ~1 GB, PostgreSQL over 10**9 bytes (its messages
  hold at most 1 GiB); PostgreSQL refuses a state/counter address
  (scope + ns + key) whose primary-key index entry would exceed ~2.7 kB
  (incompressible bytes), which the seed's SQLite accepted.
* Tables are durastate's (prefix ``ds_``), created beside any tables the
  seed left in an existing vgi database file; the seed's rows (ephemeral
  in-progress worker state, by its own account) are not read.

The package's modules, along the adapter's seams: ``storage``
(``FunctionStorage``), ``bound`` (``BoundStorage``,
``TransactionBoundStorage``), ``sharded`` (``ShardedStorage``),
``namespaces`` (``FrameworkNS``, shard keys), ``backend`` (the protocol),
``_checks`` (the seed's argument errors) and ``_arrow``. Every name is
re-exported here, so ``from durastate.compat.vgi import X`` is the import
to use.
"""

from __future__ import annotations

from ._arrow import _pyarrow as _pyarrow

# Private names stay attributes of the package too: the conformance suite
# imports and patches them here.
from ._checks import _INT64_MAX as _INT64_MAX
from ._checks import _INT64_MIN as _INT64_MIN
from ._checks import _address_checks as _address_checks
from ._checks import _as_bytes as _as_bytes
from ._checks import _as_bytes_list as _as_bytes_list
from ._checks import _as_int as _as_int
from ._checks import _as_int64 as _as_int64
from ._checks import _as_iterable as _as_iterable
from ._checks import _as_limit as _as_limit
from ._checks import _as_optional_bytes as _as_optional_bytes
from ._checks import _as_optional_bytes_list as _as_optional_bytes_list
from ._checks import _as_pairs as _as_pairs
from ._checks import _as_shard_key as _as_shard_key
from ._checks import _check_limit as _check_limit
from ._checks import _Int64OutOfRange as _Int64OutOfRange
from ._checks import _seed_error as _seed_error
from .backend import FunctionStorageBackend as FunctionStorageBackend
from .bound import BoundStorage as BoundStorage
from .bound import TransactionBoundStorage as TransactionBoundStorage
from .namespaces import _ATTACH_UUID_LEN as _ATTACH_UUID_LEN
from .namespaces import _FRAMEWORK_NS_TYPES as _FRAMEWORK_NS_TYPES
from .namespaces import _RESERVED_NS_PREFIX as _RESERVED_NS_PREFIX
from .namespaces import _STAND_IN_FRAMEWORK_NS as _STAND_IN_FRAMEWORK_NS
from .namespaces import _VGI_FRAMEWORK_NS as _VGI_FRAMEWORK_NS
from .namespaces import FrameworkNS as FrameworkNS
from .namespaces import _coerce_ns as _coerce_ns
from .namespaces import _derive_shard_key as _derive_shard_key
from .namespaces import _resolve_shard_key as _resolve_shard_key
from .namespaces import _shard_logger as _shard_logger
from .namespaces import _vgi_framework_ns as _vgi_framework_ns
from .namespaces import attach_catalog_bytes as attach_catalog_bytes
from .sharded import ShardedSqliteStorage as ShardedSqliteStorage
from .sharded import ShardedStorage as ShardedStorage
from .storage import _HASHED_QUEUE_PREFIX as _HASHED_QUEUE_PREFIX
from .storage import _QUEUE_ID_ROOM as _QUEUE_ID_ROOM
from .storage import _QUEUE_PREFIX as _QUEUE_PREFIX
from .storage import FunctionStorage as FunctionStorage
from .storage import FunctionStorageSqlite as FunctionStorageSqlite
from .storage import _frozen_clock as _frozen_clock
from .storage import _get_default_db_path as _get_default_db_path
from .storage import _open_store as _open_store

__all__ = [
    "BoundStorage",
    "FrameworkNS",
    "FunctionStorage",
    "FunctionStorageBackend",
    "FunctionStorageSqlite",
    "ShardedSqliteStorage",
    "ShardedStorage",
    "TransactionBoundStorage",
    "attach_catalog_bytes",
]
