"""What the exact vector count costs writers: ``DurastateStore(index=)`` on pgvector with and without its triggers.

Run it with ``.venv/bin/python bench/langgraph_vector_count.py`` (``--help`` for the options).

A search decides whether to scan or walk from the count of vectors each index table holds
(``engines.postgres_vector``, ``CREATE_COUNTS``), kept by statement triggers on the table. Two
stores in fresh schemas of the same server, loaded with the same ``--items``
(``bench/langgraph_search.py``'s data): ``counted`` as made, ``uncounted`` with the index
table's triggers dropped (what a write cost before). Ops, ``--calls`` each per round:

* ``put``: ``store.put`` of one new item (its own transaction: item, vectors row, index row);
* ``batch 50``: one ``store.batch`` of 50 puts overwriting those items;
* ``delete``: ``store.delete`` of each (the index rows go by the foreign key's cascade);
* ``kv delete elsewhere``: ``kv.put`` then ``kv.delete`` of a row in another scope (the cascade's
  probe runs for every kv delete under the prefix, and with it the delete trigger, on zero rows).

Method: one untimed warm-up round, then ``--rounds`` rounds, the order of the two stores
alternating; the table shows each side's median ops/s and the median (range) of the per-round
ratios counted / uncounted (> 1: counted faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

_here = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from langgraph.store.base import PutOp  # noqa: E402

from durastate.engines.statements import DDL  # noqa: E402
from durastate.integrations.langgraph import DurastateStore  # noqa: E402

NS = ("docs", "w")


def ops(store: Any, calls: int, round_no: int) -> dict[str, Callable[[], None]]:
    keys = [f"w{round_no}-{i}" for i in range(calls)]
    kv = store.store.kv

    def put() -> None:
        for key in keys:
            store.put(NS, key, {"text": f"written {key}", "kind": "a"})

    def batch() -> None:
        for start in range(0, len(keys), 50):
            store.batch([PutOp(NS, k, {"text": f"again {k}", "kind": "b"}) for k in keys[start : start + 50]])

    def delete() -> None:
        for key in keys:
            store.delete(NS, key)

    def elsewhere() -> None:
        for key in keys:
            kv.put(b"elsewhere", b"rows", key.encode(), b"x")
            kv.delete(b"elsewhere", b"rows", keys=[key.encode()])

    return {"put": put, "batch 50": batch, "delete": delete, "kv delete elsewhere": elsewhere}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100, help="ops per op, store and round (a multiple of 50)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("DURASTATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    args = parser.parse_args()
    from durastate.testing import postgres_server

    spec = importlib_search()
    index = {"dims": args.dims, "embed": spec.embedder(args.dims), "fields": ["text"]}
    print(f"# bench/langgraph_vector_count.py {' '.join(sys.argv[1:])}")
    print(f"items={args.items} dims={args.dims} rounds={args.rounds} calls={args.calls}; load {os.getloadavg()}")
    with ExitStack() as stack:
        stores: dict[str, Any] = {}
        for name in ("counted", "uncounted"):
            url, schema = postgres_server.create_schema(args.postgres_url)
            stack.callback(postgres_server.drop_schema, args.postgres_url, schema)
            store = stack.enter_context(DurastateStore.from_url(url, index=index))  # type: ignore[arg-type]
            if not store.store.engine.capabilities.vector_index:
                print("skipped: the database has no vector extension")
                return 0
            spec.load(store, args.items)
            stores[name] = store
        engine = stores["uncounted"].store.engine
        (table,) = [
            row[0]
            for row in engine.all(
                engine.sql(
                    DDL(
                        "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
                        " WHERE t.tgname = 'counted' AND c.relnamespace = CAST(current_schema() AS regnamespace)"
                    )
                )
            )
        ]
        with stores["uncounted"].store.transaction():
            for trigger in ("counted", "counted_deletes", "counted_truncates"):
                engine.execute(engine.sql(DDL(f"DROP TRIGGER {trigger} ON {table}")))
        names = list(stores)
        rates: dict[str, dict[str, list[float]]] = {}
        for round_no in range(args.rounds + 1):
            order = names if round_no % 2 else names[::-1]
            for name in order:
                for op, run in ops(stores[name], args.calls, round_no).items():
                    start = time.perf_counter()
                    run()
                    seconds = time.perf_counter() - start
                    if round_no:
                        rates.setdefault(op, {n: [] for n in names})[name].append(args.calls / seconds)
        print(f"load average at the end {os.getloadavg()}")
        print("| op | counted ops/s | uncounted ops/s | counted / uncounted (range) |")
        print("|---|---|---|---|")
        for op, by in rates.items():
            ratios = [c / u for c, u in zip(by["counted"], by["uncounted"], strict=True)]
            print(
                f"| {op} | {statistics.median(by['counted']):,.0f} | {statistics.median(by['uncounted']):,.0f} |"
                f" {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |"
            )
    return 0


def importlib_search() -> Any:
    """bench/langgraph_search.py (its data and embedding), loaded by path: this folder is off sys.path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("langgraph_search", _here / "langgraph_search.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
