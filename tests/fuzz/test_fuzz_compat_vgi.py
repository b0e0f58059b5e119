"""Fuzz every public entry point of ``durastate.compat.vgi``: documented refusals only, refusals change nothing.

Entry points: every public method of ``FunctionStorage`` and of
``ShardedStorage`` (the storage and its ``shard_key``), of ``BoundStorage``
and ``TransactionBoundStorage`` (with their constructors' ``execution_id``,
``attach_plaintext``, ``request``, ``shard_key`` drawn in the same example,
over either backend), the constructors (``FunctionStorage(db_path)``,
``FunctionStorage.from_store``, ``ShardedStorage(db_path, shards=)``),
``attach_catalog_bytes`` and the static helpers (``pack_int_key``, the Arrow
ones).

Arguments come from each method's type hints (bytes, lists, pairs, ints,
``str`` shard keys, with the addresses the store already holds, bytearray
and memoryview, ``FrameworkNS`` members and reserved namespaces) mixed with
``_machinery.HOSTILE``. The adapter's contract (its module docstring):
wrong types raise ``TypeError``, wrong values ``ValueError`` (int64
overflows an error that is also ``OverflowError``), engine failures
durastate's errors; never a driver error, and a refused call changes
nothing (a raw dump of every table is compared). Where the adapter runs the
seed's own code on a value the seed never checked (``attach_catalog_bytes``,
``pack_int_key``'s ``to_bytes``, the Arrow helpers' pyarrow calls), the
error the seed raises there is accepted as raised; those are listed in
``SEED_RAISES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import strategies as st

import durastate
from durastate.compat import vgi
from durastate.compat.vgi import (
    BoundStorage,
    FrameworkNS,
    FunctionStorage,
    ShardedStorage,
    TransactionBoundStorage,
    attach_catalog_bytes,
)

from ._machinery import (
    HOSTILE,
    INT64,
    Snapshot,
    Target,
    arguments,
    check_refusal,
    dumping,
    for_hint,
    fuzz_calls,
    fuzz_target,
    public_methods,
)

__all__ = ["fuzz_target"]

SCOPE, NS = b"s", b"n"
KNOWN_BYTES = [SCOPE, NS, b"a", b"b", b"c", b"log", b"max", b"min", b"exec", b"txn", b""]
UUID16 = bytes(range(16))

BYTES = st.one_of(
    st.sampled_from(KNOWN_BYTES),
    st.binary(max_size=24),
    st.binary(max_size=8).map(bytearray),
    st.binary(max_size=8).map(memoryview),
    st.sampled_from([b"_vgi/mine", b"\x1f", b"\xff" * 3, b"k" * 3000, *FrameworkNS]),
)
INTS = st.one_of(
    st.integers(-(2**66), 2**66),
    st.sampled_from([0, -1, 1, -2, INT64 - 1, INT64, -INT64, -INT64 - 1, 2**64, True, False]),
)
SHARD_KEYS = st.one_of(st.sampled_from(["", "a", "att-" + UUID16.hex(), "\ud800", "\x00", "é"]), st.text(max_size=6))
RECORD_BATCH = pa.RecordBatch.from_pydict({"x": [1, 2]})


def _vgi_hint(hint: Any) -> st.SearchStrategy[Any]:
    """vgi's hints, with the values its callers pass (and the edges)."""
    if hint is bytes:
        return BYTES
    if hint is int:
        return INTS
    if hint is str:
        return SHARD_KEYS
    if hint is bool:
        return st.one_of(st.booleans(), st.sampled_from([0, 1, "", "yes", None]))
    text = str(hint)
    if "RecordBatch" in text:
        return st.one_of(st.just(RECORD_BATCH), st.lists(st.just(RECORD_BATCH), max_size=2))
    if "FrameworkNS" in text:
        return BYTES
    return for_hint(hint)


