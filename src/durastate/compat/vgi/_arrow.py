"""The Arrow helpers of ``BoundStorage``: pyarrow is imported only when one is called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def serialize_record_batch(batch: pa.RecordBatch) -> bytes:
    """``batch`` as Arrow IPC stream bytes."""
    arrow = _pyarrow()
    sink = arrow.BufferOutputStream()
    with arrow.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def deserialize_record_batch(data: bytes) -> pa.RecordBatch:
    """The first record batch of Arrow IPC stream ``data``."""
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
