"""The workloads of ``bench/scale.py``: what is loaded, and the ops timed on it.

Each workload loads ``size`` rows into one store (see ``scale_load``) and
returns its ops; an op maps contender names to zero-argument callables:

* ``durastate``: the public API;
* ``raw``: the bare driver (sqlite3 on durastate's own connection, so both
  share one page cache; a psycopg connection in autocommit) running the very
  statement texts the facet compiled, read from the facet object, with the
  same parameters, transaction shape and (PostgreSQL) attempt rows, and
  shaping results minimally (a value, a parallel list, decoded JSON);
* ``best``: where a better statement than ours is known, the bare driver
  running it (``BEST`` below says which and why).

Every contender draws its own random keys (a contender reading the keys
another one just read would find their pages warm).
"""

from __future__ import annotations

import collections
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

import durastate
from _records_common import CHAIN_BASE, entry_value, fork_chain, fork_scan
from durastate._validate import prefix_successor
from durastate.engines.base import NEXT_VALUE
from durastate.events.rows import EventColumn as C
from durastate.records import MAX_SAFE_INTEGER
from events import Raw as RawEvents  # bench/events.py: the events facet's statements, bare
from scale_load import Bulk, copies

Op = Callable[[], Any]
Ops = dict[str, dict[str, Op]]  # op name -> contender -> call

SCOPE = b"bench"
NS = b"ns"
VALUE = b"v" * 100
DOC = {"step": 3, "owner": "worker-7", "state": {"items": list(range(10)), "note": "x" * 40}}
PRESENCE_PARTICIPANTS = 10
PRESENCE_FIELDS = 2
EVENTS_PER_SESSION = 100
LEASE_MS = 60_000
DAY_MS = 86_400_000

# Statements better than durastate's where we know one (PostgreSQL only:
# on SQLite the facet's statements are the best we know).
BEST = {
    # One array parameter instead of a LATERAL probe per key: the plan is a
    # single index scan with an = ANY condition (issue 10's candidate).
    "kv get_many 100": "SELECT key, value, expires_at FROM {p}kv WHERE scope = %s AND ns = %s AND key = ANY(%s)",
}


class Raw:
    """The bare driver on one store: statements by their compiled text."""

    def __init__(self, store: durastate.Store, engine: str, url: str) -> None:
        self.store = store
        self.pg = engine == "postgresql"
        self.now_ms = store.engine.now_ms
        if self.pg:
            import psycopg

            from durastate.engines.postgres import PREPARE_THRESHOLD

            self.conn: Any = psycopg.connect(url, autocommit=True, prepare_threshold=PREPARE_THRESHOLD)
            self.cur: Any = self.conn
            self.begin = "BEGIN"
            self.attempt_sql: str | None = store.engine._attempt_insert  # type: ignore[attr-defined]
        else:
            # durastate's own connection: a second one would re-read every
            # page the other changed after each write (see bench/events.py).
            self.conn = store.engine._thread_connection()  # type: ignore[attr-defined]
            self.cur = self.conn.cursor()
            self.begin = "BEGIN IMMEDIATE"
            self.attempt_sql = None

    def one(self, sql: str, params: Any) -> Any:
        return self.cur.execute(sql, params).fetchone()

    def all(self, sql: str, params: Any) -> list[Any]:
        return list(self.cur.execute(sql, params).fetchall())

    def write(self, sql: str, params: tuple[Any, ...]) -> Any:
        """One write outside a transaction, as the engine sends it (PostgreSQL: with its attempt row)."""
        if self.pg:
            variant = sql.companion  # type: ignore[attr-defined]  # the attempt-recording variant
            return self.cur.execute(variant, (*params, os.urandom(16), self.now_ms())).fetchall()
        cur = self.cur.execute(sql, params)
        return cur.fetchall() if " RETURNING " in sql else cur.rowcount

    def attempt(self, cur: Any) -> None:
        """PostgreSQL: the attempt row the engine writes before a transaction's first write."""
        if self.attempt_sql is not None:
            cur.execute(self.attempt_sql, (os.urandom(16), self.now_ms()))

    def tx(self, body: Callable[[Any], Any]) -> Any:
        """``body(cursor)`` in one transaction (the body calls ``attempt`` before its first write)."""
        cur = self.cur
        cur.execute(self.begin)
        try:
            result = body(cur)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
        return result

    def close(self) -> None:
        if self.pg:
            self.conn.close()


