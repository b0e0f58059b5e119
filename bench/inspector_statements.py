"""Statements the inspector's overview page sends to PostgreSQL, and the rows it writes.

Fills a fresh schema with ``durastate.testing.sample.fill``, opens the store
the way ``durastate ui`` does (``open_for_reading`` where the code has it,
else the plain ``open_store`` of older versions), renders ``/`` once to warm
up and once measured, then the part the overview polls (``/?part=live``),
and counts every statement psycopg sends during each measured request by
its first word, plus the rows of every table before and
after (the attempt table's among them).

    .venv/bin/python bench/inspector_statements.py postgresql://postgres@127.0.0.1:5432/postgres

To measure another version's code, put its ``src`` first on the path:
``PYTHONPATH=/path/to/old/src .venv/bin/python bench/inspector_statements.py URL``.
"""

from __future__ import annotations

import collections
import inspect
import sys
from typing import Any

import psycopg
from starlette.testclient import TestClient

import durastate
from durastate.cli import _common
from durastate.cli.ui import create_app
from durastate.testing import postgres_server
from durastate.testing.sample import fill

counts: collections.Counter[str] = collections.Counter()
counting = False
_execute = psycopg.Cursor.execute


def _counted(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
    if counting:
        counts[str(query).lstrip().split(None, 1)[0].upper()] += 1
    return _execute(self, query, params, **kwargs)


psycopg.Cursor.execute = _counted  # type: ignore[method-assign]


def rows(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
    return {t: int(conn.execute(f'SELECT count(*) FROM "{schema}"."{t}"').fetchone()[0]) for t in sorted(tables)}  # type: ignore[index]


def main(base: str) -> None:
    global counting
    url, schema = postgres_server.create_schema(base)
    try:
        with durastate.open(url) as store:
            fill(store)
        opener = getattr(_common, "open_for_reading", None)
        store = opener(url, "ds_") if opener is not None else _common.open_store(url, "ds_")
        try:
            options = {"page_size": 50, "bound": "127.0.0.1", "allow_hosts": (), "token": None}
            accepted = inspect.signature(create_app).parameters
            app = create_app(store, **{k: v for k, v in options.items() if k in accepted})
            client = TestClient(app, base_url="http://127.0.0.1")
            assert client.get("/").status_code == 200  # warm-up: the first request compiles and connects
            with psycopg.connect(base, autocommit=True) as conn:
                before = rows(conn, schema)
                counting = True
                answer = client.get("/")
                counting = False
                page_counts = dict(counts)
                counts.clear()
                # The part the overview polls every few seconds (versions without it answer the whole page).
                counting = True
                polled = client.get("/?part=live", headers={"HX-Request": "true"})
                counting = False
                polled_after = rows(conn, schema)
            assert answer.status_code == 200, answer.text[-500:]
            assert polled.status_code == 200, polled.text[-500:]
        finally:
            store.close()
        changed = {t: polled_after[t] - before[t] for t in polled_after if polled_after[t] != before.get(t)}
        print(f"durastate {durastate.__file__}")
        for label, counted in (("overview page", page_counts), ("polled alerts (/?part=live)", dict(counts))):
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(counted.items(), key=lambda kv: -kv[1]))
            print(f"{label}: {sum(counted.values())} statements ({kinds})")
        print(f"rows written by the requests: {changed or 'none'}")
    finally:
        postgres_server.drop_schema(base, schema)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/postgres")
