"""The statements a call runs on a SQLite store, as the engine's connections saw them (their first words)."""

from __future__ import annotations

from collections.abc import Callable

import durastate
from durastate.engines.sqlite import SqliteEngine


def statements_run(store: durastate.Store, call: Callable[[], object]) -> list[str]:
    """The first word of each statement ``call`` ran (``BEGIN IMMEDIATE`` whole), in order.

    Traced on the thread's own connection (transactions) and the shared
    writer's (single writes, ``sqlite_connections``).
    """
    engine = store.engine
    assert isinstance(engine, SqliteEngine)
    seen: list[str] = []
    connections = [engine._thread_connection(), engine._connections.shared.conn]
    for connection in connections:
        assert connection is not None
        connection.set_trace_callback(seen.append)
    try:
        call()
    finally:
        for connection in connections:
            assert connection is not None
            connection.set_trace_callback(None)
    return [text.split(" ", 2)[0] + (" " + text.split(" ", 2)[1] if text.startswith("BEGIN") else "") for text in seen]
