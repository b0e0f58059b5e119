"""ADK artifacts on durastate: ``DurastateArtifactService`` (a ``BaseArtifactService``).

Storage: the kv facet, scope ``b"adk-artifacts"``. One namespace per
artifact: ``s/<app>/<user>/<session>/<filename>`` for a session-scoped one,
``u/<app>/<user>/<filename>`` for a user-scoped one (a ``filename`` starting
with ``user:``), each segment escaped as in ``_common`` so that listing a
session's or a user's artifacts is an exact namespace prefix. Version ``v``
is the value under key ``v`` (8 big-endian bytes): the artifact part and its
``ArtifactVersion`` as JSON. Versions are handed out by a counter at the same
address (``kv.incr``, the save's first statement: the counter's row lock on
PostgreSQL, SQLite's single writer) so that two processes saving one
artifact at once get two versions, never one; the counter and the value are
one transaction. ``delete_artifact`` removes the versions and the counter,
so a later save starts again at version 0, as ADK's services do. kv rather
than documents: a version is written once and read by its number, and the
counter is exactly ADK's "number of versions so far".

Where it follows ``InMemoryArtifactService`` (a differential test compares
every call with it): the path checks (``validate_path_segment``; a
session-scoped artifact needs a ``session_id`` that does not start with the
reserved ``user``), ADK's ``InputValidationError`` for them (raised here as
``ArtifactInputError``, also a ``durastate.InvalidRequest``); versions from
0; ``mime_type`` from the part (inline data's, ``text/plain`` for text, file
data's; none for an ``artifact://`` reference, whose scope is checked at
save); ``load_artifact`` follows references (at most ADK's depth) and
returns ``None`` for a missing version, an empty part or a rewind
tombstone; ``list_artifact_keys`` lists the session's and the user's
filenames, sorted. ``canonical_uri`` is ``durastate://apps/<app>/users/
<user>/[sessions/<session>/]artifacts/<filename>/versions/<v>`` (ADK's
in-memory service says ``memory://``).

Refused with ``durastate.InvalidRequest``: parts or metadata JSON cannot
hold (no pickle), names that are not strings.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, cast

import orjson
from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import ArtifactVersion, BaseArtifactService, ensure_part
from google.adk.platform import time as platform_time
from google.genai import types

from ... import store as _store
from ..._validate import fail_type
from .._common import StoreHolder
from ._common import ArtifactInputError, dump_model, json_safe, name, segment, unsegment

__all__ = ["SCOPE", "DurastateArtifactService"]

SCOPE = b"adk-artifacts"
NEXT = b"next"  # the version counter; version keys are 8 bytes, so they never meet it
USER_PREFIX = "user:"


def _version_key(version: int) -> bytes:
    return version.to_bytes(8, "big")


def _checked(call: Any, *args: Any) -> Any:
    """ADK's own path check, its ``InputValidationError`` raised as ours (both at once)."""
    try:
        return call(*args)
    except ArtifactInputError:
        raise
    except ValueError as exc:  # ADK's InputValidationError is a ValueError
        raise ArtifactInputError(str(exc)) from None


