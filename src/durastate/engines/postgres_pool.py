"""The PostgreSQL engine's connection pool: psycopg_pool's, the most recently returned idle connection first.

psycopg_pool keeps its idle connections in a queue, first in, first out: a
thread borrowing one connection per statement on a pool of 16 goes round
all 16, so every statement lands on a connection (and a server backend)
whose caches went cold while the other 15 had their turn. That cost a
single thread 0.3-0.6x of its speed on a pool of 1 (bench/postgres.py,
"pool rotation"). ``LifoPool`` takes the newest idle connection instead,
so a thread that returns its connection and borrows again gets the same
one back whenever nobody took it meanwhile.

It keeps no connection of its own: every idle connection is still in the
pool, where any thread can take it, the pool's ``max_idle`` shrinking
closes the one unused longest (the oldest end of the queue, where the
connections a quieter workload no longer needs now gather), and
``close()`` closes them all.

psycopg_pool has no option for the order, so this reorders its private
queue (``_pool``, a deque: taken from the left, returned to the right) in
the one private method that takes from it, under the pool's lock. A
psycopg_pool without them still works, first in, first out
(``tests/postgres`` checks the order, so such a version is noticed).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import psycopg
import psycopg_pool

__all__ = ["LifoPool"]

_TAKE = "_get_ready_connection"  # psycopg_pool >= 3.2: takes an idle connection, under the pool's lock


class LifoPool(psycopg_pool.ConnectionPool[psycopg.Connection[Any]]):
    """``psycopg_pool.ConnectionPool`` that hands out its most recently returned idle connection first."""

    if hasattr(psycopg_pool.ConnectionPool, _TAKE):

        def _get_ready_connection(self, timeout: float | None) -> psycopg.Connection[Any] | None:
            idle = getattr(self, "_pool", None)
            if type(idle) is deque and len(idle) > 1:
                idle.rotate(1)  # the newest (right end) to the left end, where the pool takes from
            conn: psycopg.Connection[Any] | None = super()._get_ready_connection(timeout)
            return conn
