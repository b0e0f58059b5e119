"""How ``DurastateSaver`` lays a thread out in kv, and how rows are read back.

Every row lives in one kv namespace (``b"threads"``) of the saver's scope,
its key starting with the thread id and a NUL, so a thread is one key
range (``ThreadRows`` reads and writes it with keys relative to that
prefix; ``delete_thread`` is one range delete, and the threads are listed
by skipping from one prefix to the next: no registry to keep). Relative
keys start with a tag byte:

* ``n`` + checkpoint_ns: written by earlier releases (a namespace registry
  rewritten at every put), now ignored: the namespaces are found by
  skipping through the checkpoint keys (``namespaces``);
* ``r`` + run_id: the thread holds checkpoints of that run;
* ``c`` + checkpoint_ns + NUL + checkpoint_id: a checkpoint (its
  ``envelope``: parent id, the checkpoint without its non-primitive channel
  values, metadata, run id, ``homes``, see below, and the channel values
  the checkpoint introduced, each as (version, serializer type, bytes));
* that key + NUL + ``v`` + channel: a channel value kept in a row of its
  own (its version, serializer type and bytes): what releases before the
  values moved into the envelope wrote for every value, and what ``prune``
  and ``delete_for_runs`` still write when they move a value to a
  survivor. Both places are read, so stores written before stay readable;
* that key + NUL + ``w`` + task_path + NUL + task_id + NUL + idx: a pending
  write (idx fixed-width, so key order is ``writes_sort_key`` order): its
  channel, serializer type and bytes (earlier releases also stored the task
  id, task path and idx the key holds; both forms are read).

So a checkpoint, the values it introduced and its writes are one key
range: ``get_tuple`` is one range scan, ``list`` one reverse scan, and a
put is one row (one statement, no transaction) plus, for a run the saver
has not yet marked in the thread, the run marker. A value is stored once,
by the checkpoint whose put introduced that version; a later checkpoint
that still uses it (its channel is not in ``new_versions``) records
``homes[channel] = id of that checkpoint``, inherited from its parent at
put time. Deleting a checkpoint that is some survivor's home first moves
the value to the survivor (``prune``, ``delete_for_runs``); ``delete_thread``
needs no care.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import ormsgpack
from langgraph.checkpoint.base import WRITES_IDX_MAP

from ...errors import InvalidRequest

if TYPE_CHECKING:
    from ...kv import KV

THREADS_NS = b"threads"
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
# Channel values kept inline in the checkpoint (as PostgresSaver does), with None; others are stored apart.
PRIMITIVES = (str, int, float, bool)


# ormsgpack's functions themselves, not wrappers: a Python frame per row read or written costs more than the call.
pack: Callable[[Any], bytes] = ormsgpack.packb
unpack: Callable[[bytes], Any] = ormsgpack.unpackb


def text(name: str, value: Any) -> bytes:
    """``value`` encoded, refused unless it is a str without NUL (keys use NUL as separator)."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidRequest(f"{name} must not contain a NUL character: {value!r:.80}")
    return value.encode()


def checkpoint_key(ns: bytes, checkpoint_id: str) -> bytes:
    return CHECKPOINT + ns + SEP + checkpoint_id.encode()


def value_key(ns: bytes, checkpoint_id: str, channel: str) -> bytes:
    return checkpoint_key(ns, checkpoint_id) + SEP + VALUE + channel.encode()


def task_key(head: bytes, task_path: bytes, task_id: bytes) -> bytes:
    """The start of a task's write keys (``head`` is the checkpoint's key); ``ThreadRows.put_writes`` ends them."""
    return head + SEP + WRITE + task_path + SEP + task_id + SEP


