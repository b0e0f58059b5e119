"""``Documents.read_as``: ``read`` building the caller's own type (used by compat.functualize)."""

from __future__ import annotations

from typing import Any

import pytest

import durastate
from durastate.documents import Document, UnreadableDocument
from durastate.testing.conformance.documents import plant


def _pair(data: dict[str, Any], revision: int) -> tuple[str, dict[str, Any], int]:
    return ("built", data, revision)


def test_read_as_builds_what_read_returns(store: durastate.Store) -> None:
    docs = store.documents
    revision = docs.write("k", {"v": 1})
    docs.write("k", {"v": 2}, expect=revision)
    assert docs.read_as("k", _pair) == ("built", {"v": 2}, 2)
    assert docs.read("k") == Document({"v": 2}, 2)
    assert docs.read_as("absent", _pair) is None


def test_read_as_refuses_what_read_refuses(store: durastate.Store) -> None:
    plant(store, "bad", b"[1, 2]")
    with pytest.raises(UnreadableDocument, match="expected an object"):
        store.documents.read_as("bad", _pair)
    with pytest.raises(durastate.InvalidRequest):
        store.documents.read_as("nul\x00key", _pair)


def test_read_as_refuses_a_build_that_is_not_callable(store: durastate.Store) -> None:
    store.documents.write("k", {"v": 1})
    with pytest.raises(durastate.InvalidRequest, match="build must be callable"):
        store.documents.read_as("k", None)  # type: ignore[arg-type]
