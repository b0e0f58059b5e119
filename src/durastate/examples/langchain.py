"""LangChain's LLM cache and byte store on durastate.

    python -m durastate.examples.langchain [--url URL]

A chat model (LangChain's own ``FakeListChatModel``: no network, no API key)
answers once and is answered from ``DurastateCache`` afterwards, also from a
store opened anew, as another process would; ``DurastateByteStore`` keeps
bytes by key with prefix listing, the shape ``CacheBackedEmbeddings`` uses.
``--url`` takes any durastate URL (a PostgreSQL one too); by default a fresh
SQLite file in a temporary folder. Needs ``pip install 'durastate[langchain]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from langchain_core.language_models.fake_chat_models import FakeListChatModel

from durastate.integrations.langchain import DurastateByteStore, DurastateCache


def cache_demo(url: str) -> None:
    responses = ["Paris.", "(a second, different answer)"]
    with DurastateCache(url, namespace="example") as cache:
        cache.clear()  # a rerun on the same URL starts over
        model = FakeListChatModel(responses=responses, cache=cache)
        print("model says:", model.invoke("Capital of France?").content)
        print("again, from the cache:", model.invoke("Capital of France?").content)
    with DurastateCache(url, namespace="example") as reopened:
        # The same model wound on past its first answer: only the cache still knows it.
        model = FakeListChatModel(responses=responses, cache=reopened, i=1)
        print("after reopening the store (async):", asyncio.run(model.ainvoke("Capital of France?")).content)


def byte_store_demo(url: str) -> None:
    with DurastateByteStore(url, namespace="example") as store:
        store.mdelete(list(store.yield_keys()))
        store.mset([("doc/1", b"first document"), ("doc/2", b"second document"), ("img/1", b"\x89PNG...")])
        print("mget:", store.mget(["doc/1", "missing"]))
        print("keys under 'doc/':", list(store.yield_keys(prefix="doc/")))
        store.mdelete(["doc/1"])
        print("after mdelete:", list(store.yield_keys()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="LangChain's LLM cache and byte store on durastate.")
    parser.add_argument("--url", help="a durastate URL (default: a temporary SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = args.url or f"sqlite://{Path(folder, 'langchain.db')}"
        cache_demo(url)
        byte_store_demo(url)


if __name__ == "__main__":
    main()
