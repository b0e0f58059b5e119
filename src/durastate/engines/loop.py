"""The asyncio event loop running on the calling thread, without importing asyncio.

Engines ask it on their refusal paths (a lock wait on an event loop's
thread). Importing asyncio costs a short-lived process a large share of its
first ``durastate.open`` (asyncio pulls in ssl, concurrent.futures, ...),
and no loop can run before something imported asyncio, so until then the
answer is ``None`` without it.
"""

from __future__ import annotations

import sys

__all__ = ["running_loop"]


def running_loop() -> object | None:
    """The event loop running on this thread (``asyncio._get_running_loop()``), or ``None``."""
    asyncio = sys.modules.get("asyncio")
    return None if asyncio is None else asyncio._get_running_loop()
