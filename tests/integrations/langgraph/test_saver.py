"""DurastateSaver behaviour beyond LangGraph's conformance suite: storage, relocation, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import ERROR, create_checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import durastate
from durastate.integrations.langgraph import DurastateSaver
from durastate.integrations.langgraph._layout import (
    CHECKPOINT,
    CHECKPOINT_END,
    RUN,
    ThreadRows,
    checkpoint_key,
    pack,
    rows_ascending,
    task_key,
    value_key,
)


@pytest.fixture
def saver(store: durastate.Store) -> DurastateSaver:
    return DurastateSaver(store)


def chain(
    saver: DurastateSaver, thread: str, steps: int, *, ns: str = "", run_id: str = "run", changes: str = "docs"
) -> list[dict[str, Any]]:
    """``steps`` checkpoints; ``notes`` is set once, ``docs`` (or ``changes``) changes every step."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    checkpoint = empty_checkpoint()
    configs = []
    for step in range(steps):
        checkpoint = create_checkpoint(checkpoint, None, step)
        version = saver.get_next_version(checkpoint["channel_versions"].get("docs"), None)
        new_versions = {"docs": version}
        checkpoint["channel_values"] = {**checkpoint["channel_values"], "docs": [f"doc {step}"], "step": step}
        checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "docs": version, "step": version}
        if step == 0:
            checkpoint["channel_values"]["notes"] = {"set": "once"}
            checkpoint["channel_versions"]["notes"] = version
            new_versions["notes"] = version
        config = saver.put(
            config, checkpoint, {"source": "loop", "step": step, "run_id": f"{run_id}-{step}"}, new_versions
        )
        configs.append(config)
    return configs


def value_rows(store: durastate.Store, thread: str) -> list[tuple[str, str]]:
    """(checkpoint id, channel) of every stored value: in a checkpoint's envelope or a value row."""
    rows = ThreadRows(store.kv, b"langgraph", thread).scan(CHECKPOINT, CHECKPOINT_END)
    return [
        (row.checkpoint_id, channel) for row in rows_ascending(thread, rows) for channel in {**row.values, **row.inline}
    ]


def test_each_value_is_stored_once_per_version(saver: DurastateSaver, store: durastate.Store) -> None:
    configs = chain(saver, "t", 5)
    assert len(value_rows(store, "t")) == 5 + 1  # docs at each step, notes once
    for step, config in enumerate(configs):
        values = saver.get_tuple(config).checkpoint["channel_values"]  # type: ignore[union-attr]
        assert values == {"docs": [f"doc {step}"], "step": step, "notes": {"set": "once"}}


