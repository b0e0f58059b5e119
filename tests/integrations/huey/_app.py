"""The huey app of the lease tests, shared by the test process and the consumer it SIGKILLs.

``double`` counts its runs in the store: the first run marks itself started
and then blocks until its process is killed; any later run returns ``2 * n``.
"""

from __future__ import annotations

import threading
from typing import Any

import durastate
from durastate.integrations.huey import DurastateHuey

APP = "lease-tests"
LEASE = 30.0
MARKS = (b"test", b"marks")


def make_app(
    url: str | None = None, *, store: durastate.Store | None = None, **options: Any
) -> tuple[DurastateHuey, Any]:
    huey = DurastateHuey(APP, url=url, store=store, lease=LEASE, utc=False, **options)
    kv = huey.storage.store.kv

    @huey.task(name="double")
    def double(n: int) -> int:
        if kv.incr(*MARKS, b"runs") == 1:
            kv.put(*MARKS, b"started", b"yes")
            threading.Event().wait()  # the first run never ends: its process is killed
        return 2 * n

    return huey, double


def consume(url: str) -> None:
    """A real huey consumer (one worker thread) on ``url``, until killed."""
    from huey.consumer import Consumer

    huey, _ = make_app(url)
    Consumer(huey, workers=1, initial_delay=0.01, max_delay=0.05, check_worker_health=False).run()
