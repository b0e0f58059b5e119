"""``store.records``: a durable agent's records and versioned documents.

The data model is pi-durable's storage contract (DESIGN 5.3): conversations
(with fork chains and owners), entries (with head markers), tasks,
submissions (idempotent by request id) and versioned documents, all written
by ``commit(writes)``: one atomic batch that returns a global commit
sequence number. Records are JSON objects with the seed's camelCase keys;
the facet takes and returns them as ``dict``s, so ``durastate.compat.
pi_durable`` is only an async, error-mapping front end over this module.

Writes (each a dict with a ``type``):

* ``{"type": "conversation"|"entry"|"task"|"submission", "value": {...}}``;
  conversations and entries are insert-only, tasks and submissions upsert;
* ``{"type": "document.create", "record": {...}, "content": content}``;
* ``{"type": "document.copy", "record": {...}, "source": {"id", "at"}}``
  (fork-copy: the new document starts from the source's value at ``at``);
* ``{"type": "document.change", "id": id, "content": content}``;
* ``{"type": "document.retire", "id": id}``.

Content is ``{"kind": "base", "version": int, "value": {...}}`` or
``{"kind": "delta", "version": int, "ops": [op, ...]}`` with ops in Chord's
tuple vocabulary, pi-durable's delta format (``durastate._chord`` states
every rule: ``["s", ["path", 0], value]``, ``["a", path, text]``, ...).

Every validation rule of the seed holds (one id belongs to one record type;
conversations, entries and documents are written once; a document has at
most one content command and one retire per batch; a delta needs a base of
the same version; change/retire of unknown or retired documents; one live
incarnation per address; the fork-copy checks). A rejected batch leaves no
trace: checks run inside the commit's transaction before any write, and the
transaction rolls back on any error.

Decisions where the seed is silent (listed for docs/decisions.md):

* **Errors.** Malformed input (wrong types, unknown write types, unsafe
  integers, delta ops pi-durable's ``assert_valid_op`` refuses, reserved
  path segments) is ``InvalidRequest``;
  a well-formed batch that collides with stored state (an id of another
  type, a document that exists / is unknown / is retired, a delta whose ops
  do not apply to the current value, or would make it something other than
  an object) is ``Conflict``; a read naming an unknown conversation is
  ``NotFound``. Delta ops are applied at commit (to refuse ops that do not
  apply), not only at read. A delta of more than ``MAX_DELTA_OPERATIONS``
  ops is stored folded into one root replacement by its result (as
  pi-durable's writer folds), so replaying a stored delta is bounded too.
* **Commit sequence.** Gap-free and in commit order on both engines: taken
  from the ``records`` row of ``{p}sequence`` as the first statement of the
  commit's transaction, so record commits serialise on that row (which also
  makes the validation race-free). The first commit is 1; ``last_seq()``
  is the latest committed one.
* **Ids.** Integers in ``[0, 2**53 - 1]`` (JavaScript-safe, as the seed).
  ``mint_id()`` is persistent and shared by every process: one statement
  that returns one more than both the last minted id and the largest id
  ever committed, so minted ids never collide across processes (the seed
  keeps the counter in memory, which only works for one process). It
  never returns an id below ``FIRST_MINTED_ID`` (2): pi-durable reserves 1
  for its root conversation, and its own storages start minting at 2.
  One id, one record type, across all of them: an entry's id is claimed
  by ``rec_entry``'s own primary key, every other type's by a ``rec_id``
  row (schema 3; entries had ``rec_id`` rows before), each claim an
  ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` that skips an id the
  other table holds, so a commit of entries writes the entries and the
  commit sequence and nothing else.
* **Bounded document reads.** Every revision row carries the number of
  deltas since its logical base (``depth``); the newest row of a document
  always carries the materialised value (``state``), and so does every
  ``CHECKPOINT_EVERY``-th delta. A read at any point starts from the
  nearest row at or before it that has a value (a base or a state) and
  applies at most ``CHECKPOINT_EVERY - 1`` deltas; a current read applies
  none. These checkpoints are invisible: ``version`` and
  ``deltasSinceBase`` are the logical ones.
* **Retention.** Current-only documents (non-conversation scope, or
  ``history: "latest"``) keep exactly one revision row: each new revision
  replaces the previous ones, and retiring drops them. Full-history
  documents keep every revision (point-in-time reads need them) but drop
  the stored value of rows that are neither the newest nor a checkpoint,
  until ``prune_document_revisions(keep_last=, older_than=)`` (or
  ``Store.maintain()`` with ``Retention(max_record_revisions=,
  record_revision_max_age=)``; off by default, as pi-durable keeps
  everything) removes their oldest revisions, never the newest: the
  oldest revision left gets its value stored (so every revision left
  reads as before), and a read at a point before it raises
  ``RevisionPruned`` (a ``NotFound``). Revisions record when they were
  written (``written_at``, schema 2) for the age rule.
* **Strings.** Record JSON is stored as compact UTF-8 bytes; NaN/infinity
  and non-string keys are refused. Lone surrogates are kept exactly
  (pi-durable stores them; ``durastate._json_lossless`` says how: the
  record's bytes keep each surrogate as its own three bytes, and an
  indexed string gets an ASCII ``\\uXXXX`` JSON escape). Indexed strings
  (kinds, keys, statuses, request ids) are stored JSON-encoded (so NUL
  characters work on PostgreSQL, and equal strings have equal encodings)
  and limited to ``MAX_TEXT`` bytes.
* **Fork chains** are read with one recursive query; a chain deeper than
  ``MAX_CHAIN_DEPTH`` (only possible with a cycle of parent pointers) is
  refused with ``Conflict`` instead of looping.
* **Cursors** are ``{"after": id, "order": "ascending"|"descending"}``; a
  cursor whose order contradicts the query's is refused. Document scans are
  always ascending by id.

The package's modules, along the facet's seams: ``statements`` (schema,
layout constants and SQL), ``models`` (the values passed between modules),
``rows`` (rows read by column name), ``inputs`` (argument and batch checks)
and ``facet`` (the ``Records`` class). Every name is re-exported here, so
``from durastate.records import X`` is the import to use.
"""