def test_a_checkpoint_put_again_keeps_only_its_new_values(saver: DurastateSaver) -> None:
    config = {"configurable": {"thread_id": "again", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": ["first"], "b": ["only in the first put"]}
    checkpoint["channel_versions"] = {"a": "1", "b": "1"}
    stored = saver.put(config, checkpoint, {}, {"a": "1", "b": "1"})
    checkpoint["channel_values"] = {"a": ["second"]}
    checkpoint["channel_versions"] = {"a": "2"}
    assert saver.put(config, checkpoint, {}, {"a": "2"}) == stored
    again = saver.get_tuple(stored)
    assert again is not None and again.checkpoint["channel_values"] == {"a": ["second"]}


def test_prune_keeps_values_the_survivor_inherited(saver: DurastateSaver, store: durastate.Store) -> None:
    configs = chain(saver, "t", 4)
    saver.prune(["t"])
    assert [t.config for t in saver.list({"configurable": {"thread_id": "t"}})] == [configs[-1]]
    latest = saver.get_tuple(configs[-1])
    assert latest is not None and latest.checkpoint["channel_values"]["notes"] == {"set": "once"}
    assert len(value_rows(store, "t")) == 2  # notes moved to the survivor, its own docs


def test_delete_for_runs_moves_values_to_the_oldest_survivor(saver: DurastateSaver) -> None:
    configs = chain(saver, "t", 4)
    saver.delete_for_runs(["run-0", "run-1"])  # checkpoint 0 held notes
    survivors = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert [t.config for t in survivors] == [configs[3], configs[2]]
    assert all(t.checkpoint["channel_values"]["notes"] == {"set": "once"} for t in survivors)
    saver.delete_for_runs(["run-2"])  # now the survivor that took notes goes too
    assert saver.get_tuple(configs[3]).checkpoint["channel_values"]["notes"] == {"set": "once"}  # type: ignore[union-attr]


def test_copy_is_independent_of_its_source(saver: DurastateSaver) -> None:
    configs = chain(saver, "src", 3)
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    copied = saver.get_tuple({"configurable": {"thread_id": "dst", "checkpoint_ns": ""}})
    assert (
        copied is not None
        and copied.config["configurable"]["checkpoint_id"] == configs[-1]["configurable"]["checkpoint_id"]
    )
    assert copied.checkpoint["channel_values"]["notes"] == {"set": "once"}
    assert saver.get_tuple({"configurable": {"thread_id": "src", "checkpoint_ns": ""}}) is None


def test_list_merges_namespaces_and_threads_newest_first(saver: DurastateSaver) -> None:
    ids = []
    for thread, ns in [("a", ""), ("a", "child:1"), ("b", ""), ("a", "")]:
        ids += [c["configurable"]["checkpoint_id"] for c in chain(saver, thread, 2, ns=ns)]
    every = [t.config["configurable"]["checkpoint_id"] for t in saver.list(None)]
    assert every == sorted(ids, reverse=True)
    thread_a = [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": "a"}})]
    assert thread_a == sorted(ids[:4] + ids[6:], reverse=True)
    limited = list(saver.list(None, limit=3, filter={"source": "loop"}))
    assert [t.config["configurable"]["checkpoint_id"] for t in limited] == every[:3]


def test_namespaces_are_found_without_a_registry(saver: DurastateSaver, store: durastate.Store) -> None:
    # Namespaces that extend one another, or hold the byte after the separator.
    for ns in ["b", "", "a\x01", "a", "a:b|c"]:
        chain(saver, "t", 1, ns=ns)
    # A row of the registry earlier releases kept (and rewrote at every put) is ignored.
    ThreadRows(store.kv, b"langgraph", "t").put_many([(b"nghost", b"")])
    found = {t.config["configurable"]["checkpoint_ns"] for t in saver.list({"configurable": {"thread_id": "t"}})}
    assert found == {"", "a", "a\x01", "a:b|c", "b"}
    assert saver._namespaces(ThreadRows(store.kv, b"langgraph", "t")) == sorted(found)


def test_versions_are_short_and_count_up_from_the_long_format(saver: DurastateSaver) -> None:
    long = f"{41:032}.{0.25:016}"  # what this saver wrote before, and LangGraph's own savers write
    short = saver.get_next_version(long, None)
    assert short.startswith("000000000042.") and len(short) == 19 and short > long
    following = saver.get_next_version(short, None)
    assert following.startswith("000000000043.") and following > short
    assert saver.get_next_version(None, None).startswith("000000000001.")
    assert saver.get_next_version(7, None).startswith("000000000008.")  # type: ignore[arg-type]


def test_put_writes_keeps_the_first_write_of_an_index_and_special_writes_replace(saver: DurastateSaver) -> None:
    [config] = chain(saver, "w", 1)
    saver.put_writes(config, [("a", 1), ("b", 2)], "task")
    saver.put_writes(config, [("a", 10), ("c", 30)], "task")  # idx 0 and 1 are taken
    saver.put_writes(config, [("__error__", "first")], "task")
    saver.put_writes(config, [("__error__", "second")], "task")
    stored = saver.get_tuple(config)
    assert stored is not None
    assert sorted(stored.pending_writes) == [("task", "__error__", "second"), ("task", "a", 1), ("task", "b", 2)]


class Opaque:
    """Something msgpack cannot encode, so a pickle_fallback serializer pickles it."""

    __slots__ = ("x",)

    def __init__(self) -> None:
        self.x = 1

    def __reduce__(self) -> Any:
        return (Opaque, ())


def test_pickle_is_never_unpickled_by_default(store: durastate.Store) -> None:
    writer = DurastateSaver(store, serde=JsonPlusSerializer(pickle_fallback=True))
    [config] = chain(writer, "p", 1)
    writer.put_writes(config, [("ch", Opaque())], "task")
    stored = writer.get_tuple(config)
    assert stored is not None and isinstance(stored.pending_writes[0][2], Opaque)
    with pytest.raises(durastate.InvalidRequest, match="never unpickled"):
        DurastateSaver(store).get_tuple(config)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put({"configurable": {}}, empty_checkpoint(), {}, {}),
        lambda s: s.put({"configurable": {"thread_id": "t", "checkpoint_ns": "a\x00b"}}, empty_checkpoint(), {}, {}),
        lambda s: s.put_writes({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, [("c", 1)], "task"),
        lambda s: s.put_writes(
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "x"}}, [("c", 1)], "ta\x00sk"
        ),
        lambda s: list(s.list({"configurable": {"thread_id": "t"}}, limit=-1)),
        lambda s: s.prune(["t"], strategy="everything"),
        lambda s: s.copy_thread("t", "t"),
        lambda s: s.delete_for_runs("run-0"),
    ],
)
def test_refusals_are_invalid_requests_and_change_nothing(saver: DurastateSaver, call: Any) -> None:
    chain(saver, "t", 2)
    before = [t.config for t in saver.list(None)]
    with pytest.raises(durastate.InvalidRequest):
        call(saver)
    assert [t.config for t in saver.list(None)] == before


