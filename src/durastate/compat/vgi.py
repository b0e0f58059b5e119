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
  refuses a value over ~1 GB; PostgreSQL refuses a state/counter address
  (scope + ns + key) whose primary-key index entry would exceed ~2.7 kB
  (incompressible bytes), which the seed's SQLite accepted.
* Tables are durastate's (prefix ``ds_``), created beside any tables the
  seed left in an existing vgi database file; the seed's rows (ephemeral
  in-progress worker state, by its own account) are not read.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import importlib.util
import logging
import operator
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import durastate
from durastate.errors import InvalidRequest
from durastate.queues import MAX_NAME_SIZE as _MAX_QUEUE_NAME_SIZE
from durastate.sharding import rendezvous_owner

if TYPE_CHECKING:
    import pyarrow as pa

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

# Same logger name as the seed, so a vgi deployment's logging config applies.
_shard_logger = logging.getLogger("vgi.storage.shard")

_RESERVED_NS_PREFIX = b"_vgi/"
# Width of the framework UUID at the head of every unwrapped attach plaintext
# (``uuid(16) || catalog_bytes``).
_ATTACH_UUID_LEN = 16
# Native queue name of an execution's work queue: this prefix + execution_id;
# an id too long for that is addressed by its SHA-256 under the other prefix.
_QUEUE_PREFIX = b"vgi/"
_HASHED_QUEUE_PREFIX = b"vgi#"
_QUEUE_ID_ROOM = _MAX_QUEUE_NAME_SIZE - len(_QUEUE_PREFIX)
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# Larger than any len(): the native size checks never refuse; the engine's
# own limits (SQLite ~1 GB per value) still apply.
_NO_SIZE_LIMIT = _INT64_MAX


def _frozen_clock() -> float:
    """The compat store's clock: always the epoch (see the module docstring)."""
    return 0.0


class _Int64OutOfRange(InvalidRequest, OverflowError):
    """An integer argument outside the signed 64-bit range.

    Both a ``ValueError`` (durastate's ``InvalidRequest``) and the
    ``OverflowError`` sqlite3 raised for it in the seed.
    """


# -- argument checks ------------------------------------------------------------
# Each returns the normalised value or raises the seed-compatible error type
# with a message naming the argument. They run before anything is written.


def _as_bytes(name: str, value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{name} must be bytes, got {type(value).__name__}")


def _as_optional_bytes(name: str, value: Any) -> bytes | None:
    return None if value is None else _as_bytes(name, value)


def _as_iterable(name: str, value: Any) -> list[Any]:
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be a list, got {type(value).__name__}")
    if isinstance(value, list):
        return value
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"{name} must be a list, got {type(value).__name__}") from None


def _as_bytes_list(name: str, value: Any) -> list[bytes]:
    return [_as_bytes(f"{name}[{i}]", item) for i, item in enumerate(_as_iterable(name, value))]


def _as_pairs(name: str, value: Any) -> list[tuple[bytes, bytes]]:
    pairs = []
    for i, item in enumerate(_as_iterable(name, value)):
        if not isinstance(item, (tuple, list)):
            raise TypeError(f"{name}[{i}] must be a (key, value) tuple, got {type(item).__name__}")
        if len(item) != 2:
            raise ValueError(f"{name}[{i}] must be a (key, value) pair, got {len(item)} elements")
        pairs.append((_as_bytes(f"{name}[{i}] key", item[0]), _as_bytes(f"{name}[{i}] value", item[1])))
    return pairs


def _as_int(name: str, value: Any) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _as_int64(name: str, value: Any) -> int:
    number = _as_int(name, value)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise _Int64OutOfRange(f"{name} must fit in a signed 64-bit integer, got {number}")
    return number


def _as_limit(value: Any) -> int | None:
    if value is None:
        return None
    limit = _as_int("limit", value)
    if limit < 0:
        raise ValueError(f"limit must be >= 0 or None (None means no limit), got {limit}")
    return limit


def _as_shard_key(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"shard_key must be a str, got {type(value).__name__}")
    return value


def _check_limit(name: str, value: Any) -> int | None:
    return _as_limit(value)


def _as_optional_bytes_list(name: str, value: Any) -> list[bytes] | None:
    return None if value is None else _as_bytes_list(name, value)


_Check = tuple[Callable[[str, Any], object], str, Any]


def _address_checks(scope_id: Any, ns: Any, key: Any) -> tuple[_Check, _Check, _Check]:
    return (_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns), (_as_bytes, "key", key)


def _seed_error(*checks: _Check) -> None:
    """Run the adapter's own checks (``check(name, value)``) on a call's arguments.

    The facets validate every argument once and raise ``InvalidRequest`` (a
    ``ValueError``) for anything wrong. The seed raised ``TypeError`` for a
    wrong type (and ``OverflowError`` for an int64 overflow), so when the
    facet refuses a call, the adapter runs these checks: the first one that
    fails raises the seed's error type with a message naming the argument.
    When all pass, the facet's refusal was about a value (a size, an
    overflowing sum) and the caller re-raises it. A correct call never
    reaches this.
    """
    for check, name, value in checks:
        check(name, value)


# -- namespaces and shard keys ---------------------------------------------------


