"""Single writes outside a transaction under the attempt rules, and the pruning of their attempt rows.

The PostgreSQL engine's path for a write that runs alone (see
``postgres_attempts`` for the rules and statements): a fresh attempt id
(``attempt_id``, its time first) per write, the attempt-recording variant
run once, its retry after a lost connection (replay the recorded outcome
or run it again), the marked insert that carries its id in its own row,
and the pruning of expired attempt rows, in passing and in
``prune_bookkeeping``. ``PostgresEngine`` supplies the connection handling
(``_first_try``, ``_retrying``) and the compiled statements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from .base import EngineBase, Params
from .postgres_attempts import (
    ATTEMPT_PRUNE_BATCH,
    ATTEMPT_PRUNE_EVERY,
    MarkedWrite,
    attempt_args,
    attempt_id,
    attempt_id_floor,
    fetch_counted,
    fetch_result,
    replay,
    rerun,
)

__all__ = ["AttemptWrites", "LostTry"]


class LostTry:
    """A first try whose connection was lost: its error and when it began (``PostgresEngine._first_try``)."""

    __slots__ = ("began", "error")

    def __init__(self, error: psycopg.Error, began: float) -> None:
        self.error = error
        self.began = began


class AttemptWrites(EngineBase):
    """The single-write path and the attempt rows' pruning (see the module docstring); a base of ``PostgresEngine``.

    Only declarations of what the engine supplies, no stand-in methods: it
    comes first among the engine's bases, so a stand-in would hide the
    engine's other bases' methods.
    """

    attempt_retention: float
    # Writes left before the next prune in passing (ATTEMPT_PRUNE_EVERY).
    _writes_until_prune: int
    # ATTEMPT_RESULT, ATTEMPT_PRUNE and ATTEMPT_PRUNE_UNTIMED, compiled (PostgresEngine._compile_own_statements).
    _attempt_result: str
    _attempt_prune: str
    _attempt_prune_untimed: str
    _first_try: Callable[[str, Params, int, Callable[[Any, int], Any]], Any]
    _retrying: Callable[..., Any]

    def _write_once(self, variant: str, params: Params, fetch: int, first: bool = False) -> Any:
        """Run an attempt-recording write; after a lost connection, replay or retry.

        ``first``: a ``OneRowInsert``'s text, which takes the attempt id and
        time ahead of the statement's parameters and answers its row count
        itself; else the variant counts (``fetch_counted``).
        """
        now = self.now_ms()
        attempt = attempt_id(now)
        self._writes_until_prune -= 1
        if self._writes_until_prune <= 0:
            self._writes_until_prune = ATTEMPT_PRUNE_EVERY
            self._prune_attempts()
        fetcher = fetch_result if first else fetch_counted
        got = self._first_try(variant, attempt_args(params, attempt, now, first), fetch, fetcher)
        if type(got) is not LostTry:
            return got
        return self._retry_write(variant, params, attempt, fetch, got, first)

    def _retry_write(
        self, variant: str, params: Params, attempt: bytes, fetch: int, lost: LostTry, first: bool = False
    ) -> Any:
        """An attempt-recording write's retries after its first try's connection was lost (``rerun``)."""
        lookup, prefix = self._attempt_result, self.prefix
        fetcher = fetch_result if first else fetch_counted
        return self._retrying(
            lambda c: rerun(
                c,
                variant,
                attempt_args(params, attempt, self.now_ms(), first),
                attempt,
                fetcher,
                lookup,
                fetch,
                prefix,
            ),
            lambda c: replay(c, lookup, attempt, fetch),
            lost.began,
            failed=lost.error,
        )

    def _write_marked(self, marked: MarkedWrite, params: Params, fetch: int) -> Any:
        """Run an insert carrying its attempt id in its row; after a lost connection, re-read it or insert again."""
        attempt = attempt_id(self.now_ms())
        got = self._first_try(marked.sql, (*params, attempt), fetch, fetch_result)
        if type(got) is not LostTry:
            return got
        return self._retrying(
            lambda c: marked.run_again(c, params, attempt, fetch),
            lambda c: marked.replay(c, attempt, fetch),
            got.began,
            failed=got.error,
        )

    def _prune_attempts(self, batch: int = ATTEMPT_PRUNE_BATCH, untimed: bool = False) -> int:
        """Delete up to ``batch`` attempt rows older than the retention window.

        By the primary key (``ATTEMPT_PRUNE``: ids made before the cutoff);
        ``untimed``: the rows whose ids do not start with a time before now,
        those of older durastate (``ATTEMPT_PRUNE_UNTIMED``).
        """
        now = self.now_ms()
        cutoff = now - int(self.attempt_retention * 1000)
        if untimed:
            sql, floor = self._attempt_prune_untimed, attempt_id_floor(now)
        else:
            sql, floor = self._attempt_prune, attempt_id_floor(cutoff)
        removed: int = self._retrying(lambda c: c.run(sql, (floor, cutoff, batch)).rowcount, None)
        return removed

    def prune_bookkeeping(self, *, limit: int | None = None) -> int:
        """Delete attempt rows past ``attempt_retention``, in batches; at most ``limit`` rows.

        After the window a write's recorded result (rows it returned, a
        drained value among them) is gone from the database: the rows by
        their time-led ids first, then those of older durastate.
        """
        if self.read_only:
            return 0
        removed = 0
        for untimed in (False, True):
            while limit is None or removed < limit:
                batch = ATTEMPT_PRUNE_BATCH if limit is None else min(ATTEMPT_PRUNE_BATCH, limit - removed)
                pruned = self._prune_attempts(batch, untimed)
                removed += pruned
                if pruned < batch:
                    break
        return removed

    def attempt_committed(self, attempt: bytes) -> bool:
        """Whether the write (or transaction) with this attempt id committed."""
        return self._attempt_found(self._attempt_result, attempt)

    def _attempt_found(self, lookup: str, attempt: bytes) -> bool:
        row = self._retrying(lambda c: c.run(lookup, (attempt,)).fetchone(), None)
        return row is not None
