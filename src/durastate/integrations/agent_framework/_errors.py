"""Errors that are both Agent Framework's and durastate's, and the one import check for the extra.

Agent Framework code catches ``WorkflowCheckpointException`` around checkpoint
calls (the protocol's documented error); durastate users catch
``durastate.errors`` classes. Each error here is both, so either ``except``
works.
"""

from __future__ import annotations

from ...errors import DurastateError, InvalidRequest, NotFound

try:
    from agent_framework import WorkflowCheckpointException
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "durastate.integrations.agent_framework needs Agent Framework: pip install 'durastate[agent-framework]'"
    ) from exc

__all__ = ["CheckpointNotFound", "InvalidCheckpoint", "UndecodableCheckpoint"]


class InvalidCheckpoint(InvalidRequest, WorkflowCheckpointException):
    """A checkpoint (or an argument) the storage refuses; nothing was written.

    Raised for a checkpoint holding a value the JSON codec does not store
    (durastate never pickles), a class not allowed in checkpoints, an id or
    workflow name of the wrong type or too long, an unparsable timestamp.
    """

    def __init__(self, message: str) -> None:
        # Both bases take the message; AgentFrameworkException's would also log it at debug level.
        InvalidRequest.__init__(self, message)


class CheckpointNotFound(NotFound, WorkflowCheckpointException):
    """``load`` of an id with no checkpoint (the framework's storages raise ``WorkflowCheckpointException``)."""

    def __init__(self, message: str) -> None:
        NotFound.__init__(self, message)


class UndecodableCheckpoint(DurastateError, WorkflowCheckpointException):
    """A stored checkpoint names a class this process does not allow or has not imported."""

    def __init__(self, message: str) -> None:
        DurastateError.__init__(self, message)