def test_a_negative_limit_is_refused_saying_none_means_no_limit(saver: DurastateSaver) -> None:
    chain(saver, "t", 2)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(durastate.InvalidRequest, match=r"limit must be an int >= 0, or None for no limit, got -1"):
        list(saver.list(config, limit=-1))
    assert list(saver.list(config, limit=0)) == []  # as every LangGraph saver


def test_from_url_refuses_an_unknown_option_before_opening_anything(tmp_path: Any) -> None:
    path = tmp_path / "s.db"
    with pytest.raises(durastate.InvalidRequest, match=r"unknown DurastateSaver\.from_url option\(s\): nope; it takes"):
        DurastateSaver.from_url(f"sqlite://{path}", nope=1)
    assert not path.exists()
    with DurastateSaver.from_url(f"sqlite://{path}", busy_timeout=5) as saver:  # durastate.open's options pass
        assert saver.store.engine is not None


def test_async_context_closes_a_store_it_opened(tmp_path: Any) -> None:
    async def scenario() -> DurastateSaver:
        async with DurastateSaver.from_url(f"sqlite://{tmp_path}/s.db") as saver:
            chain(saver, "t", 1)
            assert [t async for t in saver.alist(None)] != []
        return saver

    saver = asyncio.run(scenario())
    assert saver.store.closed
    with pytest.raises(durastate.StoreClosed):
        asyncio.run(saver.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}))


def put_in_the_old_layout(
    store: durastate.Store, thread: str, parent_id: str | None, checkpoint: Any, run_id: str, homes: dict[str, str]
) -> dict[str, Any]:
    """A checkpoint as savers before the values moved into the envelope stored it: an 8-field
    envelope, a value row per non-primitive channel value not kept by an ancestor (``homes``), a run marker."""
    serde = JsonPlusSerializer()
    rows = ThreadRows(store.kv, b"langgraph", thread)
    values = checkpoint["channel_values"]
    skeleton = {**checkpoint, "channel_values": {c: v for c, v in values.items() if isinstance(v, int)}}
    metadata = {"source": "loop", "step": len(values), "run_id": run_id}
    head = checkpoint_key(b"", checkpoint["id"])
    envelope = pack((parent_id, *serde.dumps_typed(skeleton), *serde.dumps_typed(metadata), run_id, False, homes))
    stored = [(RUN + run_id.encode(), b""), (head, envelope)]
    for channel, value in values.items():
        if not isinstance(value, int) and channel not in homes:
            version = str(checkpoint["channel_versions"][channel])
            stored.append((value_key(b"", checkpoint["id"], channel), pack((version, *serde.dumps_typed(value)))))
    # A pending write as they stored it: task id, task path, channel, idx, type, bytes.
    write = pack(("task", "path", "docs", 0, *serde.dumps_typed(f"write of {checkpoint['id']}")))
    stored.append((task_key(head, b"path", b"task") + b"1000000000", write))  # idx 0, fixed-width, offset
    rows.put_many(stored)
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": checkpoint["id"]}}


