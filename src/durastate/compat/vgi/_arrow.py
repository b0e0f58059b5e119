"""The Arrow helpers of ``BoundStorage``: pyarrow is imported only when one is called."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._checks import _as_iterable

if TYPE_CHECKING:
    import pyarrow as pa


def serialize_record_batch(batch: pa.RecordBatch) -> bytes:
    """``batch`` as Arrow IPC stream bytes.

    ``TypeError`` for anything but a ``RecordBatch`` (the seed: an
    ``AttributeError`` on ``.schema``).
    """
    arrow = _pyarrow()
    batch = _as_record_batch("batch", batch)
    sink = arrow.BufferOutputStream()
    with arrow.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def record_batches(batches: Any) -> list[pa.RecordBatch]:
    """``batches`` as a list of ``RecordBatch``, else ``TypeError`` (a lone batch included: it iterates columns)."""
    if isinstance(batches, _pyarrow().RecordBatch):
        raise TypeError("batches must be a list of pyarrow.RecordBatch, got one RecordBatch")
    return [_as_record_batch(f"batches[{i}]", b) for i, b in enumerate(_as_iterable("batches", batches))]


def deserialize_record_batch(data: bytes) -> pa.RecordBatch:
    """The first record batch of Arrow IPC stream ``data``.

    ``TypeError`` for ``None`` (the seed: pyarrow's ``AttributeError``) and
    for a ``str`` or path, which pyarrow would open as a local file (the
    seed did); pyarrow's own errors for bytes that are not an IPC stream.
    """
    arrow = _pyarrow()
    if data is None or isinstance(data, (str, os.PathLike)):
        raise TypeError(f"data must be bytes (an Arrow IPC stream), got {type(data).__name__}")
    with arrow.ipc.open_stream(data) as reader:
        return reader.read_next_batch()


def _as_record_batch(name: str, value: Any) -> pa.RecordBatch:
    if not isinstance(value, _pyarrow().RecordBatch):
        raise TypeError(f"{name} must be a pyarrow.RecordBatch, got {type(value).__name__}")
    return value


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
