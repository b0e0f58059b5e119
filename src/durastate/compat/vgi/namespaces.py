"""Namespaces and shard keys: ``FrameworkNS``, the reserved prefix, attach-derived shard keys."""

from __future__ import annotations

import enum
import importlib
import importlib.util
import logging
from typing import Any

# Same logger name as the seed, so a vgi deployment's logging config applies.
_shard_logger = logging.getLogger("vgi.storage.shard")

_RESERVED_NS_PREFIX = b"_vgi/"
# Width of the framework UUID at the head of every unwrapped attach plaintext
# (``uuid(16) || catalog_bytes``).
_ATTACH_UUID_LEN = 16


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