@dataclass
class Context:
    store: durastate.Store
    engine: str
    size: int
    bulk: Bulk
    raw: Raw
    prefix: str = ""
    tables: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.prefix = self.store.engine.prefix

    def rng(self, contender: str, op: str) -> random.Random:
        return random.Random(f"{self.size}/{op}/{contender}")

    def best(self, name: str) -> str:
        return BEST[name].replace("{p}", self.prefix)


# -- kv and queues -------------------------------------------------------------


def kv_key(i: int) -> bytes:
    return b"key-%09d" % i


def load_kv(ctx: Context) -> None:
    """``size`` values in one namespace."""
    ctx.store.kv.put(SCOPE, NS, kv_key(0), VALUE)
    (row,) = ctx.bulk.template("kv", "scope = ? AND ns = ? AND key = ?", (SCOPE, NS, kv_key(0)))
    columns = tuple(row)
    ctx.bulk.insert("kv", columns, copies(row, columns, ctx.size - 1, lambda i: {"key": kv_key(i + 1)}), ctx.size - 1)
    ctx.tables.append("kv")


def kv_ops(ctx: Context) -> Ops:
    kv, raw, size = ctx.store.kv, ctx.raw, ctx.size
    ops: Ops = {}

    r = {c: ctx.rng(c, "get") for c in ("durastate", "raw")}

    def raw_get() -> Any:
        row = raw.one(kv._get, (SCOPE, NS, kv_key(r["raw"].randrange(size))))
        return None if row is None else row[0]

    ops["kv get"] = {"durastate": lambda: kv.get(SCOPE, NS, kv_key(r["durastate"].randrange(size))), "raw": raw_get}

    m = {c: ctx.rng(c, "get_many") for c in ("durastate", "raw", "best")}

    def sample(rng: random.Random) -> list[bytes]:
        return [kv_key(i) for i in rng.sample(range(size), 100)]

    def raw_get_many() -> list[Any]:
        keys = sample(m["raw"])
        found = {k: v for k, v, _ in raw.all(kv._get_many[100], (SCOPE, NS, *keys))}
        return [found.get(k) for k in keys]

    many: dict[str, Op] = {"durastate": lambda: kv.get_many(SCOPE, NS, sample(m["durastate"])), "raw": raw_get_many}
    if raw.pg:
        best_many = ctx.best("kv get_many 100")

        def best_get_many() -> list[Any]:
            keys = sample(m["best"])
            found = {k: v for k, v, _ in raw.all(best_many, (SCOPE, NS, keys))}
            return [found.get(k) for k in keys]

        many["best"] = best_get_many
    ops["kv get_many 100"] = many

    s = {c: ctx.rng(c, "scan") for c in ("durastate", "raw")}
    scan_sql = kv._scan[(True, False, False)]
    last = max(1, size - 100)
    ops["kv scan 100"] = {
        "durastate": lambda: list(kv.scan(SCOPE, NS, start=kv_key(s["durastate"].randrange(last)), limit=100)),
        "raw": lambda: raw.all(scan_sql, (SCOPE, NS, kv_key(s["raw"].randrange(last)), raw.now_ms(), 100)),
    }

    p = {c: ctx.rng(c, "put") for c in ("durastate", "raw")}
    ops["kv put"] = {
        "durastate": lambda: kv.put(SCOPE, NS, kv_key(p["durastate"].randrange(size)), VALUE),
        "raw": lambda: raw.write(kv._put_persistent, (SCOPE, NS, kv_key(p["raw"].randrange(size)), VALUE)),
    }

    d = ctx.rng("durastate", "delete")

    def delete_1000() -> None:
        first = d.randrange(0, max(1, size - 1000))
        keys = [kv_key(i) for i in range(first, first + min(1000, size))]
        kv.delete(SCOPE, NS, keys)
        kv.put_many(SCOPE, NS, [(k, VALUE) for k in keys])  # put back: the table keeps its size

    ops["kv delete 1000 keys (+put back)"] = {"durastate": delete_1000}
    return ops


