"""The inspector's routes (see the package docstring)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import durastate
from durastate.errors import DurastateError

from .._common import human_bytes, parse_bytes, redact, show_bytes
from ..inspect import facet_stats, health, table_stats
from ..revisions import change_summary, diff_lines, history_view
from .guard import Guard, allowed_hosts

HERE = Path(__file__).parent
MAX_TREE = 1000  # conversations read to draw the fork tree


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def render_bytes(value: bytes, view: str) -> str:
    if view == "hex":
        return " ".join(value[i : i + 16].hex(" ") for i in range(0, len(value), 16))
    if view == "json":
        try:
            return _pretty(orjson.loads(value))
        except orjson.JSONDecodeError:
            return "(not JSON)"
    return value.decode("utf-8", "backslashreplace")


def ms_time(ms: int | float | None) -> str:
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def create_app(
    store: durastate.Store,
    *,
    page_size: int = 50,
    bound: str = "127.0.0.1",
    allow_hosts: Iterable[str] = (),
    token: str | None = None,
) -> Guard:
    """The inspector over ``store`` (which the caller owns and closes), behind its ``Guard``.

    ``bound`` is the address the server listens on and ``allow_hosts`` the further ``Host`` names it
    answers (see ``guard.allowed_hosts``); with ``token``, every request must carry it (``guard.Guard``).
    """
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["b"] = show_bytes
    templates.env.filters["t"] = ms_time
    templates.env.filters["pretty"] = _pretty
    templates.env.filters["size"] = lambda n: "" if n is None else human_bytes(n)
    templates.env.globals["url"] = redact(store.url)

    def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        nav = template.split(".")[0]
        return templates.TemplateResponse(request, template, {"nav": nav, **context}, status_code=status)

    def number(request: Request, name: str, default: int = 0) -> int:
        try:
            return int(request.query_params.get(name, default))
        except ValueError:
            return default

    def overview(request: Request) -> Response:
        tables = table_stats(store, scan=False)  # no full-table reads for a page
        return page(
            request, "overview.html", health=health(store, check="none"), facets=facet_stats(tables), tables=tables
        )

    def kv(request: Request) -> Response:
        q = request.query_params
        after = q.get("after")
        scopes = store.kv.scopes(after=None if after is None else parse_bytes(after), limit=page_size)
        scope = q.get("scope")
        ns = q.get("ns")
        context: dict[str, Any] = {"scopes": scopes, "scope": scope, "ns": ns, "view": q.get("view", "text")}
        context["next_scopes"] = show_bytes(scopes[-1]) if len(scopes) == page_size else None
        if scope is not None:
            ns_after = q.get("ns_after")
            spaces = store.kv.namespaces(
                parse_bytes(scope), after=None if ns_after is None else parse_bytes(ns_after), limit=page_size
            )
            context["namespaces"] = spaces
            context["next_ns"] = show_bytes(spaces[-1]) if len(spaces) == page_size else None
        if scope is not None and ns is not None:
            prefix = parse_bytes(q.get("prefix", ""))
            start = q.get("start")
            lo = parse_bytes(start) if start else (prefix or None)
            from ..browse import bytes_successor

            hi = bytes_successor(prefix) if prefix else None
            rows = list(store.kv.scan(parse_bytes(scope), parse_bytes(ns), start=lo, end=hi, limit=page_size + 1))
            context["rows"] = [(k, v[:120]) for k, v in rows[:page_size]]
            context["prefix"] = q.get("prefix", "")
            context["next_key"] = show_bytes(rows[page_size][0]) if len(rows) > page_size else None
            key = q.get("key")
            if key is not None:
                value = store.kv.get(parse_bytes(scope), parse_bytes(ns), parse_bytes(key))
                context["key"] = key
                context["value"] = None if value is None else render_bytes(value, context["view"])
                context["value_size"] = None if value is None else len(value)
        if request.headers.get("HX-Request") and q.get("part") == "tree":
            return page(request, "kv_tree.html", **context)
        return page(request, "kv.html", **context)

    def queues(request: Request) -> Response:
        after = request.query_params.get("after")
        names = store.queues.names(after=None if after is None else parse_bytes(after), limit=page_size)
        rows = [(n, store.queues.stats(n)) for n in names]
        return page(request, "queues.html", rows=rows, next=show_bytes(names[-1]) if len(names) == page_size else None)

    def queue(request: Request) -> Response:
        name = parse_bytes(request.path_params["name"])
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
            render=render_bytes,
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
        raw = store.documents.read_raw(key)
        if raw is None:
            return page(request, "missing.html", what=f"document {key!r}", status=404)
        try:
            body = _pretty(orjson.loads(raw.payload))
        except orjson.JSONDecodeError:
            body = bytes(raw.payload).decode("utf-8", "backslashreplace")
        before = number(request, "before") or None
        history = history_view(store.documents, key, limit=page_size, before=before)
        backups = [d for d in store.documents.list(key + ".bak", limit=page_size).items]
        return page(
            request,
            "document.html",
            key=key,
            revision=raw.revision,
            body=body,
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
        Route("/documents", documents),
        Route("/documents/{key:path}", document),
        Route("/records", records),
        Route("/records/conversations/{id:int}", conversation),
        Route("/records/documents/{id:int}", record_document),
        Route("/presence", presence),
        Route("/presence/{ns:path}", presence_ns),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={DurastateError: error, ValueError: error})
    return Guard(app, hosts=allowed_hosts(bound, allow_hosts), token=token)
