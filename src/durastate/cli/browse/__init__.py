"""Browsing commands: ``kv``, ``queue``, ``events``, ``docs``, ``records``, ``presence``.

All read through the public facet API (kv logs and counters of a
namespace through ``cli.kvlisting``) on a store opened read-only; the two
commands that write are ``queue redrive`` and ``events redrive`` (they make
dead letters claimable again), and they ask first (``--yes`` skips asking).

Every listing pages the same way: ``--limit N`` and ``--after CURSOR``,
where CURSOR is what the previous page ended with (a hint line on stderr,
``"next"`` in JSON); ``--json`` prints ``{"items": [...], "next": ...}``.

One module per command group, as the facets divide the data (``_kv``,
``_queues``, ``_events``, ``_documents``, ``_records``, ``_presence``);
``_shared`` holds the paging options and the ask-before-writing step they
all use. ``cli.app`` registers the groups exported here.
"""

from ._documents import docs
from ._events import events
from ._kv import kv
from ._presence import presence
from ._queues import queue
from ._records import records
from ._shared import bytes_successor

__all__ = ["bytes_successor", "docs", "events", "kv", "presence", "queue", "records"]
