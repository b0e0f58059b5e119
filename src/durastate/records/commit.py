"""A commit's ids and rows: claimed, checked (the seed's ``_check_global_ids``) and written.

Two ways to the same outcome:

* **the precise path** (``claim_and_check_ids``, every engine): the claims
  and the entry insert run first and their answers (the ids claimed, the
  entries written) decide whether anything must be looked up; a refusal
  names the id and why. On an engine whose answers cost nothing extra
  (SQLite) it is the cheapest there is.
* **one flight** (``in_one_flight``, engines with ``deferred_answers``:
  PostgreSQL): nothing is waited for before the COMMIT. The commit sequence
  is taken with ``next_value_later`` and read by the entry insert in SQL;
  the checks become one ``require`` that every id is free (or held by a
  record of the same upsertable type), sent right after the sequence's row
  lock is taken (every commit takes it first, so nothing can claim an id
  between the check and the writes); then the writes, none of which needs
  an answer. BEGIN, the attempt row (carrying the sequence value), the
  check, the writes and COMMIT are one round trip. A failed check rolls
  it all back and the precise path runs, so the caller gets exactly its
  refusal. A batch naming an id twice takes the precise path at once.
  A batch writing documents reads them first (their records and newest
  revisions in one statement: a delta applies to the stored value), in
  the round trip that takes the sequence; an address it creates a current
  document at becomes a requirement too; its writes ride the COMMIT: two
  round trips. Any refusal of the documents' checks rolls the flight back
  and the precise path words it, in its own order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from ..engines.base import RequirementFailed
from ..errors import Conflict, InvalidRequest
from .inputs import reject
from .models import DocAction, Plan
from .statements import (
    COMMIT_SEQUENCE,
    ENTRY_WIDTH,
    EXACT_CLAIM,
    ID_CHUNK,
    INSERT_CONVERSATION,
    UPSERT_SUBMISSION,
    UPSERT_TASK,
    claim_sql,
    ids_free_sql,
    ids_sql,
    insert_entries_sql,
)

if TYPE_CHECKING:
    from ..engines.base import Engine

# A one-flight commit's document steps: given the batch's documents, read and check them, send their
# requirements, and return their writes (run with the commit's sequence).
DocumentSteps = Callable[[dict[int, DocAction]], Callable[[int], None]]

# The sizes of the lookup statements (powers of two up to ID_CHUNK) and of
# the multi-row writes (every size up to EXACT_CLAIM, then those).
LOOKUP_SIZES = [1 << n for n in range(ID_CHUNK.bit_length()) if 1 << n <= ID_CHUNK]
WRITE_SIZES = sorted({*LOOKUP_SIZES, *range(1, EXACT_CLAIM + 1)})


class Commits:
    """The id claims and row writes of ``Records.commit`` (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        sql = engine.sql
        self.insert_conversation = sql(INSERT_CONVERSATION)
        self.upsert_task = sql(UPSERT_TASK)
        self.upsert_submission = sql(UPSERT_SUBMISSION)
        self.id_types = {n: sql(ids_sql("rec_id", "id, type", n)) for n in LOOKUP_SIZES}
        self.entry_ids = {n: sql(ids_sql("rec_entry", "id, 'entry'", n)) for n in LOOKUP_SIZES}
        self.entry_seqs = {n: sql(ids_sql("rec_entry", "id, commit_seq", n)) for n in LOOKUP_SIZES}
        self.claim_ids = {n: sql(claim_sql(n)) for n in WRITE_SIZES}
        self.insert_entries = {n: sql(insert_entries_sql(n)) for n in WRITE_SIZES}
        # One flight: only where answers are deferred (an engine that answers at once never runs it).
        self.one_flight = engine.capabilities.deferred_answers
        if self.one_flight:
            self.ids_free = {n: sql(ids_free_sql(n)) for n in WRITE_SIZES}
            self.claim_checked = {n: sql(claim_sql(n, checked=True)) for n in WRITE_SIZES}
            self.insert_entries_checked = {n: sql(insert_entries_sql(n, checked=True)) for n in WRITE_SIZES}

    def lookup(self, statements: Mapping[int, str], ids: Sequence[int]) -> list[Any]:
        """The rows of ``ids`` by a lookup of ``LOOKUP_SIZES`` (``ids_sql``), chunked and padded."""
        rows: list[Any] = []
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), ID_CHUNK):
            chunk = unique[start : start + ID_CHUNK]
            size = 1 << (len(chunk) - 1).bit_length()
            rows.extend(self._engine.all(statements[size], chunk + [chunk[-1]] * (size - len(chunk))))
        return rows

    def write_rows(self, plan: Plan) -> None:
        """The batch's conversations, tasks and submissions (their ids are claimed and checked already)."""
        engine = self._engine
        if plan.conversations:
            engine.executemany(self.insert_conversation, plan.conversations)
        if plan.tasks:
            engine.executemany(self.upsert_task, plan.tasks)
        if plan.submissions:
            engine.executemany(self.upsert_submission, plan.submissions)

    def in_one_flight(self, plan: Plan, documents: DocumentSteps | None = None) -> int | None:
        """Commit ``plan`` in one round trip (two with documents); its sequence, or None: take the precise path.

        ``documents`` (a batch with documents): called with them once the
        sequence is sent; it reads and checks them (their answer, and the
        sequence's, is the first round trip), sends its own requirements,
        and returns their writes, run after the other rows with the
        sequence. None when the batch names an id twice, an id is not free,
        or ``documents`` refused (``Conflict``, ``InvalidRequest``): nothing
        was written then (the transaction, or the caller's savepoint, rolled
        back), and the precise path words the refusal. See the module
        docstring.
        """
        claims = plan.claims
        if len({id for id, _table in claims}) != len(claims):
            return None  # the precise path tells an upsert twice from a conflict
        engine = self._engine
        refusals: tuple[type[Exception], ...] = (Conflict, InvalidRequest) if documents else (RequirementFailed,)
        try:
            with engine.transaction():
                seq = engine.next_value_later(COMMIT_SEQUENCE)
                write_documents = documents(plan.documents) if documents else None
                if claims:
                    for statement, params in self.chunks(self.ids_free, list(chain.from_iterable(claims)), 2):
                        engine.require(statement, params, "every id of the batch is free")
                if plan.typed:
                    for statement, params in self.chunks(self.claim_checked, list(chain.from_iterable(plan.typed)), 2):
                        engine.send(statement, params)
                if plan.entries:
                    entries = plan.entries.copy()
                    del entries[3::ENTRY_WIDTH]  # the commit_seq slots: the statement reads the sequence itself
                    for statement, params in self.chunks(self.insert_entries_checked, entries, ENTRY_WIDTH - 1):
                        engine.send(statement, params)
                self.write_rows(plan)
                if write_documents:
                    write_documents(seq.value)
        except refusals:
            return None
        return seq.value

    def claim_and_check_ids(self, plan: Plan, seq: int) -> None:
        """Claim the batch's ids, write its entries and apply the seed's ``_check_global_ids``.

        One id, one record type, across ``rec_id`` (every type but entry)
        and ``rec_entry`` (an entry's row is its claim). Both are
        ``INSERT ... ON CONFLICT DO NOTHING`` statements that skip an id the
        other table holds, the ``rec_id`` claims first, so an entry skips an
        id this batch claimed for another type. The claims name the ids they
        took (RETURNING); the entry insert only counts its rows. When every
        id was taken (all new, each written once) there is nothing to
        check; otherwise the entries this commit wrote are the rows carrying
        its ``seq``, and only the ids not taken are looked up. A refusal
        raises inside the commit's transaction, which rolls everything back
        (no statement fails, so nothing is doomed).
        """
        typed = plan.typed
        engine = self._engine
        taken: list[Any] = []
        if typed:
            for statement, params in self.chunks(self.claim_ids, list(chain.from_iterable(typed)), 2):
                taken += engine.all(statement, params)
        entries = plan.entries
        written = 0
        if entries:
            entries[3::ENTRY_WIDTH] = [seq] * (len(entries) // ENTRY_WIDTH)  # each row's commit_seq
            for statement, params in self.chunks(self.insert_entries, entries, ENTRY_WIDTH):
                written += engine.execute(statement, params)
        claims = plan.claims
        if len(taken) + written == len(claims):
            return  # every id new and written once: nothing to check
        took = {int(row[0]) for row in taken}
        if written:
            entry_ids = entries[0::ENTRY_WIDTH]
            took.update(int(i) for i, row_seq in self.lookup(self.entry_seqs, entry_ids) if row_seq == seq)
        before = [id for id in dict.fromkeys(id for id, _table in claims) if id not in took]
        existing: dict[int, str] = {}
        if before:
            for statements in (self.id_types, self.entry_ids):
                existing.update((int(i), str(t)) for i, t in self.lookup(statements, before))
        claimed: dict[int, str] = {}
        for id, table in claims:
            have = existing.get(id)
            earlier = claimed.get(id)
            if table in ("conversation", "entry", "document"):
                if have is not None:
                    reject(f"ID {id} already belongs to {have}")
                if earlier is not None:
                    reject(f"ID {id} is written more than once")
            else:
                if have is not None and have != table:
                    reject(f"ID {id} already belongs to {have}")
                if earlier is not None and earlier != table:
                    reject(f"ID {id} is written as two record types")
            claimed[id] = table

    @staticmethod
    def chunks(statements: Mapping[int, str], params: list[Any], width: int) -> list[tuple[str, list[Any]]]:
        """A multi-row statement (``WRITE_SIZES``) over ``params``, as (statement, params) pairs.

        ``params`` holds the rows' values one row after another, ``width``
        each. At most ``EXACT_CLAIM`` rows go in one statement of exactly
        that many (the common commits: no padding for SQL to skip); more go
        in chunks of ``ID_CHUNK``, padded to a power of two with the chunk's
        last row (which DO NOTHING skips, which no row count includes, and
        which a check reads twice).
        """
        count = len(params) // width
        if count <= EXACT_CLAIM:
            return [(statements[count], params)]
        out = []
        step = ID_CHUNK * width
        for start in range(0, len(params), step):
            chunk = params[start : start + step]
            rows = len(chunk) // width
            size = rows if rows <= EXACT_CLAIM else 1 << (rows - 1).bit_length()
            out.append((statements[size], chunk + chunk[-width:] * (size - rows)))
        return out
