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
from durastate.errors import DurastateError, InvalidRequest

from .._common import redact
from .._format import decode_bytes, human_bytes, show_name
from ..inspect import facet_stats, health, table_stats
from ..revisions import change_summary, diff_lines, history_view
from . import actions, render
from .alerts import FLAG_LABELS, Thresholds, collect
from .guard import Guard, allowed_hosts

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

    def number(request: Request, name: str, default: int = 0) -> int:
        try:
            return int(request.query_params.get(name, default))
        except ValueError:
            return default

    def overview(request: Request) -> Response:
        lines, alerts, more_queues = collect(store, thresholds)
        live: dict[str, Any] = {
            "lines": lines,
            "alerts": alerts,
            "more_queues": more_queues,
            "limits": thresholds,
            "refresh": refresh,
            "refreshed": store.engine.now_ms(),
        }
        if request.headers.get("HX-Request") and request.query_params.get("part") == "live":
            # The polled part only: no table statistics, no health facts.
            return page(request, "overview_live.html", source="poll", **live)
        tables = table_stats(store, scan=False)  # no full-table reads for a page
        return page(
            request,
            "overview.html",
            health=health(store, check="none"),
            facets=facet_stats(tables),
            tables=tables,
            source="page",
            **live,
        )

    def kv(request: Request) -> Response:
        q = request.query_params
        after = q.get("after")
        scopes = store.kv.scopes(after=None if after is None else decode_bytes(after), limit=page_size)
        scope = q.get("scope")
        ns = q.get("ns")
        context: dict[str, Any] = {"scopes": scopes, "scope": scope, "ns": ns, "view": q.get("view", "auto")}
        context["next_scopes"] = show_name(scopes[-1]) if len(scopes) == page_size else None
        if scope is not None:
            ns_after = q.get("ns_after")
            spaces = store.kv.namespaces(
                decode_bytes(scope), after=None if ns_after is None else decode_bytes(ns_after), limit=page_size
            )
            context["namespaces"] = spaces
            context["next_ns"] = show_name(spaces[-1]) if len(spaces) == page_size else None
        if scope is not None and ns is not None:
            prefix = decode_bytes(q.get("prefix", ""))
            start = q.get("start")
            lo = decode_bytes(start) if start else (prefix or None)
            from ..browse import bytes_successor

            hi = bytes_successor(prefix) if prefix else None
            scope_b, ns_b = decode_bytes(scope), decode_bytes(ns)
            rows = list(store.kv.scan(scope_b, ns_b, start=lo, end=hi, limit=page_size + 1))
            context["rows"] = [(k, v[: render.PREVIEW + 1]) for k, v in rows[:page_size]]
            context["prefix"] = q.get("prefix", "")
            context["next_key"] = show_name(rows[page_size][0]) if len(rows) > page_size else None
            # Logs and counters live beside the values: a namespace may hold only those.
            logs_after, counters_after = q.get("logs_after"), q.get("counters_after")
            log_keys = store.kv.log_keys(
                scope_b, ns_b, after=None if logs_after is None else decode_bytes(logs_after), limit=page_size
            )
            context["log_keys"] = log_keys
            context["next_logs"] = show_name(log_keys[-1]) if len(log_keys) == page_size else None
            counters = store.kv.counters(
                scope_b, ns_b, after=None if counters_after is None else decode_bytes(counters_after), limit=page_size
            )
            context["counters"] = counters
            context["next_counters"] = show_name(counters[-1][0]) if len(counters) == page_size else None
            key = q.get("key")
            if key is not None:
                value = store.kv.get(scope_b, ns_b, decode_bytes(key))
                context["key"] = key
                context["value"] = None if value is None else render.value_view(value, context["view"])
            log = q.get("log")
            if log is not None:
                after_entry = number(request, "entry_after")
                entries = list(store.kv.log(scope_b, ns_b, decode_bytes(log), after=after_entry, limit=page_size + 1))
                context["log"] = log
                context["entries"] = [(n, v[: render.PREVIEW + 1], len(v)) for n, v in entries[:page_size]]
                context["next_entry"] = entries[page_size - 1][0] if len(entries) > page_size else None
        if request.headers.get("HX-Request") and q.get("part") == "tree":
            return page(request, "kv_tree.html", **context)
        return page(request, "kv.html", **context)

    def raw_kv(request: Request) -> Response:
        q = request.query_params
        address = (decode_bytes(q["scope"]), decode_bytes(q["ns"]), decode_bytes(q["key"]))
        if "entry" in q:  # one log entry, by its ordinal
            ordinal = number(request, "entry")
            found = list(store.kv.log(*address, after=ordinal - 1, limit=1))
            if not found or found[0][0] != ordinal:
                return PlainTextResponse("no such log entry\n", status_code=404)
            return raw(found[0][1], f"{q['key']}-{ordinal}")
        value = store.kv.get(*address)
        if value is None:
            return PlainTextResponse("no live value\n", status_code=404)
        return raw(value, q["key"])

    def raw_queue(request: Request) -> Response:
        name = decode_bytes(request.path_params["name"])
        ident = number(request, "id")
        if "cursor" in request.query_params:  # an item: the cursor just before it
            items = store.queues.peek(name, after=request.query_params["cursor"], limit=1)
            if items and items[0].id == ident:
                return raw(items[0].payload, f"item-{ident}")
        else:
            dead = store.queues.dead_letters(name, after=ident - 1, limit=1)
            if dead and dead[0].id == ident:
                return raw(dead[0].payload, f"dead-{ident}")
        return PlainTextResponse("no such item (taken or moved since)\n", status_code=404)

    def raw_document(request: Request) -> Response:
        found = store.documents.read_raw(request.path_params["key"])
        if found is None:
            return PlainTextResponse("no such document\n", status_code=404)
        return raw(found.payload, request.path_params["key"])

    def queues(request: Request) -> Response:
        after = request.query_params.get("after")
        names = store.queues.names(after=None if after is None else decode_bytes(after), limit=page_size)
        rows = [(n, store.queues.stats(n)) for n in names]
        return page(request, "queues.html", rows=rows, next=show_name(names[-1]) if len(names) == page_size else None)

    def queue(request: Request) -> Response:
        name = decode_bytes(request.path_params["name"])
        items = store.queues.peek(name, after=request.query_params.get("after"), limit=page_size)
        dead_after = number(request, "dead_after")
        dead = store.queues.dead_letters(name, after=dead_after, limit=page_size)
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
            done=request.query_params.get("done"),
        )

    def sessions(request: Request) -> Response:
        q = request.query_params
        listed = store.events.list_sessions(q.get("prefix", ""), limit=page_size, cursor=q.get("cursor") or None)
        return page(
            request, "sessions.html", sessions=listed.sessions, cursor=listed.cursor, prefix=q.get("prefix", "")
        )

    def session(request: Request) -> Response:
        session_id = request.path_params["session"]
        events = store.events.read_events(session_id, after_index=number(request, "after"), limit=page_size)
        return page(
            request,
            "session.html",
            session=session_id,
            events=events.events,
            snapshots=store.events.list_snapshots(session_id),
            now_ms=store.engine.now_ms(),
            next=events.events[-1].index if len(events.events) == page_size else None,
            done=request.query_params.get("done"),
        )

    def dead_events(request: Request) -> Response:
        q = request.query_params
        after = (q["after_session"], number(request, "after_index")) if "after_session" in q else None
        dead = store.events.dead_letters(after=after, limit=page_size)
        return page(
            request,
            "dead_events.html",
            dead=dead,
            next=(dead[-1].session_id, dead[-1].index) if len(dead) == page_size else None,
        )

    def documents(request: Request) -> Response:
        q = request.query_params
        listed = store.documents.list(q.get("prefix", ""), limit=page_size, cursor=q.get("cursor") or None)
        # One index probe per listed document (no payloads): how much history each has.
        recorded = {d.key: store.documents.describe_history(d.key) for d in listed.items}
        return page(
            request,
            "documents.html",
            items=listed.items,
            recorded=recorded,
            cursor=listed.cursor,
            prefix=q.get("prefix", ""),
        )

    def document(request: Request) -> Response:
        key = request.path_params["key"]
        stored = store.documents.read_raw(key)
        if stored is None:
            return page(request, "missing.html", what=f"document {key!r}", status=404)
        try:
            body = _pretty(orjson.loads(stored.payload))
        except orjson.JSONDecodeError:
            body = bytes(stored.payload).decode("utf-8", "backslashreplace")
        size = len(stored.payload)
        body = render.clip(body)
        before = number(request, "before") or None
        history = history_view(store.documents, key, limit=page_size, before=before)
        backups = [d for d in store.documents.list(key + ".bak", limit=page_size).items]
        return page(
            request,
            "document.html",
            key=key,
            revision=stored.revision,
            body=body,
            size=size,
            history=history,
            recorded=store.documents.describe_history(key),
            summary=change_summary,
            before=before,
            backups=backups,
        )

    def records(request: Request) -> Response:
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
        conv_id = int(request.path_params["id"])
        record = store.records.conversation(conv_id)
        if record is None:
            return page(request, "missing.html", what=f"conversation {conv_id}", status=404)
        after = request.query_params.get("after")
        cursor = None if after is None else {"after": int(after), "order": "descending"}
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
        doc_id = int(request.path_params["id"])
        revisions = store.records.document_revisions(doc_id)
        current = store.records.document(doc_id)
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
        after = request.query_params.get("after")
        names = store.presence.namespaces(after=after, limit=page_size)
        return page(request, "presence.html", names=names, next=names[-1] if len(names) == page_size else None)

    def presence_ns(request: Request) -> Response:
        ns = request.path_params["ns"]
        # The facet answers a namespace whole (presence is small by nature); the page shows a slice.
        entries = store.presence.peek(ns)
        start = max(0, number(request, "start"))
        shown = entries[start : start + page_size]
        more = start + page_size if start + page_size < len(entries) else None
        return page(request, "presence_ns.html", ns=ns, entries=shown, total=len(entries), next=more)

    def confirm(request: Request) -> Response:
        q = request.query_params
        action = actions.ACTIONS.get(q.get("action", ""))
        if action is None:
            return page(request, "missing.html", what=f"action {q.get('action')!r}", status=404)
        target, item = q.get("target", ""), q.get("id", "")
        count = actions.pending(store, action, target, actions.item_id(item))
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
            return PlainTextResponse("no such action\n", status_code=404)
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
        return templates.TemplateResponse(
            request, "missing.html", {"nav": "", "what": f"{type(exc).__name__}: {exc}"}, status_code=400
        )

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
        Route("/records/conversations/{id:int}", conversation),
        Route("/records/documents/{id:int}", record_document),
        Route("/presence", presence),
        Route("/presence/{ns:path}", presence_ns),
        Route("/raw/kv", raw_kv),
        Route("/raw/queues/{name:path}", raw_queue),
        Route("/raw/documents/{key:path}", raw_document),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    if allow_writes:  # without the flag these routes do not exist: a POST anywhere is 404 or 405
        routes[-1:-1] = [Route("/confirm", confirm), Route("/actions/{action}", act, methods=["POST"])]
    handlers = {DurastateError: error, ValueError: error, KeyError: error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, hosts=hosts, token=token)