class ThreadRows:
    """One thread's rows: kv calls on keys relative to the thread's prefix."""

    __slots__ = ("_end", "_kv", "_prefix", "_scope", "prefix_size", "thread_id")

    def __init__(self, kv: KV, scope: bytes, thread_id: str) -> None:
        thread = text("thread_id", thread_id)
        self.thread_id = thread_id
        self._kv = kv
        self._scope = scope
        self._prefix = thread + SEP
        self._end = thread + AFTER
        # The length of the thread's prefix, which ``scan_absolute``'s keys keep.
        self.prefix_size = len(self._prefix)

    def absolute(self, key: bytes) -> bytes:
        """``key`` (relative) with the thread's prefix."""
        return self._prefix + key

    def put_writes(
        self,
        ns: bytes,
        checkpoint_id: bytes,
        task_path: bytes,
        task_id: bytes,
        writes: Iterable[tuple[str, Any]],
        dumps: Callable[[Any], tuple[str, bytes]],
    ) -> None:
        """Store a task's pending ``(channel, value)`` writes (``dumps``: the serializer's) in one ``kv.put_many``.

        As LangGraph's savers: a write's idx is ``WRITES_IDX_MAP``'s for a special channel, else its position;
        a batch of special writes only replaces, any other batch keeps what is stored. Each key is
        ``absolute(task_key(checkpoint_key(ns, checkpoint_id), task_path, task_id))`` and the fixed-width idx
        (the only place that writes one): the task's part built in one join, not ten concatenations, and no
        call per write, a Python frame being a measurable share of a put_writes (bench/RESULTS.md "lgwrites").
        """
        task = b"".join((self._prefix, CHECKPOINT, ns, SEP, checkpoint_id, SEP, WRITE, task_path, SEP, task_id, SEP))
        rows = []
        special = True
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel)
            if idx is None:
                idx, special = i, False
            rows.append((task + b"%010d" % (idx + IDX_OFFSET), pack((channel, *dumps(value)))))
        if rows:
            # Sent, not counted: nobody reads the count, and in aput_writes (an async repeatable transaction)
            # a statement waited for would make the whole call run twice (AsyncCalls.transact_repeatable).
            self._kv._put_many_sent(self._scope, THREADS_NS, rows, if_absent=not special)

    def get(self, key: bytes) -> bytes | None:
        return self._kv.get(self._scope, THREADS_NS, self._prefix + key)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        prefix = self._prefix
        return self._kv.get_many(self._scope, THREADS_NS, [prefix + key for key in keys])

    def put(self, key: bytes, value: bytes) -> None:
        self._kv.put(self._scope, THREADS_NS, self._prefix + key, value)

    def put_many(self, rows: Iterable[tuple[bytes, bytes]], *, if_absent: bool = False) -> None:
        prefix = self._prefix
        self._kv.put_many(self._scope, THREADS_NS, [(prefix + key, value) for key, value in rows], if_absent=if_absent)

    def scan(
        self, start: bytes = b"", end: bytes | None = None, *, reverse: bool = False, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Relative ``(key, value)`` pairs with ``start <= key < end`` (``None``: to the thread's end)."""
        prefix = self._prefix
        rows = self._kv.scan(
            self._scope,
            THREADS_NS,
            start=prefix + start,
            end=self._end if end is None else prefix + end,
            reverse=reverse,
            limit=limit,
        )
        skip = len(prefix)
        return ((key[skip:], value) for key, value in rows)

    def scan_absolute(
        self, start: bytes, end: bytes, *, reverse: bool = False, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Like ``scan`` but the keys keep the thread's prefix (``prefix_size`` bytes): no copy per row."""
        prefix = self._prefix
        return self._kv.scan(
            self._scope, THREADS_NS, start=prefix + start, end=prefix + end, reverse=reverse, limit=limit
        )

    def delete(self, keys: Sequence[bytes]) -> None:
        prefix = self._prefix
        self._kv.delete(self._scope, THREADS_NS, keys=[prefix + key for key in keys])

    def delete_range(self, start: bytes = b"", end: bytes | None = None) -> None:
        """Delete ``[start, end)`` (``None``: to the thread's end; no arguments: the whole thread)."""
        self._kv.delete(
            self._scope, THREADS_NS, start=self._prefix + start, end=self._end if end is None else self._prefix + end
        )


def thread_ids(kv: KV, scope: bytes) -> Iterator[str]:
    """Every thread with a row, in key order: one indexed read per thread (a skip scan)."""
    start = b""
    while True:
        found = next(iter(kv.scan(scope, THREADS_NS, start=start, limit=1)), None)
        if found is None:
            return
        thread = found[0].partition(SEP)[0]
        yield thread.decode()
        start = thread + AFTER


def namespaces(thread: ThreadRows) -> Iterator[str]:
    """The checkpoint namespaces of a thread, in key order: one indexed read per namespace (a skip scan).

    A namespace ends at its NUL separator, which no namespace contains, so
    ``CHECKPOINT + ns + AFTER`` is the first key past every row of ``ns``.
    """
    start = CHECKPOINT
    while True:
        found = next(thread.scan(start, CHECKPOINT_END, limit=1), None)
        if found is None:
            return
        ns = found[0][1:].partition(SEP)[0]
        yield ns.decode()
        start = CHECKPOINT + ns + AFTER


_new_tuple = tuple.__new__


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
    # Value rows (packed (version, type, bytes)) and values in the envelope
    # ([version, type, bytes]), by channel.
    values: dict[str, bytes]
    inline: dict[str, list[Any]]
    # (the key's tail from the ``w`` tag, value) of each pending write.
    writes: list[tuple[bytes, bytes]]


def envelope(
    parent_id: str | None,
    checkpoint: tuple[str, bytes],
    metadata: tuple[str, bytes],
    run_id: str | None,
    delta: bool,
    homes: Mapping[str, str],
    inline: Mapping[str, tuple[str, str, bytes] | list[Any]],
) -> bytes:
    """A checkpoint row's value; ``inline``: channel -> (version, serializer type, bytes)."""
    return pack((parent_id, *checkpoint, *metadata, run_id, delta, homes, inline))


def with_homes(row: Row, homes: Mapping[str, str]) -> bytes:
    """The row's envelope with other homes (after values moved)."""
    return envelope(row.parent_id, row.checkpoint, row.metadata, row.run_id, row.delta, homes, row.inline)


def inline_value(envelope_bytes: bytes, channel: str) -> list[Any] | None:
    """The [version, type, bytes] a checkpoint row keeps for ``channel`` in its envelope, if any."""
    fields = unpack(envelope_bytes)
    return fields[8].get(channel) if len(fields) > 8 else None


def decode(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: bytes,
    value: bytes,
    values: dict[str, bytes],
    writes: list[tuple[bytes, bytes]],
) -> Row:
    fields = unpack(value)
    # Envelopes written before the values moved into them have 8 fields.
    parent_id, cp_type, cp_bytes, md_type, md_bytes, run_id, delta, homes = fields[:8]
    # tuple.__new__ itself: Row(...) would run the namedtuple's __new__, a Python frame.
    return _new_tuple(
        Row,
        (
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
            fields[8] if len(fields) > 8 else {},
            writes,
        ),
    )


def next_descending(thread_id: str, checkpoint_ns: str, skip: int, rows: Iterator[tuple[bytes, bytes]]) -> Row | None:
    """The next checkpoint of a reverse scan of one namespace's checkpoint range, or None when ``rows`` run out first.

    ``skip``: the range's prefix length. In reverse key order a checkpoint's
    writes and values come before it; rows of a checkpoint that is not
    there (writes saved before their checkpoint, which LangGraph may do)
    are dropped. Consumes ``rows`` up to and including the checkpoint's row.
    """
    owner = b""
    values: dict[str, bytes] = {}
    writes: list[tuple[bytes, bytes]] = []
    for key, value in rows:
        checkpoint_id, is_part, part = key[skip:].partition(SEP)
        if is_part:
            if checkpoint_id != owner:
                owner, values, writes = checkpoint_id, {}, []
            if part[:1] == WRITE:
                writes.append((part, value))
            else:
                values[part[1:].decode()] = value
            continue
        if checkpoint_id == owner:
            writes.reverse()
            return decode(thread_id, checkpoint_ns, checkpoint_id, value, values, writes)
        return decode(thread_id, checkpoint_ns, checkpoint_id, value, {}, [])
    return None


def rows_descending(
    thread_id: str, checkpoint_ns: str, skip: int, rows: Iterable[tuple[bytes, bytes]]
) -> Iterator[Row]:
    """Every checkpoint of a reverse scan of one namespace's checkpoint range (``next_descending`` in turn)."""
    remaining = iter(rows)
    while (row := next_descending(thread_id, checkpoint_ns, skip, remaining)) is not None:
        yield row


def rows_ascending(thread_id: str, rows: Iterable[tuple[bytes, bytes]]) -> Iterator[Row]:
    """Checkpoints from a forward scan of a thread's checkpoint range (any namespaces)."""
    current: tuple[str, bytes, bytes] | None = None
    values: dict[str, bytes] = {}
    writes: list[tuple[bytes, bytes]] = []
    for key, value in rows:
        checkpoint_ns, _, rest = key[1:].partition(SEP)
        checkpoint_id, is_part, part = rest.partition(SEP)
        if not is_part:
            if current is not None:
                yield decode(thread_id, current[0], current[1], current[2], values, writes)
            current, values, writes = (checkpoint_ns.decode(), checkpoint_id, value), {}, []
        elif current is not None and current[1] == checkpoint_id and current[0] == checkpoint_ns.decode():
            if part[:1] == WRITE:
                writes.append((part, value))
            else:
                values[part[1:].decode()] = value
    if current is not None:
        yield decode(thread_id, current[0], current[1], current[2], values, writes)


def pending_writes(rows: list[tuple[bytes, bytes]], loads: Callable[[tuple[str, bytes]], Any]) -> list[Any]:
    """(task_id, channel, value) of each write row (``(key's tail from ``w``, value)``), ``loads`` its deserializer."""
    found = []
    for part, stored in rows:
        fields = unpack(stored)
        if len(fields) == 3:
            channel, value_type, value_bytes = fields
            found.append((part.split(SEP, 2)[1].decode(), channel, loads((value_type, value_bytes))))
        else:
            task_id, _, channel, _, value_type, value_bytes = fields  # written by earlier releases
            found.append((task_id, channel, loads((value_type, value_bytes))))
    return found


def contains(document: Any, wanted: Any) -> bool:
    """PostgreSQL ``@>`` for metadata filters: dicts partially, the rest by equality."""
    if isinstance(wanted, Mapping):
        return isinstance(document, Mapping) and all(
            key in document and contains(document[key], value) for key, value in wanted.items()
        )
    return bool(document == wanted)
