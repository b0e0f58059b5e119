"""The inspector's routes (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import durastate
from durastate.errors import DurastateError, InvalidRequest, NotFound
from durastate.records.inputs import MAX_SAFE_INTEGER

from .._common import redact
from .._format import fact_text, human_bytes, show_name
from ..browse import bytes_successor
from ..browse._documents import _is_backup_of
from ..browse._events import _session_exists
from ..checks import named
from ..inspect import facet_stats, health, table_stats
from ..revisions import change_summary, diff_lines, history_view
from . import actions, render
from .alerts import FLAG_LABELS, Thresholds, collect
from .guard import Guard, allowed_hosts
from .params import BadParameter, Params

HERE = Path(__file__).parent
MAX_TREE = 1000  # conversations read to draw the fork tree


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def raw(value: bytes, name: str) -> Response:
    """The whole of a stored value as a download, never drawn by the browser."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "value"
    return Response(
        bytes(value),
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{safe}.bin"'},
    )


def _check_options(page_size: Any, thresholds: Any, refresh: Any, allow_writes: Any) -> None:
    """Refuse options no inspector can run with (``InvalidRequest``), before anything is built."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 10_000:
        raise InvalidRequest(f"page_size must be an int from 1 to 10000, got {page_size!r}")
    if not isinstance(thresholds, Thresholds):
        raise InvalidRequest(f"thresholds must be an alerts.Thresholds, got {type(thresholds).__name__}")
    if not (isinstance(thresholds.stale_after, (int, float)) and thresholds.stale_after > 0):
        raise InvalidRequest(f"stale_after must be a number of seconds > 0, got {thresholds.stale_after!r}")
    if (
        isinstance(thresholds.backlog_over, bool)
        or not isinstance(thresholds.backlog_over, int)
        or thresholds.backlog_over < 0
    ):
        raise InvalidRequest(f"backlog_over must be an int >= 0, got {thresholds.backlog_over!r}")
    if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or not 0 <= refresh <= 86_400:
        raise InvalidRequest(f"refresh must be seconds from 0 (off) to 86400, got {refresh!r}")
    if not isinstance(allow_writes, bool):
        raise InvalidRequest(f"allow_writes must be True or False, got {allow_writes!r}")


def create_app(
    store: durastate.Store,
    *,
    page_size: int = 50,
    bound: str = "127.0.0.1",
    allow_hosts: Iterable[str] = (),
    token: str | None = None,
    allow_writes: bool = False,
    thresholds: Thresholds = Thresholds(),
    refresh: float = 5.0,
) -> Guard:
    """The inspector over ``store`` (which the caller owns and closes), behind its ``Guard``.

    ``bound`` is the address the server listens on and ``allow_hosts`` the further ``Host`` names it
    answers (see ``guard.allowed_hosts``); with ``token``, every request must carry it (``guard.Guard``).
    ``allow_writes`` adds the dead-letter actions (``actions``; the caller opens ``store`` writable for
    them, read-only otherwise); ``thresholds`` are what the overview flags (``alerts``); ``refresh``:
    seconds between the overview's refreshes (0: none).
    """
    _check_options(page_size, thresholds, refresh, allow_writes)
    hosts = allowed_hosts(bound, allow_hosts)
    csrf = actions.Csrf(token)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    env = templates.env
    env.finalize = render.scrub  # set before any template compiles: every {{ }} passes through it
    env.filters["b"] = show_name
    env.filters["t"] = render.when
    env.filters["ts"] = render.when_s
    env.filters["age"] = render.age
    env.filters["pretty"] = _pretty
    env.filters["jsontext"] = render.json_text
    env.filters["preview"] = render.preview
    env.filters["clip"] = render.clip
    env.filters["size"] = lambda n: "" if n is None else human_bytes(n)
    env.filters["q"] = lambda text: quote(text, safe="")
    env.globals["url"] = redact(store.url)
    env.globals["writes"] = allow_writes
    env.globals["flag_labels"] = FLAG_LABELS

    def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        nav = template.split(".")[0]
        return templates.TemplateResponse(request, template, {"nav": nav, **context}, status_code=status)

    def not_found(request: Request, what: str) -> Response:
        return page(request, "error.html", status=404, heading="Not found", what=what)

    def overview(request: Request) -> Response:
        q = Params(request, "part")
        lines, alerts, more_queues = collect(store, thresholds)
        live: dict[str, Any] = {
            "lines": lines,
            "alerts": alerts,
            "more_queues": more_queues,
            "limits": thresholds,
            "refresh": refresh,
            "refreshed": store.engine.now_ms(),
        }
        if request.headers.get("HX-Request") and q.text("part") == "live":
            # The polled part only: no table statistics, no health facts.
            return page(request, "overview_live.html", source="poll", **live)
        tables = table_stats(store, scan=False)  # no full-table reads for a page
        h = health(store, check="none")
        return page(
            request,
            "overview.html",
            health=h,
            facts={key: fact_text(key, value) for key, value in named(h.facts).items()},  # as `durastate info`
            facets=facet_stats(tables),
            tables=tables,
            source="page",
            **live,
        )

    def kv(request: Request) -> Response:
        q = Params(
            request,
            *("after", "scope", "ns", "view", "ns_after", "prefix", "start"),
            *("logs_after", "counters_after", "key", "log", "entry_after", "part"),
        )
        view = q.choice("view", ("auto", "text", "hex", "json"), "auto")
        scope_b, ns_b = q.name("scope"), q.name("ns")
        scope, ns = q.text("scope"), q.text("ns")
        scopes = store.kv.scopes(after=q.name("after"), limit=page_size)
        context: dict[str, Any] = {"scopes": scopes, "scope": scope, "ns": ns, "view": view}
        context["next_scopes"] = show_name(scopes[-1]) if len(scopes) == page_size else None
        missing = None  # the first thing asked for that is not there: the page says so, answered 404
        if scope_b is not None:
            spaces = store.kv.namespaces(scope_b, after=q.name("ns_after"), limit=page_size)
            context["namespaces"] = spaces
            context["next_ns"] = show_name(spaces[-1]) if len(spaces) == page_size else None
            if not spaces and not (q.has("ns_after") and store.kv.namespaces(scope_b, limit=1)):
                missing = f"kv scope {scope!r} holds nothing"
        if scope_b is not None and ns_b is not None:
            prefix = q.name("prefix") or b""
            start = q.name("start")
            lo = start if start else (prefix or None)
            hi = bytes_successor(prefix) if prefix else None
            rows = list(store.kv.scan(scope_b, ns_b, start=lo, end=hi, limit=page_size + 1))
            context["rows"] = [(k, v[: render.PREVIEW + 1]) for k, v in rows[:page_size]]
            context["prefix"] = q.text("prefix", "")
            context["next_key"] = show_name(rows[page_size][0]) if len(rows) > page_size else None
            # Logs and counters live beside the values: a namespace may hold only those.
            log_keys = store.kv.log_keys(scope_b, ns_b, after=q.name("logs_after"), limit=page_size)
            context["log_keys"] = log_keys
            context["next_logs"] = show_name(log_keys[-1]) if len(log_keys) == page_size else None
            counters = store.kv.counters(scope_b, ns_b, after=q.name("counters_after"), limit=page_size)
            context["counters"] = counters
            context["next_counters"] = show_name(counters[-1][0]) if len(counters) == page_size else None
            paged = any(q.has(name) for name in ("prefix", "start", "logs_after", "counters_after"))
            if missing is None and not (rows or log_keys or counters or paged):
                missing = f"kv namespace {ns!r} of scope {scope!r} holds nothing"
            key = q.name("key")
            if key is not None:
                value = store.kv.get(scope_b, ns_b, key)
                context["key"] = q.text("key")
                context["value"] = None if value is None else render.value_view(value, view)
                if missing is None and value is None:
                    missing = f"no live value at kv key {q.text('key')!r}"
            log = q.name("log")
            if log is not None:
                after_entry = q.integer("entry_after", low=0)
                entries = list(store.kv.log(scope_b, ns_b, log, after=after_entry or 0, limit=page_size + 1))
                context["log"] = q.text("log")
                context["entries"] = [(n, v[: render.PREVIEW + 1], len(v)) for n, v in entries[:page_size]]
                context["next_entry"] = entries[page_size - 1][0] if len(entries) > page_size else None
                past_end = after_entry and list(store.kv.log(scope_b, ns_b, log, limit=1))
                if missing is None and not entries and not past_end:
                    missing = f"no kv log {q.text('log')!r}"
        context["missing"] = missing
        status = 200 if missing is None else 404
        if request.headers.get("HX-Request") and q.text("part") == "tree":
            return page(request, "kv_tree.html", status=status, **context)
        return page(request, "kv.html", status=status, **context)

    def raw_kv(request: Request) -> Response:
        q = Params(request, "scope", "ns", "key", "entry")
        address = (q.required_name("scope"), q.required_name("ns"), q.required_name("key"))
        key = q.required_text("key")
        ordinal = q.integer("entry", low=1)
        if ordinal is not None:  # one log entry, by its ordinal
            found = list(store.kv.log(*address, after=ordinal - 1, limit=1))
            if not found or found[0][0] != ordinal:
                return not_found(request, f"no entry {ordinal} in kv log {key!r}")
            return raw(found[0][1], f"{key}-{ordinal}")
        value = store.kv.get(*address)
        if value is None:
            return not_found(request, f"no live value at kv key {key!r}")
        return raw(value, key)

    def raw_queue(request: Request) -> Response:
        q = Params(request, "id", "cursor")
        name = q.required_name("name")
        ident = q.required_integer("id", low=1)
        cursor = q.text("cursor")
        if cursor is not None:  # an item: the cursor just before it
            try:
                items = store.queues.peek(name, after=cursor, limit=1)
            except InvalidRequest as exc:
                raise BadParameter("cursor", str(exc)) from None
            if items and items[0].id == ident:
                return raw(items[0].payload, f"item-{ident}")
        else:
            dead = store.queues.dead_letters(name, after=ident - 1, limit=1)
            if dead and dead[0].id == ident:
                return raw(dead[0].payload, f"dead-{ident}")
        return not_found(request, f"no item {ident} in queue {q.text('name')!r} (taken or moved since?)")

    def raw_document(request: Request) -> Response:
        key = Params(request).required_text("key")
        found = store.documents.read_raw(key)
        if found is None:
            return not_found(request, f"no document {key!r}")
        return raw(found.payload, key)

    def queues(request: Request) -> Response:
        q = Params(request, "after")
        names = store.queues.names(after=q.name("after"), limit=page_size)
        rows = [(n, store.queues.stats(n)) for n in names]
        return page(request, "queues.html", rows=rows, next=show_name(names[-1]) if len(names) == page_size else None)

    def queue(request: Request) -> Response:
        q = Params(request, "after", "dead_after", "done")
        name = q.required_name("name")
        items = store.queues.peek(name, after=q.text("after"), limit=page_size)
        dead = store.queues.dead_letters(name, after=q.integer("dead_after", low=0) or 0, limit=page_size)
        return page(
            request,
            "queue.html",
            name=name,
            stats=store.queues.stats(name),
            items=items,
            dead=dead,
            now_ms=store.engine.now_ms(),
            next=items[-1].cursor if len(items) == page_size else None,
            next_dead=dead[-1].id if len(dead) == page_size else None,
            done=q.text("done"),
        )

    def sessions(request: Request) -> Response:
        q = Params(request, "prefix", "cursor")
        prefix = q.text("prefix", "") or ""
        listed = store.events.list_sessions(prefix, limit=page_size, cursor=q.text("cursor") or None)
        return page(request, "sessions.html", sessions=listed.sessions, cursor=listed.cursor, prefix=prefix)

    def session(request: Request) -> Response:
        q = Params(request, "after", "done")
        session_id = q.required_text("session")
        after = q.integer("after", low=0)
        events = store.events.read_events(session_id, after_index=after or 0, limit=page_size)
        # An empty page is past the end of a session, or of none (one more probe, on empty pages only).
        if not events.events and not _session_exists(store, session_id):
            return not_found(request, f"no event session {session_id!r}")
        return page(
            request,
            "session.html",
            session=session_id,
            events=events.events,
            snapshots=store.events.list_snapshots(session_id),
            now_ms=store.engine.now_ms(),
            next=events.events[-1].index if len(events.events) == page_size else None,
            done=q.text("done"),
        )

    def dead_events(request: Request) -> Response:
        q = Params(request, "after_session", "after_index")
        after_session, after_index = q.text("after_session"), q.integer("after_index", low=0)
        if after_session is None and after_index is not None:
            raise BadParameter("after_index", "is a position within after_session, which is missing")
        after = None if after_session is None else (after_session, after_index or 0)
        dead = store.events.dead_letters(after=after, limit=page_size)
        return page(
            request,
            "dead_events.html",
            dead=dead,
            next=(dead[-1].session_id, dead[-1].index) if len(dead) == page_size else None,
        )

    def documents(request: Request) -> Response:
        q = Params(request, "prefix", "cursor")
        prefix = q.text("prefix", "") or ""
        listed = store.documents.list(prefix, limit=page_size, cursor=q.text("cursor") or None)
        # One index probe per listed document (no payloads): how much history each has.
        recorded = {d.key: store.documents.describe_history(d.key) for d in listed.items}
        return page(
            request, "documents.html", items=listed.items, recorded=recorded, cursor=listed.cursor, prefix=prefix
        )

    def document(request: Request) -> Response:
        q = Params(request, "before")
        key = q.required_text("key")
        before = q.integer("before", low=1)
        # What `durastate docs history` shows: the document, its recorded revisions, the backups clear() made;
        # a key with any of them has a page (a cleared document has only its backups).
        stored = store.documents.read_raw(key)
        recorded = store.documents.describe_history(key)
        backups = [d for d in store.documents.list(key + ".bak", limit=page_size).items if _is_backup_of(d.key, key)]
        if stored is None and not recorded.recorded and not backups:
            return not_found(request, f"no document {key!r} (nor recorded revisions or backups of one)")
        body = size = revision = None
        if stored is not None:
            try:
                body = _pretty(orjson.loads(stored.payload))
            except orjson.JSONDecodeError:
                body = bytes(stored.payload).decode("utf-8", "backslashreplace")
            body = render.clip(body)
            size, revision = len(stored.payload), stored.revision
        return page(
            request,
            "document.html",
            key=key,
            revision=revision,
            body=body,
            size=size,
            history=history_view(store.documents, key, limit=page_size, before=before),
            recorded=recorded,
            summary=change_summary,
            before=before,
            backups=backups,
        )

    def records(request: Request) -> Response:
        Params(request)  # takes no parameters: refuses any
        convs: list[dict[str, Any]] = []
        cursor = None
        while len(convs) < MAX_TREE:
            scanned = store.records.scan_conversations({}, min(500, MAX_TREE - len(convs)), cursor)
            convs += scanned["items"]
            cursor = scanned.get("next")
            if cursor is None:
                break
        children: dict[int | None, list[dict[str, Any]]] = {}
        ids = {c["id"] for c in convs}
        for c in convs:
            parent = (c.get("parent") or {}).get("conversationId")
            children.setdefault(parent if parent in ids else None, []).append(c)
        return page(request, "records.html", children=children, count=len(convs), truncated=cursor is not None)

    def conversation(request: Request) -> Response:
        q = Params(request, "after")
        conv_id = q.required_integer("id", low=0, high=MAX_SAFE_INTEGER)
        after = q.integer("after", low=0, high=MAX_SAFE_INTEGER)
        record = store.records.conversation(conv_id)
        if record is None:
            return not_found(request, f"no conversation {conv_id}")
        cursor = None if after is None else {"after": after, "order": "descending"}
        entries = store.records.scan_entries({"conversationId": conv_id}, page_size, cursor)
        docs = store.records.scan_documents(
            {"scope": {"kind": "conversation", "conversationId": conv_id}, "at": "current"}, page_size
        )
        nxt = entries.get("next")
        return page(
            request,
            "conversation.html",
            record=record,
            conv_id=conv_id,
            entries=entries["items"],
            documents=docs["items"],
            next=None if nxt is None else nxt["after"],
        )

    def record_document(request: Request) -> Response:
        doc_id = Params(request).required_integer("id", low=0, high=MAX_SAFE_INTEGER)
        revisions = store.records.document_revisions(doc_id)
        current = store.records.document(doc_id)
        if current is None and not revisions:
            return not_found(request, f"no records document {doc_id}")
        versions = []
        previous = ""
        for rev in revisions[-page_size:]:
            try:
                state = store.records.document(doc_id, rev["seq"])
            except DurastateError:
                state = None  # current-only documents keep no history
            text = "" if state is None else _pretty(state["value"])
            diff = "\n".join(diff_lines(previous, text, "before", f"seq {rev['seq']}"))
            versions.append({**rev, "value": text, "diff": diff})
            previous = text
        return page(request, "record_document.html", doc_id=doc_id, current=current, versions=versions)

    def presence(request: Request) -> Response:
        q = Params(request, "after")
        names = store.presence.namespaces(after=q.text("after"), limit=page_size)
        return page(request, "presence.html", names=names, next=names[-1] if len(names) == page_size else None)

    def presence_ns(request: Request) -> Response:
        q = Params(request, "start")
        ns = q.required_text("ns")
        start = q.integer("start", low=0) or 0
        # The facet answers a namespace whole (presence is small by nature); the page shows a slice.
        entries = store.presence.peek(ns)
        shown = entries[start : start + page_size]
        more = start + page_size if start + page_size < len(entries) else None
        return page(request, "presence_ns.html", ns=ns, entries=shown, total=len(entries), next=more)

    def confirm(request: Request) -> Response:
        q = Params(request, "action", "target", "id")
        action = actions.ACTIONS.get(q.required_text("action"))
        if action is None:
            return not_found(request, f"no action {q.text('action')!r}")
        target = q.required_text("target")
        ident = q.integer("id", low=1)
        item = "" if ident is None else str(ident)
        count = actions.pending(store, action, target, ident)
        return page(
            request,
            "confirm.html",
            action=action,
            target=target,
            item=item,
            count=count,
            csrf=csrf.issue(action.name, target, item),
            back=actions.back_to(action, target),
        )

    async def act(request: Request) -> Response:
        action = actions.ACTIONS.get(request.path_params["action"])
        if action is None:
            return not_found(request, "no such action")
        headers = {k.lower(): v for k, v in request.headers.items()}
        why = actions.same_origin(headers, hosts)
        if why is not None:
            return PlainTextResponse(f"refused: a cross-site request ({why}); nothing was done\n", status_code=403)
        form = actions.parse_form(await request.body())
        target, item = form.get("target", ""), form.get("id", "")
        if not csrf.valid(form.get("csrf", ""), action.name, target, item):
            return PlainTextResponse("refused: missing or wrong CSRF token; nothing was done\n", status_code=403)
        done = actions.run(store, action, target, actions.item_id(item))
        verb = "purged" if action.danger else "redrove"
        return RedirectResponse(f"{actions.back_to(action, target)}?done={quote(f'{verb} {done}')}", status_code=303)

    async def error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, NotFound):  # a facet's "not there" (a pruned revision): the item, not the request
            return page(request, "error.html", status=404, heading="Not found", what=str(exc))
        what = str(exc) if isinstance(exc, BadParameter) else f"{type(exc).__name__}: {exc}"
        return page(request, "error.html", status=400, heading="Bad request", what=what)

    routes = [
        Route("/", overview),
        Route("/kv", kv),
        Route("/queues", queues),
        Route("/queues/{name:path}", queue),
        Route("/events", sessions),
        Route("/events/{session:path}", session),
        Route("/dead-letters/events", dead_events),
        Route("/documents", documents),
        Route("/documents/{key:path}", document),
        Route("/records", records),
        Route("/records/conversations/{id}", conversation),
        Route("/records/documents/{id}", record_document),
        Route("/presence", presence),
        Route("/presence/{ns:path}", presence_ns),
        Route("/raw/kv", raw_kv),
        Route("/raw/queues/{name:path}", raw_queue),
        Route("/raw/documents/{key:path}", raw_document),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    if allow_writes:  # without the flag these routes do not exist: a POST anywhere is 404 or 405
        routes[-1:-1] = [Route("/confirm", confirm), Route("/actions/{action}", act, methods=["POST"])]
    handlers = {BadParameter: error, DurastateError: error, ValueError: error, KeyError: error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, hosts=hosts, token=token)