def _args(method: Callable[..., Any], **overrides: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return arguments(method, overrides, by_hint=_vgi_hint, names={"pa": pa})


# The seed's own code runs on what it never checked; the error it raises there is the contract.
SEED_RAISES: dict[str, tuple[type[BaseException], ...]] = {
    "attach_catalog_bytes": (TypeError,),  # attach_plaintext[16:] on a non-sequence
    "pack_int_key": (OverflowError,),  # int.to_bytes(8, ...) outside int64
    # pyarrow's errors for bytes that are not an IPC stream (ArrowInvalid, OSError "Invalid IPC stream", ...).
    "deserialize_record_batch": (TypeError, ValueError, OSError),
    "queue_pop_batch": (TypeError, ValueError, OSError),  # the same, for a popped item
}
# Documented refusals: TypeError for types, ValueError for values (int64
# overflows are also OverflowError), durastate errors for engine failures.
ALLOWED: tuple[type[BaseException], ...] = (TypeError, ValueError, durastate.DurastateError)


@dataclass
class Backends:
    target: Target
    plain: FunctionStorage
    sharded: ShardedStorage
    opened: list[Any] = field(default_factory=list)


@pytest.fixture(scope="module")
def backends(fuzz_target: Target) -> Iterator[Backends]:
    plain = FunctionStorage(fuzz_target.url)
    sharded = ShardedStorage(fuzz_target.url)
    for storage, kwargs in ((plain, {}), (sharded, {"shard_key": "a"}), (sharded, {"shard_key": ""})):
        storage.state_put_many(SCOPE, NS, [(b"a", b"1"), (b"b", b"2")], **kwargs)
        storage.state_append(SCOPE, NS, b"log", b"x", **kwargs)
        storage.state_counter_set(SCOPE, NS, b"max", INT64 - 2, **kwargs)
        storage.state_counter_set(SCOPE, NS, b"min", -INT64 + 1, **kwargs)
        storage.queue_push(b"exec", [b"job", BoundStorage.serialize_record_batch(RECORD_BATCH)], **kwargs)
        storage.state_put_many(b"exec", NS, [(b"a", b"1")], **kwargs)
    try:
        yield Backends(fuzz_target, plain, sharded)
    finally:
        sharded.__exit__(None, None, None)
        plain.__exit__(None, None, None)


# -- entry points ------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One public entry point: how to draw a call and how to make it."""

    name: str
    draw: st.SearchStrategy[dict[str, Any]]
    call: Callable[[Backends, dict[str, Any]], Any]
    allowed: tuple[type[BaseException], ...] = ALLOWED
    # A refusal after the seed's own destructive step (queue_pop_batch pops, then decodes).
    may_change: bool = False


def _storage_entries() -> list[Entry]:
    entries = []
    for cls, pick in ((FunctionStorage, "plain"), (ShardedStorage, "sharded")):
        for name in public_methods(cls, {"from_store"}):  # a constructor (below)
            method = getattr(cls, name)

            def call(b: Backends, kw: dict[str, Any], name: str = name, pick: str = pick) -> Any:
                return getattr(getattr(b, pick), name)(**kw)

            entries.append(Entry(f"{cls.__name__}.{name}", _args(method), call))
    return entries


_BOUND_CTOR = st.fixed_dictionaries(
    {"backend": st.sampled_from(["plain", "sharded"]), "execution_id": st.one_of(BYTES, HOSTILE)},
    optional={
        "attach_plaintext": st.one_of(st.none(), st.just(UUID16 + b"catalog"), BYTES, HOSTILE),
        "request": st.one_of(st.none(), HOSTILE),
    },
)
_TXN_CTOR = st.fixed_dictionaries(
    {"backend": st.sampled_from(["plain", "sharded"]), "transaction_opaque_data": st.one_of(BYTES, HOSTILE)},
    optional={
        "attach_plaintext": st.one_of(st.none(), st.just(UUID16), BYTES, HOSTILE),
        "request": st.one_of(st.none(), HOSTILE),
        "shard_key": st.one_of(st.none(), SHARD_KEYS, HOSTILE),
    },
)


def _bound_entries() -> list[Entry]:
    entries = []
    for cls, ctor in ((BoundStorage, _BOUND_CTOR), (TransactionBoundStorage, _TXN_CTOR)):
        for name in public_methods(cls):
            method = getattr(cls, name)

            def call(b: Backends, kw: dict[str, Any], cls: type = cls, name: str = name) -> Any:
                made = dict(kw["ctor"])
                backend = getattr(b, made.pop("backend"))
                return getattr(cls(backend, **made), name)(**kw["args"])

            drawn = st.fixed_dictionaries({"ctor": ctor, "args": _args(method)})
            entries.append(
                Entry(
                    f"{cls.__name__}.{name}",
                    drawn,
                    call,
                    allowed=ALLOWED + SEED_RAISES.get(name, ()),
                    may_change=name == "queue_pop_batch",
                )
            )
    return entries


PATHS = st.one_of(
    st.sampled_from(
        ["", ":memory:", "memory:", "rel.db", "missing/dir/x.db", "\x00", "\ud800", "a" * 300, "sqlite:", "sqlite:x.db"]
    ),
    st.sampled_from([Path("p.db"), Path(""), b"b.db", 5, 1.5, object(), [], None]),
)


def _open_storage(b: Backends, kw: dict[str, Any]) -> Any:
    db_path = b.target.url if kw["db_path"] == "TARGET" else kw["db_path"]
    opened = FunctionStorage(db_path)
    opened.__exit__(None, None, None)


def _from_store(b: Backends, kw: dict[str, Any]) -> Any:
    store = b.plain.store if kw["store"] == "STORE" else kw["store"]
    return FunctionStorage.from_store(store).state_get_many(SCOPE, NS, [b"a"])


def _open_sharded(b: Backends, kw: dict[str, Any]) -> Any:
    made = {k: (b.target.url if v == "TARGET" else v) for k, v in kw.items()}
    if isinstance(made.get("shards"), list):
        made["shards"] = [b.target.url if v == "TARGET" else v for v in made["shards"]]
    with ShardedStorage(**made) as opened:
        return opened.state_get_many(SCOPE, NS, [b"a"], shard_key="a")


def _constructor_entries() -> list[Entry]:
    target_or_path = st.one_of(st.just("TARGET"), PATHS)
    return [
        Entry("FunctionStorage()", st.fixed_dictionaries({"db_path": target_or_path}), _open_storage),
        Entry(
            "FunctionStorage.from_store",
            st.fixed_dictionaries({"store": st.one_of(st.just("STORE"), HOSTILE)}),
            _from_store,
        ),
        Entry(
            "ShardedStorage()",
            st.fixed_dictionaries(
                {},
                optional={
                    "db_path": target_or_path,
                    "shards": st.one_of(
                        st.lists(target_or_path, max_size=3),
                        st.dictionaries(
                            st.one_of(st.text(max_size=3), st.sampled_from([5, None, b"n", "\ud800"])),
                            target_or_path,
                            max_size=2,
                        ),
                        HOSTILE,
                    ),
                },
            ),
            _open_sharded,
        ),
    ]


def _helper_entries() -> list[Entry]:
    def attach(b: Backends, kw: dict[str, Any]) -> Any:
        return attach_catalog_bytes(**kw)

    def static(name: str) -> Callable[[Backends, dict[str, Any]], Any]:
        return lambda b, kw: getattr(BoundStorage, name)(**kw)

    entries = [
        Entry(
            "attach_catalog_bytes",
            _args(attach_catalog_bytes),
            attach,
            allowed=ALLOWED + SEED_RAISES["attach_catalog_bytes"],
        )
    ]
    for name in ("pack_int_key", "serialize_record_batch", "deserialize_record_batch"):
        extra = {"data": st.sampled_from([BoundStorage.serialize_record_batch(RECORD_BATCH), b"\xff\xff\xff\xff"])}
        entries.append(
            Entry(
                f"BoundStorage.{name}",
                _args(getattr(BoundStorage, name), **(extra if name.startswith("de") else {})),
                static(name),
                allowed=ALLOWED + SEED_RAISES.get(name, ()),
            )
        )
    return entries


# The Arrow helpers and pack_int_key are static: fuzzed once, not per bound view.
_STATIC = {"pack_int_key", "serialize_record_batch", "deserialize_record_batch"}
ENTRIES = [
    *_storage_entries(),
    *(e for e in _bound_entries() if e.name.split(".")[1] not in _STATIC),
    *_constructor_entries(),
    *_helper_entries(),
]


# Entry points that open a store on the target (and may create tables there).
OPENERS = {"FunctionStorage()", "ShardedStorage()"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_vgi_refuses_only_as_documented_and_refusals_change_nothing(
    backends: Backends, entry: Entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths the constructors are given land here
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # FunctionStorage(None)'s default folder
    dump = dumping(backends.target.dump, entry.name in OPENERS)
    as_raised = SEED_RAISES.get(entry.name.split(".")[-1], ())

    def refused(label: str, exc: Exception, before: Snapshot) -> None:
        check_refusal(
            label,
            exc,
            before,
            dump,
            entry.allowed,
            as_raised=as_raised,
            may_change=entry.may_change and isinstance(exc, as_raised),
        )

    fuzz_calls(
        backends.target.dialect, entry.name, entry.draw, dump, lambda kwargs: entry.call(backends, kwargs), refused
    )


def test_every_public_entry_point_is_fuzzed() -> None:
    """A method added to a vgi class without a fuzz entry fails here."""
    names = {e.name for e in ENTRIES}
    for cls in (FunctionStorage, ShardedStorage, BoundStorage, TransactionBoundStorage):
        for name in public_methods(cls, {"from_store"}):
            assert f"{cls.__name__}.{name}" in names
    assert "FunctionStorage.from_store" in names
    public = {n for n in vgi.__all__ if callable(getattr(vgi, n)) and not isinstance(getattr(vgi, n), type)}
    assert public <= names
