"""unittest mixin for the frameworks' own test suites: a fresh store URL per test, per engine.

The external suites are ``unittest.TestCase`` classes, so pytest fixtures
cannot reach them; ``on_engines`` makes one concrete class per engine
instead (``sqlite-file``: a fresh file; ``postgres``: a fresh schema on the
conformance suite's server, skipped loudly when there is none).
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import durastate
from durastate.testing import plugin, postgres_server

ENGINES = {"SqliteFile": "sqlite-file", "Postgres": "postgres"}


class EngineCase:
    """Mixin: ``self.url`` is a fresh store URL; ``open_store()`` opens it (closed at cleanup)."""

    engine = "sqlite-file"
    url: str

    def setUp(self) -> None:
        if self.engine == "sqlite-file":
            folder = tempfile.mkdtemp(prefix="durastate-it-")
            self.addCleanup(shutil.rmtree, folder, True)  # type: ignore[attr-defined]
            self.url = f"sqlite://{folder}/state.db"
        else:
            base = plugin._postgres_base_url()
            self.url, schema = postgres_server.create_schema(base)
            self.addCleanup(postgres_server.drop_schema, base, schema)  # type: ignore[attr-defined]
        super().setUp()  # type: ignore[misc]

    def open_store(self, **options: Any) -> durastate.Store:
        store = durastate.open(self.url, **options)
        self.addCleanup(store.close)  # type: ignore[attr-defined]
        return store


def on_engines(namespace: dict[str, Any], name: str, *bases: type) -> None:
    """Put ``Test<name><Engine>`` into ``namespace`` for every engine."""
    for suffix, engine in ENGINES.items():
        cls_name = f"Test{name}{suffix}"
        attributes = {"engine": engine, "__module__": namespace["__name__"]}
        namespace[cls_name] = type(cls_name, (EngineCase, *bases), attributes)
