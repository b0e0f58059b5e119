"""Inspector page latency over big namespaces: ``durastate ui`` pages vs the facet reads they make.

Run: ``.venv/bin/python bench/ui.py`` (``--rows 100000 --repeat 21``;
``--url postgresql://...`` for a PostgreSQL store, an empty schema).

A store is filled with ``--rows`` rows in ONE kv namespace, ``--rows``
items in ONE queue, ``--rows`` documents and ``--rows`` events in ONE
session (plus the small ``durastate.testing.sample`` data). The inspector
app runs in this process under uvicorn (the server ``durastate ui`` uses) on
127.0.0.1; each page is fetched over HTTP ``--repeat`` times, contenders
interleaved request by request, and the median wall time is reported:

* ``page``: the whole GET (routing, facet reads, template, HTTP);
* ``facet``: the facet call(s) behind the same page, timed alone in-process,
  so ``page/facet`` is what the web layer costs on top of the reads;
* the first page of a namespace vs a page deep inside it (after 90 % of the
  rows): keyset paging should make them cost the same (``deep/first``).

Target (issue 14): a page over a store with 1e5 rows in one namespace
renders in < 200 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import uvicorn

import durastate
from durastate.cli.inspect import health, table_stats
from durastate.cli.ui import create_app
from durastate.cli.ui.alerts import Thresholds, collect
from durastate.engines.base import READ
from durastate.testing.sample import fill

PAGE = 50


def populate(store: durastate.Store, rows: int) -> None:
    fill(store)
    for start in range(0, rows, 10_000):
        stop = min(rows, start + 10_000)
        store.kv.put_many(b"big", b"rows", [(b"row-%08d" % i, b"value %d" % i) for i in range(start, stop)])
        store.queues.push("big", [b"job %d" % i for i in range(start, stop)])
        with store.transaction():
            for i in range(start, stop):
                store.documents.write(f"docs/{i:08d}", {"n": i})
            store.events.append(
                "big",
                [{"id": f"e{i}", "type": "tick", "payload": {"n": i}, "settled": True} for i in range(start, stop)],
            )


def serve(app: object, port: int) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("uvicorn did not start")
        time.sleep(0.02)
    return server


def fetch(url: str) -> float:
    started = time.perf_counter()
    polled = url.endswith("part=live")  # a fragment, as htmx asks for it
    request = urllib.request.Request(url, headers={"HX-Request": "true"} if polled else {})
    with urllib.request.urlopen(request, timeout=60) as r:
        body = r.read()
        assert r.status == 200 and (b'id="live"' in body if polled else b"<html" in body)
    return time.perf_counter() - started


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--url", default=None, help="an EMPTY store to fill (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or str(Path(tmp) / "ui-bench.db")
        store = durastate.open(url)
        t0 = time.perf_counter()
        populate(store, args.rows)
        print(f"# filled {url.split('@')[-1]} with {args.rows:,} rows per facet in {time.perf_counter() - t0:.1f} s")
        deep = int(args.rows * 0.9)
        base = f"http://127.0.0.1:{args.port}"
        server = serve(create_app(store, page_size=PAGE), args.port)
        kv, q, docs, ev = store.kv, store.queues, store.documents, store.events
        due = store.engine.one(store.engine.sql(READ("SELECT available_at FROM {p}queue WHERE id = ?")), (deep,))
        queue_cursor = f"{due[0]}:{deep}" if due else "0:0"  # the peek cursor of item number `deep`
        big = b"row-%08d" % deep

        def kv_page(start: bytes | None) -> object:
            return (
                kv.scopes(limit=PAGE),
                kv.namespaces(b"big", limit=PAGE),
                list(kv.scan(b"big", b"rows", start=start, limit=PAGE + 1)),
            )

        def queue_page(after: str | None) -> object:
            return q.stats("big"), q.peek("big", after=after, limit=PAGE), q.dead_letters("big", limit=PAGE)

        def session_page(after: int) -> object:
            return ev.read_events("big", after_index=after, limit=PAGE), ev.list_snapshots("big")

        cases: list[tuple[str, str, Callable[[], object]]] = [
            ("kv first page", "/kv?scope=big&ns=rows", lambda: kv_page(None)),
            ("kv deep page", f"/kv?scope=big&ns=rows&start={big.decode()}", lambda: kv_page(big)),
            ("kv value", f"/kv?scope=big&ns=rows&key={big.decode()}", lambda: kv.get(b"big", b"rows", big)),
            ("queue first page", "/queues/big", lambda: queue_page(None)),
            ("queue deep page", f"/queues/big?after={queue_cursor}", lambda: queue_page(queue_cursor)),
            ("documents first page", "/documents?prefix=docs/", lambda: docs.list("docs/", limit=PAGE)),
            (
                "documents deep page",
                f"/documents?prefix=docs/&cursor=docs/{deep:08d}",
                lambda: docs.list("docs/", limit=PAGE, cursor=f"docs/{deep:08d}"),
            ),
            ("session first page", "/events/big", lambda: session_page(0)),
            ("session deep page", f"/events/big?after={deep}", lambda: session_page(deep)),
            (
                "overview (counts every table)",
                "/",
                lambda: (table_stats(store, scan=False), health(store, check="none"), collect(store, Thresholds())),
            ),
            # What the open overview re-reads every 5 s: the queue "big" holds --rows ready items.
            ("overview alerts (polled)", "/?part=live", lambda: collect(store, Thresholds())),
        ]
        page_times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        facet_times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        for _name, path, call in cases:  # warm-up: caches, prepared statements
            fetch(base + path)
            call()
        for _ in range(args.repeat):
            for name, path, call in cases:
                page_times[name].append(fetch(base + path))
                facet_times[name].append(timed(call))
        server.should_exit = True
        store.close()
    print(f"# median of {args.repeat} requests per page, page size {PAGE}; target: page < 200 ms")
    print(f"{'page':32} {'page ms':>9} {'facet ms':>9} {'page/facet':>11}  target")
    medians = {}
    for name, _, _ in cases:
        page_ms = statistics.median(page_times[name]) * 1000
        facet_ms = statistics.median(facet_times[name]) * 1000
        medians[name] = page_ms
        verdict = "PASS" if page_ms < 200 else "MISS"
        print(f"{name:32} {page_ms:9.1f} {facet_ms:9.2f} {page_ms / facet_ms:11.1f}  <200 ms {verdict}")
    for kind in ("kv", "queue", "documents", "session"):
        print(f"# {kind}: deep/first = {medians[kind + ' deep page'] / medians[kind + ' first page']:.2f}")


if __name__ == "__main__":
    main()