def load_queue(ctx: Context) -> None:
    """``size`` ready items in one queue."""
    ctx.store.queues.push("deep", [b"item"])
    (row,) = ctx.bulk.template("queue")
    # The id comes from the table's own identity / rowid, so later pushes continue after it.
    columns = tuple(c for c in row if c != "id")
    ctx.bulk.insert("queue", columns, copies(row, columns, ctx.size - 1, lambda i: {}), ctx.size - 1)
    ctx.tables.append("queue")


def queue_ops(ctx: Context) -> Ops:
    queues = ctx.store.queues

    def claim_ack() -> None:
        claim = queues.claim("deep")
        assert claim is not None
        claim.ack()
        queues.push("deep", [b"item"])

    return {"queue claim+ack (+push)": {"durastate": claim_ack}}


# -- documents -----------------------------------------------------------------


def doc_key(i: int) -> str:
    return f"d{i // 100:07d}/{i % 100:02d}"


def load_documents(ctx: Context) -> None:
    """``size`` documents, 100 per prefix ``d<group>/``."""
    ctx.store.documents.write(doc_key(0), DOC)
    (row,) = ctx.bulk.template("documents", "key = ?", (doc_key(0),))
    columns = tuple(row)
    ctx.bulk.insert(
        "documents", columns, copies(row, columns, ctx.size - 1, lambda i: {"key": doc_key(i + 1)}), ctx.size - 1
    )
    ctx.tables.append("documents")


