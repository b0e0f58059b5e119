"""Worker processes for the notification-order test (module level so ``spawn`` can import them)."""

from __future__ import annotations

from uuid import uuid4

from eventsourcing.persistence import IntegrityError, StoredEvent

import durastate
from durastate.integrations.eventsourcing import DurastateApplicationRecorder


def write_batches(url: str, batches: int, size: int) -> int:
    """Insert ``batches`` batches of ``size`` events, every third one colliding; return events written."""
    with durastate.open(url) as store:
        recorder = DurastateApplicationRecorder(store, application="orders")
        written = 0
        first = StoredEvent(uuid4(), 0, "topic", b"x")
        recorder.insert_events([first])
        written += 1
        for n in range(batches):
            originator = uuid4()
            events = [StoredEvent(originator, v, "topic", b"%d" % v) for v in range(size)]
            if n % 3 == 0:
                events.append(first)  # collides: the whole batch is refused and its ids are not spent
                try:
                    recorder.insert_events(events)
                except IntegrityError:
                    continue
                raise AssertionError("a colliding batch was accepted")
            recorder.insert_events(events)
            written += size
        return written