class FrameworkNS(bytes, enum.Enum):
    """Framework-reserved storage namespaces.

    All members start with ``b"_vgi/"``. User code may not pass a bytes
    namespace with that prefix to ``BoundStorage.state_*`` (checked at every
    entry point); framework code passes a member of this enum instead, which
    the wrappers accept and turn into plain bytes. The values are persisted
    in stored rows: never rename one.

    When vgi-python is installed, ``durastate.compat.vgi.FrameworkNS`` *is*
    ``vgi.function_storage.FrameworkNS`` (this class is the stand-in for
    when it is not), so vgi's own ``BoundStorage`` accepts the members this
    module hands out and this module's accepts vgi's.
    """

    BUFFERING_INIT = b"_vgi/buffering_init"
    STREAMING_FINALIZE = b"_vgi/streaming_finalize"
    TIO_STATE = b"_vgi/tio_state"
    AGGREGATE_STATE = b"_vgi/aggregate_state"
    AGGREGATE_WINDOW_PARTITION = b"_vgi/aggregate_window_partition"
    STREAMING_SESSION = b"_vgi/streaming_session"


def _vgi_framework_ns() -> type[enum.Enum] | None:
    """vgi-python's own ``FrameworkNS`` when vgi is installed and importable, else ``None``.

    Imported at most once, when this module is; a vgi that cannot be
    imported (or whose enum is not a bytes enum) leaves this module on its
    stand-in.
    """
    try:
        if importlib.util.find_spec("vgi") is None:
            return None
        theirs = importlib.import_module("vgi.function_storage").FrameworkNS
    except Exception:
        return None
    if isinstance(theirs, type) and issubclass(theirs, bytes) and issubclass(theirs, enum.Enum):
        return theirs
    return None


_STAND_IN_FRAMEWORK_NS = FrameworkNS
_VGI_FRAMEWORK_NS = _vgi_framework_ns()
if _VGI_FRAMEWORK_NS is not None:
    FrameworkNS = _VGI_FRAMEWORK_NS  # type: ignore[misc, assignment]
# Whose members carry the reserved prefix legitimately: vgi's and ours.
_FRAMEWORK_NS_TYPES: tuple[type[enum.Enum], ...] = (
    (_STAND_IN_FRAMEWORK_NS,) if _VGI_FRAMEWORK_NS is None else (_VGI_FRAMEWORK_NS, _STAND_IN_FRAMEWORK_NS)
)


def _coerce_ns(ns: bytes | FrameworkNS) -> bytes:
    """Validate a ``BoundStorage`` namespace and return it as plain bytes.

    Members of ``FrameworkNS`` (vgi-python's own enum when it is installed,
    and this module's stand-in) pass: they carry the reserved prefix
    legitimately. Other ``bytes``/``bytearray`` starting with ``b"_vgi/"``
    raise ``ValueError``; anything else raises ``TypeError``.
    """
    if type(ns) is bytes and not ns.startswith(_RESERVED_NS_PREFIX):
        return ns  # the common case: an application namespace
    if isinstance(ns, _FRAMEWORK_NS_TYPES):
        return bytes(ns.value)
    if not isinstance(ns, (bytes, bytearray)):
        raise TypeError(f"namespace must be bytes or FrameworkNS, got {type(ns).__name__}")
    ns_bytes = bytes(ns)
    if ns_bytes.startswith(_RESERVED_NS_PREFIX):
        raise ValueError(
            f"namespace {ns_bytes!r} starts with the reserved prefix {_RESERVED_NS_PREFIX!r}: "
            "use a durastate.compat.vgi.FrameworkNS member or choose a different prefix"
        )
    return ns_bytes


def attach_catalog_bytes(attach_plaintext: bytes | None) -> bytes | None:
    """The catalog's bytes of an unwrapped attach: ``attach_plaintext[16:]``.

    The framework unwraps an attach to ``uuid(16) || catalog_bytes``; function
    bodies see only ``catalog_bytes``. ``None`` (or empty) means no attach and
    gives ``None``; a plaintext shorter than 16 bytes gives ``b""``.
    """
    return attach_plaintext[_ATTACH_UUID_LEN:] if attach_plaintext else None


def _derive_shard_key(*, attach_uuid: bytes | None, _origin: str = "?") -> str:
    """The shard key of an attach: ``"att-" + attach_uuid.hex()`` (36 chars).

    ``attach_uuid`` must be exactly 16 bytes (the framework-minted UUID at the
    head of the unwrapped attach, stable across re-seals and unique per
    attach); anything else raises ``ValueError`` rather than collapsing
    traffic onto one fallback shard. ``_origin`` labels the call site in the
    ``vgi.storage.shard`` debug log.
    """
    if not attach_uuid or len(attach_uuid) != _ATTACH_UUID_LEN:
        raise ValueError(
            f"cannot derive shard_key without a 16-byte attach uuid (origin={_origin}, "
            f"got {len(attach_uuid) if attach_uuid else 0} bytes); the storage path "
            "must be bound to a logical ATTACH"
        )
    key = "att-" + attach_uuid.hex()
    if _shard_logger.isEnabledFor(logging.DEBUG):
        _shard_logger.debug("shard derived origin=%s uuid=%s key=%s", _origin, attach_uuid.hex(), key)
    return key


