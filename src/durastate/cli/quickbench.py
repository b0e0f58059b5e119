"""``durastate bench``: a quick, self-contained run of the main operations.

Not the comparative benchmark (``bench/`` in the repository measures
durastate against raw drivers); this answers "how fast is this store on this
machine": single puts and gets, a batch put, push+claim+ack, document
writes, event appends. Scratch data lives under names starting with
``durastate-bench`` and is removed afterwards.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durastate

SCOPE = b"durastate-bench"
QUEUE = "durastate-bench"
DOC_PREFIX = "durastate-bench/"
SESSION = "durastate-bench"


def run_bench(url: str | None, prefix: str, ops: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="durastate-bench-") as tmp:
        target = url if url is not None else str(Path(tmp) / "bench.db")
        with durastate.open(target, prefix=prefix) as store:
            try:
                return _run(store, ops, scratch_store=url is None)
            finally:
                _clean(store)


def _timed(name: str, ops: int, body: Callable[[], None]) -> dict[str, Any]:
    started = time.perf_counter()
    body()
    seconds = time.perf_counter() - started
    return {
        "operation": name,
        "ops": ops,
        "seconds": round(seconds, 4),
        "ops_per_s": round(ops / seconds) if seconds else None,
        "us_per_op": round(seconds / ops * 1e6, 1),
    }


def _run(store: durastate.Store, ops: int, *, scratch_store: bool) -> list[dict[str, Any]]:
    kv, q = store.kv, store.queues
    keys = [b"k%08d" % i for i in range(ops)]
    value = b"x" * 100

    def puts() -> None:
        for k in keys:
            kv.put(SCOPE, b"single", k, value)

    def gets() -> None:
        for k in keys:
            kv.get(SCOPE, b"single", k)

    def batch() -> None:
        kv.put_many(SCOPE, b"batch", [(k, value) for k in keys])

    def queue_cycle() -> None:
        q.push(QUEUE, [value] * ops)
        for _ in range(ops):
            claim = q.claim(QUEUE, lease=30)
            assert claim is not None
            claim.ack()

    def doc_writes() -> None:
        for i in range(ops):
            store.documents.write(f"{DOC_PREFIX}{i % 100}", {"n": i})

    def appends() -> None:
        for i in range(ops):
            store.events.append(SESSION, [{"id": f"e{i}", "type": "bench", "payload": {"n": i}, "settled": True}])

    rows = [
        _timed("kv.put (one per commit)", ops, puts),
        _timed("kv.get", ops, gets),
        _timed("kv.put_many (one commit)", ops, batch),
        _timed("queue push + claim + ack", ops, queue_cycle),
        _timed("documents.write", ops, doc_writes),
    ]
    if scratch_store:  # events cannot be deleted: never append scratch sessions to the user's store
        rows.append(_timed("events.append (one event)", ops, appends))
    return rows


def _clean(store: durastate.Store) -> None:
    store.kv.clear(SCOPE)
    store.queues.clear(QUEUE)
    for key in list(store.documents.iter_keys(DOC_PREFIX)):
        store.documents.delete(key)
