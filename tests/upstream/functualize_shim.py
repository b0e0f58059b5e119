"""A pytest plugin that puts durastate's substrate where functualize-state-sqlite's own would be.

Loaded with ``-p functualize_shim`` by ``tests/test_functualize_upstream.py``
into a pytest run of functualize-state-sqlite's own
``tests/test_sqlite_substrate.py`` (taken unchanged from its sdist). Before
that file is imported, this registers the modules ``functualize_state_sqlite``
and ``functualize_state_sqlite.substrate`` whose ``SQLiteSubstrate`` is
``durastate.compat.functualize.SQLiteSubstrate`` with two test-only
additions:

* the engine: ``DURASTATE_SHIM_ENGINE=sqlite-file`` opens the path the test
  gives (a file); ``postgres`` opens a fresh schema on the server of
  ``durastate.testing.postgres_server`` per distinct path, so two substrates
  on one path share their documents as two on one file do (dropped at the
  end of the session);
* ``_conn()``: the upstream tests reach under the substrate with raw SQL on
  its ``documents`` table to plant an undecodable payload and to read a
  backup back. The object returned runs exactly those statements on
  durastate's documents table (payloads are bytes there: text is encoded on
  the way in and decoded on the way out); any other statement raises, so a
  changed upstream test fails here instead of passing vacuously.
"""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path
from typing import Any

from durastate.compat.functualize import SQLiteSubstrate
from durastate.engines.base import READ, WRITE
from durastate.testing import postgres_server

ENGINE = os.environ.get("DURASTATE_SHIM_ENGINE", "sqlite-file")

# The raw statements of the upstream file, and what they become here.
_PLANT_PAYLOAD = re.compile(r"UPDATE documents SET payload = \? WHERE key = \?")
_PLANT_PAYLOAD_SQL = WRITE("UPDATE {p}documents SET payload = ? WHERE key = ?")
_READ_PAYLOAD = re.compile(r"SELECT payload FROM documents WHERE key = '([^']*)'")
_READ_PAYLOAD_SQL = READ("SELECT payload FROM {p}documents WHERE key = ?")

_schemas: dict[str, tuple[str, str]] = {}  # path -> (url, schema) on PostgreSQL


def _target(path: Path | str) -> str | Path:
    if ENGINE == "sqlite-file":
        return Path(path)
    if ENGINE != "postgres":
        raise ValueError(f"DURASTATE_SHIM_ENGINE must be sqlite-file or postgres, got {ENGINE!r}")
    key = str(Path(path).resolve())
    if key not in _schemas:
        base, reason = postgres_server.server_url()
        if base is None:
            raise RuntimeError(f"no PostgreSQL server for the upstream suite: {reason}")
        _schemas[key] = postgres_server.create_schema(base)
    return _schemas[key][0]


class _Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None


class _RawDocuments:
    """The two raw statements of the upstream tests, on durastate's documents table."""

    def __init__(self, substrate: SQLiteSubstrate) -> None:
        self._engine = substrate.store.engine

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> _Rows:
        engine = self._engine
        if _PLANT_PAYLOAD.fullmatch(sql.strip()):
            payload, key = params
            engine.execute(engine.sql(_PLANT_PAYLOAD_SQL), (payload.encode("utf-8"), key))
            return _Rows([])
        read = _READ_PAYLOAD.fullmatch(sql.strip())
        if read:
            row = engine.one(engine.sql(_READ_PAYLOAD_SQL), (read.group(1),))
            return _Rows([] if row is None else [(bytes(row[0]).decode("utf-8"),)])
        raise NotImplementedError(f"the functualize shim does not translate this statement: {sql!r}")


class SubstrateUnderTest(SQLiteSubstrate):
    """durastate's substrate on the engine of this run, with the upstream tests' ``_conn()``."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(_target(path))

    def _conn(self) -> _RawDocuments:
        return _RawDocuments(self)


def _install() -> None:
    package = types.ModuleType("functualize_state_sqlite")
    package.__path__ = []
    substrate = types.ModuleType("functualize_state_sqlite.substrate")
    substrate.SQLiteSubstrate = SubstrateUnderTest  # type: ignore[attr-defined]
    package.substrate = substrate  # type: ignore[attr-defined]
    package.SQLiteSubstrate = SubstrateUnderTest  # type: ignore[attr-defined]
    sys.modules["functualize_state_sqlite"] = package
    sys.modules["functualize_state_sqlite.substrate"] = substrate


_install()


def pytest_report_header() -> str:
    import functualize

    version = getattr(functualize, "__version__", "?")
    return f"functualize_shim: durastate's substrate on {ENGINE}, functualize {version} from {functualize.__file__}"


def pytest_sessionfinish() -> None:
    for _url, schema in _schemas.values():
        base, _reason = postgres_server.server_url()
        if base is not None:
            postgres_server.drop_schema(base, schema)
