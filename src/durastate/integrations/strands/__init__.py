"""Strands Agents on durastate: session repository, session manager and storage (extra ``[strands]``).

Built and tested against ``strands-agents`` 1.62.0 (pinned in the ``test``
extra), on any durastate URL (one SQLite file shared by several processes,
or PostgreSQL)::

    from strands import Agent
    from durastate.integrations.strands import DurastateSessionManager, DurastateStorage

    agent = Agent(session_manager=DurastateSessionManager("user-42", url="sqlite:agents.db"))

* ``DurastateSessionRepository`` (``strands.session.SessionRepository``):
  sessions, agents, messages and multi-agent state in kv, one namespace per
  session; ``DurastateSessionManager`` is a ``RepositorySessionManager`` on it,
  ``FileSessionManager``'s counterpart (``sessions``).
* ``DurastateStorage`` (``strands.storage.Storage``): bytes under keys (``storage``).

``docs/strands.md`` has the details; each module's docstring states its contract.
"""

from __future__ import annotations

from ._errors import InvalidStorageKey, SessionExists, SessionRecordNotFound
from .sessions import DurastateSessionManager, DurastateSessionRepository
from .storage import DurastateStorage

__all__ = [
    "DurastateSessionManager",
    "DurastateSessionRepository",
    "DurastateStorage",
    "InvalidStorageKey",
    "SessionExists",
    "SessionRecordNotFound",
]
