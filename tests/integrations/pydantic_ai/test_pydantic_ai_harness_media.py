"""Snapshot media against the harness's own: ``DurastateStepStore(media_store=...)``, ``DurastateMediaStore``.

The harness's ``SqliteStepStore`` (its default ``media_store="auto"``: a
``SqliteMediaStore`` in its file) and ``SqliteMediaStore`` are the
references. Snapshots carrying an image (``BinaryContent``) and a long tool
return read back identical from both, the large parts stored once however
many snapshots hold them and kept out of the snapshot values; below the
threshold, or with ``media_store=None``, nothing is offloaded; another
``MediaStore`` is called as the harness calls it. The media store itself
answers a sequence of calls as ``SqliteMediaStore`` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import durastate

pytest.importorskip("pydantic_ai_harness")

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.media import MediaContext, SqliteMediaStore, make_static_public_url, media_uri_for
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, SqliteStepStore

from durastate.integrations import pydantic_ai_harness_media as media_module
from durastate.integrations import pydantic_ai_harness_steps as steps_module
from durastate.integrations.pydantic_ai_harness import DurastateMediaStore, DurastateStepStore, MediaNotFound

STAMP = datetime(2026, 1, 1, tzinfo=UTC)
IMAGE = random.Random(7).randbytes(100_000)  # above the 64 KiB default threshold
LONG = "grep hit: budget -= cost\n" * 3_500  # ~87 KB of text


@pytest.fixture
def shared(shared_url: str) -> Iterator[durastate.Store]:
    with durastate.open(shared_url) as store:
        yield store


def _turn(n: int, *, image: bytes = IMAGE, long: str = LONG) -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[UserPromptPart(["What is in this picture?", BinaryContent(image, media_type="image/png")])]
        ),
        ModelResponse(parts=[ToolCallPart("grep", {"pattern": "budget"}, tool_call_id=f"c{n}")]),
        ModelRequest(parts=[ToolReturnPart("grep", long, tool_call_id=f"c{n}")]),
        ModelResponse(parts=[TextPart(f"answer {n}")]),
    ]


def _snapshot(n: int, messages: list[ModelMessage], key: str | None = None) -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id="r", step_index=n, messages=messages, timestamp=STAMP, idempotency_key=key)


def _read_back(snapshot: ContinuableSnapshot) -> ContinuableSnapshot:
    """``snapshot`` as any store reads it back: its messages through pydantic-ai's JSON (an image part comes
    back a ``BinaryImage``, the ``BinaryContent`` subclass)."""
    messages = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(snapshot.messages))
    return dataclasses.replace(snapshot, messages=messages)


def _blobs(store: durastate.Store) -> dict[bytes, bytes]:
    return dict(store.kv.scan(media_module.SCOPE, media_module.MEDIA + b"media"))


async def _save_and_read(steps: Any, snapshots: list[ContinuableSnapshot]) -> list[ContinuableSnapshot]:
    for snapshot in snapshots:
        await steps.save_snapshot(snapshot)
    return list(await steps.list_snapshots(run_id="r", include_interrupted=True))


def test_snapshots_with_media_read_back_as_from_the_harness_sqlite_store(
    shared: durastate.Store, tmp_path: Path
) -> None:
    first = _turn(1)
    second = [*first, *_turn(2)]  # the same image and text again, and a second copy of both in one snapshot
    snapshots = [_snapshot(1, first, "0:1:complete"), _snapshot(2, second, "1:2:complete")]
    reference = SqliteStepStore(database=tmp_path / "harness.db")

    async def main() -> tuple[list[ContinuableSnapshot], list[ContinuableSnapshot]]:
        async with DurastateStepStore(store=shared) as ours:
            return await _save_and_read(ours, snapshots), await _save_and_read(reference, snapshots)

    got, expected = asyncio.run(main())
    assert got == expected == [_read_back(snapshot) for snapshot in snapshots]  # bytes and text included
    assert got[1].messages[4].parts[0].content[1].data == IMAGE  # type: ignore[union-attr, index]

    # Each large part stored once (two blobs for four image and four text copies), as the harness's.
    blobs = _blobs(shared)
    assert sorted(blobs) == sorted(media_uri_for(b)[len("media+sha256://") :].encode() for b in (IMAGE, LONG.encode()))
    with sqlite3.connect(tmp_path / "harness.db") as theirs:
        assert theirs.execute("SELECT count(*) FROM media").fetchone() == (2,)
    # The snapshot values keep markers, not the parts.
    values = [value for _, value in shared.kv.scan(steps_module.SCOPE, steps_module.SNAPSHOTS + b"/steps")]
    assert len(values) == 2 and all(len(value) < 10_000 for value in values)

    async def read_blob() -> bytes:
        async with DurastateMediaStore(store=shared) as media:
            return await media.get(media_uri_for(IMAGE))

    assert asyncio.run(read_blob()) == IMAGE


def test_below_the_threshold_or_without_a_media_store_parts_stay_inline(shared: durastate.Store) -> None:
    messages = _turn(1)

    async def main() -> None:
        async with DurastateStepStore(store=shared, media_store=None) as inline:
            assert await _save_and_read(inline, [_snapshot(1, messages)]) == [_read_back(_snapshot(1, messages))]
        assert _blobs(shared) == {}
        async with DurastateStepStore(store=shared, name="big", media_threshold_bytes=len(LONG) + 1) as high:
            await high.save_snapshot(_snapshot(1, messages))
            # Only the image (100 000 bytes; the text is 87 500) reaches the threshold.
            assert (await high.latest_snapshot(run_id="r")) == _read_back(_snapshot(1, messages))
        assert list(_blobs(shared)) == [media_uri_for(IMAGE)[len("media+sha256://") :].encode()]

    asyncio.run(main())


def test_a_dropped_snapshot_stores_no_media(shared: durastate.Store) -> None:
    """A snapshot refused by its idempotency key leaves none of its parts behind (the same transaction)."""
    other = random.Random(8).randbytes(70_000)
    kept = _snapshot(1, _turn(1), "0:1:complete")

    async def main() -> ContinuableSnapshot | None:
        async with DurastateStepStore(store=shared) as steps:
            await steps.save_snapshot(kept)
            await steps.save_snapshot(_snapshot(2, _turn(2, image=other, long="short"), "0:1:complete"))
            return await steps.latest_snapshot(run_id="r")

    assert asyncio.run(main()) == _read_back(kept)
    assert media_uri_for(other)[len("media+sha256://") :].encode() not in _blobs(shared)
    assert len(_blobs(shared)) == 2


def test_another_media_store_is_called_as_the_harness_calls_it(shared: durastate.Store, tmp_path: Path) -> None:
    elsewhere = SqliteMediaStore(database=tmp_path / "media.db")
    messages = _turn(1)

    async def main() -> ContinuableSnapshot | None:
        async with DurastateStepStore(store=shared, media_store=elsewhere) as steps:
            assert steps.media_store is elsewhere
            await steps.save_snapshot(_snapshot(1, messages))
            return await steps.latest_snapshot(run_id="r")

    assert asyncio.run(main()) == _read_back(_snapshot(1, messages))
    assert _blobs(shared) == {}
    with sqlite3.connect(tmp_path / "media.db") as theirs:
        assert theirs.execute("SELECT count(*) FROM media").fetchone() == (2,)


async def _media_calls(media: Any) -> list[Any]:
    """One sequence of MediaStore calls; each outcome, or the harness-level exception class it raised."""
    a, b = b"a" * 10, b"\x00\xff" * 500
    uri_a, uri_b, absent = media_uri_for(a), media_uri_for(b), media_uri_for(b"never stored")
    calls = [
        lambda: media.put(a, context=MediaContext(media_type="image/png", metadata={"who": "first"})),
        lambda: media.put(a, context=MediaContext(metadata={"who": "second"})),  # stored once: first wins
        lambda: media.put(b),
        lambda: media.get(uri_a),
        lambda: media.get(uri_b),
        lambda: media.exists(uri_b),
        lambda: media.exists(absent),
        lambda: media.get_metadata(uri_a),
        lambda: media.get_metadata(uri_b),
        lambda: media.get(absent),
        lambda: media.get_metadata(absent),
        lambda: media.get("media+sha256://XYZ"),
        lambda: media.public_url(uri_a),
    ]
    outcomes: list[Any] = []
    for call in calls:
        try:
            result = await call()
            outcomes.append(dict(result) if hasattr(result, "keys") else result)
        except FileNotFoundError:
            outcomes.append(FileNotFoundError)
        except ValueError:
            outcomes.append(ValueError)
    return outcomes


def test_media_store_answers_as_the_harness_sqlite_media_store(shared: durastate.Store, tmp_path: Path) -> None:
    resolver = make_static_public_url("https://cdn.example/m")

    async def main() -> tuple[list[Any], list[Any]]:
        async with DurastateMediaStore(store=shared, public_url=resolver) as ours:
            reference = SqliteMediaStore(database=tmp_path / "media.db", public_url=resolver)
            return await _media_calls(ours), await _media_calls(reference)

    got, expected = asyncio.run(main())
    assert got == expected
    assert FileNotFoundError in got and ValueError in got and got[-1].startswith("https://cdn.example/m/")


def test_a_missing_blob_is_both_errors(shared: durastate.Store) -> None:
    async def main() -> None:
        async with DurastateMediaStore(store=shared) as media:
            await media.get(media_uri_for(b"x"))

    with pytest.raises(MediaNotFound) as raised:
        asyncio.run(main())
    assert isinstance(raised.value, FileNotFoundError) and isinstance(raised.value, durastate.NotFound)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda s: DurastateStepStore(store=s, media_store="disk"), "media_store must be 'auto', None or"),
        (lambda s: DurastateStepStore(store=s, media_store=object()), "media_store must be"),
        (lambda s: DurastateStepStore(store=s, media_threshold_bytes=0), "media_threshold_bytes"),
        (lambda s: DurastateMediaStore(store=s, name=""), "name must not be empty"),
        (lambda s: DurastateMediaStore(store=s, public_url="https://x"), "public_url must be"),
    ],
)
def test_refused_construction(shared: durastate.Store, make: Any, message: str) -> None:
    with pytest.raises(durastate.InvalidRequest, match=message):
        make(shared)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.put("text"), "data must be bytes"),
        (lambda m: m.put(b"x", context={"media_type": "image/png"}), "context must be a pydantic_ai_harness"),
        (lambda m: m.put(b"x", context=MediaContext(metadata={"n": 1})), "metadata must map str to str"),
        (lambda m: m.get("https://example.com/a.png"), "uri must be media"),
        (lambda m: m.exists(None), "uri must be media"),
    ],
)
def test_refused_arguments_write_nothing(shared: durastate.Store, call: Any, message: str) -> None:
    async def main() -> None:
        async with DurastateMediaStore(store=shared) as media:
            await call(media)

    with pytest.raises(durastate.InvalidRequest, match=message):
        asyncio.run(main())
    assert _blobs(shared) == {}
