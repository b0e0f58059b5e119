"""Microsoft Agent Framework on durastate: workflow checkpoints and conversation history (extra ``[agent-framework]``).

Built and tested against ``agent-framework-core`` 1.26.0 (pinned in the
``test`` extra), on any durastate URL (one SQLite file shared by several
processes, or PostgreSQL)::

    from durastate.integrations.agent_framework import DurastateCheckpointStorage, DurastateHistoryProvider

    storage = DurastateCheckpointStorage(url="sqlite:agents.db")   # WorkflowBuilder(checkpoint_storage=...)
    history = DurastateHistoryProvider(url="sqlite:agents.db")     # Agent(context_providers=[history])

* ``DurastateCheckpointStorage`` (the ``CheckpointStorage`` protocol):
  checkpoints as JSON in kv, never pickled (``checkpoints``, ``_codec``).
* ``DurastateHistoryProvider`` (a ``HistoryProvider``): each session's
  messages in kv, appended under a per-session lock (``history``).

``docs/agent_framework.md`` has the details; each module's docstring states its contract.
"""

from __future__ import annotations

from ._errors import CheckpointNotFound, InvalidCheckpoint, UndecodableCheckpoint
from .checkpoints import DurastateCheckpointStorage
from .history import DurastateHistoryProvider

__all__ = [
    "CheckpointNotFound",
    "DurastateCheckpointStorage",
    "DurastateHistoryProvider",
    "InvalidCheckpoint",
    "UndecodableCheckpoint",
]
