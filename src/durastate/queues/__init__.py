"""``store.queues``: named FIFO work queues with leases and dead letters.

Two ways to consume, on the same queues:

* ``pop(name)`` removes and returns the next payload: at-most-once, vgi's
  destructive pop. A consumer that dies after ``pop`` loses the item.
* ``claim(name, lease=s)`` hands out the next payload under a lease and
  returns a ``Claim``. ``ack()`` removes it; ``nack(delay=)`` gives it back
  (after ``delay``); ``renew()`` extends the lease. A lease that runs out is
  redelivered by the next ``claim`` itself: no reaper process. Each delivery
  counts as an attempt; an item that has used ``max_attempts`` deliveries
  without an ack moves to the dead letters (listable, re-drivable) instead
  of being delivered again.

One column carries the whole scheduling state: ``available_at`` (ms). A
pushed item is available at its push time (plus ``delay``); a claimed item
is unavailable until its lease deadline, which is exactly when it becomes
claimable again if nobody acks it. Delivery order is ``(available_at, id)``:
FIFO for items pushed without delay; a delayed, nacked or expired item joins
the line at the moment it becomes due. Every claim is one indexed statement
(``(queue, available_at, id)``), so its cost does not grow with the queue.

Leases are fenced by a random token: ``ack``/``nack``/``renew`` act only if
the caller's token is still the item's token. A holder whose lease expired
and whose item was claimed again gets ``Conflict`` and changes nothing, so
no item is ever acknowledged by two live holders. A holder whose lease
expired but whose item nobody re-claimed yet may still ack it.

All of this composes with ``store.transaction()``: acking a claim in the
same transaction as the writes it caused makes the effect exactly-once.

``wait=`` on ``claim``/``pop`` blocks up to that many seconds for an item
(at most ``MAX_WAIT``, 2**32 seconds, sync and async; longer is refused):
pushes from this process wake the waiter at once; pushes from other
processes wake it at once on PostgreSQL (the store's listening connection,
``engines.postgres_listen``), and are seen by polling every
``POLL_INTERVAL`` seconds elsewhere (SQLite, PostgreSQL behind a pooler).

Inspection (read-only): ``names()`` lists queues, ``peek(name)`` pages through
a queue's items in delivery order with their state, claiming nothing.
"""

from __future__ import annotations

from .._validate import MAX_NAME_SIZE as MAX_NAME_SIZE  # re-exported: the conformance suite tests the bound
from .facet import DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS
from .facet import POLL_INTERVAL as POLL_INTERVAL
from .facet import Claim as Claim
from .facet import Queues as Queues
from .statements import ACK as ACK
from .statements import BACKLOG as BACKLOG
from .statements import BURY as BURY
from .statements import CLAIM as CLAIM
from .statements import CLAIM_HEAD as CLAIM_HEAD
from .statements import CLAIM_ID as CLAIM_ID
from .statements import CLEAR as CLEAR
from .statements import DEAD_DELETE_THROUGH as DEAD_DELETE_THROUGH
from .statements import DEAD_OLDEST as DEAD_OLDEST
from .statements import DEAD_PAGE as DEAD_PAGE
from .statements import DELETE_DEAD_ALL as DELETE_DEAD_ALL
from .statements import DELETE_ID as DELETE_ID
from .statements import HEAD_TIME as HEAD_TIME
from .statements import NACK as NACK
from .statements import PEEK_READY as PEEK_READY
from .statements import POP as POP
from .statements import PUSH as PUSH
from .statements import REDRIVE_ALL as REDRIVE_ALL
from .statements import RENEW as RENEW
from .statements import SCHEMA as SCHEMA
from .statements import STATS as STATS
from .statements import dead_ids_held_sql as dead_ids_held_sql
from .statements import delete_dead_ids_sql as delete_dead_ids_sql
from .statements import redrive_ids_sql as redrive_ids_sql
from .upkeep import PEEK as PEEK
from .upkeep import DeadLetter as DeadLetter
from .upkeep import QueueBacklog as QueueBacklog
from .upkeep import QueueItem as QueueItem
from .upkeep import QueueStats as QueueStats

__all__ = ["QueueBacklog", "QueueItem", "Claim", "DeadLetter", "QueueStats", "Queues", "SCHEMA", "DEFAULT_MAX_ATTEMPTS"]
