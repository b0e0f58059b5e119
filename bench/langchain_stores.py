"""LangChain's cache and byte store on durastate vs the SQL ones LangChain users pick, side by side.

    .venv/bin/python bench/langchain_stores.py [--rounds 7] [--calls 200] [--postgres-url URL]
        [--durability normal|full]

(Not ``bench/langchain.py``: a script named after the package shadows it when run.)

langchain-core ships no SQL backend for ``BaseCache`` or ``BaseStore``; the SQL
ones users are pointed at are langchain-community's ``SQLiteCache`` /
``SQLAlchemyCache`` (``set_llm_cache(SQLiteCache(".langchain.db"))`` in
LangChain's docs) and ``SQLStore`` (SQLAlchemy, any database URL). The
package is not a durastate dependency (nor a test one: it is being sunset and
brings aiohttp, numpy, requests, ...); the first run installs the pinned
release with ``pip --no-deps --target .venv/peers/langchain-community``
(what it imports is already in the test extra's environment) and puts that
folder on ``sys.path`` for this process only.

Contenders, per engine, each on a fresh database of its own:

* SQLite: ``DurastateCache`` / ``DurastateByteStore`` on a durastate file at
  ``--durability`` (``full`` by default: the peers' SQLite is SQLAlchemy's
  default connection, a rollback journal with ``synchronous=FULL``, an fsync
  per commit) against ``SQLiteCache`` and ``SQLStore("sqlite:///...")``;
* PostgreSQL (``--postgres-url``): the same classes on a fresh schema against
  ``SQLAlchemyCache`` and ``SQLStore`` on a SQLAlchemy engine
  (``postgresql+psycopg``, psycopg 3 as durastate uses) in another schema.

Ops: cache ``update`` of one generation (a new prompt each call), ``lookup``
of a cached prompt (hit) and of an absent one (miss); store ``mset`` of 10
~1 KB values, ``mget`` of those 10 keys, ``yield_keys`` of a 50-key prefix.
The race is ``_race.race`` (alternating order, round 0 warms up, medians of
per-round ratios peer / durastate: > 1, durastate faster).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.outputs import Generation

import durastate
from _race import arguments, postgres_schema
from _race import race as run_race
from durastate.integrations.langchain import DurastateByteStore, DurastateCache

PEER = "langchain-community==0.4.2"
PEER_DIR = Path(sys.prefix) / "peers" / "langchain-community"
ANSWER = "an answer a model gave, long enough to look like one. " * 8
VALUE = (ANSWER * 3).encode()


def _import_peer() -> Any:
    """langchain_community's module tree, installed into PEER_DIR on first use (see the docstring)."""
    if not (PEER_DIR / "langchain_community").is_dir():
        print(f"installing {PEER} into {PEER_DIR} (once)", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(PEER_DIR), PEER], check=True
        )
    sys.path.append(str(PEER_DIR))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "langchain-community is being sunset"
        import langchain_community.cache as cache
        import langchain_community.storage as storage
    return cache, storage


def _ops(cache: Any, store: Any) -> dict[str, Callable[[], Any]]:
    """The six ops on one contender's cache and byte store (their data planted first)."""
    llm = "model=bench temperature=0"
    cache.update("the cached prompt", llm, [Generation(text=ANSWER)])
    store.mset([(f"listed/{n:03}", VALUE) for n in range(50)])
    batch = [f"batch/{n}" for n in range(10)]
    fresh = itertools.count()

    def update() -> None:
        cache.update(f"prompt {next(fresh)}", llm, [Generation(text=ANSWER)])

    def hit() -> None:
        assert cache.lookup("the cached prompt", llm) is not None

    def miss() -> None:
        assert cache.lookup("a prompt never asked", llm) is None

    def mset() -> None:
        store.mset([(key, VALUE) for key in batch])

    def mget() -> None:
        assert len(store.mget(batch)) == 10

    def keys() -> None:
        assert sum(1 for _ in store.yield_keys(prefix="listed/")) == 50

    return {
        "cache update": update,
        "cache lookup (hit)": hit,
        "cache lookup (miss)": miss,
        "store mset(10)": mset,
        "store mget(10)": mget,
        "store yield_keys(50)": keys,
    }


@contextmanager
def _sqlalchemy_postgres(url: str) -> Iterator[Any]:
    """A SQLAlchemy engine (psycopg 3) on a fresh schema of the server at ``url``."""
    from sqlalchemy import create_engine

    with postgres_schema(url) as (schema_url, _schema):
        engine = create_engine(schema_url.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            yield engine
        finally:
            engine.dispose()


def main() -> None:
    args = arguments(__doc__ or "")
    durability = args.durability if "--durability" in sys.argv else "full"
    community_cache, community_storage = _import_peer()
    folder = Path(tempfile.mkdtemp(prefix="durastate-bench-langchain-"))
    with ExitStack() as stack:
        ours = stack.enter_context(durastate.open(str(folder / "ours.db"), durability=durability))
        peer_store = community_storage.SQLStore(namespace="bench", db_url=f"sqlite:///{folder / 'peer-store.db'}")
        peer_store.create_schema()
        run_race(
            f"SQLite (durastate durability={durability!r}) vs langchain-community's SQLiteCache / SQLStore",
            {
                "durastate": _ops(DurastateCache(store=ours), DurastateByteStore(store=ours)),
                "community": _ops(community_cache.SQLiteCache(str(folder / "peer-cache.db")), peer_store),
            },
            args.rounds,
            args.calls,
        )
        if args.postgres_url:
            ours_url, _ = stack.enter_context(postgres_schema(args.postgres_url))
            ours_pg = stack.enter_context(durastate.open(ours_url))
            engine = stack.enter_context(_sqlalchemy_postgres(args.postgres_url))
            pg_store = community_storage.SQLStore(namespace="bench", engine=engine)
            pg_store.create_schema()
            run_race(
                "PostgreSQL vs langchain-community's SQLAlchemyCache / SQLStore (SQLAlchemy on psycopg 3)",
                {
                    "durastate-pg": _ops(DurastateCache(store=ours_pg), DurastateByteStore(store=ours_pg)),
                    "community": _ops(community_cache.SQLAlchemyCache(engine), pg_store),
                },
                args.rounds,
                args.calls,
            )


if __name__ == "__main__":
    main()
