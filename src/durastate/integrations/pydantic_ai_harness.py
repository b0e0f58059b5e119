"""pydantic-ai-harness on durastate: ``DurastateMemoryStore`` here, ``DurastateStepStore`` (extra ``[pydantic-ai]``).

``DurastateStepStore`` (step persistence) lives in ``pydantic_ai_harness_steps``
and ``DurastateMediaStore`` (snapshot media) in ``pydantic_ai_harness_media``;
both are importable from here too.

A ``pydantic_ai_harness.memory.MemoryStore`` (and ``SearchableMemoryStore``)
for the harness's ``Memory`` capability on any durastate URL (one SQLite
file shared by several processes, or PostgreSQL), built and tested against
``pydantic-ai-harness`` 0.36.0 (pinned in the ``test`` extra)::

    from pydantic_ai_harness.memory import Memory
    from durastate.integrations.pydantic_ai_harness import DurastateMemoryStore

    memory = Memory(store=DurastateMemoryStore(url="sqlite:agents.db"))

The contract (the harness's ``InMemoryStore`` is the reference a
differential test runs against): versioned files addressed by a path of
``[A-Za-z0-9_.-]`` segments joined by ``/``; ``write`` and ``delete``
compare and set on ``expected_version`` (``None``: the file must not
exist), raising ``MemoryConflictError`` otherwise; a mutation given a
``MemoryOperation`` leaves a receipt, and the same operation id again
returns that receipt marked ``replayed`` without touching the file (with
another fingerprint: ``MemoryOperationConflictError``); ``list_paths`` in
path order; ``search`` the harness's own bounded lexical search.

Storage, and why there:

* A **file** is a document (the documents facet) at
  ``pydantic-ai-harness/m/<name>/<path>``: ``{"f": FORMAT, "content": ...,
  "op": last operation id, "uid": ...}``. The compare-and-set is the
  facet's ``expect=`` on the document's revision, inside the mutation's
  transaction, so two writers of one file cannot both pass: on PostgreSQL
  the conditional ``UPDATE`` re-checks the row after the other's commit,
  and the loser gets ``MemoryConflictError`` with nothing written. A
  version is ``<uid>.<revision>``: the revision alone would repeat after a
  delete and a new create (revision 1 again), so a writer holding the old
  file's version would overwrite the new one; ``uid`` is minted at each
  create. ``list_paths`` is the facet's ordered key listing.
* A **receipt** is a kv value (scope ``b"pydantic-ai-harness"``, namespace
  ``b"o" + name``, key the operation id): fingerprint, version, existed, as
  JSON. Written by the mutation's own transaction (with ``put_if_absent``:
  two concurrent mutations with one operation id cannot both leave a
  receipt; the second gets ``MemoryConflictError``). Receipts are kept, as
  the reference keeps them, until the namespace is cleared
  (``store.kv.clear``), and they are per ``name``.

``name`` (default ``"memory"``) separates memories sharing one store.

Every primitive is a coroutine (the harness's API is async only) that runs
its synchronous implementation through the store's ``AsyncCalls`` (one read,
or one transaction with nothing changed before it). JSON only, no pickle.
Refused arguments (a path the harness would refuse, a non-``str`` content,
lone surrogates, a non-positive ``max_chars`` or ``limit``, a wrong type)
raise ``durastate.InvalidRequest`` (a ``ValueError``, as the reference
raises) before anything is written.
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from .. import store as _store
from .._validate import fail, fail_type, positive, text
from ..engines.deferred import RequirementFailed
from ..errors import Conflict
from ._common import StoreHolder
from .pydantic_ai_harness_steps import DurastateStepStore  # first: without the harness, its ImportError says why

# isort: split
from .pydantic_ai_harness_media import DurastateMediaStore, MediaNotFound

# isort: split
from pydantic_ai_harness.memory import (
    MemoryConflictError,
    MemoryFile,
    MemoryMutation,
    MemoryOperation,
    MemoryOperationConflictError,
    MemorySearchResult,
)
from pydantic_ai_harness.memory._store import lexical_search, validate_store_path

__all__ = [
    "DurastateMediaStore",
    "DurastateMemoryStore",
    "DurastateStepStore",
    "MediaNotFound",
    "OperationReused",
    "VersionConflict",
]

SCOPE = b"pydantic-ai-harness"  # kv scope of the receipts
RECEIPTS = b"o"  # + name: the receipts' namespace
FILES = "pydantic-ai-harness/m/"  # + name + "/" + path: the file document
RECEIPT_LOCK = "pydantic-ai-harness/o/"  # + name + "/" + operation id: writers of one receipt, one at a time
# The layout of the file documents and receipts; a later layout reads this one or migrates it.
FORMAT = 1


class VersionConflict(MemoryConflictError, Conflict):
    """The harness's ``MemoryConflictError`` that is also a ``durastate.Conflict``.

    The file's version is not ``expected_version`` (it changed, was deleted,
    or exists when ``None`` was expected). Nothing was written.
    """


class OperationReused(MemoryOperationConflictError, Conflict):
    """The harness's ``MemoryOperationConflictError`` that is also a ``durastate.Conflict``.

    A receipt for this operation id exists with another fingerprint.
    """


def _path(value: Any, *, name: str = "path", prefix: bool = False) -> str:
    path = text(name, value)
    checked = path.removesuffix("/") if prefix else path
    if checked or not prefix:
        try:
            validate_store_path(checked)
        except ValueError:
            fail(f"{name} must be segments of [A-Za-z0-9_.-] (1-200 each, no '..') joined by '/', got {path!r:.80}")
    return path


def _operation(operation: Any) -> MemoryOperation | None:
    if operation is None:
        return None
    if not isinstance(operation, MemoryOperation):
        fail_type("operation", "a MemoryOperation or None", operation)
    text("operation.id", operation.id)
    text("operation.fingerprint", operation.fingerprint, limit=None)
    return operation


def _version(expected_version: Any) -> str | None:
    return None if expected_version is None else text("expected_version", expected_version)


def _content(content: Any) -> str:
    if not isinstance(content, str):
        fail_type("content", "a str", content)
    if not content.isascii():
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"content must be valid unicode (no lone surrogates), got {content!r:.80}")
    return content


class DurastateMemoryStore(StoreHolder):
    """pydantic-ai-harness's ``MemoryStore`` on a durastate store (contract: the module docstring).

    ``DurastateMemoryStore(url=...)`` opens (and on ``close()`` closes) its
    own store; ``store=`` borrows one you opened (``close()`` leaves it
    open). With neither, durastate's default store. ``name`` picks the
    memory within the store. Task-, thread- and process-safe.
    """

    def __init__(self, *, url: str | None = None, store: _store.Store | None = None, name: str = "memory") -> None:
        name = _path(name, name="name")
        super().__init__(url, store, name="durastate-pydantic-ai-harness")
        self.name = name
        self._files = FILES + name + "/"
        self._receipts = RECEIPTS + name.encode()

    def __repr__(self) -> str:
        closed = " (closed)" if self._aio.runner.closed else ""
        return f"<DurastateMemoryStore {self.name!r} on {self.store.url}{closed}>"

    # -- the harness's MemoryStore ------------------------------------------------------

    async def read(self, path: str, *, max_chars: int) -> MemoryFile | None:
        """The file at ``path`` (its first ``max_chars`` characters), or ``None``."""
        return await self._aio.read(self._read_sync, path, max_chars)

    async def get_operation(self, operation: MemoryOperation) -> MemoryMutation | None:
        """The receipt of ``operation`` (``replayed``), or ``None``; ``OperationReused`` on another fingerprint."""
        return await self._aio.read(self._get_operation_sync, operation)

    async def write(
        self,
        path: str,
        content: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        """Create or replace ``path`` if its version is ``expected_version`` (else ``VersionConflict``)."""
        return await self._aio.call(self._mutate_sync, path, _content(content), expected_version, operation)

    async def delete(
        self,
        path: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        """Delete ``path`` if its version is ``expected_version`` (``None``: a no-op on an absent file)."""
        return await self._aio.call(self._mutate_sync, path, None, expected_version, operation)

    async def list_paths(self, prefix: str = "", *, limit: int) -> list[str]:
        """The paths starting with ``prefix``, sorted, at most ``limit``."""
        return await self._aio.read(self._list_paths_sync, prefix, limit)

    async def search(
        self,
        prefix: str,
        query: str,
        *,
        limit: int,
        max_files: int,
        max_chars: int,
        max_file_chars: int,
    ) -> MemorySearchResult:
        """The harness's lexical search over the first ``max_files`` paths under ``prefix``."""
        return await self._aio.read(self._search_sync, prefix, query, limit, max_files, max_chars, max_file_chars)

    # -- implementation ------------------------------------------------------------------

    def _read_sync(self, path: Any, max_chars: Any) -> MemoryFile | None:
        key = self._files + _path(path)
        max_chars = positive("max_chars", max_chars)
        found = self.store.documents.read(key)
        if found is None:
            return None
        content: str = found.data["content"]
        return MemoryFile(
            content=content[:max_chars],
            version=f"{found.data['uid']}.{found.revision}",
            operation_id=found.data["op"],
            truncated=len(content) > max_chars,
        )

    def _receipt(self, operation: MemoryOperation) -> MemoryMutation | None:
        blob = self.store.kv.get(SCOPE, self._receipts, operation.id.encode())
        if blob is None:
            return None
        receipt = orjson.loads(blob)
        if receipt["fingerprint"] != operation.fingerprint:
            raise OperationReused(f"operation id {operation.id!r} was reused with different arguments")
        return MemoryMutation(version=receipt["version"], replayed=True, existed=receipt["existed"])

    def _get_operation_sync(self, operation: Any) -> MemoryMutation | None:
        checked = _operation(operation)
        if checked is None:
            fail_type("operation", "a MemoryOperation", operation)
        return self._receipt(checked)

    def _mutate_sync(self, path: Any, content: str | None, expected_version: Any, operation: Any) -> MemoryMutation:
        """``write`` (``content`` a str) or ``delete`` (``content`` None): one transaction."""
        key = self._files + _path(path)
        expected = _version(expected_version)
        op = _operation(operation)
        if op is not None and self.store.engine.capabilities.deferred_answers:
            try:
                return self._mutate(key, path, content, expected, op, flight=True)
            except RequirementFailed:  # the operation left a receipt: nothing was written; the receipt answers
                pass
        return self._mutate(key, path, content, expected, op, flight=False)

    def _mutate(
        self,
        key: str,
        path: str,
        content: str | None,
        expected: str | None,
        op: MemoryOperation | None,
        *,
        flight: bool,
    ) -> MemoryMutation:
        """The mutation's transaction. ``flight`` (where answers are deferred, with ``op``): the receipt is
        not read first but required absent, under a lock on the operation id (so no other writer can leave
        it before this commits), both sent with the file's read, and the receipt is written without an
        answer: two round trips fewer. A receipt already there fails the requirement (``RequirementFailed``,
        nothing written); the caller then runs the other path, which returns it."""
        verb = "deleted" if content is None else "written"
        receipt_key = op.id.encode() if op is not None else b""
        with self.store.transaction():
            if op is not None and flight:
                self.store.engine.lock_later(RECEIPT_LOCK + self.name + "/" + op.id)
                self.store.kv.require_absent(SCOPE, self._receipts, receipt_key)
            elif op is not None and (receipt := self._receipt(op)) is not None:
                return receipt
            found = self.store.documents.read(key)
            current = None if found is None else f"{found.data['uid']}.{found.revision}"
            if current != expected:
                raise VersionConflict(f"memory path {path!r} changed before it could be {verb}")
            version: str | None = None
            try:
                if content is not None:
                    uid = secrets.token_hex(8) if found is None else found.data["uid"]
                    document = {"f": FORMAT, "content": content, "op": op.id if op else None, "uid": uid}
                    revision = self.store.documents.write(key, document, expect=found.revision if found else 0)
                    version = f"{uid}.{revision}"
                elif found is not None and not self.store.documents.delete(key, expect=found.revision):
                    raise Conflict(f"document {key!r} was deleted or changed meanwhile")
            except RequirementFailed:
                raise
            except Conflict as exc:  # another writer committed since the read: the check above lost the race
                raise VersionConflict(f"memory path {path!r} changed before it could be {verb}") from exc
            mutation = MemoryMutation(version=version, replayed=False, existed=found is not None)
            if op is not None:
                receipt_json = orjson.dumps(
                    {"f": FORMAT, "fingerprint": op.fingerprint, "version": version, "existed": found is not None}
                )
                if flight:  # under the operation's lock: no one else writes this receipt before the commit
                    self.store.kv.put(SCOPE, self._receipts, receipt_key, receipt_json)
                elif not self.store.kv.put_if_absent(SCOPE, self._receipts, receipt_key, receipt_json):
                    raise VersionConflict(f"operation {op.id!r} on {path!r} ran concurrently elsewhere")
            return mutation

    def _paths(self, prefix: str, limit: int) -> list[str]:
        page = self.store.documents.list(self._files + prefix, limit=limit)
        start = len(self._files)
        return [item.key[start:] for item in page.items]

    def _list_paths_sync(self, prefix: Any, limit: Any) -> list[str]:
        return self._paths(_path(prefix, name="prefix", prefix=True), positive("limit", limit))

    def _search_sync(
        self, prefix: Any, query: Any, limit: Any, max_files: Any, max_chars: Any, max_file_chars: Any
    ) -> MemorySearchResult:
        prefix = _path(prefix, name="prefix", prefix=True)
        query = text("query", query, limit=None)
        bounds = [limit, max_files, max_chars, max_file_chars]
        for label, bound in zip(("limit", "max_files", "max_chars", "max_file_chars"), bounds, strict=True):
            if type(bound) is not int:
                fail_type(label, "an int", bound)
        if not query.split() or min(bounds) <= 0:  # the reference answers these with nothing, not an error
            return MemorySearchResult(matches=[], scanned=0, truncated=False)
        paths = self._paths(prefix, max_files + 1)
        # Read one by one, as the harness's FileStore does: a file deleted meanwhile is skipped (and
        # reported as truncated), never an error.
        found = [self.store.documents.read(self._files + path) for path in paths[:max_files]]
        files = [
            (path, doc.data["content"]) for path, doc in zip(paths[:max_files], found, strict=True) if doc is not None
        ]
        result = lexical_search(
            [(path, content[:max_file_chars]) for path, content in files],
            query,
            limit=limit,
            max_files=max_files,
            max_chars=max_chars,
            score_prefix=prefix,
        )
        truncated = (
            any(len(content) > max_file_chars for _, content in files)
            or len(paths) > max_files
            or len(files) < len(found)
        )
        return MemorySearchResult(
            matches=result.matches, scanned=result.scanned, truncated=result.truncated or truncated
        )
