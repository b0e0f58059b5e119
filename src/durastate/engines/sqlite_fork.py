"""The fork gate: no ``fork()`` while another thread of the process is inside a SQLite transaction.

Split from ``sqlite.py`` (which registers the one gate with
``os.register_at_fork`` and passes every transaction through it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["ForkGate"]


class ForkGate:
    """Keeps ``fork()`` from happening while another thread is in a transaction.

    SQLite keeps, per process, a record of which locks its connections hold
    on each file. A child forked while some thread of the parent is inside
    a transaction inherits a record saying that (now orphaned) connection
    holds the write lock, and its own connections then wait for it forever.
    So the fork hook waits for transactions of other threads to end (and
    holds new ones back) before letting the fork proceed. A thread that
    forks *inside* its own transaction cannot be helped: don't do that.
    """

    WAIT = 30.0

    def __init__(self, own_transactions: Callable[[], int] = lambda: 0) -> None:
        # How many transactions the forking thread itself has open: the fork
        # waits for the others only.
        self.own_transactions = own_transactions
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)  # for forks and the threads they hold back
        # One entry per outermost transaction open in this process. enter
        # and leave run around every transaction, so their usual case (no
        # fork under way) takes no lock: ``list.append`` and ``list.pop``
        # are each one atomic step (under the GIL, as every step here), and a thread appends *before* it reads
        # ``forking`` while before_fork sets ``forking`` *before* it counts
        # the entries, so either the fork counts the new transaction (and
        # waits for it) or the thread sees ``forking`` (and steps back).
        self.entries: list[None] = []
        self.forking = False

    def enter(self) -> None:
        self.entries.append(None)
        if self.forking:
            self._wait_for_fork()

    def _wait_for_fork(self) -> None:
        """Step back out of the count (the fork may be waiting for it) until the fork is over."""
        with self.cond:
            self._drop_entry()
            self.cond.notify_all()
            while self.forking:
                self.cond.wait()
            self.entries.append(None)

    def leave(self) -> None:
        try:
            self.entries.pop()  # _drop_entry, inline: this runs after every transaction
        except IndexError:
            pass
        if self.forking:  # before_fork waits for the count to drop
            with self.cond:
                self.cond.notify_all()

    def _drop_entry(self) -> None:
        try:
            self.entries.pop()
        except IndexError:
            pass  # a transaction the parent opened, ending in a forked child

    def before_fork(self) -> None:
        own = self.own_transactions()
        with self.cond:
            self.forking = True
            self.cond.wait_for(lambda: len(self.entries) <= own, timeout=self.WAIT)

    def after_fork_in_parent(self) -> None:
        with self.cond:
            self.forking = False
            self.cond.notify_all()

    def after_fork_in_child(self) -> None:
        # Fresh state: the parent's transactions are not the child's.
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.entries = []
        self.forking = False