def _resolve_shard_key(backend: Any, attach_plaintext: bytes | None, _origin: str) -> str:
    """The shard key a ``BoundStorage`` over ``backend`` uses.

    With an attach plaintext of at least 16 bytes: derived from its leading
    UUID, for every backend. Without one: ``""``, except for a backend whose
    ``requires_shard_key`` attribute is true (a remotely sharded one), which
    raises ``ValueError``. A non-bytes plaintext raises ``TypeError``.
    """
    if attach_plaintext is not None and not isinstance(attach_plaintext, (bytes, bytearray, memoryview)):
        raise TypeError(f"attach_plaintext must be bytes or None, got {type(attach_plaintext).__name__}")
    uuid = (
        bytes(attach_plaintext[:_ATTACH_UUID_LEN])
        if attach_plaintext and len(attach_plaintext) >= _ATTACH_UUID_LEN
        else None
    )
    if uuid or getattr(backend, "requires_shard_key", False):
        return _derive_shard_key(attach_uuid=uuid, _origin=_origin)
    return ""


def _get_default_db_path() -> str:
    """The seed's default database: ``user_state_dir("vgi")/vgi_storage.db``.

    Creates the folder. Resolved to an absolute path.
    """
    from pathlib import Path

    from platformdirs import user_state_dir

    state_dir = Path(user_state_dir("vgi"))
    state_dir.mkdir(parents=True, exist_ok=True)
    return str((state_dir / "vgi_storage.db").resolve())


# -- the backend protocol ------------------------------------------------------------