from __future__ import annotations

# Re-exported names beyond __all__ (statements, limits, helpers) stay module
# attributes (``durastate.records.MATERIALIZE``) for the plan checks and benchmarks.
from .facet import Records as Records
from .inputs import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
from .inputs import MAX_TEXT as MAX_TEXT
from .inputs import dumps as dumps
from .inputs import fail as fail
from .inputs import loads as loads
from .inputs import reject as reject
from .models import RevisionPruned as RevisionPruned
from .statements import CHAIN as CHAIN
from .statements import CHECKPOINT_EVERY as CHECKPOINT_EVERY
from .statements import COMMIT_SEQUENCE as COMMIT_SEQUENCE
from .statements import CONVERSATION_FILTERS as CONVERSATION_FILTERS
from .statements import DELETE_REVISIONS_BEFORE as DELETE_REVISIONS_BEFORE
from .statements import DOCUMENT_SCAN as DOCUMENT_SCAN
from .statements import DROP_REVISIONS as DROP_REVISIONS
from .statements import DROP_STATE as DROP_STATE
from .statements import ENTRIES as ENTRIES
from .statements import FIND_DOCUMENT as FIND_DOCUMENT
from .statements import FIRST_MINTED_ID as FIRST_MINTED_ID
from .statements import GET_CONVERSATION as GET_CONVERSATION
from .statements import GET_DOCUMENT_RECORD as GET_DOCUMENT_RECORD
from .statements import GET_ENTRY as GET_ENTRY
from .statements import GET_SUBMISSION as GET_SUBMISSION
from .statements import GET_TASK as GET_TASK
from .statements import HEAD_MARKER as HEAD_MARKER
from .statements import ID_CHUNK as ID_CHUNK
from .statements import INSERT_CONVERSATION as INSERT_CONVERSATION
from .statements import INSERT_DOCUMENT as INSERT_DOCUMENT
from .statements import INSERT_ENTRY as INSERT_ENTRY
from .statements import INSERT_REVISION as INSERT_REVISION
from .statements import LAST_SEQ as LAST_SEQ
from .statements import LIST_REVISIONS as LIST_REVISIONS
from .statements import LOCK_COMMITS as LOCK_COMMITS
from .statements import MATERIALIZE as MATERIALIZE
from .statements import MAX_CHAIN_DEPTH as MAX_CHAIN_DEPTH
from .statements import MINT_ID as MINT_ID
from .statements import NEEDS_STATE as NEEDS_STATE
from .statements import NO_CURRENT_DOCUMENT as NO_CURRENT_DOCUMENT
from .statements import OLDEST_REVISION as OLDEST_REVISION
from .statements import OLDEST_REVISIONS as OLDEST_REVISIONS
from .statements import PRUNE_CANDIDATES as PRUNE_CANDIDATES
from .statements import RETIRE_DOCUMENT as RETIRE_DOCUMENT
from .statements import SCHEMA as SCHEMA
from .statements import SET_STATE as SET_STATE
from .statements import SUBMISSION_BY_REQUEST as SUBMISSION_BY_REQUEST
from .statements import SUBMISSION_FILTERS as SUBMISSION_FILTERS
from .statements import TASK_FILTERS as TASK_FILTERS
from .statements import UPSERT_SUBMISSION as UPSERT_SUBMISSION
from .statements import UPSERT_TASK as UPSERT_TASK
from .statements import documents_sql as documents_sql

__all__ = ["CHECKPOINT_EVERY", "FIRST_MINTED_ID", "MAX_SAFE_INTEGER", "SCHEMA", "Records", "RevisionPruned"]
