"""How ``DurastateSaver`` lays a thread out in kv, and how rows are read back.

All rows of a thread live in one kv namespace (``b"t:" + thread_id``) of
the saver's scope. Keys start with a tag byte:

* ``n`` + checkpoint_ns: the thread's namespaces (a registry, value empty);
* ``r`` + run_id: the thread holds checkpoints of that run;
* ``c`` + checkpoint_ns + NUL + checkpoint_id: a checkpoint (its
  ``envelope``: parent id, the checkpoint without its non-primitive channel
  values, metadata, run id, and ``homes``, see below);
* that key + NUL + ``v`` + channel: a channel value the checkpoint
  introduced (its version, serializer type and bytes);
* that key + NUL + ``w`` + task_path + NUL + task_id + NUL + idx: a pending
  write (idx fixed-width, so key order is ``writes_sort_key`` order).

So a checkpoint, the values it introduced and its writes are one key
range: ``get_tuple`` is one range scan, ``list`` one reverse scan. A value
is stored once, by the checkpoint whose put introduced that version; a
later checkpoint that still uses it (its channel is not in
``new_versions``) records ``homes[channel] = id of that checkpoint``,
inherited from its parent at put time. Deleting a checkpoint that is some
survivor's home first moves the value to the survivor (``prune``,
``delete_for_runs``); ``delete_thread`` needs no care.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import ormsgpack

from ...errors import InvalidRequest

THREADS_NS = b"threads"
THREAD_NS_PREFIX = b"t:"
NAMESPACES = b"n"
NAMESPACES_END = b"o"
CHECKPOINT = b"c"
CHECKPOINT_END = b"d"
RUN = b"r"
SEP = b"\x00"
# The first byte after SEP: [prefix + SEP, prefix + AFTER) holds exactly the
# keys that extend prefix + SEP.
AFTER = b"\x01"
VALUE = b"v"
WRITE = b"w"
# Fixed-width, non-negative idx text (special writes have idx -1 .. -4).
IDX_OFFSET = 1_000_000_000
PRIMITIVES = (str, int, float, bool)


def pack(value: Any) -> bytes:
    return ormsgpack.packb(value)


def unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data)


def text(name: str, value: Any) -> bytes:
    """``value`` encoded, refused unless it is a str without NUL (keys use NUL as separator)."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidRequest(f"{name} must not contain a NUL character: {value!r:.80}")
    return value.encode()


def is_primitive(value: Any) -> bool:
    """Kept inline in the checkpoint (as PostgresSaver does), not as a separate value row."""
    return value is None or isinstance(value, PRIMITIVES)


def thread_ns(thread_id: str) -> bytes:
    return THREAD_NS_PREFIX + thread_id.encode()


def checkpoint_key(ns: bytes, checkpoint_id: str) -> bytes:
    return CHECKPOINT + ns + SEP + checkpoint_id.encode()


def value_key(ns: bytes, checkpoint_id: str, channel: str) -> bytes:
    return checkpoint_key(ns, checkpoint_id) + SEP + VALUE + channel.encode()


def write_key(head: bytes, task_path: bytes, task_id: bytes, idx: int) -> bytes:
    """``head`` is the checkpoint's key."""
    return head + SEP + WRITE + task_path + SEP + task_id + SEP + b"%010d" % (idx + IDX_OFFSET)


class Row(NamedTuple):
    """One stored checkpoint with the values it introduced and its writes, not yet deserialized."""

    checkpoint_id: str
    thread_id: str
    checkpoint_ns: str
    parent_id: str | None
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    run_id: str | None
    delta: bool
    homes: dict[str, str]
    values: dict[str, bytes]
    writes: list[bytes]


def envelope(
    parent_id: str | None,
    checkpoint: tuple[str, bytes],
    metadata: tuple[str, bytes],
    run_id: str | None,
    delta: bool,
    homes: Mapping[str, str],
) -> bytes:
    return pack((parent_id, *checkpoint, *metadata, run_id, delta, dict(homes)))


def with_homes(row: Row, homes: Mapping[str, str]) -> bytes:
    """The row's envelope with other homes (after values moved)."""
    return envelope(row.parent_id, row.checkpoint, row.metadata, row.run_id, row.delta, homes)


def decode(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: bytes,
    value: bytes,
    values: dict[str, bytes],
    writes: list[bytes],
) -> Row:
    parent_id, cp_type, cp_bytes, md_type, md_bytes, run_id, delta, homes = unpack(value)
    return Row(
        checkpoint_id.decode(),
        thread_id,
        checkpoint_ns,
        parent_id,
        (cp_type, cp_bytes),
        (md_type, md_bytes),
        run_id,
        delta,
        homes,
        values,
        writes,
    )


def rows_descending(
    thread_id: str, checkpoint_ns: str, skip: int, rows: Iterable[tuple[bytes, bytes]]
) -> Iterator[Row]:
    """Checkpoints from a reverse scan of one namespace's checkpoint range (``skip``: its prefix length).

    In reverse key order a checkpoint's writes and values come before it;
    rows of a checkpoint that is not there (writes saved before their
    checkpoint, which LangGraph may do) are dropped.
    """
    owner = b""
    values: dict[str, bytes] = {}
    writes: list[bytes] = []
    for key, value in rows:
        checkpoint_id, is_part, part = key[skip:].partition(SEP)
        if is_part:
            if checkpoint_id != owner:
                owner, values, writes = checkpoint_id, {}, []
            if part[:1] == WRITE:
                writes.append(value)
            else:
                values[part[1:].decode()] = value
            continue
        if checkpoint_id == owner:
            writes.reverse()
            yield decode(thread_id, checkpoint_ns, checkpoint_id, value, values, writes)
        else:
            yield decode(thread_id, checkpoint_ns, checkpoint_id, value, {}, [])
        owner, values, writes = b"", {}, []


def rows_ascending(thread_id: str, rows: Iterable[tuple[bytes, bytes]]) -> Iterator[Row]:
    """Checkpoints from a forward scan of a thread's checkpoint range (any namespaces)."""
    current: tuple[str, bytes, bytes] | None = None
    values: dict[str, bytes] = {}
    writes: list[bytes] = []
    for key, value in rows:
        checkpoint_ns, _, rest = key[1:].partition(SEP)
        checkpoint_id, is_part, part = rest.partition(SEP)
        if not is_part:
            if current is not None:
                yield decode(thread_id, current[0], current[1], current[2], values, writes)
            current, values, writes = (checkpoint_ns.decode(), checkpoint_id, value), {}, []
        elif current is not None and current[1] == checkpoint_id and current[0] == checkpoint_ns.decode():
            if part[:1] == WRITE:
                writes.append(value)
            else:
                values[part[1:].decode()] = value
    if current is not None:
        yield decode(thread_id, current[0], current[1], current[2], values, writes)


def contains(document: Any, wanted: Any) -> bool:
    """PostgreSQL ``@>`` for metadata filters: dicts partially, the rest by equality."""
    if isinstance(wanted, Mapping):
        return isinstance(document, Mapping) and all(
            key in document and contains(document[key], value) for key, value in wanted.items()
        )
    return bool(document == wanted)
