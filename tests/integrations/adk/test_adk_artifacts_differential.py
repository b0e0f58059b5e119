"""DurastateArtifactService against ADK's InMemoryArtifactService: the same results, errors included.

Hypothesis draws sequences of save (text, inline bytes, file data, artifact
references to other artifacts, an empty part, the rewind tombstone; user- and
session-scoped filenames; custom metadata) / load (latest or a version, in
range or not) / list keys / list versions / list and get version metadata /
delete, with names ADK's path checks accept and refuse. Every call must give
what ADK's in-memory service gives (``canonical_uri`` aside: ``durastate://``
where ADK says ``memory://``), errors by type (``InputValidationError``).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from google.adk.artifacts import InMemoryArtifactService, artifact_util
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.platform import time as platform_time
from google.genai import types
from hypothesis import example, given
from hypothesis import strategies as st

import durastate
from durastate.errors import InvalidRequest
from durastate.integrations.adk import DurastateArtifactService

from .._differential import differential

APPS = ["app", "a/b"]
USERS = ["u1", "u%2F"]
SESSIONS = [None, "s1", "s/2", "user", "", "../x"]
FILES = ["report.txt", "user:notes.md", "img/1.png", "user:a%b"]

parts = st.one_of(
    st.text(max_size=10).map(lambda t: types.Part(text=t)),
    st.binary(max_size=10).map(lambda b: types.Part(inline_data=types.Blob(mime_type="image/png", data=b))),
    st.just(types.Part(file_data=types.FileData(file_uri="gs://bucket/x", mime_type="application/pdf"))),
    st.just(types.Part()),
    st.just(artifact_util._new_rewind_tombstone()),
    st.tuples(st.sampled_from(["report.txt", "user:notes.md"]), st.integers(0, 2)).map(lambda fv: ("ref", fv)),
)
metadata = st.none() | st.dictionaries(st.sampled_from(["k", "n"]), st.integers(0, 9) | st.text(max_size=3), max_size=2)
# Mostly a few valid addresses (so loads find what saves stored), sometimes any, including refused ones.
COMMON = [
    ("app", "u1", "report.txt", "s1"),
    ("app", "u1", "user:notes.md", "s1"),
    ("app", "u1", "user:notes.md", None),
    ("app", "u1", "img/1.png", "s/2"),
    ("a/b", "u%2F", "report.txt", "s1"),
    ("app", "u1", "report.txt", "s/2"),
]
target = st.sampled_from(COMMON) | st.tuples(
    st.sampled_from(APPS), st.sampled_from(USERS), st.sampled_from(FILES), st.sampled_from(SESSIONS)
)
versions = st.none() | st.integers(-1, 3)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("save"), target, parts, metadata),
        st.tuples(st.just("save"), target, parts, metadata),
        st.tuples(st.just("load"), target, versions),
        st.tuples(st.just("load"), st.sampled_from(COMMON), versions),
        st.tuples(st.just("load_last"), st.just(COMMON[0]), versions),  # what the newest save addressed
        st.tuples(st.just("keys"), target),
        st.tuples(st.just("versions"), target),
        st.tuples(st.just("metas"), target),
        st.tuples(st.just("meta"), target, versions),
        st.tuples(st.just("delete"), target),
    ),
    min_size=5,
    max_size=25,
)


def _view(value: Any) -> Any:
    if isinstance(value, list):
        return [_view(v) for v in value]
    if isinstance(value, types.Part):
        return value.model_dump(mode="json", exclude_none=True)
    if hasattr(value, "canonical_uri"):  # ArtifactVersion: the scheme is each service's own
        dumped = value.model_dump(mode="json")
        dumped["canonical_uri"] = dumped["canonical_uri"].split("://", 1)[1]
        return dumped
    return value


async def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", _view(await call))
    except InputValidationError as exc:
        return ("InputValidationError", str(exc))


_prefixes = (f"x{n}" for n in itertools.count())


def _call(service: Any, kind: str, filename: str, op: Any, where: dict[str, Any]) -> Any:
    if kind == "load":
        return service.load_artifact(filename=filename, version=op[2], **where)
    if kind == "keys":
        return service.list_artifact_keys(**where)
    if kind == "versions":
        return service.list_versions(filename=filename, **where)
    if kind == "metas":
        return service.list_artifact_versions(filename=filename, **where)
    if kind == "meta":
        return service.get_artifact_version(filename=filename, version=op[2], **where)
    return service.delete_artifact(filename=filename, **where)


async def _run(ours: DurastateArtifactService, ops: list[Any]) -> None:
    reference = InMemoryArtifactService()
    prefix = next(_prefixes)
    clock = itertools.count(1)
    last = COMMON[0]
    for step, op in enumerate(ops):
        if op[0] == "load_last":
            op = ("load", last, op[2])
        elif op[0] == "save":
            last = op[1]
        kind, (app, user, filename, session_id) = op[0], op[1]
        where = {"app_name": f"{prefix}{app}", "user_id": user, "session_id": session_id}
        if kind == "save":
            part = op[2]
            if isinstance(part, tuple):  # a reference to another artifact of this user (or session)
                ref_file, ref_version = part[1]
                uri = artifact_util.get_artifact_uri(
                    f"{prefix}{app}", user, ref_file, ref_version, None if ref_file.startswith("user:") else session_id
                )
                part = types.Part(file_data=types.FileData(file_uri=uri))
            now = float(next(clock))
            platform_time.set_time_provider(lambda now=now: now)
            try:
                calls = [
                    s.save_artifact(
                        filename=filename, artifact=part.model_copy(deep=True), custom_metadata=op[3], **where
                    )
                    for s in (reference, ours)
                ]
                expected, got = await _outcome(calls[0]), await _outcome(calls[1])
            finally:
                platform_time.reset_time_provider()
        else:
            expected = await _outcome(_call(reference, kind, filename, op, where))
            got = await _outcome(_call(ours, kind, filename, op, where))
        assert got[0] == expected[0], f"step {step} {op}: durastate {got} != in-memory {expected}"
        if got[0] == "ok":
            assert got == expected, f"step {step} {op}: durastate {got} != in-memory {expected}"


@differential(30)
@given(ops=operations)
# Always tried: a rewind tombstone loads as absent; references are followed, within scope only.
@example(ops=[("save", COMMON[0], artifact_util._new_rewind_tombstone(), None), ("load_last", COMMON[0], None)])
@example(
    ops=[
        ("save", COMMON[2], types.Part(text="hello"), {"k": 1}),
        ("save", COMMON[0], ("ref", ("user:notes.md", 0)), None),
        ("load_last", COMMON[0], None),
        ("save", COMMON[1], ("ref", ("report.txt", 0)), None),
        ("load_last", COMMON[0], 0),
        ("metas", COMMON[0]),
        ("keys", COMMON[0]),
        ("delete", COMMON[2]),
        ("load", COMMON[0], None),
    ]
)
def test_random_sequences_match_in_memory_artifacts(shared_store: durastate.Store, ops: list[Any]) -> None:
    async def main() -> None:
        async with DurastateArtifactService(store=shared_store) as ours:
            await _run(ours, ops)

    asyncio.run(main())


def test_versions_survive_the_service_and_refusals_change_nothing(shared_store: durastate.Store) -> None:
    class Opaque:
        pass

    async def main() -> None:
        where = {"app_name": "app", "user_id": "u", "session_id": "s", "filename": "f.txt"}
        async with DurastateArtifactService(store=shared_store) as first:
            assert await first.save_artifact(artifact=types.Part(text="one"), **where) == 0
            assert await first.save_artifact(artifact={"text": "two"}, custom_metadata={"k": 1}, **where) == 1
            with pytest.raises(InvalidRequest, match="cannot be stored as JSON"):
                await first.save_artifact(artifact=types.Part(text="x"), custom_metadata={"o": Opaque()}, **where)
            with pytest.raises(InputValidationError):
                await first.save_artifact(artifact=types.Part(text="x"), **{**where, "session_id": None})
        async with DurastateArtifactService(store=shared_store) as second:
            assert await second.list_versions(**where) == [0, 1]
            loaded = await second.load_artifact(**where)
            assert loaded is not None and loaded.text == "two"
            meta = await second.get_artifact_version(**where, version=1)
            assert meta is not None and meta.custom_metadata == {"k": 1} and meta.mime_type == "text/plain"

    asyncio.run(main())
