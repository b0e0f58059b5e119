"""pydantic-ai-harness media on durastate: ``DurastateMediaStore`` (extra ``[pydantic-ai]``).

A ``pydantic_ai_harness.media.MediaStore``: content-addressed bytes, as the
harness's step stores use to keep large snapshot parts (``BinaryContent``,
long text) out of the snapshot (``media_store=``). Built and tested against
``pydantic-ai-harness`` 0.36.0 (its ``SqliteMediaStore`` is the reference a
differential test runs against)::

    from durastate.integrations.pydantic_ai_harness import DurastateMediaStore, DurastateStepStore

    steps = DurastateStepStore(url="sqlite:agents.db")  # media_store="auto": this, on the same store
    media = DurastateMediaStore(url="sqlite:agents.db")  # or on its own

The contract (the harness's ``MediaStore``): ``put(data)`` returns the
canonical ``media+sha256://<hex>`` URI of ``data`` and stores it once (a
second ``put`` of the same bytes is a no-op, its ``context`` ignored, as
``SqliteMediaStore``'s ``INSERT OR IGNORE``); ``get`` returns the bytes,
``exists`` whether they are stored, ``get_metadata`` the first put's
``context.metadata``; ``get`` / ``get_metadata`` of bytes never stored raise
``MediaNotFound`` (a ``FileNotFoundError``, as the harness's stores raise,
and a ``durastate.NotFound``); a URI that is not ``media+sha256://`` and 64
lowercase hex digits raises ``durastate.InvalidRequest`` (a ``ValueError``,
as the harness's ``parse_media_uri``). ``public_url`` asks the
``public_url=`` resolver (``None`` without one).

Storage: one kv value per blob (scope ``b"pydantic-ai-harness"``, namespace
``b"media/" + name``, key the hex digest): a JSON header line (format,
media type, metadata, size), then the bytes. ``put_if_absent`` makes
concurrent puts of one blob store it once. A blob larger than the store's
``max_value_size`` (64 MiB by default) is refused with ``InvalidRequest``.
Nothing deletes blobs (the harness's stores keep them too: a blob may be
shared by snapshots and runs); ``store.kv.clear`` of the namespace does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .. import store as _store
from .._validate import as_bytes, fail, fail_type, text
from ..errors import NotFound
from ._common import StoreHolder

try:
    from pydantic_ai_harness.media import MediaContext, PublicUrlResolver, media_uri_for, parse_media_uri
    from pydantic_ai_harness.media._store import _resolve_public_url
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "durastate.integrations.pydantic_ai_harness needs pydantic-ai-harness: "
        f"pip install 'durastate[pydantic-ai]' ({exc})"
    ) from exc

__all__ = ["DurastateMediaStore", "MediaNotFound"]

SCOPE = b"pydantic-ai-harness"
MEDIA = b"media/"  # + name: the blobs' namespace
FORMAT = 1  # the layout of a blob's value; a later layout reads this one or migrates it
NO_CONTEXT = MediaContext()  # the default context of every MediaStore method (frozen)


class MediaNotFound(FileNotFoundError, NotFound):
    """No blob is stored under this URI: the harness's ``FileNotFoundError``, also a ``durastate.NotFound``."""


def digest_of(uri: Any) -> bytes:
    """The kv key of ``uri`` (its hex digest); ``InvalidRequest`` unless it is a ``media+sha256://`` URI."""
    try:
        return parse_media_uri(text("uri", uri, limit=None)).encode()
    except ValueError:  # the harness's own check (or ours: not a str, lone surrogates)
        pass
    fail(f"uri must be media+sha256:// and 64 lowercase hex digits, got {uri!r:.100}")


def _context(context: Any) -> MediaContext:
    if not isinstance(context, MediaContext):
        fail_type("context", "a pydantic_ai_harness MediaContext", context)
    if context.media_type is not None:
        text("context.media_type", context.media_type, limit=None)
    for key, value in context.metadata.items():
        if type(key) is not str or type(value) is not str:
            fail(f"context.metadata must map str to str, got {key!r}: {value!r:.80}")
    return context