class DurastateArtifactService(StoreHolder, BaseArtifactService):
    """ADK's ``BaseArtifactService`` on a durastate store (see the module docstring).

    ``url=`` opens (and ``close()`` closes) its own store, ``store=`` borrows
    one; neither: durastate's default store.
    """

    def __init__(self, *, url: str | None = None, store: _store.Store | None = None) -> None:
        super().__init__(url, store, name="durastate-adk-artifacts")

    # -- ADK's BaseArtifactService ------------------------------------------------

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        """Store ``artifact`` as the next version; that version's number (0 for the first)."""
        now = platform_time.get_time()  # ADK's clock: a context variable, read in the caller's context
        return await self._aio.call(self._save, app_name, user_id, filename, artifact, session_id, custom_metadata, now)

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        """The part saved as ``version`` (``None``: the latest), references followed; ``None`` if absent."""
        return await self._aio.read(
            self._load, app_name, user_id, filename, session_id, version, artifact_util._MAX_ARTIFACT_REFERENCE_DEPTH
        )

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str | None = None) -> list[str]:
        """The filenames of the session's and the user's artifacts, sorted."""
        return await self._aio.read(self._keys, app_name, user_id, session_id)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        """Remove every version of the artifact (nothing happens if there is none)."""
        await self._aio.call(self._delete, app_name, user_id, filename, session_id)

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        """The artifact's version numbers, oldest first (``[]`` if none)."""
        return [v.version for v in await self._aio.read(self._versions, app_name, user_id, filename, session_id)]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        """Every version's ``ArtifactVersion``, oldest first."""
        return await self._aio.read(self._versions, app_name, user_id, filename, session_id)

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        """One version's ``ArtifactVersion`` (``None``: the latest); ``None`` if absent."""
        found = await self._aio.read(self._entry, app_name, user_id, filename, session_id, version)
        return None if found is None else found[1]

    # -- addresses -----------------------------------------------------------------

    @staticmethod
    def _namespace(app: Any, user: Any, filename: Any, session_id: Any) -> bytes:
        """The artifact's kv namespace, after ADK's path checks (``InMemoryArtifactService._artifact_path``)."""
        app, user, filename = name("app_name", app), name("user_id", user), name("filename", filename)
        _checked(artifact_util.validate_path_segment, app, "app_name")
        _checked(artifact_util.validate_path_segment, user, "user_id")
        if filename.startswith(USER_PREFIX):
            return f"u/{segment(app)}/{segment(user)}/{segment(filename)}".encode()
        if session_id is None:
            raise ArtifactInputError("Session ID must be provided for session-scoped artifacts.")
        session_id = name("session_id", session_id)
        _checked(artifact_util.validate_path_segment, session_id, "session_id")
        return f"s/{segment(app)}/{segment(user)}/{segment(session_id)}/{segment(filename)}".encode()

    # -- the synchronous implementation ------------------------------------------------

    def _save(
        self,
        app: Any,
        user: Any,
        filename: Any,
        artifact: Any,
        session_id: Any,
        custom_metadata: Any,
        now: float,
    ) -> int:
        user_scoped = isinstance(filename, str) and filename.startswith(USER_PREFIX)
        if not user_scoped:
            if session_id is None:
                raise ArtifactInputError("Session ID must be provided for session-scoped artifacts.")
            _checked(artifact_util._validate_session_id_for_flat_storage, name("session_id", session_id))
        if not isinstance(artifact, (types.Part, dict)):
            fail_type("artifact", "a google.genai.types.Part or a dict", artifact)
        if custom_metadata is not None and not isinstance(custom_metadata, dict):
            fail_type("custom_metadata", "a dict or None", custom_metadata)
        part = _checked(ensure_part, artifact)
        ns = self._namespace(app, user, filename, session_id)
        mime_type = self._mime_type(part, name("app_name", app), name("user_id", user), session_id)
        metadata = json_safe("custom_metadata", copy.deepcopy(custom_metadata) if custom_metadata else {})
        blob_part = dump_model("artifact", part)
        kv = self.store.kv
        with self.store.transaction():
            version = kv.incr(SCOPE, ns, NEXT) - 1  # the counter first: concurrent saves serialise here
            uri = self._uri(app, user, filename, session_id if not user_scoped else None, version)
            meta = ArtifactVersion(
                version=version, canonical_uri=uri, custom_metadata=metadata, create_time=now, mime_type=mime_type
            )
            record = b'{"part":' + blob_part + b',"meta":' + dump_model("artifact version", meta) + b"}"
            kv.put(SCOPE, ns, _version_key(version), record)
        return version

    @staticmethod
    def _uri(app: str, user: str, filename: str, session_id: str | None, version: int) -> str:
        where = f"sessions/{session_id}/" if session_id is not None else ""
        return f"durastate://apps/{app}/users/{user}/{where}artifacts/{filename}/versions/{version}"

    @staticmethod
    def _mime_type(part: types.Part, app: str, user: str, session_id: str | None) -> str | None:
        """ADK's rule (``InMemoryArtifactService.save_artifact``), its refusals as ``ArtifactInputError``."""
        if part.inline_data is not None:
            return part.inline_data.mime_type
        if part.text is not None:
            return "text/plain"
        file_data = part.file_data
        if file_data is None:
            raise ArtifactInputError("Not supported artifact type.")
        if not artifact_util.is_artifact_ref(part):
            return file_data.mime_type
        parsed = artifact_util.parse_artifact_uri(cast(str, file_data.file_uri))
        if not parsed:
            raise ArtifactInputError(f"Invalid artifact reference URI: {file_data.file_uri}")
        _checked(
            lambda: artifact_util.validate_artifact_reference_scope(
                app_name=app, user_id=user, session_id=session_id, parsed_uri=parsed
            )
        )
        return None  # a reference's type is its target's, known when it is loaded

    def _records(self, ns: bytes) -> Iterator[dict[str, Any]]:
        for key, value in self.store.kv.scan(SCOPE, ns):
            if len(key) == 8:
                yield orjson.loads(value)

    def _entry(
        self, app: Any, user: Any, filename: Any, session_id: Any, version: Any
    ) -> tuple[types.Part, ArtifactVersion] | None:
        """The part and metadata of ``version`` (``None``: the latest) of one artifact."""
        ns = self._namespace(app, user, filename, session_id)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            fail_type("version", "an int or None", version)
        kv = self.store.kv
        if version is None:
            newest = [value for key, value in kv.scan(SCOPE, ns, reverse=True, limit=2) if len(key) == 8]
            value = newest[0] if newest else None
        else:
            value = kv.get(SCOPE, ns, _version_key(version)) if 0 <= version < 2**63 else None
        if value is None:
            return None
        record = orjson.loads(value)
        return types.Part.model_validate(record["part"]), ArtifactVersion.model_validate(record["meta"])

    def _load(self, app: Any, user: Any, filename: Any, session_id: Any, version: Any, depth: int) -> types.Part | None:
        found = self._entry(app, user, filename, session_id, version)
        if found is None:
            return None
        part = found[0]
        if artifact_util.is_artifact_ref(part):
            assert part.file_data is not None
            target = _checked(
                lambda: artifact_util.resolve_artifact_reference(
                    file_uri=cast(str, part.file_data.file_uri),
                    app_name=app, user_id=user, session_id=session_id, remaining_depth=depth,
                )
            )  # fmt: skip
            return self._load(target.app_name, target.user_id, target.filename, target.session_id, target.version,
                              depth - 1)  # fmt: skip
        if part == types.Part() or artifact_util._is_rewind_tombstone(part):
            return None
        return part

    def _keys(self, app: Any, user: Any, session_id: Any) -> list[str]:
        app, user = name("app_name", app), name("user_id", user)
        _checked(artifact_util.validate_path_segment, app, "app_name")
        _checked(artifact_util.validate_path_segment, user, "user_id")
        prefixes = [f"u/{segment(app)}/{segment(user)}/"]
        if session_id is not None:
            session_id = name("session_id", session_id)
            _checked(artifact_util.validate_path_segment, session_id, "session_id")
            if session_id:
                prefixes.append(f"s/{segment(app)}/{segment(user)}/{segment(session_id)}/")
        filenames: list[str] = []
        with self.store.engine.read_transaction():
            for prefix in prefixes:
                filenames.extend(self._filenames(prefix.encode()))
        return sorted(filenames)

    def _filenames(self, prefix: bytes) -> Iterator[str]:
        """Filenames of the artifacts whose namespace starts with ``prefix`` (escaped back)."""
        kv = self.store.kv
        after = prefix
        while True:
            page = kv.namespaces(SCOPE, after=after, limit=1000)
            for ns in page:
                if not ns.startswith(prefix):
                    return
                if any(len(key) == 8 for key, _ in kv.scan(SCOPE, ns, limit=2)):
                    yield unsegment(ns[len(prefix) :].decode())
            if len(page) < 1000:
                return
            after = page[-1]

    def _delete(self, app: Any, user: Any, filename: Any, session_id: Any) -> None:
        ns = self._namespace(app, user, filename, session_id)
        with self.store.transaction():
            self.store.kv.delete(SCOPE, ns, all=True)
            self.store.kv.delete_counter(SCOPE, ns, NEXT)

    def _versions(self, app: Any, user: Any, filename: Any, session_id: Any) -> list[ArtifactVersion]:
        ns = self._namespace(app, user, filename, session_id)
        return [ArtifactVersion.model_validate(record["meta"]) for record in self._records(ns)]