class FunctionStorageBackend(Protocol):
    """What ``BoundStorage`` needs of a backend: the seed's ``FunctionStorage`` protocol.

    ``FunctionStorage`` and ``ShardedStorage`` satisfy it, and so do vgi's
    own backends. A backend that routes remotely by shard key sets a
    ``requires_shard_key = True`` class attribute (read with ``getattr``, so
    it is not part of the protocol).
    """

    def queue_push(self, execution_id: bytes, items: list[bytes], *, shard_key: str = "") -> int: ...

    def queue_pop(self, execution_id: bytes, *, shard_key: str = "") -> bytes | None: ...

    def queue_clear(self, execution_id: bytes, *, shard_key: str = "") -> int: ...

    def state_get_many(
        self, scope_id: bytes, ns: bytes, keys: list[bytes], *, shard_key: str = ""
    ) -> list[bytes | None]: ...

    def state_put_many(
        self, scope_id: bytes, ns: bytes, items: list[tuple[bytes, bytes]], *, shard_key: str = ""
    ) -> None: ...

    def state_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        shard_key: str = "",
    ) -> Iterable[tuple[bytes, bytes]]: ...

    def state_drain(self, scope_id: bytes, ns: bytes, *, shard_key: str = "") -> Iterable[tuple[bytes, bytes]]: ...

    def state_delete(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        shard_key: str = "",
    ) -> int: ...

    def execution_clear(self, scope_id: bytes, *, shard_key: str = "") -> int: ...

    def state_append(self, scope_id: bytes, ns: bytes, key: bytes, item: bytes, *, shard_key: str = "") -> int: ...

    def state_log_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[int, bytes]]: ...

    def state_counter_get(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> int: ...

    def state_counter_add(self, scope_id: bytes, ns: bytes, key: bytes, delta: int, *, shard_key: str = "") -> int: ...

    def state_counter_set(self, scope_id: bytes, ns: bytes, key: bytes, value: int, *, shard_key: str = "") -> None: ...

    def state_counter_delete(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> None: ...


# -- FunctionStorage -------------------------------------------------------------------


def _open_store(db_path: str | os.PathLike[str]) -> durastate.Store:
    if db_path == "" or (isinstance(db_path, os.PathLike) and os.fspath(db_path) == ""):
        raise ValueError("db_path must not be empty (pass None for the default location or ':memory:')")
    return durastate.open(
        db_path,
        clock=_frozen_clock,
        max_value_size=_NO_SIZE_LIMIT,
        max_key_size=None,  # as large as the engine can index
    )


class FunctionStorage:
    """vgi's ``FunctionStorageSqlite`` on any durastate engine (see the module docstring).

    Thread-safe and usable from many processes on one file or server. Every
    method validates its arguments first (``TypeError`` for wrong types,
    ``ValueError`` for wrong values) and changes nothing when it raises.
    ``shard_key`` is accepted everywhere and ignored. The arguments are
    validated once, by the facet the method calls; the adapter's own checks
    run only when the facet refuses a call, to raise the seed's error type
    (see ``_seed_error``).
    """

    db_path: str | os.PathLike[str]

    def __init__(self, db_path: str | os.PathLike[str] | None = None) -> None:
        """Open (creating if needed) the storage.

        ``db_path``: a file path, a durastate URL, ``":memory:"`` (a private
        in-memory database that lives as long as this object) or ``None``
        (``platformdirs.user_state_dir("vgi")/vgi_storage.db``, folder created).
        """
        if db_path is not None and not isinstance(db_path, (str, os.PathLike)):
            raise TypeError(f"db_path must be a str, a path or None, got {type(db_path).__name__}")
        self.db_path = db_path if db_path is not None else _get_default_db_path()
        self._adopt(_open_store(self.db_path), owned=True)

    @classmethod
    def from_store(cls, store: durastate.Store) -> FunctionStorage:
        """A ``FunctionStorage`` over an already open ``store``, which stays the caller's.

        Closing this object (or leaving its ``with`` block) does not close
        ``store``. Caveat: ``store``'s clock orders the work queue; open it
        with a constant clock (as ``FunctionStorage()`` does) unless every
        process sharing it has a well-synchronised clock.
        """
        if not isinstance(store, durastate.Store):
            raise TypeError(f"store must be a durastate.Store, got {type(store).__name__}")
        self = cls.__new__(cls)
        self.db_path = store.url
        self._adopt(store, owned=False)
        return self

    def _adopt(self, store: durastate.Store, *, owned: bool) -> None:
        self.store = store
        self._kv = store.kv
        self._queues = store.queues
        self._owned = owned
        # Release connections (a PostgreSQL pool) when this object is dropped,
        # as the seed's connections were released with it.
        self._finalizer = weakref.finalize(self, store.close) if owned else None

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Close the calling thread's connection, like the seed; the storage stays usable.

        The thread's next call opens a fresh connection; other threads are
        unaffected and an in-memory database keeps its data. To release every
        connection, leave the storage's ``with`` block.
        """
        self.store.engine.release_connection()

    def __enter__(self) -> FunctionStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the underlying store (every thread's connections) if this object opened it."""
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        return f"<durastate.compat.vgi.FunctionStorage {self.store.url}>"

    # -- work queue --------------------------------------------------------------
    # Every method hands its arguments to the facet, which validates them
    # once; only a call the facet refuses runs the adapter's own checks, to
    # raise the seed's error type for what was wrong (see ``_seed_error``).

    @staticmethod
    def _queue_name(execution_id: Any) -> bytes:
        """The native queue of ``execution_id``: ``b"vgi/" + execution_id``.

        An id too long for a native queue name (``queues.MAX_NAME_SIZE``
        bytes with the prefix) is addressed by its SHA-256 digest under
        ``b"vgi#"`` instead, so any length works; the two prefixes differ, so
        a hashed name never meets a plain one.
        """
        eid: bytes = execution_id if type(execution_id) is bytes else _as_bytes("execution_id", execution_id)
        if len(eid) > _QUEUE_ID_ROOM:
            return _HASHED_QUEUE_PREFIX + hashlib.sha256(eid).digest()
        return _QUEUE_PREFIX + eid

    def queue_push(self, execution_id: bytes, items: list[bytes], *, shard_key: str = "") -> int:
        """Append ``items`` (bytes) to the execution's FIFO queue, atomically; return how many."""
        name = self._queue_name(execution_id)
        try:
            return self._queues.push(
                name, items if type(items) is list else _as_bytes_list("items", items), max_attempts=None
            )
        except InvalidRequest:
            _seed_error((_as_bytes_list, "items", items))
            raise

    def queue_pop(self, execution_id: bytes, *, shard_key: str = "") -> bytes | None:
        """Remove and return the oldest item; ``None`` when empty or never pushed."""
        return self._queues.pop(self._queue_name(execution_id))

    def queue_clear(self, execution_id: bytes, *, shard_key: str = "") -> int:
        """Delete every remaining item of the execution's queue; return how many."""
        return self._queues.clear(self._queue_name(execution_id))

    # -- state ---------------------------------------------------------------------

    def state_get_many(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes],
        *,
        shard_key: str = "",
    ) -> list[bytes | None]:
        """Values parallel to ``keys`` (``None`` for misses); ``[]`` for no keys."""
        try:
            if type(keys) is not list:
                return self._kv.get_many(scope_id, ns, _as_bytes_list("keys", keys))
            if len(keys) == 1:  # BoundStorage.state_get: the one-key statement
                return [self._kv.get(scope_id, ns, keys[0])]
            return self._kv.get_many(scope_id, ns, keys)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns), (_as_bytes_list, "keys", keys))
            raise

    def state_put_many(
        self,
        scope_id: bytes,
        ns: bytes,
        items: list[tuple[bytes, bytes]],
        *,
        shard_key: str = "",
    ) -> None:
        """Upsert every ``(key, value)`` pair atomically (a later duplicate key wins)."""
        kv = self._kv
        try:
            if type(items) is not list:
                kv.put_many(scope_id, ns, _as_pairs("items", items))
            elif len(items) == 1 and type(items[0]) is tuple and len(items[0]) == 2:
                kv.put(scope_id, ns, items[0][0], items[0][1])  # BoundStorage.state_put
            else:
                kv.put_many(scope_id, ns, items)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns), (_as_pairs, "items", items))
            raise

    def state_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < end``, by unsigned key bytes.

        Either bound ``None`` is open; ``reverse`` (truthy) orders descending;
        ``limit`` caps the count (``None``: all, ``0``: none).
        """
        if type(limit) is not int and limit is not None:
            limit = _as_limit(limit)
        try:
            return list(self._kv.scan(scope_id, ns, start=start, end=end, reverse=bool(reverse), limit=limit))
        except InvalidRequest:
            _seed_error(
                (_as_bytes, "scope_id", scope_id),
                (_as_bytes, "ns", ns),
                (_as_optional_bytes, "start", start),
                (_as_optional_bytes, "end", end),
                (_check_limit, "limit", limit),
            )
            raise

    def state_drain(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        shard_key: str = "",
    ) -> list[tuple[bytes, bytes]]:
        """Atomically remove every pair of the namespace; return them sorted by key."""
        try:
            return self._kv.drain(scope_id, ns)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns))
            raise

    def state_delete(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        shard_key: str = "",
    ) -> int:
        """Delete ``keys``, or the range ``[start, end)``, or (neither) the whole namespace.

        ``keys`` together with a bound raises ``ValueError``. Returns the
        number of rows removed; deleting what is absent is a no-op.
        """
        if keys is not None and (start is not None or end is not None):
            raise ValueError("state_delete: keys and start/end are mutually exclusive")
        kv = self._kv
        try:
            if keys is not None:
                doomed = keys if type(keys) is list else _as_bytes_list("keys", keys)
                if doomed:
                    return kv.delete(scope_id, ns, doomed)
                # Nothing to delete, so no facet call to check the address.
                _seed_error((_as_bytes, "scope_id", scope_id), (_as_bytes, "ns", ns))
                return 0
            if start is None and end is None:
                return kv.delete(scope_id, ns, all=True)
            return kv.delete(scope_id, ns, start=start, end=end)
        except InvalidRequest:
            _seed_error(
                (_as_bytes, "scope_id", scope_id),
                (_as_bytes, "ns", ns),
                (_as_optional_bytes_list, "keys", keys),
                (_as_optional_bytes, "start", start),
                (_as_optional_bytes, "end", end),
            )
            raise

    def execution_clear(
        self,
        scope_id: bytes,
        *,
        shard_key: str = "",
    ) -> int:
        """Delete every state, log and counter row of ``scope_id``; return how many. Queues stay."""
        try:
            return self._kv.clear(scope_id)
        except InvalidRequest:
            _seed_error((_as_bytes, "scope_id", scope_id))
            raise

    # -- append-only logs -------------------------------------------------------

    def state_append(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        item: bytes,
        *,
        shard_key: str = "",
    ) -> int:
        """Append ``item`` to the log of ``(scope_id, ns, key)``; return its ordinal.

        Ordinals increase across every log of the database and are never reused.
        """
        try:
            return self._kv.append(scope_id, ns, key, item)
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_as_bytes, "item", item))
            raise

    def state_log_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[int, bytes]]:
        """``(id, value)`` entries of one log with ``id > after_id``, ascending.

        ``after_id=-1`` reads from the start; pass the last id seen to page on.
        ``limit`` caps the count (``None``: all).
        """
        after = after_id if type(after_id) is int else _as_int("after_id", after_id)
        if type(limit) is not int and limit is not None:
            limit = _as_limit(limit)
        if after > _INT64_MAX:
            _seed_error(*_address_checks(scope_id, ns, key), (_check_limit, "limit", limit))
            return []  # no ordinal can follow it
        try:
            return list(self._kv.log(scope_id, ns, key, after=after if after >= -1 else -1, limit=limit))
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_check_limit, "limit", limit))
            raise

    # -- counters ------------------------------------------------------------------

    def state_counter_get(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> int:
        """The int64 counter at ``(scope_id, ns, key)``; 0 when absent."""
        try:
            return self._kv.counter(scope_id, ns, key)
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key))
            raise

    def state_counter_add(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        delta: int,
        *,
        shard_key: str = "",
    ) -> int:
        """Atomically add ``delta`` (absent counts as 0) and return the new value.

        A sum outside the int64 range raises ``ValueError`` and changes nothing.
        """
        try:
            return self._kv.incr(scope_id, ns, key, delta if type(delta) is int else _as_int64("delta", delta))
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_as_int64, "delta", delta))
            raise

    def state_counter_set(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        value: int,
        *,
        shard_key: str = "",
    ) -> None:
        """Overwrite the counter with ``value`` (creating it)."""
        try:
            self._kv.set_counter(scope_id, ns, key, value if type(value) is int else _as_int64("value", value))
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key), (_as_int64, "value", value))
            raise

    def state_counter_delete(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> None:
        """Delete the counter (no-op when absent)."""
        try:
            self._kv.delete_counter(scope_id, ns, key)
        except InvalidRequest:
            _seed_error(*_address_checks(scope_id, ns, key))
            raise


FunctionStorageSqlite = FunctionStorage


# -- bound views -----------------------------------------------------------------------


class TransactionBoundStorage:
    """Transaction-scoped state: ``scope_id = transaction_opaque_data``, ``ns = b"txn"``.

    Get one with ``BoundStorage.transaction(transaction_opaque_data)``, or
    build it with an ``attach_plaintext`` (shard key derived as for
    ``BoundStorage``) or an already resolved ``shard_key``.
    """

    _NS = b"txn"

    def __init__(
        self,
        storage: FunctionStorageBackend,
        transaction_opaque_data: bytes,
        *,
        request: Any = None,
        attach_plaintext: bytes | None = None,
        shard_key: str | None = None,
    ) -> None:
        self._base = storage
        self._transaction_opaque_data = transaction_opaque_data
        if shard_key is None:
            origin = (
                f"TransactionBoundStorage({type(request).__name__})"
                if request is not None
                else "TransactionBoundStorage"
            )
            shard_key = _resolve_shard_key(storage, attach_plaintext, origin)
        self._shard_key = shard_key

    def get(self, keys: list[bytes]) -> list[bytes | None]:
        """Values parallel to ``keys`` (``None`` for misses)."""
        return self._base.state_get_many(self._transaction_opaque_data, self._NS, keys, shard_key=self._shard_key)

    def get_one(self, key: bytes) -> bytes | None:
        """One value, or ``None``."""
        return self.get([key])[0]

    def put(self, items: list[tuple[bytes, bytes]]) -> None:
        """Upsert a batch of ``(key, value)`` pairs atomically."""
        self._base.state_put_many(self._transaction_opaque_data, self._NS, items, shard_key=self._shard_key)

    def put_one(self, key: bytes, value: bytes) -> None:
        """Upsert one pair."""
        self.put([(key, value)])

    def clear(self) -> None:
        """Drop everything of this transaction (every namespace, logs and counters too)."""
        self._base.execution_clear(self._transaction_opaque_data, shard_key=self._shard_key)


class BoundStorage:
    """A backend bound to one ``execution_id`` (and its attach's shard key).

    ``attach_plaintext`` is the unwrapped attach (``uuid(16) ||
    catalog_bytes``); the shard key is derived from its UUID (see
    ``_resolve_shard_key``). ``request`` only labels the derivation in debug
    logs. Every ``state_*``/``counter_*`` method checks its namespace with
    ``_coerce_ns`` before calling the backend.
    """

    def __init__(
        self,
        storage: FunctionStorageBackend,
        execution_id: bytes,
        *,
        request: Any = None,
        attach_plaintext: bytes | None = None,
    ) -> None:
        self._base = storage
        self._execution_id = execution_id
        origin = f"BoundStorage({type(request).__name__})" if request is not None else "BoundStorage"
        self._shard_key = _resolve_shard_key(storage, attach_plaintext, origin)

    def transaction(self, transaction_opaque_data: bytes) -> TransactionBoundStorage:
        """A transaction-scoped view on the same backend and shard."""
        return TransactionBoundStorage(self._base, transaction_opaque_data, shard_key=self._shard_key)

    # -- work queue --------------------------------------------------------------

    def queue_push(self, items: list[bytes]) -> int:
        """Append work items to this execution's queue; return how many."""
        return self._base.queue_push(self._execution_id, items, shard_key=self._shard_key)

    def queue_push_batches(self, batches: list[pa.RecordBatch]) -> int:
        """Serialise Arrow record batches (IPC stream) and push them as work items."""
        return self.queue_push([self.serialize_record_batch(b) for b in batches])

    def queue_pop(self) -> bytes | None:
        """Remove and return the next work item, or ``None``."""
        return self._base.queue_pop(self._execution_id, shard_key=self._shard_key)

    def queue_pop_batch(self) -> pa.RecordBatch | None:
        """Pop one work item and deserialise it as an Arrow record batch (or ``None``)."""
        data = self.queue_pop()
        if data is None:
            return None
        return self.deserialize_record_batch(data)

    def queue_clear(self) -> int:
        """Delete the remaining work items; return how many."""
        return self._base.queue_clear(self._execution_id, shard_key=self._shard_key)

    # -- state (scope_id = execution_id) ------------------------------------------

    def state_get(self, ns: bytes | FrameworkNS, key: bytes) -> bytes | None:
        """One value, or ``None``."""
        return self._base.state_get_many(self._execution_id, _coerce_ns(ns), [key], shard_key=self._shard_key)[0]

    def state_get_many(self, ns: bytes | FrameworkNS, keys: list[bytes]) -> list[bytes | None]:
        """Values parallel to ``keys``."""
        return self._base.state_get_many(self._execution_id, _coerce_ns(ns), keys, shard_key=self._shard_key)

    def state_put(self, ns: bytes | FrameworkNS, key: bytes, value: bytes) -> None:
        """Upsert one pair."""
        self._base.state_put_many(self._execution_id, _coerce_ns(ns), [(key, value)], shard_key=self._shard_key)

    def state_put_many(self, ns: bytes | FrameworkNS, items: list[tuple[bytes, bytes]]) -> None:
        """Upsert a batch atomically."""
        self._base.state_put_many(self._execution_id, _coerce_ns(ns), items, shard_key=self._shard_key)

    def state_scan(
        self,
        ns: bytes | FrameworkNS,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterable[tuple[bytes, bytes]]:
        """Pairs in ``[start, end)`` by key (descending with ``reverse``), up to ``limit``."""
        return self._base.state_scan(
            self._execution_id,
            _coerce_ns(ns),
            start=start,
            end=end,
            reverse=reverse,
            limit=limit,
            shard_key=self._shard_key,
        )

    def state_drain(self, ns: bytes | FrameworkNS) -> Iterable[tuple[bytes, bytes]]:
        """Atomically remove and return every pair of the namespace."""
        return self._base.state_drain(self._execution_id, _coerce_ns(ns), shard_key=self._shard_key)

    def state_delete(
        self,
        ns: bytes | FrameworkNS,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
    ) -> int:
        """Delete ``keys``, the range ``[start, end)``, or the whole namespace; return the count."""
        return self._base.state_delete(
            self._execution_id, _coerce_ns(ns), keys, start=start, end=end, shard_key=self._shard_key
        )

    def execution_clear(self) -> int:
        """Delete every state, log and counter row of this execution; return the count."""
        return self._base.execution_clear(self._execution_id, shard_key=self._shard_key)

    def state_append(self, ns: bytes | FrameworkNS, key: bytes, item: bytes) -> int:
        """Append to the ``(ns, key)`` log; return the ordinal (a retried call appends twice)."""
        return self._base.state_append(self._execution_id, _coerce_ns(ns), key, item, shard_key=self._shard_key)

    def state_log_scan(
        self,
        ns: bytes | FrameworkNS,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
    ) -> list[tuple[int, bytes]]:
        """``(id, value)`` entries of the ``(ns, key)`` log with ``id > after_id``."""
        return self._base.state_log_scan(
            self._execution_id, _coerce_ns(ns), key, after_id=after_id, limit=limit, shard_key=self._shard_key
        )

    # -- counters ------------------------------------------------------------------

    def counter_get(self, ns: bytes | FrameworkNS, key: bytes) -> int:
        """The counter's value (0 when absent)."""
        return self._base.state_counter_get(self._execution_id, _coerce_ns(ns), key, shard_key=self._shard_key)

    def counter_add(self, ns: bytes | FrameworkNS, key: bytes, delta: int) -> int:
        """Atomically add ``delta``; return the new value."""
        return self._base.state_counter_add(self._execution_id, _coerce_ns(ns), key, delta, shard_key=self._shard_key)

    def counter_set(self, ns: bytes | FrameworkNS, key: bytes, value: int) -> None:
        """Overwrite the counter."""
        self._base.state_counter_set(self._execution_id, _coerce_ns(ns), key, value, shard_key=self._shard_key)

    def counter_delete(self, ns: bytes | FrameworkNS, key: bytes) -> None:
        """Delete the counter (no-op when absent)."""
        self._base.state_counter_delete(self._execution_id, _coerce_ns(ns), key, shard_key=self._shard_key)

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def pack_int_key(i: int) -> bytes:
        """``i`` as 8 bytes, little-endian, signed: the canonical int key encoding.

        ``OverflowError`` outside the int64 range; ``TypeError`` for non-ints.
        Note: little-endian keys do not sort numerically in ``state_scan``.
        """
        return _as_int("i", i).to_bytes(8, "little", signed=True)

    @staticmethod
    def serialize_record_batch(batch: pa.RecordBatch) -> bytes:
        """``batch`` as Arrow IPC stream bytes (needs the ``[arrow]`` extra)."""
        arrow = _pyarrow()
        sink = arrow.BufferOutputStream()
        with arrow.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        data: bytes = sink.getvalue().to_pybytes()
        return data

    @staticmethod
    def deserialize_record_batch(data: bytes) -> pa.RecordBatch:
        """The first record batch of Arrow IPC stream ``data`` (needs the ``[arrow]`` extra)."""
        arrow = _pyarrow()
        with arrow.ipc.open_stream(data) as reader:
            return reader.read_next_batch()


def _pyarrow() -> Any:
    """pyarrow, imported on first use so this module works without it."""
    try:
        import pyarrow
        import pyarrow.ipc  # binds pyarrow.ipc
    except ImportError as exc:
        raise ImportError(
            f"the Arrow helpers of durastate.compat.vgi need pyarrow: pip install 'durastate[arrow]' ({exc})"
        ) from exc
    return pyarrow


# -- ShardedStorage ----------------------------------------------------------------------


class ShardedStorage:
    """A backend that isolates shards like vgi's ``ShardedSqliteStorage`` (a debug aid).

    ``FunctionStorage`` ignores ``shard_key`` (one shared keyspace), which
    hides shard-routing bugs that only bite truly sharded backends. This one
    honours it: an operation under shard A never sees what was written under
    shard B (state, logs, counters, queues), while results are unchanged
    (keys, values and items come back exactly as written). ``""`` is a shard
    like any other; ``shard_key`` must be a ``str``.

    By default every shard lives in one inner ``FunctionStorage``
    (``db_path``, default ``":memory:"`` as in the seed). Beyond the seed,
    ``shards=`` spreads the shards over several real databases, as vgi's
    cloud backend spreads them over Durable Objects: a list of paths/URLs
    (or a mapping of stable names to them); each ``shard_key`` goes to one of
    them by rendezvous hash (``durastate.sharding.rendezvous_owner``), so
    adding a database moves only the shard keys it wins. In both modes the
    scope / execution ids are also prefixed with
    ``shard_key.encode() + b"\\x1f"``, so shard keys that share a database
    stay isolated. ``VGI_SQLITE_SHARD_LOG=1`` (read at construction) logs each
    operation's shard and scope to ``vgi.storage.sqlite_shard``.
    """

    _SEP = b"\x1f"  # unit separator: absent from attach and execution id bytes

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        shards: Sequence[str | os.PathLike[str]] | Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        if shards is not None and db_path is not None:
            raise ValueError("ShardedStorage: pass db_path or shards, not both")
        if shards is None:
            self._shards = [FunctionStorage(db_path=db_path or ":memory:")]
            self._names = [b"default"]
        else:
            named = list(shards.items()) if isinstance(shards, Mapping) else [(os.fspath(u), u) for u in shards]
            if not named:
                raise ValueError("ShardedStorage: shards must name at least one database")
            self._names = [str(name).encode("utf-8") for name, _ in named]
            if len(set(self._names)) != len(self._names):
                raise ValueError("ShardedStorage: shard names must be unique")
            self._shards = []
            try:
                for _, url in named:
                    self._shards.append(FunctionStorage(db_path=url))
            except BaseException:
                for opened in self._shards:
                    opened.__exit__(None, None, None)
                raise
        self._inner = self._shards[0]
        self._log = logging.getLogger("vgi.storage.sqlite_shard")
        self._dbg_on = os.environ.get("VGI_SQLITE_SHARD_LOG") == "1"

    @property
    def db_path(self) -> str | os.PathLike[str]:
        """The (first) database's path or URL."""
        return self._inner.db_path

    @property
    def store(self) -> durastate.Store:
        """The durastate store holding the shards (the first one with ``shards=``)."""
        return self._inner.store

    @property
    def stores(self) -> list[durastate.Store]:
        """Every database's store, in the order given."""
        return [shard.store for shard in self._shards]

    def _route(
        self, op: str, shard_key: str, id_bytes: bytes, id_name: str = "scope_id"
    ) -> tuple[FunctionStorage, bytes]:
        """The storage holding ``shard_key``'s rows, and ``id_bytes`` as addressed there."""
        shard = _as_shard_key(shard_key)
        scope = _as_bytes(id_name, id_bytes)
        if self._dbg_on:
            self._log.warning("op=%s shard=%s scope=%s", op, shard, scope.hex()[:16])
        encoded = shard.encode("utf-8")
        inner = self._inner if len(self._shards) == 1 else self._shards[rendezvous_owner(self._names, encoded)]
        return inner, encoded + self._SEP + scope

    def close(self) -> None:
        """Close the calling thread's connections; the storage stays usable."""
        for shard in self._shards:
            shard.close()

    def __enter__(self) -> ShardedStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close every store this object opened."""
        for shard in self._shards:
            shard.__exit__(exc_type, exc, tb)

    # -- work queue --------------------------------------------------------------

    def queue_push(self, execution_id: bytes, items: list[bytes], *, shard_key: str = "") -> int:
        inner, eid = self._route("queue_push", shard_key, execution_id, "execution_id")
        return inner.queue_push(eid, items)

    def queue_pop(self, execution_id: bytes, *, shard_key: str = "") -> bytes | None:
        inner, eid = self._route("queue_pop", shard_key, execution_id, "execution_id")
        return inner.queue_pop(eid)

    def queue_clear(self, execution_id: bytes, *, shard_key: str = "") -> int:
        inner, eid = self._route("queue_clear", shard_key, execution_id, "execution_id")
        return inner.queue_clear(eid)

    # -- state ---------------------------------------------------------------------

    def state_get_many(
        self, scope_id: bytes, ns: bytes, keys: list[bytes], *, shard_key: str = ""
    ) -> list[bytes | None]:
        inner, scope = self._route("state_get_many", shard_key, scope_id)
        return inner.state_get_many(scope, ns, keys)

    def state_put_many(
        self, scope_id: bytes, ns: bytes, items: list[tuple[bytes, bytes]], *, shard_key: str = ""
    ) -> None:
        inner, scope = self._route("state_put_many", shard_key, scope_id)
        inner.state_put_many(scope, ns, items)

    def state_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[bytes, bytes]]:
        inner, scope = self._route("state_scan", shard_key, scope_id)
        return inner.state_scan(scope, ns, start=start, end=end, reverse=reverse, limit=limit)

    def state_drain(self, scope_id: bytes, ns: bytes, *, shard_key: str = "") -> list[tuple[bytes, bytes]]:
        inner, scope = self._route("state_drain", shard_key, scope_id)
        return inner.state_drain(scope, ns)

    def state_delete(
        self,
        scope_id: bytes,
        ns: bytes,
        keys: list[bytes] | None = None,
        *,
        start: bytes | None = None,
        end: bytes | None = None,
        shard_key: str = "",
    ) -> int:
        inner, scope = self._route("state_delete", shard_key, scope_id)
        return inner.state_delete(scope, ns, keys, start=start, end=end)

    def execution_clear(self, scope_id: bytes, *, shard_key: str = "") -> int:
        inner, scope = self._route("execution_clear", shard_key, scope_id)
        return inner.execution_clear(scope)

    # -- logs and counters ------------------------------------------------------------

    def state_append(self, scope_id: bytes, ns: bytes, key: bytes, item: bytes, *, shard_key: str = "") -> int:
        inner, scope = self._route("state_append", shard_key, scope_id)
        return inner.state_append(scope, ns, key, item)

    def state_log_scan(
        self,
        scope_id: bytes,
        ns: bytes,
        key: bytes,
        *,
        after_id: int = -1,
        limit: int | None = None,
        shard_key: str = "",
    ) -> list[tuple[int, bytes]]:
        inner, scope = self._route("state_log_scan", shard_key, scope_id)
        return inner.state_log_scan(scope, ns, key, after_id=after_id, limit=limit)

    def state_counter_get(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> int:
        inner, scope = self._route("state_counter_get", shard_key, scope_id)
        return inner.state_counter_get(scope, ns, key)

    def state_counter_add(self, scope_id: bytes, ns: bytes, key: bytes, delta: int, *, shard_key: str = "") -> int:
        inner, scope = self._route("state_counter_add", shard_key, scope_id)
        return inner.state_counter_add(scope, ns, key, delta)

    def state_counter_set(self, scope_id: bytes, ns: bytes, key: bytes, value: int, *, shard_key: str = "") -> None:
        inner, scope = self._route("state_counter_set", shard_key, scope_id)
        inner.state_counter_set(scope, ns, key, value)

    def state_counter_delete(self, scope_id: bytes, ns: bytes, key: bytes, *, shard_key: str = "") -> None:
        inner, scope = self._route("state_counter_delete", shard_key, scope_id)
        inner.state_counter_delete(scope, ns, key)


ShardedSqliteStorage = ShardedStorage