def blob_value(data: bytes, context: MediaContext) -> bytes:
    """What is stored for ``data``: the JSON header line, then the bytes."""
    header = {"f": FORMAT, "media_type": context.media_type, "metadata": dict(context.metadata), "size": len(data)}
    return orjson.dumps(header) + b"\n" + data


def blob_data(value: bytes) -> bytes:
    """The bytes of a stored blob value."""
    return value.partition(b"\n")[2]


class DurastateMediaStore(StoreHolder):
    """pydantic-ai-harness's ``MediaStore`` on a durastate store (contract: the module docstring).

    ``url=`` opens (and ``close()`` closes) its own store; ``store=`` borrows
    one. ``name`` separates blob sets sharing one store (``"media"``, the
    one a ``DurastateStepStore``'s ``media_store="auto"`` uses). Task-,
    thread- and process-safe.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        store: _store.Store | None = None,
        name: str = "media",
        public_url: PublicUrlResolver | None = None,
    ) -> None:
        name = text("name", name)
        if not name:
            fail("name must not be empty")
        if public_url is not None and not callable(public_url):
            fail_type("public_url", "a callable or None", public_url)
        super().__init__(url, store, name="durastate-pydantic-ai-harness-media")
        self.name = name
        self.namespace = MEDIA + name.encode()
        self._public_url = public_url

    def __repr__(self) -> str:
        closed = " (closed)" if self._aio.runner.closed else ""
        return f"<DurastateMediaStore {self.name!r} on {self.store.url}{closed}>"

    # -- the harness's MediaStore ---------------------------------------------------------

    async def put(self, data: bytes, *, context: MediaContext = NO_CONTEXT) -> str:
        """Store ``data`` once; its ``media+sha256://`` URI."""
        return await self._aio.call(self._put_sync, data, context)

    async def get(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> bytes:
        """The bytes stored under ``uri``; ``MediaNotFound`` if none."""
        return blob_data(await self._aio.read(self._value_sync, uri, context))

    async def exists(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> bool:
        """Whether bytes are stored under ``uri``."""
        return await self._aio.read(self._exists_sync, uri, context)

    async def public_url(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> str | None:
        """The ``public_url=`` resolver's URL for ``uri`` (``None`` without a resolver)."""
        digest_of(uri)
        return await _resolve_public_url(self._public_url, uri, _context(context))

    async def get_metadata(self, uri: str, *, context: MediaContext = NO_CONTEXT) -> Mapping[str, str]:
        """The metadata of the first ``put`` of these bytes; ``MediaNotFound`` if none."""
        value = await self._aio.read(self._value_sync, uri, context)
        metadata: dict[str, str] = orjson.loads(value.partition(b"\n")[0])["metadata"]
        return metadata

    # -- implementation ------------------------------------------------------------------

    def put_many_sync(self, blobs: Mapping[str, tuple[bytes, MediaContext]]) -> None:
        """Store each ``uri -> (data, context)`` not stored yet (in the caller's transaction, if any)."""
        for uri, (data, context) in blobs.items():
            self.store.kv.put_if_absent(SCOPE, self.namespace, digest_of(uri), blob_value(data, context))

    def get_many_sync(self, uris: list[str]) -> dict[str, bytes]:
        """The stored bytes of each of ``uris`` that is stored."""
        values = self.store.kv.get_many(SCOPE, self.namespace, [digest_of(uri) for uri in uris])
        return {uri: blob_data(value) for uri, value in zip(uris, values, strict=True) if value is not None}

    def _put_sync(self, data: Any, context: Any) -> str:
        data = as_bytes("data", data)
        uri = media_uri_for(data)
        self.put_many_sync({uri: (data, _context(context))})
        return uri

    def _value_sync(self, uri: Any, context: Any) -> bytes:
        key = digest_of(uri)
        _context(context)
        value = self.store.kv.get(SCOPE, self.namespace, key)
        if value is None:
            raise MediaNotFound(f"media not found: {uri}")
        return value

    def _exists_sync(self, uri: Any, context: Any) -> bool:
        key = digest_of(uri)
        _context(context)
        return self.store.kv.get(SCOPE, self.namespace, key) is not None
