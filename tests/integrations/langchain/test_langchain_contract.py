"""DurastateByteStore and DurastateCache beyond the standard suites.

Prefix scans at byte boundaries and across pages, atomic refusals,
namespaces, expiry, the cache's collision and revival guards, a real chat
model (LangChain's fake) answering from the cache across processes' worth of
reopened stores, and the import error naming the extra.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime
from typing import Any

import orjson
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, Generation

import durastate
from durastate.integrations.langchain import SCOPE, DurastateByteStore, DurastateCache, _cache_key
from durastate.testing import FakeClock


async def _all_keys(store: DurastateByteStore, prefix: str | None = None) -> list[str]:
    return [key async for key in store.ayield_keys(prefix=prefix)]


def test_prefix_scans_stop_exactly_at_the_prefix(store: durastate.Store) -> None:
    keys = ["fo", "foo", "foo\x00", "foo/bar", "foo\U0010ffff", "fop", "é", "éa", "ê", ""]
    byte_store = DurastateByteStore(store=store)
    byte_store.mset([(k, k.encode()) for k in keys])
    by_bytes = sorted(keys, key=lambda k: k.encode())
    assert list(byte_store.yield_keys()) == by_bytes
    assert list(byte_store.yield_keys(prefix="")) == by_bytes
    for prefix in ("foo", "fo", "é", "\U0010ffff", "zzz"):
        expected = [k for k in by_bytes if k.startswith(prefix)]
        assert list(byte_store.yield_keys(prefix=prefix)) == expected
        assert asyncio.run(_all_keys(byte_store, prefix)) == expected


def test_async_keys_stream_across_batches_in_order(store: durastate.Store) -> None:
    byte_store = DurastateByteStore(store=store)
    keys = [f"k{i:05d}" for i in range(1300)]  # more than two key batches and two kv pages
    byte_store.mset([(k, b"v") for k in keys])
    assert asyncio.run(_all_keys(byte_store)) == keys
    assert asyncio.run(_all_keys(byte_store, "k012")) == keys[1200:1300]


def test_a_refused_mset_writes_nothing(store: durastate.Store) -> None:
    byte_store = DurastateByteStore(store=store)
    for bad in ([("a", b"1"), ("b", "not bytes")], [("a", b"1"), (2, b"int key")], [("a", b"1"), ("lonely",)]):
        with pytest.raises(durastate.InvalidRequest):
            byte_store.mset(bad)  # type: ignore[arg-type]
    with pytest.raises(durastate.InvalidRequest, match=r"key_value_pairs\[1\] value must be bytes"):
        byte_store.mset([("a", b"1"), ("b", None)])  # type: ignore[list-item]
    assert byte_store.mget(["a", "b"]) == [None, None]
    with pytest.raises(durastate.InvalidRequest, match="keys must be a list"):
        byte_store.mget("abc")
    with pytest.raises(durastate.InvalidRequest, match="prefix must be a str"):
        list(byte_store.yield_keys(prefix=b"a"))  # type: ignore[arg-type]
    with pytest.raises(durastate.InvalidRequest, match="max_key_size"):
        byte_store.mset([("k" * store.kv.max_key_size, b"v")])


def test_namespaces_are_separate(store: durastate.Store) -> None:
    one, two = DurastateByteStore(store=store, namespace="one"), DurastateByteStore(store=store, namespace="two")
    one.mset([("k", b"1")])
    two.mset([("k", b"2")])
    one.mdelete(["k"])
    assert (one.mget(["k"]), two.mget(["k"])) == ([None], [b"2"])
    assert list(two.yield_keys()) == ["k"]

    gen = [Generation(text="x")]
    cache_a, cache_b = DurastateCache(store=store, namespace="a"), DurastateCache(store=store, namespace="b")
    cache_a.update("p", "llm", gen)
    cache_b.update("p", "llm", gen)
    cache_a.clear()
    assert cache_a.lookup("p", "llm") is None and cache_b.lookup("p", "llm") == gen
    assert two.mget(["k"]) == [b"2"]  # a cache clear leaves byte stores alone


def test_ttl_expires_values_and_entries(open_store: Any) -> None:
    clock = FakeClock()
    store = open_store(clock=clock)
    byte_store = DurastateByteStore(store=store, ttl=60)
    cache = DurastateCache(store=store, ttl=60)
    byte_store.mset([("k", b"v")])
    cache.update("p", "llm", [Generation(text="x")])
    clock.advance(59)
    assert byte_store.mget(["k"]) == [b"v"] and cache.lookup("p", "llm") is not None
    clock.advance(2)
    assert byte_store.mget(["k"]) == [None] and cache.lookup("p", "llm") is None
    assert list(byte_store.yield_keys()) == []
    with pytest.raises(durastate.InvalidRequest, match="ttl"):
        DurastateCache(store=store, ttl=0)


def test_chat_generations_round_trip(store: durastate.Store) -> None:
    cache = DurastateCache(store=store)
    message = AIMessage(
        content="hi",
        tool_calls=[{"name": "f", "args": {"a": [1, 2]}, "id": "c1"}],
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    )
    generations = [ChatGeneration(message=message, generation_info={"finish_reason": "stop"})]
    cache.update("p" * 10_000, "llm", generations)  # a prompt far longer than any key
    assert cache.lookup("p" * 10_000, "llm") == generations
    assert cache.lookup("p" * 9_999, "llm") is None


def test_lookup_never_answers_for_another_prompt_or_revives_other_classes_or_garbage(store: durastate.Store) -> None:
    cache = DurastateCache(store=store)
    ns = b"cache/default"
    cache.update("other prompt", "llm", [Generation(text="other")])
    stored = store.kv.get(SCOPE, ns, _cache_key("other prompt", "llm"))
    # As if two prompts hashed alike: the stored entry names its own prompt.
    store.kv.put(SCOPE, ns, _cache_key("p", "llm"), stored)  # type: ignore[arg-type]
    assert cache.lookup("p", "llm") is None
    # A tampered entry naming a class outside the allow-list is a miss, not an object.
    template = {"lc": 1, "type": "constructor", "id": ["langchain", "prompts", "prompt", "PromptTemplate"]}
    template["kwargs"] = {"template": "{x}", "input_variables": ["x"]}  # type: ignore[assignment]
    entry = {"prompt": "p", "llm_string": "llm", "generations": [template]}
    store.kv.put(SCOPE, ns, _cache_key("p", "llm"), orjson.dumps(entry))
    assert cache.lookup("p", "llm") is None
    for garbage in (b"not json", b"[1, 2]", b'{"prompt": "p"}'):
        store.kv.put(SCOPE, ns, _cache_key("p", "llm"), garbage)
        assert cache.lookup("p", "llm") is None
    cache.update("p", "llm", [Generation(text="fresh")])  # the next update replaces it
    assert cache.lookup("p", "llm") == [Generation(text="fresh")]


def test_update_refuses_what_is_not_generations(store: durastate.Store) -> None:
    cache = DurastateCache(store=store)
    with pytest.raises(durastate.InvalidRequest, match=r"return_val\[1\]"):
        cache.update("p", "llm", [Generation(text="x"), "text"])  # type: ignore[list-item]
    with pytest.raises(durastate.InvalidRequest, match="prompt must be a str"):
        cache.update(None, "llm", [])  # type: ignore[arg-type]
    assert cache.lookup("p", "llm") is None


@pytest.mark.parametrize(
    ("generation", "what"),
    [
        (ChatGeneration(message=AIMessage("Paris", response_metadata={"created": datetime(2024, 1, 1)})), "datetime"),
        (Generation(text="Paris", generation_info={"tags": {"a", "b"}}), "set"),
        (Generation(text="Paris", generation_info={"nested": [{"o": object()}]}), "object"),
    ],
)
def test_update_refuses_generations_it_could_not_read_back(
    store: durastate.Store, generation: Generation, what: str
) -> None:
    # dumpd writes such objects as a "not_implemented" marker that load() refuses:
    # stored, every later lookup of the prompt raised NotImplementedError.
    cache = DurastateCache(store=store)
    cache.update("Capital?", "llm", [Generation(text="kept")])
    with pytest.raises(durastate.InvalidRequest, match=rf"return_val\[1\] holds a .*{what}.*durastate does not pickle"):
        cache.update("Capital?", "llm", [Generation(text="fine"), generation])
    with pytest.raises(durastate.InvalidRequest, match="durastate does not pickle"):
        asyncio.run(cache.aupdate("Capital?", "llm", [generation]))
    assert cache.lookup("Capital?", "llm") == [Generation(text="kept")]  # nothing written
    assert asyncio.run(cache.alookup("Capital?", "llm")) == [Generation(text="kept")]
    # A dict that merely looks like the marker (no "lc": 1) is stored as any other.
    lookalike = [Generation(text="x", generation_info={"m": {"type": "not_implemented"}})]
    cache.update("Capital?", "llm", lookalike)
    assert cache.lookup("Capital?", "llm") == lookalike


def test_an_entry_that_cannot_be_loaded_is_a_miss(store: durastate.Store) -> None:
    # As an older version wrote it: a generation holding dumpd's "not_implemented" marker.
    cache = DurastateCache(store=store)
    marker = {"lc": 1, "type": "not_implemented", "id": ["datetime", "datetime"], "repr": "datetime(2024, 1, 1)"}
    generation = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "output", "Generation"]}
    generation["kwargs"] = {"text": "Paris", "generation_info": {"created": marker}}  # type: ignore[assignment]
    entry = {"prompt": "p", "llm_string": "llm", "generations": [generation]}
    store.kv.put(SCOPE, b"cache/default", _cache_key("p", "llm"), orjson.dumps(entry))
    assert cache.lookup("p", "llm") is None
    assert asyncio.run(cache.alookup("p", "llm")) is None
    cache.update("p", "llm", [Generation(text="fresh")])  # the next update replaces it
    assert cache.lookup("p", "llm") == [Generation(text="fresh")]


def test_a_chat_model_answers_from_the_cache_after_a_reopen(shared_url: str) -> None:
    with DurastateCache(shared_url) as cache:
        model = FakeListChatModel(responses=["first", "second"], cache=cache)
        assert model.invoke("hello").content == "first"
        assert model.invoke("hello").content == "first"  # cached: the fake would say "second"
        assert model.invoke("other").content == "second"
    with DurastateCache(shared_url) as reopened:
        # The same model (its responses are part of the llm string), wound on
        # past "first": only the cache can still say it.
        fresh = FakeListChatModel(responses=["first", "second"], cache=reopened, i=1)
        assert asyncio.run(fresh.ainvoke("hello")).content == "first"
        reopened.clear()
        assert fresh.invoke("hello").content == "second"


def test_construction_refusals(store: durastate.Store) -> None:
    for cls in (DurastateByteStore, DurastateCache):
        with pytest.raises(durastate.InvalidRequest, match="not both"):
            cls("memory:", store=store)
        with pytest.raises(durastate.InvalidRequest, match="namespace must be a str"):
            cls(store=store, namespace=b"x")  # type: ignore[arg-type]
        with pytest.raises(durastate.InvalidRequest, match=r"durastate\.Store"):
            cls(store="memory:")  # type: ignore[arg-type]
    with DurastateByteStore(store=store):
        pass
    assert not store.closed  # a borrowed store stays open


def test_importing_without_langchain_names_the_extra() -> None:
    code = "import sys; sys.modules['langchain_core'] = None; import durastate.integrations.langchain"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "pip install 'durastate[langchain]'" in result.stderr
