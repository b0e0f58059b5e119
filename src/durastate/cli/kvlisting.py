"""What a kv namespace holds besides values: its logs and counters, for ``kv ls``, ``kv log``, ``kv counter``.

The kv facet lists a namespace's counters (``KV.counters``, which ``kv
counter`` pages through) and its log keys (``KV.log_keys``, keys only);
what the CLI shows beyond that (how many values, entries and counters a
namespace holds, each log's entry count, first and last ordinal and last
append time, whether a key holds a log or a counter at all) is here, next
to the commands, in the ``inspect`` module's manner: both engines share
the SQL (bytes compare bytewise on SQLite BLOB and PostgreSQL bytea
alike), and every count is capped so a huge namespace costs a bounded read.
"""

from __future__ import annotations

from dataclasses import dataclass

from durastate._validate import as_int64
from durastate.engines.base import READ, Engine

# How many rows a count reads at most; beyond it the count shows as "100000+".
COUNT_CAP = 100_000

LIVE_VALUES = READ(
    "SELECT COUNT(*) FROM (SELECT 1 FROM {p}kv WHERE scope = ? AND ns = ?"
    " AND (expires_at IS NULL OR expires_at > ?) LIMIT ?) AS capped"
)
LOG_ENTRIES = READ("SELECT COUNT(*) FROM (SELECT 1 FROM {p}kv_log WHERE scope = ? AND ns = ? LIMIT ?) AS capped")
COUNTERS = READ("SELECT COUNT(*) FROM (SELECT 1 FROM {p}kv_counter WHERE scope = ? AND ns = ? LIMIT ?) AS capped")
# One row per log key: entries, first and last ordinal, last append time.
LOG_KEYS = READ(
    "SELECT key, COUNT(*) AS entries, MIN(id) AS first_id, MAX(id) AS last_id, MAX(created_at) AS last_at"
    " FROM {p}kv_log WHERE scope = ? AND ns = ? AND key > ? GROUP BY key ORDER BY key LIMIT ?"
)
LOG_ENTRY_TIMES = READ(
    "SELECT id, value, created_at FROM {p}kv_log WHERE scope = ? AND ns = ? AND key = ? AND id > ? ORDER BY id LIMIT ?"
)
COUNTER_ONE = READ("SELECT n FROM {p}kv_counter WHERE scope = ? AND ns = ? AND key = ?")
HAS_LOG = READ("SELECT 1 FROM {p}kv_log WHERE scope = ? AND ns = ? AND key = ? LIMIT 1")


@dataclass(frozen=True)
class Holdings:
    """What one namespace holds; each count is exact up to ``COUNT_CAP`` (``capped`` says which went past)."""

    values: int
    log_entries: int
    counters: int

    @staticmethod
    def shown(n: int) -> int | str:
        return n if n <= COUNT_CAP else f"{COUNT_CAP}+"


def holdings(engine: Engine, scope: bytes, ns: bytes) -> Holdings:
    now = engine.now_ms()
    cap = COUNT_CAP + 1

    def count(statement: str, params: tuple[object, ...]) -> int:
        row = engine.one(statement, params)
        return 0 if row is None else int(row[0])

    return Holdings(
        values=count(engine.sql(LIVE_VALUES), (scope, ns, now, cap)),
        log_entries=count(engine.sql(LOG_ENTRIES), (scope, ns, cap)),
        counters=count(engine.sql(COUNTERS), (scope, ns, cap)),
    )


@dataclass(frozen=True)
class LogKey:
    key: bytes
    entries: int
    first: int  # ordinal of the oldest entry kept
    last: int  # ordinal of the newest
    last_at: int | None  # store time (ms) of the newest append; None for entries from before times were kept


def log_keys(engine: Engine, scope: bytes, ns: bytes, after: bytes, limit: int) -> list[LogKey]:
    """The log keys of a namespace after ``after`` (``b""``: from the start), in bytes order."""
    rows = engine.all(engine.sql(LOG_KEYS), (scope, ns, after, limit))
    return [LogKey(bytes(r[0]), int(r[1]), int(r[2]), int(r[3]), None if r[4] is None else int(r[4])) for r in rows]


def log_entries(
    engine: Engine, scope: bytes, ns: bytes, key: bytes, after: int, limit: int
) -> list[tuple[int, bytes, int | None]]:
    """``(ordinal, value, appended_at_ms)`` of one log after ordinal ``after`` (a signed 64-bit int, as
    ``KV.log`` takes it: ``InvalidRequest`` otherwise, before SQLite's driver fails on it)."""
    after = as_int64("after", after)
    rows = engine.all(engine.sql(LOG_ENTRY_TIMES), (scope, ns, key, after, limit))
    return [(int(r[0]), bytes(r[1]), None if r[2] is None else int(r[2])) for r in rows]


def has_log(engine: Engine, scope: bytes, ns: bytes, key: bytes) -> bool:
    return engine.one(engine.sql(HAS_LOG), (scope, ns, key)) is not None


def counter(engine: Engine, scope: bytes, ns: bytes, key: bytes) -> int | None:
    """A counter's value, or None when it does not exist (``KV.counter`` says 0 for both)."""
    row = engine.one(engine.sql(COUNTER_ONE), (scope, ns, key))
    return None if row is None else int(row[0])
