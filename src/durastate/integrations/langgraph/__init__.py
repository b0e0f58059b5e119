"""LangGraph on durastate: a checkpointer and a long-term memory store (extra ``[langgraph]``).

``DurastateSaver`` is a ``BaseCheckpointSaver`` (sync and async, every
optional capability: ``delete_for_runs``, ``copy_thread``, ``prune``);
``DurastateStore`` is a ``BaseStore`` (get/put/delete/search/list_namespaces
with filters, limit/offset and TTL; semantic search with LangGraph's
``index=`` configuration, as ``InMemoryStore(index=)``). Both run on any
durastate URL: one SQLite file or PostgreSQL::

    from durastate.integrations.langgraph import DurastateSaver

    graph = builder.compile(checkpointer=DurastateSaver.from_url("state.db"))
"""

from __future__ import annotations

try:
    import langgraph.checkpoint.base
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f"durastate.integrations.langgraph needs LangGraph: pip install 'durastate[langgraph]' ({exc})"
    ) from exc

from .saver import DurastateSaver
from .store import DurastateStore

__all__ = ["DurastateSaver", "DurastateStore"]
