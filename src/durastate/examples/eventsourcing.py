"""``python -m durastate.examples.eventsourcing [URL]``: eventsourcing applications persisted by durastate.

1. The environment names the persistence module and the store:
   ``PERSISTENCE_MODULE=durastate.integrations.eventsourcing`` and
   ``DURASTATE_URL`` (here the first argument, or a fresh SQLite file).
2. ``Bank`` (an application) opens accounts and records deposits;
   ``Ledger`` (a process application) follows Bank's notification log and
   keeps a running total. Ledger's own events and its tracking position
   commit together, so a crash can neither lose nor double-count a deposit.
3. Both stop; a brand-new Bank on the same store rebuilds the account from
   its stored events, and its notification log reads back ids 1, 2, 3, ...
   with no gaps.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.domain import Aggregate, event
from eventsourcing.system import ProcessApplication, SingleThreadedRunner, System

from ._url import store_url

LEDGER_ID = UUID(int=1)


class Account(Aggregate):
    @event("Opened")
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.balance = Decimal(0)

    class Deposited(Aggregate.Event):
        amount: Decimal

    @event(Deposited)
    def deposit(self, amount: Decimal) -> None:
        if amount <= 0:
            raise ValueError(f"deposit must be positive, got {amount}")
        self.balance += amount


class Bank(Application[UUID]):
    def open_account(self, owner: str) -> UUID:
        account = Account(owner)
        self.save(account)
        return account.id

    def deposit(self, account_id: UUID, amount: Decimal) -> None:
        account: Account = self.repository.get(account_id)
        account.deposit(amount)
        self.save(account)

    def balance(self, account_id: UUID) -> Decimal:
        account: Account = self.repository.get(account_id)
        return account.balance


class Total(Aggregate):
    @staticmethod
    def create_id() -> UUID:
        return LEDGER_ID

    @event("Started")
    def __init__(self) -> None:
        self.amount = Decimal(0)
        self.deposits = 0

    @event("Added")
    def add(self, amount: Decimal) -> None:
        self.amount += amount
        self.deposits += 1


class Ledger(ProcessApplication[UUID]):
    @singledispatchmethod
    def policy(self, domain_event: Any, processing_event: ProcessingEvent[UUID]) -> None:
        """Other events of Bank are not the ledger's business."""

    @policy.register
    def _(self, domain_event: Account.Deposited, processing_event: ProcessingEvent[UUID]) -> None:
        try:
            total: Total = self.repository.get(LEDGER_ID)
        except AggregateNotFoundError:  # the first deposit ever: no total yet
            total = Total()
        total.add(domain_event.amount)
        processing_event.collect_events(total)  # committed with Ledger's tracking of this notification

    def total(self) -> Total:
        result: Total = self.repository.get(LEDGER_ID)
        return result


def main(argv: list[str]) -> int:
    """Run the example; ``argv`` are its arguments without the program name (``--url URL``)."""
    description = "eventsourcing's Bank and Ledger on durastate: events stored, followed, rebuilt."
    with store_url(argv, "bank", description) as url:
        return run(url)


def run(url: str) -> int:
    env = {"PERSISTENCE_MODULE": "durastate.integrations.eventsourcing", "DURASTATE_URL": url}
    print(f"DURASTATE_URL={url}")
    problems = []
    runner: SingleThreadedRunner[UUID] = SingleThreadedRunner(System(pipes=[[Bank, Ledger]]), env=env)
    runner.start()
    bank = runner.get(Bank)
    ledger = runner.get(Ledger)
    first_id = (bank.recorder.max_notification_id() or 0) + 1
    before = ledger.total().amount if ledger.recorder.max_tracking_id("Bank") else Decimal(0)

    alice = bank.open_account("alice")
    for amount in ("10.00", "32.50", "7.25"):
        bank.deposit(alice, Decimal(amount))
        print(f"bank: deposited {amount} for alice")
    total = ledger.total()
    print(
        f"ledger: total {total.amount} over {total.deposits} deposits; it has processed Bank up to "
        f"notification {ledger.recorder.max_tracking_id('Bank')}"
    )
    if total.amount - before != Decimal("49.75"):
        problems.append(f"ledger total grew by {total.amount - before}, expected 49.75")
    runner.stop()

    # A new application object (a new store) on the same database.
    again = Bank(env=env)
    balance = again.balance(alice)
    log = again.notification_log.select(start=first_id, limit=10)
    ids = [n.id for n in log]
    print(f"new Bank: alice's balance rebuilt from stored events: {balance}")
    print(f"new Bank: notification ids {ids} ({', '.join(n.topic.rsplit('.', 1)[-1] for n in log)})")
    if balance != Decimal("49.75"):
        problems.append(f"rebuilt balance is {balance}, expected 49.75")
    if ids != list(range(first_id, first_id + 4)):
        problems.append(f"notification ids {ids} are not {first_id}..{first_id + 3}")
    again.close()
    for problem in problems:
        print(f"problem: {problem}")
    print("FAILED" if problems else "OK: events stored, followed exactly once, rebuilt, ids gap-free")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
