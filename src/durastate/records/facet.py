"""The ``Records`` class: the records facet of a ``Store`` (rules: ``durastate.records``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .. import _chord
from .._retention import BATCH, as_age_ms, as_keep
from .._validate import INT64_MAX
from .._validate import as_limit as as_row_limit
from ..errors import Conflict, DurastateError, NotFound
from .commit import LOOKUP_SIZES, Commits
from .inputs import (
    MAX_SAFE_INTEGER,
    apply_ops,
    as_address,
    as_bool,
    as_id,
    as_limit,
    as_object,
    as_point,
    as_scope,
    dumps,
    fail,
    indexed_text,
    is_current_only,
    loads,
    optional_filters,
    plan_commit,
    reject,
    scan_order,
)
from .models import Address, Content, DocAction, RevisionPruned
from .rows import Revision, chain_from_rows, document_from_row, page_of
from .statements import (
    CHAIN,
    CHECKPOINT_EVERY,
    COMMIT_SEQUENCE,
    CONVERSATION_FILTERS,
    DELETE_REVISIONS_BEFORE,
    DOCUMENT_SCAN,
    DROP_REVISIONS,
    DROP_STATE,
    ENTRIES,
    FIND_DOCUMENT,
    FIRST_MINTED_ID,
    GET_CONVERSATION,
    GET_DOCUMENT_RECORD,
    GET_ENTRY,
    GET_SUBMISSION,
    GET_TASK,
    HEAD_MARKER,
    INSERT_DOCUMENT,
    INSERT_REVISION,
    LAST_SEQ,
    LIST_REVISIONS,
    LOCK_COMMITS,
    MATERIALIZE,
    MAX_CHAIN_DEPTH,
    MINT_ID,
    NEEDS_STATE,
    NO_CURRENT_DOCUMENT,
    OLDEST_REVISION,
    OLDEST_REVISIONS,
    PRUNE_CANDIDATES,
    RETIRE_DOCUMENT,
    SET_STATE,
    SUBMISSION_BY_REQUEST,
    SUBMISSION_FILTERS,
    TASK_FILTERS,
    documents_sql,
    filter_combos,
    scan_sql,
)

if TYPE_CHECKING:
    from ..engines.base import Engine


class Records:
    """The records facet of a ``Store`` (rules: ``durastate.records``)."""

    def __init__(self, engine: Engine, *, max_value_size: int | None = None) -> None:
        self._engine = engine
        # Every JSON value a commit stores (a record, a document's content, record or materialised value).
        self.max_value_size = max_value_size
        sql = engine.sql
        self._last_seq = sql(LAST_SEQ)
        self._mint = sql(MINT_ID)
        self._insert_document = sql(INSERT_DOCUMENT)
        self._retire_document = sql(RETIRE_DOCUMENT)
        self._insert_revision = sql(INSERT_REVISION)
        self._drop_revisions = sql(DROP_REVISIONS)
        self._drop_state = sql(DROP_STATE)
        self._no_current_document = sql(NO_CURRENT_DOCUMENT)
        self._get_conversation = sql(GET_CONVERSATION)
        self._chain = sql(CHAIN)
        self._get_entry = sql(GET_ENTRY)
        self._head_marker = sql(HEAD_MARKER)
        self._entries = {order: sql(statement) for order, statement in ENTRIES.items()}
        self._get_task = sql(GET_TASK)
        self._get_submission = sql(GET_SUBMISSION)
        self._submission_by_request = sql(SUBMISSION_BY_REQUEST)
        self._get_document_record = sql(GET_DOCUMENT_RECORD)
        self._find_document = {k: sql(v) for k, v in FIND_DOCUMENT.items()}
        self._materialize_sql = sql(MATERIALIZE)
        self._document_scan = {k: sql(v) for k, v in DOCUMENT_SCAN.items()}
        self._list_revisions = sql(LIST_REVISIONS)
        self._prune_candidates = sql(PRUNE_CANDIDATES)
        self._oldest_revisions = sql(OLDEST_REVISIONS)
        self._lock_commits = sql(LOCK_COMMITS)
        self._needs_state = sql(NEEDS_STATE)
        self._set_state = sql(SET_STATE)
        self._delete_revisions_before = sql(DELETE_REVISIONS_BEFORE)
        self._oldest_revision = sql(OLDEST_REVISION)
        self._commits = Commits(engine)
        self._documents = {n: sql(documents_sql(n)) for n in LOOKUP_SIZES}
        self._scans = {
            table: {
                (combo, desc): sql(scan_sql(table, combo, desc))
                for combo in filter_combos(filters)
                for desc in (False, True)
            }
            for table, filters in (
                ("rec_conversation", CONVERSATION_FILTERS),
                ("rec_task", TASK_FILTERS),
                ("rec_submission", SUBMISSION_FILTERS),
            )
        }

    # -- commits ---------------------------------------------------------------

    def commit(self, writes: Sequence[Mapping[str, Any]]) -> int:
        """Apply ``writes`` atomically; return the batch's commit sequence.

        Sequences are global, gap-free and increasing in commit order.
        ``InvalidRequest`` for a malformed batch, ``Conflict`` for one that
        collides with stored state; either way nothing is written. Where
        answers are deferred (PostgreSQL) a batch without documents goes in
        one round trip, one with documents in two (their rows are read
        first: a delta applies to the stored value); see
        ``commit.Commits.in_one_flight``.
        """
        plan = plan_commit(writes, self.max_value_size)
        commits = self._commits
        if commits.one_flight:
            done = commits.in_one_flight(plan, self._documents_in_flight if plan.documents else None)
            if done is not None:
                return done
        engine = self._engine
        with engine.transaction():
            seq = engine.next_value(COMMIT_SEQUENCE)
            if plan.claims:
                commits.claim_and_check_ids(plan, seq)  # writes the entries too
            if plan.documents:
                checked, vacant = self._check_documents(plan.documents)
                for address in vacant:
                    row = engine.one(self._no_current_document, address.params())
                    if row is None or not row[0]:
                        reject("Document address already has a current incarnation")
                self._check_copies(checked)
            commits.write_rows(plan)
            if plan.documents:
                self._apply_documents(checked, seq)
        return seq

    def _documents_in_flight(self, actions: dict[int, DocAction]) -> Callable[[int], None]:
        """A one-flight commit's document steps (``Commits.in_one_flight``): read and check now, write later.

        The documents' rows are read (the one answer waited for before the
        COMMIT); each address the batch creates a current document at
        becomes a requirement sent unawaited. Returns the writes, to run
        with the commit's sequence. Any refusal here makes the flight take
        the precise path, which words it in the precise path's order.
        """
        checked, vacant = self._check_documents(actions)
        engine = self._engine
        for address in vacant:
            engine.require(
                self._no_current_document, address.params(), "no current document where the batch creates one"
            )
        self._check_copies(checked)
        return lambda seq: self._apply_documents(checked, seq)

    def mint_id(self) -> int:
        """A fresh id: above every id minted or committed so far, in any process.

        Never below ``FIRST_MINTED_ID``: the ids under it are reserved for
        well-known records (pi-durable's root conversation is 1, and its
        own storages start minting at 2).
        """
        value = 0
        while value < FIRST_MINTED_ID:  # at most FIRST_MINTED_ID rounds, once per store
            row = self._engine.one(self._mint)
            assert row is not None
            value = int(row[0])
        if value > MAX_SAFE_INTEGER:
            reject("ID space is exhausted")
        return value

    def last_seq(self) -> int:
        """The commit sequence of the latest commit (0 before the first)."""
        row = self._engine.one(self._last_seq)
        return 0 if row is None else int(row[0])

    def _check_documents(
        self, actions: dict[int, DocAction]
    ) -> tuple[list[tuple[DocAction, Any, Revision | None]], list[Address]]:
        """The seed's ``_check_document_actions``, before any write (copies: ``_check_copies``).

        Returns, per action, its stored record (or None) and its latest
        revision (or None), for ``_apply_documents``; and the addresses
        that must have no current document now, for the caller to check:
        those where the batch creates one more current document than it
        retires (the seed's live count per address, at most one: an
        address where the batch creates as many as it retires, or fewer,
        ends with no more than it has, and is not read; one more than that
        and it is refused here).
        """
        stored = {}
        for row in self._commits.lookup(self._documents, list(actions)):
            id, record, latest = document_from_row(row)
            stored[id] = (loads(record), latest)
        net: dict[Address, int] = {}  # creates minus retirements, per address the batch creates at
        retired: list[Address] = []
        out: list[tuple[DocAction, Any, Revision | None]] = []
        for id, action in actions.items():
            existing, latest = stored.get(id, (None, None))
            if action.create is None and existing is None:
                reject(f"Unknown document: {id}")
            if action.create is not None and existing is not None:
                reject(f"Document {id} already exists")
            if existing is not None and "retiredAt" in existing:
                reject(f"Document {id} is retired")
            if action.content is None:
                latest = None  # read with the record; only a content change needs it
            if action.content is not None and action.content.kind == "delta":
                if latest is None:
                    reject(f"Document {id} delta has no base")
                if latest.version != action.content.version:
                    reject(f"Document {id} version transition requires a base")
            if action.create is not None:
                assert action.address is not None
                if not action.retire:
                    net[action.address] = net.get(action.address, 0) + 1
            elif action.retire:
                retired.append(as_address(f"document {id}", existing))
            else:
                as_address(f"document {id}", existing)  # a stored record that names no address is refused
            out.append((action, existing, latest))
        for address in retired:
            if address in net:
                net[address] -= 1
        if any(count > 1 for count in net.values()):
            reject("Document address already has a current incarnation")
        return out, [address for address, count in net.items() if count == 1]

    def _check_copies(self, checked: list[tuple[DocAction, Any, Revision | None]]) -> None:
        for action, _existing, _latest in checked:
            if action.copy is not None:
                self._check_copy(action)

    def _check_copy(self, action: DocAction) -> None:
        """Resolve a fork-copy to a base of the source's value at the point."""
        assert action.copy is not None and action.create is not None
        source_id, at = action.copy
        try:
            source = self._materialize(source_id, at)
        except DurastateError as exc:
            reject(f"Document copy {action.id} was rejected: {exc}")
        if source is None:
            reject(f"Document copy {action.id} was rejected: fork source document {source_id} cannot be read")
        record, create = source["record"], action.create
        if (
            record["scope"]["kind"] != "conversation"
            or create["scope"]["kind"] != "conversation"
            or record["kind"] != create["kind"]
            or record.get("key") != create.get("key")
            or record.get("history") != create.get("history")
            or record.get("fork") != create.get("fork")
        ):
            reject(
                f"Document copy {action.id} was rejected: fork source document {source_id}"
                " does not match the copied record"
            )
        value = source["value"]
        data = dumps("the copied value", value, self.max_value_size)
        action.content = Content("base", source["version"], value, None, data)

    def _apply_documents(self, checked: list[tuple[DocAction, Any, Revision | None]], seq: int) -> None:
        engine = self._engine
        now = engine.now_ms()  # each revision's written_at (what retention ages)
        for action, existing, latest in checked:
            id = action.id
            if action.create is not None:
                record: dict[str, Any] = {**action.create, "createdAt": seq}
                if action.retire:
                    record["retiredAt"] = seq
                a = action.address
                assert a is not None
                engine.send(
                    self._insert_document,
                    (
                        id,
                        a.kind,
                        a.scope_kind,
                        a.owner_id,
                        a.family,
                        a.key_value,
                        seq,
                        seq if action.retire else None,
                        dumps("record", record, self.max_value_size),
                    ),
                )
            else:
                record = existing
            current_only = is_current_only(record)
            content = action.content
            if content is not None:
                row: tuple[Any, ...]
                if content.kind == "base":
                    row = (id, seq, "base", content.version, 0, content.data, None, now)
                else:
                    assert latest is not None and content.ops is not None
                    current = latest.content if latest.kind == "base" else latest.state
                    assert current is not None  # the newest row always carries its value
                    value = loads(current)
                    value = apply_ops(content.ops, value, f"Document {id}")
                    state = dumps("the document value", value, self.max_value_size)
                    folded = _chord.fold(content.ops, value)
                    if folded is content.ops:
                        data = content.data
                    else:
                        data = dumps("the folded delta", folded, self.max_value_size)
                    row = (id, seq, "delta", content.version, int(latest.depth) + 1, data, state, now)
                if current_only:
                    if latest is not None:
                        engine.send(self._drop_revisions, (id,))
                elif latest is not None and latest.kind == "delta" and int(latest.depth) % CHECKPOINT_EVERY != 0:
                    # The previous row is no longer the newest and is not a checkpoint.
                    engine.send(self._drop_state, (id, latest.seq, id))
                engine.send(self._insert_revision, row)
            if action.retire:
                if action.create is None:
                    record = {**record, "retiredAt": seq}
                    engine.send(self._retire_document, (seq, dumps("record", record, self.max_value_size), id))
                if current_only:
                    engine.send(self._drop_revisions, (id,))

    # -- table reads -------------------------------------------------------------

    def _record(self, sql: str, id: Any, name: str = "id") -> Any:
        row = self._engine.one(sql, (as_id(name, id),))
        return None if row is None else loads(row[0])

    def conversation(self, id: int) -> dict[str, Any] | None:
        return self._record(self._get_conversation, id)  # type: ignore[no-any-return]

    def scan_conversations(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return self._filtered_scan(
            "rec_conversation",
            query,
            limit,
            cursor,
            (("ownerConversationId", "owner_conversation_id", as_id), ("ownerTaskId", "owner_task_id", as_id)),
        )

    def _filtered_scan(
        self,
        table: str,
        query: Mapping[str, Any],
        limit: int,
        cursor: Mapping[str, Any] | None,
        filters: Sequence[tuple[str, str, Any]],
    ) -> dict[str, Any]:
        """A page of ``table`` by id (ascending unless ``query["order"]`` says), narrowed by the ``filters`` present."""
        query = as_object("query", query)
        limit = as_limit(limit)
        order, after = scan_order(query, cursor, "ascending")
        combo, params = optional_filters(query, filters)
        return self._scan(table, combo, params, order, after, limit)

    def _scan(
        self, table: str, combo: tuple[str, ...], params: list[Any], order: str, after: int | None, limit: int
    ) -> dict[str, Any]:
        desc = order == "descending"
        start = (MAX_SAFE_INTEGER + 1 if desc else -1) if after is None else after
        rows = self._engine.all(self._scans[table][(combo, desc)], (start, *params, limit + 1))
        return page_of(rows, limit, order)

    def _fork_chain(self, conversation_id: int) -> list[tuple[int, Any, Any]]:
        """The fork chain, child first: (id, parent id, parent at) per conversation."""
        rows = self._engine.all(self._chain, (conversation_id, MAX_CHAIN_DEPTH))
        if not rows:
            raise NotFound(f"Unknown conversation: {conversation_id}")
        if len(rows) > MAX_CHAIN_DEPTH:
            reject(f"the fork chain of conversation {conversation_id} is deeper than {MAX_CHAIN_DEPTH} (a cycle?)")
        return chain_from_rows(rows)

    def entry(self, id: int, conversation_id: int | None = None) -> dict[str, Any] | None:
        """``{"entry": record, "commitSeq": seq}`` or None.

        With ``conversation_id``, only an entry visible from that
        conversation through its fork chain (at or before each fork point).
        """
        id = as_id("id", id)
        chain = None if conversation_id is None else self._fork_chain(as_id("conversation_id", conversation_id))
        row = self._engine.one(self._get_entry, (id,))
        if row is None:
            return None
        record, commit_seq = row
        entry = loads(record)
        if chain is not None:
            upper = MAX_SAFE_INTEGER
            owner = entry["conversationId"]
            for conv_id, parent_id, parent_at in chain:
                if conv_id == owner:
                    break
                if parent_id is None:
                    return None
                upper = min(upper, int(parent_at))
            else:
                return None
            if entry["id"] > upper:
                return None
        return {"entry": entry, "commitSeq": int(commit_seq)}

    def find_latest_head_marker(self, conversation_id: int, at_or_before_entry_id: int | None = None) -> Any:
        """The newest entry with a head marker visible from the conversation."""
        chain = self._fork_chain(as_id("conversation_id", conversation_id))
        upper = (
            MAX_SAFE_INTEGER if at_or_before_entry_id is None else as_id("at_or_before_entry_id", at_or_before_entry_id)
        )
        for conv_id, parent_id, parent_at in chain:
            row = self._engine.one(self._head_marker, (conv_id, upper))
            if row is not None:
                return loads(row[0])
            if parent_id is None:
                return None
            upper = min(upper, int(parent_at))
        return None

    def scan_entries(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Entries visible from ``query["conversationId"]`` through its fork chain.

        Newest first by default; ``minEntryId``/``maxEntryId`` bound ids.
        """
        query = as_object("query", query)
        limit = as_limit(limit)
        order, after = scan_order(query, cursor, "descending")
        conversation_id = as_id("conversationId", query.get("conversationId"))
        lower = as_id("minEntryId", query["minEntryId"]) if "minEntryId" in query else None
        upper = as_id("maxEntryId", query["maxEntryId"]) if "maxEntryId" in query else None
        chain = self._fork_chain(conversation_id)
        # Segments child first: (conversation, the highest id visible in it).
        segments: list[tuple[int, int | None]] = []
        seg_upper = upper
        if order == "descending" and after is not None:
            seg_upper = min(MAX_SAFE_INTEGER if seg_upper is None else seg_upper, after - 1)
        for conv_id, parent_id, parent_at in chain:
            segments.append((conv_id, seg_upper))
            if parent_id is None:
                break
            seg_upper = int(parent_at) if seg_upper is None else min(seg_upper, int(parent_at))
            if lower is not None and seg_upper < lower:
                break
        if order == "ascending":
            if after is not None:
                lower = after + 1 if lower is None else max(lower, after + 1)
            segments.reverse()
        sql = self._entries["ASC" if order == "ascending" else "DESC"]
        rows: list[Any] = []
        for conv_id, seg in segments:
            rows.extend(
                self._engine.all(
                    sql,
                    (
                        conv_id,
                        -1 if lower is None else lower,
                        MAX_SAFE_INTEGER if seg is None else seg,
                        limit + 1 - len(rows),
                    ),
                )
            )
            if len(rows) > limit:
                break
        return page_of(rows, limit, order)

    def task(self, id: int) -> dict[str, Any] | None:
        return self._record(self._get_task, id)  # type: ignore[no-any-return]

    def scan_tasks(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return self._filtered_scan(
            "rec_task",
            query,
            limit,
            cursor,
            (
                ("conversationId", "conversation_id", as_id),
                ("kind", "kind", indexed_text),
                ("status", "status", indexed_text),
                ("abortRequested", "abort_requested", lambda n, v: int(as_bool(n, v))),
                ("background", "background", lambda n, v: int(as_bool(n, v))),
            ),
        )

    def submission(self, id: int) -> dict[str, Any] | None:
        return self._record(self._get_submission, id)  # type: ignore[no-any-return]

    def scan_submissions(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return self._filtered_scan(
            "rec_submission",
            query,
            limit,
            cursor,
            (("conversationId", "conversation_id", as_id), ("status", "status", indexed_text)),
        )

    def submission_by_request(self, conversation_id: int, request_id: str) -> dict[str, Any] | None:
        row = self._engine.one(
            self._submission_by_request,
            (as_id("conversation_id", conversation_id), indexed_text("request_id", request_id)),
        )
        return None if row is None else loads(row[0])

    # -- document reads ----------------------------------------------------------

    def find_document(self, address: Mapping[str, Any], at: int | str = "current") -> dict[str, Any] | None:
        """The document record alive at ``address`` at point ``at``, or None."""
        a = as_address("address", address)
        point = as_point("at", at)
        if point is None:
            row = self._engine.one(self._find_document["current"], a.params())
        else:
            row = self._engine.one(self._find_document["at"], (*a.params(), point, point))
        return None if row is None else loads(row[0])

    def document(self, id: int, at: int | str = "current") -> dict[str, Any] | None:
        """``{"record", "version", "value", "deltasSinceBase"}`` at ``at``, or None.

        None when the document does not exist or is not alive at the point.
        ``InvalidRequest`` for a point-in-time read of a current-only document.
        ``RevisionPruned`` (a ``NotFound``) for a point at which the document
        was alive but whose revision ``prune_document_revisions`` removed
        (a point before the oldest revision ``document_revisions`` lists).
        """
        return self._materialize(as_id("id", id), as_point("at", at))

    def _materialize(self, id: int, at: int | None) -> dict[str, Any] | None:
        upper = MAX_SAFE_INTEGER if at is None else at
        rows = self._engine.all(self._materialize_sql, (upper, upper, MAX_SAFE_INTEGER + 1, id))
        if not rows:
            return None
        record = loads(rows[0][0])
        if at is not None and is_current_only(record):
            fail(f"Document {id} does not retain historical content")
        if at is None:
            if "retiredAt" in record:
                return None
        elif not (record["createdAt"] <= at and ("retiredAt" not in record or at < record["retiredAt"])):
            return None
        if rows[0][1] is None:  # the LEFT JOIN found no revision row at or before the point
            self._no_revision(id, at)
        version, value, depth = self._replay(id, rows)
        return {"record": record, "version": version, "value": value, "deltasSinceBase": depth}

    def _no_revision(self, id: int, at: int | None) -> NoReturn:
        """Why a live document has no revision to read at ``at``: pruned, or a damaged store."""
        row = self._engine.one(self._oldest_revision, (id,))
        oldest = None if row is None or row[0] is None else int(row[0])
        if at is not None and oldest is not None and oldest > at:
            raise RevisionPruned(
                f"Document {id} has no revision at {at}: retention removed its revisions before {oldest}"
                " (document_revisions() lists those kept)"
            )
        raise DurastateError(f"Document {id} is missing a required base")

    @staticmethod
    def _replay(id: int, rows: Sequence[Any]) -> tuple[int, dict[str, Any], int]:
        """(version, value, deltas since the base) from ``MATERIALIZE`` rows that found an anchor."""
        _record, _anchor_seq, kind, version, depth, content, state = rows[0]
        value = loads(content if kind == "base" else state)
        for _record, _seq, kind, delta_version, _depth, content, _state in rows[1:]:
            if kind != "delta" or delta_version != version:
                raise DurastateError(f"Document {id} crosses a stored version boundary without a base")
            try:
                value = apply_ops(loads(content), value, f"Document {id}", copy=False)
            except Conflict as exc:  # checked at commit: only a corrupt row gets here
                raise DurastateError(f"Document {id}: a stored delta does not apply: {exc}") from exc
        if len(rows) > 1:  # the newest row read counts the deltas since the base
            depth = Revision._make(rows[-1][1:]).depth
        return int(version), value, int(depth)

    def scan_documents(
        self, query: Mapping[str, Any], limit: int, cursor: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Documents of one scope (optionally one kind) alive at ``query["at"]``, by id."""
        query = as_object("query", query)
        limit = as_limit(limit)
        scope_kind, owner_id = as_scope("query.scope", query.get("scope"))
        _order_ignored, after = scan_order({}, cursor, "ascending") if cursor is not None else ("ascending", None)
        point = as_point("query.at", query.get("at"))
        params: list[Any] = [scope_kind, owner_id, -1 if after is None else after]
        has_kind = "kind" in query
        if has_kind:
            params.append(indexed_text("query.kind", query["kind"]))
        if point is not None:
            params += [point, point]
        rows = self._engine.all(self._document_scan[(has_kind, point is None)], (*params, limit + 1))
        return page_of(rows, limit, "ascending")

    # -- listing (read-only, for inspectors) -------------------------------------

    def document_revisions(self, id: int) -> list[dict[str, Any]]:
        """The stored revisions of document ``id``, oldest first.

        Each is ``{"seq", "kind", "version", "depth"}``: the commit sequence
        that wrote it, ``"base"`` or ``"delta"``, the content version and the
        deltas since its base. ``document(id, at=seq)`` reads the value as of
        one of them. ``[]`` for an unknown document.
        """
        id = as_id("id", id)
        rows = self._engine.all(self._list_revisions, (id,))
        return [
            {"seq": int(seq), "kind": kind, "version": int(version), "depth": int(depth)}
            for seq, kind, version, depth in rows
        ]

    # -- retention ---------------------------------------------------------------

    def prune_document_revisions(
        self, *, keep_last: int | None = None, older_than: float | None = None, limit: int | None = None
    ) -> int:
        """Delete old revisions of full-history documents; return how many went.

        A revision goes when it is outside its document's newest
        ``keep_last`` and/or was written more than ``older_than`` seconds
        ago (the store's clock): with both, it goes only when both say so
        (the stricter rule keeps it). One of them is required. A document's
        newest revision (its current value; a retired document's last one)
        never goes, so current-only documents, which keep one revision,
        are never touched. Revisions go from the oldest up, and a document
        stops at its first revision young enough to keep. Revisions written
        before durastate recorded write times (schema 2 of this facet)
        count as old.

        Every revision left stays readable: when the oldest one left is a
        delta, its value is stored with it first (an invisible checkpoint,
        as in "Bounded document reads"; ``version`` and ``deltasSinceBase``
        stay the logical ones). A point-in-time read at a point whose
        revision went raises ``RevisionPruned``; a ``document.copy`` from
        such a point is refused (``Conflict``, as for any unreadable
        source). Document records are kept, so ``find_document(at=)`` and
        ``scan_documents`` answer as before.

        At most ``durastate._retention.BATCH`` revisions of one document
        per transaction, each its own short commit that waits for (and
        holds off) record commits only while it runs; at most ``limit`` in
        all. A sweep cut short resumes from what is stored on the next call.
        """
        if keep_last is None and older_than is None:
            fail("prune_document_revisions() needs keep_last=, older_than= or both")
        keep = 1 if keep_last is None else as_keep("keep_last", keep_last)
        engine = self._engine
        cutoff = None if older_than is None else engine.now_ms() - as_age_ms("older_than", older_than)
        limit = as_row_limit("limit", limit)
        if keep > INT64_MAX:
            return 0  # no document holds more revisions (nor can the count be bound to a statement)
        removed = 0
        after = -1
        while limit is None or removed < limit:
            page = engine.all(self._prune_candidates, (keep, after, BATCH))
            for id, keep_from, oldest, oldest_written_at in page:
                if keep_from is None or int(oldest) >= int(keep_from):
                    continue  # at most keep_last revisions (or none)
                if cutoff is not None and oldest_written_at is not None and int(oldest_written_at) >= cutoff:
                    continue  # even the oldest is too young
                left = None if limit is None else limit - removed
                removed += self._prune_document(int(id), int(keep_from), cutoff, left)
                if limit is not None and removed >= limit:
                    return removed
            if len(page) < BATCH:
                break
            after = int(page[-1][0])
        return removed

    def _prune_document(self, id: int, keep_from: int, cutoff: int | None, limit: int | None) -> int:
        """Delete revisions of ``id`` below ``keep_from`` (and older than ``cutoff``), oldest first."""
        engine = self._engine
        removed = 0
        while limit is None or removed < limit:
            want = BATCH if limit is None else min(BATCH, limit - removed)
            rows = engine.all(self._oldest_revisions, (id, keep_from, want + 1))
            doomed = 0
            for seq, _kind, _has_value, written_at in rows:
                if doomed == want or int(seq) >= keep_from:
                    break
                if cutoff is not None and written_at is not None and int(written_at) >= cutoff:
                    break
                doomed += 1
            if doomed == 0 or doomed == len(rows):
                break  # nothing old enough, or (after a concurrent prune) no row known to stay
            first_kept, kind, has_value, _written_at = rows[doomed]
            first_kept = int(first_kept)
            # Its value, computed before taking the lock (history never
            # changes, so it cannot go stale): it becomes the anchor of
            # every read at or after it once the rows before it are gone.
            value = None if kind == "base" or has_value else self._value_at(id, first_kept)
            with engine.transaction():
                engine.one(self._lock_commits)
                # Checked again under the lock: a commit in between may have
                # dropped the value of what was then the newest revision.
                if engine.one(self._needs_state, (id, first_kept)) is not None:
                    if value is None:
                        value = self._value_at(id, first_kept)
                    engine.execute(self._set_state, (dumps("the document value", value), id, first_kept))
                removed += engine.execute(self._delete_revisions_before, (id, first_kept))
            if doomed < want:
                break  # stopped at a revision to keep
        return removed

    def _value_at(self, id: int, seq: int) -> dict[str, Any]:
        """The value of document ``id`` as of its stored revision ``seq`` (alive or not at that point)."""
        rows = self._engine.all(self._materialize_sql, (seq, seq, MAX_SAFE_INTEGER + 1, id))
        if not rows or rows[0][1] is None:
            raise DurastateError(f"Document {id} is missing a required base")
        return self._replay(id, rows)[1]
