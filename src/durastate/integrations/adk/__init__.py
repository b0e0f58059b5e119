"""Google ADK on durastate: sessions, artifacts and memory (extra ``[adk]``).

Built and tested against ``google-adk`` 2.13.0 (pinned in the ``test``
extra). Three services, each a subclass of ADK's own base class, on any
durastate URL (one SQLite file shared by several processes, or
PostgreSQL)::

    from google.adk.runners import Runner
    from durastate.integrations.adk import DurastateSessionService

    sessions = DurastateSessionService(url="sqlite:agents.db")
    runner = Runner(app_name="app", agent=agent, session_service=sessions)

* ``DurastateSessionService`` (``google.adk.sessions.BaseSessionService``):
  sessions as documents whose revision compare-and-swap is the
  ``StaleSessionError`` check, events in kv (``sessions``).
* ``DurastateArtifactService`` (``google.adk.artifacts.BaseArtifactService``):
  versioned artifacts in kv, a counter handing out versions (``artifacts``).

* ``DurastateMemoryService`` (``google.adk.memory.BaseMemoryService``):
  ADK's in-memory keyword search over the events of a user's sessions, kept
  in kv (``memory``).

``docs/adk.md`` has the details; each module's docstring states its contract.
"""

from __future__ import annotations

from ._common import ArtifactInputError, SessionExists, SessionNotFound, StaleSession
from .artifacts import DurastateArtifactService
from .memory import DurastateMemoryService
from .sessions import DurastateSessionService

__all__ = [
    "ArtifactInputError",
    "DurastateArtifactService",
    "DurastateMemoryService",
    "DurastateSessionService",
    "SessionExists",
    "SessionNotFound",
    "StaleSession",
]
