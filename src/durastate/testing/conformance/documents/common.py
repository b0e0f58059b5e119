"""Conformance for ``store.documents``: the helpers and strategies its test modules share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import strategies as st

import durastate
from durastate import Conflict
from durastate.documents import (
    Documents,
)
from durastate.engines.base import WRITE

__all__ = []

# Payloads no JSON decoder accepts, or that decode to something not an object.
UNDECODABLE = [b"", b"\xff\xfe\x00", b"{not json", b'{"a": 1', b"NaN", b'{"a": NaN}']


NOT_AN_OBJECT = [b"[1, 2]", b"42", b'"text"', b"null", b"true"]


def plant(store: durastate.Store, key: str, payload: bytes, revision: int = 1) -> None:
    """Store ``payload`` at ``key`` bypassing the facet (as another program might)."""
    engine = store.engine
    engine.execute(
        engine.sql(WRITE("INSERT INTO {p}documents (key, payload, revision) VALUES (?, ?, ?)")),
        (key, payload, revision),
    )


def snapshot(docs: Documents) -> list[tuple[str, bytes, int]]:
    """Every stored document, raw: what a rejected call must leave alone."""
    out = []
    for key in docs.iter_keys():
        raw = docs.read_raw(key)
        assert raw is not None
        out.append((key, raw.payload, raw.revision))
    return out


def size_of(data: dict[str, Any]) -> int:
    return len(orjson.dumps(data))


def cas_increment(docs: Documents, key: str) -> int:
    """Add 1 to ``docs[key]["n"]`` with a CAS retry loop; return the conflicts met."""
    conflicts = 0
    while True:
        doc = docs.read(key)
        assert doc is not None
        try:
            docs.write(key, {"n": doc.data["n"] + 1}, expect=doc.revision)
            return conflicts
        except Conflict:
            conflicts += 1


def locked_increment(docs: Documents, *keys: str) -> None:
    """Add 1 to ``docs[k]["n"]`` for each key, read-modify-write under ``lock(*keys)``."""
    with docs.lock(*keys):
        for key in keys:
            doc = docs.read(key)
            n = 0 if doc is None else doc.data["n"]
            docs.write(key, {"n": n + 1})


def run_threads(target: Callable[[], None], count: int, timeout: float = 60.0) -> None:
    threads = [threading.Thread(target=target, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread hung (deadlock?)"


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)


JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)


DOCS = st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4)


MODEL_KEYS = st.sampled_from(["a", "a/", "a/b", "a/c", "b", "a.bak", "é", ""])


MODEL_PREFIXES = st.sampled_from(["", "a", "a/", "a.", "b", "é", "z"])