def test_checkpoints_of_the_old_layout_read_inherit_and_prune(saver: DurastateSaver, store: durastate.Store) -> None:
    first = create_checkpoint(empty_checkpoint(), None, 0)
    first["channel_values"] = {"docs": ["doc 0"], "notes": {"set": "once"}, "step": 0}
    first["channel_versions"] = {"docs": "1", "notes": "1", "step": "1"}
    old0 = put_in_the_old_layout(store, "old", None, first, "run-a", {})
    second = create_checkpoint(first, None, 1)
    second["channel_values"] = {"docs": ["doc 1"], "notes": {"set": "once"}, "step": 1}
    second["channel_versions"] = {"docs": "2", "notes": "1", "step": "2"}
    old1 = put_in_the_old_layout(store, "old", first["id"], second, "run-a", {"notes": first["id"]})
    # A put of today's saver on top: notes is inherited, its home an old checkpoint's value row.
    third = create_checkpoint(second, None, 2)
    third["channel_values"] = {"docs": ["doc 2"], "notes": {"set": "once"}, "step": 2}
    third["channel_versions"] = {"docs": "3", "notes": "1", "step": "3"}
    new2 = saver.put(old1, third, {"source": "loop", "step": 2, "run_id": "run-b"}, {"docs": "3", "step": "3"})
    expected = [{"docs": [f"doc {step}"], "notes": {"set": "once"}, "step": step} for step in range(3)]
    saver.put_writes(new2, [("docs", "new write")], "task", "path")
    for config, values in zip([old0, old1, new2], expected, strict=True):
        stored = saver.get_tuple(config)
        assert stored is not None and stored.checkpoint["channel_values"] == values
        written = "new write" if config is new2 else f"write of {config['configurable']['checkpoint_id']}"
        assert stored.pending_writes == [("task", "docs", written)]
    listed = [t.checkpoint["channel_values"] for t in saver.list({"configurable": {"thread_id": "old"}})]
    assert listed == expected[::-1]
    # The old checkpoints go; their value moves to the survivor, which still reads it.
    saver.prune(["old"])
    survivor = saver.get_tuple({"configurable": {"thread_id": "old", "checkpoint_ns": ""}})
    assert survivor is not None and survivor.checkpoint["channel_values"] == expected[2]
    assert sorted(channel for _, channel in value_rows(store, "old")) == ["docs", "notes"]


def test_delete_for_runs_finds_runs_marked_by_the_old_layout(saver: DurastateSaver, store: durastate.Store) -> None:
    checkpoint = create_checkpoint(empty_checkpoint(), None, 0)
    checkpoint["channel_values"] = {"docs": ["doc 0"]}
    checkpoint["channel_versions"] = {"docs": "1"}
    put_in_the_old_layout(store, "old", None, checkpoint, "run-old", {})
    chain(saver, "new", 2, run_id="run-new")
    saver.delete_for_runs(["run-old"])
    assert list(saver.list({"configurable": {"thread_id": "old"}})) == []
    assert len(list(saver.list({"configurable": {"thread_id": "new"}}))) == 2


def test_a_put_writes_its_run_marker_again_after_a_delete(saver: DurastateSaver, store: durastate.Store) -> None:
    # The saver skips markers it committed; a delete must make it write them again.
    configs = chain(saver, "t", 2, run_id="same")
    saver.delete_thread("t")
    configs = chain(saver, "t", 2, run_id="same")
    saver.delete_for_runs(["same-1"])
    assert [t.config for t in saver.list({"configurable": {"thread_id": "t"}})] == [configs[0]]
    saver.delete_for_runs(["same-0"])
    assert list(saver.list({"configurable": {"thread_id": "t"}})) == []


def one_run(saver: DurastateSaver, thread: str, steps: int, run_id: str) -> list[dict[str, Any]]:
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    configs = []
    for step in range(steps):
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"docs": [f"doc {step}"]}
        checkpoint["channel_versions"] = {"docs": str(step + 1)}
        config = saver.put(config, checkpoint, {"step": step, "run_id": run_id}, {"docs": str(step + 1)})
        configs.append(config)
    return configs


def test_a_put_is_one_row_and_a_run_is_marked_once(saver: DurastateSaver, store: durastate.Store) -> None:
    one_run(saver, "t", 3, "r")
    keys = [key for key, _ in ThreadRows(store.kv, b"langgraph", "t").scan()]
    assert sorted(key[:1] for key in keys) == [b"c", b"c", b"c", b"r"]


