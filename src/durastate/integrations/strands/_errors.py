"""Errors that are both Strands' and durastate's, and the one import check for the extra.

Strands code catches ``SessionException`` around repository calls and
``StorageError`` around storage calls; durastate users catch
``durastate.errors`` classes. Each error here is both.
"""

from __future__ import annotations

from ...errors import Conflict, InvalidRequest, NotFound

try:
    from strands.types.exceptions import SessionException, StorageError
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError("durastate.integrations.strands needs Strands Agents: pip install 'durastate[strands]'") from exc

__all__ = ["InvalidStorageKey", "SessionExists", "SessionRecordNotFound"]


class SessionExists(SessionException, Conflict):
    """``create_session`` of an id that already holds data (``FileSessionManager`` raises ``SessionException``)."""


class SessionRecordNotFound(SessionException, NotFound):
    """An update, a listing or a delete of a session, agent, message or multi-agent state that does not exist."""


class InvalidStorageKey(StorageError, InvalidRequest):
    """A ``Storage`` key or prefix the shipped backends refuse (empty, ``..`` segment, backslash), or not a ``str``."""