def documents_ops(ctx: Context) -> Ops:
    docs, raw, size = ctx.store.documents, ctx.raw, ctx.size
    revisions: dict[str, int] = collections.defaultdict(lambda: 1)  # shared: both contenders write the same keys
    ops: Ops = {}

    r = {c: ctx.rng(c, "read") for c in ("durastate", "raw")}

    def raw_read() -> Any:
        row = raw.one(docs._read, (doc_key(r["raw"].randrange(size)),))
        return None if row is None else (orjson.loads(row[0]), row[1])

    ops["documents read"] = {"durastate": lambda: docs.read(doc_key(r["durastate"].randrange(size))), "raw": raw_read}

    c = {n: ctx.rng(n, "cas") for n in ("durastate", "raw")}

    def ds_cas() -> None:
        key = doc_key(c["durastate"].randrange(size))
        revisions[key] = docs.write(key, DOC, expect=revisions[key])

    def raw_cas() -> None:
        key = doc_key(c["raw"].randrange(size))
        (row,) = raw.write(docs._cas, (orjson.dumps(DOC), key, revisions[key]))
        revisions[key] = row[0]

    ops["documents CAS"] = {"durastate": ds_cas, "raw": raw_cas}

    groups = max(1, size // 100)
    g = {n: ctx.rng(n, "list") for n in ("durastate", "raw")}
    list_sql = docs._list[(False, True)]

    def raw_list() -> Any:
        prefix = f"d{g['raw'].randrange(groups):07d}/"
        rows = raw.all(list_sql, (prefix, prefix_successor(prefix), 101))
        return [(k, int(rev), int(n)) for k, rev, n in rows[:100]]

    ops["documents list 100 by prefix"] = {
        "durastate": lambda: docs.list(f"d{g['durastate'].randrange(groups):07d}/", limit=100),
        "raw": raw_list,
    }
    return ops


# -- events --------------------------------------------------------------------


def _events_template(ctx: Context, session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx.store.events.append(session, [{"type": "old", "payload": {"n": 0}, "settled": True}])
    (event,) = ctx.bulk.template("event", "session_id = ?", (session,))
    (row,) = ctx.bulk.template("event_session", "session_id = ?", (session,))
    return event, row


def load_events_one(ctx: Context) -> None:
    """One session ("big") of ``size`` processed events."""
    event, _ = _events_template(ctx, "big")
    columns = tuple(event)
    count = ctx.size - 1
    ctx.bulk.insert(
        "event", columns, copies(event, columns, count, lambda i: {"idx": i + 2, "event_id": f"big-{i + 2}"}), count
    )
    # (events schema 2: a session's last index is its highest stored idx, nothing to update)
    ctx.tables += ["event", "event_session"]


def session_name(i: int) -> str:
    return f"s{i:07d}"


def load_events_many(ctx: Context) -> None:
    """``size`` processed events in ``size / 100`` sessions of 100."""
    sessions = max(1, ctx.size // EVENTS_PER_SESSION)
    event, row = _events_template(ctx, session_name(0))
    columns = tuple(event)
    count = sessions * EVENTS_PER_SESSION - 1

    def vary(i: int) -> dict[str, Any]:
        n = i + 1
        s, idx = divmod(n, EVENTS_PER_SESSION)
        return {"session_id": session_name(s), "idx": idx + 1, "event_id": f"m-{n}"}

    ctx.bulk.insert("event", columns, copies(event, columns, count, vary), count)
    session_columns = tuple(row)
    ctx.bulk.insert(
        "event_session",
        session_columns,
        copies(
            row,
            session_columns,
            sessions - 1,
            lambda i: {"session_id": session_name(i + 1)},
        ),
        sessions - 1,
    )
    ctx.tables += ["event", "event_session"]


def _ds_claim_complete(events: Any, session: str) -> None:
    (e,) = events.claim_available(session, "ds", ttl_ms=LEASE_MS, limit=1).events
    events.complete_attempt(session, e.index, e.attempt_count)


def events_one_ops(ctx: Context) -> Ops:
    events = ctx.store.events
    raw = RawEvents(ctx.store, ctx.raw.conn, ctx.raw.begin)
    # Appends add one pending event each; the claim op that follows in the
    # same round takes as many as were appended (limit=1, oldest first).
    return {
        "events append (100k-event session)": {
            "durastate": lambda: events.append("big", [{"type": "t", "payload": {"n": 1}}]),
            "raw": lambda: raw.append("big"),
        },
        "events claim+complete (same session)": {
            "durastate": lambda: _ds_claim_complete(events, "big"),
            "raw": lambda: raw.claim_complete("big"),
        },
    }


def events_many_ops(ctx: Context) -> Ops:
    events, size, raw = ctx.store.events, ctx.size, ctx.raw
    sessions = max(1, size // EVENTS_PER_SESSION)
    bare = RawEvents(ctx.store, raw.conn, raw.begin)
    ev = events
    r = {c: ctx.rng(c, "append-many") for c in ("durastate", "raw")}

    def ds_claim_any() -> None:
        (e,) = events.claim_any("ds", ttl_ms=LEASE_MS, limit=1)
        events.complete_attempt(e.session_id, e.index, e.attempt_count)

    def raw_claim_any() -> None:
        """What claim_any(limit=1) + complete_attempt (no children) execute."""
        now = raw.now_ms()

        def claim(cur: Any) -> Any:
            (session, idx), *_ = cur.execute(ev._claim_any_candidates, (now, 1)).fetchall()
            raw.attempt(cur)
            return cur.execute(
                ev._claim_one, (now, now, "raw", now + LEASE_MS, now + LEASE_MS, session, idx, now)
            ).fetchone()

        row = raw.tx(claim)
        session, idx, attempt = row[C.session_id], row[C.idx], row[C.attempt_count]
        done = raw.now_ms()

        def complete(cur: Any) -> None:
            cur.execute(ev._lock_session, (session,)).fetchall()
            cur.execute(ev._get_event_locked, (session, idx)).fetchall()
            raw.attempt(cur)
            cur.execute(ev._mark_processed, (done, attempt, "[]", session, idx))

        raw.tx(complete)

    return {
        "events append (one of 10k sessions)": {
            "durastate": lambda: events.append(
                session_name(r["durastate"].randrange(sessions)), [{"type": "t", "payload": {"n": 1}}]
            ),
            "raw": lambda: bare.append(session_name(r["raw"].randrange(sessions))),
        },
        "events claim_any+complete (10k sessions)": {"durastate": ds_claim_any, "raw": raw_claim_any},
    }


# -- records -------------------------------------------------------------------

FILLER_BASE = 100_000_000
DOC_ID = 20_000_000
REVISIONS = 1000


def load_records(ctx: Context) -> None:
    """A 10-deep fork chain (5 entries each), a document with 1,000 revisions, and fillers.

    Fillers: ``size`` entries in ``size / 1000`` conversations, and
    ``size / 1000 - 1`` more documents of 1,000 revisions each (copies of
    the first), so both tables the ops read hold about ``size`` rows.
    """
    r = ctx.store.records
    r.commit([{"type": "conversation", "value": {"id": 1}}])
    fork_chain(r)
    body = {f"field{i}": {"n": i, "text": "y" * 40} for i in range(20)}
    r.commit(
        [
            {
                "type": "document.create",
                "record": {"id": DOC_ID, "kind": "bench", "scope": {"kind": "conversation", "conversationId": 1}},
                "content": {"kind": "base", "version": 1, "value": body},
            }
        ]
    )
    for i in range(REVISIONS - 1):
        op = ["s", [f"field{i % 20}", "n"], i]
        r.commit([{"type": "document.change", "id": DOC_ID, "content": {"kind": "delta", "version": 1, "ops": [op]}}])
    # Filler entries, copies of one committed entry.
    conversations = max(1, ctx.size // 1000)
    r.commit(
        [{"type": "conversation", "value": {"id": FILLER_BASE + i}} for i in range(conversations)]
        + [{"type": "entry", "value": entry_value(FILLER_BASE + conversations, FILLER_BASE)}]
    )
    first = FILLER_BASE + conversations
    (entry,) = ctx.bulk.template("rec_entry", "id = ?", (first,))
    count = ctx.size - 1

    def entry_copy(i: int) -> dict[str, Any]:
        id = first + 1 + i
        conv = FILLER_BASE + (i * conversations) // max(1, count)
        return {"id": id, "conversation_id": conv, "record": orjson.dumps(entry_value(id, conv))}

    columns = tuple(entry)
    ctx.bulk.insert("rec_entry", columns, copies(entry, columns, count, entry_copy), count)
    # An entry's row is its id claim (records schema 3): no rec_id rows for entries.
    # Filler documents: copies of the 1,000-revision one, each its own kind (one live document per address).
    docs = max(0, ctx.size // REVISIONS - 1)
    if docs:
        (document,) = ctx.bulk.template("rec_document", "id = ?", (DOC_ID,))
        revisions = ctx.bulk.template("rec_revision", "document_id = ?", (DOC_ID,))
        (doc_claim,) = ctx.bulk.template("rec_id", "id = ?", (DOC_ID,))
        record = orjson.loads(document["record"])
        base_id = first + 1 + count

        def doc_copy(i: int) -> dict[str, Any]:
            kind = f"filler-{i}"
            copy = {**record, "id": base_id + i, "kind": kind}
            return {"id": base_id + i, "kind": orjson.dumps(kind).decode(), "record": orjson.dumps(copy)}

        columns = tuple(document)
        ctx.bulk.insert("rec_document", columns, copies(document, columns, docs, doc_copy), docs)
        ctx.bulk.insert(
            "rec_id", tuple(doc_claim), copies(doc_claim, tuple(doc_claim), docs, lambda i: {"id": base_id + i}), docs
        )
        revision_columns = tuple(revisions[0])

        def revision_rows() -> Any:
            for i in range(docs):
                for rev in revisions:
                    yield tuple({**rev, "document_id": base_id + i}[c] for c in revision_columns)

        ctx.bulk.insert("rec_revision", revision_columns, revision_rows(), docs * len(revisions))
    ctx.tables += ["rec_entry", "rec_id", "rec_conversation", "rec_document", "rec_revision"]


def records_ops(ctx: Context) -> Ops:
    r, raw = ctx.store.records, ctx.raw
    ds_ids = iter(range(500_000_000, 600_000_000))
    raw_ids = iter(range(600_000_000, 700_000_000))
    next_seq = ctx.store.engine.sql(NEXT_VALUE)
    leaf = CHAIN_BASE + 6 * 9

    def raw_commit() -> None:
        id = next(raw_ids)
        data = orjson.dumps(entry_value(id, 1))

        def body(cur: Any) -> None:
            raw.attempt(cur)
            (seq,) = cur.execute(next_seq, ("records",)).fetchone()
            # The facet's one statement for an entry (its row claims its id).
            cur.execute(r._commits.insert_entries[1], (id, 1, 0, seq, data))

        raw.tx(body)

    def raw_scan() -> list[Any]:
        return fork_scan(raw, r, leaf)

    def raw_document() -> Any:
        rows = raw.all(r._materialize_sql, (MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, DOC_ID))
        _seq, kind, _version, _depth, content, state = rows[0][1:]
        return orjson.loads(rows[0][0]), orjson.loads(content if kind == "base" else state)

    return {
        "records commit 1 entry": {
            "durastate": lambda: r.commit([{"type": "entry", "value": entry_value(next(ds_ids), 1)}]),
            "raw": raw_commit,
        },
        "records fork-chain scan 50 (10 deep)": {
            "durastate": lambda: r.scan_entries({"conversationId": leaf}, 50),
            "raw": raw_scan,
        },
        "records document read (1k revisions)": {"durastate": lambda: r.document(DOC_ID), "raw": raw_document},
    }


# -- presence ------------------------------------------------------------------


def presence_ns(i: int) -> str:
    return f"room{i:07d}"


def load_presence(ctx: Context) -> None:
    """``size`` fields: namespaces of 10 participants x 2 fields."""
    per_ns = PRESENCE_PARTICIPANTS * PRESENCE_FIELDS
    rooms = max(1, ctx.size // per_ns)
    now = ctx.store.engine.now_ms()
    ctx.store.presence.set(presence_ns(0), "p00", {"f0": {"cursor": 1}}, at_ms=now, seen=1, ttl_ms=DAY_MS)
    (row,) = ctx.bulk.template("presence", "ns = ?", (presence_ns(0),))
    columns = tuple(row)
    count = rooms * per_ns - 1

    def vary(i: int) -> dict[str, Any]:
        n = i + 1
        room, rest = divmod(n, per_ns)
        participant, f = divmod(rest, PRESENCE_FIELDS)
        return {"ns": presence_ns(room), "participant": f"p{participant:02d}", "field": f"f{f}"}

    ctx.bulk.insert("presence", columns, copies(row, columns, count, vary), count)
    ctx.tables.append("presence")


def presence_ops(ctx: Context) -> Ops:
    presence, raw = ctx.store.presence, ctx.raw
    rooms = max(1, ctx.size // (PRESENCE_PARTICIPANTS * PRESENCE_FIELDS))
    r = {c: ctx.rng(c, "presence") for c in ("durastate", "raw")}

    def raw_read() -> Any:
        """The facet's one read: the namespace's rows, the live ones decoded, a sweep if any expired."""
        ns = presence_ns(r["raw"].randrange(rooms))
        now = raw.now_ms()
        rows = raw.all(presence._read, (ns,))
        live = [(p, f, orjson.loads(v), s, a, e) for p, f, v, s, a, e in rows if e > now]
        if len(live) < len(rows):
            raw.write(presence._sweep, (ns, now))
        return live

    return {
        "presence read (20 fields)": {
            "durastate": lambda: presence.read(presence_ns(r["durastate"].randrange(rooms))),
            "raw": raw_read,
        }
    }


@dataclass(frozen=True)
class Workload:
    name: str
    load: Callable[[Context], None]
    ops: Callable[[Context], Ops]


WORKLOADS = (
    Workload("kv", load_kv, kv_ops),
    Workload("queue", load_queue, queue_ops),
    Workload("documents", load_documents, documents_ops),
    Workload("events-one", load_events_one, events_one_ops),
    Workload("events-many", load_events_many, events_many_ops),
    Workload("records", load_records, records_ops),
    Workload("presence", load_presence, presence_ops),
)