def test_a_marker_rolled_back_is_written_again(saver: DurastateSaver, store: durastate.Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        one_run(saver, "t", 1, "r")
        raise RuntimeError("roll back")
    configs = one_run(saver, "t", 2, "r")
    assert [t.config for t in saver.list({"configurable": {"thread_id": "t"}})] == configs[::-1]
    saver.delete_for_runs(["r"])
    assert list(saver.list({"configurable": {"thread_id": "t"}})) == []


def test_a_run_another_saver_deletes_while_it_is_put_is_found_by_the_next_delete(open_shared: Any) -> None:
    """Two savers, as two processes would have: one puts run r (its marker once), the other deletes r
    between two of those puts; the next delete_for_runs still finds the later checkpoint.
    """
    putting, deleting = DurastateSaver(open_shared()), DurastateSaver(open_shared())
    one_run(putting, "t", 1, "r")
    deleting.delete_for_runs(["r"])
    assert list(deleting.list({"configurable": {"thread_id": "t"}})) == []
    one_run(putting, "t", 2, "r")  # the putting saver remembers r as marked: no marker written
    deleting.delete_for_runs(["r"])
    assert list(deleting.list({"configurable": {"thread_id": "t"}})) == []


@pytest.mark.parametrize("writes", [0, 1, 2, 3, 7, 40])
def test_the_latest_checkpoint_comes_with_all_its_writes_however_many(saver: DurastateSaver, writes: int) -> None:
    """get_tuple without a checkpoint_id reads a first page of three rows: a newest checkpoint with more
    writes than fit goes on in further pages; one with fewer is not mixed with its parent's writes.
    """
    first, latest = chain(saver, "t", 2)
    saver.put_writes(first, [(f"older{i}", i) for i in range(5)], "older-task")
    saver.put_writes(latest, [(f"c{i}", i) for i in range(writes - writes // 2)], "task-a")
    saver.put_writes(latest, [(f"d{i}", i) for i in range(writes // 2)], "task-b", "path")
    found = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert found is not None and found.config == latest
    assert found == saver.get_tuple(latest)
    assert sorted(found.pending_writes) == sorted(
        [("task-a", f"c{i}", i) for i in range(writes - writes // 2)]
        + [("task-b", f"d{i}", i) for i in range(writes // 2)]
    )
    assert saver.get_tuple({"configurable": {"thread_id": "nobody", "checkpoint_ns": ""}}) is None


def test_a_write_s_key_is_the_layout_s(store: durastate.Store) -> None:
    thread = ThreadRows(store.kv, b"langgraph", "t")
    writes = [("a", 1), (ERROR, "boom"), ("b", 2)]
    thread.put_writes(b"ns", b"id", b"path", b"task", writes, JsonPlusSerializer().dumps_typed)
    task = thread.absolute(task_key(checkpoint_key(b"ns", "id"), b"path", b"task"))
    # idx + 1e9, ten digits: ERROR's -1 sorts first; the others keep their positions.
    assert [thread.absolute(key) for key, _ in thread.scan()] == [
        task + b"0999999999",
        task + b"1000000000",
        task + b"1000000002",
    ]


@pytest.mark.parametrize(
    ("task_id", "task_path", "message"),
    [
        ("ta\x00sk", "", "task_id must not contain a NUL character"),
        (7, "", "task_id must be a str, got int"),
        (b"task", "", "task_id must be a str, got bytes"),
        (type("Text", (str,), {})("ta\x00sk"), "", "task_id must not contain a NUL character"),
        ("task", "pa\x00th", "task_path must not contain a NUL character"),
        ("task", None, "task_path must be a str, got NoneType"),
        ("task", type("Text", (str,), {})("pa\x00th"), "task_path must not contain a NUL character"),
    ],
)
def test_put_writes_refuses_ids_past_its_fast_path(
    saver: DurastateSaver, task_id: Any, task_path: Any, message: str
) -> None:
    """The str ids are checked inline; everything else still goes to ``text``'s checks and messages."""
    [config] = chain(saver, "t", 1)
    saver.put_writes(config, [("c", 0)], "kept")
    before = saver.get_tuple(config)
    with pytest.raises(durastate.InvalidRequest, match=message):
        saver.put_writes(config, [("c", 1)], task_id, task_path)
    assert saver.get_tuple(config) == before


def test_threads_are_remembered_within_a_bound_and_still_checked(
    saver: DurastateSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("durastate.integrations.langgraph.saver.MAX_THREADS", 2)
    for thread in ("a", "b", "c"):
        chain(saver, thread, 1)
        assert len(saver._thread_rows_of) <= 2
    assert [saver.get_tuple({"configurable": {"thread_id": t}}) is not None for t in "abc"] == [True] * 3
    for _ in range(2):
        with pytest.raises(durastate.InvalidRequest, match="thread_id"):
            saver.get_tuple({"configurable": {"thread_id": "a\x00b"}})
